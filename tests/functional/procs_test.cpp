// Background processes: `kill` ends every process of one (setsid and orphans included) and
// returns only then; a signal it survives leaves it running; `start` refuses what `exec`
// refuses and names that would be ambiguous; the process table stays within the frame cap and
// survives sbshd restarts and damage to its file.
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "fixture.h"

namespace sbsh::test::procs_tests {

using json = nlohmann::json;
using std::chrono::seconds;
std::vector<pid_t> numbers_in(const std::string& s) {
  std::vector<pid_t> out;
  std::istringstream in(s);
  long v;
  while (in >> v) out.push_back(static_cast<pid_t>(v));
  return out;
}

class procs_test : public daemon_test {
 protected:
  // A tree that ignores SIGTERM everywhere: a shell, a helper, a helper whose child called
  // setsid, and an orphan of a double fork in a session of its own (its parent is gone before
  // any kill). Each prints its pid. Returns them all.
  std::vector<pid_t> start_stubborn_tree(const std::string& name) {
    std::string h = shell_quote(helper());
    auto r = sbsh({"start", "--name", name, "--",
                   "trap '' TERM; echo $BASHPID; (setsid " + h + " ignore-term 300 &); " + h + " spawn-setsid 300 & " +
                       h + " ignore-term 300"});
    EXPECT_EQ(r.code, 0) << r.err;
    std::vector<pid_t> pids;
    EXPECT_TRUE(wait_until([&] {
      pids = numbers_in(sbsh({"logs", "--stdout", "--", name}).out);
      return pids.size() == 5;
    }, std::chrono::seconds(20)))
        << pids.size();
    for (pid_t p : pids) EXPECT_TRUE(pid_alive(p)) << p;
    return pids;
  }
  json record(const std::string& name) {
    auto all = json::parse(sbsh({"ps", "-a", "--json"}).out);
    for (auto& p : all.at("processes"))
      if (p.at("name") == name) return p;
    return {};
  }
};

TEST_F(procs_test, KillEndsATreeThatIgnoresTermAndReturnsOnlyWhenAllOfItIsGone) {
  auto pids = start_stubborn_tree("s");
  ASSERT_EQ(pids.size(), 5u);
  auto before = std::chrono::steady_clock::now();
  auto r = sbsh({"kill", "s"});
  auto took = std::chrono::steady_clock::now() - before;
  EXPECT_EQ(r.code, 0) << r.err;
  // Not one process is left at the moment kill returns: no waiting here.
  for (pid_t p : pids) EXPECT_FALSE(pid_alive(p)) << p << " outlived kill";
  EXPECT_GE(took, std::chrono::milliseconds(1900));  // TERM was ignored: KILL after the grace
  EXPECT_NE(r.out.find("has ended: killed by SIGKILL"), std::string::npos) << r.out;
  auto p = record("s");
  EXPECT_EQ(p.at("state"), "killed");
  EXPECT_EQ(p.at("signal"), "SIGKILL");
  EXPECT_EQ(sbsh({"wait", "s"}).code, 137);
  // Again, on a process that has ended: it works and says so.
  r = sbsh({"kill", "-9", "s"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("has ended"), std::string::npos) << r.out;
}

TEST_F(procs_test, KillNineEndsAPythonThatIgnoresTermAtOnce) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no python3";
  const std::string ignores_term =
      "exec python3 -c 'import os,signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
      "print(os.getpid(), flush=True); time.sleep(300)'";
  ASSERT_EQ(sbsh({"start", "--name", "py", "--", ignores_term}).code, 0);
  std::vector<pid_t> pids;
  ASSERT_TRUE(wait_until([&] { return !(pids = numbers_in(sbsh({"logs", "py"}).out)).empty(); }, seconds(20)));
  auto r = sbsh({"kill", "-9", "py"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(pid_alive(pids[0]));
  EXPECT_NE(r.out.find("has ended: killed by SIGKILL"), std::string::npos) << r.out;
}

TEST_F(procs_test, ASignalItSurvivesLeavesItRunningAndTracked) {
  ASSERT_EQ(sbsh({"start", "--name", "loop", "--", "trap 'echo got' HUP USR1; echo $BASHPID; while :; do sleep .2; done"}).code,
            0);
  std::vector<pid_t> pids;
  ASSERT_TRUE(wait_until([&] { return !(pids = numbers_in(sbsh({"logs", "loop"}).out)).empty(); }, seconds(20)));
  auto r = sbsh({"kill", "-HUP", "loop"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("sent SIGHUP to process 1 (loop); it is still running"), std::string::npos) << r.out;
  EXPECT_TRUE(wait_until([&] { return sbsh({"logs", "loop"}).out.find("got") != std::string::npos; }, seconds(10)));
  EXPECT_TRUE(pid_alive(pids[0]));
  EXPECT_EQ(record("loop").at("state"), "running");
  EXPECT_EQ(sbsh({"wait", "-t", "300ms", "loop"}).code, 124);
  // USR1 likewise, when trapped.
  r = sbsh({"kill", "-s", "USR1", "loop"});
  EXPECT_NE(r.out.find("still running"), std::string::npos) << r.out;
  EXPECT_TRUE(pid_alive(pids[0]));
  // It is still tracked: TERM ends it, and it is reported as ended by it.
  r = sbsh({"kill", "loop"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(pid_alive(pids[0]));
  auto p = record("loop");
  EXPECT_EQ(p.at("state"), "killed");
  EXPECT_EQ(p.at("signal"), "SIGTERM");
}

// wait answers when nothing of the process is left: its command ended, and its keeper has
// reaped what the command left, those still running and those already ended (zombies until
// reaped) alike.
TEST_F(procs_test, WaitAnswersOnlyOnceTheKeeperHasReapedWhatTheCommandLeft) {
  ASSERT_EQ(sbsh({"start", "--name", "left", "--", "sleep 3 & echo $!; (setsid sh -c 'echo $$' &); exit 3"}).code, 0);
  std::vector<pid_t> pids;
  ASSERT_TRUE(wait_until(
      [&] {
        return (pids = numbers_in(sbsh({"logs", "--stdout", "left"}).out)).size() == 2;
      },
      seconds(20)));
  ASSERT_TRUE(wait_until([&] { return record("left").at("state") == "exited"; }, seconds(20)));
  EXPECT_EQ(record("left").at("exit_code"), 3);
  // The command has ended; what it left has not.
  auto early = sbsh({"wait", "-t", "200ms", "left"});
  EXPECT_EQ(early.code, 124);
  EXPECT_NE(early.err.find("processes it started still run"), std::string::npos) << early.err;
  auto w = sbsh({"wait", "left"});
  EXPECT_EQ(w.code, 3) << w.err;
  // Nothing of it is left, not even as a zombie: no process has these pids.
  for (pid_t p : pids) EXPECT_NE(::kill(p, 0), 0) << p << " " << proc_file(p, "stat");
}

// Stress: several TERM-ignoring trees killed at once, by TERM and by KILL, a few rounds.
TEST_F(procs_test, KillOfManyStubbornTreesAtOnceLeavesNothing) {
  for (int round = 0; round < 3; ++round) {
    std::vector<std::vector<pid_t>> trees;
    std::vector<std::string> names;
    for (int i = 0; i < 3; ++i) {
      names.push_back("t" + std::to_string(round) + "-" + std::to_string(i));
      trees.push_back(start_stubborn_tree(names.back()));
    }
    std::vector<run_result> results(names.size());
    std::vector<std::thread> killers;
    for (size_t i = 0; i < names.size(); ++i)
      killers.emplace_back([&, i] { results[i] = sbsh(i % 2 == 0 && round != 1 ? std::vector<std::string>{"kill", names[i]}
                                                                              : std::vector<std::string>{"kill", "-9", names[i]}); });
    for (auto& k : killers) k.join();
    for (size_t i = 0; i < names.size(); ++i) {
      EXPECT_EQ(results[i].code, 0) << results[i].err;
      for (pid_t p : trees[i]) EXPECT_FALSE(pid_alive(p)) << names[i] << ": " << p;
    }
  }
  EXPECT_TRUE(json::parse(sbsh({"ps", "--json"}).out).at("processes").empty());
}

TEST_F(procs_test, StartRefusesAMissingDirectoryAndAmbiguousNames) {
  auto r = sbsh({"start", "-C", "/nonexistent", "--", "touch " + shell_quote(dir + "/ran")});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("/nonexistent"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/ran"));
  for (const std::string& bad : {std::string("\nbad name"), std::string("123"), std::string("a b")}) {
    r = sbsh({"start", "--name", bad, "--", "true"});
    EXPECT_EQ(r.code, 255) << bad;
    EXPECT_NE(r.err.find("invalid process name"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // one line
  }
  ASSERT_EQ(sbsh({"start", "--name", "dup", "--", "sleep 300"}).code, 0);
  r = sbsh({"start", "--name", "dup", "--", "true"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("a process named 'dup' is running"), std::string::npos) << r.err;
  // Nothing else was started.
  auto all = json::parse(sbsh({"ps", "-a", "--json"}).out).at("processes");
  EXPECT_EQ(all.size(), 1u) << all.dump();
  // Once it has ended, its name may be taken again, and then names the newest.
  ASSERT_EQ(sbsh({"kill", "dup"}).code, 0);
  auto again = sbsh({"start", "--name", "dup", "--", "exit 4"});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(sbsh({"wait", "dup"}).code, 4);
}

TEST_F(procs_test, NineMiBCommandTextsKeepTheTableListableAndSaved) {
  auto c = conn();
  std::string big = "echo ran #" + std::string(9u << 20, 'x');
  for (const char* name : {"big1", "big2"}) {
    client::start_options o;
    o.name = name;
    o.command = big;
    auto p = c.start(o);
    ASSERT_TRUE(p.ok()) << p.err().message;
  }
  EXPECT_EQ(sbsh({"wait", "big1"}).code, 0);
  EXPECT_EQ(sbsh({"wait", "big2"}).code, 0);
  auto ps = sbsh({"ps", "-a", "--json"});
  ASSERT_EQ(ps.code, 0) << ps.err;
  auto procs = json::parse(ps.out).at("processes");
  ASSERT_EQ(procs.size(), 2u);
  std::string shown = procs.at(0).at("command");
  EXPECT_LT(shown.size(), 8192u);
  EXPECT_NE(shown.find("bytes in all]"), std::string::npos) << shown.substr(shown.size() - 40);
  // The whole text is kept beside the logs.
  std::ifstream whole(state + "/procs/1.cmd", std::ios::binary);
  std::string kept((std::istreambuf_iterator<char>(whole)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(kept == big) << kept.size();
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(state + "/procs.msgpack") &&
                                      std::filesystem::file_size(state + "/procs.msgpack") < (1u << 20); },
                         seconds(5)));
  stop_daemon();
  start_daemon();
  ps = sbsh({"ps", "-a", "--json"});
  ASSERT_EQ(ps.code, 0) << ps.err;
  procs = json::parse(ps.out).at("processes");
  ASSERT_EQ(procs.size(), 2u) << ps.out.substr(0, 300);
  EXPECT_EQ(procs.at(1).at("name"), "big2");
  EXPECT_EQ(procs.at(1).at("exit_code"), 0);
}

TEST_F(procs_test, ADamagedProcessTableKeepsTheRecordsThatCanBeRead) {
  for (int code : {3, 4, 5, 6}) {
    ASSERT_EQ(sbsh({"start", "--name", "p" + std::to_string(code), "--", "exit " + std::to_string(code)}).code, 0);
    ASSERT_EQ(sbsh({"wait", "p" + std::to_string(code)}).code, code);
  }
  std::string path = state + "/procs.msgpack";
  stop_daemon();
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  // Frames: the head, then one per record. Break the second record's body, and cut the last
  // record short.
  std::vector<size_t> starts;
  for (size_t at = 0; at + 4 <= bytes.size();) {
    starts.push_back(at);
    uint32_t len = (uint32_t(uint8_t(bytes[at])) << 24) | (uint32_t(uint8_t(bytes[at + 1])) << 16) |
                   (uint32_t(uint8_t(bytes[at + 2])) << 8) | uint32_t(uint8_t(bytes[at + 3]));
    at += 4 + len;
  }
  ASSERT_EQ(starts.size(), 5u);
  bytes[starts[2] + 4] = static_cast<char>(0xc1);  // never valid msgpack
  bytes.resize(bytes.size() - 7);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  start_daemon();
  auto ps = sbsh({"ps", "-a", "--json"});
  ASSERT_EQ(ps.code, 0) << ps.err;
  std::map<std::string, int> codes;
  auto table = json::parse(ps.out);
  for (auto& p : table.at("processes")) codes[p.at("name")] = p.at("exit_code");
  EXPECT_EQ(codes, (std::map<std::string, int>{{"p3", 3}, {"p5", 5}})) << ps.out;
  // A new process takes a new id, not one of the records', and the damaged file is kept aside.
  auto id = sbsh({"start", "--", "true"});
  EXPECT_EQ(trim(id.out), "5");
  bool aside = false;
  for (const auto& e : std::filesystem::directory_iterator(state))
    aside = aside || e.path().filename().string().rfind("procs.msgpack.corrupt-", 0) == 0;
  EXPECT_TRUE(aside);
}

}  // namespace sbsh::test::procs_tests
