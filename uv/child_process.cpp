// posix_spawn, and one SIGCHLD reaper per loop (see child_process.h).
#include "uv/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ipc/protocol.h"

namespace sbsh::uv {

namespace {

// Debian 12's <sys/pidfd.h> (glibc 2.36) lacks extern "C": a C++ program cannot link its
// declarations, so the two calls go through syscall(2).
int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }
// The pids of the children spawn() started and nobody has reaped yet (on the loop's thread).
std::unordered_set<int>& spawned() {
  static std::unordered_set<int> pids;
  return pids;
}

// The pidfds the watches hold (on the loop's thread).
size_t pidfds_held = 0;

int pidfd_send_signal(int pidfd, int sig) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

// posix_spawn's attributes and file actions, destroyed on every path.
struct spawn_plan {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  spawn_plan() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~spawn_plan() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  spawn_plan(const spawn_plan&) = delete;
  spawn_plan& operator=(const spawn_plan&) = delete;
};

}  // namespace

namespace {
// The caller's words for `e` (out of processes or descriptors, say which limit and how to
// raise it), else the system's reason.
error cannot_spawn(const child_process::options& o, int e) {
  return ipc::make_error(ipc::errc::spawn, o.explain != nullptr ? o.explain(e) : std::string(std::strerror(e)));
}
}  // namespace

result<child_ptr> child_process::spawn(uv_loop_t* loop, const options& o, exit_callback cb) {
  spawn_plan plan;
  // Each source is first copied above the target range, so that no dup2 in the child can
  // overwrite a source it has still to copy (one source may also serve several targets).
  // The copies are close-on-exec; dup2 clears that flag on each target.
  const int n = static_cast<int>(o.fds.size());
  std::vector<unique_fd> high;
  high.reserve(o.fds.size());
  for (int i = 0; i < n; ++i) {
    int h = ::fcntl(o.fds[i], F_DUPFD_CLOEXEC, n);
    if (h < 0) return cannot_spawn(o, errno);
    high.emplace_back(h);
  }
  int rc = 0;
  for (int i = 0; i < n && rc == 0; ++i) rc = posix_spawn_file_actions_adddup2(&plan.actions, high[i].get(), i);
  // Every descriptor sbsh opens is close-on-exec; this also covers any a library left open.
  if (rc == 0) rc = posix_spawn_file_actions_addclosefrom_np(&plan.actions, n);
  if (rc == 0 && o.cwd != nullptr) rc = posix_spawn_file_actions_addchdir_np(&plan.actions, o.cwd);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  if (rc == 0) rc = posix_spawnattr_setsigmask(&plan.attr, &none);
  if (rc == 0) rc = posix_spawnattr_setsigdefault(&plan.attr, &all);  // the caller may ignore SIGPIPE (sbshd does)
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (o.new_session) flags |= POSIX_SPAWN_SETSID;
  if (rc == 0) rc = posix_spawnattr_setflags(&plan.attr, flags);
  pid_t pid = 0;
  if (rc == 0) rc = posix_spawnp(&pid, o.file, &plan.actions, &plan.attr, o.argv, o.envp);
  if (rc != 0) return cannot_spawn(o, rc);
  spawned().insert(pid);
  return watch_child(loop, pid, std::move(cb));
}

// The SIGCHLD watch of one loop, and the children of its thread that it reaps. It lives
// while it has a child to watch, so that a loop with none can end and close.
class reaper {
 public:
  static reaper& of(uv_loop_t* loop) {
    auto& r = all()[loop];
    if (!r) r.reset(new reaper(loop));
    return *r;
  }
  void add(child_process* c) { children_[c->pid_] = c; }
  void remove(child_process* c) {
    children_.erase(c->pid_);
    if (children_.empty() && !sweeping_) all().erase(loop_);  // frees this
  }

 private:
  explicit reaper(uv_loop_t* loop) : loop_(loop), sigchld_(make_handle<signal_watch>(loop)) {
    sigchld_->start(SIGCHLD, [this](int) { sweep_soon(); });
  }
  // waitid(P_ALL) looks at every child of the thread, with the kernel's task list locked
  // against exits, before it says that none has ended: 13 us with 1,000 children, 1.1 ms
  // with 10,000. A sweep per exit would cost thousands of wrappers ending together (a
  // shutdown) time in the square of their number; at most one sweep every few milliseconds
  // reaps them in batches.
  void sweep_soon() {
    uint64_t now = uv_now(loop_);
    if (now - last_sweep_ms_ >= kSweepEveryMs) {
      sweep();
      return;
    }
    if (again_) return;
    again_ = make_handle<timer>(loop_);
    again_->start(kSweepEveryMs - (now - last_sweep_ms_), [this] {
      again_.reset();
      sweep();
    });
  }
  // Never destroyed at exit: a reaper left then (none is, once its loop has run to its end)
  // would close its handle on a loop already gone.
  static std::unordered_map<uv_loop_t*, std::unique_ptr<reaper>>& all() {
    static auto* reapers = new std::unordered_map<uv_loop_t*, std::unique_ptr<reaper>>;
    return *reapers;
  }
  // Reaps every child of this thread that has ended. One not watched here (one sbshd
  // inherited, or one whose watch was forgotten) is only reaped: daemon/inherited.h sees to
  // those still running.
  void sweep() {
    last_sweep_ms_ = uv_now(loop_);
    sweeping_ = true;
    for (;;) {
      siginfo_t si{};
      if (::waitid(P_ALL, 0, &si, WEXITED | WNOHANG | __WNOTHREAD) != 0) {
        if (errno == EINTR) continue;
        break;  // ECHILD: no child left
      }
      if (si.si_pid == 0) break;  // none has ended
      spawned().erase(si.si_pid);
      auto it = children_.find(si.si_pid);
      if (it == children_.end()) continue;
      child_process* c = it->second;
      children_.erase(it);
      bool exited = si.si_code == CLD_EXITED;
      c->ended(exited ? si.si_status : 0, exited ? 0 : si.si_status);  // may add or remove others
    }
    sweeping_ = false;
    if (children_.empty()) all().erase(loop_);  // frees this: nothing of it is used after
  }

  static constexpr uint64_t kSweepEveryMs = 10;
  uv_loop_t* loop_;
  handle_ptr<signal_watch> sigchld_;
  handle_ptr<timer> again_;
  std::unordered_map<int, child_process*> children_;
  uint64_t last_sweep_ms_ = 0;
  bool sweeping_ = false;
};

bool child_process::spawned_here(int pid) { return spawned().contains(pid); }

child_process::child_process(uv_loop_t* loop, int pid, exit_callback cb) : loop_(loop), cb_(std::move(cb)), pid_(pid) {}

child_process::~child_process() { drop_pidfd(); }

size_t child_process::descriptors_held() { return pidfds_held; }

child_ptr child_process::watch_child(uv_loop_t* loop, int pid, exit_callback cb) {
  child_ptr self(new child_process(loop, pid, std::move(cb)));
  reaper::of(loop).add(self.get());
  // It may have ended before the watch began: its SIGCHLD then came before any handler.
  siginfo_t si{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid != 0)
    ::kill(::getpid(), SIGCHLD);
  return self;
}

child_ptr child_process::watch(uv_loop_t* loop, int pid, exit_callback cb) {
  // A child of this thread (a fork server's copy, made with CLONE_PARENT) is watched as one
  // spawn() started: its pid stays its own until it is reaped here.
  siginfo_t si{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOHANG | WNOWAIT | __WNOTHREAD) == 0) {
    spawned().insert(pid);
    return watch_child(loop, pid, std::move(cb));
  }
  unique_fd pidfd(pidfd_open(pid));
  if (!pidfd) return {};
  child_ptr self(new child_process(loop, pid, std::move(cb)));
  self->watch_pidfd(std::move(pidfd));
  return self;
}

void child_process::watch_pidfd(unique_fd pidfd) {
  pidfd_ = std::move(pidfd);
  ++pidfds_held;
  pidfd_watch_ = make_handle<fd_watch>(loop_, pidfd_.get());
  pidfd_watch_->start(UV_READABLE, [this](int, int) { on_pidfd_readable(); });
}

// A pidfd polls readable once its process has ended; its status is not this process's to
// read (the callback gets -1).
void child_process::on_pidfd_readable() {
  drop_pidfd();
  ended(-1, 0);
}

void child_process::drop_pidfd() {
  if (!pidfd_) return;
  pidfd_watch_.reset();  // stops polling at once, before the descriptor closes
  pidfd_.reset();
  --pidfds_held;
}

void child_process::ended(int64_t status, int sig) {
  exited_ = true;
  auto cb = std::move(cb_);
  cb_ = nullptr;
  calling_ = true;
  if (cb) cb(status, sig);  // its owner may let go of it here: freed below, not there
  calling_ = false;
  if (released_) delete this;
}

bool child_process::running() const {
  if (exited_) return false;
  if (pidfd_) {
    pollfd p{pidfd_.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;
  }
  siginfo_t si{};  // ended, not yet reaped: a zombie
  return ::waitid(P_PID, static_cast<id_t>(pid_), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == 0;
}

void child_process::kill(int sig) {
  if (exited_) return;
  if (pidfd_) (void)pidfd_send_signal(pidfd_.get(), sig);
  else (void)::kill(pid_, sig);
}

void child_process::let_go(exit_callback last) {
  released_ = true;
  cb_ = std::move(last);
  if (exited_ && !calling_) delete this;
}

void child_releaser::operator()(child_process* c) const { c->let_go(nullptr); }

void child_process::release(child_ptr child, exit_callback last) {
  if (child) child.release()->let_go(std::move(last));
}

void child_process::forget(child_ptr child) {
  if (!child) return;
  child_process* c = child.release();
  if (!c->exited_ && !c->pidfd_) reaper::of(c->loop_).remove(c);  // still counted as spawned here
  c->released_ = true;
  c->cb_ = nullptr;
  if (!c->calling_) delete c;
}

}  // namespace sbsh::uv
