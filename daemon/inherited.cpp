// sbshd's inherited children (see inherited.h).
#include "daemon/inherited.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>
#include <utility>

#include <spdlog/spdlog.h>

#include "common/procs.h"
#include "uv/child_process.h"

namespace sbsh::daemon {

namespace {

// Looking at every child costs a read of /proc listing each: at most once in this long, so
// that thousands of wrappers ending together (a shutdown) cost a few looks, not thousands.
constexpr uint64_t kLookEveryMs = 20;

// The children of sbshd's main thread, zombies included. Wrappers are started on it, so the
// processes sbshd inherits from them come to it too (the kernel gives an orphan to the thread
// that started its dead parent); the loop's helper threads' children are not listed here.
std::vector<pid_t> children_of_main_thread() {
  std::vector<pid_t> pids;
  (void)procs::task_children(::getpid(), ::getpid(), pids);
  return pids;
}

}  // namespace

void inherited_children::become_subreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    spdlog::warn("cannot become a child subreaper ({}): a killed wrapper's processes would be left to init",
                 std::strerror(errno));
}

inherited_children::inherited_children(uv_loop_t* loop, std::function<std::set<pid_t>()> kept)
    : loop_(loop), kept_(std::move(kept)) {
  // Children from before sbshd served are not a session's: reaped when they end, never signalled.
  for (pid_t pid : children_of_main_thread())
    if (!uv::child_process::spawned_here(pid)) known_.insert(pid);
  sigchld_ = uv::make_handle<uv::signal_watch>(loop_);
  sigchld_->start(SIGCHLD, [this](int) { look_soon(); });
}

void inherited_children::look_soon() {
  uint64_t now = uv_now(loop_);
  if (now - last_look_ms_ >= kLookEveryMs) {
    look();
    return;
  }
  if (!again_) {
    again_ = uv::make_handle<uv::timer>(loop_);
    again_->start(kLookEveryMs - (now - last_look_ms_), [this] {
      again_.reset();
      look();
    });
  }
}

void inherited_children::look() {
  last_look_ms_ = uv_now(loop_);
  std::set<pid_t> alive, left;
  for (pid_t pid : children_of_main_thread()) {
    if (uv::child_process::spawned_here(pid)) continue;
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r != 0) continue;  // reaped now (it had ended), or not sbshd's child any more
    alive.insert(pid);
    if (!known_.contains(pid)) left.insert(pid);
  }
  known_ = alive;
  if (left.empty()) return;
  // A session's background process runs on, and so does what it started, even while it
  // still descends from the killed wrapper's bash, whose tree ends.
  std::set<pid_t> kept = kept_();
  std::erase_if(left, [&kept](pid_t pid) { return kept.contains(::getpgid(pid)); });
  size_t n = procs::signal_trees(left, SIGKILL, kept);
  if (n == 0) return;
  spdlog::warn("ended {} process{} that a killed wrapper left behind", n, n == 1 ? "" : "es");
}

}  // namespace sbsh::daemon
