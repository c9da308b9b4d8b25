// Owners for libuv handles. Each object holds its uv_*_t by value, sets handle.data = this,
// cannot be copied or moved, and is freed only in its close callback: the owner calls
// close() (safe twice) and forgets the pointer; callbacks are dropped at that moment, so a
// closed handle never calls back into an owner that is gone. handle_ptr does both: it closes
// the handle when it is reset or destroyed, as uvw's handles do.
#pragma once

#include <uv.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
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
  uv_owned() { handle_.data = this; }
  ~uv_owned() = default;
  void on_close_requested() {}
  Handle handle_{};
  bool closing_ = false;
};

class timer final : public uv_owned<timer, uv_timer_t> {
 public:
  static timer* create(uv_loop_t* loop) { return new timer(loop); }
  void start(uint64_t ms, std::function<void()> cb) {
    cb_ = std::move(cb);
    uv_timer_start(&handle_, [](uv_timer_t* h) {
      auto* self = static_cast<timer*>(h->data);
      auto cb = self->cb_;  // the callback may close or restart this timer
      if (cb) cb();
    }, ms, 0);
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

// Calls back on a signal, on the loop's thread (sbshd's SIGTERM, SIGINT and SIGHUP).
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
