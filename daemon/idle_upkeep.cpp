#include "daemon/idle_upkeep.h"

#include <algorithm>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "daemon/capacity.h"
#include "daemon/session.h"
#include "uv/child_process.h"

namespace sbsh::daemon {

void idle_upkeep::expiry_added(uint64_t idle_ms) {
  if (idle_ms > 0) expiries_.insert(idle_ms);
}

void idle_upkeep::expiry_removed(uint64_t idle_ms) {
  if (idle_ms > 0) expiries_.erase(expiries_.find(idle_ms));
  // The first expiry can only come later now: a timer that fires early finds nothing due and
  // is set again, so no scan of every session here.
  if (expiries_.empty()) expiry_timer_.reset();
}

void idle_upkeep::activity(const session& s) {
  if (!park_timer_) arm_parking();
  // Only a session that expires when idle cares when it was last active: for the others a
  // command's start and end cost nothing here, however many sessions there are.
  if (stopped_ || s.def().idle_expiry_ms == 0) return;
  // Activity only moves this session's expiry later, so a timer already due no later than it
  // stands: when it fires, expire_idle() looks at every session and sets it again.
  arm_expiry_by(s.last_active_ms() + static_cast<int64_t>(s.def().idle_expiry_ms));
}

void idle_upkeep::stop() {
  stopped_ = true;
  expiry_timer_.reset();
  park_timer_.reset();
}

void idle_upkeep::arm_parking() {
  if (stopped_ || park_after_ms_ == 0 || host_.channels_held() == 0) {
    park_timer_.reset();
    return;
  }
  if (!park_timer_) park_timer_ = uv::make_handle<uv::timer>(host_.loop());
  park_timer_->start(std::max<uint64_t>(park_after_ms_ / 2, 1), [this] { park_idle_channels(); });
}

void idle_upkeep::park_idle_channels() {
  uint64_t now = uv_now(host_.loop());
  for (const auto& [name, s] : host_.sessions()) {
    shell_supervisor& sh = s->shell();
    if (now - sh.last_active_ms() >= park_after_ms_ && sh.parkable()) sh.park();
  }
  arm_parking();
}

void idle_upkeep::relieve_descriptors() {
  uint64_t limit = descriptor_limit();
  if (limit == UINT64_MAX) return;
  // The new session's own, beside those of every session, the channels held and the pidfds
  // of adopted wrappers.
  uint64_t room = limit - reserved_descriptors(limit);
  uint64_t used = (host_.sessions().size() + 1) * kDescriptorsPerSession + host_.channels_held() + 1 +
                  uv::child_process::descriptors_held();
  if (used <= room) return;
  // A batch at a time, so that creating sessions near the limit does not look at every
  // session for each one.
  uint64_t goal = room - std::min<uint64_t>(room, std::max<uint64_t>(16, room / 32));
  std::vector<shell_supervisor*> idle;
  for (const auto& [name, s] : host_.sessions())
    if (s->shell().parkable()) idle.push_back(&s->shell());
  std::sort(idle.begin(), idle.end(), [](const shell_supervisor* a, const shell_supervisor* b) {
    return a->last_active_ms() < b->last_active_ms();
  });
  for (shell_supervisor* sh : idle) {
    if (used <= goal) break;
    sh->park();
    --used;
  }
}

void idle_upkeep::arm_expiry_by(int64_t due) {
  if (expiry_timer_ && expiry_due_ <= due) return;
  arm_expiry_at(due);
}

void idle_upkeep::arm_expiry() {
  if (stopped_) return;
  int64_t first = INT64_MAX;
  for (const auto& [name, s] : host_.sessions())
    if (s->def().idle_expiry_ms > 0 && !host_.busy(*s))
      first = std::min(first, s->last_active_ms() + static_cast<int64_t>(s->def().idle_expiry_ms));
  if (first == INT64_MAX) {
    expiry_timer_.reset();
    return;
  }
  arm_expiry_at(first);
}

void idle_upkeep::arm_expiry_at(int64_t due_ms) {
  if (!expiry_timer_) expiry_timer_ = uv::make_handle<uv::timer>(host_.loop());
  expiry_due_ = due_ms;
  // A little late rather than early: a session is removed only once it is due.
  expiry_timer_->start(static_cast<uint64_t>(std::max<int64_t>(due_ms - wall_ms(), 0)) + 1, [this] { expire_idle(); });
}

void idle_upkeep::expire_idle() {
  int64_t now = wall_ms();
  std::vector<std::string> due;
  for (const auto& [name, s] : host_.sessions())
    if (s->def().idle_expiry_ms > 0 && !host_.busy(*s) &&
        now >= s->last_active_ms() + static_cast<int64_t>(s->def().idle_expiry_ms))
      due.push_back(name);
  for (const auto& name : due) host_.expire(name);
  arm_expiry();
}

}  // namespace sbsh::daemon
