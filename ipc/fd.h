// Owning file descriptor. Every fd sbsh opens is close-on-exec from birth; the few that a
// child must inherit are dup2'ed into place before exec (daemon/child_process.cpp,
// wrapper/spawn.cpp).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <string_view>
#include <utility>

namespace sbsh {

class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  unique_fd(unique_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  ~unique_fd() { reset(); }

  [[nodiscard]] int get() const { return fd_; }
  [[nodiscard]] bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  [[nodiscard]] int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Makes `fd` non-blocking, keeping its other status flags; false (errno set) if it cannot.
inline bool set_nonblocking(int fd) {
  int fl = ::fcntl(fd, F_GETFL);
  return fl >= 0 && ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

// Writes all of `data` to `fd`, waiting while a non-blocking `fd` is full; 0, or the errno
// of the write that failed (EPIPE once the reader is gone).
int write_all(int fd, std::string_view data);

}  // namespace sbsh
