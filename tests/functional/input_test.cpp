// sbsh input against a real sbshd, wrapper and bash: a command that waits for input (exec
// --tty or --interactive, left running by --detach-after) is answered, step by step, and each
// answer prints only what the command wrote after it; the peers' interactive cases.
#include <chrono>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "fixture.h"

namespace sbsh::test::input_tests {

using json = nlohmann::json;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// Starts `command` detached as soon as it waits for input; its exec --json result.
class input_test : public daemon_test {
 protected:
  json waiting(const std::vector<std::string>& how, const std::string& command) {
    std::vector<std::string> args{"exec", "-s", "i", "--detach-after", "30s", "--json"};
    args.insert(args.end(), how.begin(), how.end());
    args.push_back(command);
    auto r = sbsh(args);
    EXPECT_EQ(r.code, 254) << command << ": " << r.out << r.err;
    json j = json::parse(r.out.empty() ? "{}" : r.out);
    EXPECT_EQ(j.value("waiting_for_input", false), true) << command << ": " << r.out;
    return j;
  }
};

TEST_F(input_test, APromptIsAnsweredAndItsStatePersists) {
  json j = waiting({"--tty", "--interactive"}, "read -p 'Enter name: ' name; echo \"hello $name\"");
  EXPECT_EQ(j["prompt"], "Enter name: ");
  auto r = sbsh({"input", j["id"], "John"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  // Only what it wrote after the input: the echo of what was typed, and its answer.
  EXPECT_EQ(r.out, "John\r\nhello John\r\n");
  EXPECT_EQ(exec("i", "echo $name").out, "John\n");
}

TEST_F(input_test, TwoPromptsAreAnsweredOneAtATime) {
  json j =
      waiting({"--interactive"}, R"(python3 -c 'a = input("first? "); b = input("second? "); print(a + "+" + b)')");
  EXPECT_EQ(j["prompt"], "first? ");
  auto r = sbsh({"input", "--json", j["id"], "one"});
  EXPECT_EQ(r.code, 254) << r.out << r.err;
  json a = json::parse(r.out);
  EXPECT_EQ(a["waiting_for_input"], true) << r.out;
  EXPECT_EQ(a["prompt"], "second? ");
  EXPECT_EQ(a["stdout"], "second? ");  // nothing of before
  r = sbsh({"input", j["id"], "two"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "one+two\n");
}

TEST_F(input_test, APythonReplIsDrivenLineByLine) {
  json j = waiting({"--tty", "--interactive"}, "python3 -q");
  EXPECT_EQ(j["prompt"], ">>> ");
  auto r = sbsh({"input", j["id"], "x = 6 * 7"});
  EXPECT_EQ(r.code, 254) << r.out << r.err;
  EXPECT_TRUE(has(r.err, "waits for input again (its last line: >>> )")) << r.err;
  r = sbsh({"input", "--json", j["id"], "print(x)"});
  json p = json::parse(r.out);
  EXPECT_TRUE(has(p["stdout"], "42\r\n")) << r.out;
  EXPECT_EQ(p["screen"], ">>> x = 6 * 7\n>>> print(x)\n42\n>>>\n");  // what it shows now
  // Ctrl-D at the prompt ends it.
  r = sbsh({"input", "--key", "C-d", j["id"]});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
}

TEST_F(input_test, KeysReachALineEditor) {
  std::string here = dir + "/keys";
  std::filesystem::create_directories(here);
  std::ofstream(here + "/uniquely-named.txt") << "x";
  ASSERT_EQ(exec("i", "cd " + shell_quote(here)).code, 0);
  json j = waiting({"--tty", "--interactive"}, "read -e -p '> ' line; echo \"got:$line\"");
  // Tab completes the file's name; Left moves back to insert.
  auto r = sbsh(
      {"input", "--no-enter", "--key", "Tab", "--key", "Home", "--key", "Right", "--key", "Right", j["id"], "ca uniq"});
  EXPECT_EQ(r.code, 254) << r.out << r.err;
  r = sbsh({"input", "--no-enter", "--key", "Enter", j["id"], "t"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "got:cat uniquely-named.txt")) << r.out;
}

// Keys a line editor binds to more than one byte: Esc then Backspace kills the word before
// the cursor (readline's M-DEL).
TEST_F(input_test, EscapeSequencesReachALineEditor) {
  json j = waiting({"--tty", "--interactive"}, "read -e -p '> ' line; echo \"got:$line.\"");
  auto r = sbsh({"input", "--no-enter", "--key", "Esc", "--key", "Backspace", "--key", "Enter", j["id"], "one two"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "got:one.")) << r.out;
}

// A pager: it reads its keys from the terminal, q ends it; Ctrl-C is its SIGINT (which ends
// less -K).
TEST_F(input_test, APagerIsEndedWithQOrCtrlC) {
  if (run({"/bin/sh", "-c", "command -v less"}).code != 0)
    GTEST_SKIP() << "less is not installed (scripts/deps.sh --test installs it)";
  std::string text;
  for (int i = 0; i < 200; ++i) text += "row " + std::to_string(i) + "\n";
  std::ofstream(dir + "/long.txt") << text;
  for (const char* key : {"q", "C-c"}) {
    bool quit = std::string(key) == "q";
    json j = waiting({"--tty", "--interactive"},
                     std::string(quit ? "less " : "less -K ") + shell_quote(dir + "/long.txt") + "; echo \"after:$?\"");
    EXPECT_TRUE(has(j["stdout"], "row 0")) << j.dump();
    std::vector<std::string> args{"input", "--no-enter"};
    if (quit) args.insert(args.end(), {j["id"], "q"});
    else args.insert(args.end(), {"--key", "C-c", j["id"]});
    auto r = sbsh(args);
    EXPECT_EQ(r.code, 0) << key << ": " << r.out << r.err;
    EXPECT_TRUE(has(r.out, quit ? "after:0" : "after:2")) << key << ": " << r.out;
  }
}

// A here-document's body, typed line by line into cat: the file gets every line.
TEST_F(input_test, LinesTypedOneByOneReachTheCommand) {
  std::string out = dir + "/heredoc.txt";
  json j = waiting({"--tty", "--interactive"}, "cat > " + shell_quote(out));
  for (const char* line : {"first line", "second line"}) {
    auto r = sbsh({"input", j["id"], line});
    EXPECT_EQ(r.code, 254) << r.out << r.err;
  }
  auto r = sbsh({"input", "--key", "C-d", j["id"]});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(slurp(out), "first line\nsecond line\n");
}

// The terminal's screen while the command runs, and at its end: rewritten lines as they ended.
TEST_F(input_test, TheScreenShowsWhatTheTerminalShows) {
  json j =
      waiting({"--tty", "--interactive"}, R"(printf 'progress 10%%\r'; printf 'progress 90%%'; read -p ' ok? ' x)");
  auto s = sbsh({"logs", "--screen", j["id"]});
  EXPECT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(s.out, "progress 90% ok?\n");
  EXPECT_EQ(sbsh({"input", j["id"], "yes"}).code, 0);
  EXPECT_EQ(sbsh({"logs", "--screen", j["id"]}).out, "progress 90% ok? yes\n");
  // A command without a terminal has no screen: said so.
  auto plain = sbsh({"exec", "-s", "i", "--detach-after", "100ms", "--json", "sleep 2"});
  std::string id = json::parse(plain.out)["id"];
  EXPECT_TRUE(has(sbsh({"logs", "--screen", id}).err, "has no terminal")) << id;
  EXPECT_EQ(sbsh({"kill", id}).code, 0);
}

// Up recalls the line editor's history.
TEST_F(input_test, UpRecallsTheHistory) {
  json j =
      waiting({"--tty", "--interactive"},
              "set -o history; history -s recalled-line; read -e -p '> ' line; set +o history; echo \"got:$line\"");
  auto r = sbsh({"input", "--key", "Up", "--key", "Enter", j["id"]});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "got:recalled-line")) << r.out;
}

TEST_F(input_test, ASecondCommandIsQueuedNotTyped) {
  json j = waiting({"--tty", "--interactive"}, "read -p 'Continue? [Y/n] ' answer");
  // Sent meanwhile: it waits behind, and is never typed into the first.
  auto second = sbsh({"exec", "-s", "i", "--detach-after", "300ms", "--json", "echo second"});
  EXPECT_EQ(second.code, 254) << second.out << second.err;
  std::string second_id = json::parse(second.out)["id"];
  auto r = sbsh({"input", j["id"], "Y"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "Y\r\n");
  EXPECT_EQ(exec("i", "echo $answer").out, "Y\n");
  auto w = sbsh({"wait", "--json", second_id});
  EXPECT_EQ(json::parse(w.out)["stdout"], "second\n") << w.out;
}

TEST_F(input_test, ALongInputArrivesWhole) {
  std::string text;
  for (int i = 0; i < 3000; ++i) text += "line " + std::to_string(i) + "\n";  // about 26 KiB
  std::string file = dir + "/input.txt";
  std::ofstream(file) << text;
  json j = waiting({"--interactive"}, "sha256sum");
  auto r = sbsh({"input", "-f", file, "--eof", j["id"]});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.substr(0, 64), exec("i", "sha256sum < " + shell_quote(file)).out.substr(0, 64));
  // Through a terminal, a here-document of 12 KiB typed line by line: cat gives it back.
  j = waiting({"--tty", "--interactive"}, "stty -echo; cat > " + shell_quote(dir + "/typed.txt"));
  r = sbsh({"input", "-f", file, "--eof", j["id"]});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(slurp(dir + "/typed.txt"), text);
}

TEST_F(input_test, WhatTakesNoInputIsRefusedWithTheReason) {
  auto plain = sbsh({"exec", "-s", "i", "--detach-after", "200ms", "--json", "sleep 3"});
  std::string id = json::parse(plain.out)["id"];
  auto r = sbsh({"input", id, "hello"});
  EXPECT_EQ(r.code, 255);
  EXPECT_TRUE(has(r.err, "takes no input")) << r.err;
  EXPECT_TRUE(has(r.err, "--interactive")) << r.err;
  EXPECT_EQ(sbsh({"kill", id}).code, 0);
  r = sbsh({"input", id, "hello"});
  EXPECT_EQ(r.code, 255);
  EXPECT_TRUE(has(r.err, "has ended")) << r.err;
  EXPECT_TRUE(has(sbsh({"input", "--key", "F13", id}).err, "not a key sbsh knows"));
  EXPECT_TRUE(has(sbsh({"input", "7", "x"}).err, "is not a command's %ID"));
  EXPECT_TRUE(has(sbsh({"input", id}).err, "nothing to type"));
  EXPECT_TRUE(has(sbsh({"input"}).err, "input needs the %ID"));
  EXPECT_TRUE(has(sbsh({"input", "%987654", "x"}).err, "no kept command %987654"));
}

}  // namespace sbsh::test::input_tests
