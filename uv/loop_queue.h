// Functions other threads hand to the libuv loop's thread: a locked queue and an async
// handle that wakes the loop to run them. One object per loop; close() before the loop ends.
#pragma once

#include <uv.h>

#include <deque>
#include <functional>
#include <mutex>

#include "uv/handles.h"

namespace sbsh::uv {

class loop_queue {
 public:
  explicit loop_queue(uv_loop_t* loop);
  ~loop_queue() { close(); }
  loop_queue(const loop_queue&) = delete;
  loop_queue& operator=(const loop_queue&) = delete;
  // Runs f on the loop's thread soon. Safe from any thread, until close().
  void post(std::function<void()> f);
  // Closes the async handle (it frees itself on the loop's next turn); functions posted
  // after it are dropped.
  void close();

 private:
  void run_posted();
  std::mutex lock_;
  std::deque<std::function<void()>> queue_;
  bool closed_ = false;
  handle_ptr<async> wake_;
};

}  // namespace sbsh::uv
