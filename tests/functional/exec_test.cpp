// sbsh exec against a real daemon: state, bytes, stdin, the hard cases of DESIGN §2.
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "attach_tty.h"
#include "fixture.h"

namespace sbsh::test {

using json = nlohmann::json;

namespace exec_tests {

using exec_test = daemon_test;

TEST_F(exec_test, EveryKindOfStatePersists) {
  ASSERT_EQ(exec("s", "cd /tmp && export EXP=exported && plain=plainvar").code, 0);
  ASSERT_EQ(exec("s", "declare -A assoc=([k]=v) && f() { echo \"fn:$1\"; }").code, 0);
  ASSERT_EQ(exec("s", "shopt -s expand_aliases; alias ll='echo aliased'").code, 0);
  ASSERT_EQ(exec("s", "set -o pipefail; trap 'echo usr1' USR1").code, 0);
  auto r = exec("s", "pwd; echo $EXP $plain ${assoc[k]}; f x; ll; [[ -o pipefail ]] && echo pipefail-on; trap -p USR1");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "/tmp\nexported plainvar v\nfn:x\naliased\npipefail-on\ntrap -- 'echo usr1' SIGUSR1\n");
  EXPECT_EQ(exec("s", "bash -c 'echo $EXP'").out, "exported\n");  // exported, not just set
  EXPECT_EQ(exec("s", "false").code, 1);
  EXPECT_EQ(exec("s", "echo $?").out, "1\n");  // the previous command's status
}

// The builtin that serves commands inside the shell runs the text with bash's own evaluator,
// so a user's functions or aliases named like bash's builtins are the user's state: they run
// when the user calls them and nowhere else, and never stop the next command from being
// reported. The builtin's own name has a space in it, which no function can have. A -t bounds
// each try, so a regression fails instead of hanging.
TEST_F(exec_test, FunctionsNamedLikeTheShellsOwnBuiltinsDoNotWedgeTheSession) {
  auto bounded = [&](const std::string& cmd) { return sbsh({"exec", "-s", "s", "-t", "20s", "--", cmd}); };
  auto r = bounded(R"(eval() { echo "eval:$*"; builtin eval "$@"; }; enable() { echo enable; })");
  ASSERT_EQ(r.code, 0) << r.err;
  r = bounded("printf() { echo printf; }; :() { echo colon; }; set() { echo set; }; trap() { echo trap; }");
  ASSERT_EQ(r.code, 0) << r.err;
  r = bounded("shopt -s expand_aliases; alias builtin='echo aliased'");
  ASSERT_EQ(r.code, 0) << r.err;
  r = bounded("echo plain; exit_with() { return $1; }; exit_with 3");
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(r.out, "plain\n");
  // The functions are still there, and run when the user calls them.
  r = bounded("eval echo hi; printf x; :");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "eval:echo hi\nhi\nprintf\ncolon\n");
  EXPECT_EQ(r.err, "");
  // The shell is interrupted (a timeout) with all of those defined, and serves on.
  EXPECT_EQ(sbsh({"exec", "-s", "s", "-t", "300ms", "--", "while :; do :; done"}).code, 124);
  auto c = conn();
  client::exec_options o;
  o.session = "s";
  o.command = "eval echo lib; exit_with 4";
  o.timeout = std::chrono::seconds(20);
  auto lib = c.exec(o);
  ASSERT_TRUE(lib.ok()) << lib.err().message;
  EXPECT_EQ(lib->stdout_data, "eval:echo lib\nlib\n");
  EXPECT_EQ(lib->exit_code, 4);
  // The builtin cannot be called by a command, and disabling it does not take: it serves on
  // after the next interrupt, which brings bash back to it by name.
  r = bounded("'__sbsh serve'");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("sbsh's own"), std::string::npos) << r.err;
  ASSERT_EQ(bounded("unset -f enable; enable -n '__sbsh serve'").code, 0);
  EXPECT_EQ(sbsh({"exec", "-s", "s", "-t", "300ms", "--", "while :; do :; done"}).code, 124);
  EXPECT_EQ(bounded("echo still; type -t eval").out, "still\nfunction\n");
}

// Descriptors the builtin keeps in the shell (its channel to sbshd) are out of a command's
// way; one that a command closes or replaces is restored from its copy, and the state stays.
TEST_F(exec_test, ACommandThatClosesTheShellsOwnDescriptorsDoesNotLoseTheSession) {
  ASSERT_EQ(exec("s", "v=kept").code, 0);
  auto r = exec("s", "exec 254>&-; echo closed");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "closed\n");
  r = exec("s", "exec 254>" + dir + "/f; echo replaced");
  EXPECT_EQ(r.out, "replaced\n");
  EXPECT_EQ(exec("s", "echo $v").out, "kept\n");
  // Both copies gone: the shell says why it cannot go on, and the loss is reported.
  r = sbsh({"exec", "-s", "s", "--json", "--", "exec 253>&- 254>&-; echo both"});
  auto j = json::parse(r.out);
  EXPECT_TRUE(j.at("shell_restarted").get<bool>()) << r.out;
  EXPECT_NE(j.at("stderr").get<std::string>().find("closed the shell's channel"), std::string::npos) << r.out;
  EXPECT_EQ(exec("s", "echo next").out, "next\n");
}

TEST_F(exec_test, SessionsAreSeparate) {
  ASSERT_EQ(exec("a", "x=in-a").code, 0);
  EXPECT_EQ(exec("b", "echo \"[$x]\"").out, "[]\n");
  EXPECT_EQ(exec("a", "echo \"[$x]\"").out, "[in-a]\n");
}

TEST_F(exec_test, OutputBytesAreExactAndStreamsApart) {
  auto r = exec("s", R"(printf 'a\0b\xff\xfe no newline'; printf 'err\0x' >&2)");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, std::string("a\0b\xff\xfe no newline", 16));
  EXPECT_EQ(r.err, std::string("err\0x", 5));
  // Text that looks like a completion marker is just output.
  r = exec("s", "echo '__END__0'; printf '\\n0\\n'; echo 'MARK$?'");
  EXPECT_EQ(r.out, "__END__0\n\n0\nMARK$?\n");
  r = exec("s", "echo 'héllo wörld ✓ 🚀'");
  EXPECT_EQ(r.out, "héllo wörld ✓ 🚀\n");
}

TEST_F(exec_test, JsonCarriesEveryFieldAndExactBytes) {
  auto r = sbsh({"exec", "-s", "j", "--json", "--", "printf 'ok\\xff'; echo e >&2; exit 4"});
  EXPECT_EQ(r.code, 4);
  auto j = json::parse(r.out);
  EXPECT_EQ(j.at("session"), "j");
  EXPECT_EQ(j.at("command"), "printf 'ok\\xff'; echo e >&2; exit 4");
  EXPECT_EQ(j.at("exit_code"), 4);
  EXPECT_TRUE(j.at("signal").is_null());
  EXPECT_FALSE(j.at("timed_out").get<bool>());
  EXPECT_TRUE(j.at("shell_restarted").get<bool>());  // `exit` ended the shell
  EXPECT_TRUE(j.at("ran").get<bool>());
  EXPECT_EQ(j.at("stdout"), "ok\xef\xbf\xbd");
  EXPECT_EQ(j.at("stdout_base64"), "b2v/");  // "ok\xff"
  EXPECT_EQ(j.at("stderr"), "e\n");
  EXPECT_TRUE(j.at("stderr_base64").is_null());  // every key is there, null when empty
  EXPECT_FALSE(j.at("stdout_truncated").get<bool>());
  EXPECT_FALSE(j.at("stderr_truncated").get<bool>());
  EXPECT_TRUE(j.at("duration_ms").is_number());
  EXPECT_EQ(j.at("started_at").get<std::string>().size(), 24u);  // 2026-11-22T13:58:50.123Z
  EXPECT_EQ(j.at("started_at").get<std::string>().back(), 'Z');
  // Truncation is reported, never silent: the first and the last part, and what is between
  // them counted (seq 100 writes 292 bytes).
  r = sbsh({"exec", "-s", "j", "--json", "--output-limit", "10", "--", "seq 100"});
  j = json::parse(r.out);
  EXPECT_EQ(j.at("stdout"), "1\n2\n3\n100\n");  // "1\n2\n3" and "\n100\n"
  EXPECT_TRUE(j.at("stdout_truncated").get<bool>());
  EXPECT_EQ(j.at("stdout_omitted_bytes"), 282);
}

TEST_F(exec_test, SixtyMegabytesArriveIntact) {
  auto r = exec("s", helper() + " write 60000000");
  ASSERT_EQ(r.code, 0);
  ASSERT_EQ(r.out.size(), 60000000u);
  for (size_t i = 0; i < r.out.size(); i += 4099) ASSERT_EQ(r.out[i], static_cast<char>('a' + (i % 65536) % 26)) << i;
}

TEST_F(exec_test, StdinIsNullUnlessGiven) {
  auto t0 = std::chrono::steady_clock::now();
  auto r = exec("s", "cat; read x; echo \"read=$? x=[$x]\"");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(r.out, "read=1 x=[]\n");
  std::string in = "hi";
  r = sbsh({"exec", "-s", "s", "cat"}, &in);
  EXPECT_EQ(r.out, "hi");
  std::string big(size_t{20} * 1000 * 1000, 'z');
  r = sbsh({"exec", "-s", "s", "wc -c"}, &big);
  EXPECT_EQ(r.out, "20000000\n");
  // After a command that was given stdin, or that replaced or closed its own, the next one
  // without stdin reads nothing again.
  r = sbsh({"exec", "-s", "s", "cat"}, &in);
  EXPECT_EQ(exec("s", "cat; echo \"$?\"").out, "0\n");
  EXPECT_EQ(exec("s", "exec 0</etc/hostname").code, 0);
  EXPECT_EQ(exec("s", "cat; echo \"$?\"").out, "0\n");
  EXPECT_EQ(exec("s", "exec 0<&-").code, 0);
  EXPECT_EQ(exec("s", "cat; echo \"$?\"").out, "0\n");
}

// Pipelines around sbsh behave as they would around the command itself.
TEST_F(exec_test, PipesAroundSbshBehaveAsAroundTheCommand) {
  std::string cli = shell_quote(bin("sbsh")) + " --socket " + shell_quote(sock);
  // A command that stops reading its stdin early is not a failure of sbsh (no SIGPIPE).
  std::string big(size_t{20} * 1000 * 1000, 'z');
  auto r = sbsh({"exec", "-s", "s", "head -c 5 | wc -c"}, &big);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "5\n");
  // A reader that goes away stops the writer with SIGPIPE, as in `yes | head -1`; the
  // command's later steps run, and the session goes on.
  r = run({"/bin/bash", "-c", cli + " exec -s s yes | head -1; echo \"${PIPESTATUS[*]}\""}, nullptr,
          std::chrono::seconds(60));
  EXPECT_EQ(r.out, "y\n141 0\n");
  r = run({"/bin/bash", "-c", cli + " exec -s s 'yes; echo after >&2' | head -1; echo \"${PIPESTATUS[*]}\""},
          nullptr, std::chrono::seconds(60));
  EXPECT_EQ(r.out, "y\n0 0\n");
  EXPECT_EQ(r.err, "after\n");
  EXPECT_EQ(exec("s", "echo ok").out, "ok\n");
}

TEST_F(exec_test, CommandsSeeOnlyStandardDescriptors) {
  EXPECT_EQ(exec("s", helper() + " fds").out, "0 1 2\n");
  std::string in = "x";
  EXPECT_EQ(sbsh({"exec", "-s", "s", helper() + " fds"}, &in).out, "0 1 2\n");
}

TEST_F(exec_test, CommandsStartWithNoSignalIgnoredOrBlocked) {
  // Nothing of sbshd's or the wrapper's signal state reaches a command: sbshd ignores
  // SIGPIPE, and the way it starts wrappers leaves glibc's internal signals 32 and 33
  // ignored; both must be back to their defaults in the session.
  auto r = exec("s", "grep -E '^Sig(Blk|Ign)' /proc/self/status");
  EXPECT_EQ(r.out, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

TEST_F(exec_test, ExitEndsTheShellAndTheNextCommandWorks) {
  ASSERT_EQ(exec("s", "cd /tmp; v=1").code, 0);
  auto r = exec("s", "exit 3");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("state"), std::string::npos) << r.err;  // says the state was lost
  r = exec("s", "pwd; echo \"[$v]\"");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out.substr(r.out.find('\n') + 1), "[]\n");
  EXPECT_EQ(exec("s", "kill -9 $$").code, 137);
  EXPECT_EQ(exec("s", "echo back").out, "back\n");
  EXPECT_EQ(exec("s", "set -e; false").code, 1);
  EXPECT_EQ(exec("s", "echo again").out, "again\n");
}

TEST_F(exec_test, RedirectionsAndTrapsBehaveAsInAShell) {
  EXPECT_EQ(exec("s", "exec >/dev/null; echo hidden").out, "");
  EXPECT_EQ(exec("s", "echo visible").out, "visible\n");  // a command's exec >... does not leak
  std::string f = dir + "/fd3";
  ASSERT_EQ(exec("s", "exec 3>" + f + "; echo three >&3").code, 0);
  EXPECT_EQ(exec("s", "echo more >&3; cat " + f).out, "three\nmore\n");  // the shell keeps fd 3
  // An EXIT trap runs when the shell exits, within the command that ended it: what it
  // prints is that command's output.
  auto r = exec("s", "trap 'echo bye; echo bye-err >&2; echo bye >" + dir + "/trap' EXIT; exit 0");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "bye\n");
  EXPECT_NE(r.err.find("bye-err\n"), std::string::npos) << r.err;
  EXPECT_TRUE(std::ifstream(dir + "/trap").good());
  EXPECT_EQ(exec("s", "ulimit -n 100; ulimit -n").out, "100\n");
  EXPECT_EQ(exec("s", "cat <<EOF\nline 1\n  line $((1+1))\nEOF").out, "line 1\n  line 2\n");
  EXPECT_EQ(exec("s", "for i in 1 2; do\n  echo \"i=$i\"\ndone\nif true; then echo yes; fi").out, "i=1\ni=2\nyes\n");
  r = exec("s", "if then fi");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("syntax error"), std::string::npos);
  EXPECT_EQ(exec("s", "echo fine").out, "fine\n");
}

TEST_F(exec_test, AMegabyteCommandRuns) {
  auto c = conn();
  client::exec_options o;
  o.session = "big";
  o.command = "v='" + std::string(1 << 20, 'x') + "'; echo ${#v}";
  auto r = c.exec(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_data, "1048576\n");
  // Shorter texts after longer ones: nothing of an earlier text may run again. (sbshd keeps
  // the text slot's size between commands and ends each text with a NUL.)
  o.command = "echo ${#v} medium; : '" + std::string(100000, 'y') + "'";
  r = c.exec(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "1048576 medium\n");
  o.command = "echo short";
  r = c.exec(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "short\n");
  o.command = "";
  r = c.exec(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_data, "");
}

TEST_F(exec_test, BackgroundJobsReturnAtOnceAndDoNotLeak) {
  auto t0 = std::chrono::steady_clock::now();
  auto r = exec("s", "sleep 60 & echo started");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  EXPECT_EQ(r.out, "started\n");
  r = exec("s", "(sleep 1; echo late) & echo early");
  EXPECT_EQ(r.out, "early\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  r = exec("s", "echo next");
  EXPECT_EQ(r.out, "next\n");  // "late" went nowhere near this result
  // The late writer was not killed for writing: sbshd drains what background jobs write.
  r = exec("s", "(sleep 0.5; echo late2; echo alive >" + dir + "/alive) & true");
  EXPECT_TRUE(wait_until([&] { return std::ifstream(dir + "/alive").good(); }, std::chrono::seconds(10)));
}

TEST_F(exec_test, CwdAndEnvApplyToOneCommand) {
  ASSERT_EQ(exec("s", "cd /").code, 0);
  auto r = sbsh({"exec", "-s", "s", "-C", "/tmp", "-e", "ONLY=once", "--", "pwd; echo $ONLY; cd /usr"});
  EXPECT_EQ(r.out, "/tmp\nonce\n");
  EXPECT_EQ(exec("s", "pwd; echo \"[$ONLY]\"").out, "/\n[]\n");
  EXPECT_EQ(sbsh({"exec", "-s", "s", "echo", "a", "b", "c"}).out, "a b c\n");  // words joined
  r = sbsh({"exec", "-s", "s", "-C", "/nonexistent", "--", "true"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("cannot run in /nonexistent: No such file"), std::string::npos) << r.err;
}

TEST_F(exec_test, InvalidSessionNamesAreRefusedWithTheRule) {
  for (const std::string& bad : std::vector<std::string>{"bad name", "", "../x", "-x", std::string(65, 'a'), "a/b"}) {
    auto r = sbsh({"exec", "-s", bad, "--", "true"});
    EXPECT_EQ(r.code, 255) << bad;
    EXPECT_NE(r.err.find("invalid session name"), std::string::npos) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("[A-Za-z0-9._-]"), std::string::npos) << r.err;
  }
  EXPECT_EQ(sbsh({"exec", "-s", std::string(64, 'a'), "--", "echo ok"}).out, "ok\n");
  EXPECT_EQ(sbsh({"exec", "-s", "A1.b_c-d", "--", "echo ok"}).out, "ok\n");
}

TEST_F(exec_test, FailuresOfSbshItselfExit255WithOneLine) {
  auto r = run({bin("sbsh"), "--socket", dir + "/run/nothing.sock", "--no-autostart", "exec", "true"});
  EXPECT_EQ(r.code, 255);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("no sbshd"), std::string::npos);
  r = sbsh({"exec", "-t", "soon", "true"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("invalid duration"), std::string::npos);
  r = sbsh({"exec"});
  EXPECT_EQ(r.code, 255);
  EXPECT_EQ(sbsh({"exec", "sh -c 'kill -TERM $$'"}).code, 143);  // 128+N for a signal
}

TEST_F(exec_test, StatusAndShutdown) {
  ASSERT_EQ(exec("one", "true").code, 0);
  auto r = sbsh({"status", "--json"});
  ASSERT_EQ(r.code, 0);
  auto j = json::parse(r.out);
  EXPECT_EQ(j.at("pid"), daemon_pid);
  EXPECT_FALSE(j.at("version").get<std::string>().empty());
  EXPECT_EQ(j.at("socket"), sock);
  ASSERT_EQ(j.at("sessions").size(), 1u);
  const auto& s = j.at("sessions").at(0);
  EXPECT_EQ(s.at("name"), "one");
  auto shell = s.at("shell_pid").get<pid_t>(), wrapper = s.at("wrapper_pid").get<pid_t>();
  EXPECT_TRUE(pid_alive(shell));
  EXPECT_TRUE(pid_alive(wrapper));
  EXPECT_EQ(sbsh({"version"}).code, 0);
  stop_daemon();
  EXPECT_FALSE(pid_alive(shell));
  EXPECT_FALSE(pid_alive(wrapper));
}

}  // namespace exec_tests
}  // namespace sbsh::test

namespace sbsh::test::exec_tests {

TEST_F(exec_test, AttachRunsLinesFromAPipeInOrder) {
  std::string lines = "cd /tmp\nx=5\necho \"$x $(pwd)\"\nexit_code_of_last() { return 3; }; exit_code_of_last\n";
  auto r = sbsh({"attach", "-s", "att"}, &lines);
  EXPECT_EQ(r.out, "5 /tmp\n");
  EXPECT_EQ(r.code, 3);  // the last command's status
  EXPECT_EQ(exec("att", "echo $x").out, "5\n");  // it was the session's shell
}

// A terminal session on a pseudo-terminal: the prompt names the session and its directory,
// Ctrl-C stops the running command and not sbsh, state persists, Ctrl-D leaves.
TEST_F(exec_test, AttachOnATerminal) {
  attach_tty t(sock);
  ASSERT_TRUE(t.started());
  ASSERT_TRUE(t.wait_for("[tty ")) << t.seen();
  t.type_at_prompt("x=kept\r");
  ASSERT_TRUE(t.wait_for("]$ ")) << t.seen();  // the next prompt
  t.type_at_prompt("cd /tmp\r");
  ASSERT_TRUE(t.wait_for("[tty /tmp]$ ")) << t.seen();
  t.type_at_prompt("sleep 30; echo not-interrupted\r");
  ASSERT_TRUE(t.wait_for("sleep 30; echo not-interrupted")) << t.seen();  // the echo of the line
  pid_t shell = static_cast<pid_t>(session_pids("tty").shell_pid);
  ASSERT_GT(shell, 0);
  ASSERT_TRUE(wait_until([&] { return has_child(shell, "sleep"); }, std::chrono::seconds(20)));
  auto t0 = std::chrono::steady_clock::now();
  t.type("\x03");  // Ctrl-C: SIGINT to the command; the rest of the line is abandoned
  ASSERT_TRUE(t.wait_for("[tty /tmp]$ ")) << t.seen();
  EXPECT_EQ(t.before().find("\nnot-interrupted"), std::string::npos) << t.before();  // its output
  EXPECT_EQ(t.before().find("state was lost"), std::string::npos) << t.before();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  EXPECT_TRUE(t.running());
  t.type_at_prompt("echo $((6 * 7)) $x $?\r");  // the rest of the line was abandoned: $? is 130
  ASSERT_TRUE(t.wait_for("42 kept 130")) << t.seen();
  ASSERT_TRUE(t.wait_for("[tty /tmp]$ ")) << t.seen();
  t.type_at_prompt("\x04");  // Ctrl-D at an empty line leaves
  EXPECT_EQ(t.wait_exit(), 0);  // the last command's status
  EXPECT_EQ(exec("tty", "pwd; echo $x").out, "/tmp\nkept\n");
  auto st = session_status("tty");
  EXPECT_EQ(st.restarts, 0u);  // Ctrl-C did not cost the shell
  EXPECT_TRUE(std::filesystem::exists(state + "/attach_history"));
}

// The bash completion the build wrote, loaded as a user's bash loads it, asks the running
// sbshd for the names it offers: the sessions after session show, the background
// processes (IDs and names) after kill.
TEST_F(exec_test, BashCompletionOffersLiveSessionsAndProcesses) {
  std::string script = std::string(SBSH_COMPLETIONS_DIR) + "/sbsh.bash";
  auto loaded = run({"/bin/bash", "-c", "source " + shell_quote(script) + " && complete -p sbsh"});
  EXPECT_NE(loaded.out.find("_sbsh"), std::string::npos) << loaded.err;
  ASSERT_EQ(exec("completed-here", "true").code, 0);
  auto started = sbsh({"start", "-s", "completed-here", "--name", "sleeper", "--", "sleep", "60"});
  ASSERT_EQ(started.code, 0) << started.err;
  std::string id = trim(started.out);
  auto offers = [&](const std::string& words) {
    auto r = run({"/bin/bash", "-c",
                  "PATH=" + shell_quote(SBSH_BIN_DIR) + ":$PATH; source " + shell_quote(script) + "; COMP_WORDS=(" +
                      words + R"(); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _sbsh; printf '%s\n' "${COMPREPLY[@]}")"});
    EXPECT_EQ(r.code, 0) << r.err;
    return "\n" + r.out;
  };
  EXPECT_NE(offers("sbsh session show ''").find("\ncompleted-here\n"), std::string::npos);
  EXPECT_NE(offers("sbsh exec -s comp").find("\ncompleted-here\n"), std::string::npos);
  std::string procs = offers("sbsh kill ''");
  EXPECT_NE(procs.find("\n" + id + "\n"), std::string::npos) << procs;
  EXPECT_NE(procs.find("\nsleeper\n"), std::string::npos) << procs;
  EXPECT_EQ(sbsh({"kill", "-s", "KILL", id}).code, 0);
}

}  // namespace sbsh::test::exec_tests
