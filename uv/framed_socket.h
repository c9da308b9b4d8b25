// A framed, non-blocking unix stream socket on the libuv loop: the daemon's side of every
// client connection and of every wrapper's control socketpair.
//
// Writes go out at once when nothing is queued (the common case, so a reply costs one
// sendmsg and no loop iteration); otherwise they queue and the socket is polled for
// writability. queued_bytes() lets callers apply backpressure.
//
// Reads go into a buffer that exists only while a read is being handled; whole frames are
// cut from it in place, and only a frame still incomplete is kept (ipc::frame_reader). So a
// connection holds memory only for what its peer actually sent and we have not taken, plus
// its queued replies: held(). Connections may share a memory_account that adds up what they
// all hold, and stop reading while it is over its limit.
#pragma once

#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ipc/bounds.h"
#include "ipc/fd.h"
#include "ipc/socket_io.h"
#include "uv/handles.h"

namespace sbsh::uv {

// Bytes held for a group of peers (frames partly received, replies queued), against a limit.
// The owner learns when an increase takes it past the limit, and decides what to drop.
class memory_account {
 public:
  memory_account(size_t limit, std::function<void()> on_over) : limit_(limit), on_over_(std::move(on_over)) {}
  void change(size_t before, size_t after) {
    used_ = used_ - before + after;
    if (after > before && used_ > limit_ && on_over_) on_over_();
  }
  [[nodiscard]] bool over() const { return used_ > limit_; }
  [[nodiscard]] size_t used() const { return used_; }
  [[nodiscard]] size_t limit() const { return limit_; }

 private:
  size_t used_ = 0;
  size_t limit_;
  std::function<void()> on_over_;
};

// Connections being closed after a last frame (an error saying why): each is given
// ipc::kFarewellMs to take it, then closed whatever it has read.
class farewells {
 public:
  farewells(uv_loop_t* loop, memory_account* account) : loop_(loop), account_(account) {}
  ~farewells() { close_all(); }
  farewells(const farewells&) = delete;
  farewells& operator=(const farewells&) = delete;
  // Writes `bytes` to `fd` (at once if it can), then closes it.
  void add(unique_fd fd, std::string bytes);
  void close_all();
  [[nodiscard]] size_t size() const { return list_.size(); }

 private:
  struct entry {
    unique_fd fd;
    std::string bytes;
    size_t off = 0;
    handle_ptr<fd_watch> watch;  // closed before the descriptor (declared after it)
    handle_ptr<timer> deadline;
  };
  // Writes what it can; true when the entry is finished (all written, or the peer is gone).
  static bool write_some(entry& e);
  void finish(std::list<entry>::iterator it);
  uv_loop_t* loop_;
  memory_account* account_;
  std::list<entry> list_;
};

class framed_socket {
 public:
  struct callbacks {
    std::function<void(ipc::envelope&&)> on_message;
    // Called once when the connection ends: peer closed, I/O error, or a corrupt frame
    // (reason says which). The object is still valid; the owner deletes it afterwards.
    std::function<void(const std::string& reason)> on_closed;
  };

  // read_chunk: bytes read per recvmsg. account: shared with the peers this one's memory is
  // counted with (none: wrappers' sockets). budget: what decoding one of the peer's frames
  // may cost.
  framed_socket(uv_loop_t* loop, unique_fd fd, callbacks cbs, size_t read_chunk = size_t{64} * 1024,
                memory_account* account = nullptr, ipc::decode_budget budget = ipc::kRequestDecode);
  ~framed_socket();
  framed_socket(const framed_socket&) = delete;
  framed_socket& operator=(const framed_socket&) = delete;

  void send(std::string frame, std::vector<unique_fd> fds = {});
  void send(std::string_view frame) { send(std::string(frame)); }
  [[nodiscard]] size_t queued_bytes() const { return queued_bytes_; }
  // Memory held for the peer: frames partly received and replies queued.
  [[nodiscard]] size_t held() const { return reader_.held() + queued_bytes_; }
  // Stops reading from the peer (backpressure on its input) or resumes it.
  void pause_reading(bool paused);
  [[nodiscard]] bool is_open() const { return fd_.valid(); }
  [[nodiscard]] int fd() const { return fd_.get(); }
  // Delivers now what the peer has already sent, as the loop would on a later turn. The
  // callbacks may delete this object.
  void read_pending() {
    if (!closed_ && !paused_) read_some();
  }
  // Ends the connection with a last frame: queued frames not yet begun are dropped, `frame`
  // follows the one being written, if any, and on_closed is called with `reason`. Returns
  // the descriptor and what is left to write, for a `farewells` to finish (nothing if the
  // connection had ended already).
  struct last_words {
    unique_fd fd;
    std::string bytes;
  };
  last_words end_with(const std::string& frame, const std::string& reason);
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
  // Tells the account how much this connection holds now.
  void recount();

  struct pending {
    std::string bytes;
    std::vector<unique_fd> fds;
    size_t off = 0;
  };
  uv_loop_t* loop_;
  unique_fd fd_;
  handle_ptr<fd_watch> watch_;
  callbacks cbs_;
  ipc::frame_reader reader_;
  std::deque<unique_fd> fds_in_;
  std::deque<pending> out_;
  size_t queued_bytes_ = 0;
  size_t read_chunk_;
  memory_account* account_;
  size_t counted_ = 0;  // what the account was last told
  ipc::decode_budget budget_;
  bool paused_ = false;
  bool closed_ = false;
  // Cleared by the destructor, so a callback that deleted this object is noticed.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace sbsh::uv
