// Chaos: clients run commands whose output and exit code are known in advance, across
// several sessions, while shells, wrappers and sbshd itself are killed at random. Every
// result must be either exactly what the command produced or an explicit failure (the shell
// was lost, the command did not run, the connection to sbshd was lost): never an output or
// exit code that the command did not produce. No call may hang past a deadline, and nothing
// may be left running afterwards.
//
// Two kinds of call are checked for more than that. A background process tree that ignores
// SIGTERM is started and killed again and again: a kill that says it ended the process returns
// only once not one process of the tree is left. And now and then a session's wrapper and
// sbshd are killed at the same moment, and a new client (one that starts sbshd when none
// answers, as the CLI does) sends a command at once: its connection may land in the dying
// sbshd's backlog, and the request, which no live sbshd read, is sent again to a new one and
// gives the command's exact result.
//
// SBSH_CHAOS_SECONDS sets how long it runs (default 20); SBSH_CHAOS_SEED the random seed
// (default: the time, printed so that a failure can be replayed).
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "fixture.h"

namespace sbsh::test::chaos_tests {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

constexpr int kWorkers = 4;

struct tally {
  std::atomic<int> exact{0}, reported{0}, wrong{0}, hangs{0}, kills_done{0}, retried_exact{0};
  std::mutex m;
  std::vector<std::string> wrong_cases;
};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// SIGKILL to `pid` only while it is still one of this test's wrappers (each has a directory
// beside the socket) or their shells. The pid comes from a status read a moment ago: the
// process may have ended since, and with the host's pids reused quickly under a busy suite,
// the number may now be another program's, another test's shell say. The pidfd pins the
// process that was checked.
bool kill_if_ours(pid_t pid, const std::string& sock) {
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return false;
  auto wrapper_of_ours = [&](pid_t p) {
    return p > 1 && cmdline_of(p).find("sbsh-wrapper --dir " + sock + ".d/") != std::string::npos;
  };
  bool ours = wrapper_of_ours(pid) || wrapper_of_ours(parent_of(pid));
  bool sent = ours && ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0) == 0;
  ::close(pidfd);
  return sent;
}

// Waits until `pid` has ended (it need not be this process's child).
bool gone_within(pid_t pid, std::chrono::milliseconds limit) {
  return wait_until([&] { return !pid_alive(pid); }, limit);
}

// The run's shared state, and each of its threads as a method.
class chaos_test : public daemon_test {
 protected:
  // A call that has not returned within this long is a hang.
  static constexpr int kHangMs = 60000;

  static int now_ms() {
    return static_cast<int>(
        std::chrono::duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count() % 1000000000);
  }

  // A connection to the sbshd that answers now; none is started.
  [[nodiscard]] result<client::connection> dial() const {
    client::connect_options o;
    o.socket_path = sock;
    o.autostart = false;
    return client::connection::connect(o);
  }

  // Worker k: commands whose output and exit code are known, in session "cK", until stopped.
  void worker(int k) {
    std::mt19937 rng(seed_ + static_cast<unsigned>(k));
    std::optional<client::connection> c;
    for (int n = 0; !stop_; ++n) {
      if (!c) {
        auto made = dial();
        if (!made) {
          std::this_thread::sleep_for(milliseconds(50));
          continue;
        }
        c.emplace(std::move(*made));
      }
      int code = static_cast<int>(rng() % 6);
      int shape = static_cast<int>(rng() % 3);
      std::string token = "tok-" + std::to_string(k) + "-" + std::to_string(n);
      client::exec_options o;
      o.session = "c" + std::to_string(k);
      o.timeout = seconds(30);
      // A builtin, an external command, and output made by a pipeline; each prints its token
      // and ends with a known status.
      if (shape == 0) o.command = "echo " + token + "; (exit " + std::to_string(code) + ")";
      else if (shape == 1)
        o.command = "sh -c 'sleep 0.0$1; echo $2' " + tag_ + " " + std::to_string(rng() % 10) + " " + token +
                    "; (exit " + std::to_string(code) + ")";
      else o.command = "printf '%s\\n' " + token + " | cat; (exit " + std::to_string(code) + ")";
      in_call_since_ms_[k] = now_ms();
      auto r = c->exec(o);
      in_call_since_ms_[k] = 0;
      if (!r) {  // the connection was lost: explicit
        ++t_.reported;
        c.reset();
        continue;
      }
      bool stopped = r->shell_restarted || !r->ran || r->timed_out || r->cancelled || !r->error.empty() ||
                     !r->exit_code.has_value();
      if (stopped) {
        ++t_.reported;
        continue;
      }
      if (r->exit_code == code && r->stdout_data == token + "\n") ++t_.exact;
      else
        wrong(o.command + " -> exit " + std::to_string(r->exit_code.value_or(-1)) + ", stdout '" + r->stdout_data +
              "', stderr '" + r->stderr_data + "'");
    }
  }

  // Background trees that ignore SIGTERM, started and killed in session "bg". A kill that
  // reports the process ended must leave nothing of it; a kill that fails says so (sbshd or
  // the wrapper was killed under it), and whatever is left ends with the session at the end.
  void killer() {
    for (int n = 0; !stop_; ++n) {
      auto c = dial();
      if (!c) {
        std::this_thread::sleep_for(milliseconds(50));
        continue;
      }
      std::string mark = tag_ + "-bg-" + std::to_string(n);
      client::start_options o;
      o.session = "bg";
      o.name = "b" + std::to_string(n);
      std::string ignoring = "sh -c 'trap \"\" TERM; sleep 300; :' " + mark;
      o.command = "trap '' TERM; " + ignoring + " & setsid " + ignoring + " & wait";
      in_call_since_ms_[kWorkers] = now_ms();
      auto started = c->start(o);
      bool both = started && wait_until([&] { return processes_with(mark).size() == 2; }, seconds(10));
      auto killed = started ? c->kill(o.name, SIGTERM) : started;
      in_call_since_ms_[kWorkers] = 0;
      if (!both || !killed || killed->state == "running") {
        ++t_.reported;
        continue;
      }
      auto left = processes_with(mark);
      if (left.empty()) ++t_.kills_done;
      else
        wrong("kill " + o.name + " returned (" + killed->state + ") with " + std::to_string(left.size()) +
              " of its processes left");
    }
  }

  // Kills until the deadline: a session's shell or wrapper, now and then sbshd itself
  // (restarted at once, as the next client would start it), and now and then sbshd and a
  // wrapper together, followed at once by a new client's command.
  void chaos() {
    std::mt19937 rng(seed_ ^ 0x5eedu);
    for (int n = 0; steady_clock::now() < deadline_; ++n) {
      std::this_thread::sleep_for(milliseconds(100 + rng() % 300));
      int action = static_cast<int>(rng() % 10);
      if (action == 0) {
        std::lock_guard<std::mutex> l(daemon_mutex_);
        kill_daemon();
        ++kills_[2];
        start_daemon();
        continue;
      }
      auto list = [&]() -> result<std::vector<client::session_status>> {
        auto c = dial();
        if (!c) return c.err();
        return c->sessions();
      }();
      if (!list || list->empty()) continue;
      const auto& s = (*list)[rng() % list->size()];
      if (action == 1) {
        kill_both_then_command(s, n, static_cast<int>(rng() % 6));
        continue;
      }
      auto victim = static_cast<pid_t>(action % 2 == 0 ? s.wrapper_pid : s.shell_pid);
      if (victim > 1 && kill_if_ours(victim, sock)) ++kills_[action % 2 == 0 ? 1 : 0];
    }
  }

  // Kills session `s`'s wrapper and sbshd at once; then a new client, with auto-start on as
  // the CLI has it, runs a command ending with `code` in that session. Its connection may
  // reach the dying sbshd; its request must reach a live one exactly once.
  void kill_both_then_command(const client::session_status& s, int n, int code) {
    std::lock_guard<std::mutex> l(daemon_mutex_);
    if (!kill_if_ours(static_cast<pid_t>(s.wrapper_pid), sock)) return;
    ::kill(daemon_pid, SIGKILL);
    ++kills_[3];
    std::string token = "fresh-" + std::to_string(n);
    client::connect_options o;
    o.socket_path = sock;
    o.daemon_path = bin("sbshd");
    o.wait_for_welcome = false;  // the hello and the request go out together, as the CLI sends them
    std::string outcome;
    if (auto fresh = client::connection::connect(o)) {
      client::exec_options e;
      e.session = s.name;
      e.timeout = seconds(30);
      e.command = "echo " + token + "; (exit " + std::to_string(code) + ")";
      auto r = fresh->exec(e);
      if (!r) outcome = "error: " + r.err().message;
      else if (r->exit_code != code || r->stdout_data != token + "\n")
        outcome = "exit " + std::to_string(r->exit_code.value_or(-1)) + ", stdout '" + r->stdout_data + "', error '" +
                  r->error + "'";
    } else {
      outcome = "cannot connect: " + fresh.err().message;
    }
    if (outcome.empty()) ++t_.retried_exact;
    else wrong("a new client's first command after sbshd was killed: " + outcome);
    // The sbshd that client started is not this test's child: end it, and start one that
    // is, for the rest of the run.
    int st;
    ::waitpid(daemon_pid, &st, 0);
    daemon_pid = -1;
    auto status = [&]() -> result<client::daemon_status> {
      auto c = dial();
      if (!c) return c.err();
      return c->status();
    }();
    if (status && status->pid > 0) {
      ::kill(static_cast<pid_t>(status->pid), SIGKILL);
      EXPECT_TRUE(gone_within(static_cast<pid_t>(status->pid), seconds(20)));
    }
    start_daemon();
  }

  void wrong(std::string what) {
    ++t_.wrong;
    std::lock_guard<std::mutex> l(t_.m);
    t_.wrong_cases.push_back(std::move(what));
  }

  // Every caller finishes its last call; one that cannot is hung (counted, and sbshd killed
  // so that its thread can be joined).
  void wait_for_callers() {
    auto hung = [&] {
      return std::ranges::any_of(in_call_since_ms_, [&](auto& v) {
        int since = v;
        return since != 0 && now_ms() - since > kHangMs;
      });
    };
    bool all_back =
        wait_until([&] { return hung() || std::ranges::all_of(in_call_since_ms_, [](auto& v) { return v == 0; }); },
                   milliseconds(kHangMs + 5000));
    if (!all_back || hung()) {
      t_.hangs = 1;
      kill_daemon();
    }
  }

  // The sessions still work, then end with sbshd, and nothing they started is left. Each
  // leaves a process in a session of its own (setsid); removing c0 ends its own.
  void check_nothing_left() {
    if (pid_alive(daemon_pid)) {
      for (int k = 0; k < kWorkers; ++k) {
        auto r =
            sbsh({"exec", "-s", "c" + std::to_string(k), "-t", "30s", "--",
                  "echo ok; setsid sh -c 'sleep 300; :' " + tag_ + "-" + std::to_string(k) + " >/dev/null 2>&1 &"});
        EXPECT_EQ(r.out, "ok\n") << r.err;
      }
      EXPECT_EQ(sbsh({"session", "rm", "c0"}).code, 0);
      EXPECT_TRUE(wait_until([&] { return processes_with(tag_ + "-0").empty(); }, seconds(5)));
    }
    std::vector<pid_t> wrappers;
    if (pid_alive(daemon_pid)) {
      auto list = conn().sessions();
      if (list)
        for (const auto& s : *list) wrappers.push_back(static_cast<pid_t>(s.wrapper_pid));
      stop_daemon();
    }
    EXPECT_TRUE(wait_until([&] { return processes_with(tag_).empty(); }, seconds(20))) << [&] {
      std::string left;
      for (pid_t p : processes_with(tag_))
        left += "\n  " + std::to_string(p) + " (parent " + std::to_string(parent_of(p)) + "): " + cmdline_of(p);
      return "left running:" + left;
    }();
    for (pid_t w : wrappers) EXPECT_TRUE(wait_until([&] { return !pid_alive(w); }, seconds(20))) << w;
    EXPECT_TRUE(processes_with(sock).empty());  // no wrapper of this test's sbshd at all
  }

  const seconds run_for_ = seconds(env_int("SBSH_CHAOS_SECONDS", 20));
  const unsigned seed_ = static_cast<unsigned>(env_int("SBSH_CHAOS_SEED", static_cast<int>(::time(nullptr))));
  // Every external process a command starts carries this in its command line.
  const std::string tag_ = "chaos-" + std::to_string(::getpid());
  const steady_clock::time_point deadline_ = steady_clock::now() + run_for_;
  std::atomic<bool> stop_{false};
  std::mutex daemon_mutex_;  // held while sbshd is being restarted
  tally t_;
  std::atomic<int> in_call_since_ms_[kWorkers + 1] = {};  // the workers', then the killer's
  int kills_[4] = {0, 0, 0, 0};                           // shells, wrappers, sbshd, sbshd and a wrapper together
};

TEST_F(chaos_test, KillingAtRandomNeverGivesAWrongResultHangsOrLeavesAProcess) {
  std::printf("chaos: %lld s, seed %u\n", static_cast<long long>(run_for_.count()), seed_);
  std::vector<std::thread> callers;
  callers.reserve(kWorkers + 1);
  for (int k = 0; k < kWorkers; ++k) callers.emplace_back([this, k] { worker(k); });
  callers.emplace_back([this] { killer(); });
  chaos();
  stop_ = true;
  wait_for_callers();
  for (auto& c : callers) c.join();

  std::printf(
      "chaos: %d exact, %d reported failures, %d wrong, %d hangs; %d trees killed whole; %d exact first commands "
      "after sbshd and a wrapper were killed together; killed %d shells, %d wrappers, %d sbshd, %d both\n",
      t_.exact.load(), t_.reported.load(), t_.wrong.load(), t_.hangs.load(), t_.kills_done.load(),
      t_.retried_exact.load(), kills_[0], kills_[1], kills_[2], kills_[3]);
  EXPECT_EQ(t_.wrong, 0);
  for (const auto& w : t_.wrong_cases) ADD_FAILURE() << "wrong result: " << w;
  EXPECT_EQ(t_.hangs, 0);
  EXPECT_GT(t_.exact, 0);
  EXPECT_GT(t_.kills_done, 0);
  check_nothing_left();
}

}  // namespace sbsh::test::chaos_tests
