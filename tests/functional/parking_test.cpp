// Parking: sbshd closes its end of an idle session's shell channel (the wrapper holds a copy)
// and asks the wrapper for it back when a command comes, so that an idle session costs it one
// descriptor fewer. Every guarantee of a session holds across a park: exact results, the
// shell's state, a shell killed while parked, timeouts and interrupts, removal, shutdown, and
// adoption by a later sbshd.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixture.h"

namespace sbsh::test {

using json = nlohmann::json;

namespace parking_tests {

// The inodes of the SOCK_SEQPACKET unix sockets (the shells' channels) in /proc/net/unix.
std::set<std::string> seqpacket_inodes() {
  std::set<std::string> out;
  std::istringstream lines(read_file("/proc/net/unix"));
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string num, refs, proto, flags, type, st, inode;
    if (f >> num >> refs >> proto >> flags >> type >> st >> inode && type == "0005") out.insert(inode);
  }
  return out;
}

// How many SOCK_SEQPACKET sockets process `pid` holds an end of.
size_t seqpacket_sockets(pid_t pid) {
  std::set<std::string> seq = seqpacket_inodes();
  size_t n = 0;
  std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  if (DIR* d = ::opendir(fd_dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      char target[256];
      ssize_t len = ::readlink((fd_dir + "/" + e->d_name).c_str(), target, sizeof target - 1);
      if (len <= 0) continue;
      std::string t(target, static_cast<size_t>(len));
      // socket:[INODE]
      if (t.rfind("socket:[", 0) == 0 && seq.contains(t.substr(8, t.size() - 9))) ++n;
    }
    ::closedir(d);
  }
  return n;
}

// How many shell channels sbshd (`pid`) holds an end of: its SOCK_SEQPACKET sockets but the
// one to each fork server it runs.
size_t channels_held(pid_t pid) {
  size_t sockets = seqpacket_sockets(pid), servers = fork_servers_of(pid).size();
  return sockets > servers ? sockets - servers : 0;
}

class parking_test : public daemon_test {
 protected:
  void SetUp() override {
    // Parks a session's channel once it has been idle for 50 ms; no spare (it holds a
    // channel that is no session's).
    daemon_args = {"--park-after-ms", "50", "--spare-wrappers", "0"};
    daemon_test::SetUp();
  }
  bool all_parked() {
    return wait_until([&] { return channels_held(daemon_pid) == 0; }, std::chrono::seconds(30));
  }
};

TEST_F(parking_test, IdleSessionsHoldOneDescriptorEachAndCommandsInThemRunExactly) {
  size_t before = open_fds(daemon_pid);
  constexpr int kSessions = 20;
  for (int i = 0; i < kSessions; ++i) {
    auto r = exec("p" + std::to_string(i), "cd /tmp && export KEPT=" + std::to_string(i) + " && plain=yes");
    ASSERT_EQ(r.code, 0) << r.err;
  }
  ASSERT_TRUE(all_parked()) << channels_held(daemon_pid) << " channels still held";
  // Each session: its control socket only (sbshd learns of its wrappers' ends from SIGCHLD).
  EXPECT_LE(open_fds(daemon_pid), before + size_t{kSessions} + 4) << "before: " << before;
  // A parked session runs a command exactly as before, in the same shell with its state.
  for (int i : {0, 7, kSessions - 1}) {
    std::string name = "p" + std::to_string(i);
    auto r = sbsh({"exec", "-s", name, "--", "echo \"$PWD $KEPT $plain\"; echo to-err >&2; (exit 3)"});
    EXPECT_EQ(r.code, 3);
    EXPECT_EQ(r.out, "/tmp " + std::to_string(i) + " yes\n");
    EXPECT_EQ(r.err, "to-err\n");
    EXPECT_EQ(session_status(name).restarts, 0u);
  }
  // Parked again once idle.
  EXPECT_TRUE(all_parked());
  // Many commands in a row through one connection, parked or not in between.
  auto c = conn();
  for (int i = 0; i < 20; ++i) {
    client::exec_options o;
    o.session = "p1";
    o.command = "printf '%s' $((KEPT + " + std::to_string(i) + "))";
    auto r = c.exec(o);
    ASSERT_TRUE(r) << r.err().message;
    EXPECT_EQ(r->stdout_data, std::to_string(1 + i));
    if (i % 5 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(150));
  }
}

TEST_F(parking_test, AParkedShellKilledIsRestartedAndSaysSo) {
  ASSERT_EQ(exec("k", "v=kept").code, 0);
  ASSERT_TRUE(all_parked());
  auto before = session_pids("k");
  ASSERT_EQ(::kill(static_cast<pid_t>(before.shell_pid), SIGKILL), 0);
  // The wrapper reports the loss on the control socket; a new shell starts and is parked in
  // its turn.
  ASSERT_TRUE(wait_until([&] { return session_status("k").restarts == 1; }, std::chrono::seconds(20)));
  auto r = sbsh({"exec", "-s", "k", "--json", "--", "echo ${v:-fresh}"});
  auto j = json::parse(r.out);
  EXPECT_EQ(j.at("stdout").get<std::string>(), "fresh\n");
  EXPECT_TRUE(j.at("state_lost").get<bool>()) << r.out;
  EXPECT_NE(session_pids("k").shell_pid, before.shell_pid);
  EXPECT_TRUE(all_parked());
}

TEST_F(parking_test, TimeoutsAndInterruptsRightAfterUnparking) {
  ASSERT_EQ(exec("t", "v=kept").code, 0);
  ASSERT_TRUE(all_parked());
  auto timed = sbsh({"exec", "-s", "t", "-t", "300ms", "--", "sleep 30"});
  EXPECT_EQ(timed.code, 124) << timed.err;
  EXPECT_EQ(exec("t", "echo $v").out, "kept\n");
  ASSERT_TRUE(all_parked());
  // A command cancelled soon after it started (an interrupt): the rest of its text does not
  // run, and the shell serves on with its state.
  auto r = exec_cancelled_after("t", "sleep 30; echo not-here", std::chrono::milliseconds(300));
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_TRUE(r->cancelled);
  EXPECT_EQ(r->stdout_data, "");
  EXPECT_EQ(exec("t", "echo $v").out, "kept\n");
  EXPECT_EQ(session_status("t").restarts, 0u);
}

TEST_F(parking_test, RemovalAndShutdownOfParkedSessionsEndEveryProcess) {
  std::vector<pid_t> pids;
  for (const char* name : {"a", "b", "c"}) {
    auto r = exec(name, "sleep 600 >/dev/null 2>&1 & echo $!");
    ASSERT_EQ(r.code, 0) << r.err;
    pids.push_back(static_cast<pid_t>(std::stol(r.out)));
    auto st = session_pids(name);
    pids.push_back(static_cast<pid_t>(st.wrapper_pid));
    pids.push_back(static_cast<pid_t>(st.shell_pid));
  }
  ASSERT_TRUE(all_parked());
  ASSERT_EQ(sbsh({"session", "rm", "a"}).code, 0);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(wait_until([&] { return !pid_alive(pids[i]); }, std::chrono::seconds(20))) << cmdline_of(pids[i]);
  stop_daemon();
  for (pid_t p : pids)
    EXPECT_TRUE(wait_until([&] { return !pid_alive(p); }, std::chrono::seconds(20))) << cmdline_of(p);
}

TEST_F(parking_test, ALaterSbshdAdoptsAParkedSession) {
  ASSERT_EQ(exec("ad", "cd /tmp && v=kept").code, 0);
  ASSERT_TRUE(all_parked());
  auto before = session_pids("ad");
  kill_daemon();
  start_daemon();
  auto r = sbsh({"exec", "-s", "ad", "--", "echo \"$PWD $v\"; echo err >&2; (exit 5)"});
  EXPECT_EQ(r.code, 5);
  EXPECT_EQ(r.out, "/tmp kept\n");
  EXPECT_EQ(r.err, "err\n");
  auto after = session_pids("ad");
  EXPECT_EQ(after.shell_pid, before.shell_pid);
  EXPECT_EQ(after.wrapper_pid, before.wrapper_pid);
  // The adopted session is parked in its turn, and serves on once unparked.
  EXPECT_TRUE(all_parked());
  EXPECT_EQ(exec("ad", "echo $v").out, "kept\n");
  // A shutdown that keeps the sessions hands a parked one over too.
  ASSERT_TRUE(all_parked());
  ASSERT_EQ(sbsh({"shutdown", "--keep-sessions"}).code, 0);
  ASSERT_TRUE(wait_until([&] { return !pid_alive(daemon_pid); }, std::chrono::seconds(20)));
  start_daemon();
  EXPECT_EQ(exec("ad", "echo $v").out, "kept\n");
  EXPECT_EQ(session_pids("ad").shell_pid, before.shell_pid);
}

// A session whose command runs keeps its channel however long the command takes: its status
// comes on it.
TEST_F(parking_test, ARunningCommandKeepsItsChannel) {
  ASSERT_EQ(exec("busy", "true").code, 0);
  ASSERT_TRUE(all_parked());
  run_result r;
  std::thread t([&] { r = sbsh({"exec", "-s", "busy", "--", "sleep 2; echo done"}); });
  bool held = wait_until([&] { return channels_held(daemon_pid) == 1; }, std::chrono::seconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // ten times the idle time
  size_t during = channels_held(daemon_pid);
  t.join();
  EXPECT_TRUE(held);
  EXPECT_EQ(during, 1u);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "done\n");
  EXPECT_TRUE(all_parked());
}

}  // namespace parking_tests

}  // namespace sbsh::test
