// Shared by the benchmarks: their options, a private sbshd, timing, process spawning,
// statistics.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "sbsh/client.h"

namespace sbsh::bench {

using clock_type = std::chrono::steady_clock;

// Reads a benchmark's options as sbsh reads its own. Returns -1 to go on, or the status to
// exit with: 0 after --help, 2 after a refusal (one line on stderr, "PROGRAM: ...").
inline int parse_or_exit(cli::command_line& cl, const char* program, int argc, char** argv) {
  auto parsed = cl.parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed) {
    std::fprintf(stderr, "%s: %s\n", program, parsed.err().message.c_str());
    return 2;
  }
  return *parsed == cli::command_line::outcome::help_printed ? 0 : -1;
}

inline double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

inline std::string bin_dir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  buf[n > 0 ? n : 0] = '\0';
  std::string s(buf);
  return s.substr(0, s.rfind('/'));
}

// execv's and posix_spawn's argument array: the words of `argv`, which must outlive it, then
// a null.
inline std::vector<char*> exec_argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  out.reserve(argv.size() + 1);
  for (const auto& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

struct stats {
  double median = 0, p90 = 0;
};
inline stats summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return {};
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 9 / 10)]};
}

// Runs argv with stdin /dev/null and stdout/stderr to /dev/null (or `out_fd`); returns the status.
inline int run_quiet(const std::vector<std::string>& argv, int out_fd = -1) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (out_fd >= 0) posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  else posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  auto args = exec_argv(argv);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// A private sbshd in a temporary directory, shut down and removed at the end.
class private_daemon {
 public:
  explicit private_daemon(const char* tag, const std::vector<std::string>& extra_args = {}) {
    // In $TMPDIR when set (a tmpfs takes a noisy disk out of the figures), else /tmp.
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/sbsh-bench-" + tag + ".XXXXXX";
    dir_ = ::mkdtemp(tmpl.data());
    ::mkdir((dir_ + "/run").c_str(), 0700);
    socket_ = dir_ + "/run/sbshd.sock";
    std::string exe = bin_dir() + "/sbshd", state = dir_ + "/state";
    std::vector<std::string> args{exe, "--socket", socket_, "--state-dir", state, "--foreground", "--log-level", "error"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    auto argv = exec_argv(args);
    if (posix_spawn(&pid_, exe.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
      std::perror("sbshd");
      std::exit(1);
    }
    for (int i = 0; i < 500; ++i) {
      struct stat st{};
      if (::stat(socket_.c_str(), &st) == 0) break;
      ::usleep(10000);
    }
  }
  ~private_daemon() {
    run_quiet({bin_dir() + "/sbsh", "--socket", socket_, "shutdown"});
    int st;
    ::waitpid(pid_, &st, 0);
    std::string rm = "rm -rf '" + dir_ + "'";
    if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir_.c_str());
  }
  private_daemon(const private_daemon&) = delete;
  private_daemon& operator=(const private_daemon&) = delete;

  [[nodiscard]] const std::string& socket() const { return socket_; }
  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] client::connection connect() const {
    client::connect_options o;
    o.socket_path = socket_;
    o.autostart = false;
    auto c = client::connection::connect(o);
    if (!c) {
      std::fprintf(stderr, "connect: %s\n", c.err().message.c_str());
      std::exit(1);
    }
    return std::move(*c);
  }

 private:
  std::string dir_, socket_;
  pid_t pid_ = -1;
};

}  // namespace sbsh::bench
