// What sbshd does for sessions while they sit idle, on timers that cost nothing per command:
// it removes those whose idle expiry has passed (session_spec::idle_expiry_ms), and parks the
// shell channels of those idle for options::park_after_ms (shell_supervisor::park: one
// descriptor fewer each), and at once, the least recently used first, when sbshd's
// descriptors come near their limit. It sees the daemon only through upkeep_host.
#pragma once

#include <uv.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "uv/handles.h"

namespace sbsh::daemon {

class session;

class upkeep_host {
 public:
  virtual ~upkeep_host() = default;
  virtual uv_loop_t* loop() = 0;
  [[nodiscard]] virtual const std::map<std::string, std::unique_ptr<session>>& sessions() const = 0;
  // Whether the session has something to do (a command running or queued, a background
  // process): it is not idle.
  [[nodiscard]] virtual bool busy(const session& s) const = 0;
  // The shell channels sbshd holds now (every session's not parked).
  virtual uint64_t& channels_held() = 0;
  // Removes session `name`, idle past its expiry.
  virtual void expire(const std::string& name) = 0;
};

class idle_upkeep {
 public:
  idle_upkeep(upkeep_host& host, uint64_t park_after_ms) : host_(host), park_after_ms_(park_after_ms) {}

  // A session with this idle expiry (ms; 0: none) joins or leaves the table: none left, no
  // timer.
  void expiry_added(uint64_t idle_ms);
  void expiry_removed(uint64_t idle_ms);
  // Session `s` was made, or became active or idle: its expiry counts from its last
  // activity, and parking is looked at again. Cheap: no session but `s` is looked at.
  void activity(const session& s);
  // Sets the expiry timer from every session (after sessions were loaded or removed).
  void arm_expiry();
  // Before a wrapper starts: when sbshd's descriptors would come near its limit, parks the
  // channels of the least recently used idle sessions at once, so that sessions never run
  // out of descriptors while idle ones hold some they do not need.
  void relieve_descriptors();
  // sbshd shuts down: nothing more expires or parks.
  void stop();

 private:
  // The timer set for `due` (unix ms) unless it is set for then or sooner already: a
  // creation or a command's end must not scan every session.
  void arm_expiry_by(int64_t due);
  void arm_expiry_at(int64_t due_ms);
  void expire_idle();
  // Parks the channels of sessions idle for park_after_ms, looking again every half of it
  // while sbshd holds any.
  void park_idle_channels();
  void arm_parking();

  upkeep_host& host_;
  uint64_t park_after_ms_;
  bool stopped_ = false;
  uv::handle_ptr<uv::timer> expiry_timer_;  // set while an idle session is due to expire
  int64_t expiry_due_ = 0;                  // when it fires (unix ms)
  std::multiset<uint64_t> expiries_;        // the idle expiries of the sessions that have one
  uv::handle_ptr<uv::timer> park_timer_;    // set while parking is due
};

}  // namespace sbsh::daemon
