// Commands that outlive the call, and results that keep the end, on a real sbshd: exec
// --detach-after leaves a command running at the session's top level (its cd and variables
// persist; later commands queue behind it) and exits 254 with its %ID; `sbsh wait %ID` gives
// its exact result after the client that started it has gone, `sbsh logs %ID` its output,
// `sbsh kill %ID` stops it as a timeout does. A result longer than --output-limit keeps its
// first and last part and counts what it left out, and the whole output stays with sbshd.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "fixture.h"

namespace sbsh::test {

using json = nlohmann::json;
using namespace std::chrono_literals;

namespace detach_tests {

using detach_test = daemon_test;

// The %ID a detached exec --json printed, after checking that it says the command runs on.
std::string detached_id(const run_result& r) {
  EXPECT_EQ(r.code, 254) << r.out << r.err;
  auto j = json::parse(r.out);
  EXPECT_TRUE(j["running"].get<bool>()) << r.out;
  EXPECT_TRUE(j["exit_code"].is_null()) << r.out;
  std::string id = j["id"].get<std::string>();
  EXPECT_EQ(id[0], '%') << r.out;
  return id;
}

pid_t read_pid(const std::string& path) {
  pid_t pid = 0;
  wait_until(
      [&] {
        std::ifstream f(path);
        return static_cast<bool>(f >> pid) && pid > 0;
      },
      20s);
  return pid;
}

TEST_F(detach_test, ADetachedCommandGoesOnAndItsStatePersists) {
  auto r = sbsh({"exec", "-s", "d", "--detach-after", "300ms", "--json",
                 "echo before; sleep 1.5; cd /tmp; export X=detached; echo after; (exit 3)"});
  std::string id = detached_id(r);
  EXPECT_EQ(json::parse(r.out)["stdout"], "before\n") << r.out;
  EXPECT_NE(r.err.find("still running"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sbsh wait " + id), std::string::npos) << r.err;

  // The client that started it has exited. A command sent now waits for it, as at a prompt,
  // and sees what it left.
  auto next = exec("d", "echo $PWD $X");
  EXPECT_EQ(next.code, 0) << next.err;
  EXPECT_EQ(next.out, "/tmp detached\n");

  // Its exact result, with the fields of exec --json and its whole output.
  auto w = sbsh({"wait", "--json", id});
  EXPECT_EQ(w.code, 3) << w.out << w.err;
  auto j = json::parse(w.out);
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_FALSE(j["running"].get<bool>());
  EXPECT_EQ(j["id"], id);
  EXPECT_EQ(j["session"], "d");
  EXPECT_EQ(j["stdout"], "before\nafter\n");
  EXPECT_FALSE(j["timed_out"].get<bool>());
  EXPECT_TRUE(j.contains("generation"));

  // Plain wait exits as the command did; logs gives its output.
  EXPECT_EQ(sbsh({"wait", id}).code, 3);
  auto l = sbsh({"logs", id});
  EXPECT_EQ(l.code, 0) << l.err;
  EXPECT_EQ(l.out, "before\nafter\n");
}

TEST_F(detach_test, WaitWithATimeoutSaysItStillRuns) {
  auto r = sbsh({"exec", "-s", "w", "--detach-after", "200ms", "--json", "sleep 2; echo done"});
  std::string id = detached_id(r);
  auto early = sbsh({"wait", "-t", "100ms", id});
  EXPECT_EQ(early.code, 124) << early.err;
  EXPECT_NE(early.err.find("still running"), std::string::npos) << early.err;
  auto l = sbsh({"logs", "-f", id});  // follows until it ends
  EXPECT_EQ(l.code, 0) << l.err;
  EXPECT_EQ(l.out, "done\n");
  EXPECT_EQ(sbsh({"wait", id}).code, 0);
}

TEST_F(detach_test, KillStopsItAsATimeoutDoesAndTheShellKeepsItsState) {
  ASSERT_EQ(exec("k", "export KEEP=yes").code, 0);
  std::string pidfile = dir + "/sleeper.pid";
  auto r = sbsh({"exec", "-s", "k", "--detach-after", "200ms", "--json",
                 "sh -c 'echo $$ > " + pidfile + "; exec sleep 30'"});
  std::string id = detached_id(r);
  pid_t pid = read_pid(pidfile);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(pid_alive(pid));
  auto k = sbsh({"kill", id});
  EXPECT_EQ(k.code, 0) << k.err;
  EXPECT_NE(k.out.find("has ended"), std::string::npos) << k.out;
  EXPECT_TRUE(wait_until([&] { return !pid_alive(pid); }, 10s));
  auto w = sbsh({"wait", "--json", id});
  auto j = json::parse(w.out);
  EXPECT_TRUE(j["cancelled"].get<bool>()) << w.out;
  auto after = exec("k", "echo $KEEP");
  EXPECT_EQ(after.out, "yes\n");
  EXPECT_FALSE(json::parse(sbsh({"session", "show", "--json", "k"}).out).is_null());
}

TEST_F(detach_test, ACommandThatEndsInTimeIsNotDetached) {
  auto r = sbsh({"exec", "-s", "q", "--detach-after", "30s", "--json", "echo quick"});
  EXPECT_EQ(r.code, 0) << r.err;
  auto j = json::parse(r.out);
  EXPECT_FALSE(j["running"].get<bool>());
  EXPECT_EQ(j["stdout"], "quick\n");
  // Kept all the same (--json): its id reaches its output.
  auto l = sbsh({"logs", j["id"].get<std::string>()});
  EXPECT_EQ(l.out, "quick\n");
}

TEST_F(detach_test, OutputForMachinesKeepsItsHeadAndTail) {
  // seq 1 3000: 13893 bytes. With a limit of 1000: the first 500 and the last 500.
  std::string whole;
  for (int i = 1; i <= 3000; ++i) whole += std::to_string(i) + "\n";
  auto r = sbsh({"exec", "-s", "t", "--json", "--output-limit", "1000", "seq 1 3000; echo oops >&2"});
  EXPECT_EQ(r.code, 0) << r.err;
  auto j = json::parse(r.out);
  std::string out = j["stdout"].get<std::string>();
  EXPECT_EQ(out.size(), 1000u);
  EXPECT_EQ(out.substr(0, 500), whole.substr(0, 500));
  EXPECT_EQ(out.substr(500), whole.substr(whole.size() - 500));
  EXPECT_EQ(j["stdout_omitted_bytes"], whole.size() - 1000);
  EXPECT_TRUE(j["stdout_truncated"].get<bool>());
  EXPECT_EQ(j["stderr"], "oops\n");
  EXPECT_EQ(j["stderr_omitted_bytes"], 0);
  EXPECT_FALSE(j["stderr_truncated"].get<bool>());
  // The whole output is with sbshd, under the command's id.
  auto l = sbsh({"logs", "--stdout", j["id"].get<std::string>()});
  EXPECT_EQ(l.code, 0) << l.err;
  EXPECT_EQ(l.out, whole);

  // --jsonl's "finished" keeps the same parts.
  auto s = sbsh({"exec", "-s", "t", "--jsonl", "--output-limit", "1000", "seq 1 3000"});
  EXPECT_EQ(s.code, 0) << s.err;
  std::string last = s.out.substr(s.out.rfind('\n', s.out.size() - 2) + 1);
  auto f = json::parse(last);
  EXPECT_EQ(f["type"], "finished");
  EXPECT_EQ(f["stdout"].get<std::string>().substr(500), whole.substr(whole.size() - 500));
  EXPECT_EQ(f["stdout_omitted_bytes"], whole.size() - 1000);
}

TEST_F(detach_test, TheCutKeepsUtf8CharactersWhole) {
  // 'é' is two bytes: 700 of them, cut at 501 bytes each side, keeps whole characters.
  auto r = sbsh({"exec", "-s", "u", "--json", "--output-limit", "1001",
                 "for i in $(seq 700); do printf '\\303\\251'; done"});
  auto j = json::parse(r.out);
  EXPECT_TRUE(j["stdout_base64"].is_null()) << "a character was cut: " << r.out;
  std::string out = j["stdout"].get<std::string>();
  EXPECT_EQ(out.size() % 2, 0u);
  EXPECT_EQ(out.size() + j["stdout_omitted_bytes"].get<size_t>(), 1400u);
}

TEST_F(detach_test, TheLibraryDetachesAwaitsAndKills) {
  auto c = conn();
  client::exec_options o;
  o.session = "lib";
  o.command = "echo first; sleep 1; echo second";
  o.detach_after = 200ms;
  auto r = c.exec(o);
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_TRUE(r->running);
  ASSERT_NE(r->command_id, 0u);
  EXPECT_EQ(r->stdout_data, "first\n");
  auto early = c.await_command(r->command_id, 50ms);
  ASSERT_TRUE(early) << early.err().message;
  EXPECT_TRUE(early->running);
  auto done = c.await_command(r->command_id, 0ms);
  ASSERT_TRUE(done) << done.err().message;
  EXPECT_FALSE(done->running);
  EXPECT_EQ(done->exit_code, 0);
  EXPECT_EQ(done->stdout_data, "first\nsecond\n");
  EXPECT_EQ(done->session, "lib");

  o.command = "sleep 30";
  auto slow = c.exec(o);
  ASSERT_TRUE(slow && slow->running);
  auto killed = c.kill_command(slow->command_id);
  ASSERT_TRUE(killed) << killed.err().message;
  EXPECT_TRUE(killed->cancelled);
  EXPECT_FALSE(killed->running);

  // One still queued behind another: killed at once, never run.
  o.command = "sleep 30";
  auto first = c.exec(o);
  o.command = "echo never";
  auto queued = c.exec(o);
  ASSERT_TRUE(first && first->running && queued && queued->running);
  auto dropped = c.kill_command(queued->command_id);
  ASSERT_TRUE(dropped) << dropped.err().message;
  EXPECT_TRUE(dropped->cancelled);
  EXPECT_FALSE(dropped->ran);
  auto dropped_out = c.await_command(queued->command_id, 0ms);
  ASSERT_TRUE(dropped_out);
  EXPECT_EQ(dropped_out->stdout_data, "");
  ASSERT_TRUE(c.kill_command(first->command_id));

  auto none = c.await_command(999999, 0ms);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.err().code, "no_such_command");
}

// Each result says where its output ends (next_offset); logs --since from there gives only
// what was written after, so a caller never reads the same bytes twice.
TEST_F(detach_test, LogsSinceAnOffsetGiveOnlyWhatIsNew) {
  auto r = sbsh({"exec", "-s", "o", "--detach-after", "300ms", "--json",
                 "echo one; echo err1 >&2; sleep 1; echo two; echo err2 >&2; sleep 1; echo three"});
  std::string id = detached_id(r);
  auto j = json::parse(r.out);
  EXPECT_EQ(j["stdout"], "one\n");
  EXPECT_EQ(j["next_offset"], "4:5") << r.out;
  auto l = sbsh({"logs", "--since", j["next_offset"].get<std::string>(), "-f", id});
  EXPECT_EQ(l.code, 0) << l.err;
  EXPECT_EQ(l.out, "two\nthree\n");
  EXPECT_EQ(l.err, "err2\n");
  // The final result's offset: nothing after it; before it, from any byte.
  auto w = json::parse(sbsh({"wait", "--json", id}).out);
  EXPECT_EQ(w["next_offset"], "14:10") << w.dump();
  l = sbsh({"logs", "--since", "14:10", id});
  EXPECT_EQ(l.out, "");
  EXPECT_EQ(l.err, "");
  l = sbsh({"logs", "--since", "6", "--stdout", id});
  EXPECT_EQ(l.out, "o\nthree\n");
  // Offsets that are not ones are refused with what to give.
  for (const char* bad : {"x", "4:", ":5", "-1", "4:5:6"}) {
    auto e = sbsh({"logs", "--since", bad, id});
    EXPECT_EQ(e.code, 255) << bad;
    EXPECT_NE(e.err.find("give N or N:M"), std::string::npos) << bad << ": " << e.err;
  }
  EXPECT_NE(sbsh({"logs", "--since", "3", "1"}).err.find("--since is for a command's %ID"), std::string::npos);
}

TEST_F(detach_test, BadIdsAndOptionsGetAClearError) {
  auto w = sbsh({"wait", "%4242"});
  EXPECT_EQ(w.code, 255);
  EXPECT_NE(w.err.find("no kept command %4242"), std::string::npos) << w.err;
  auto j = sbsh({"wait", "--json", "%4242"});
  EXPECT_EQ(json::parse(j.out)["code"], "no_such_command") << j.out;
  auto z = sbsh({"exec", "--detach-after", "0", "true"});
  EXPECT_EQ(z.code, 255);
  EXPECT_NE(z.err.find("--detach-after"), std::string::npos) << z.err;
  auto n = sbsh({"logs", "-n", "3", "%1"});
  EXPECT_EQ(n.code, 255);
  EXPECT_NE(n.err.find("-n is for background processes"), std::string::npos) << n.err;
  // sbshd still serves.
  EXPECT_EQ(exec("ok", "echo fine").out, "fine\n");
}

TEST_F(detach_test, AnIdFromBeforeARestartIsNeverAnotherCommands) {
  auto r = sbsh({"exec", "-s", "d", "--detach-after", "100ms", "--json", "sleep 0.5; echo first"});
  std::string first = detached_id(r);
  ASSERT_EQ(sbsh({"wait", first}).code, 0);
  kill_daemon();
  start_daemon();
  // The new sbshd kept nothing of it, and says so rather than "never kept".
  auto w = sbsh({"wait", first});
  EXPECT_EQ(w.code, 255);
  EXPECT_NE(w.err.find("kept by an earlier sbshd"), std::string::npos) << w.err;
  // Its commands' ids go on past the earlier one's: the old id never names a new command.
  for (int i = 0; i < 3; ++i) {
    std::string id = detached_id(sbsh({"exec", "-s", "d", "--detach-after", "1ms", "--json", "sleep 0.2"}));
    EXPECT_GT(std::stoull(id.substr(1)), std::stoull(first.substr(1))) << id << " after " << first;
    EXPECT_EQ(sbsh({"wait", id}).code, 0);
  }
  EXPECT_NE(sbsh({"wait", first}).err.find("kept by an earlier sbshd"), std::string::npos);
}

// `ps` lists what runs in the background: the commands exec left running detached too, by
// %ID, with their session, state and pid (the session's shell runs them); -a adds every
// command kept, with its result.
TEST_F(detach_test, PsListsDetachedCommands) {
  std::string id = detached_id(sbsh({"exec", "-s", "p", "--detach-after", "100ms", "--json", "sleep 3021"}));
  // One queued behind it, detached too.
  std::string queued = detached_id(sbsh({"exec", "-s", "p", "--detach-after", "1ms", "--json", "echo later"}));
  auto table = sbsh({"ps"});
  EXPECT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find(id), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("sleep 3021"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(queued), std::string::npos) << table.out;
  auto j = json::parse(sbsh({"ps", "--json"}).out);
  ASSERT_EQ(j.at("commands").size(), 2u) << j.dump();
  auto c = j.at("commands").at(0);
  EXPECT_EQ(c.at("id"), id);
  EXPECT_EQ(c.at("session"), "p");
  EXPECT_EQ(c.at("state"), "running");
  EXPECT_TRUE(c.at("detached").get<bool>());
  EXPECT_EQ(c.at("pid").get<int64_t>(), session_pids("p").shell_pid) << c.dump();
  EXPECT_EQ(c.at("command"), "sleep 3021");
  EXPECT_TRUE(c.at("exit_code").is_null());
  EXPECT_EQ(j.at("commands").at(1).at("id"), queued);
  EXPECT_EQ(j.at("commands").at(1).at("state"), "queued");
  EXPECT_TRUE(j.at("commands").at(1).at("pid").is_null());
  // The library lists them as well.
  auto listed = conn().commands(false);
  ASSERT_TRUE(listed) << listed.err().message;
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ("%" + std::to_string(listed->at(0).id), id);

  ASSERT_EQ(sbsh({"kill", id}).code, 0);
  ASSERT_EQ(sbsh({"wait", queued}).code, 0);
  // Ended: gone from ps, listed by ps -a with how they ended.
  EXPECT_TRUE(json::parse(sbsh({"ps", "--json"}).out).at("commands").empty());
  auto all = json::parse(sbsh({"ps", "-a", "--json"}).out).at("commands");
  ASSERT_EQ(all.size(), 2u) << all.dump();
  EXPECT_EQ(all.at(0).at("state"), "finished");
  EXPECT_TRUE(all.at(0).at("cancelled").get<bool>());
  EXPECT_TRUE(all.at(0).at("pid").is_null());
  EXPECT_FALSE(all.at(0).at("ended_at").is_null());
  EXPECT_EQ(all.at(1).at("exit_code"), 0);
  auto with_all = sbsh({"ps", "-a"});
  EXPECT_NE(with_all.out.find("cancelled"), std::string::npos) << with_all.out;
}

TEST_F(detach_test, IdsShownBeforeACrashAreNeverGivenAgain) {
  // Every command's id is shown (exec_started; exec --json prints it), kept or not. More
  // commands than one reserved block of ids, none kept, then sbshd is killed as a crash
  // would: the next sbshd's ids start past every id shown.
  uint64_t largest = 0;
  for (int i = 0; i < 3; ++i) {
    auto r = sbsh({"exec", "-s", "ids", "--json", "true"});
    ASSERT_EQ(r.code, 0) << r.err;
    largest = std::max<uint64_t>(largest, std::stoull(json::parse(r.out)["id"].get<std::string>().substr(1)));
  }
  {
    auto c = conn();
    client::exec_options o;
    o.session = "ids";
    o.command = "true";
    o.on_started = [&](const client::exec_start& s) { largest = std::max(largest, s.command_id); };
    for (int i = 0; i < 1100; ++i) {
      auto r = c.exec(o);
      ASSERT_TRUE(r && r->ok()) << (r ? r->error : r.err().message);
    }
  }
  ASSERT_GE(largest, 1100u);  // past the first block, reserved at the start
  kill_daemon();
  start_daemon();
  for (int i = 0; i < 3; ++i) {
    auto r = sbsh({"exec", "-s", "ids", "--json", "true"});
    ASSERT_EQ(r.code, 0) << r.err;
    uint64_t id = std::stoull(json::parse(r.out)["id"].get<std::string>().substr(1));
    EXPECT_GT(id, largest) << "an id shown before the crash was given again";
  }
}

}  // namespace detach_tests
}  // namespace sbsh::test
