// loop_queue: the only way worker threads reach the loop (uv_async_send is the one libuv
// call that is safe from another thread).
#include "uv/loop_queue.h"

namespace sbsh::uv {

loop_queue::loop_queue(uv_loop_t* loop) {
  uv_async_init(loop, &async_, on_async);
  async_.data = this;
}

void loop_queue::post(std::function<void()> f) {
  std::lock_guard lock(lock_);
  if (closed_) return;
  queue_.push_back(std::move(f));
  uv_async_send(&async_);
}

void loop_queue::close() {
  {
    std::lock_guard lock(lock_);
    if (closed_) return;
    closed_ = true;
    queue_.clear();
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&async_), nullptr);
}

void loop_queue::on_async(uv_async_t* h) {
  auto* self = static_cast<loop_queue*>(h->data);
  std::deque<std::function<void()>> batch;
  {
    std::lock_guard lock(self->lock_);
    batch.swap(self->queue_);
  }
  for (auto& f : batch) f();
}

}  // namespace sbsh::uv
