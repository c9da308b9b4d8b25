// The state directory's lock; see state_lock.h.
#include "daemon/state_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "common/clock.h"
#include "ipc/protocol.h"

namespace sbsh::daemon {

namespace {

// The file: the holder's pid, "serving" or "stopping", and its socket, one per line.
struct holder {
  long pid = 0;
  bool stopping = false;
  std::string socket;
};

holder read_holder(int fd) {
  std::string text;
  char buf[4096];
  ssize_t n;
  off_t at = 0;
  while (text.size() < 65536 && (n = ::pread(fd, buf, sizeof buf, at)) > 0) {
    text.append(buf, static_cast<size_t>(n));
    at += n;
  }
  holder h;
  size_t a = text.find('\n');
  size_t b = a == std::string::npos ? a : text.find('\n', a + 1);
  if (b == std::string::npos) return h;  // not written yet, or being rewritten
  h.pid = std::strtol(text.c_str(), nullptr, 10);
  h.stopping = text.compare(a + 1, b - a - 1, "stopping") == 0;
  h.socket = text.substr(b + 1);
  if (!h.socket.empty() && h.socket.back() == '\n') h.socket.pop_back();
  return h;
}

}  // namespace

void write_state_lock(int fd, const std::string& socket, bool stopping) {
  std::string text = fmt::format("{}\n{}\n{}\n", ::getpid(), stopping ? "stopping" : "serving", socket);
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    // Only the message of a refused sbshd is poorer for it.
  }
}

result<unique_fd> lock_state_dir(const std::string& state_dir, const std::string& socket) {
  std::string path = state_dir + "/sbshd.lock";
  unique_fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return make_error(ipc::errc::io, fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  const uint64_t give_up = mono_us() + 5'000'000;
  for (;;) {
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return fd;
    if (errno != EWOULDBLOCK && errno != EINTR)
      return make_error(ipc::errc::io, fmt::format("cannot lock {}: {}", path, std::strerror(errno)));
    holder h = read_holder(fd.get());
    // One that is stopping lets go within moments (it ends its sessions first); so does one
    // that has just taken the lock and not yet said who it is.
    bool soon = h.pid == 0 || h.stopping || h.socket == socket;
    if (!soon || mono_us() >= give_up) {
      std::string who = h.pid == 0 ? std::string("another sbshd")
                                   : fmt::format("another sbshd (pid {}, socket {})", h.pid, h.socket);
      return make_error(ipc::errc::already_running,
                        fmt::format("{} {} the state directory {}; stop it with 'sbsh --socket {} shutdown', or give "
                                    "this one a state directory of its own with --state-dir or SBSH_STATE_DIR",
                                    who, h.stopping ? "is still stopping and holds" : "already uses", state_dir,
                                    h.socket.empty() ? std::string("SOCKET") : h.socket));
    }
    ::usleep(20'000);
  }
}

}  // namespace sbsh::daemon
