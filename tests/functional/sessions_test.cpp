// Sessions as their creators define them: a session's environment is its creating client's,
// never sbshd's (with a spare shell or without, across shell and sbshd restarts); sessions
// made implicitly by `exec -s` expire when idle and `session prune` removes them; a result
// says exactly whether a command started and whether the state was lost, once; a session
// removed under a running command says so to its caller.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "fixture.h"
#include "ipc/messages.h"
#include "ipc/socket_io.h"

namespace sbsh::test::sessions_tests {

using json = nlohmann::json;

using sessions_test = daemon_test;

// For tests that start sbshd themselves.
class sessions_own_daemon_test : public sessions_test {
 protected:
  sessions_own_daemon_test() { start_in_setup = false; }
};

// The CLI run with `env_args` given to env(1) first (-u NAME, NAME=VALUE).
run_result sbsh_with_env(const std::string& sock, const std::vector<std::string>& env_args,
                         const std::vector<std::string>& args) {
  std::vector<std::string> argv{"/usr/bin/env"};
  argv.insert(argv.end(), env_args.begin(), env_args.end());
  argv.push_back(bin("sbsh"));
  argv.emplace_back("--socket");
  argv.push_back(sock);
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv);
}

// What the shell exports of four variables (bash itself sets TERM, unexported, when it has none).
const char* kShow = "for v in API_TOKEN TERM OLDPWD MINE; do printf '[%s]' \"$(printenv $v || echo unset)\"; done; echo";

// The scenario as a user meets it: the first client, with a secret, starts sbshd; a second
// client without it makes another session, which must not see it.
TEST_F(sessions_own_daemon_test, ASessionsEnvironmentIsItsCreatorsNotThatOfWhoeverStartedSbshd) {
  std::string old_dir = dir + "/home";
  auto first = sbsh_with_env(sock, {"-u", "MINE", "API_TOKEN=secret", "TERM=xterm-first", "OLDPWD=" + old_dir},
                             {"exec", "-s", "first", "--", kShow});
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_EQ(first.out, "[secret][xterm-first][" + old_dir + "][unset]\n");
  auto second = sbsh_with_env(sock, {"-u", "API_TOKEN", "-u", "TERM", "-u", "OLDPWD", "MINE=mine"},
                              {"exec", "-s", "second", "--", kShow});
  EXPECT_EQ(second.code, 0) << second.err;
  EXPECT_EQ(second.out, "[unset][unset][unset][mine]\n");
  // The first session keeps its own, whoever asks.
  auto again = sbsh_with_env(sock, {"-u", "API_TOKEN", "MINE=other"}, {"exec", "-s", "first", "--", kShow});
  EXPECT_EQ(again.out, "[secret][xterm-first][" + old_dir + "][unset]\n");
  // End the sbshd the first client started.
  auto st = json::parse(sbsh({"status", "--json"}).out);
  pid_t pid = st["pid"].get<pid_t>();
  sbsh({"shutdown"});
  EXPECT_TRUE(wait_until([&] { return !pid_alive(pid); }, std::chrono::seconds(20)));
}

// With spare shells (claimed by new sessions) and without, nothing of sbshd's environment
// reaches a session, and a variable bash handles at start-up (SHLVL) is as a fresh shell has it.
TEST_F(sessions_own_daemon_test, NeitherASpareShellNorAFreshOneCarriesSbshdsEnvironment) {
  for (const char* spares : {"0", "1", "3"}) {
    SCOPED_TRACE(spares);
    daemon_args = {"--spare-wrappers", spares};
    ::setenv("API_TOKEN", "daemon-secret", 1);
    ::setenv("TERM", "xterm-daemon", 1);
    start_daemon();
    ::unsetenv("API_TOKEN");
    ::unsetenv("TERM");
    for (int i = 0; i < 3; ++i) {
      std::string s = "s" + std::to_string(i);
      auto r = sbsh_with_env(sock, {"-u", "API_TOKEN", "-u", "OLDPWD", "TERM=dumb", "MINE=m" + std::to_string(i),
                                    "SHLVL=4"},
                             {"exec", "-s", s, "--", std::string(kShow) + "; echo $SHLVL; echo ${SBSH_BASH-none}"});
      EXPECT_EQ(r.code, 0) << r.err;
      EXPECT_EQ(r.out, "[unset][dumb][unset][m" + std::to_string(i) + "]\n5\nnone\n");
    }
    stop_daemon();
  }
}

TEST_F(sessions_test, TheEnvironmentSurvivesSessionRestartAndSbshdRestarts) {
  ASSERT_EQ(sbsh_with_env(sock, {"KEEP=kept1"}, {"exec", "-s", "k", "true"}).code, 0);
  ASSERT_EQ(sbsh_with_env(sock, {"KEEP=kept2"}, {"session", "create", "c"}).code, 0);
  auto show = [&](const std::string& s) {
    return sbsh_with_env(sock, {"-u", "KEEP"}, {"exec", "-s", s, "--", "echo ${KEEP-unset}"}).out;
  };
  EXPECT_EQ(show("k"), "kept1\n");
  EXPECT_EQ(show("c"), "kept2\n");
  ASSERT_EQ(sbsh({"session", "restart", "k"}).code, 0);
  EXPECT_EQ(show("k"), "kept1\n");
  // A plain shutdown: the next sbshd recreates both from their definitions on disk.
  stop_daemon();
  start_daemon();
  EXPECT_EQ(show("k"), "kept1\n");
  EXPECT_EQ(show("c"), "kept2\n");
  // Kept sessions are adopted with their shells, environment and all.
  ASSERT_EQ(sbsh({"shutdown", "--keep-sessions"}).code, 0);
  int st = 0;
  ASSERT_TRUE(wait_until([&] { return ::waitpid(daemon_pid, &st, WNOHANG) == daemon_pid; }, std::chrono::seconds(20)));
  daemon_pid = -1;
  start_daemon();
  EXPECT_EQ(show("k"), "kept1\n");
  EXPECT_EQ(show("c"), "kept2\n");
  // session show never prints it.
  auto d = sbsh({"session", "show", "k", "--json"});
  EXPECT_EQ(d.out.find("kept1"), std::string::npos) << d.out;
}

// A kept connection sends its process's environment once: sbshd keeps it for the
// connection, and a session a later command creates still starts with it, until the process
// changes it.
TEST_F(sessions_test, AKeptConnectionSendsItsEnvironmentOnceAndSessionsStillStartWithIt) {
  ::setenv("KEPTVAR", "first", 1);
  auto c = conn();
  client::exec_options o;
  o.command = "echo ${KEPTVAR-unset}";
  for (const char* name : {"kept1", "kept2", "kept3"}) {  // each one a new session
    o.session = name;
    auto r = c.exec(o);
    ASSERT_TRUE(r.ok()) << r.err().message;
    EXPECT_EQ(r->stdout_data, "first\n") << name;
  }
  ::setenv("KEPTVAR", "second", 1);  // a changed environment is sent again
  o.session = "kept4";
  auto r = c.exec(o);
  ::unsetenv("KEPTVAR");
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->stdout_data, "second\n");

  // same_env on a connection that kept none is refused with what to send instead; keep_env
  // without an environment too.
  ipc::channel ch{unique_fd(raw_connect(sock))};
  ASSERT_TRUE(ch.send(ipc::encode(ipc::msg::hello{ipc::kProtocolVersion, "test"}, 1)).ok());
  auto welcome = ch.recv();
  ASSERT_TRUE(welcome.ok());
  auto w = ipc::decode<ipc::msg::welcome>(welcome->msg);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->keeps_env);
  for (bool same : {true, false}) {
    ipc::msg::exec e;
    e.session = "never";
    e.command = "true";
    e.same_env = same;
    e.keep_env = !same;
    ASSERT_TRUE(ch.send(ipc::encode(e, 2)).ok());
    auto reply = ch.recv();
    ASSERT_TRUE(reply.ok());
    ASSERT_EQ(reply->msg.type(), ipc::msg_type::error);
    auto err = ipc::decode<ipc::msg::error>(reply->msg);
    ASSERT_TRUE(err.ok());
    EXPECT_NE(std::string(err->message).find(same ? "keep_env" : "session_env"), std::string::npos) << err->message;
  }
  EXPECT_EQ(session_status("never").name, "");
}

TEST_F(sessions_test, TheLibraryUsesTheCallersEnvironmentOrTheOneGivenWithinBounds) {
  ::setenv("LIBVAR", "from-process", 1);
  client::exec_options o;
  o.session = "lib1";
  o.command = "echo ${LIBVAR-unset} ${GIVEN-unset}";
  auto r = conn().exec(o);
  ::unsetenv("LIBVAR");
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->stdout_data, "from-process unset\n");
  o.session = "lib2";
  o.session_env = std::vector<std::string>{"GIVEN=given", "PATH=/usr/bin:/bin"};
  r = conn().exec(o);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->stdout_data, "unset given\n");
  // Over the total bound: refused with the reason, and no session is made.
  o.session = "big";
  o.session_env = std::vector<std::string>(10, "BIG=" + std::string(128 << 10, 'x'));
  r = conn().exec(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.err().message.find("over the limit"), std::string::npos) << r.err().message;
  o.session_env = std::vector<std::string>{"NOEQUALS"};
  r = conn().exec(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.err().message.find("NAME="), std::string::npos) << r.err().message;
  o.session_env = std::vector<std::string>{std::string("A=x\0y", 5)};
  r = conn().exec(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.err().message.find("NUL"), std::string::npos) << r.err().message;
  EXPECT_EQ(session_status("big").name, "");
}

// Idle: no command running or queued and no background process running. prune removes the
// idle sessions made implicitly, with their shells, and keeps the rest.
// status as text: sbshd's own line, what it has run, then the sessions' table; the same
// facts as status --json.
TEST_F(sessions_test, StatusShowsTheDaemonItsCountersAndItsSessions) {
  ASSERT_EQ(exec("one", "true").code, 0);
  ASSERT_NE(exec("one", "false").code, 0);
  auto j = json::parse(sbsh({"status", "--json"}).out);
  auto r = sbsh({"status"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream text(r.out);
  std::vector<std::string> lines;
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 5u) << r.out;
  std::string head = fmt::format("sbshd {}, pid {}, up ", j["version"].get<std::string>(), j["pid"].get<int64_t>());
  EXPECT_TRUE(lines[0].starts_with(head)) << r.out;
  EXPECT_TRUE(lines[0].ends_with(", socket " + j["socket"].get<std::string>())) << r.out;
  const auto& n = j["counters"];
  EXPECT_EQ(n["commands"], 2) << r.out;
  EXPECT_TRUE(lines[1].starts_with(fmt::format("2 commands ({} failed, {} timed out), {} shell restarts, ",
                                               n["failed"].get<uint64_t>(), n["timed_out"].get<uint64_t>(),
                                               n["shell_restarts"].get<uint64_t>())))
      << r.out;
  EXPECT_EQ(lines[2], fmt::format("1 session of at most {} (descriptor limit {}, 3 descriptors each)",
                                  j["sessions_supported"].get<uint64_t>(), j["descriptor_limit"].get<uint64_t>()));
  EXPECT_TRUE(lines[3].starts_with("SESSION  STATE  WRAPPER  SHELL  RESTARTS")) << r.out;
  EXPECT_TRUE(lines[4].starts_with("one      ready ")) << r.out;
}

TEST_F(sessions_test, PruneRemovesIdleImplicitSessionsOnly) {
  ASSERT_EQ(exec("idle", "true").code, 0);
  ASSERT_EQ(sbsh({"session", "create", "made"}).code, 0);
  ASSERT_EQ(exec("made", "true").code, 0);
  ASSERT_EQ(sbsh({"start", "-s", "bg", "--", "sleep 60"}).code, 0);
  // busy's command runs until the test lets it end, however slow the machine.
  const std::string go = dir + "/go";
  std::thread running([&] { exec("busy", "until [ -e " + shell_quote(go) + " ]; do sleep 0.02; done"); });
  if (!wait_until([&] { return listed("busy").is_object() && listed("busy")["idle_since"].is_null(); },
                  std::chrono::seconds(20))) {
    run({"/usr/bin/touch", go});
    running.join();
    FAIL() << "busy's command never showed as running";
  }
  auto idle = session_pids("idle");
  auto imp = listed("idle");
  EXPECT_TRUE(imp["implicit"].get<bool>()) << imp;
  EXPECT_EQ(imp["idle_expiry_ms"], 24 * 3600 * 1000) << imp;
  EXPECT_TRUE(imp["expires_at"].is_string()) << imp;
  auto exp = listed("made");
  EXPECT_FALSE(exp["implicit"].get<bool>()) << exp;
  EXPECT_TRUE(exp["idle_expiry_ms"].is_null()) << exp;
  EXPECT_TRUE(listed("busy")["idle_since"].is_null()) << listed("busy");
  // Not idle for an hour yet: nothing goes.
  auto none = sbsh({"session", "prune", "--idle", "1h"});
  EXPECT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(none.out, "");
  auto r = sbsh({"session", "prune", "--idle", "0s", "--json"});
  run({"/usr/bin/touch", go});
  running.join();
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out), json::parse(R"(["idle"])")) << r.out;
  EXPECT_TRUE(listed("idle").is_null());
  EXPECT_FALSE(pid_alive(static_cast<pid_t>(idle.shell_pid)));
  EXPECT_FALSE(pid_alive(static_cast<pid_t>(idle.wrapper_pid)));
  EXPECT_FALSE(listed("made").is_null());
  EXPECT_FALSE(listed("bg").is_null());
  // busy is idle now that its command ended: the plain form prints what it removed.
  r = sbsh({"session", "prune"});
  EXPECT_EQ(r.out, "removed session busy\n");
  EXPECT_FALSE(listed("bg").is_null());  // its process still runs
}

TEST_F(sessions_own_daemon_test, AnIdleImplicitSessionExpiresByItself) {
  daemon_args = {"--idle-expiry", "1s"};
  start_daemon();
  ASSERT_EQ(exec("brief", "true").code, 0);
  ASSERT_EQ(sbsh({"session", "create", "kept"}).code, 0);
  ASSERT_EQ(sbsh({"session", "create", "short", "--idle-expiry", "1s"}).code, 0);
  auto brief = session_pids("brief");
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_until([&] { return listed("brief").is_null() && listed("short").is_null(); },
                         std::chrono::seconds(20)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  EXPECT_TRUE(wait_until([&] { return !pid_alive(static_cast<pid_t>(brief.shell_pid)); }, std::chrono::seconds(10)));
  EXPECT_FALSE(listed("kept").is_null());
  // A session that keeps working does not expire.
  std::thread working([&] { exec("work", "sleep 2.5"); });
  ASSERT_TRUE(wait_until([&] { return !listed("work").is_null(); }, std::chrono::seconds(20)));
  working.join();
  EXPECT_EQ(exec("work", "true").code, 0);  // it was still there after 2.5 s of work
  // Its idle time counts from the end of its last command: then it goes too.
  EXPECT_TRUE(wait_until([&] { return listed("work").is_null(); }, std::chrono::seconds(20)));
}

// Each restart of sbshd used to bring every implicit session back for ever; now each keeps
// the idle time it had.
TEST_F(sessions_test, IdleTimeSurvivesAnSbshdRestart) {
  ASSERT_EQ(exec("imp", "true").code, 0);
  auto before = listed("imp")["idle_since"];
  ASSERT_TRUE(before.is_string());
  stop_daemon();
  start_daemon();
  EXPECT_EQ(listed("imp")["idle_since"], before);
}

TEST_F(sessions_test, ACommandThatNeverStartedHasNoStartTime) {
  auto r = sbsh({"exec", "-s", "s", "-C", "/nonexistent", "--json", "--", "true"});
  EXPECT_EQ(r.code, 255);
  auto j = json::parse(r.out);
  EXPECT_FALSE(j["ran"].get<bool>()) << r.out;
  EXPECT_TRUE(j["started_at"].is_null()) << r.out;
}

// The loss of the shell under a command is said once, on that command.
TEST_F(sessions_test, AShellLostUnderACommandIsReportedOnThatCommandOnly) {
  ASSERT_EQ(exec("s", "v=1").code, 0);
  auto lost = json::parse(sbsh({"exec", "-s", "s", "--json", "--", "kill -9 $$"}).out);
  EXPECT_TRUE(lost["shell_restarted"].get<bool>()) << lost;
  auto next = sbsh({"exec", "-s", "s", "--json", "--", "echo \"[$v]\""});
  EXPECT_EQ(next.code, 0) << next.err;
  auto j = json::parse(next.out);
  EXPECT_EQ(j["stdout"], "[]\n");
  EXPECT_FALSE(j["state_lost"].get<bool>()) << next.out;
  EXPECT_EQ(next.err.find("lost its state"), std::string::npos) << next.err;
  EXPECT_NE(j["generation"], lost["generation"]);
}

// A command queued behind one whose shell died did not run because the state was lost: it
// says so in state_lost, with the reason.
TEST_F(sessions_test, ACommandNotRunBecauseOfARestartSaysTheStateWasLost) {
  ASSERT_EQ(exec("s", "true").code, 0);
  std::thread dying([&] { exec("s", "sleep 1.017; kill -9 $$"); });
  ASSERT_TRUE(wait_until([&] { return !processes_running("sleep 1.017").empty(); }, std::chrono::seconds(20)));
  std::string never = dir + "/never";
  auto r = sbsh({"exec", "-s", "s", "--json", "--", "touch " + never});
  dying.join();
  EXPECT_EQ(r.code, 255);
  auto j = json::parse(r.out);
  EXPECT_FALSE(j["ran"].get<bool>()) << r.out;
  EXPECT_TRUE(j["state_lost"].get<bool>()) << r.out;
  EXPECT_FALSE(j["state_lost_reason"].get<std::string>().empty()) << r.out;
  EXPECT_NE(::access(never.c_str(), F_OK), 0);
}

TEST_F(sessions_test, RemovingASessionUnderARunningCommandSaysSo) {
  run_result r;
  std::thread running([&] { r = exec("x", "sleep 30.013"); });
  ASSERT_TRUE(wait_until([&] { return !processes_running("sleep 30.013").empty(); }, std::chrono::seconds(20)));
  ASSERT_EQ(sbsh({"session", "rm", "x"}).code, 0);
  running.join();
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("session 'x' was removed while the command ran"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("shutting down"), std::string::npos) << r.err;
  EXPECT_TRUE(processes_running("sleep 30.013").empty());
}

// session ls reads an idle shell's directory once and keeps it until something runs there:
// what it lists follows every cd, and stays right when nothing ran.
TEST_F(sessions_test, SessionLsFollowsTheShellsDirectory) {
  ASSERT_EQ(exec("d", "cd " + dir).code, 0);
  EXPECT_EQ(listed("d")["cwd"], dir);
  EXPECT_EQ(listed("d")["cwd"], dir);
  ASSERT_EQ(exec("d", "mkdir -p sub && cd sub").code, 0);
  EXPECT_EQ(listed("d")["cwd"], dir + "/sub");
  EXPECT_EQ(listed("d")["cwd"], dir + "/sub");
  // A new shell starts in the session's directory again.
  ASSERT_EQ(sbsh({"session", "restart", "d"}).code, 0);
  ASSERT_TRUE(wait_until([&] { return exec("d", "true").code == 0; }, std::chrono::seconds(20)));
  EXPECT_NE(listed("d")["cwd"], dir + "/sub");
}

}  // namespace sbsh::test::sessions_tests
