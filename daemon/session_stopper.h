// How a shutdown ends the sessions (server::begin_shutdown): it asks them to end a bounded
// number at a time, the busy ones first, waits for each wrapper to go and for whatever else
// the shutdown waits on, and gives up on a wrapper stuck past its own bound for ending its
// session. It sees sessions only through the three calls of their shells it makes.
//
// Thousands of sessions ended at once make thousands of bash processes exit together, and
// each exit takes the same kernel locks (the shared files' mappings: bash, libc): sampled,
// 1,180 of them waited there at once, and a shutdown of 10,000 sessions took 12 s instead of
// 4. So at most options::stop_at_once (256) end at a time, which keeps both CPUs busy; the
// bound on a stuck wrapper counts from the last session asked to end.
#pragma once

#include <uv.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <set>

#include "uv/handles.h"

namespace sbsh::daemon {

class session;

class session_stopper {
 public:
  // `done` is called once: when every session waited for has gone and every other part has
  // said it is done, or when the bound on a stuck wrapper has passed (said in the log first).
  session_stopper(uv_loop_t* loop, size_t at_once, std::function<void()> done)
      : loop_(loop), at_once_(at_once), done_(std::move(done)) {}

  // Waits for `sessions` sessions and `others` other parts, and is to ask those of `order` to
  // end, in that order (sessions left to an adopting sbshd are waited for, not asked). Call
  // before the sessions and parts can say they are done (gone(), other_done()), and
  // stop_more() after.
  void expect(std::deque<session*> order, size_t sessions, size_t others);
  // Asks more sessions to end, while fewer than `at_once` are ending.
  void stop_more();
  // Session `s`'s wrapper has gone.
  void gone(const session* s);
  // One of the other parts is done.
  void other_done();
  // Stops waiting, without calling `done` (sbshd goes away without finishing the shutdown).
  void abandon();

 private:
  void overdue();
  void finish();

  uv_loop_t* loop_;
  size_t at_once_;
  std::function<void()> done_;
  uv::handle_ptr<uv::timer> timer_;  // set from the start until done
  size_t left_ = 0;                  // sessions and other parts not done yet
  std::deque<session*> to_stop_;     // not asked to end yet
  std::set<const session*> stopping_;  // asked, their wrappers not gone yet
};

}  // namespace sbsh::daemon
