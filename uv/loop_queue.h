// Functions other threads hand to the libuv loop's thread: a locked queue and a uv_async
// that wakes the loop to run them. One object per loop; close() before the loop closes.
#pragma once

#include <uv.h>

#include <deque>
#include <functional>
#include <mutex>

namespace sbsh::uv {

class loop_queue {
 public:
  explicit loop_queue(uv_loop_t* loop);
  loop_queue(const loop_queue&) = delete;
  loop_queue& operator=(const loop_queue&) = delete;
  // Runs f on the loop's thread soon. Safe from any thread, until close().
  void post(std::function<void()> f);
  // Closes the async handle; functions posted after it are dropped. The object must live
  // until the loop has run the close callback (uv_run once more).
  void close();

 private:
  static void on_async(uv_async_t* h);
  uv_async_t async_{};
  std::mutex lock_;
  std::deque<std::function<void()>> queue_;
  bool closed_ = false;
};

}  // namespace sbsh::uv
