// Scripts from a file (`exec -f FILE`, `-f -`), beyond the kernel's limit on a command's
// words, run at the session's top level with their state kept; and a session's default
// timeout (`session create --timeout`, a plan's session.timeout), which stops a command that
// gives none, yields to one's own -t, and is kept with the definition across sbshd restarts.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "fixture.h"

namespace sbsh::test::exec_file_tests {

namespace fs = std::filesystem;
using json = nlohmann::json;
using std::chrono::steady_clock;

void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class exec_file_test : public daemon_test {
 protected:
  // `exec --json` of `command` in `session`, with `options` before it, and how long it took.
  json exec_json(const std::string& session, const std::string& command, std::vector<std::string> options,
                 std::chrono::milliseconds* took) {
    std::vector<std::string> args{"exec", "-s", session, "--json"};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {"--", command});
    auto t0 = steady_clock::now();
    auto r = sbsh(args);
    *took = std::chrono::duration_cast<std::chrono::milliseconds>(steady_clock::now() - t0);
    try {
      return json::parse(r.out);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not JSON (" << e.what() << "): " << r.out << "\nstderr: " << r.err;
      return json::object();
    }
  }
};

// 2 MB of script: far more than one word may be (MAX_ARG_STRLEN, 128 KiB), so only -f can
// give it. Its variables, exports, functions and cd are the session's afterwards.
TEST_F(exec_file_test, AScriptFileBeyondTheArgumentLimitRunsAtTopLevelAndItsStateStays) {
  fs::create_directories(dir + "/work");
  std::string script = "BIG_VAR=kept\nexport BIG_EXPORT=exported\ngreet() { echo \"hello $1\"; }\ncd " +
                       shell_quote(dir + "/work") + "\nPAD='";
  script += std::string(2u << 20, 'x');
  script += "'\necho \"pad ${#PAD}\"\n(exit 7)\n";
  write_file(dir + "/big.sh", script);
  auto r = sbsh({"exec", "-s", "f", "-f", dir + "/big.sh"});
  EXPECT_EQ(r.code, 7) << r.err;
  EXPECT_EQ(r.out, "pad " + std::to_string(2u << 20) + "\n");
  auto next = exec("f", "greet world; echo \"$BIG_VAR $(printenv BIG_EXPORT) ${#PAD}\"; pwd");
  EXPECT_EQ(next.code, 0) << next.err;
  EXPECT_EQ(next.out, "hello world\nkept exported " + std::to_string(2u << 20) + "\n" + dir + "/work\n");
  // The command's stdin is still sbsh's, as with words.
  write_file(dir + "/reads.sh", "read -r line; echo \"got [$line]\"\n");
  std::string in = "a line\n";
  r = sbsh({"exec", "-s", "f", "--file=" + dir + "/reads.sh"}, &in);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "got [a line]\n");
}

// -f - reads the script from stdin: the command then gets /dev/null, so nothing it reads
// takes what follows the script.
TEST_F(exec_file_test, AScriptFromStdinRunsWithoutStdinAndItsStateStays) {
  std::string script = "STDIN_VAR=from-stdin\nif read -r line; then echo \"read [$line]\"; else echo 'no input'; fi\n";
  script += "# " + std::string(200u << 10, 'y') + "\necho end\n";
  auto r = sbsh({"exec", "-s", "in", "-f", "-"}, &script);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "no input\nend\n");
  EXPECT_EQ(exec("in", "echo $STDIN_VAR").out, "from-stdin\n");
}

TEST_F(exec_file_test, ScriptFileMistakesAreRefusedBeforeAnythingRuns) {
  std::string marker = dir + "/ran";
  write_file(dir + "/touch.sh", "touch " + shell_quote(marker) + "\n");
  // A file and words: which is the command?
  auto r = sbsh({"exec", "-f", dir + "/touch.sh", "echo", "hi"});
  EXPECT_EQ(r.code, 255);
  EXPECT_TRUE(has(r.err, "not both")) << r.err;
  EXPECT_EQ(r.out, "");
  // No such file; a directory; a NUL byte, which bash cannot run; more than sbshd takes.
  r = sbsh({"exec", "-f", dir + "/missing.sh"});
  EXPECT_EQ(r.code, 255);
  EXPECT_EQ(r.err, "sbsh: -f " + dir + "/missing.sh: cannot read it: No such file or directory\n");
  r = sbsh({"exec", "-f", dir});
  EXPECT_EQ(r.code, 255);
  EXPECT_TRUE(has(r.err, "it is a directory")) << r.err;
  write_file(dir + "/nul.sh", "touch " + shell_quote(marker) + "\n" + std::string(1, '\0') + "\n");
  r = sbsh({"exec", "-f", dir + "/nul.sh"});
  EXPECT_EQ(r.code, 255);
  EXPECT_TRUE(has(r.err, "NUL byte (at byte")) << r.err;
  std::string huge = dir + "/huge.sh";
  write_file(huge, "touch " + shell_quote(marker) + "\n");
  fs::resize_file(huge, 17u << 20);  // a sparse tail of zeros: too big before it is read
  r = sbsh({"exec", "-f", huge});
  EXPECT_EQ(r.code, 255);
  EXPECT_TRUE(has(r.err, "more than the 16 MiB")) << r.err;
  r = sbsh({"exec", "-f", ""});
  EXPECT_EQ(r.code, 255);
  EXPECT_TRUE(has(r.err, "needs a file, or - for stdin")) << r.err;
  EXPECT_FALSE(fs::exists(marker));
  // Unreadable for its owner (root reads everything: nothing to check then).
  if (::geteuid() != 0) {
    ::chmod((dir + "/touch.sh").c_str(), 0);
    r = sbsh({"exec", "-f", dir + "/touch.sh"});
    EXPECT_EQ(r.code, 255);
    EXPECT_TRUE(has(r.err, "Permission denied")) << r.err;
  }
  EXPECT_FALSE(fs::exists(marker));
}

// A session's default timeout stops a command that gives none as its own -t would, and the
// shell keeps its state; a command's own -t is longer and wins.
TEST_F(exec_file_test, ASessionsDefaultTimeoutStopsACommandThatGivesNone) {
  auto c = sbsh({"session", "create", "t", "--timeout", "1s"});
  ASSERT_EQ(c.code, 0) << c.err;
  ASSERT_EQ(exec("t", "KEPT=yes").code, 0);
  std::chrono::milliseconds took{};
  json j = exec_json("t", "sh -c 'echo $$ > " + dir + "/pid; exec sleep 10'", {}, &took);
  EXPECT_TRUE(j["timed_out"].get<bool>()) << j.dump();
  EXPECT_GE(took.count(), 900);
  EXPECT_LT(took.count(), 8000);
  pid_t pid = std::atoi(trim(exec("t", "cat " + dir + "/pid").out).c_str());
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(wait_until([&] { return !pid_alive(pid); }, std::chrono::seconds(10)));
  // Its own -t: not stopped at 1 s.
  j = exec_json("t", "sleep 2; echo \"done $KEPT\"", {"-t", "20s"}, &took);
  EXPECT_FALSE(j["timed_out"].get<bool>()) << j.dump();
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["stdout"], "done yes\n");
  EXPECT_GE(took.count(), 1900);
  // Without --json: status 124 and a line that says whose timeout it was.
  auto r = exec("t", "sleep 10");
  EXPECT_EQ(r.code, 124);
  EXPECT_TRUE(has(r.err, "sbsh: timed out after the default timeout of session 't'; the command was stopped\n")) << r.err;
  // Other sessions have none.
  j = exec_json("other", "sleep 1.5; echo fine", {}, &took);
  EXPECT_FALSE(j["timed_out"].get<bool>()) << j.dump();
  EXPECT_EQ(j["stdout"], "fine\n");
}

// The default is part of the definition: listed, shown, compared, saved and restored.
TEST_F(exec_file_test, TheDefaultTimeoutIsShownAndOutlivesAnSbshdRestart) {
  ASSERT_EQ(sbsh({"session", "create", "t", "-t", "1500ms"}).code, 0);
  auto check = [&] {
    EXPECT_EQ(listed("t")["timeout_ms"], 1500);
    auto show = json::parse(sbsh({"session", "show", "t", "--json"}).out);
    EXPECT_EQ(show["definition"]["timeout_ms"], 1500);
    EXPECT_EQ(show["session"]["timeout_ms"], 1500);
    EXPECT_TRUE(has(sbsh({"session", "show", "t"}).out, "timeout     1500ms, for a command that gives none\n"));
  };
  check();
  ASSERT_EQ(exec("plain", "true").code, 0);
  EXPECT_TRUE(listed("plain")["timeout_ms"].is_null());
  EXPECT_TRUE(has(sbsh({"session", "show", "plain"}).out, "timeout     none\n"));
  // The same again does nothing; another default timeout is another definition.
  EXPECT_EQ(sbsh({"session", "create", "t", "--timeout", "1.5"}).code, 0);
  auto r = sbsh({"session", "create", "t", "--timeout", "2s"});
  EXPECT_EQ(r.code, 255);
  EXPECT_TRUE(has(r.err, "default timeout 1500 ms (asked: 2000 ms)")) << r.err;
  r = sbsh({"session", "create", "t"});
  EXPECT_EQ(r.code, 255);
  EXPECT_TRUE(has(r.err, "default timeout 1500 ms (asked: none)")) << r.err;
  // A session made implicitly takes the one asked for when it is defined.
  ASSERT_EQ(sbsh({"session", "create", "plain", "--timeout", "1s"}).code, 0) << r.err;
  EXPECT_EQ(listed("plain")["timeout_ms"], 1000);

  stop_daemon();
  start_daemon();
  check();
  std::chrono::milliseconds took{};
  json j = exec_json("t", "sleep 10", {}, &took);
  EXPECT_TRUE(j["timed_out"].get<bool>()) << j.dump();
  EXPECT_LT(took.count(), 8000);
}

TEST_F(exec_file_test, ABadDefaultTimeoutIsRefused) {
  struct bad {
    std::string value, says;
  };
  for (const auto& b : {bad{"-1s", "invalid duration '-1s'"}, bad{"soon", "invalid duration 'soon'"},
                        bad{"10x", "invalid duration '10x'"}, bad{"0", "zero"}, bad{"", "invalid duration ''"}}) {
    SCOPED_TRACE(b.value);
    auto r = sbsh({"session", "create", "x", "--timeout", b.value});
    EXPECT_EQ(r.code, 255);
    EXPECT_TRUE(has(r.err, b.says)) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_TRUE(listed("x").is_null());
}

// A plan's session.timeout is the session's default: a command that gives none is stopped
// by it, one with its own timeout is not, and the report says which applied.
TEST_F(exec_file_test, APlansSessionTimeoutIsTheDefaultOfItsCommands) {
  std::string path = dir + "/plan.yaml";
  write_file(path,
             "session: {timeout: 1s}\n"
             "stages:\n"
             "  - name: own\n"
             "    commands: [{run: 'sleep 2; echo slept', timeout: 20s}]\n"
             "  - name: default\n"
             "    commands: ['sleep 10']\n");
  auto t0 = steady_clock::now();
  auto r = sbsh({"run", "-q", path});
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(steady_clock::now() - t0);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_LT(took.count(), 9000);
  json rep = json::parse(r.out);
  EXPECT_EQ(rep["stages"][0]["status"], "passed") << rep.dump();
  EXPECT_EQ(rep["stages"][0]["commands"][0]["timeout_ms"], 20000);
  const auto& c = rep["stages"][1]["commands"][0];
  EXPECT_TRUE(c["timed_out"].get<bool>()) << rep.dump();
  EXPECT_EQ(c["timeout_ms"], 1000);

  write_file(path, "session: {timeout: -1s}\nstages: [{name: a, commands: [true]}]\n");
  r = sbsh({"run", "-q", path});
  EXPECT_EQ(r.code, 255);
  EXPECT_TRUE(has(r.err, "session.timeout")) << r.err;
}

}  // namespace sbsh::test::exec_file_tests
