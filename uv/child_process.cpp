// posix_spawn + pidfd (see child_process.h).
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
  // Until it is reaped below, the child's pid cannot be reused, so the pidfd is the child's.
  unique_fd pidfd(pidfd_open(pid));
  if (!pidfd) {
    int e = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return cannot_spawn(o, e);
  }
  spawned().insert(pid);
  return start_watching(loop, pid, std::move(pidfd), std::move(cb));
}

bool child_process::spawned_here(int pid) { return spawned().contains(pid); }

child_ptr child_process::watch(uv_loop_t* loop, int pid, exit_callback cb) {
  unique_fd pidfd(pidfd_open(pid));
  if (!pidfd) return {};
  // A child of this process that another started for it (a fork server's copy, made with
  // CLONE_PARENT) counts as spawned here: waitid on a pidfd says ECHILD for any other.
  siginfo_t si{};
  if (::waitid(P_PIDFD, static_cast<id_t>(pidfd.get()), &si, WEXITED | WNOHANG | WNOWAIT) == 0) spawned().insert(pid);
  return start_watching(loop, pid, std::move(pidfd), std::move(cb));
}

child_ptr child_process::start_watching(uv_loop_t* loop, int pid, unique_fd pidfd, exit_callback cb) {
  child_ptr self(new child_process(pid, std::move(pidfd)));
  self->cb_ = std::move(cb);
  int r = uv_poll_init(loop, &self->handle_, self->pidfd_.get());
  if (r != 0) {  // a pidfd is always pollable: this is a bug
    std::fprintf(stderr, "%s: uv_poll_init(pidfd): %s\n", program_invocation_short_name, uv_strerror(r));
    std::abort();
  }
  self->handle_.data = self.get();
  uv_poll_start(&self->handle_, UV_READABLE, [](uv_poll_t* h, int, int) {
    static_cast<child_process*>(h->data)->on_readable();
  });
  return self;
}

void child_process::on_readable() {
  siginfo_t si{};
  int64_t status = -1;  // when the status is lost (the child was reaped elsewhere)
  int sig = 0;
  if (::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &si, WEXITED | WNOHANG) == 0) {
    if (si.si_pid == 0) return;  // not ended yet
    spawned().erase(pid_);
    bool exited = si.si_code == CLD_EXITED;
    status = exited ? si.si_status : 0;
    sig = exited ? 0 : si.si_status;
  } else if (errno == EINTR) {
    return;
  }
  exited_ = true;
  uv_poll_stop(&handle_);
  auto cb = std::move(cb_);
  cb_ = nullptr;
  if (cb) cb(status, sig);  // its owner may let go of it here
  if (released_) close();
}

bool child_process::running() const {
  pollfd p{pidfd_.get(), POLLIN, 0};  // a pidfd polls readable once the process has ended
  return !exited_ && ::poll(&p, 1, 0) == 0;
}

void child_process::kill(int sig) {
  if (!exited_) (void)pidfd_send_signal(pidfd_.get(), sig);
}

void child_process::let_go(exit_callback last) {
  released_ = true;
  cb_ = std::move(last);
  if (exited_) close();
}

void child_releaser::operator()(child_process* c) const { c->let_go(nullptr); }

void child_process::release(child_ptr child, exit_callback last) {
  if (child) child.release()->let_go(std::move(last));
}

void child_process::forget(child_ptr child) {
  if (!child) return;
  child_process* c = child.release();
  c->released_ = true;
  c->cb_ = nullptr;
  c->close();
}

void child_process::on_close_requested() {
  cb_ = nullptr;
  uv_poll_stop(&handle_);
}

}  // namespace sbsh::uv
