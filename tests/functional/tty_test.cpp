// exec --tty against a real sbshd, wrapper and bash: a pseudo-terminal as the command's
// controlling terminal, its input typed into it, its size, and a shell that keeps its state
// and lets go of the terminal afterwards.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "fixture.h"

namespace sbsh::test::tty_tests {

using tty_test = daemon_test;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(tty_test, ACommandGetsATerminalAndItsStatePersists) {
  ASSERT_EQ(exec("t", "unset TERM").code, 0);  // as in a session started without one
  std::string probe = R"(tty; [ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo all three; stty size; echo "term=$TERM"; )";
  probe += "echo to-stderr >&2; cd /tmp; kept=yes";
  auto r = sbsh({"exec", "-s", "t", "--tty", probe});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "/dev/pts/")) << r.out;
  // A terminal's output: lines end in CR LF, and stderr comes the same way.
  EXPECT_TRUE(has(r.out, "all three\r\n")) << r.out;
  EXPECT_TRUE(has(r.out, "24 80\r\n")) << r.out;  // the default size
  EXPECT_TRUE(has(r.out, "term=xterm-256color\r\n")) << r.out;
  EXPECT_TRUE(has(r.out, "to-stderr\r\n")) << r.out;
  EXPECT_EQ(r.err, "");
  // It ran at the top level; the shell let go of the terminal, and of TERM, which it set.
  auto after = exec("t", "pwd; echo $kept; tty; echo \"term=${TERM-unset}\"; cat /dev/tty 2>/dev/null || echo no-tty");
  EXPECT_EQ(after.out, "/tmp\nyes\nnot a tty\nterm=unset\nno-tty\n") << after.err;
}

TEST_F(tty_test, EachCommandGetsItsOwnTerminalOfTheSizeAsked) {
  auto first = sbsh({"exec", "-s", "t", "--tty", "--cols", "132", "--rows", "43", "stty size; tty"});
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_TRUE(has(first.out, "43 132\r\n")) << first.out;
  auto second = sbsh({"exec", "-s", "t", "--tty", "stty size; tty"});
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_TRUE(has(second.out, "24 80\r\n")) << second.out;
  EXPECT_TRUE(has(second.out, "/dev/pts/")) << second.out;
  EXPECT_EQ(exec("t", "echo plain").out, "plain\n");
}

TEST_F(tty_test, InputIsTypedIntoTheTerminalAndAnswersAPrompt) {
  std::string input = "John\nY\n";
  auto r = sbsh({"exec", "-s", "t", "--tty",
                 R"(read -p 'Enter name: ' name; echo "hello $name"; read -p 'Continue? [Y/n] ' yes; echo "got $yes")"},
                &input);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "Enter name: ")) << r.out;
  EXPECT_TRUE(has(r.out, "hello John\r\n")) << r.out;
  EXPECT_TRUE(has(r.out, "got Y\r\n")) << r.out;
  // `read` ran in the session's shell itself: what it read stays.
  EXPECT_EQ(exec("t", "echo $name $yes").out, "John Y\n");
  // The end of the input is the terminal's Ctrl-D: cat ends.
  std::string text = "one\ntwo\n";
  auto cat = sbsh({"exec", "-s", "t", "--tty", "cat"}, &text);
  EXPECT_EQ(cat.code, 0) << cat.err;
  EXPECT_TRUE(has(cat.out, "one\r\n")) << cat.out;
}

TEST_F(tty_test, TheForegroundJobHasTheTerminalAndCtrlCReachesIt) {
  auto r =
      sbsh({"exec", "-s", "t", "--tty",
            R"(python3 -c 'import os; print("foreground" if os.tcgetpgrp(0) == os.getpgrp() else "background")')"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "foreground\r\n")) << r.out;
  // A Ctrl-C typed into the terminal is its SIGINT, to the foreground job: it stops, the rest
  // of the text does not run, and the session goes on. Typed once the program runs.
  int in[2];
  ASSERT_EQ(::pipe(in), 0);
  client::exec_options o;
  o.session = "t";
  o.tty = true;
  o.stdin_fd = in[0];
  o.command = "python3 -c 'import time; print(\"ready\", flush=True); time.sleep(20)'; echo not-reached";
  std::string seen;
  o.on_output = [&](client::stream, std::string_view d) {
    bool first = !has(seen, "ready");
    seen.append(d);
    if (first && has(seen, "ready")) (void)!::write(in[1], "\x03", 1);
  };
  auto start = std::chrono::steady_clock::now();
  auto c = conn();
  auto stopped = c.exec(o);
  ::close(in[0]);
  ::close(in[1]);
  ASSERT_TRUE(stopped) << stopped.err().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
  EXPECT_EQ(stopped->exit_code, 130) << seen;
  EXPECT_EQ(stopped->signal, SIGINT) << seen;
  EXPECT_FALSE(has(seen, "not-reached")) << seen;
  EXPECT_EQ(exec("t", "echo still here").out, "still here\n");
}

TEST_F(tty_test, ATimeoutEndsATerminalCommandAndTheNextOneGetsATerminal) {
  auto r = sbsh({"exec", "-s", "t", "--tty", "-t", "1", "x=before; sleep 30"});
  EXPECT_EQ(r.code, 124) << r.out << r.err;
  auto next = sbsh({"exec", "-s", "t", "--tty", "tty; echo $x"});
  ASSERT_EQ(next.code, 0) << next.err;
  EXPECT_TRUE(has(next.out, "/dev/pts/")) << next.out;
  EXPECT_TRUE(has(next.out, "before\r\n")) << next.out;
}

TEST_F(tty_test, SizeWithoutATerminalIsRefused) {
  auto r = sbsh({"exec", "-s", "t", "--cols", "100", "true"});
  EXPECT_EQ(r.code, 255);
  EXPECT_TRUE(has(r.err, "--tty")) << r.err;
  auto big = sbsh({"exec", "-s", "t", "--tty", "--cols", "100000", "true"});
  EXPECT_EQ(big.code, 255);
  EXPECT_TRUE(has(big.err, "--cols")) << big.err;
}

TEST_F(tty_test, MoreInputThanTheTerminalBuffersArrivesIntact) {
  // A terminal holds 4 KiB of unread input: 12 KiB typed into it is fed as the program
  // reads, never dropped, and each line arrives as typed.
  std::string body;
  for (int i = 0; body.size() < size_t{12} * 1024; ++i) body += "line " + std::to_string(i) + " of a long here-document\n";
  std::string file = dir + "/typed.txt";
  auto r = sbsh({"exec", "-s", "t", "--tty", "cat > " + shell_quote(file)}, &body);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_file(file), body);
}

// With --detach-after, a command that waits for input returns at once, saying so, with its
// prompt: the kernel says it reads its terminal, nothing is guessed from its output.
TEST_F(tty_test, ACommandWaitingForInputReturnsAtOnceWithItsPrompt) {
  auto start = std::chrono::steady_clock::now();
  auto r = sbsh(
      {"exec", "-s", "t", "--tty", "--interactive", "--detach-after", "30s", "--json", "read -p 'Enter name: ' name"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  ASSERT_EQ(r.code, 254) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["running"], true);
  EXPECT_EQ(j["waiting_for_input"], true);
  EXPECT_EQ(j["prompt"], "Enter name: ");
  ASSERT_TRUE(j["id"].is_string());
  std::string id = j["id"];
  // It goes on, waiting; sbsh kill ends it and the session keeps its state.
  EXPECT_EQ(sbsh({"kill", id}).code, 0);
  EXPECT_EQ(exec("t", "echo after").out, "after\n");

  // A Python prompt, through a pipe kept open (--interactive, no terminal): the same.
  r = sbsh({"exec", "-s", "t", "--interactive", "--detach-after", "30s", "--json",
            "python3 -c 'x = input(\"first? \"); print(x)'"});
  ASSERT_EQ(r.code, 254) << r.out << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["waiting_for_input"], true) << r.out;
  EXPECT_EQ(j["prompt"], "first? ") << r.out;
  EXPECT_EQ(sbsh({"kill", j["id"]}).code, 0);
}

TEST_F(tty_test, NothingThatWaitsForSomethingElseIsTakenForAPrompt) {
  // Sleeping, computing, reading a file or a socket: the window passes, and no input is
  // said to be awaited.
  std::string fifo = dir + "/fifo";
  for (const std::string& command :
       {std::string("printf 'Sleeping: '; sleep 3"),
        std::string("printf 'Busy: '; end=$((SECONDS+3)); while [ $SECONDS -lt $end ]; do :; done"),
        "printf 'Reading: '; mkfifo " + shell_quote(fifo) + "; cat " + shell_quote(fifo) + "; rm -f " +
            shell_quote(fifo),
        std::string("printf 'Socket: '; python3 -c 'import socket; a, b = socket.socketpair(); b.recv(1)'")}) {
    auto r = sbsh({"exec", "-s", "t", "--tty", "--interactive", "--detach-after", "1500ms", "--json", command});
    ASSERT_EQ(r.code, 254) << command << ": " << r.out << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["waiting_for_input"], false) << command << ": " << r.out;
    EXPECT_EQ(sbsh({"kill", j["id"]}).code, 0);
  }
}

// A program that asks its terminal where the cursor is (as prompts and full-screen programs
// do) is answered, not left waiting; the result shows the screen a person would have seen.
TEST_F(tty_test, TerminalQueriesAreAnsweredAndTheScreenIsShown) {
  std::string ask = R"(printf 'ab\n'; stty -echo; printf 'cde\033[6n'; IFS= read -r -d R -t 10 pos; stty echo; echo " at ${pos#*[}")";
  auto r = sbsh({"exec", "-s", "t", "--tty", "--json", ask});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["stdout"], "ab\r\ncde\033[6n at 2;4\r\n") << r.out;
  EXPECT_EQ(j["screen"], "ab\ncde at 2;4\n") << r.out;
  // Rewritten lines and colours show as they end up; without a terminal, no screen.
  r = sbsh({"exec", "-s", "t", "--tty", "--json", R"(printf '10%%\r100%%\n\033[31mred\033[0m\n')"});
  EXPECT_EQ(nlohmann::json::parse(r.out)["screen"], "100%\nred\n") << r.out;
  r = sbsh({"exec", "-s", "t", "--json", "echo plain"});
  EXPECT_TRUE(nlohmann::json::parse(r.out)["screen"].is_null()) << r.out;
}

}  // namespace sbsh::test::tty_tests
