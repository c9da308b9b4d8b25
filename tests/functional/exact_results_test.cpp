// Results that say exactly what happened: a timeout or a cancel stops the whole text and
// everything it started while the session keeps its state; a shell lost between commands is
// never replaced silently; a queued command whose deadline passes never runs; a signal is
// reported only when one ended the command; a missing directory is an error; a command that
// did not run says so. Each test checks the real effect: the file the rest of the text would
// have made is absent, the pids are gone, the variable set before is still there.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "fixture.h"

namespace sbsh::test::exact_results_tests {

using json = nlohmann::json;
using exact_results_test = daemon_test;

bool exists(const std::string& path) { return std::filesystem::exists(path); }

client::exec_options command_in(const std::string& session, const std::string& text) {
  client::exec_options o;
  o.session = session;
  o.command = text;
  return o;
}


TEST_F(exact_results_test, ATimeoutStopsTheWholeTextAndTheSessionKeepsItsState) {
  ASSERT_EQ(exec("s", "cd /tmp && kept=yes").code, 0);
  std::string never = dir + "/never";
  auto r = sbsh({"exec", "-s", "s", "-t", "1s", "--json", "--", "sleep 30; touch " + never});
  EXPECT_EQ(r.code, 124) << r.err;
  auto j = json::parse(r.out);
  EXPECT_TRUE(j["timed_out"].get<bool>());
  EXPECT_TRUE(j["ran"].get<bool>());
  EXPECT_FALSE(j["shell_restarted"].get<bool>());
  EXPECT_EQ(j["exit_code"], 143);  // sleep, as bash saw it end
  EXPECT_EQ(j["signal"], "SIGTERM");
  // A background job of the text is stopped too, and what follows it does not run.
  r = sbsh({"exec", "-s", "s", "-t", "1s", "--json", "--", "sleep 30 & sleep 30; touch " + never});
  EXPECT_EQ(r.code, 124);
  j = json::parse(r.out);
  EXPECT_NE(j["exit_code"], 0) << r.out;
  // The shell has run another command since: nothing of the stopped text is left to run.
  EXPECT_EQ(exec("s", "pwd; echo $kept").out, "/tmp\nyes\n");
  EXPECT_FALSE(exists(never));
}

TEST_F(exact_results_test, EveryProcessATimedOutCommandStartedIsGone) {
  // A child that left for a session of its own, a background job, and the foreground.
  auto r = sbsh({"exec", "-s", "s", "-t", "1s", "--", "setsid sleep 133 & sleep 135 & sleep 134"});
  EXPECT_EQ(r.code, 124);
  for (const char* cmd : {"sleep 133", "sleep 134", "sleep 135"})
    EXPECT_TRUE(wait_until([&] { return processes_running(cmd).empty(); }, std::chrono::seconds(10))) << cmd;
  // Background jobs of earlier commands are not the timed-out command's.
  ASSERT_EQ(exec("s", "sleep 136 & true").code, 0);
  EXPECT_EQ(sbsh({"exec", "-s", "s", "-t", "500ms", "--", "sleep 30"}).code, 124);
  auto earlier = processes_running("sleep 136");
  ASSERT_EQ(earlier.size(), 1u);
  ::kill(earlier[0], SIGKILL);
}

TEST_F(exact_results_test, ALoopOfBuiltinsIsInterruptedAndTheShellKeepsItsState) {
  ASSERT_EQ(exec("s", "cd /usr && v=kept && f() { echo fn; }").code, 0);
  auto before = session_pids("s");
  auto r = sbsh({"exec", "-s", "s", "-t", "1s", "--json", "--", "while :; do :; done; echo never"});
  EXPECT_EQ(r.code, 124);
  auto j = json::parse(r.out);
  EXPECT_TRUE(j["timed_out"].get<bool>());
  EXPECT_FALSE(j["shell_restarted"].get<bool>());
  EXPECT_EQ(j["stdout"], "");
  EXPECT_EQ(exec("s", "pwd; echo $v; f").out, "/usr\nkept\nfn\n");
  EXPECT_EQ(session_status("s").shell_pid, before.shell_pid);  // the same shell
}

TEST_F(exact_results_test, AShellThatDoesNotRespondIsRestartedAndSaysSo) {
  // The command makes its own shell deaf to the interrupt: only a new shell stops it.
  auto r = sbsh({"exec", "-s", "s", "-t", "300ms", "--json", "--", "trap '' INT; while :; do :; done"});
  EXPECT_EQ(r.code, 124);
  auto j = json::parse(r.out);
  EXPECT_TRUE(j["timed_out"].get<bool>());
  EXPECT_TRUE(j["shell_restarted"].get<bool>());
  EXPECT_NE(j["error"].get<std::string>().find("restarted"), std::string::npos) << r.out;
  EXPECT_EQ(exec("s", "echo works").out, "works\n");
}

TEST_F(exact_results_test, SigtermToTheClientStopsTheWholeText) {
  std::string after = dir + "/after";
  ASSERT_EQ(exec("s", "x=kept").code, 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    // Durations unique to each test: other tests' sleeps run beside this one.
    ::execl(bin("sbsh").c_str(), "sbsh", "exec", "-s", "s", "--", ("sleep 3011; touch " + after).c_str(), nullptr);
    ::_exit(127);
  }
  ASSERT_TRUE(wait_until([&] { return !processes_running("sleep 3011").empty(); }, std::chrono::seconds(20)));
  ::kill(pid, SIGTERM);
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 143);
  // The shell has run another command since: nothing of the stopped text is left to run.
  EXPECT_EQ(exec("s", "echo $x").out, "kept\n");
  EXPECT_FALSE(exists(after));
}

// A stopped command never reads as a success, also when what the stop reached exited 0: the
// result says cancelled, and sbsh exits non-zero (130).
pid_t exec_in_background(const std::vector<std::string>& args, const std::string& out_path) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) ::dup2(fd, 1);
    auto argv = exec_argv(args);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

TEST_F(exact_results_test, AStoppedCommandThatExitsZeroIsStillCancelled) {
  // A pipeline whose last part ignores the stop's signals and ends well once the first is gone.
  // The stop comes once that part has set its trap (it says so with a file), or it would die of it.
  std::string out = dir + "/out.json";
  std::string trapped = dir + "/trapped";
  pid_t pid = exec_in_background({bin("sbsh"), "exec", "--json", "-s", "s", "--",
                                  "sleep 3013 | sh -c 'trap \"\" TERM INT HUP; touch " + trapped +
                                      "; cat >/dev/null; exit 0'"},
                                 out);
  ASSERT_TRUE(wait_until([&] { return !processes_running("sleep 3013").empty() && exists(trapped); },
                         std::chrono::seconds(20)));
  ::kill(pid, SIGTERM);
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 130) << read_file(out);
  auto j = json::parse(read_file(out));
  EXPECT_TRUE(j["cancelled"].get<bool>()) << j.dump();
  EXPECT_EQ(sbsh({"wait", j["id"].get<std::string>()}).code, 130);

  // A command kept for its client (--json) that the client's end stopped: a trap made it
  // exit 0, and what sbshd kept says cancelled.
  pid = exec_in_background({bin("sbsh"), "exec", "--json", "-s", "s", "--",
                            "sh -c 'trap \"exit 0\" HUP; sleep 3014 & wait'"},
                           out);
  ASSERT_TRUE(wait_until([&] { return !processes_running("sleep 3014").empty(); }, std::chrono::seconds(20)));
  ::kill(pid, SIGKILL);
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  json kept;
  std::string listed;
  ASSERT_TRUE(wait_until(
      [&] {
        listed = sbsh({"ps", "-a", "--json"}).out;
        json all = json::parse(listed);
        for (auto& c : all.at("commands"))
          if (c.at("command").get<std::string>().find("sleep 3014") != std::string::npos && c.at("state") == "finished")
            kept = c;
        return !kept.is_null();
      },
      std::chrono::seconds(20)))
      << listed;
  EXPECT_TRUE(kept.at("cancelled").get<bool>()) << kept.dump();
  auto w = sbsh({"wait", "--json", kept.at("id").get<std::string>()});
  EXPECT_EQ(w.code, 130) << w.out << w.err;
  EXPECT_TRUE(json::parse(w.out).at("cancelled").get<bool>()) << w.out;
  EXPECT_EQ(exec("s", "echo still").out, "still\n");
}

TEST_F(exact_results_test, TheLibrarysCancelStopsTheWholeText) {
  std::string after = dir + "/after";
  auto c = conn();
  ASSERT_TRUE(c.exec(command_in("s", "x=kept")).ok());
  client::canceller stop;
  client::exec_options o;
  o.session = "s";
  o.command = "sleep 3012; touch " + after + "; echo after";
  o.signal_fd = stop.fd();
  std::thread t([&] {
    wait_until([&] { return !processes_running("sleep 3012").empty(); }, std::chrono::seconds(20));
    stop.cancel();
  });
  auto r = c.exec(o);
  t.join();
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_TRUE(r->cancelled);
  EXPECT_NE(r->exit_code, 0);
  EXPECT_EQ(r->stdout_data, "");
  EXPECT_FALSE(r->ok());
  EXPECT_FALSE(exists(after));
  auto again = c.exec(command_in("s", "echo $x"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->stdout_data, "kept\n");
}

TEST_F(exact_results_test, AShellLostBetweenCommandsIsReportedByTheNextResult) {
  ASSERT_EQ(exec("s", "v=set").code, 0);
  auto first = json::parse(sbsh({"exec", "-s", "s", "--json", "--", "true"}).out);
  EXPECT_FALSE(first["state_lost"].get<bool>());
  auto st = session_pids("s");
  ASSERT_GT(st.shell_pid, 0);
  ::kill(static_cast<pid_t>(st.shell_pid), SIGKILL);
  ASSERT_TRUE(wait_until([&] { return session_status("s").shell_pid != st.shell_pid; }, std::chrono::seconds(20)));
  // The CLI warns in one line on stderr; --json says it in fields.
  auto r = sbsh({"exec", "-s", "s", "--json", "--", "echo \"[$v]\""});
  EXPECT_EQ(r.code, 0);
  auto j = json::parse(r.out);
  EXPECT_EQ(j["stdout"], "[]\n");
  EXPECT_TRUE(j["state_lost"].get<bool>());
  EXPECT_NE(j["state_lost_reason"].get<std::string>().find("signal 9"), std::string::npos) << r.out;
  EXPECT_NE(j["generation"], first["generation"]);
  EXPECT_NE(r.err.find("lost its state"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // Said once: the next command runs in the same shell as this one.
  auto next = json::parse(sbsh({"exec", "-s", "s", "--json", "--", "true"}).out);
  EXPECT_FALSE(next["state_lost"].get<bool>());
  EXPECT_EQ(next["generation"], j["generation"]);
  // The library says the same.
  st = session_pids("s");
  ::kill(static_cast<pid_t>(st.shell_pid), SIGKILL);
  ASSERT_TRUE(wait_until([&] { return session_status("s").shell_pid != st.shell_pid; }, std::chrono::seconds(20)));
  auto lib = conn().exec(command_in("s", "true"));
  ASSERT_TRUE(lib.ok());
  EXPECT_TRUE(lib->state_lost);
  EXPECT_NE(lib->generation, next["generation"].get<uint64_t>());
}

TEST_F(exact_results_test, AQueuedCommandWhoseTimeoutPassesDoesNotRun) {
  std::string marker = dir + "/marker";
  std::thread busy([&] { exec("s", "sleep 3.013"); });
  ASSERT_TRUE(wait_until([&] { return !processes_running("sleep 3.013").empty(); }, std::chrono::seconds(20)));
  auto r = sbsh({"exec", "-s", "s", "-t", "1s", "--json", "--", "touch " + marker});
  busy.join();
  EXPECT_EQ(r.code, 124);
  auto j = json::parse(r.out);
  EXPECT_TRUE(j["timed_out"].get<bool>());
  EXPECT_FALSE(j["ran"].get<bool>());
  EXPECT_TRUE(j["started_at"].is_null());
  EXPECT_TRUE(j["exit_code"].is_null());
  EXPECT_EQ(exec("s", "true").code, 0);  // the session went on after the sleep
  EXPECT_FALSE(exists(marker));
}

TEST_F(exact_results_test, ASignalIsReportedOnlyWhenOneEndedTheCommand) {
  auto exit137 = json::parse(sbsh({"exec", "-s", "s", "--json", "--", "sh -c 'exit 137'"}).out);
  EXPECT_EQ(exit137["exit_code"], 137);
  EXPECT_TRUE(exit137["signal"].is_null());
  auto killed = json::parse(sbsh({"exec", "-s", "s", "--json", "--", "sh -c 'kill -9 $$'"}).out);
  EXPECT_EQ(killed["exit_code"], 137);
  EXPECT_EQ(killed["signal"], "SIGKILL");
  // A signal that ended an earlier command of the text is not the last one's.
  auto later = json::parse(sbsh({"exec", "-s", "s", "--json", "--", "sh -c 'kill -9 $$'; (exit 3)"}).out);
  EXPECT_EQ(later["exit_code"], 3);
  EXPECT_TRUE(later["signal"].is_null());
  auto lib = conn().exec(command_in("s", "sh -c 'exit 130'"));
  ASSERT_TRUE(lib.ok());
  EXPECT_EQ(lib->exit_code, 130);
  EXPECT_FALSE(lib->signal.has_value());
}

TEST_F(exact_results_test, AMissingDirectoryIsAnErrorNeverAFallback) {
  auto r = sbsh({"session", "create", "gone", "-C", "/missing/dir"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("/missing/dir"), std::string::npos) << r.err;
  EXPECT_EQ(sbsh({"session", "ls", "--json"}).out.find("gone"), std::string::npos);
  std::string never = dir + "/never";
  r = sbsh({"exec", "-s", "s", "-C", "/missing/dir", "--json", "--", "touch " + never});
  EXPECT_EQ(r.code, 255);
  auto j = json::parse(r.out);
  EXPECT_FALSE(j["ran"].get<bool>());
  EXPECT_NE(j["error"].get<std::string>().find("/missing/dir"), std::string::npos) << r.out;
  r = sbsh({"exec", "-s", "s", "-C", "/missing/dir", "--", "touch " + never});
  EXPECT_EQ(r.code, 255);
  EXPECT_EQ(r.err.rfind("sbsh: ", 0), 0u) << r.err;  // sbsh's own line, not bash's cd:
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(exists(never));
  // A relative -C is relative to the caller's directory, for exec and session create alike.
  std::filesystem::create_directories(dir + "/work/sub");
  r = run({"/bin/sh", "-c", "cd " + shell_quote(dir + "/work") + " && " + bin("sbsh") + " -S " + sock +
                           " session create rel -C sub && " + bin("sbsh") + " -S " + sock +
                           " exec -s s -C sub pwd && " + bin("sbsh") + " -S " + sock + " exec -s rel pwd"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, dir + "/work/sub\n" + dir + "/work/sub\n");
}

TEST_F(exact_results_test, ACommandKeptFromRunningByAFailingInitSaysSo) {
  ASSERT_EQ(sbsh({"session", "create", "i", "--init", "false", "--restart", "never"}).code, 0);
  auto r = sbsh({"exec", "-s", "i", "--json", "--", "touch " + dir + "/never"});
  EXPECT_EQ(r.code, 255);
  auto j = json::parse(r.out);
  EXPECT_FALSE(j["ran"].get<bool>()) << r.out;
  EXPECT_TRUE(j["started_at"].is_null()) << r.out;
  EXPECT_FALSE(exists(dir + "/never"));
}

TEST_F(exact_results_test, ALostShellsOwnStatusIsTheExitCode) {
  auto r = sbsh({"exec", "-s", "s", "--json", "--", "exit 3"});
  EXPECT_EQ(r.code, 3);
  auto j = json::parse(r.out);
  EXPECT_TRUE(j["shell_restarted"].get<bool>());
  EXPECT_EQ(j["exit_code"], 3);
  r = sbsh({"exec", "-s", "s", "--json", "--", "kill -9 $$"});
  EXPECT_EQ(r.code, 137);
  j = json::parse(r.out);
  EXPECT_EQ(j["exit_code"], 137);
  EXPECT_EQ(j["signal"], "SIGKILL");
}

}  // namespace sbsh::test::exact_results_tests
