// fork()+exec() of bash. Everything after fork() in the child is async-signal-safe; an exec
// failure travels back to the parent over a close-on-exec pipe.
#include "wrapper/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

extern char** environ;

namespace sbsh::wrapper {

namespace {

[[noreturn]] void child_fail(int report_fd, int err) {
  ssize_t r = ::write(report_fd, &err, sizeof err);
  (void)r;
  ::_exit(127);
}

// Runs in the child between fork() and execve(): async-signal-safe calls only.
[[noreturn]] void exec_shell_child(const char* bash_path, int script_fd, int status_fd, int report_fd,
                                   pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
  int devnull = ::open("/dev/null", O_RDWR);
  if (devnull < 0) child_fail(report_fd, errno);
  // Move the report pipe out of the way of 0..2 before dup2 overwrites them.
  if (report_fd <= 2) {
    int moved = ::fcntl(report_fd, F_DUPFD_CLOEXEC, 10);
    if (moved < 0) ::_exit(127);
    report_fd = moved;
  }
  if (::dup2(script_fd, 0) < 0 || ::dup2(status_fd, 1) < 0 || ::dup2(devnull, 2) < 0)
    child_fail(report_fd, errno);
  // Close every other descriptor except the report pipe (close-on-exec already): two
  // close_range calls instead of a close() per possible descriptor.
  if (report_fd > 3) ::close_range(3, static_cast<unsigned>(report_fd) - 1, 0);
  ::close_range(static_cast<unsigned>(report_fd) + 1, ~0U, 0);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Every disposition back to the default, through the kernel's call: glibc's sigaction()
  // refuses its two internal signals (32 and 33), which its posix_spawn (how sbshd starts
  // this wrapper) leaves ignored, and an ignored signal would stay ignored in bash and in
  // every command. A zeroed kernel sigaction is SIG_DFL, no flags and an empty mask on
  // every architecture.
  const unsigned long dfl[4] = {};
  for (int s = 1; s < NSIG; ++s)
    if (s != SIGKILL && s != SIGSTOP) ::syscall(SYS_rt_sigaction, s, dfl, nullptr, NSIG / 8);
  char arg0[] = "bash";
  char arg1[] = "--noprofile";
  char arg2[] = "--norc";
  char* argv[] = {arg0, arg1, arg2, nullptr};
  ::execve(bash_path, argv, environ);
  child_fail(report_fd, errno);
}

}  // namespace

result<pid_t> spawn_shell(const char* bash_path, int script_fd, int status_fd) {
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0)
    return make_error("spawn", fmt::format("pipe: {}", std::strerror(errno)));
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(report[0]);
    ::close(report[1]);
    return make_error("spawn", fmt::format("cannot fork bash: {}", std::strerror(e)));
  }
  if (pid == 0) exec_shell_child(bash_path, script_fd, status_fd, report[1], parent);
  ::close(report[1]);
  int child_errno = 0;
  ssize_t n;
  do n = ::read(report[0], &child_errno, sizeof child_errno);
  while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    ::waitpid(pid, nullptr, 0);
    return make_error("spawn", fmt::format("cannot run {}: {}", bash_path, std::strerror(child_errno)));
  }
  return pid;
}

}  // namespace sbsh::wrapper
