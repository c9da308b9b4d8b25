// Processes dying at awkward moments: a client and a wrapper gone while sbshd was stopped, a
// shell half started when sbshd died, sbshd killed while a command prints. sbshd never
// crashes or wedges, the state that can be kept is kept, and nothing is left behind.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "fixture.h"

namespace sbsh::test::crash_recovery_tests {

using crash_recovery_test = daemon_test;


pid_t start_cli(const std::vector<std::string>& args) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    auto argv = exec_argv(args);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// A client that disconnects at about the moment its session's wrapper dies (both happen
// while sbshd is stopped, so it sees them in one turn of its loop).
TEST_F(crash_recovery_test, AClientAndItsWrapperGoneAtOnceCrashNothing) {
  std::string marker = "sleep 100" + std::to_string(::getpid() % 1000);
  pid_t client = start_cli({bin("sbsh"), "-S", sock, "exec", "-s", "x", "--", marker});
  ASSERT_TRUE(wait_until([&] { return !processes_with(marker).empty(); }, std::chrono::seconds(20)));
  auto st = session_pids("x");
  ASSERT_EQ(::kill(daemon_pid, SIGSTOP), 0);
  ::kill(client, SIGKILL);
  ::waitpid(client, nullptr, 0);
  ::kill(static_cast<pid_t>(st.wrapper_pid), SIGKILL);
  ASSERT_EQ(::kill(daemon_pid, SIGCONT), 0);
  // A command sent before sbshd has seen the wrapper go would be refused as queued across a
  // restart (it did not run, and says so): wait for the new shell, then use it.
  ASSERT_TRUE(wait_until([&] { return session_status("x").restarts >= 1 && session_status("x").state == "ready"; },
                         std::chrono::seconds(20)));
  auto alive = exec("x", "echo alive");
  EXPECT_EQ(alive.out, "alive\n") << alive.err;
  EXPECT_TRUE(pid_alive(daemon_pid));
  // What the dead wrapper's session had started is swept.
  EXPECT_TRUE(wait_until([&] { return processes_with(marker).empty(); }, std::chrono::seconds(20)));
  stop_daemon();
  EXPECT_TRUE(processes_with(marker).empty());
}

// sbshd killed while a new shell runs its init commands: the next sbshd does not take over a
// shell that was never set up, and the session works, set up as defined.
TEST_F(crash_recovery_test, AHalfStartedShellIsNotAdopted) {
  std::string slow = "sleep 2.0" + std::to_string(::getpid() % 1000);  // two seconds, and ours
  ASSERT_EQ(sbsh({"session", "create", "h", "--init", slow + "; INITED=yes"}).code, 0);
  ASSERT_TRUE(wait_until([&] { return !processes_with(slow).empty(); }, std::chrono::seconds(20)));
  kill_daemon();
  start_daemon();
  auto r = sbsh({"exec", "-s", "h", "-t", "30s", "--", "echo ${INITED:-no}"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "yes\n") << r.err << std::ifstream(dir + "/sbshd.log").rdbuf();
}

// sbshd killed while a command prints: nothing reads its pipes any more, yet the shell (which
// writes them itself here) neither dies of SIGPIPE nor blocks; the next sbshd adopts it with
// its state, and the command runs to its end.
// sbshd is killed, and its client with it, while a command prints 400,000 lines through `how`
// (the exec options that say where its output goes): the command runs to its end (its
// marker file appears) and the next sbshd finds the state it left in the same shell.
class crash_while_printing_test : public daemon_test {
 protected:
  void command_outlives_sbshd(const std::vector<std::string>& how) {
    ASSERT_EQ(exec("p", "v=before").code, 0);
    auto st = session_pids("p");
    std::string done = dir + "/done", flowing = dir + "/flowing";
    std::vector<std::string> argv{bin("sbsh"), "-S", sock, "exec"};
    argv.insert(argv.end(), how.begin(), how.end());
    argv.insert(argv.end(), {"-s", "p", "--",
                             "for i in $(seq 400000); do echo line $i; [ $i != 2000 ] || : >" + flowing +
                                 "; done; v=after; touch " + done});
    pid_t client = start_cli(argv);
    ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(flowing); }, std::chrono::seconds(20)));
    kill_daemon();
    ::waitpid(client, nullptr, 0);
    EXPECT_TRUE(wait_until([&] { return std::filesystem::exists(done); }, std::chrono::seconds(60)));
    start_daemon();
    auto r = sbsh({"exec", "-s", "p", "-t", "60s", "--", "echo $v $$"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "after " + std::to_string(st.shell_pid) + "\n");
  }
};

// The client holds the command's pipes until it dies with sbshd.
TEST_F(crash_while_printing_test, KillingSbshdWhileACommandPrintsKeepsTheSession) { command_outlives_sbshd({}); }

// The output in frames (--json): sbshd held the pipes, and the shell holds their read ends
// while the command runs. When sbshd dies, the shell lends them to its wrapper (it is
// undumpable: nothing can take them from it), which reads them into nothing, so the command
// neither blocks on a full pipe nor dies of SIGPIPE.
TEST_F(crash_while_printing_test, KillingSbshdWhileACommandPrintsToItKeepsTheCommandRunning) {
  command_outlives_sbshd({"--json"});
}

// On a terminal of its own (--tty): the shell holds the terminal's master as it holds a
// pipe's read end, so sbshd's end hangs nothing up (a hang-up would end the shell, which
// leads the terminal's session), and the wrapper reads it into nothing.
TEST_F(crash_while_printing_test, KillingSbshdWhileATerminalCommandPrintsKeepsTheSession) {
  command_outlives_sbshd({"--tty"});
}

}  // namespace sbsh::test::crash_recovery_tests
