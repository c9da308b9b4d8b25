// Starting bash: clone() with CLONE_VM | CLONE_VFORK, then exec, as posix_spawn does. The
// child runs on the wrapper's memory until execve(): it calls only async-signal-safe
// functions and writes nothing but its own stack and, when it fails, the error it reports.
#include "wrapper/spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/confine.h"
#include "ipc/protocol.h"
#include "ipc/shell_channel.h"

namespace sbsh::wrapper {

namespace {

struct child_args {
  const char* bash_path;
  shell_fds fds;
  pid_t parent;
  std::span<const rlimit_spec> limits;
  shell_confinement confinement;
  char* const* argv = nullptr;  // nullptr: the serving shell's
  bool user_ns = false;
  char uid_map[64] = {}, gid_map[64] = {};  // written by the child into its user namespace
  int error = 0;  // set by the child when it cannot exec bash; read once it has exited
  const rlimit_spec* failed_limit = nullptr;  // set with error when a limit was refused
  const char* failed_step = nullptr;               // set with error when confinement failed
};

[[noreturn]] void child_fail(child_args* a, int err);

// Writes `text` to /proc/self/FILE (a user namespace's maps).
void write_self(child_args* a, const char* path, const char* text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || ::write(fd, text, std::strlen(text)) < 0) {
    a->failed_step = path;
    child_fail(a, errno);
  }
  ::close(fd);
}

[[noreturn]] void child_fail(child_args* a, int err) {
  a->error = err;
  ::_exit(127);
}

int child_main(void* p) {
  auto* a = static_cast<child_args*>(p);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The parent died before prctl took effect. In a PID namespace of its own the child sees no
  // parent (0): the check is then for a parent outside it.
  if (::getppid() != (a->confinement.pid_ns ? 0 : a->parent)) ::_exit(127);
  // Into the session's cgroup before anything is charged elsewhere ("0": the writer).
  if (a->confinement.cgroup_procs >= 0 && ::write(a->confinement.cgroup_procs, "0", 1) != 1) {
    a->failed_step = "joining the session's cgroup";
    child_fail(a, errno);
  }
  if (a->user_ns) {
    write_self(a, "/proc/self/setgroups", "deny");
    write_self(a, "/proc/self/uid_map", a->uid_map);
    write_self(a, "/proc/self/gid_map", a->gid_map);
  }
  if (a->confinement.net_ns) {
    if (int e = confine::loopback_up(); e != 0) {
      a->failed_step = "bringing up the loopback interface";
      child_fail(a, e);
    }
  }
  // Every source first goes above every target, so that no dup2 below overwrites a source.
  constexpr int kAbove = SBSH_CHANNEL_FD + 2;
  // A one-shot run has neither channel nor script (-1 stays -1), and its own stdout.
  int devnull = ::open("/dev/null", O_RDWR);
  int null_fd = ::fcntl(devnull, F_DUPFD, kAbove);
  int channel = a->fds.channel < 0 ? -1 : ::fcntl(a->fds.channel, F_DUPFD, kAbove);
  int script = a->fds.script < 0 ? -1 : ::fcntl(a->fds.script, F_DUPFD, kAbove);
  int early = ::fcntl(a->fds.early_err, F_DUPFD, kAbove);
  int out = a->fds.out < 0 ? null_fd : ::fcntl(a->fds.out, F_DUPFD, kAbove);
  if (devnull < 0 || null_fd < 0 || (channel < 0 && a->fds.channel >= 0) || (script < 0 && a->fds.script >= 0) ||
      early < 0 || out < 0)
    child_fail(a, errno);
  if (::dup2(null_fd, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(early, 2) < 0 ||
      (script >= 0 && ::dup2(script, SBSH_SCRIPT_FD) < 0) || (channel >= 0 && ::dup2(channel, SBSH_CHANNEL_FD) < 0))
    child_fail(a, errno);
  // Before the descriptors above SBSH_CHANNEL_FD close: the ruleset's is one of them.
  if (a->confinement.ruleset >= 0) {
    if (int e = confine::restrict_self(a->confinement.ruleset); e != 0) {
      a->failed_step = "applying the Landlock ruleset";
      child_fail(a, e);
    }
  }
  // One call per range instead of a close() per possible descriptor.
  ::close_range(SBSH_SCRIPT_FD + 1, SBSH_CHANNEL_FD - 1, 0);
  ::close_range(SBSH_CHANNEL_FD + 1, ~0U, 0);
  if (script < 0) ::close(SBSH_SCRIPT_FD);
  if (channel < 0) ::close(SBSH_CHANNEL_FD);
  for (const auto& l : a->limits)
    if (::setrlimit(static_cast<__rlimit_resource>(l.resource), &l.value) != 0) {
      a->failed_limit = &l;
      child_fail(a, errno);
    }
  // Every disposition back to the default, through the kernel's call: glibc's sigaction()
  // refuses its two internal signals (32 and 33), which its posix_spawn (how sbshd starts
  // this wrapper) leaves ignored, and an ignored signal would stay ignored in bash and in
  // every command. A zeroed kernel sigaction is SIG_DFL, no flags and an empty mask on
  // every architecture. Only then are signals unblocked (the parent blocked them all).
  const unsigned long dfl[4] = {};
  for (int s = 1; s < NSIG; ++s)
    if (s != SIGKILL && s != SIGSTOP) ::syscall(SYS_rt_sigaction, s, dfl, nullptr, NSIG / 8);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  char arg0[] = "bash";
  char arg1[] = "--noprofile";
  char arg2[] = "--norc";
  char arg3[] = "/dev/fd/3";
  static_assert(SBSH_SCRIPT_FD == 3);
  char* argv[] = {arg0, arg1, arg2, arg3, nullptr};
  ::execve(a->bash_path, a->argv != nullptr ? a->argv : argv, environ);
  child_fail(a, errno);
}

}  // namespace

result<pid_t> spawn_shell(const char* bash_path, const shell_fds& fds, std::span<const rlimit_spec> limits,
                          const shell_confinement& confinement, char* const* argv) {
  // The child runs on this process's memory, on a stack of its own, and this thread waits
  // until it has exec'd or exited (CLONE_VFORK): unlike fork(), no page tables are copied
  // for a child that is about to exec anyway. Every signal stays blocked until the child has
  // reset its dispositions, so that no handler of this process's runs on the shared memory.
  constexpr size_t kStack = size_t{256} * 1024;  // generous: sanitizer builds use more stack
  void* stack = ::mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED)
    return make_error(ipc::errc::spawn, fmt::format("cannot start bash: {}", std::strerror(errno)));
  child_args args{bash_path, fds, ::getpid(), limits, confinement, argv};
  int flags = CLONE_VM | CLONE_VFORK | SIGCHLD;
  if (confinement.pid_ns) flags |= CLONE_NEWPID;
  if (confinement.net_ns) flags |= CLONE_NEWNET;
  // Without CAP_SYS_ADMIN the namespaces belong to a user namespace of bash's own, in which
  // its user and group are what they are outside.
  auto in_user_namespace = [&flags, &args] {
    flags |= CLONE_NEWUSER;
    args.user_ns = true;
    fmt::format_to_n(args.uid_map, sizeof args.uid_map - 1, "{0} {0} 1\n", ::geteuid());
    fmt::format_to_n(args.gid_map, sizeof args.gid_map - 1, "{0} {0} 1\n", ::getegid());
  };
  if ((confinement.pid_ns || confinement.net_ns) && ::geteuid() != 0) in_user_namespace();
  sigset_t all, old;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, &old);
  pid_t pid = ::clone(child_main, static_cast<char*>(stack) + kStack, flags, &args);
  int clone_errno = errno;
  if (pid < 0 && clone_errno == EPERM && !args.user_ns && (flags & (CLONE_NEWPID | CLONE_NEWNET)) != 0) {
    // Root without CAP_SYS_ADMIN (a container's): as an unprivileged user would.
    in_user_namespace();
    pid = ::clone(child_main, static_cast<char*>(stack) + kStack, flags, &args);
    clone_errno = errno;
  }
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  ::munmap(stack, kStack);
  if (pid < 0 && (flags & (CLONE_NEWPID | CLONE_NEWNET)) != 0)
    return make_error(ipc::errc::spawn,
                      fmt::format("cannot start bash in namespaces of its own{}: {}",
                                  args.user_ns ? " (in a user namespace: this system may not allow them "
                                                 "to unprivileged users, see user.max_user_namespaces)"
                                               : "",
                                  std::strerror(clone_errno)));
  if (pid < 0) return make_error(ipc::errc::spawn, fmt::format("cannot start bash: {}", std::strerror(clone_errno)));
  // The child has exec'd or exited: an error it set is final.
  if (args.error != 0) {
    ::waitpid(pid, nullptr, 0);
    if (args.failed_step != nullptr)
      return make_error(ipc::errc::spawn,
                        fmt::format("cannot confine bash: {}: {}", args.failed_step, std::strerror(args.error)));
    if (args.failed_limit != nullptr)
      return make_error(ipc::errc::spawn, fmt::format("cannot set limit {}: {}", format_limit(*args.failed_limit),
                                                      std::strerror(args.error)));
    return make_error(ipc::errc::spawn, fmt::format("cannot run {}: {}", bash_path, std::strerror(args.error)));
  }
  return pid;
}

}  // namespace sbsh::wrapper
