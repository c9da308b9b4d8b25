// Framed non-blocking socket; see framed_socket.h.
#include "uv/framed_socket.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "ipc/frame.h"
#include "ipc/messages.h"

namespace sbsh::uv {

namespace {
// Bytes read from one peer per loop iteration, so that one busy peer cannot starve others.
constexpr size_t kReadBudget = 1u << 20;
}  // namespace

framed_socket::framed_socket(uv_loop_t* loop, unique_fd fd, callbacks cbs, size_t read_chunk,
                             memory_account* account, ipc::decode_budget budget)
    : loop_(loop),
      fd_(std::move(fd)),
      cbs_(std::move(cbs)),
      read_chunk_(read_chunk),
      account_(account),
      budget_(budget) {
  set_nonblocking(fd_.get());
  watch_ = make_handle<fd_watch>(loop_, fd_.get());
  watch_->start(UV_READABLE | UV_DISCONNECT, [this](int st, int ev) { on_poll(st, ev); });
}

framed_socket::~framed_socket() {
  *alive_ = false;
  watch_.reset();
  fd_.reset();
  if (account_ != nullptr) account_->change(counted_, 0);
}

void framed_socket::recount() {
  if (account_ == nullptr) return;
  size_t now = closed_ ? 0 : held();
  size_t before = std::exchange(counted_, now);
  account_->change(before, now);
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
  recount();
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
    if (p.off < p.bytes.size()) {
      recount();
      return true;
    }
    out_.pop_front();
  }
  recount();
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
  // Only for this call: an idle connection holds no read buffer.
  std::unique_ptr<char[]> chunk;
  for (;;) {
    // Deliver every whole frame already received.
    while (!paused_ && !closed_) {
      auto body = reader_.next_body();
      if (!body) {
        send_error_and_close(body.err());
        return;
      }
      if (!body.value()) break;
      auto m = ipc::message::parse(body.value()->data(), body.value()->size(), budget_);
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
    // Over the shared limit, read no more until the owner has dropped someone: the peer's
    // bytes wait in the kernel, and the poll reports them again on the next turn.
    bool over = account_ != nullptr && account_->over();
    if (paused_ || closed_ || eof || budget == 0 || over) break;
    if (!chunk) chunk = std::make_unique_for_overwrite<char[]>(read_chunk_);
    ssize_t r = ipc::recv_with_fds(fd_.get(), chunk.get(), read_chunk_, fds_in_);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      fail(fmt::format("read failed: {}", std::strerror(errno)));
      return;  // the owner may have deleted this object
    }
    if (r == 0) {
      eof = true;
      continue;  // deliver what is buffered, then report the close
    }
    reader_.feed(chunk.get(), static_cast<size_t>(r));
    budget = static_cast<size_t>(r) >= budget ? 0 : budget - static_cast<size_t>(r);
  }
  reader_.keep_rest();  // frames not taken yet (paused) outlive `chunk`
  recount();
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
  watch_.reset();
  out_.clear();
  queued_bytes_ = 0;
  reader_ = ipc::frame_reader();
  recount();
  if (cbs_.on_closed) {
    auto cb = cbs_.on_closed;
    cb(reason);
  }
}

}  // namespace sbsh::uv

namespace sbsh::uv {

framed_socket::last_words framed_socket::end_with(const std::string& frame, const std::string& reason) {
  if (closed_) return {};
  last_words out;
  // A frame half written must be finished, or the peer could not read the one after it.
  if (!out_.empty() && out_.front().off > 0) out.bytes = out_.front().bytes.substr(out_.front().off);
  out.bytes += frame;
  watch_.reset();  // stop polling before the descriptor changes hands
  out.fd = std::move(fd_);
  fail(reason);
  return out;
}

bool farewells::write_some(entry& e) {
  while (e.off < e.bytes.size()) {
    ssize_t r = ipc::send_with_fds(e.fd.get(), e.bytes.data() + e.off, e.bytes.size() - e.off, {});
    if (r < 0) return errno != EAGAIN && errno != EWOULDBLOCK;  // gone: nothing more to do
    e.off += static_cast<size_t>(r);
  }
  return true;
}

void farewells::add(unique_fd fd, std::string bytes) {
  if (!fd) return;
  entry e{std::move(fd), std::move(bytes), 0, nullptr, nullptr};
  if (write_some(e)) return;  // the usual case: it fits in the socket's buffer
  list_.push_back(std::move(e));
  auto it = std::prev(list_.end());
  if (account_ != nullptr) account_->change(0, it->bytes.size());
  it->watch = make_handle<fd_watch>(loop_, it->fd.get());
  it->watch->start(UV_WRITABLE | UV_DISCONNECT, [this, it](int status, int) {
    if (status < 0 || write_some(*it)) finish(it);
  });
  it->deadline = make_handle<timer>(loop_);
  it->deadline->start(ipc::kFarewellMs, [this, it] { finish(it); });
}

void farewells::finish(std::list<entry>::iterator it) {
  if (account_ != nullptr) account_->change(it->bytes.size(), 0);
  list_.erase(it);  // which closes its watch, its deadline and then its descriptor
}

void farewells::close_all() {
  while (!list_.empty()) finish(list_.begin());
}

}  // namespace sbsh::uv
