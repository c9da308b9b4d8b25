// How many sessions sbshd holds: what `status` says its descriptor limit supports, the
// refusal that names the limit when descriptors run out (and sbshd serving on afterwards),
// and a shutdown of many sessions that ends every process each one started.
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fixture.h"

namespace sbsh::test {

using json = nlohmann::json;

namespace capacity_tests {

class capacity_test : public daemon_test {
 protected:
  // Sets sbshd's soft RLIMIT_NOFILE; the hard one stays, so that it can be raised again.
  void limit_descriptors(rlim_t n) {
    rlimit rl{};
    ASSERT_EQ(::prlimit(daemon_pid, RLIMIT_NOFILE, nullptr, &rl), 0) << std::strerror(errno);
    rl.rlim_cur = n;
    ASSERT_EQ(::prlimit(daemon_pid, RLIMIT_NOFILE, &rl, nullptr), 0) << std::strerror(errno);
  }
  // The lowest descriptor number sbshd has free: a limit of it leaves sbshd none.
  int lowest_free_descriptor() {
    std::set<int> used;
    if (DIR* d = ::opendir(("/proc/" + std::to_string(daemon_pid) + "/fd").c_str())) {
      while (dirent* e = ::readdir(d))
        if (e->d_name[0] != '.') used.insert(std::atoi(e->d_name));
      ::closedir(d);
    }
    int n = 0;
    while (used.contains(n)) ++n;
    return n;
  }
  // Runs `command` in session `name` through the library (one connection for many sessions).
  result<client::exec_result> run_in(client::connection& c, const std::string& name, const std::string& command) {
    client::exec_options o;
    o.session = name;
    o.command = command;
    o.session_env = std::vector<std::string>{"PATH=/usr/bin:/bin", "HOME=" + dir};
    return c.exec(o);
  }
};

TEST_F(capacity_test, StatusSaysHowManySessionsItsDescriptorLimitHolds) {
  auto r = sbsh({"status", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = json::parse(r.out);
  uint64_t limit = j.at("descriptor_limit").get<uint64_t>();
  uint64_t supported = j.at("sessions_supported").get<uint64_t>();
  rlimit own{};
  ASSERT_EQ(::prlimit(daemon_pid, RLIMIT_NOFILE, nullptr, &own), 0);
  EXPECT_EQ(limit, own.rlim_cur);
  // Raised at start: the soft limit is the hard one.
  EXPECT_EQ(own.rlim_cur, own.rlim_max);
  EXPECT_EQ(supported, limit - std::min<uint64_t>(512, limit / 4));
  auto text = sbsh({"status"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("of at most " + std::to_string(supported) + " (descriptor limit " + std::to_string(limit)),
            std::string::npos)
      << text.out;
}

TEST_F(capacity_test, ShellsKeepTheDescriptorLimitTheyHadBeforeSbshdRaisedIts) {
  // sbshd gives its wrappers (and so their shells) the limits it was started with; as root
  // it raised its own beyond them.
  auto r = exec("lim", "ulimit -Sn; ulimit -Hn");
  ASSERT_EQ(r.code, 0) << r.err;
  rlimit mine{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &mine), 0);
  EXPECT_EQ(r.out, fmt::format("{}\n{}\n", mine.rlim_cur, mine.rlim_max));
}

TEST_F(capacity_test, ShellsAndSetupsKeepTheSoftLimitSbshdStartedWith) {
  // sbshd started with a soft limit below its hard one raises its own to the hard one; what it
  // starts gets the soft one back: the sessions' shells, and their setups, which run user code
  // as much as a shell does.
  rlimit mine{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &mine), 0);
  if (mine.rlim_max <= 1024) GTEST_SKIP() << "the hard limit (" << mine.rlim_max << ") leaves no room to raise";
  stop_daemon();
  rlimit low = mine;
  low.rlim_cur = 1000;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  start_daemon();
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &mine), 0);
  rlimit raised{};
  ASSERT_EQ(::prlimit(daemon_pid, RLIMIT_NOFILE, nullptr, &raised), 0);
  EXPECT_GT(raised.rlim_cur, 1000u);
  const std::string expected = fmt::format("1000\n{}\n", mine.rlim_max);
  auto shell = exec("low", "ulimit -Sn; ulimit -Hn");
  ASSERT_EQ(shell.code, 0) << shell.err;
  EXPECT_EQ(shell.out, expected);
  auto made = sbsh({"session", "create", "setup-low", "--setup", "{ ulimit -Sn; ulimit -Hn; } > \"$SBSH_ENV/nofile\""});
  ASSERT_EQ(made.code, 0) << made.err;
  auto setup = exec("setup-low", "cat \"$SBSH_ENV/nofile\"");
  ASSERT_EQ(setup.code, 0) << setup.err;
  EXPECT_EQ(setup.out, expected);
}

TEST_F(capacity_test, OutOfDescriptorsTheRefusalNamesTheLimitAndSbshdServesOn) {
  auto c = conn();
  ASSERT_TRUE(run_in(c, "first", "true"));
  // 100 kept for clients and the like: room for 300 sessions of 1 each (their channels parked
  // with their wrappers while idle, and no descriptor to watch a wrapper: sbshd reaps its
  // children on SIGCHLD). (A shell needs at least 257: its channel is descriptor 254.)
  limit_descriptors(400);
  std::string refusal;
  int made = 1;
  for (; made < 400 && refusal.empty(); ++made) {
    auto r = run_in(c, "s" + std::to_string(made), "true");
    if (!r) refusal = r.err().message;
    else if (!r->error.empty()) refusal = r->error;
  }
  ASSERT_FALSE(refusal.empty()) << "no refusal after " << made << " sessions";
  EXPECT_GE(made, 280);
  EXPECT_NE(refusal.find("RLIMIT_NOFILE 400"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("each session needs 1"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("LimitNOFILE="), std::string::npos) << refusal;
  // Sessions made before serve on, on the same connection and on new ones.
  auto again = run_in(c, "first", "echo still");
  ASSERT_TRUE(again) << again.err().message;
  EXPECT_EQ(again->error, "");
  EXPECT_EQ(exec("s1", "echo here").out, "here\n");

  // With no descriptor left at all, a new connection is refused with the limit named, and
  // not left waiting. Not under the sanitizers: their runtime needs descriptors of its own to
  // check memory (a pipe), and with none it reports errors that are not there.
#ifndef SBSH_SANITIZED
  // sbshd opens and closes descriptors of its own meanwhile (a state file written on its
  // thread pool, the next spare shell), so the lowest free one is read again until a limit
  // of it leaves none.
  run_result none;
  for (int tries = 0; tries < 50; ++tries) {
    limit_descriptors(static_cast<rlim_t>(lowest_free_descriptor()));
    none = sbsh({"status"});
    if (none.code != 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(none.code, 0);
  EXPECT_NE(none.err.find("RLIMIT_NOFILE"), std::string::npos) << none.err;
#endif
  limit_descriptors(4096);
  auto st = sbsh({"status"});
  EXPECT_EQ(st.code, 0) << st.err;
  EXPECT_EQ(exec("first", "echo back").out, "back\n");
}

// Under a small limit, the channels of idle sessions are parked with their wrappers as soon as
// descriptors run short, not after an idle time: more sessions fit than 3 descriptors each
// would allow ((300 - 75) / 3 = 75), every one still serves with its state, and the refusal
// past them names the limit.
TEST_F(capacity_test, UnderASmallLimitIdleSessionsParkTheirChannelsAndMoreFit) {
  auto c = conn();
  limit_descriptors(300);
  constexpr int kSessions = 210;
  for (int i = 0; i < kSessions; ++i) {
    auto r = run_in(c, "f" + std::to_string(i), "v=" + std::to_string(i));
    ASSERT_TRUE(r) << "session " << i << ": " << r.err().message;
    ASSERT_EQ(r->error, "") << "session " << i;
  }
  for (int i : {0, 100, kSessions - 1}) {
    auto r = run_in(c, "f" + std::to_string(i), "echo $v");
    ASSERT_TRUE(r) << r.err().message;
    EXPECT_EQ(r->stdout_data, std::to_string(i) + "\n");
  }
  auto st = sbsh({"status", "--json"});
  ASSERT_EQ(st.code, 0) << st.err;
  EXPECT_EQ(json::parse(st.out).at("sessions_supported").get<uint64_t>(), 225u);
  std::string refusal;
  for (int i = kSessions; i < 350 && refusal.empty(); ++i) {
    auto r = run_in(c, "f" + std::to_string(i), "true");
    if (!r) refusal = r.err().message;
    else if (!r->error.empty()) refusal = r->error;
  }
  EXPECT_NE(refusal.find("RLIMIT_NOFILE 300"), std::string::npos) << refusal;
  limit_descriptors(4096);
}

// A shutdown ends the sessions a bounded number at a time (here 16, so 200 sessions go in 13
// rounds): every process still ends.
TEST_F(capacity_test, ShutdownEndsEveryProcessOfManySessions) {
  stop_daemon();
  daemon_args = {"--stop-at-once", "16"};
  start_daemon();
  auto c = conn();
  std::vector<pid_t> pids;
  constexpr int kSessions = 200;
  for (int i = 0; i < kSessions; ++i) {
    // A background process of the shell's own too: it must end with its session.
    auto r = run_in(c, "m" + std::to_string(i), "sleep 600 >/dev/null 2>&1 & echo $!");
    ASSERT_TRUE(r) << r.err().message;
    ASSERT_EQ(r->error, "");
    pids.push_back(static_cast<pid_t>(std::atol(r->stdout_data.c_str())));
  }
  auto st = c.status();
  ASSERT_TRUE(st) << st.err().message;
  ASSERT_EQ(st->sessions.size(), static_cast<size_t>(kSessions));
  for (const auto& s : st->sessions) {
    pids.push_back(static_cast<pid_t>(s.wrapper_pid));
    pids.push_back(static_cast<pid_t>(s.shell_pid));
  }
  for (pid_t p : pids) ASSERT_TRUE(p > 0 && pid_alive(p)) << p;
  stop_daemon();
  EXPECT_TRUE(wait_until([&] { return std::none_of(pids.begin(), pids.end(), pid_alive); }, std::chrono::seconds(30)));
  for (pid_t p : pids) EXPECT_FALSE(pid_alive(p)) << "process " << p << " outlived the shutdown: " << cmdline_of(p);
  // Each round was started by the end of the one before, not by the bound on a stuck wrapper.
  std::ifstream f(dir + "/sbshd.log");
  std::string log((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(log.find("not ended"), std::string::npos) << log;
}

// A wrapper that is slow to end its session (here: stopped for 4 s, as a loaded machine may
// hold it) is waited for: sbshd killing it at a deadline would leave its background process
// running without it.
TEST_F(capacity_test, ShutdownWaitsForASlowWrapperToEndItsSession) {
  auto c = conn();
  // In a session of its own, out of the shell's jobs: only the wrapper, its subreaper, still
  // finds it.
  auto r = run_in(c, "slow", "( setsid sleep 600 >/dev/null 2>&1 & echo $! )");
  ASSERT_TRUE(r) << r.err().message;
  auto sleeper = static_cast<pid_t>(std::atol(r->stdout_data.c_str()));
  auto wrapper = static_cast<pid_t>(session_pids("slow").wrapper_pid);
  ASSERT_TRUE(sleeper > 0 && pid_alive(sleeper));
  ASSERT_EQ(::kill(wrapper, SIGSTOP), 0);
  std::thread resume([wrapper] {
    std::this_thread::sleep_for(std::chrono::seconds(4));
    ::kill(wrapper, SIGCONT);
  });
  stop_daemon();
  resume.join();
  EXPECT_TRUE(wait_until([&] { return !pid_alive(sleeper); }, std::chrono::seconds(10)));
  if (pid_alive(sleeper)) ::kill(sleeper, SIGKILL);  // no debris for the next test
  EXPECT_FALSE(pid_alive(wrapper));
}

// The same for a session removed: its wrapper, slow to end it (stopped for 6 s, longer than
// sbshd once waited), is waited for, and what left the shell's jobs ends with it.
TEST_F(capacity_test, RemovalWaitsForASlowWrapperToEndItsSession) {
  auto c = conn();
  auto r = run_in(c, "slow-rm", "( setsid sleep 600 >/dev/null 2>&1 & echo $! )");
  ASSERT_TRUE(r) << r.err().message;
  auto sleeper = static_cast<pid_t>(std::atol(r->stdout_data.c_str()));
  auto wrapper = static_cast<pid_t>(session_pids("slow-rm").wrapper_pid);
  ASSERT_TRUE(sleeper > 0 && pid_alive(sleeper));
  ASSERT_EQ(::kill(wrapper, SIGSTOP), 0);
  std::thread resume([wrapper] {
    std::this_thread::sleep_for(std::chrono::seconds(6));
    ::kill(wrapper, SIGCONT);
  });
  auto rm = sbsh({"session", "rm", "slow-rm"});
  resume.join();
  EXPECT_EQ(rm.code, 0) << rm.err;
  EXPECT_TRUE(wait_until([&] { return !pid_alive(sleeper); }, std::chrono::seconds(10)));
  if (pid_alive(sleeper)) ::kill(sleeper, SIGKILL);  // no debris for the next test
  EXPECT_FALSE(pid_alive(wrapper));
}

}  // namespace capacity_tests

}  // namespace sbsh::test
