// A framed, non-blocking unix stream socket on the libuv loop: the daemon's side of every
// client connection and of every wrapper's control socketpair.
//
// Writes go out at once when nothing is queued (the common case, so a reply costs one
// sendmsg and no loop iteration); otherwise they queue and the socket is polled for
// writability. queued_bytes() lets callers apply backpressure.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "daemon/uv_handles.h"
#include "ipc/fd.h"
#include "ipc/socket_io.h"

namespace sbsh::daemon {

class framed_socket {
 public:
  struct callbacks {
    std::function<void(ipc::envelope&&)> on_message;
    // Called once when the connection ends: peer closed, I/O error, or a corrupt frame
    // (reason says which). The object is still valid; the owner deletes it afterwards.
    std::function<void(const std::string& reason)> on_closed;
  };

  // read_chunk: bytes read per recvmsg; the buffer starts that large and grows only for
  // frames that need it (a wrapper's control socket needs little, a client's more).
  framed_socket(uv_loop_t* loop, unique_fd fd, callbacks cbs, size_t read_chunk = 64 * 1024);
  ~framed_socket();
  framed_socket(const framed_socket&) = delete;
  framed_socket& operator=(const framed_socket&) = delete;

  void send(std::string frame, std::vector<unique_fd> fds = {});
  void send(std::string_view frame) { send(std::string(frame)); }
  [[nodiscard]] size_t queued_bytes() const { return queued_bytes_; }
  // Stops reading from the peer (backpressure on its input) or resumes it.
  void pause_reading(bool paused);
  [[nodiscard]] bool is_open() const { return fd_.valid(); }
  [[nodiscard]] int fd() const { return fd_.get(); }
  // Delivers now what the peer has already sent, as the loop would on a later turn. The
  // callbacks may delete this object.
  void read_pending() {
    if (!closed_ && !paused_) read_some();
  }
  // Called whenever the write queue becomes empty.
  std::function<void()> on_drained;

 private:
  void on_poll(int status, int events);
  bool flush(bool from_loop);
  void read_some();
  void fail(const std::string& reason);
  // fail() for an error the peer's going away may explain: first delivers what it sent.
  void fail_after_reading(const std::string& reason);
  void send_error_and_close(const error& e);
  void update_events();

  struct pending {
    std::string bytes;
    std::vector<unique_fd> fds;
    size_t off = 0;
  };
  uv_loop_t* loop_;
  unique_fd fd_;
  fd_watch* watch_ = nullptr;
  callbacks cbs_;
  ipc::frame_reader reader_;
  std::deque<unique_fd> fds_in_;
  std::deque<pending> out_;
  size_t queued_bytes_ = 0;
  size_t read_chunk_;
  bool paused_ = false;
  bool dispatching_ = false;
  bool closed_ = false;
  // Cleared by the destructor, so a callback that deleted this object is noticed.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace sbsh::daemon
