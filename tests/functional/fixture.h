// Functional-test fixture: a real sbshd on a private socket in a private XDG_RUNTIME_DIR,
// HOME and state directory per test, and helpers to run the real CLI and check real effects.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sbsh/client.h"

namespace sbsh::test {

struct run_result {
  int code = -1;
  std::string out, err;
};

std::string bin(const std::string& name);       // build/bin/NAME
std::string helper();                           // the test helper binary
bool pid_alive(pid_t pid);                      // exists and is not a zombie
size_t open_fds(pid_t pid);                     // entries of /proc/PID/fd
// The text of /proc/PID/NAME, "" when the process is gone. Every read of a process's /proc
// files goes through here: a process that ends while it is read makes libstdc++'s streams
// throw.
std::string proc_file(pid_t pid, const std::string& name);
struct proc_stat {  // from /proc/PID/stat
  std::string comm;
  char state = '?';  // 'R', 'S', 'Z', ...
  pid_t ppid = 0;
};
std::optional<proc_stat> stat_of(pid_t pid);        // none when it is gone
std::vector<pid_t> all_pids();                      // every process /proc lists now
std::vector<pid_t> fork_servers_of(pid_t daemon);   // the fork servers sbshd runs now
long status_kb(pid_t pid, const std::string& key);  // VmRSS, VmHWM, ... of /proc/PID/status; -1 when gone
std::string cmdline_of(pid_t pid);              // its words joined by spaces; "" when it is gone
pid_t parent_of(pid_t pid);                     // 0 when it is gone
// Live processes other than this one whose command line (words joined by spaces) holds
// `needle`, is exactly `cmdline`, or matches.
std::vector<pid_t> processes_with(const std::string& needle);
std::vector<pid_t> processes_running(const std::string& cmdline);
std::vector<pid_t> processes_where(const std::function<bool(const std::string&)>& match);
bool has_child(pid_t parent, const std::string& comm);  // a live child with that name
pid_t child_pid(pid_t parent, const std::string& comm);  // its pid, or 0 when there is none
bool wait_until(const std::function<bool()>& cond, std::chrono::milliseconds limit);
// Runs argv with the given stdin (none: /dev/null), capturing stdout and stderr exactly.
run_result run(const std::vector<std::string>& argv, const std::string* stdin_data = nullptr,
               std::chrono::seconds limit = std::chrono::seconds(120));
std::string shell_quote(const std::string& s);
// The directory of sbsh, sbshd and sbsh-wrapper (with the builtin where the wrapper looks for
// it), where another user may run them: the build's own when every directory above it lets
// others through, else copies made beneath `under` (which others may enter).
std::string programs_for_others(const std::string& under);
// The sbsh of uid 65534 (nobody), which root's tests run as another user would: its HOME and
// XDG_RUNTIME_DIR beneath `under` (made enterable by others), its own autostarted sbshd.
struct nobodys_sbsh {
  explicit nobodys_sbsh(const std::string& under);
  std::string home, run_dir, programs;
  run_result sbsh(const std::vector<std::string>& args) const;  // the CLI, as nobody
  [[nodiscard]] std::string socket() const { return run_dir + "/sbsh/sbshd.sock"; }
};
// Writes at `path` the wheel of a pure-Python package "demo" 1.0 (what pip installs offline).
run_result make_demo_wheel(const std::string& path);
// execv's and posix_spawn's argument array: the words of `argv`, which must outlive it, then
// a null.
std::vector<char*> exec_argv(const std::vector<std::string>& argv);
// A blocking connection to the socket at `path` that has sent nothing (no hello), with a
// 5 s receive timeout; -1 when nothing listens.
int raw_connect(const std::string& path);
std::string trim(std::string s);  // without trailing newlines and spaces
// The names a --help lists under "Commands:" (sbsh's verbs, or a verb's subcommands).
std::vector<std::string> commands_in_help(const std::string& help);
// The bytes of the file at `path`: what could be read, "" when it cannot be opened.
std::string read_file(const std::string& path);
// What can be read from `fd` until end-of-file (or an error).
std::string read_all(int fd);

class daemon_test : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Extra sbshd arguments, for tests that set them before start_daemon().
  std::vector<std::string> daemon_args;
  std::string daemon_log_level = "warn";  // sbshd's --log-level
  // A command line that start_daemon() puts before sbshd's and that ends by exec'ing it
  // (sbshd keeps its pid), for tests that start sbshd as a service manager would.
  std::vector<std::string> daemon_prefix;
  bool start_in_setup = true;
  void start_daemon();
  void stop_daemon();  // sbsh shutdown, then wait for the pid
  void kill_daemon();  // SIGKILL, as a crash would

  run_result sbsh(const std::vector<std::string>& args, const std::string* stdin_data = nullptr,
                  std::chrono::seconds limit = std::chrono::seconds(120));
  run_result exec(const std::string& session, const std::string& command);
  client::connection conn();
  // Runs `command` in `session` through the library and cancels it (client::canceller)
  // `after` it was sent.
  result<client::exec_result> exec_cancelled_after(const std::string& session, const std::string& command,
                                                   std::chrono::milliseconds after);
  client::session_status session_status(const std::string& name);
  // The session's status once it knows its shell's and wrapper's pids (a command's result
  // can arrive before the wrapper's report of them); waits up to 20 s.
  client::session_status session_pids(const std::string& name);
  // The session as `session ls --json` lists it; null when it is not listed.
  nlohmann::json listed(const std::string& name);
  // Starts `sleep SECONDS` in `session` in a process session of its own (setsid), as a
  // command that escapes its shell's would; returns its pid (0 when it did not start).
  pid_t start_outside_session(const std::string& session, int seconds);

  std::string dir, sock, state;
  pid_t daemon_pid = -1;
};

// A session "ws" whose root is dir/root, for file requests; file() runs `sbsh file VERB -s ws`.
class root_session_test : public daemon_test {
 protected:
  void SetUp() override;
  run_result file(std::vector<std::string> args, const std::string* in = nullptr);
  std::string root;
};

// Writes `bytes` at `path`, making its directories.
void put(const std::string& path, const std::string& bytes);

}  // namespace sbsh::test
