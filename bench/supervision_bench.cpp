// Supervision figures: how fast a killed shell is replaced, and what an idle session costs.
//
//   restart   time from `kill -9` of a session's bash to the next exec answered, with the
//             default policy (restart at once); goal <= 10 ms.
//   memory    1,000 idle sessions: each wrapper's PSS plus the daemon's growth, per session,
//             next to the PSS of the bash each holds; goal: overhead <= 150 kB per session.
//
// Usage: sbsh-supervision-bench [--quick] [--sessions N]
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "sbsh/client.h"

extern char** environ;

namespace {

using clock_type = std::chrono::steady_clock;

std::string bin_dir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  buf[n > 0 ? n : 0] = '\0';
  std::string s(buf);
  return s.substr(0, s.rfind('/'));
}

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

struct daemon_proc {
  pid_t pid = -1;
  std::string socket;
};

daemon_proc start_daemon(const std::string& dir) {
  daemon_proc d;
  d.socket = dir + "/run/sbshd.sock";
  ::mkdir((dir + "/run").c_str(), 0700);
  std::string exe = bin_dir() + "/sbshd", state = dir + "/state";
  std::vector<std::string> args{exe, "--socket", d.socket, "--state-dir", state, "--foreground", "--log-level", "warn"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (posix_spawn(&d.pid, exe.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
    std::perror("spawn sbshd");
    std::exit(1);
  }
  for (int i = 0; i < 400; ++i) {
    struct stat st{};
    if (::stat(d.socket.c_str(), &st) == 0) break;
    ::usleep(10000);
  }
  return d;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

sbsh::client::connection connect_or_die(const std::string& sock) {
  sbsh::client::connect_options o;
  o.socket_path = sock;
  o.autostart = false;
  auto c = sbsh::client::connection::connect(o);
  if (!c) {
    std::fprintf(stderr, "connect: %s\n", c.err().message.c_str());
    std::exit(1);
  }
  return std::move(*c);
}

long shell_pid(sbsh::client::connection& c, const std::string& name) {
  auto d = c.show_session(name);
  return d ? d->status.shell_pid : 0;
}

void bench_restart(sbsh::client::connection& c, int rounds) {
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
    ms.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
  }
  double med = median(ms);
  std::printf("%-34s %10.2f ms   goal <= 10 ms   %s\n", "kill -9 bash -> next exec answered", med,
              med <= 10 ? "met" : "NOT met");
}

void bench_memory(sbsh::client::connection& c, pid_t daemon, int sessions) {
  long daemon_before = pss_kb(daemon);
  sbsh::client::exec_options o;
  o.command = "true";
  for (int i = 0; i < sessions; ++i) {
    o.session = "idle-" + std::to_string(i);
    auto r = c.exec(o);
    if (!r || r->exit_code != 0) {
      std::fprintf(stderr, "session %d failed: %s\n", i, r ? r->error.c_str() : r.err().message.c_str());
      return;
    }
  }
  auto st = c.status();
  if (!st) return;
  long wrappers = 0, shells = 0, n = 0;
  for (const auto& s : st->sessions) {
    if (s.name.rfind("idle-", 0) != 0) continue;
    wrappers += pss_kb(s.wrapper_pid);
    shells += pss_kb(s.shell_pid);
    ++n;
  }
  long daemon_growth = pss_kb(daemon) - daemon_before;
  double overhead = n > 0 ? static_cast<double>(wrappers + daemon_growth) / n : 0;
  std::printf("%-34s %10.1f kB   (wrapper %.1f kB + daemon %.1f kB)   bash itself %.1f kB   goal <= 150 kB   %s\n",
              ("overhead per idle session (" + std::to_string(n) + ")").c_str(), overhead,
              n ? static_cast<double>(wrappers) / n : 0, n ? static_cast<double>(daemon_growth) / n : 0,
              n ? static_cast<double>(shells) / n : 0, overhead <= 150 ? "met" : "NOT met");
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int sessions = 1000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else if (std::strcmp(argv[i], "--sessions") == 0 && i + 1 < argc) sessions = std::atoi(argv[++i]);
  }
  if (quick) sessions = std::min(sessions, 100);
  char tmpl[] = "/tmp/sbsh-sup-bench.XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  auto d = start_daemon(dir);
  {
    auto c = connect_or_die(d.socket);
    bench_restart(c, quick ? 10 : 50);
    bench_memory(c, d.pid, sessions);
    (void)c.shutdown();
  }
  int st;
  ::waitpid(d.pid, &st, 0);
  std::string rm = "rm -rf " + dir;
  return std::system(rm.c_str()) == 0 ? 0 : 1;
}
