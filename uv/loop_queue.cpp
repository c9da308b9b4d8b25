// loop_queue: the only way worker threads reach the loop (uv_async_send is the one libuv
// call that is safe from another thread).
#include "uv/loop_queue.h"

namespace sbsh::uv {

loop_queue::loop_queue(uv_loop_t* loop) : wake_(make_handle<async>(loop, [this] { run_posted(); })) {}

void loop_queue::post(std::function<void()> f) {
  std::lock_guard lock(lock_);
  if (closed_) return;
  queue_.push_back(std::move(f));
  wake_->send();
}

void loop_queue::close() {
  {
    std::lock_guard lock(lock_);
    if (closed_) return;
    closed_ = true;
    queue_.clear();
  }
  wake_.reset();
}

void loop_queue::run_posted() {
  std::deque<std::function<void()>> batch;
  {
    std::lock_guard lock(lock_);
    batch.swap(queue_);
  }
  for (auto& f : batch) f();
}

}  // namespace sbsh::uv
