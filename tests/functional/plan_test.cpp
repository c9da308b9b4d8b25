// Plans (`sbsh run`, libsbsh's run_plan) against a real sbshd, wrappers and bash: stages and
// expectations, state across stages, timeouts, snapshots, artifacts, events, cancelling, and
// the errors of invalid plans.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "fixture.h"
#include "sbsh/plan.h"

namespace sbsh::test::plan_tests {

namespace fs = std::filesystem;
using json = nlohmann::json;

void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::vector<json> read_lines(const std::string& text) {
  std::vector<json> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    out.push_back(json::parse(text.substr(at, nl - at)));
    at = nl == std::string::npos ? text.size() : nl + 1;
  }
  return out;
}

std::vector<std::string> event_names(const std::vector<json>& events) {
  std::vector<std::string> names;
  names.reserve(events.size());
  for (const auto& e : events) names.push_back(e["event"].get<std::string>());
  return names;
}

// The report without what changes from run to run: times, durations and the session's name.
json stable(json j) {
  if (j.is_object()) {
    for (const char* k : {"started_at", "duration_ms", "session"}) j.erase(k);
    for (auto& [k, v] : j.items()) v = stable(v);
  } else if (j.is_array()) {
    for (auto& v : j) v = stable(v);
  }
  return j;
}

class plan_test : public daemon_test {
 protected:
  std::string plan_file(const std::string& name, const std::string& text) {
    std::string path = dir + "/" + name;
    write_file(path, text);
    return path;
  }
  run_result run_plan(const std::string& path, std::vector<std::string> options = {}) {
    std::vector<std::string> args{"run"};
    args.insert(args.end(), options.begin(), options.end());
    args.push_back(path);
    return sbsh(args);
  }
  // Runs a plan that must end with `code` and returns its report (printed on stdout).
  json report_of(const std::string& path, int code, std::vector<std::string> options = {}) {
    auto r = run_plan(path, std::move(options));
    EXPECT_EQ(r.code, code) << r.err << r.out;
    try {
      return json::parse(r.out);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the report is not JSON (" << e.what() << "):\n" << r.out << "\nstderr:\n" << r.err;
      return json::object();
    }
  }
  std::vector<std::string> session_names() {
    auto c = conn();
    auto v = c.sessions();
    std::vector<std::string> names;
    if (v)
      for (const auto& s : *v) names.push_back(s.name);
    return names;
  }
};

TEST_F(plan_test, APassingPlanRunsEveryStageInOneSessionThenRemovesIt) {
  auto path = plan_file("ci.yaml",
                        "session: {cwd: " + dir + "}\n"
                        "stages:\n"
                        "  - name: setup\n"
                        "    commands: ['mkdir -p sub && cd sub && export X=1', 'f() { echo fn $X; }']\n"
                        "  - name: test\n"
                        "    commands:\n"
                        "      - pwd; echo $X; f\n"
                        "      - {run: 'echo out; echo err >&2'}\n");
  auto r = run_plan(path);
  ASSERT_EQ(r.code, 0) << r.err;
  json rep = json::parse(r.out);
  EXPECT_EQ(rep["version"], 1);
  EXPECT_EQ(rep["status"], "passed");
  EXPECT_TRUE(rep["reason"].is_null());
  EXPECT_TRUE(rep["error"].is_null());
  ASSERT_EQ(rep["stages"].size(), 2u);
  EXPECT_EQ(rep["stages"][0]["name"], "setup");
  EXPECT_EQ(rep["stages"][0]["expect"], "success");
  EXPECT_EQ(rep["stages"][0]["status"], "passed");
  const auto& test = rep["stages"][1];
  EXPECT_EQ(test["status"], "passed");
  // The directory, a variable and a function carried from stage to stage.
  EXPECT_EQ(test["commands"][0]["stdout"], dir + "/sub\n1\nfn 1\n");
  EXPECT_EQ(test["commands"][1]["stdout"], "out\n");
  EXPECT_EQ(test["commands"][1]["stderr"], "err\n");
  for (const auto& c : test["commands"]) {
    EXPECT_EQ(c["status"], "succeeded");
    EXPECT_EQ(c["exit_code"], 0);
    EXPECT_TRUE(c["signal"].is_null());
    EXPECT_FALSE(c["timed_out"].get<bool>());
    EXPECT_TRUE(c["started_at"].is_string());
    EXPECT_TRUE(c["duration_ms"].is_number());
  }
  // A fresh session named for the run, gone afterwards.
  std::string session = rep["session"];
  EXPECT_EQ(session.rfind("run-", 0), 0u) << session;
  EXPECT_FALSE(rep["session_kept"].get<bool>());
  EXPECT_EQ(session_names(), std::vector<std::string>{});
  // Progress for people on stderr.
  EXPECT_NE(r.err.find("sbsh: stage test"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sbsh: run passed"), std::string::npos) << r.err;
}

TEST_F(plan_test, TheRunStopsAtTheFirstFailureAndSkipsTheRest) {
  auto path = plan_file("ci.yaml",
                        "stages:\n"
                        "  - name: build\n"
                        "    commands: ['true', 'echo broken >&2; (exit 3)', 'touch " + dir + "/after-failure']\n"
                        "  - name: test\n"
                        "    commands: ['touch " + dir + "/next-stage']\n");
  json rep = report_of(path, 1);
  EXPECT_FALSE(fs::exists(dir + "/after-failure"));
  EXPECT_FALSE(fs::exists(dir + "/next-stage"));
  EXPECT_EQ(rep["status"], "failed");
  EXPECT_TRUE(rep["error"].is_null());
  EXPECT_EQ(rep["reason"]["stage"], "build");
  EXPECT_EQ(rep["reason"]["command"], 1);
  EXPECT_NE(rep["reason"]["message"].get<std::string>().find("exited with status 3"), std::string::npos) << rep["reason"];
  const auto& build = rep["stages"][0];
  EXPECT_EQ(build["status"], "failed");
  EXPECT_EQ(build["commands"][0]["status"], "succeeded");
  EXPECT_EQ(build["commands"][1]["status"], "failed");
  EXPECT_EQ(build["commands"][1]["exit_code"], 3);
  EXPECT_EQ(build["commands"][1]["stderr"], "broken\n");
  EXPECT_EQ(build["commands"][2]["status"], "skipped");
  EXPECT_TRUE(build["commands"][2]["exit_code"].is_null());
  EXPECT_TRUE(build["commands"][2]["started_at"].is_null());
  EXPECT_EQ(rep["stages"][1]["status"], "skipped");
  EXPECT_EQ(rep["stages"][1]["commands"][0]["status"], "skipped");
  EXPECT_EQ(session_names(), std::vector<std::string>{});
}

TEST_F(plan_test, AnExpectedFailurePassesAndAnUnexpectedPassFails) {
  auto xfail = plan_file("xfail.yaml",
                         "stages:\n"
                         "  - name: broken\n"
                         "    expect: failure\n"
                         "    commands: ['echo setup', '(exit 2)', 'touch " + dir + "/rest-of-stage']\n"
                         "  - name: crash\n"
                         "    expect: failure\n"
                         "    commands: [\"sh -c 'kill -KILL $$'\"]\n"
                         "  - name: after\n"
                         "    commands: ['touch " + dir + "/after']\n");
  json rep = report_of(xfail, 0);
  EXPECT_EQ(rep["status"], "passed");
  const auto& broken = rep["stages"][0];
  EXPECT_EQ(broken["expect"], "failure");
  EXPECT_EQ(broken["status"], "passed");
  EXPECT_EQ(broken["commands"][0]["status"], "succeeded");
  EXPECT_EQ(broken["commands"][1]["status"], "failed");
  EXPECT_EQ(broken["commands"][2]["status"], "skipped");
  EXPECT_FALSE(fs::exists(dir + "/rest-of-stage"));
  // A signal is a failure too.
  EXPECT_EQ(rep["stages"][1]["status"], "passed");
  EXPECT_EQ(rep["stages"][1]["commands"][0]["status"], "failed");
  EXPECT_EQ(rep["stages"][1]["commands"][0]["signal"], "SIGKILL") << rep["stages"][1];
  EXPECT_EQ(rep["stages"][2]["status"], "passed");
  EXPECT_TRUE(fs::exists(dir + "/after"));

  auto xpass = plan_file("xpass.yaml",
                         "stages:\n"
                         "  - name: flaky\n"
                         "    expect: failure\n"
                         "    commands: ['true', 'echo fine']\n"
                         "  - name: later\n"
                         "    commands: ['touch " + dir + "/later']\n");
  rep = report_of(xpass, 1);
  EXPECT_EQ(rep["status"], "failed");
  EXPECT_EQ(rep["stages"][0]["status"], "failed");
  EXPECT_EQ(rep["stages"][0]["commands"][1]["status"], "succeeded");
  EXPECT_EQ(rep["reason"]["stage"], "flaky");
  EXPECT_TRUE(rep["reason"]["command"].is_null());
  EXPECT_NE(rep["reason"]["message"].get<std::string>().find("expected to fail"), std::string::npos);
  EXPECT_EQ(rep["stages"][1]["status"], "skipped");
  EXPECT_FALSE(fs::exists(dir + "/later"));
}

TEST_F(plan_test, ALostShellFailsItsStageUnlessAFailureIsExpected) {
  auto path = plan_file("lost.yaml",
                        "stages:\n"
                        "  - name: set\n"
                        "    commands: ['export LOST_X=1']\n"
                        "  - name: crash\n"
                        "    expect: failure\n"
                        "    commands: ['kill -KILL $$']\n"
                        "  - name: check\n"
                        "    commands: ['echo ${LOST_X-unset}', 'exit 4']\n");
  json rep = report_of(path, 1);
  const auto& crash = rep["stages"][1];
  EXPECT_EQ(crash["status"], "passed");
  EXPECT_TRUE(crash["commands"][0]["shell_restarted"].get<bool>()) << crash;
  // The next command ran in a new shell, without the state of the old one.
  const auto& check = rep["stages"][2];
  EXPECT_EQ(check["commands"][0]["stdout"], "unset\n");
  EXPECT_EQ(check["status"], "failed");
  EXPECT_EQ(check["commands"][1]["status"], "failed");
  EXPECT_TRUE(check["commands"][1]["shell_restarted"].get<bool>());
  EXPECT_NE(rep["reason"]["message"].get<std::string>().find("ended its shell"), std::string::npos) << rep["reason"];
}

TEST_F(plan_test, CwdAndEnvApplyToOneCommandAndTheSessionSettingsToAll) {
  // Names the caller's environment is unlikely to hold: sessions inherit it.
  fs::create_directories(dir + "/sub");
  auto path = plan_file("env.yaml",
                        "session:\n"
                        "  cwd: " + dir + "\n"
                        "  env: {CI: 1}\n"
                        "  init: ['export Y=2']\n"
                        "  limits: {nofile: 512}\n"
                        "stages:\n"
                        "  - name: one\n"
                        "    commands:\n"
                        "      - {run: 'pwd; echo $ONE_J; cd /; export ONE_K=1', cwd: sub, env: {ONE_J: 2}}\n"
                        "      - 'pwd; echo ${ONE_J-unset} ${ONE_K-unset}; echo $CI $Y; ulimit -n'\n");
  json rep = report_of(path, 0);
  const auto& cmds = rep["stages"][0]["commands"];
  EXPECT_EQ(cmds[0]["stdout"], dir + "/sub\n2\n");
  EXPECT_EQ(cmds[0]["cwd"], "sub");
  EXPECT_EQ(cmds[0]["env"], json({{"ONE_J", "2"}}));
  EXPECT_EQ(cmds[1]["stdout"], dir + "\nunset unset\n1 2\n512\n");
  EXPECT_TRUE(cmds[1]["cwd"].is_null());
  EXPECT_EQ(cmds[1]["env"], json::object());
}

// A command's input: its lines are typed in order, each then Enter, answering the questions
// it asks; through a pipe, or with tty a terminal of its own.
TEST_F(plan_test, InputAnswersTheQuestionsACommandAsks) {
  auto path = plan_file("input.yaml",
                        "stages:\n"
                        "  - name: ask\n"
                        "    commands:\n"
                        "      - {run: \"read -p 'Name? ' n; read -p 'Sure? ' y; echo \\\"$n:$y\\\"\", input: [Ada, 'yes']}\n"
                        "      - {run: \"read -p 'Again? ' a; tty >/dev/null && echo \\\"tty:$a\\\"\", input: [Y], tty: true}\n"
                        "      - 'echo $n $y $a'\n");
  json rep = report_of(path, 0);
  const auto& cmds = rep["stages"][0]["commands"];
  EXPECT_EQ(cmds[0]["stdout"], "Ada:yes\n") << cmds[0].dump();
  EXPECT_NE(cmds[1]["stdout"].get<std::string>().find("tty:Y\r\n"), std::string::npos) << cmds[1].dump();
  EXPECT_EQ(cmds[2]["stdout"], "Ada yes Y\n");
  auto bad = client::parse_plan("stages: [{name: s, commands: [{run: 'true', input: [[Ada]]}]}]\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.err().message.find("stages[0].commands[0].input[0]: expected text"), std::string::npos)
      << bad.err().message;
  bad = client::parse_plan("stages: [{name: s, commands: [{run: 'true', tty: 'yes'}]}]\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.err().message.find("tty: expected true or false"), std::string::npos) << bad.err().message;
}

TEST_F(plan_test, ACommandTimeoutStopsItsProcesses) {
  auto path = plan_file("slow.yaml",
                        "timeout: 30s\n"
                        "stages:\n"
                        "  - name: slow\n"
                        "    commands:\n"
                        "      - {run: \"sh -c 'echo $$ > " + dir + "/pid; exec sleep 60'\", timeout: 300ms}\n"
                        "      - touch " + dir + "/after\n");
  json rep = report_of(path, 1);
  const auto& c = rep["stages"][0]["commands"][0];
  EXPECT_EQ(c["status"], "failed");
  EXPECT_TRUE(c["timed_out"].get<bool>());
  EXPECT_EQ(c["timeout_ms"], 300);
  EXPECT_NE(rep["reason"]["message"].get<std::string>().find("timed out after 300 ms"), std::string::npos);
  pid_t pid = std::atoi(read_file(dir + "/pid").c_str());
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(wait_until([&] { return !pid_alive(pid); }, std::chrono::seconds(10)));
  EXPECT_FALSE(fs::exists(dir + "/after"));

  // The plan's timeout applies to each command that sets none; 0 means none.
  path = plan_file("default.yaml",
                   "timeout: 200ms\n"
                   "stages:\n"
                   "  - name: fits\n"
                   "    commands: [{run: 'sleep 0.5', timeout: 10s}, {run: 'sleep 0.3', timeout: 0}]\n"
                   "  - name: too-slow\n"
                   "    commands: ['sleep 20']\n");
  rep = report_of(path, 1);
  EXPECT_EQ(rep["stages"][0]["status"], "passed");
  EXPECT_EQ(rep["stages"][0]["commands"][0]["timeout_ms"], 10000);
  EXPECT_TRUE(rep["stages"][0]["commands"][1]["timeout_ms"].is_null());
  EXPECT_TRUE(rep["stages"][1]["commands"][0]["timed_out"].get<bool>());
  EXPECT_EQ(rep["stages"][1]["commands"][0]["timeout_ms"], 200);
}

TEST_F(plan_test, ASnapshotSessionLeavesTheSourceUntouched) {
  std::string src = dir + "/src";
  fs::create_directories(src);
  write_file(src + "/a.txt", "hello\n");
  write_file(src + "/b.txt", "bye\n");
  auto path = plan_file("snap.yaml",
                        "session: {snapshot: " + src + "}\n"
                        "stages:\n"
                        "  - name: change\n"
                        "    commands: ['echo changed > a.txt && rm b.txt && touch new', 'cat a.txt; ls']\n");
  json rep = report_of(path, 0);
  EXPECT_EQ(rep["stages"][0]["commands"][1]["stdout"], "changed\na.txt\nnew\n");
  EXPECT_EQ(read_file(src + "/a.txt"), "hello\n");
  EXPECT_TRUE(fs::exists(src + "/b.txt"));
  EXPECT_FALSE(fs::exists(src + "/new"));
  // The session is gone, and its copy with it.
  EXPECT_EQ(session_names(), std::vector<std::string>{});
  std::error_code ec;
  EXPECT_TRUE(!fs::exists(state + "/snapshots") || fs::is_empty(state + "/snapshots", ec));
}

TEST_F(plan_test, ArtifactsHoldWholeStreamsWhileTheReportKeepsACappedPart) {
  auto path = plan_file("out.yaml",
                        "stages:\n"
                        "  - name: out\n"
                        "    commands:\n"
                        // Never UTF-8, however short the part kept: it starts with bytes
                        // that cannot be.
                        "      - (printf '\\377\\377\\377\\377\\377\\377'; head -c 2999994 /dev/urandom) | tee " +
                            dir + "/copy\n"
                        "      - printf 'ab\\377\\000end' >&2\n");
  std::string art = "art";  // relative: to sbsh's directory, named absolutely in the report
  auto r = sbsh({"run", "--artifacts", dir + "/" + art, "--report", dir + "/r.json", path});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");  // the report went to its file
  json rep = json::parse(read_file(dir + "/r.json"));
  const auto& big = rep["stages"][0]["commands"][0];
  EXPECT_EQ(big["stdout_file"], dir + "/art/out/0.stdout");
  EXPECT_EQ(big["stderr_file"], dir + "/art/out/0.stderr");
  EXPECT_EQ(big["stdout_bytes"], 3000000);
  std::string whole = read_file(dir + "/copy");
  ASSERT_EQ(whole.size(), 3000000u);
  EXPECT_EQ(whole.substr(0, 6), std::string(6, '\xff'));
  EXPECT_TRUE(read_file(dir + "/art/out/0.stdout") == whole);
  EXPECT_EQ(read_file(dir + "/art/out/0.stderr"), "");
  // Inline: the first 1 MiB, exactly (random bytes are not UTF-8: base64 has them).
  EXPECT_TRUE(big["stdout_truncated"].get<bool>());
  EXPECT_FALSE(big["stderr_truncated"].get<bool>());
  ASSERT_TRUE(big["stdout_base64"].is_string());
  EXPECT_EQ(big["stdout_base64"].get<std::string>().size(), (1048576u + 2) / 3 * 4);
  const auto& small = rep["stages"][0]["commands"][1];
  EXPECT_EQ(read_file(dir + "/art/out/1.stderr"), std::string("ab\xff\0end", 7));
  EXPECT_EQ(small["stderr"], std::string("ab\xef\xbf\xbd") + std::string(1, '\0') + "end");
  EXPECT_EQ(small["stderr_base64"], "YWL/AGVuZA==");
  EXPECT_TRUE(small["stdout_base64"].is_null());

  // A cap of its own.
  rep = report_of(path, 0, {"--output-limit", "10"});
  const auto& capped = rep["stages"][0]["commands"][1];
  EXPECT_EQ(capped["stderr_bytes"], 7);
  EXPECT_FALSE(capped["stderr_truncated"].get<bool>());
  EXPECT_EQ(rep["stages"][0]["commands"][0]["stdout_base64"].get<std::string>().size(), 16u);
  EXPECT_TRUE(rep["stages"][0]["commands"][0]["stdout_file"].is_null());
}

TEST_F(plan_test, EventsArriveInOrderAsThingsHappen) {
  std::string events = dir + "/events.jsonl";
  auto path = plan_file("ev.yaml",
                        "stages:\n"
                        "  - name: a\n"
                        "    commands: ['echo one', 'true']\n"
                        "  - name: b\n"
                        "    commands: ['wc -l < " + events + "; false']\n"
                        "  - name: c\n"
                        "    commands: ['true']\n");
  auto r = run_plan(path, {"--events", events});
  ASSERT_EQ(r.code, 1) << r.err;
  auto ev = read_lines(read_file(events));
  EXPECT_EQ(event_names(ev), (std::vector<std::string>{"plan_started", "stage_started", "command_started",
                                                       "command_finished", "command_started", "command_finished",
                                                       "stage_finished", "stage_started", "command_started",
                                                       "command_finished", "stage_finished", "plan_finished"}));
  // Written as they happened: stage b's command saw the nine lines before its own finish.
  json rep = json::parse(r.out);
  EXPECT_EQ(rep["stages"][1]["commands"][0]["stdout"], "9\n");
  for (const auto& e : ev) EXPECT_TRUE(e["time"].is_string()) << e;
  EXPECT_EQ(ev[0]["session"], rep["session"]);
  EXPECT_EQ(ev[0]["stages"].size(), 3u);
  EXPECT_EQ(ev[1]["stage"], "a");
  EXPECT_EQ(ev[2]["command"], "echo one");
  EXPECT_EQ(ev[2]["index"], 0);
  EXPECT_EQ(ev[3]["status"], "succeeded");
  EXPECT_EQ(ev[3]["stdout_bytes"], 4);
  EXPECT_FALSE(ev[3].contains("stdout"));  // the result, not the output
  EXPECT_EQ(ev[4]["index"], 1);
  EXPECT_EQ(ev[6]["status"], "passed");
  EXPECT_EQ(ev[7]["stage_index"], 1);
  EXPECT_EQ(ev[9]["exit_code"], 1);
  EXPECT_EQ(ev[10]["status"], "failed");
  EXPECT_EQ(ev[11]["status"], "failed");
  EXPECT_EQ(ev[11]["reason"], rep["reason"]);
  EXPECT_EQ(ev[11]["stages"][2]["status"], "skipped");

  // --events -: stdout is the event log alone.
  r = run_plan(path, {"--events", "-", "--report", dir + "/r.json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(event_names(read_lines(r.out)), event_names(ev));
  EXPECT_EQ(json::parse(read_file(dir + "/r.json"))["status"], "failed");

  // A reader of the event log that goes away: no SIGPIPE kills sbsh, the run goes on, and
  // the report says the log is incomplete. The first command waits until the reader is gone.
  std::string reader = dir + "/reader";
  path = plan_file("gone.yaml",
                   "stages:\n"
                   "  - name: a\n"
                   "    commands:\n"
                   "      - while [ ! -s " + reader + " ] || { s=$(cut -d' ' -f3 /proc/$(cat " + reader +
                       ")/stat 2>/dev/null) && [ \"$s\" != Z ]; }; do sleep 0.01; done\n"
                   "      - touch " + dir + "/ran\n");
  std::string line = shell_quote(bin("sbsh")) + " --socket " + shell_quote(sock) + " run -q --events - --report " +
                     shell_quote(dir + "/gone.json") + " " + shell_quote(path) + " | { echo $BASHPID > " +
                     shell_quote(reader) + "; }; echo ${PIPESTATUS[0]}";
  r = run({"/bin/bash", "-c", line});
  EXPECT_EQ(r.out, "255\n") << r.err;
  EXPECT_TRUE(fs::exists(dir + "/ran"));
  json gone = json::parse(read_file(dir + "/gone.json"));
  EXPECT_EQ(gone["status"], "passed");
  EXPECT_NE(gone["error"].get<std::string>().find("the event log stopped"), std::string::npos) << gone["error"];
  EXPECT_NE(gone["error"].get<std::string>().find(std::strerror(EPIPE)), std::string::npos) << gone["error"];
}

TEST_F(plan_test, CtrlCOrSigtermStopsTheRunAndStillWritesTheReport) {
  for (int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(strsignal(sig));
    std::string d = dir + "/" + std::to_string(sig);
    fs::create_directories(d);
    auto path = plan_file(std::to_string(sig) + ".yaml",
                          "stages:\n"
                          "  - name: long\n"
                          "    commands: [\"sh -c 'echo $$ > " + d + "/pid; exec sleep 60'\", 'touch " + d + "/never']\n"
                          "  - name: later\n"
                          "    commands: ['touch " + d + "/never2']\n");
    std::vector<std::string> argv{bin("sbsh"), "--socket", sock, "--no-autostart", "run", "-q", "--report", d + "/r.json",
                                  "--events", d + "/e.jsonl", path};
    auto args = exec_argv(argv);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, (d + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, (d + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t child;
    ASSERT_EQ(posix_spawn(&child, args[0], &fa, nullptr, args.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    ASSERT_TRUE(wait_until([&] { return !read_file(d + "/pid").empty(); }, std::chrono::seconds(30)));
    ::kill(child, sig);
    int st = 0;
    ASSERT_EQ(::waitpid(child, &st, 0), child);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 130) << st << read_file(d + "/err");
    json rep = json::parse(read_file(d + "/r.json"));
    EXPECT_EQ(rep["status"], "cancelled");
    EXPECT_NE(rep["reason"]["message"].get<std::string>().find("cancelled during stage long, command 0"),
              std::string::npos) << rep["reason"];
    EXPECT_EQ(rep["stages"][0]["status"], "cancelled");
    EXPECT_EQ(rep["stages"][0]["commands"][0]["status"], "cancelled");
    EXPECT_EQ(rep["stages"][0]["commands"][1]["status"], "skipped");
    EXPECT_EQ(rep["stages"][1]["status"], "skipped");
    auto ev = read_lines(read_file(d + "/e.jsonl"));
    ASSERT_FALSE(ev.empty());
    EXPECT_EQ(ev.back()["event"], "plan_finished");
    EXPECT_EQ(ev.back()["status"], "cancelled");
    pid_t pid = std::atoi(read_file(d + "/pid").c_str());
    EXPECT_TRUE(wait_until([&] { return !pid_alive(pid); }, std::chrono::seconds(10)));
    EXPECT_FALSE(fs::exists(d + "/never"));
    EXPECT_FALSE(fs::exists(d + "/never2"));
    EXPECT_EQ(session_names(), std::vector<std::string>{});
  }
}

TEST_F(plan_test, YamlAndJsonPlansGiveTheSameReport) {
  fs::create_directories(dir + "/sub");
  auto yaml = plan_file("p.yaml",
                        "# the same plan as p.json\n"
                        "session: {cwd: " + dir + ", env: {CI: 1}}\n"
                        "timeout: 30s\n"
                        "stages:\n"
                        "  - name: setup\n"
                        "    commands: [export A=1, {run: 'pwd; echo $J $CI', cwd: sub, env: {J: 2}, timeout: 10}]\n"
                        "  - name: xfail\n"
                        "    expect: failure\n"
                        "    commands:\n"
                        "      - |\n"
                        "        echo $A\n"
                        "        false\n");
  auto json_plan = plan_file("p.json",
                             R"({"session": {"cwd": ")" + dir + "\", \"env\": {\"CI\": 1}}, \"timeout\": \"30s\",\n"
                             " \"stages\": [\n"
                             "  {\"name\": \"setup\", \"commands\": [\"export A=1\",\n"
                             "    {\"run\": \"pwd; echo $J $CI\", \"cwd\": \"sub\", \"env\": {\"J\": 2}, \"timeout\": \"10s\"}]},\n"
                             "  {\"name\": \"xfail\", \"expect\": \"failure\", \"commands\": [\"echo $A\\nfalse\\n\"]}]}\n");
  json a = report_of(yaml, 0);
  json b = report_of(json_plan, 0);
  EXPECT_EQ(a["stages"][0]["commands"][1]["stdout"], dir + "/sub\n2 1\n");
  EXPECT_EQ(stable(a), stable(b)) << a.dump(1) << "\n" << b.dump(1);
}

TEST_F(plan_test, KeepSessionLeavesTheSessionAndSaysWhichItIs) {
  auto path = plan_file("keep.yaml", "stages: [{name: s, commands: ['cd / && export KEPT=yes']}]\n");
  auto r = run_plan(path, {"--keep-session", "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  json rep = json::parse(r.out);
  std::string name = rep["session"];
  EXPECT_TRUE(rep["session_kept"].get<bool>());
  EXPECT_NE(r.err.find("sbsh: kept session " + name), std::string::npos) << r.err;
  EXPECT_EQ(exec(name, "pwd; echo $KEPT").out, "/\nyes\n");

  // A name of one's choosing; a session that exists is not a fresh one.
  r = run_plan(path, {"-s", "mine", "--keep-session"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["session"], "mine");
  r = run_plan(path, {"-s", "mine"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("a session named 'mine' exists"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(plan_test, ACommandThatCannotRunFailsEvenAnExpectedFailure) {
  // The session's shell cannot start (its init fails), so no shell takes the command.
  auto path = plan_file("norun.yaml",
                        "session: {init: ['exit 1'], restart: never}\n"
                        "stages: [{name: s, expect: failure, commands: ['true']}]\n");
  auto r = run_plan(path);
  json rep = json::parse(r.out);
  EXPECT_EQ(rep["status"], "failed") << rep.dump(1);
  EXPECT_EQ(rep["stages"][0]["status"], "failed");
  std::string status = rep["stages"][0]["commands"][0]["status"];
  EXPECT_EQ(status, "not_run") << rep.dump(1);
  EXPECT_FALSE(rep["reason"]["message"].get<std::string>().empty());
  EXPECT_TRUE(r.code == 1 || r.code == 255) << r.code;
}

// Every kind of invalid plan: an error naming the field and what it expected.
TEST_F(plan_test, ASessionBlockConfinesTheRunsSession) {
  fs::create_directories(dir + "/box");
  fs::create_directories(dir + "/ro");
  write_file(dir + "/box/inside", "inside\n");
  write_file(dir + "/secret", "secret\n");
  write_file(dir + "/ro/shared", "shared\n");
  auto path = plan_file("box.yaml",
                        "session:\n"
                        "  root: " + dir + "/box\n"
                        "  confine: true\n"
                        "  no_network: true\n"
                        "  read_only: [" + dir + "/ro]\n"
                        "stages:\n"
                        "  - name: within\n"
                        "    commands: ['cat inside', 'cat " + dir + "/ro/shared']\n"
                        "  - name: beside\n"
                        "    expect: failure\n"
                        "    commands: ['cat " + dir + "/secret']\n");
  auto r = run_plan(path, {"-s", "box", "--keep-session"});
  if (r.code == 255 && r.err.find("cannot confine") != std::string::npos) GTEST_SKIP() << r.err;  // not_supported
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  json rep = json::parse(r.out);
  EXPECT_EQ(rep["stages"][0]["commands"][0]["stdout"], "inside\n");
  EXPECT_EQ(rep["stages"][0]["commands"][1]["stdout"], "shared\n");
  const auto& beside = rep["stages"][1]["commands"][0];
  EXPECT_EQ(beside["status"], "failed");
  EXPECT_NE(beside["exit_code"], 0);
  EXPECT_EQ(beside["stdout"], "");
  // Outside the session's view of the files.
  EXPECT_NE(beside["stderr"].get<std::string>().find("No such file or directory"), std::string::npos) << beside;
  json show = json::parse(sbsh({"session", "show", "box", "--json"}).out);
  const auto& c = show["definition"]["confinement"];
  EXPECT_GE(c["landlock_abi"].get<int>(), 1) << show;
  EXPECT_EQ(c["namespaces"], json::array({"pid", "net"})) << show;
  EXPECT_EQ(c["rules"].back()["path"], dir + "/ro") << show;
  EXPECT_EQ(c["rules"].back()["access"], "read-only") << show;
}

TEST_F(plan_test, ASessionBlockMemoryLimitReachesSbshd) {
  // Made where sbshd has a cgroup v2 delegated to it, else refused with the reason.
  auto path = plan_file("mem.json",
                        R"({"session": {"memory": "256M", "pids": 64, "cpu": 0.5},
                            "stages": [{"name": "s", "commands": ["echo ok"]}]})");
  auto r = run_plan(path, {"-s", "mem", "--keep-session"});
  if (r.code == 255) {
    json rep = json::parse(r.out);
    ASSERT_TRUE(rep["error"].is_string()) << r.out;
    std::string why = rep["error"];
    EXPECT_TRUE(why.find("memory") != std::string::npos || why.find("cgroup") != std::string::npos) << why;
    EXPECT_EQ(session_names(), std::vector<std::string>{});
    return;
  }
  ASSERT_EQ(r.code, 0) << r.err;
  json c = json::parse(sbsh({"session", "show", "mem", "--json"}).out)["definition"]["confinement"];
  EXPECT_EQ(c["memory_max"], 256 << 20) << c;
  EXPECT_EQ(c["pids_max"], 64) << c;
  EXPECT_EQ(c["cpu_millis"], 500) << c;
}

TEST_F(plan_test, InvalidPlansAreRefusedWithTheFieldAndWhatWasExpected) {
  const std::pair<std::string, std::string> cases[] = {
      {"{\"stages\": [}", "invalid JSON: parse error at line 1, column 13"},
      // A number past a double's range: refused, not a crash.
      {"{\"timeout\": 1E400}", "invalid JSON: number overflow parsing '1E400'"},
      {"stages: [a, b\n", "invalid YAML at line 2"},
      // An alias inside the list it names: an endless tree, refused (it used to crash).
      {"stages: &s [{name: a, commands: *s}]\n", "nested more than 1000 levels deep (is an alias inside"},
      {"stages: [{name: a, commands: [x]}]\nstages: []\n", "invalid YAML at line 2, column 1: \"stages\" is given twice"},
      {"", "the plan must be a mapping with stages (and optionally session and timeout), not an empty document"},
      {"- a\n- b\n", "not a list"},
      {"stage: []\n", "stage: unknown field (expected session, timeout or stages)"},
      {"timeout: 5s\n", "stages: missing: a list of stages to run"},
      {"stages: build\n", "stages: expected a list of stages, not \"build\""},
      {"stages: []\n", "stages: the list is empty: give at least one stage"},
      {"stages: [build]\n", "stages[0]: expected a stage: a mapping with name and commands, not \"build\""},
      {"stages: [{commands: [x]}]\n", "stages[0].name: missing: every stage needs a name"},
      {"stages: [{name: my stage, commands: [x]}]\n", "stages[0].name: \"my stage\" is not a stage name"},
      {"stages: [{name: ../up, commands: [x]}]\n", "stages[0].name: \"../up\" is not a stage name"},
      {"stages: [{name: a, commands: [x]}, {name: a, commands: [y]}]\n",
       "stages[1].name: \"a\" names an earlier stage too; stage names must be unique"},
      {"stages: [{name: a}]\n", "stages[0].commands: missing: a list of commands to run"},
      {"stages: [{name: a, commands: []}]\n", "stages[0].commands: the list is empty"},
      {"stages: [{name: a, comands: [x]}]\n", "stages[0].comands: unknown field (expected name, commands or expect)"},
      {R"({"stages": [{"name": "a", "commands": [42]}]})",
       "stages[0].commands[0]: expected a command: text, or a mapping with run, not 42"},
      {"stages: [{name: a, commands: [{timeout: 5s}]}]\n", "stages[0].commands[0].run: missing: the shell text to run"},
      {"stages: [{name: a, commands: ['']}]\n", "stages[0].commands[0]: an empty command"},
      {"stages: [{name: a, commands: [{run: x, timeot: 5s}]}]\n",
       "stages[0].commands[0].timeot: unknown field (expected run, timeout, cwd, env, input or tty)"},
      {"session: {root: /tmp, allow_write: [/tmp/x]}\nstages: [{name: a, commands: [x]}]\n",
       "session.allow_write: adds to a confined session's rules: give confine: true too"},
      {"session: {root: /tmp, confine: true, allow_read: [rel/dir]}\nstages: [{name: a, commands: [x]}]\n",
       "session.allow_read[0]: \"rel/dir\" is not an absolute path"},
      {"session: {confine: true}\nstages: [{name: a, commands: [x]}]\n",
       "session.confine: confines the session to its root: give root or snapshot too"},
      {"session: {confine: maybe}\nstages: [{name: a, commands: [x]}]\n",
       "session.confine: expected true or false, not \"maybe\""},
      {"session: {memory: lots}\nstages: [{name: a, commands: [x]}]\n",
       "session.memory: \"lots\" is not a memory size"},
      {"session: {cpu: 0}\nstages: [{name: a, commands: [x]}]\n", "session.cpu: \"0\" is not a number of CPUs"},
      {"session: {pids: 1.5}\nstages: [{name: a, commands: [x]}]\n",
       "session.pids: \"1.5\" is not a number of processes"},
      {"stages:\n  - {name: a, commands: [x]}\n  - {name: b, commands: [{run: make, timeout: 10 minutes}]}\n",
       "stages[1].commands[0].timeout: \"10 minutes\" is not a duration (500ms, 30s, 5m, 1h, or a number of seconds)"},
      {R"({"stages": [{"name": "a", "commands": [{"run": "x", "timeout": -5}]}]})",
       "stages[0].commands[0].timeout: -5 is not a duration"},
      {"timeout: soon\nstages: [{name: a, commands: [x]}]\n", "timeout: \"soon\" is not a duration"},
      {"stages: [{name: a, expect: fails, commands: [x]}]\n",
       "stages[0].expect: \"fails\" is not an expectation (success or failure)"},
      {"stages: [{name: a, commands: [{run: x, env: X=1}]}]\n",
       "stages[0].commands[0].env: expected a mapping of names to values, not \"X=1\""},
      {"stages: [{name: a, commands: [{run: x, env: {1X: a}}]}]\n",
       "stages[0].commands[0].env: \"1X\" is not a variable name"},
      {"stages: [{name: a, commands: [{run: x, env: {X: [1]}}]}]\n",
       "stages[0].commands[0].env.X: expected a value, not a list"},
      {"stages: [{name: a, commands: [{run: x, cwd: [a]}]}]\n", "stages[0].commands[0].cwd: expected text, not a list"},
      {R"({"stages": [{"name": "a", "commands": ["a\u0000b"]}]})",
       "stages[0].commands[0]: the command contains a NUL byte"},
      {"session: x\nstages: [{name: a, commands: [x]}]\n", "session: expected a mapping"},
      {"session: {setdown: x}\nstages: [{name: a, commands: [x]}]\n", "session.setdown: unknown field"},
      {"session: {cwd: /tmp, snapshot: .}\nstages: [{name: a, commands: [x]}]\n",
       "session: cwd and snapshot both say where the session starts"},
      {"session: {limits: {nofile: lots}}\nstages: [{name: a, commands: [x]}]\n", "session.limits: \"nofile=lots\": "},
      {"session: {restart: sometimes}\nstages: [{name: a, commands: [x]}]\n",
       "session.restart: \"sometimes\" is not a restart policy (always, on-failure or never)"},
      {"session: {init: [[a]]}\nstages: [{name: a, commands: [x]}]\n", "session.init[0]: expected text, not a list"},
      {"stages: []\nstages: []\n", "\"stages\" is given twice"},
      {"a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
       "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
       "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
       "the plan has more than 100000 values"},
      {std::string(5000, '['), "invalid YAML"},
      {"{\"stages\": " + std::string(200000, '[') + std::string(200000, ']') + "}",
       "stages[0]: expected a stage: a mapping with name and commands, not a list"},
  };
  for (const auto& [text, want] : cases) {
    auto p = client::parse_plan(text);
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_EQ(p.err().code, "invalid_plan");
    EXPECT_NE(p.err().message.find(want), std::string::npos) << "plan: " << text.substr(0, 200) << "\nmessage: "
                                                            << p.err().message << "\nwanted: " << want;
  }

  // Through the CLI: exit 255, the message on stderr with the file's name, and nothing run.
  auto path = plan_file("bad.yaml",
                        "stages:\n  - {name: a, commands: ['touch " + dir + "/ran']}\n"
                        "  - {name: b, commands: [{run: make, timeout: 10 minutes}]}\n");
  auto r = run_plan(path, {"--report", dir + "/r.json"});
  EXPECT_EQ(r.code, 255);
  EXPECT_EQ(r.err, "sbsh: " + path + ": stages[1].commands[0].timeout: \"10 minutes\" is not a duration (500ms, 30s, "
                                     "5m, 1h, or a number of seconds)\n");
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(fs::exists(dir + "/ran"));
  EXPECT_FALSE(fs::exists(dir + "/r.json"));
  EXPECT_EQ(session_names(), std::vector<std::string>{});
  r = run_plan(dir + "/missing.yaml");
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("cannot read the plan " + dir + "/missing.yaml: No such file or directory"), std::string::npos);
  r = run_plan(dir);
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("it is a directory"), std::string::npos) << r.err;
  r = run_plan(path, {"--output-limit", "lots"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("--output-limit takes a number of bytes, not 'lots'"), std::string::npos);
  r = run_plan(path, {"--report", "-", "--events", "-"});
  EXPECT_EQ(r.code, 255);
  // A plan from stdin, detected as JSON.
  std::string text = R"({"stages": [{"name": "s", "commands": ["echo stdin"]}]})";
  r = sbsh({"run", "-q", "-"}, &text);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["stages"][0]["commands"][0]["stdout"], "stdin\n");

  // A plan built in code is checked the same way.
  client::plan p;
  p.stages.push_back({"bad/name", client::expectation::success, {{"true", std::nullopt, {}, {}, {}, false}}});
  auto conn_ = conn();
  auto rep = client::run_plan(conn_, p);
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.err().code, "invalid_plan");
  EXPECT_NE(rep.err().message.find("stages[0].name: \"bad/name\" is not a stage name"), std::string::npos);
}

// The library: the callback sees each event as the event log has it, and a canceller from
// another thread cancels the run.
TEST_F(plan_test, TheLibraryReportsEventsToACallbackAndCanBeCancelled) {
  auto p = client::parse_plan(
      "stages:\n"
      "  - {name: one, commands: ['echo hi']}\n"
      "  - {name: two, commands: [\"touch " + dir + "/started; sleep 60\", 'touch " + dir + "/never']}\n");
  ASSERT_TRUE(p.ok()) << p.err().message;
  auto c = conn();
  client::canceller stop;
  client::run_options o;
  o.events_path = dir + "/e.jsonl";
  o.cancel_fd = stop.fd();
  std::vector<std::string> seen;
  std::thread canceller_thread([&] {
    if (wait_until([&] { return fs::exists(dir + "/started"); }, std::chrono::seconds(30))) stop.cancel();
  });
  auto rep = client::run_plan(c, *p, o, [&](const client::run_event& e) {
    seen.emplace_back(e.json);
    if (e.name == "command_finished") {
      EXPECT_EQ(e.report.stages[static_cast<size_t>(e.stage)].name, e.stage == 0 ? "one" : "two");
    }
  });
  canceller_thread.join();
  ASSERT_TRUE(rep.ok()) << rep.err().message;
  EXPECT_EQ(rep->status, client::run_status::cancelled);
  EXPECT_EQ(client::exit_status(*rep), 130);
  EXPECT_EQ(rep->stages[0].commands[0].stdout_data, "hi\n");
  const auto& cmd = rep->stages[1].commands[0];
  EXPECT_EQ(cmd.status, client::command_status::cancelled)
      << "exit " << cmd.exit_code.value_or(-1) << ", signal " << cmd.signal.value_or(0) << ", error '" << cmd.error
      << "', stdout '" << cmd.stdout_data << "', stderr '" << cmd.stderr_data << "', " << cmd.duration_ms << " ms";
  EXPECT_FALSE(fs::exists(dir + "/never"));
  std::string log = read_file(dir + "/e.jsonl");
  std::string joined;
  for (const auto& s : seen) joined += s + "\n";
  EXPECT_EQ(joined, log);
  // The same connection serves further requests.
  auto st = c.status();
  EXPECT_TRUE(st.ok());
}

}  // namespace sbsh::test::plan_tests
