// Framed non-blocking socket; see framed_socket.h.
#include "daemon/framed_socket.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "ipc/frame.h"
#include "ipc/messages.h"

namespace sbsh::daemon {

namespace {
// Bytes read from one peer per loop iteration, so that one busy peer cannot starve others.
constexpr size_t kReadBudget = 1u << 20;
}  // namespace

framed_socket::framed_socket(uv_loop_t* loop, unique_fd fd, callbacks cbs, size_t read_chunk)
    : loop_(loop), fd_(std::move(fd)), cbs_(std::move(cbs)), read_chunk_(read_chunk) {
  int fl = ::fcntl(fd_.get(), F_GETFL);
  ::fcntl(fd_.get(), F_SETFL, fl | O_NONBLOCK);
  watch_ = fd_watch::create(loop_, fd_.get());
  watch_->start(UV_READABLE | UV_DISCONNECT, [this](int st, int ev) { on_poll(st, ev); });
}

framed_socket::~framed_socket() {
  *alive_ = false;
  if (watch_ != nullptr) watch_->close();
  fd_.reset();
}

void framed_socket::update_events() {
  if (watch_ == nullptr || closed_) return;
  int ev = UV_DISCONNECT;
  if (!paused_) ev |= UV_READABLE;
  if (!out_.empty()) ev |= UV_WRITABLE;
  watch_->set_events(ev);
}

void framed_socket::pause_reading(bool paused) {
  if (paused_ == paused) return;
  paused_ = paused;
  update_events();
  // Frames may already sit in the buffer; deliver them on the next readable event, or now.
  if (!paused_ && reader_.buffered() > 0 && !closed_) read_some();
}

void framed_socket::send(std::string frame, std::vector<unique_fd> fds) {
  if (closed_) return;
  queued_bytes_ += frame.size();
  out_.push_back(pending{std::move(frame), std::move(fds), 0});
  if (out_.size() == 1) {
    // No callback of any kind from here, neither drained nor closed: the caller may be the
    // producer itself, or be in the middle of changing its own state. A failed write is
    // reported from the loop, where the poll sees the same error.
    flush(/*from_loop=*/false);
  }
  update_events();
}

// Returns false when the connection failed (and was reported closed, which only a call from
// the loop does).
bool framed_socket::flush(bool from_loop) {
  while (!out_.empty()) {
    auto& p = out_.front();
    std::vector<int> raw;
    if (p.off == 0)
      for (auto& f : p.fds) raw.push_back(f.get());
    ssize_t r = ipc::send_with_fds(fd_.get(), p.bytes.data() + p.off, p.bytes.size() - p.off, raw);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || !from_loop) return true;
      fail_after_reading(fmt::format("write failed: {}", std::strerror(errno)));
      return false;
    }
    p.off += static_cast<size_t>(r);
    queued_bytes_ -= static_cast<size_t>(r);
    p.fds.clear();  // sent with the first byte
    if (p.off < p.bytes.size()) return true;
    out_.pop_front();
  }
  if (from_loop && on_drained) {
    auto cb = on_drained;
    cb();
  }
  return true;
}

void framed_socket::on_poll(int status, int events) {
  if (closed_) return;
  if (status < 0) {
    // libuv reports a socket error (POLLERR) as UV_EBADF: a peer that went away without
    // reading all we sent, for one (ECONNRESET).
    fail_after_reading(fmt::format("poll failed: {}", uv_strerror(status)));
    return;
  }
  auto alive = alive_;
  if ((events & UV_WRITABLE) != 0) {
    if (!flush(/*from_loop=*/true) || !*alive) return;
    update_events();
  }
  if ((events & (UV_READABLE | UV_DISCONNECT)) != 0 && !paused_) read_some();
}

void framed_socket::read_some() {
  auto alive = alive_;
  size_t budget = kReadBudget;
  bool eof = false;
  for (;;) {
    // Deliver every whole frame already buffered.
    while (!paused_ && !closed_) {
      auto body = reader_.next_body();
      if (!body) {
        send_error_and_close(body.err());
        return;
      }
      if (!body.value()) break;
      auto m = ipc::message::parse(body.value()->data(), body.value()->size());
      if (!m) {
        send_error_and_close(m.err());
        return;
      }
      auto fds = ipc::take_fds(*m, fds_in_);
      if (!fds) {
        fail(fds.err().message);
        return;
      }
      if (cbs_.on_message) cbs_.on_message(ipc::envelope{std::move(*m), std::move(*fds)});
      if (!*alive) return;
    }
    if (paused_ || closed_ || eof || budget == 0) break;
    size_t room;
    char* p = reader_.prepare(read_chunk_, &room);
    ssize_t r = ipc::recv_with_fds(fd_.get(), p, room, fds_in_);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      fail(fmt::format("read failed: {}", std::strerror(errno)));
      break;
    }
    if (r == 0) {
      eof = true;
      continue;  // deliver what is buffered, then report the close
    }
    reader_.commit(static_cast<size_t>(r));
    budget = static_cast<size_t>(r) >= budget ? 0 : budget - static_cast<size_t>(r);
  }
  if (eof && !closed_) {
    fail(reader_.buffered() > 0 ? "peer closed the connection in the middle of a frame"
                                : "peer closed the connection");
  }
}

// A peer that sends garbage is not worth trusting further (and after a bad length the
// framing is lost): answer once, without blocking, and hang up.
void framed_socket::send_error_and_close(const error& e) {
  auto bytes = ipc::encode(ipc::msg::error{e.code, e.message});
  (void)ipc::send_with_fds(fd_.get(), bytes.data(), bytes.size(), {});
  fail(e.message);
}

void framed_socket::fail_after_reading(const std::string& reason) {
  // The peer may be gone with frames still unread (a wrapper's last report of how its shell
  // ended): they come before the close, as a read would have delivered them.
  auto alive = alive_;
  if (!paused_ && !closed_) read_some();
  if (*alive) fail(reason);
}

void framed_socket::fail(const std::string& reason) {
  if (closed_) return;
  closed_ = true;
  if (watch_ != nullptr) {
    watch_->close();
    watch_ = nullptr;
  }
  out_.clear();
  queued_bytes_ = 0;
  if (cbs_.on_closed) {
    auto cb = cbs_.on_closed;
    cb(reason);
  }
}

}  // namespace sbsh::daemon
