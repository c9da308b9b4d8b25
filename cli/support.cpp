// What every subcommand uses: the one-line failure, the connection to sbshd (local, over
// ssh or through a dial command), and the forwarding of signals to a running command.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "cli/cli.h"
#include "client/json.h"
#include "ipc/fd.h"
#include "ipc/protocol.h"

namespace sbsh::cli {

namespace {
int g_signal_pipe[2] = {-1, -1};
// SIGINT and SIGQUIT go to the command, as a terminal sends them; SIGTERM and SIGHUP ask sbsh
// to end, so the whole command stops (the rest of its text included) as on a timeout: SIGTERM
// first, then SIGKILL after the grace period (exec_options::signal_fd). A hangup is not passed
// on as SIGHUP: a command that ignores or traps it (nohup, a daemon reloading) would go on.
void queue_signal(int sig) {
  auto b = static_cast<unsigned char>(sig == SIGTERM || sig == SIGHUP ? 128 + SIGTERM : sig);
  ssize_t r = ::write(g_signal_pipe[1], &b, 1);
  (void)r;
}
}  // namespace

int forward_signals_to_command() {
  if (g_signal_pipe[0] < 0 && ::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
  struct sigaction sa {};
  sa.sa_handler = queue_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::sigaction(s, &sa, nullptr);
  // Signals that arrived while no command ran (attach's prompt) are not for the next one.
  unsigned char stale[64];
  while (::read(g_signal_pipe[0], stale, sizeof stale) > 0) {
  }
  return g_signal_pipe[0];
}

std::string check_session_name(std::string_view, const std::string& value) {
  if (!value.empty()) return "";  // sbshd checks the rest, for every client
  return fmt::format(
      "invalid session name '': a name is 1 to {} characters, letters, digits, '.', '_' or '-', and starts with a "
      "letter or digit ({})",
      ipc::kSessionNameMax, ipc::kSessionNamePattern);
}

std::string check_assignment(std::string_view option, const std::string& value) {
  if (value.find('=') != std::string::npos && value.front() != '=') return "";
  return fmt::format("{} takes NAME=VALUE, not '{}'", option, value);
}

void add_session_option(command_line& cl, std::string& into) {
  cl.option("-s,--session", "SESSION", "session to use (default: default); created on first use", into,
            check_session_name);
}

namespace {
failure_format g_failure_format = failure_format::text;
}  // namespace

void report_failures_as(failure_format f) { g_failure_format = f; }

int fail(std::string_view message, std::string_view code) {
  std::string line = fmt::format("sbsh: {}\n", message);
  std::fwrite(line.data(), 1, line.size(), stderr);
  if (g_failure_format != failure_format::text) {
    client::json_value j;
    if (g_failure_format == failure_format::jsonl) j["type"] = "error";
    j["error"] = message;
    j["code"] = code.empty() ? "error" : code;
    std::string obj = client::dump_json(j) + "\n";
    std::fwrite(obj.data(), 1, obj.size(), stdout);
    std::fflush(stdout);
  }
  return kExitFailure;
}

int fail(const error& e) { return fail(e.message, e.code); }

void warn_state_lost(std::string_view session, const client::exec_result& r) {
  if (!r.state_lost) return;
  std::string line =
      fmt::format("sbsh: warning: session '{}' lost its state before this command ({}); it ran in a new shell\n",
                  session.empty() ? "default" : session, r.state_lost_reason);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

void explain_result(std::string_view session, std::chrono::milliseconds timeout, const client::exec_result& r) {
  if (r.oom_killed)
    fail(fmt::format("the kernel killed a process of session '{}' for going over the session's memory limit "
                     "(session show {} gives it)",
                     session.empty() ? "default" : session, session.empty() ? "default" : session));
  if (r.shell_restarted) {
    fail(r.error.empty() ? fmt::format("the shell of session '{}' ended while running the command; the "
                                       "session's state (directory, variables, functions) was lost",
                                       session.empty() ? "default" : session)
                         : r.error);
  } else if (!r.exit_code && !r.error.empty()) {
    fail(r.error);
  }
  if (r.timed_out && timeout.count() == 0)  // no -t: the session's default (session create --timeout)
    fail(fmt::format("timed out after the default timeout of session '{}'; the command was stopped",
                     session.empty() ? "default" : session));
  else if (r.timed_out) fail(fmt::format("timed out after {} ms; the command was stopped", timeout.count()));
  if (r.cancelled && r.ran && !r.timed_out && r.exit_code == 0)
    fail(fmt::format("the command was stopped (cancelled) and exited with status 0 of its own; sbsh exits {}",
                     kExitCancelled));
}

int exec_exit_status(const client::exec_result& r) {
  if (r.running) return kExitDetached;
  if (r.timed_out) return kExitTimeout;
  // A stopped command never reads as a success: one that trapped the signal and exited 0.
  if (r.cancelled && r.ran && r.exit_code.value_or(0) == 0) return kExitCancelled;
  if (r.exit_code) return *r.exit_code;
  return kExitFailure;
}

void print_exec_json(std::string_view session, std::string_view command, const client::exec_result& r) {
  client::json_value j;
  client::add_exec_result(j, session, command, r);
  std::string s = client::dump_json(j) + "\n";
  std::fwrite(s.data(), 1, s.size(), stdout);
}

result<client::connection> connect(const global_opts& g, bool autostart) {
  client::connect_options o;
  o.wait_for_welcome = false;  // each command makes one request: it follows the hello at once
  if (!g.dial.empty()) {
    o.dial_command = {"/bin/sh", "-c", g.dial};
  } else if (!g.host.empty()) {
    auto argv = client::host_dial_command(g.host, g.socket, autostart && g.autostart);
    if (!argv) return argv.err();
    o.dial_command = std::move(*argv);
  } else {
    o.socket_path = g.socket;
    o.autostart = autostart && g.autostart;
  }
  return client::connection::connect(o);
}

result<std::string> local_bytes(std::string_view option, const std::string& path, uint64_t max_bytes,
                                std::string_view holds) {
  auto cannot = [&](std::string_view why) {
    return make_error(ipc::errc::usage, fmt::format("{} {}: cannot read it: {}", option, path, why));
  };
  unique_fd fd(path == "-" ? ::fcntl(0, F_DUPFD_CLOEXEC, 3) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return cannot(std::strerror(errno));
  std::string bytes;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return cannot(std::strerror(errno));
    if (n == 0) return bytes;
    bytes.append(buf, static_cast<size_t>(n));
    if (bytes.size() > max_bytes) return cannot(fmt::format("it is larger than the {} MiB {}", max_bytes >> 20, holds));
  }
}

}  // namespace sbsh::cli
