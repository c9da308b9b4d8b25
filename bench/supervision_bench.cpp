// Supervision figures: how fast a killed shell is replaced, what an idle session costs, and
// how many sessions one sbshd holds and ends.
//
//   restart      time from `kill -9` of a session's bash to the next exec answered, with the
//                default policy (restart at once), alone and with 1,500 unrelated processes on
//                the host; goal <= 5 ms.
//   descriptors  N idle sessions (--sessions, default 1000; the figure is 10,000): the
//                descriptors sbshd holds per session (/proc/PID/fd), and the sessions its
//                descriptor limit holds (sbsh status); sessions it refuses are not counted.
//   memory       the time to create each (with its first command), each wrapper's PSS plus
//                the growth of the daemon's and its fork server's, per session, next to the PSS
//                of the bash each holds; goal: overhead <= 50 kB per session.
//   shutdown     `sbsh shutdown` with all of them: until sbshd has exited and every wrapper and
//                bash is gone; goal < 5 s.
//   definitions  (--definitions alone) N sessions created by one client: the first and the
//                last 100 creations, the whole (goal < 60 s for 10,000), and `session ls` of
//                them all (goal < 100 ms).
//
// Usage: sbsh-supervision-bench [--quick] [--sessions N] [--definitions]
#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"

namespace {

using namespace sbsh::bench;

// kB of proportional set size of a process, from /proc/PID/smaps_rollup.
long pss_kb(long pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string key;
  long v;
  while (f >> key) {
    if (key == "Pss:") {
      f >> v;
      return v;
    }
    f.ignore(1 << 20, '\n');
  }
  return -1;
}

long shell_pid(sbsh::client::connection& c, const std::string& name) {
  auto d = c.show_session(name);
  return d ? d->status.shell_pid : 0;
}

double restart_ms(sbsh::client::connection& c, int rounds) {
  sbsh::client::exec_options o;
  o.session = "restart";
  o.command = "true";
  (void)c.exec(o);
  std::vector<double> ms;
  for (int i = 0; i < rounds; ++i) {
    long pid = shell_pid(c, "restart");
    if (pid <= 0) continue;
    auto t0 = clock_type::now();
    ::kill(static_cast<pid_t>(pid), SIGKILL);
    // The first exec may still reach the dying shell and come back shell_restarted: retry
    // until one is answered by the new shell.
    for (;;) {
      auto r = c.exec(o);
      if (r && r->exit_code == 0 && !r->shell_restarted) break;
    }
    ms.push_back(ms_since(t0));
  }
  return summarize(ms).median;
}

// The same with many unrelated processes on the host: what a restart costs must not grow
// with them (no scan of /proc when nothing of the session is left).
void bench_restart(sbsh::client::connection& c, int rounds, int crowd) {
  double alone = restart_ms(c, rounds);
  std::vector<pid_t> others;
  for (int i = 0; i < crowd; ++i) {
    pid_t p = ::fork();
    if (p == 0) {
      ::pause();
      ::_exit(0);
    }
    if (p > 0) others.push_back(p);
  }
  double crowded = restart_ms(c, rounds);
  for (pid_t p : others) ::kill(p, SIGKILL);
  for (pid_t p : others) ::waitpid(p, nullptr, 0);
  std::printf("%-34s %10.2f ms   goal <= 5 ms    %s\n", "kill -9 bash -> next exec answered", alone,
              alone <= 5 ? "met" : "NOT met");
  std::printf("%-34s %10.2f ms   goal <= 5 ms    %s\n",
              (" ... with " + std::to_string(others.size()) + " other processes").c_str(), crowded,
              crowded <= 5 ? "met" : "NOT met");
}

// Entries of /proc/PID/fd: the descriptors the process holds.
size_t fd_count(pid_t pid) {
  size_t n = 0;
  if (DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str())) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
  }
  return n;
}

// Sessions idle-0 ... idle-N-1, each made by its first exec. Their environment is a tiny one
// (PATH, HOME), not this process's: sbshd bounds what all definitions keep together, and the
// figures are about what a session costs, not what its variables do. Returns how many were
// made: when sbshd refuses one (its descriptor limit, say), the figures are for those.
int make_idle_sessions(sbsh::client::connection& c, int sessions) {
  sbsh::client::exec_options o;
  o.command = "true";
  const char* home = std::getenv("HOME");
  o.session_env = std::vector<std::string>{"PATH=/usr/local/bin:/usr/bin:/bin",
                                           std::string("HOME=") + (home != nullptr ? home : "/")};
  for (int i = 0; i < sessions; ++i) {
    o.session = "idle-" + std::to_string(i);
    auto r = c.exec(o);
    if (!r || r->exit_code != 0) {
      std::printf("session %d refused: %s\n", i, r ? r->error.c_str() : r.err().message.c_str());
      return i;
    }
  }
  return sessions;
}

// What sbshd holds per session, from /proc/PID/fd before and after, and what it says it
// supports (sbsh status).
void report_descriptors(sbsh::client::connection& c, pid_t daemon, size_t before, int sessions) {
  size_t after = fd_count(daemon);
  double per = sessions > 0 ? static_cast<double>(after - std::min(after, before)) / sessions : 0;
  auto st = c.status();
  unsigned long long limit = st ? st->descriptor_limit : 0, supported = st ? st->sessions_supported : 0;
  std::printf("%-34s %10.2f       (%zu in all; limit %llu, so at most %llu sessions; goal: at most 1, or the "
              "limit raised)\n",
              ("descriptors per session (" + std::to_string(sessions) + ")").c_str(), per, after, limit, supported);
}

// The PSS of sbshd's fork server (daemon/fork_server.h), which starts the wrappers: part of
// what sessions cost, though it holds nothing of any; 0 when none runs.
long fork_server_pss_kb(pid_t daemon) {
  static const std::string kServer("sbsh-wrapper\0--fork-server\0", 27);
  long kb = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "cmdline");
    std::string args((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::ifstream st(e.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
    size_t paren = stat.rfind(')');
    long ppid = 0;
    if (paren != std::string::npos) std::sscanf(stat.c_str() + paren + 1, " %*c %ld", &ppid);
    if (args == kServer && ppid == daemon) kb += std::max(0L, pss_kb(std::stol(name)));
  }
  return kb;
}

void bench_memory(sbsh::client::connection& c, pid_t daemon, int sessions) {
  long daemon_before = pss_kb(daemon) + fork_server_pss_kb(daemon);
  size_t fds_before = fd_count(daemon);
  auto t0 = clock_type::now();
  sessions = make_idle_sessions(c, sessions);
  if (sessions == 0) return;
  std::printf("%-34s %10.2f ms   (a session created, its wrapper and bash started, a first command run)\n",
              "creation of an idle session", ms_since(t0) / sessions);
  report_descriptors(c, daemon, fds_before, sessions);
  auto st = c.status();
  if (!st) return;
  long wrappers = 0, shells = 0, n = 0;
  for (const auto& s : st->sessions) {
    if (s.name.rfind("idle-", 0) != 0) continue;
    wrappers += pss_kb(s.wrapper_pid);
    shells += pss_kb(s.shell_pid);
    ++n;
  }
  // The fork server counts as the daemon's: both are there for all sessions.
  long daemon_growth = pss_kb(daemon) + fork_server_pss_kb(daemon) - daemon_before;
  double overhead = n > 0 ? static_cast<double>(wrappers + daemon_growth) / n : 0;
  std::printf("%-34s %10.1f kB   (wrapper %.1f kB + daemon %.1f kB)   bash itself %.1f kB   goal <= 50 kB   %s\n",
              ("overhead per idle session (" + std::to_string(n) + ")").c_str(), overhead,
              n ? static_cast<double>(wrappers) / n : 0, n ? static_cast<double>(daemon_growth) / n : 0,
              n ? static_cast<double>(shells) / n : 0, overhead <= 50 ? "met" : "NOT met");
}

// The start time of a process (field 22 of /proc/PID/stat, in clock ticks), so that a pid
// reused meanwhile is not taken for the process; 0 when it is gone.
unsigned long long started_ticks(long pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream rest(text.substr(paren + 2));
  std::string word;
  for (int field = 3; field < 22 && rest >> word; ++field) {
  }
  unsigned long long ticks = 0;
  rest >> ticks;
  return ticks;
}

// `sbsh shutdown` with every session still there: the time until sbshd has exited, and until
// every wrapper and bash it ran has gone (each checked by pid and start time).
void bench_shutdown(sbsh::client::connection& c, pid_t daemon) {
  auto st = c.status();
  if (!st) return;
  std::vector<std::pair<long, unsigned long long>> procs;
  for (const auto& s : st->sessions)
    for (long pid : {static_cast<long>(s.wrapper_pid), static_cast<long>(s.shell_pid)})
      if (pid > 0) procs.emplace_back(pid, started_ticks(pid));
  auto t0 = clock_type::now();
  if (auto r = c.shutdown(); !r) std::fprintf(stderr, "shutdown: %s\n", r.err().message.c_str());
  int wst = 0;
  ::waitpid(daemon, &wst, 0);
  double exited = ms_since(t0);
  size_t left = procs.size();
  while (left > 0 && ms_since(t0) < 60000) {
    left = static_cast<size_t>(std::ranges::count_if(procs, [](const auto& p) {
      unsigned long long now = started_ticks(p.first);
      return now != 0 && now == p.second;
    }));
    if (left > 0) ::usleep(10000);
  }
  double gone = ms_since(t0);
  std::printf("%-34s %10.2f s    (sbshd exited after %.2f s; %zu processes, %zu left)   goal < 5 s   %s\n",
              ("shutdown of " + std::to_string(st->sessions.size()) + " sessions").c_str(), gone / 1000,
              exited / 1000, procs.size(), left, left == 0 && gone < 5000 ? "met" : "NOT met");
}

// CPU time (ms) all threads of process `pid` have run, from the scheduler's own counts.
double process_cpu_ms(pid_t pid) {
  uint64_t ns = 0;
  std::error_code ec;
  for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream f(t.path() / "schedstat");
    uint64_t v = 0;
    if (f >> v) ns += v;
  }
  return static_cast<double>(ns) / 1e6;
}

// CPU time (ms) of this process's children that have been waited for.
double children_cpu_ms() {
  rusage ru{};
  ::getrusage(RUSAGE_CHILDREN, &ru);
  return (static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3) +
         (static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3);
}

// The session table at N sessions: N sessions created by one client (its environment, 8
// requests at a time on 8 connections, as a client creating many would), the time of each of
// the first and the last 100 creations, the whole, and `session ls` of them all, end to end
// through the CLI. A creation costs the same at the Nth session as at the first: it writes
// the session's own small file, never the whole table.
void bench_definitions(const private_daemon& d, int sessions) {
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) environment.emplace_back(*e);
  std::vector<double> ms(static_cast<size_t>(sessions), 0);
  std::atomic<int> next{0}, done{0};
  // sbshd's CPU time when no, 100, N - 100 and N creations are done: what one costs sbshd
  // itself at the start and at the end, whatever else the machine runs.
  int edge = std::min(100, sessions);
  std::vector<double> cpu(4, 0);
  cpu[0] = process_cpu_ms(d.pid());
  std::atomic<bool> failed{false};
  auto t0 = clock_type::now();
  std::vector<std::thread> workers;
  workers.reserve(8);
  for (int w = 0; w < 8; ++w)
    workers.emplace_back([&] {
      auto c = d.connect();
      sbsh::session_spec spec;
      spec.cwd = d.dir();
      spec.environment = environment;
      for (int i = next++; i < sessions && !failed; i = next++) {
        spec.name = "def-" + std::to_string(i);
        auto t = clock_type::now();
        auto made = c.create_session(spec);
        ms[static_cast<size_t>(i)] = ms_since(t);
        int finished = ++done;
        if (finished == edge) cpu[1] = process_cpu_ms(d.pid());
        if (finished == sessions - edge) cpu[2] = process_cpu_ms(d.pid());
        if (!made) {
          std::fprintf(stderr, "session %d: %s\n", i, made.err().message.c_str());
          failed = true;
        }
      }
    });
  for (auto& t : workers) t.join();
  cpu[3] = process_cpu_ms(d.pid());
  double total_s = ms_since(t0) / 1000;
  if (failed) return;
  auto first = summarize({ms.begin(), ms.begin() + edge});
  auto last = summarize({ms.end() - edge, ms.end()});
  std::printf("%-34s %10.1f s    goal < 60 s     %s\n", ("create " + std::to_string(sessions) + " sessions").c_str(),
              total_s, total_s < 60 ? "met" : "NOT met");
  std::printf("%-34s %10.2f ms   p90 %.2f ms   sbshd's CPU %.2f ms each\n", " ... each of the first 100",
              first.median, first.p90, (cpu[1] - cpu[0]) / edge);
  std::printf("%-34s %10.2f ms   p90 %.2f ms   sbshd's CPU %.2f ms each\n", " ... each of the last 100",
              last.median, last.p90, (cpu[3] - cpu[2]) / edge);
  for (const char* json : {"", "--json"}) {
    std::vector<std::string> argv{bin_dir() + "/sbsh", "--socket", d.socket(), "session", "ls"};
    if (*json != '\0') argv.emplace_back(json);
    std::vector<double> ls;
    double daemon_cpu = process_cpu_ms(d.pid()), cli_cpu = children_cpu_ms();
    for (int i = 0; i < 5; ++i) {
      auto t = clock_type::now();
      if (run_quiet(argv) != 0) std::fprintf(stderr, "sbsh session ls %s failed\n", json);
      ls.push_back(ms_since(t));
    }
    daemon_cpu = (process_cpu_ms(d.pid()) - daemon_cpu) / 5;
    cli_cpu = (children_cpu_ms() - cli_cpu) / 5;
    double median = summarize(ls).median;
    std::printf("%-34s %10.2f ms   goal < 100 ms   %s   (CPU: sbshd %.1f ms, sbsh %.1f ms)\n",
                (std::string("sbsh session ls ") + json).c_str(), median, median < 100 ? "met" : "NOT met",
                daemon_cpu, cli_cpu);
  }
}

}  // namespace

static int unguarded_main(int argc, char** argv) {
  bool quick = false, definitions = false;
  unsigned sessions = 1000;
  sbsh::cli::command_line cl("sbsh-supervision-bench", "");
  cl.describe("Measures how fast a killed shell is replaced and what an idle session costs (docs/benchmarks.md).");
  cl.flag("--quick", "fewer restarts, and at most 100 sessions", quick);
  cl.number("--sessions", "N", "idle sessions for the memory figure (default 1000)", sessions, "a number of sessions",
            1, 100000);
  cl.flag("--definitions", "only the session table's figures: create --sessions N sessions from one client, then list "
          "them", definitions);
  if (int done = parse_or_exit(cl, "sbsh-supervision-bench", argc, argv); done >= 0) return done;
  if (quick) sessions = std::min(sessions, 100u);
  private_daemon d("supervision");
  if (definitions) {
    bench_definitions(d, static_cast<int>(sessions));
    return 0;
  }
  auto c = d.connect();
  bench_restart(c, quick ? 10 : 50, 1500);
  bench_memory(c, d.pid(), static_cast<int>(sessions));
  bench_shutdown(c, d.pid());
  return 0;
}

// Nothing is thrown on purpose; should something be, say what instead of dumping core.
int main(int argc, char** argv) {
  try {
    return unguarded_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "supervision-bench: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "supervision-bench: internal error\n");
  }
  return 1;
}
