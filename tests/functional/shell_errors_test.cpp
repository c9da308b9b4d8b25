// A session's shell behaves as at an interactive prompt: errors that a prompt reports and
// survives (set -u, ${X:?}, a special builtin's error in posix mode, a failed exec) fail the
// command with bash's own message and status while the shell, its pid and its state stay;
// so does a failure under `set -e`, which ends the command text, not the shell. `exit` still
// ends it. Aliases defined by one command work in the next. Nothing
// of a background job reaches a later command's result, and a timeout reports the signal the
// command received, never the interrupt sbshd uses to stop the shell's text.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "fixture.h"

namespace sbsh::test::shell_errors_tests {

using json = nlohmann::json;

class shell_errors_test : public daemon_test {
 protected:
  // One command with --json: its result object, and the CLI's exit code in "cli".
  json exec_json(const std::string& session, const std::string& command) {
    auto r = sbsh({"exec", "-s", session, "--json", "--", command});
    json j = json::parse(r.out);
    j["cli"] = r.code;
    return j;
  }

  // The shell's pid, and the generation that reports it.
  std::pair<std::string, uint64_t> shell_of(const std::string& session) {
    auto j = exec_json(session, "echo $$");
    return {j["stdout"].get<std::string>(), j["generation"].get<uint64_t>()};
  }

  // Runs `command`, which must fail with exactly `err` on stderr and status `code`, in the
  // same shell as before, and leave the state that `check` prints as `expected`.
  void fails_and_keeps_the_shell(const std::string& session, const std::string& command, int code,
                                 const std::string& err, const std::string& check, const std::string& expected) {
    auto before = shell_of(session);
    auto j = exec_json(session, command);
    EXPECT_EQ(j["exit_code"], code) << command << ": " << j.dump();
    EXPECT_EQ(j["cli"], code) << command;
    EXPECT_EQ(j["stderr"], err) << command;
    EXPECT_EQ(j["stdout"], "") << command;
    EXPECT_FALSE(j["shell_restarted"].get<bool>()) << command;
    EXPECT_FALSE(j["state_lost"].get<bool>()) << command;
    EXPECT_EQ(j["generation"], before.second) << command;
    EXPECT_EQ(shell_of(session), before) << command << ": the shell was replaced";
    EXPECT_EQ(exec(session, check).out, expected) << command;
  }
};

TEST_F(shell_errors_test, AnUnboundVariableUnderSetUFailsTheCommandNotTheShell) {
  ASSERT_EQ(exec("s", "kept=yes; set -u").code, 0);
  // The rest of the text does not run, as a script would stop there.
  fails_and_keeps_the_shell("s", "echo $TYPO; echo same", 1, "bash: line 1: TYPO: unbound variable\n",
                            "echo $kept; [[ $- == *u* ]] && echo nounset", "yes\nnounset\n");
  fails_and_keeps_the_shell("s", "echo ${X:?missing}; echo same", 1, "bash: line 1: X: missing\n", "echo $kept",
                            "yes\n");
  // Inside a function: its locals are gone afterwards, the globals are as they were.
  fails_and_keeps_the_shell("s", "f() { local kept=local; echo $TYPO; }; f", 1,
                            "main: line 1: TYPO: unbound variable\n", "echo $kept", "yes\n");
}

TEST_F(shell_errors_test, ASpecialBuiltinErrorInPosixModeFailsTheCommandNotTheShell) {
  ASSERT_EQ(exec("s", "set -o posix; readonly r=1").code, 0);
  fails_and_keeps_the_shell("s", "r=2; echo same", 1, "bash: line 1: r: readonly variable\n",
                            "echo $r; shopt -qo posix && echo posix", "1\nposix\n");
  fails_and_keeps_the_shell("s", ": ${unset_var?}; echo same", 1, "bash: line 1: unset_var: parameter not set\n",
                            "echo $r", "1\n");
  fails_and_keeps_the_shell("s", ". /no/such/file; echo same", 1,
                            "bash: line 1: /no/such/file: No such file or directory\n", "echo $r", "1\n");
}

TEST_F(shell_errors_test, AFailedExecFailsTheCommandAndKeepsJobControlAndStderr) {
  ASSERT_EQ(exec("s", "kept=yes").code, 0);
  fails_and_keeps_the_shell("s", "exec /no/such/file", 127, "bash: line 1: /no/such/file: No such file or directory\n",
                            "echo $kept", "yes\n");
  std::string plain = dir + "/not-executable";
  std::ofstream(plain) << "echo hi\n";
  ASSERT_EQ(::chmod(plain.c_str(), 0644), 0);
  fails_and_keeps_the_shell("s", "exec " + plain, 126,
                            "bash: line 1: " + plain + ": Permission denied\nbash: line 1: exec: " + plain +
                                ": cannot execute: Permission denied\n",
                            "echo $kept", "yes\n");
  // As at a prompt, the rest of the line runs, with its stderr still there.
  auto r = exec("s", "exec /no/such/file; echo after $? >&2");
  EXPECT_EQ(r.err, "bash: line 1: /no/such/file: No such file or directory\nafter 127\n");
  // Job control is still on: a background job has a process group of its own.
  r = exec("s", "[[ $- == *m* ]] && echo m; sleep 30 & echo $!");
  ASSERT_EQ(r.out.substr(0, 2), "m\n") << r.out;
  pid_t bg = std::stoi(r.out.substr(2));
  EXPECT_EQ(::getpgid(bg), bg);
  ::kill(bg, SIGKILL);
}

TEST_F(shell_errors_test, ExitStillEndsTheShell) {
  auto before = shell_of("s");
  auto j = exec_json("s", "exit 3");
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_TRUE(j["shell_restarted"].get<bool>());
  EXPECT_NE(shell_of("s").first, before.first);
}

// Agents run `set -euo pipefail` in sessions they mean to keep: a failure under it ends the
// command text with the failing status, as the end of a script would, and the shell, its
// state and the options themselves stay for the next command.
TEST_F(shell_errors_test, AFailureUnderSetEEndsTheCommandNotTheShell) {
  ASSERT_EQ(exec("s", "kept=yes; set -euo pipefail").code, 0);
  fails_and_keeps_the_shell("s", "false; echo never", 1, "", "echo $kept; [[ $- == *e* && $- == *u* && -o pipefail ]] && echo on",
                            "yes\non\n");
  fails_and_keeps_the_shell("s", "echo start >/dev/null; (exit 7); echo never", 7, "", "echo $kept", "yes\n");
  fails_and_keeps_the_shell("s", "true | false | true; echo never", 1, "", "echo $kept", "yes\n");
  fails_and_keeps_the_shell("s", "echo $TYPO; echo never", 1, "bash: line 1: TYPO: unbound variable\n",
                            "echo $kept", "yes\n");
  fails_and_keeps_the_shell("s", "x=$(false); echo never", 1, "", "echo $kept", "yes\n");
}

TEST_F(shell_errors_test, AnAliasDefinedByOneCommandWorksInTheNext) {
  ASSERT_EQ(exec("s", "alias ll='echo aliased'").code, 0);
  auto r = exec("s", "ll");
  EXPECT_EQ(r.out, "aliased\n");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(exec("s", "shopt expand_aliases").out, "expand_aliases \ton\n");
}

// A background job killed from outside while the session is idle: bash learns of it then,
// and its notice must not land in whichever command runs next.
TEST_F(shell_errors_test, NoNoticeOfAnEarlierJobReachesALaterCommand) {
  for (int sig : {SIGTERM, SIGKILL}) {
    auto r = exec("j", "sleep 300 >/dev/null 2>&1 & echo $!");
    pid_t bg = std::stoi(r.out);
    ASSERT_GT(bg, 0);
    ASSERT_EQ(::kill(bg, sig), 0);
    ASSERT_TRUE(wait_until([&] { return !pid_alive(bg); }, std::chrono::seconds(10)));
    r = exec("j", "echo x");
    EXPECT_EQ(r.out, "x\n");
    EXPECT_EQ(r.err, "") << "signal " << sig;
    r = exec("j", "sleep 0.1; echo y");
    EXPECT_EQ(r.out, "y\n");
    EXPECT_EQ(r.err, "") << "signal " << sig;
    EXPECT_EQ(exec("j", "wait " + std::to_string(bg) + "; echo $?").out, std::to_string(128 + sig) + "\n");
  }
}

TEST_F(shell_errors_test, JobsWaitAndKillOfAnEarlierJobStillWork) {
  auto r = exec("j", "sleep 300 & echo $!");
  pid_t bg = std::stoi(r.out);
  r = exec("j", "jobs");
  EXPECT_EQ(r.out, "[1]+  Running                 sleep 300 &\n");
  r = exec("j", "kill %1; wait %1; echo $?");
  EXPECT_EQ(r.out, "143\n");
  EXPECT_EQ(r.err, "");
  EXPECT_FALSE(pid_alive(bg));
  r = exec("j", "jobs; echo x");
  EXPECT_EQ(r.out, "x\n");
  EXPECT_EQ(r.err, "");
}

// Within one command, notices are as bash without job control gives them (a script, `bash
// -c`): none for a background job that SIGTERM ended, though each job has its process group.
TEST_F(shell_errors_test, ACommandsOwnJobsGetNoNoticeThatPlainBashWouldNotPrint) {
  for (const std::string text : {"sleep 300 & kill $!; wait $!; echo $?", "sleep 300 & kill %1; wait %1; echo $?",
                                 "sleep 300 & kill $!; sleep 0.5; wait; echo $?"}) {
    auto plain = run({"/bin/bash", "-c", text});
    auto r = exec("j", text);
    EXPECT_EQ(r.out, plain.out) << text;
    EXPECT_EQ(r.err, "") << text;
    EXPECT_EQ(plain.err, "") << text;
  }
  auto r = exec("j", "sleep 300 & echo $! $(ps -o pgid= -p $!); kill $!");
  auto words = r.out.substr(0, r.out.find('\n'));
  auto space = words.find(' ');
  EXPECT_EQ(trim(words.substr(space + 1)), words.substr(0, space)) << r.out;  // its own process group
  EXPECT_EQ(r.err, "");
}

// The timeout sends the command SIGTERM; the shell's own text is stopped with SIGINT, which
// is sbshd's means and never the result's signal or status: the status is what the command's
// last process gave when it was stopped.
TEST_F(shell_errors_test, ATimeoutReportsTheSignalTheCommandReceivedNeverTheShellsInterrupt) {
  auto r = sbsh({"exec", "-s", "t", "-t", "1", "--json", "--",
                 "trap 'exit 0' TERM; bash -c 'trap \"exit 5\" TERM; sleep 10 & wait'"});
  EXPECT_EQ(r.code, 124) << r.err;
  json j = json::parse(r.out);
  EXPECT_TRUE(j["timed_out"].get<bool>());
  EXPECT_FALSE(j["shell_restarted"].get<bool>());
  EXPECT_TRUE(j["signal"].is_null()) << r.out;
  EXPECT_EQ(j["exit_code"], 5) << r.out;  // what `bash -c` exited with on the timeout's TERM
  // The rest of the text is abandoned all the same, and the session goes on.
  r = sbsh({"exec", "-s", "t", "-t", "1", "--json", "--",
            "bash -c 'trap \"exit 6\" TERM; sleep 10 & wait'; echo after"});
  j = json::parse(r.out);
  EXPECT_EQ(j["exit_code"], 6) << r.out;
  EXPECT_EQ(j["stdout"], "") << r.out;
  EXPECT_EQ(sbsh({"exec", "-s", "t", "--", "trap - TERM; echo still"}).out, "still\n");
  // A loop of builtins: only the shell's interrupt stopped it.
  // A process that ended by itself before the timeout is not what the timeout stopped.
  r = sbsh({"exec", "-s", "t", "-t", "1", "--json", "--", "/bin/true; while :; do :; done"});
  EXPECT_EQ(r.code, 124);
  j = json::parse(r.out);
  EXPECT_TRUE(j["signal"].is_null()) << r.out;
  EXPECT_EQ(j["exit_code"], 130) << r.out;  // bash's status for an abandoned text
  // The timeout's SIGTERM ended the last process: that signal is reported.
  r = sbsh({"exec", "-s", "t", "-t", "1", "--json", "--", "sleep 10"});
  EXPECT_EQ(r.code, 124);
  j = json::parse(r.out);
  EXPECT_EQ(j["signal"], "SIGTERM") << r.out;
  EXPECT_EQ(j["exit_code"], 143);
}

}  // namespace sbsh::test::shell_errors_tests
