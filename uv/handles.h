// Owners for libuv handles. Each object holds its uv_*_t by value, sets handle.data = this,
// cannot be copied or moved, and is freed only in its close callback: the owner calls
// close() (safe twice) and forgets the pointer; callbacks are dropped at that moment, so a
// closed handle never calls back into an owner that is gone. handle_ptr does both: it closes
// the handle when it is reset or destroyed, as uvw's handles do. sbshd and `sbsh mcp` hold
// every libuv handle through these.
#pragma once

#include <uv.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <utility>

namespace sbsh::uv {

template <typename Derived, typename Handle>
class uv_owned {
 public:
  uv_owned(const uv_owned&) = delete;
  uv_owned& operator=(const uv_owned&) = delete;

  void close() {
    if (closing_) return;
    closing_ = true;
    static_cast<Derived*>(this)->on_close_requested();
    uv_close(reinterpret_cast<uv_handle_t*>(&handle_), [](uv_handle_t* h) {
      delete static_cast<Derived*>(h->data);
    });
  }
  [[nodiscard]] bool closing() const { return closing_; }
  Handle* raw() { return &handle_; }

 protected:
  uv_owned() {
    if constexpr (requires { handle_.data; }) handle_.data = this;  // a union (stream) sets its own
  }
  ~uv_owned() = default;
  void on_close_requested() {}
  Handle handle_{};
  bool closing_ = false;
};

class timer final : public uv_owned<timer, uv_timer_t> {
 public:
  static timer* create(uv_loop_t* loop) { return new timer(loop); }
  // Calls back after `ms`, then every `repeat` ms if that is not 0.
  void start(uint64_t ms, std::function<void()> cb, uint64_t repeat = 0) {
    cb_ = std::move(cb);
    uv_timer_start(&handle_, [](uv_timer_t* h) {
      auto* self = static_cast<timer*>(h->data);
      auto cb = self->cb_;  // the callback may close or restart this timer
      if (cb) cb();
    }, ms, repeat);
  }
  void stop() { uv_timer_stop(&handle_); }
  void on_close_requested() { cb_ = nullptr; }

 private:
  friend class uv_owned<timer, uv_timer_t>;
  explicit timer(uv_loop_t* loop) {
    uv_timer_init(loop, &handle_);
    handle_.data = this;
  }
  ~timer() = default;
  std::function<void()> cb_;
};

// Watches a raw descriptor; the descriptor itself is owned elsewhere.
class fd_watch final : public uv_owned<fd_watch, uv_poll_t> {
 public:
  using callback = std::function<void(int status, int events)>;
  static fd_watch* create(uv_loop_t* loop, int fd) { return new fd_watch(loop, fd); }
  void start(int events, callback cb) {
    cb_ = std::move(cb);
    events_ = events;
    uv_poll_start(&handle_, events, [](uv_poll_t* h, int status, int ev) {
      auto* self = static_cast<fd_watch*>(h->data);
      auto cb = self->cb_;
      if (cb) cb(status, ev);
    });
  }
  void set_events(int events) {
    if (events == events_ || closing_) return;
    events_ = events;
    if (events == 0) uv_poll_stop(&handle_);
    else uv_poll_start(&handle_, events, handle_.poll_cb);
  }
  [[nodiscard]] int events() const { return events_; }
  void on_close_requested() {
    cb_ = nullptr;
    uv_poll_stop(&handle_);
  }

 private:
  friend class uv_owned<fd_watch, uv_poll_t>;
  fd_watch(uv_loop_t* loop, int fd) {
    // Fails only for a descriptor libuv cannot poll or one already watched: both are bugs.
    int rc = uv_poll_init(loop, &handle_, fd);
    if (rc != 0) {
      fprintf(stderr, "%s: uv_poll_init(%d): %s\n", program_invocation_short_name, fd, uv_strerror(rc));
      abort();
    }
    handle_.data = this;
  }
  ~fd_watch() = default;
  callback cb_;
  int events_ = 0;
};

// Calls back on a signal, on the loop's thread (sbshd's SIGTERM, SIGINT and SIGHUP; sbsh
// mcp's SIGTERM and SIGINT).
class signal_watch final : public uv_owned<signal_watch, uv_signal_t> {
 public:
  static signal_watch* create(uv_loop_t* loop) { return new signal_watch(loop); }
  void start(int signum, std::function<void(int)> cb) {
    cb_ = std::move(cb);
    uv_signal_start(&handle_, [](uv_signal_t* h, int sig) {
      auto* self = static_cast<signal_watch*>(h->data);
      auto cb = self->cb_;  // the callback may close this watch
      if (cb) cb(sig);
    }, signum);
  }
  void on_close_requested() { cb_ = nullptr; }

 private:
  friend class uv_owned<signal_watch, uv_signal_t>;
  explicit signal_watch(uv_loop_t* loop) {
    uv_signal_init(loop, &handle_);
    handle_.data = this;
  }
  ~signal_watch() = default;
  std::function<void(int)> cb_;
};

// Wakes the loop from any thread: send() is the one libuv call that is safe off the loop's
// thread; the callback runs on it (several sends may make one call).
class async final : public uv_owned<async, uv_async_t> {
 public:
  static async* create(uv_loop_t* loop, std::function<void()> cb) { return new async(loop, std::move(cb)); }
  void send() { uv_async_send(&handle_); }
  void on_close_requested() { cb_ = nullptr; }

 private:
  friend class uv_owned<async, uv_async_t>;
  async(uv_loop_t* loop, std::function<void()> cb) : cb_(std::move(cb)) {
    uv_async_init(loop, &handle_, [](uv_async_t* h) {
      auto* self = static_cast<async*>(h->data);
      auto call = self->cb_;  // the callback may close this handle
      if (call) call();
    });
    handle_.data = this;
  }
  ~async() = default;
  std::function<void()> cb_;
};

// A libuv stream socket: TCP (uv_tcp_t) or a unix socket (uv_pipe_t), a listener or a
// connection. Writes own their bytes until libuv is done with them; reads go through one
// buffer per thread, valid only during the callback.
union stream_storage {
  uv_tcp_t tcp;
  uv_pipe_t pipe;
  uv_stream_t stream;
  uv_handle_t handle;
};

class stream final : public uv_owned<stream, stream_storage> {
 public:
  enum class kind { tcp, unix_socket };
  // on_read: n bytes at data, or n < 0 (UV_EOF or an error) once the peer is gone.
  using read_callback = std::function<void(ssize_t n, const char* data)>;
  static stream* create(uv_loop_t* loop, kind k) { return new stream(loop, k); }
  [[nodiscard]] kind type() const { return kind_; }
  uv_tcp_t* tcp() { return &handle_.tcp; }
  uv_pipe_t* pipe() { return &handle_.pipe; }
  uv_stream_t* get() { return &handle_.stream; }
  // The descriptor, or -1 (for getsockopt: a peer's credentials).
  [[nodiscard]] int fileno() const {
    uv_os_fd_t fd = -1;
    return uv_fileno(&handle_.handle, &fd) == 0 ? fd : -1;
  }

  int listen(int backlog, std::function<void(int status)> on_connection) {
    on_connection_ = std::move(on_connection);
    return uv_listen(&handle_.stream, backlog, [](uv_stream_t* s, int status) {
      auto call = static_cast<stream*>(s->data)->on_connection_;
      if (call) call(status);
    });
  }
  // Takes the connection waiting on this listener into `peer` (made with the same kind).
  int accept(stream& peer) { return uv_accept(&handle_.stream, &peer.handle_.stream); }

  int read_start(read_callback cb) {
    on_read_ = std::move(cb);
    return uv_read_start(
        &handle_.stream,
        [](uv_handle_t*, size_t, uv_buf_t* buf) {
          static thread_local char chunk[65536];
          *buf = uv_buf_init(chunk, sizeof chunk);
        },
        [](uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
          auto* self = static_cast<stream*>(s->data);
          if (n == 0 || !self->on_read_) return;
          auto call = self->on_read_;  // the callback may close this stream
          call(n, buf->base);
        });
  }
  void read_stop() { uv_read_stop(&handle_.stream); }

  // Queues `bytes`; a libuv status (nonzero: nothing was queued).
  int write(std::string bytes) {
    auto* w = new write_req{{}, std::move(bytes)};
    w->req.data = w;
    uv_buf_t b = uv_buf_init(w->bytes.data(), static_cast<unsigned>(w->bytes.size()));
    int rc = uv_write(&w->req, &handle_.stream, &b, 1,
                      [](uv_write_t* req, int) { delete static_cast<write_req*>(req->data); });
    if (rc != 0) delete w;
    return rc;
  }
  // Shuts the sending side down once the queued writes are out, then calls `done` (not
  // once the stream is being closed). A libuv status.
  int shutdown(std::function<void()> done) {
    on_shutdown_ = std::move(done);
    auto* req = new uv_shutdown_t;
    int rc = uv_shutdown(req, &handle_.stream, [](uv_shutdown_t* r, int) {
      auto* self = static_cast<stream*>(r->handle->data);
      delete r;
      auto call = self->on_shutdown_;
      if (call) call();
    });
    if (rc != 0) delete req;
    return rc;
  }

  void on_close_requested() {
    on_connection_ = nullptr;
    on_read_ = nullptr;
    on_shutdown_ = nullptr;
  }

 private:
  friend class uv_owned<stream, stream_storage>;
  struct write_req {
    uv_write_t req;
    std::string bytes;
  };
  stream(uv_loop_t* loop, kind k) : kind_(k) {
    if (k == kind::tcp) uv_tcp_init(loop, &handle_.tcp);
    else uv_pipe_init(loop, &handle_.pipe, 0);
    handle_.handle.data = this;
  }
  ~stream() = default;
  kind kind_;
  std::function<void(int)> on_connection_;
  read_callback on_read_;
  std::function<void()> on_shutdown_;
};

// An owning pointer to a handle: resetting or destroying it closes the handle, which frees
// itself in its close callback.
struct handle_closer {
  template <typename H>
  void operator()(H* h) const {
    h->close();
  }
};
template <typename H>
using handle_ptr = std::unique_ptr<H, handle_closer>;

template <typename H, typename... Args>
handle_ptr<H> make_handle(Args&&... args) {
  return handle_ptr<H>(H::create(std::forward<Args>(args)...));
}

}  // namespace sbsh::uv
