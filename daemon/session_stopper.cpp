#include "daemon/session_stopper.h"

#include <spdlog/spdlog.h>

#include "daemon/session.h"
#include "ipc/wrapper_link.h"

namespace sbsh::daemon {

void session_stopper::expect(std::deque<session*> order, size_t sessions, size_t others) {
  to_stop_ = std::move(order);
  left_ = sessions + others;
  timer_ = uv::make_handle<uv::timer>(loop_);
  timer_->start(wrapper::kWrapperStopWaitMs, [this] { overdue(); });
}

void session_stopper::gone(const session* s) {
  if (!timer_) return;  // done already
  stopping_.erase(s);
  if (--left_ == 0) return finish();
  stop_more();
}

void session_stopper::other_done() {
  if (timer_ && --left_ == 0) finish();
}

void session_stopper::stop_more() {
  if (!timer_) return;  // done already
  bool asked = false;
  while (!to_stop_.empty() && stopping_.size() < at_once_) {
    session* s = to_stop_.front();
    to_stop_.pop_front();
    if (s->shell().stopped_and_gone()) {  // no process to end: its gone() comes on its own
      s->shell().stop();
      continue;
    }
    stopping_.insert(s);
    s->shell().stop();
    asked = true;
  }
  if (asked) timer_->start(wrapper::kWrapperStopWaitMs, [this] { overdue(); });
}

void session_stopper::overdue() {
  spdlog::warn("shutdown: {} session(s) not ended {} s after the last was asked to end ({} not asked yet); "
               "their wrappers are killed",
               stopping_.size(), wrapper::kWrapperStopWaitMs / 1000, to_stop_.size());
  finish();
}

void session_stopper::abandon() {
  timer_.reset();
  to_stop_.clear();
  stopping_.clear();
}

void session_stopper::finish() {
  if (!timer_) return;
  abandon();
  done_();
}

}  // namespace sbsh::daemon
