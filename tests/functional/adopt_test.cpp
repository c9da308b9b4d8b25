// Sessions outliving sbshd: a crash or `shutdown --keep-sessions` leaves each wrapper and
// its bash running, and the next sbshd adopts them with their state; nobody within the
// adoption timeout, and they end.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "fixture.h"
#include "ipc/messages.h"
#include "ipc/socket_io.h"

namespace sbsh::test {

using json = nlohmann::json;

namespace adopt_tests {

class adopt_test : public daemon_test {
 protected:
  // Shell state of every kind, set in one command.
  void set_state(const std::string& session) {
    auto r = exec(session,
                  "cd \"$TMPDIR\" && export A=exported; plain=kept; declare -A m=([k]=v); f() { echo fn; }; "
                  "shopt -s expand_aliases; alias hi='echo alias'; set -o pipefail; trap 'echo bye' USR1");
    ASSERT_EQ(r.code, 0) << r.err;
  }
  // What set_state left, read back in the same shell.
  std::string read_state(const std::string& session) {
    auto r = exec(session,
                  "echo \"$PWD $A $plain ${m[k]}\"; f; hi; [[ -o pipefail ]] && echo pipefail; trap -p USR1");
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out;
  }
  std::string expected_state() const {
    return dir + "/tmp exported kept v\nfn\nalias\npipefail\ntrap -- 'echo bye' SIGUSR1\n";
  }
  // Whether the session's wrapper and shell have both ended.
  static bool ended(const client::session_status& s) {
    return !pid_alive(static_cast<pid_t>(s.wrapper_pid)) && !pid_alive(static_cast<pid_t>(s.shell_pid));
  }
  // The link directory of the session's shell, as its start-up definitions name it.
  // The directory of the session's shell (its wrapper's --dir): where its adoption socket is.
  std::string link_dir_of(const std::string& session) {
    auto st = session_pids(session);
    std::string raw = proc_file(static_cast<pid_t>(st.wrapper_pid), "cmdline");
    std::string flag = std::string("--dir") + '\0';
    size_t at = raw.find(flag);
    if (at == std::string::npos) return "";
    at += flag.size();
    return raw.substr(at, raw.find('\0', at) - at);
  }
  // How many processes the process table sbshd saved shows running.
  size_t running_in_saved_table() const {
    std::ifstream f(state + "/procs.msgpack");
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    size_t n = 0;
    for (size_t at = bytes.find("running"); at != std::string::npos; at = bytes.find("running", at + 1)) ++n;
    return n;
  }
  // The link directories of shells under this socket (sbshd's and the wrappers' files).
  size_t shell_dirs() const {
    std::error_code ec;
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(sock + ".d", ec)) n += e.is_directory() ? 1 : 0;
    return n;
  }
};

TEST_F(adopt_test, ASessionOutlivesACrashOfSbshdWithAllItsState) {
  set_state("s");
  auto before = session_pids("s");
  kill_daemon();
  EXPECT_TRUE(pid_alive(static_cast<pid_t>(before.wrapper_pid)));
  EXPECT_TRUE(pid_alive(static_cast<pid_t>(before.shell_pid)));
  start_daemon();
  // The same shell, so everything it held: not a new shell that was given the definition.
  EXPECT_EQ(read_state("s"), expected_state());
  auto after = session_pids("s");
  EXPECT_EQ(after.shell_pid, before.shell_pid);
  EXPECT_EQ(after.wrapper_pid, before.wrapper_pid);
  EXPECT_EQ(after.restarts, 0u);
  EXPECT_EQ(after.state, "ready");
  // Everything else works as in any session: exit codes, stderr, a timeout, a lost shell.
  auto r = sbsh({"exec", "-s", "s", "--", "echo out; echo err >&2; (exit 7)"});
  EXPECT_EQ(r.code, 7);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(sbsh({"exec", "-s", "s", "-t", "200ms", "--", "sleep 30"}).code, 124);
  EXPECT_EQ(exec("s", "echo $plain").out, "kept\n");
  auto lost = exec("s", "kill -9 $$");
  EXPECT_EQ(lost.code, 137);
  EXPECT_EQ(exec("s", "echo ${plain:-fresh}").out, "fresh\n");
  auto fresh = session_pids("s");
  EXPECT_NE(fresh.shell_pid, before.shell_pid);
  // The restart replaced the adopted wrapper, which ended and left nothing behind: one link
  // directory for the new shell, one for the spare.
  EXPECT_TRUE(wait_until([&] { return !pid_alive(static_cast<pid_t>(before.wrapper_pid)); }, std::chrono::seconds(20)));
  EXPECT_TRUE(wait_until([&] { return shell_dirs() == 2; }, std::chrono::seconds(20))) << shell_dirs();
}

// A shell taken over by a new sbshd keeps its generation, so a client sees no change where
// there was none; a shell that could not be taken over is a new generation, and says so.
TEST_F(adopt_test, AnAdoptedShellKeepsItsGenerationAndALostOneIsANewOne) {
  auto result = [&](const std::string& command) {
    auto r = sbsh({"exec", "-s", "g", "--json", "--", command});
    return json::parse(r.out);
  };
  ASSERT_EQ(result("kill -9 $$").at("shell_restarted").get<bool>(), true);
  auto second = result("v=kept");
  uint64_t gen = second.at("generation").get<uint64_t>();
  ASSERT_GE(gen, 2u);
  kill_daemon();
  start_daemon();
  auto adopted = result("echo $v");
  EXPECT_EQ(adopted.at("stdout").get<std::string>(), "kept\n");
  EXPECT_EQ(adopted.at("generation").get<uint64_t>(), gen);
  EXPECT_FALSE(adopted.at("state_lost").get<bool>());
  // Now the wrapper dies while no sbshd runs: the next sbshd cannot take its shell over.
  auto st = session_pids("g");
  kill_daemon();
  ::kill(static_cast<pid_t>(st.wrapper_pid), SIGKILL);
  ASSERT_TRUE(wait_until([&] { return !pid_alive(static_cast<pid_t>(st.shell_pid)); }, std::chrono::seconds(20)));
  start_daemon();
  auto fresh = result("echo ${v:-fresh}");
  EXPECT_EQ(fresh.at("stdout").get<std::string>(), "fresh\n");
  EXPECT_TRUE(fresh.at("state_lost").get<bool>());
  EXPECT_NE(fresh.at("generation").get<uint64_t>(), gen);
}

TEST_F(adopt_test, ACommandRunningWhenSbshdDiesRunsOnAndTheNextCommandWaitsForIt) {
  ASSERT_EQ(exec("s", "cd \"$TMPDIR\"").code, 0);
  run_result first;
  std::thread t([&] { first = exec("s", "touch started; sleep 4; export LATE=yes; echo done > finished; (exit 3)"); });
  bool started = wait_until([&] { return std::filesystem::exists(dir + "/tmp/started"); }, std::chrono::seconds(20));
  kill_daemon();
  t.join();
  ASSERT_TRUE(started);
  // Its caller learns that sbshd went away, not a made-up exit status.
  EXPECT_EQ(first.code, 255);
  EXPECT_NE(first.err.find("closed the connection"), std::string::npos) << first.err;
  start_daemon();
  auto st = session_status("s");
  EXPECT_EQ(st.state, "running");
  EXPECT_EQ(st.running, "(started before sbshd restarted)");
  // Queued behind it, and run in the state it left.
  auto r = exec("s", "echo $LATE; cat finished");
  EXPECT_EQ(r.out, "yes\ndone\n");
  auto show = json::parse(sbsh({"session", "show", "s", "--json"}).out);
  const auto& hist = show.at("history");
  ASSERT_EQ(hist.size(), 2u);
  EXPECT_EQ(hist.at(0).at("command"), "(started before sbshd restarted)");
  EXPECT_EQ(hist.at(0).at("exit_code"), 3);
  EXPECT_EQ(hist.at(1).at("command"), "echo $LATE; cat finished");
}

TEST_F(adopt_test, ShutdownKeepSessionsHandsThemToTheNextSbshd) {
  set_state("s");
  ASSERT_EQ(exec("other", "x=2").code, 0);
  auto bg = sbsh({"start", "-s", "other", "--name", "bg", "--",
                  "echo one; until [ -e \"$TMPDIR/go\" ]; do sleep 0.02; done; echo two"});
  ASSERT_EQ(bg.code, 0) << bg.err;
  auto before = session_pids("s");
  auto r = sbsh({"shutdown", "--keep-sessions"});
  ASSERT_EQ(r.code, 0) << r.err;
  int st = 0;
  ASSERT_TRUE(wait_until([&] { return ::waitpid(daemon_pid, &st, WNOHANG) == daemon_pid; }, std::chrono::seconds(20)));
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  daemon_pid = -1;
  EXPECT_TRUE(pid_alive(static_cast<pid_t>(before.shell_pid)));
  start_daemon();
  EXPECT_EQ(read_state("s"), expected_state());
  EXPECT_EQ(exec("other", "echo $x").out, "2\n");
  EXPECT_EQ(session_pids("s").shell_pid, before.shell_pid);
  // The background process, its log and its exit status were kept too.
  ASSERT_EQ(exec("other", "touch \"$TMPDIR/go\"").code, 0);
  EXPECT_EQ(sbsh({"wait", "bg"}).code, 0);
  EXPECT_EQ(sbsh({"logs", "bg"}).out, "one\ntwo\n");
  // A plain shutdown still ends them, and what they started, and leaves no files.
  stop_daemon();
  EXPECT_TRUE(ended(before));
  EXPECT_TRUE(wait_until([&] { return shell_dirs() == 0; }, std::chrono::seconds(10)));
}

TEST_F(adopt_test, BackgroundProcessesGoOnAcrossACrashOfSbshdWithNothingLost) {
  ASSERT_EQ(exec("s", "cd \"$TMPDIR\"").code, 0);
  auto wait_for = [&](const char* file) { return "until [ -e " + std::string(file) + " ]; do sleep 0.02; done; "; };
  // One writes before, while no sbshd runs, and after; one ends while no sbshd runs.
  auto w = sbsh({"start", "-s", "s", "--name", "writer", "--",
                 "echo before; " + wait_for("go1") + "echo during; echo during-err >&2; touch wrote; " +
                     wait_for("go2") + "echo after; exit 5"});
  ASSERT_EQ(w.code, 0) << w.err;
  auto q = sbsh({"start", "-s", "s", "--name", "quick", "--", wait_for("go1") + "echo bye; exit 4"});
  ASSERT_EQ(q.code, 0) << q.err;
  // The table is written off the loop: crash only once it shows both running.
  ASSERT_TRUE(wait_until([&] { return running_in_saved_table() == 2; }, std::chrono::seconds(10)));
  auto procs = [&] {
    std::map<std::string, json> by_name;
    auto table = json::parse(sbsh({"ps", "-a", "--json"}).out);
    for (const auto& p : table.at("processes")) by_name[p.at("name").get<std::string>()] = p;
    return by_name;
  };
  auto before = procs();
  auto quick_pid = before.at("quick").at("pid").get<pid_t>();
  // A restart of the shell first: the pipes go to its new wrapper, the one adopted below.
  EXPECT_EQ(exec("s", "kill -9 $$").code, 137);
  EXPECT_EQ(exec("s", "echo up").out, "up\n");
  kill_daemon();
  std::ofstream(dir + "/tmp/go1").put('\n');
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(dir + "/tmp/wrote") && !pid_alive(quick_pid); },
                         std::chrono::seconds(20)));
  start_daemon();
  auto after = procs();
  EXPECT_EQ(after.at("writer").at("state"), "running");
  EXPECT_EQ(after.at("writer").at("pid"), before.at("writer").at("pid"));
  // Its status was kept in its pipe while no sbshd ran.
  EXPECT_EQ(after.at("quick").at("state"), "exited");
  EXPECT_EQ(after.at("quick").at("exit_code"), 4);
  EXPECT_EQ(sbsh({"logs", "quick"}).out, "bye\n");
  std::ofstream(dir + "/tmp/go2").put('\n');
  EXPECT_EQ(sbsh({"wait", "writer"}).code, 5);
  // Every byte, from before, during and after the crash.
  EXPECT_EQ(sbsh({"logs", "--stdout", "writer"}).out, "before\nduring\nafter\n");
  EXPECT_EQ(sbsh({"logs", "--stderr", "writer"}).err, "during-err\n");
}

TEST_F(adopt_test, ABackgroundProcessMissingFromTheSavedTableIsFoundThroughItsWrapper) {
  // The table is written off the loop, so a crash may come before it shows a new process.
  auto id = sbsh({"start", "-s", "s", "--", "echo hi; until [ -e \"$TMPDIR/go\" ]; do sleep 0.02; done; exit 6"});
  ASSERT_EQ(id.code, 0) << id.err;
  ASSERT_TRUE(wait_until([&] { return sbsh({"logs", trim(id.out)}).out == "hi\n"; }, std::chrono::seconds(10)));
  kill_daemon();
  std::filesystem::remove(state + "/procs.msgpack");
  start_daemon();
  auto table = json::parse(sbsh({"ps", "--json"}).out);
  ASSERT_EQ(table.at("processes").size(), 1u);
  EXPECT_EQ(table.at("processes").at(0).at("id").dump(), trim(id.out));
  EXPECT_EQ(table.at("processes").at(0).at("state"), "running");
  ASSERT_EQ(exec("s", "touch \"$TMPDIR/go\"").code, 0);
  EXPECT_EQ(sbsh({"wait", trim(id.out)}).code, 6);
  EXPECT_EQ(sbsh({"logs", trim(id.out)}).out, "hi\n");
}

// A new sbshd may reach a wrapper that has not yet read the end of the last one: what that
// one sent it before it died (here the pipes of a background process just started) is still
// unread. The wrapper reads it before it answers the adoption, or the process would be lost.
// Here the wrapper is stopped from before the start until the adoption waits for it, and the
// test is the first to adopt; the next sbshd gets the process from it all the same.
TEST_F(adopt_test, AWrapperAdoptedBeforeItSawItsSbshdDieStillHandsOverWhatThatSbshdLentIt) {
  ASSERT_EQ(exec("s", "true").code, 0);
  auto wrapper = static_cast<pid_t>(session_pids("s").wrapper_pid);
  std::string adoption = link_dir_of("s") + "/w";
  ASSERT_EQ(::kill(wrapper, SIGSTOP), 0);
  auto id = sbsh({"start", "-s", "s", "--", "echo hi; until [ -e \"$TMPDIR/go\" ]; do sleep 0.02; done; exit 6"});
  ASSERT_EQ(id.code, 0) << id.err;
  kill_daemon();
  std::filesystem::remove(state + "/procs.msgpack");  // only the wrapper knows the process now
  int fd = raw_connect(adoption);  // queued while the wrapper is stopped
  ASSERT_GE(fd, 0);
  ipc::channel ch{unique_fd(fd)};
  ASSERT_TRUE(ch.send(ipc::encode(ipc::msg::adopt{::getpid()}, 1)));
  ASSERT_EQ(::kill(wrapper, SIGCONT), 0);
  auto answer = ch.recv();
  ASSERT_TRUE(answer) << answer.err().message;
  auto adopted = ipc::decode_as<ipc::msg::adopted>(answer->msg);
  ASSERT_TRUE(adopted) << adopted.err().message;
  EXPECT_EQ(adopted->procs, 1u);
  auto lent = ch.recv();
  ASSERT_TRUE(lent) << lent.err().message;
  EXPECT_EQ(lent->msg.type(), ipc::msg_type::protect_group);
  EXPECT_EQ(lent->fds.size(), 3u);  // its stdout, stderr and status
  ch = ipc::channel{};  // this "sbshd" goes too; the next one adopts the session
  start_daemon();
  EXPECT_EQ(session_pids("s").wrapper_pid, static_cast<uint64_t>(wrapper));
  auto table = json::parse(sbsh({"ps", "--json"}).out);
  ASSERT_EQ(table.at("processes").size(), 1u) << table.dump();
  EXPECT_EQ(table.at("processes").at(0).at("state"), "running");
  ASSERT_EQ(exec("s", "touch \"$TMPDIR/go\"").code, 0);
  EXPECT_EQ(sbsh({"wait", trim(id.out)}).code, 6);
  EXPECT_EQ(sbsh({"logs", trim(id.out)}).out, "hi\n");
}

class adopt_timeout_test : public adopt_test {
 protected:
  adopt_timeout_test() { daemon_args = {"--adopt-timeout", "1s"}; }
};

TEST_F(adopt_timeout_test, ASessionNobodyAdoptsEndsAfterTheTimeout) {
  ASSERT_EQ(exec("s", "sleep 300 & echo $!").code, 0);
  auto before = session_pids("s");
  auto bg = static_cast<pid_t>(std::stol(exec("s", "jobs -p").out));
  std::string links = link_dir_of("s");
  ASSERT_TRUE(!links.empty() && std::filesystem::exists(links)) << links;
  kill_daemon();
  EXPECT_TRUE(wait_until([&] { return ended(before) && !pid_alive(bg); }, std::chrono::seconds(20)));
  // The orphan cleaned up its own link directory.
  EXPECT_TRUE(wait_until([&] { return !std::filesystem::exists(links); }, std::chrono::seconds(10)));
  // The next sbshd starts the session afresh from its definition. Whatever else the killed
  // sbshd left (a spare it was starting) is removed: one directory for the session's new
  // shell, one for the new spare.
  start_daemon();
  EXPECT_EQ(exec("s", "jobs -p | wc -l").out, "0\n");
  EXPECT_NE(session_pids("s").shell_pid, before.shell_pid);
  EXPECT_TRUE(wait_until([&] { return shell_dirs() == 2; }, std::chrono::seconds(10))) << shell_dirs();
}

class no_adopt_test : public adopt_test {
 protected:
  no_adopt_test() { daemon_args = {"--adopt-timeout", "0"}; }
};

TEST_F(no_adopt_test, WithTimeoutZeroSessionsEndWithSbshd) {
  ASSERT_EQ(exec("s", "true").code, 0);
  auto before = session_pids("s");
  kill_daemon();
  EXPECT_TRUE(wait_until([&] { return ended(before); }, std::chrono::seconds(20)));
}

// What a crash costs without adoption: the sessions are recreated from their definitions,
// and a background process's exit can no longer be seen.
TEST_F(no_adopt_test, DaemonCrashRecreatesSessionsAndReportsLostProcesses) {
  ASSERT_EQ(sbsh({"session", "create", "keep", "-C", "/tmp"}).code, 0);
  ASSERT_EQ(sbsh({"start", "-s", "keep", "--name", "victim", "--", "sleep 300"}).code, 0);
  // State is written off the loop: crash only once the table on disk shows it running.
  ASSERT_TRUE(wait_until([&] { return running_in_saved_table() == 1; }, std::chrono::seconds(10)));
  kill_daemon();
  start_daemon();
  EXPECT_EQ(exec("keep", "pwd").out, "/tmp\n");
  auto j = json::parse(sbsh({"ps", "-a", "--json"}).out);
  ASSERT_EQ(j.at("processes").size(), 1u);
  EXPECT_EQ(j.at("processes").at(0).at("state"), "lost");
  EXPECT_TRUE(j.at("processes").at(0).at("exit_code").is_null());
  EXPECT_EQ(sbsh({"wait", "victim"}).code, 255);
  // Its session ended with the crashed sbshd (no adoption), and so did the process: its
  // whole process group (the process leads it; `sleep` runs in a subshell below it).
  auto pid = j.at("processes").at(0).at("pid").get<pid_t>();
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(wait_until([&] { return ::kill(-pid, 0) != 0; }, std::chrono::seconds(20)));
  ::kill(-pid, SIGKILL);  // in case it did not
}

// A start still waiting for its session's shell when sbshd crashed never ran: its record
// says "not started", not "lost" (which says that its end is unknown).
TEST_F(adopt_test, AStartQueuedWhenSbshdCrashedIsNotStartedNotLost) {
  std::string marker = dir + "/busy";
  auto busy = sbsh({"exec", "-s", "q", "--detach-after", "100ms", "--", "touch " + marker + "; sleep 30"});
  ASSERT_EQ(busy.code, 254) << busy.err;
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(marker); }, std::chrono::seconds(10)));
  // Through the library, which does not ask again once sbshd is gone.
  auto c = conn();
  std::thread start([&] {
    client::start_options o;
    o.session = "q";
    o.name = "queued";
    o.command = "echo ran > " + dir + "/ran";
    (void)c.start(o);
  });
  // Crash only once the table on disk holds it, still starting.
  ASSERT_TRUE(wait_until(
      [&] {
        std::ifstream f(state + "/procs.msgpack");
        std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        return bytes.find("queued") != std::string::npos && bytes.find("starting") != std::string::npos;
      },
      std::chrono::seconds(10)));
  kill_daemon();
  start.join();
  start_daemon();
  auto j = json::parse(sbsh({"ps", "-a", "--json"}).out);
  ASSERT_EQ(j.at("processes").size(), 1u) << j.dump();
  EXPECT_EQ(j.at("processes").at(0).at("state"), "not_started") << j.dump();
  EXPECT_NE(j.at("processes").at(0).at("error").get<std::string>().find("waited"), std::string::npos) << j.dump();
  auto table = sbsh({"ps", "-a"});
  EXPECT_NE(table.out.find("not started"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("lost"), std::string::npos) << table.out;
  auto w = sbsh({"wait", "queued"});
  EXPECT_EQ(w.code, 255);
  EXPECT_NE(w.err.find("was not started"), std::string::npos) << w.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/ran"));
}

TEST_F(adopt_test, OnlyAnAdoptRequestTakesASessionOver) {
  ASSERT_EQ(exec("s", "v=1").code, 0);
  auto before = session_pids("s");
  // Something that is not sbshd connects to each wrapper's adoption socket and sends junk:
  // the sessions go on under their sbshd.
  int sent = 0;
  for (const auto& e : std::filesystem::directory_iterator(sock + ".d"))
    if (std::filesystem::exists(e.path() / "w")) {
      auto r = run({helper(), "unix-send", (e.path() / "w").string(), "not a frame at all"});
      EXPECT_EQ(r.code, 0) << r.err;
      ++sent;
    }
  EXPECT_GE(sent, 1);  // the session's wrapper, and the spare's once it has started
  EXPECT_EQ(exec("s", "echo $v").out, "1\n");
  EXPECT_EQ(session_pids("s").wrapper_pid, before.wrapper_pid);
}

}  // namespace adopt_tests
}  // namespace sbsh::test
