// wrapper/procs.cpp: reading /proc and signalling only what a command started.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "wrapper/procs.h"

namespace sbsh::procs {
namespace {

pid_t spawn_group_sleeper() {
  pid_t p = ::fork();
  if (p == 0) {
    ::setpgid(0, 0);
    ::execlp("sleep", "sleep", "30", nullptr);
    ::_exit(127);
  }
  ::setpgid(p, p);
  return p;
}

TEST(procs, ReadsItsOwnStat) {
  proc_info me;
  ASSERT_TRUE(read_stat(::getpid(), &me));
  EXPECT_EQ(me.pid, ::getpid());
  EXPECT_EQ(me.ppid, ::getppid());
  EXPECT_EQ(me.pgid, ::getpgrp());
  EXPECT_EQ(me.sid, ::getsid(0));
}

TEST(procs, SignalCommandSparesOlderGroups) {
  pid_t old_job = spawn_group_sleeper();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // a later clock tick
  int fd = ::open("/proc/sys/kernel/ns_last_pid", O_RDONLY | O_CLOEXEC);
  since_mark m = mark_now(fd);
  if (fd >= 0) ::close(fd);
  pid_t new_job = spawn_group_sleeper();
  // We stand in for the shell: both sleepers are our children, in our session.
  size_t n = signal_command(::getpid(), ::getsid(0), m, SIGKILL);
  EXPECT_GE(n, 1u);
  int st;
  ASSERT_EQ(::waitpid(new_job, &st, 0), new_job);
  EXPECT_TRUE(WIFSIGNALED(st));
  EXPECT_EQ(::waitpid(old_job, &st, WNOHANG), 0);  // still running
  ::kill(old_job, SIGKILL);
  ::waitpid(old_job, &st, 0);
}

TEST(procs, SignalTreeReachesTheGroup) {
  pid_t g = spawn_group_sleeper();
  EXPECT_TRUE(group_alive(g));
  EXPECT_EQ(signal_tree(g, SIGKILL), 1u);
  int st;
  ::waitpid(g, &st, 0);
  EXPECT_FALSE(group_alive(g));
}

}  // namespace
}  // namespace sbsh::procs
