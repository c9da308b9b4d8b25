// sbshd as PID 1 of a PID namespace, as a container's main process is (docs/containers.md):
// PID 1 stays a small init that starts the daemon as its child, reaps every orphan, starts
// another daemon that adopts the sessions when the first is killed, and on SIGTERM ends
// every process and exits 0. The namespace is made with unshare(1), as root; the image's
// own test (tests/container/image_test.sh) does the same under podman.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "fixture.h"

namespace sbsh::test::pid1_tests {

// The children of `pid`, as this (the host's) PID namespace numbers them.
std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> out;
  for (pid_t c; f >> c;) out.push_back(c);
  return out;
}

// `pid` and every process below it.
std::set<pid_t> tree_of(pid_t pid) {
  std::set<pid_t> all{pid};
  std::vector<pid_t> todo{pid};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    for (pid_t c : children_of(p))
      if (all.insert(c).second) todo.push_back(c);
  }
  return all;
}

std::string comm_of(pid_t pid) {
  std::string s = read_file("/proc/" + std::to_string(pid) + "/comm");
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// The host's pid of a process whose pid in its own namespace is `ns_pid`, among `among`.
pid_t host_pid_of(pid_t ns_pid, const std::set<pid_t>& among) {
  for (pid_t p : among) {
    std::ifstream f("/proc/" + std::to_string(p) + "/status");
    for (std::string line; std::getline(f, line);) {
      if (line.rfind("NSpid:", 0) != 0) continue;
      std::istringstream in(line.substr(6));
      pid_t last = 0;
      for (pid_t v; in >> v;) last = v;
      if (last == ns_pid) return p;
    }
  }
  return -1;
}

// Zombies whose parent is `parent`.
std::vector<pid_t> zombies_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = read_file(e.path().string() + "/stat");
    size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 4 >= stat.size()) continue;
    char state = stat[close + 2];
    pid_t ppid = std::atoi(stat.c_str() + close + 4);
    if (state == 'Z' && ppid == parent) out.push_back(std::atoi(name.c_str()));
  }
  return out;
}

class pid1_test : public daemon_test {
 protected:
  pid1_test() { start_in_setup = false; }
  void SetUp() override {
    daemon_test::SetUp();
    if (::geteuid() != 0) GTEST_SKIP() << "SKIPPED: a PID namespace of its own (unshare --pid) needs root here";
    auto probe = run({"/usr/bin/unshare", "--pid", "--fork", "--mount-proc", "true"});
    if (probe.code != 0) GTEST_SKIP() << "SKIPPED: unshare --pid cannot run here: " << probe.err;
    daemon_prefix = {"/usr/bin/unshare", "--pid", "--fork", "--mount-proc"};
    start_daemon();
  }
  // Stopped as a container is, with SIGTERM to PID 1 (`sbsh shutdown` from outside the
  // namespace would wait for a pid that is the namespace's, not this one's).
  void TearDown() override {
    if (daemon_pid > 0 && init_pid() > 0) {
      ::kill(init_pid(), SIGTERM);
      int st = -1;
      EXPECT_TRUE(
          wait_until([&] { return ::waitpid(daemon_pid, &st, WNOHANG) == daemon_pid; }, std::chrono::seconds(10)));
      EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st << "\n" << daemon_log();
      daemon_pid = -1;
    }
    daemon_test::TearDown();
  }
  // PID 1 of the namespace: the child of unshare.
  pid_t init_pid() const {
    auto c = children_of(daemon_pid);
    return c.size() == 1 ? c[0] : -1;
  }
  // The daemon PID 1 started (an sbshd among its children), or -1.
  pid_t server_pid() const {
    for (pid_t c : children_of(init_pid()))
      if (comm_of(c) == "sbshd") return c;
    return -1;
  }
  std::string daemon_log() const { return read_file(dir + "/sbshd.log"); }
};

TEST_F(pid1_test, AKilledDaemonIsStartedAgainAndAdoptsTheSessions) {
  pid_t init = init_pid();
  ASSERT_GT(init, 0);
  EXPECT_EQ(comm_of(init), "sbshd");
  auto r = exec("a", "cd /tmp && export V=kept; echo $$");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string shell = r.out;
  ASSERT_EQ(sbsh({"start", "-s", "a", "--name", "bg", "--", "sleep 1000"}).code, 0);
  pid_t first = server_pid();
  ASSERT_GT(first, 0);
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  pid_t second = -1;
  ASSERT_TRUE(wait_until(
      [&] {
        second = server_pid();
        return second > 0 && second != first && exec("probe", "true").code == 0;
      },
      std::chrono::seconds(20)))
      << daemon_log();
  EXPECT_EQ(init_pid(), init);
  // The same shell with its state, and its background process.
  r = exec("a", "echo $PWD $V; echo $$");
  EXPECT_EQ(r.out, "/tmp kept\n" + shell) << r.err;
  // (Its name may be lost: killed at once, sbshd may not have saved its table yet.)
  auto ps = sbsh({"ps", "--json"});
  EXPECT_NE(ps.out.find("\"state\":\"running\""), std::string::npos) << ps.out << ps.err;
  EXPECT_NE(daemon_log().find("starting another, which adopts its sessions"), std::string::npos) << daemon_log();
}

TEST_F(pid1_test, OrphansThatEndAreReaped) {
  pid_t init = init_pid();
  ASSERT_GT(init, 0);
  ASSERT_EQ(exec("a", "sleep 0.3 & disown; true").code, 0);
  // Its wrapper killed, the shell and the sleep lose their parent: PID 1 becomes theirs.
  auto st = session_pids("a");
  auto tree = tree_of(init);
  pid_t wrapper = host_pid_of(static_cast<pid_t>(st.wrapper_pid), tree);
  ASSERT_GT(wrapper, 0);
  ASSERT_EQ(::kill(wrapper, SIGKILL), 0);
  // The session starts another shell; what ended meanwhile must not stay a zombie of PID 1.
  ASSERT_TRUE(wait_until([&] { return exec("a", "true").code == 0; }, std::chrono::seconds(20)));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(wait_until([&] { return zombies_of(init).empty(); }, std::chrono::seconds(5)))
      << zombies_of(init).size() << " zombies under PID 1";
  EXPECT_FALSE(pid_alive(wrapper));
}

TEST_F(pid1_test, SigtermEndsEveryProcessAndExitsZero) {
  ASSERT_EQ(exec("a", "true").code, 0);
  ASSERT_EQ(sbsh({"start", "-s", "a", "--", "trap '' TERM; sleep 1000"}).code, 0);
  ASSERT_EQ(exec("b", "sleep 1000 & disown; true").code, 0);
  pid_t init = init_pid();
  ASSERT_GT(init, 0);
  auto tree = tree_of(init);
  EXPECT_GE(tree.size(), 6u);  // init, sbshd, two wrappers, their shells, the sleeps
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(init, SIGTERM), 0);
  int st = -1;
  ASSERT_TRUE(wait_until([&] { return ::waitpid(daemon_pid, &st, WNOHANG) == daemon_pid; }, std::chrono::seconds(10)))
      << daemon_log();
  auto took = std::chrono::steady_clock::now() - t0;
  daemon_pid = -1;
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st << "\n" << daemon_log();
  EXPECT_LT(took, std::chrono::seconds(10));
  for (pid_t p : tree) EXPECT_FALSE(pid_alive(p)) << p << " outlived PID 1";
}

TEST_F(pid1_test, ADaemonThatKeepsCrashingEndsPidOneForTheRestartPolicy) {
  pid_t last = -1;
  for (int i = 0; i < 6; ++i) {
    pid_t d = -1;
    ASSERT_TRUE(wait_until(
        [&] {
          d = server_pid();
          return d > 0 && d != last;
        },
        std::chrono::seconds(20)))
        << i << "\n"
        << daemon_log();
    ASSERT_EQ(::kill(d, SIGKILL), 0);
    last = d;
  }
  int st = -1;
  ASSERT_TRUE(wait_until([&] { return ::waitpid(daemon_pid, &st, WNOHANG) == daemon_pid; }, std::chrono::seconds(20)))
      << daemon_log();
  daemon_pid = -1;
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGKILL) << st;
  EXPECT_NE(daemon_log().find("giving up"), std::string::npos) << daemon_log();
}

}  // namespace sbsh::test::pid1_tests
