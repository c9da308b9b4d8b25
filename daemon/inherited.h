// The processes sbshd inherits, and what it does with them.
//
// sbshd is a child subreaper (PR_SET_CHILD_SUBREAPER). Each wrapper is the subreaper of its
// own session, so while it lives every process the session's commands left descends from it,
// one that called setsid included, and the wrapper ends them all when the session ends. A
// wrapper that is killed instead (SIGKILL by hand, the OOM killer) cannot: its children, and
// the orphans it had taken in, become sbshd's. Without this they would belong to init, and
// nothing would tie them to the session any more. Now sbshd ends each of them with its whole
// tree, but those in process groups a session keeps (background processes, which outlive a
// shell's restart), and reaps every child it inherited when it ends.
//
// The children sbshd started itself (uv::child_process::spawned_here) are not touched, nor
// those it had before it started serving (a container's entrypoint may `exec sbshd` after
// starting others): these are reaped when they end, never signalled.
#pragma once

#include <sys/types.h>

#include <functional>
#include <set>

#include <uv.h>

#include "uv/handles.h"

namespace sbsh::daemon {

class inherited_children {
 public:
  // Makes sbshd a child subreaper: before it starts any wrapper, since only processes started
  // after it are given to it.
  static void become_subreaper();

  // `kept`: the process groups sessions keep (their background processes).
  inherited_children(uv_loop_t* loop, std::function<std::set<pid_t>()> kept);

  // Looks at sbshd's children now: ends those it has just inherited and reaps those that
  // ended. Runs on SIGCHLD, at most once every few milliseconds.
  void look();

 private:
  void look_soon();

  uv_loop_t* loop_;
  std::function<std::set<pid_t>()> kept_;
  uv::handle_ptr<uv::signal_watch> sigchld_;
  uv::handle_ptr<uv::timer> again_;
  std::set<pid_t> known_;  // inherited children, alive when last seen, left to run
  uint64_t last_look_ms_ = 0;
};

}  // namespace sbsh::daemon
