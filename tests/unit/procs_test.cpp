// common/procs.cpp: reading /proc and signalling only what a command started.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "common/procs.h"

namespace sbsh::procs::procs_tests {

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

// What the child of SignalCommandSparesOlderGroups found; 0 is success.
enum spare_outcome { kSpared = 0, kNothingSignalled = 1, kNewJobSurvived = 2, kOldJobKilled = 3, kNoSession = 4 };

TEST(procs, SignalCommandSparesOlderGroups) {
  // signal_command signals every process of a session started after the mark. ctest runs
  // other tests beside this one in its own session, so the test runs in a child that starts
  // a session of its own: what it signals can only be what it started.
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setsid() < 0) ::_exit(kNoSession);
    pid_t old_job = spawn_group_sleeper();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // a later clock tick
    int fd = ::open("/proc/sys/kernel/ns_last_pid", O_RDONLY | O_CLOEXEC);
    since_mark m = mark_now(fd);
    if (fd >= 0) ::close(fd);
    pid_t new_job = spawn_group_sleeper();
    // This process stands in for the shell: both sleepers are its children, in its session.
    size_t n = signal_command(::getpid(), ::getsid(0), m, SIGKILL);
    int st = 0;
    bool new_killed = ::waitpid(new_job, &st, 0) == new_job && WIFSIGNALED(st);
    bool old_running = ::waitpid(old_job, &st, WNOHANG) == 0;
    ::kill(new_job, SIGKILL);
    ::kill(old_job, SIGKILL);
    while (::waitpid(-1, nullptr, 0) > 0) {
    }
    ::_exit(n == 0 ? kNothingSignalled : !new_killed ? kNewJobSurvived : !old_running ? kOldJobKilled : kSpared);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st)) << "the test's child died of signal " << WTERMSIG(st);
  EXPECT_EQ(WEXITSTATUS(st), kSpared) << "1: nothing signalled, 2: the new job survived, "
                                         "3: the older job was killed, 4: setsid failed";
}

TEST(procs, SignalTreeReachesTheGroup) {
  pid_t g = spawn_group_sleeper();
  EXPECT_TRUE(group_alive(g));
  EXPECT_EQ(signal_tree(g, SIGKILL), 1u);
  int st;
  ::waitpid(g, &st, 0);
  EXPECT_FALSE(group_alive(g));
}

}  // namespace sbsh::procs::procs_tests
