// sbsh start, logs, kill, wait: background processes; and their part of sbsh ps.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "client/cli/cli.h"
#include "client/json.h"
#include "ipc/text.h"

namespace sbsh::cli {

namespace {

std::string signame(std::optional<int> sig) { return sig ? ipc::signal_name(*sig) : ""; }

void write_all(int fd, std::string_view d) {
  while (!d.empty()) {
    ssize_t w = ::write(fd, d.data(), d.size());
    if (w <= 0) return;
    d.remove_prefix(static_cast<size_t>(w));
  }
}

// The exit status a process's end maps to, as for exec: its code, 128+N for signal N.
int proc_exit_status(const client::proc_info& p) {
  if (p.state == "exited" && p.exit_code) return *p.exit_code;
  if (p.state == "killed") return p.signal ? 128 + *p.signal : kExitFailure;
  return kExitFailure;
}

}  // namespace

void print_proc_table(const std::vector<client::proc_info>& v) {
  if (v.empty()) return;
  std::printf("\n%-5s %-14s %-12s %8s %-8s %-10s %-20s %s\n", "ID", "NAME", "SESSION", "PID", "STATE", "RESULT",
              "STARTED", "COMMAND");
  for (const auto& p : v) {
    std::string result = p.state == "exited" && p.exit_code ? fmt::format("exit {}", *p.exit_code)
                         : p.signal                          ? signame(p.signal)
                                                             : "";
    std::string cmd = p.command;
    for (auto& c : cmd)
      if (c == '\n' || c == '\t') c = ' ';
    if (cmd.size() > 50) cmd = cmd.substr(0, 47) + "...";
    std::printf("%-5llu %-14s %-12s %8lld %-8s %-10s %-20s %s\n", static_cast<unsigned long long>(p.id),
                p.name.c_str(), p.session.c_str(), static_cast<long long>(p.pid), p.state.c_str(), result.c_str(),
                client::rfc3339_ms(p.started_at_ms).substr(0, 19).c_str(), cmd.c_str());
  }
}

int cmd_start(const global_opts& g, const args& a) {
  client::start_options o;
  std::string err;
  size_t i = 0;
  for (; i < a.size(); ++i) {
    std::string_view v;
    if (a[i] == "--") {
      ++i;
      break;
    }
    if (a[i] == "-h" || a[i] == "--help") return print_usage(*find_command("start"));
    if (take_option(a, i, "-s", "--session", &v, &err)) o.session = std::string(v);
    else if (take_option(a, i, "", "--name", &v, &err)) o.name = std::string(v);
    else if (take_option(a, i, "-C", "--cwd", &v, &err)) o.cwd = std::string(v);
    else if (take_option(a, i, "-e", "--env", &v, &err)) {
      if (v.find('=') == std::string_view::npos) err = fmt::format("option -e takes NAME=VALUE, not '{}'", v);
      o.env.emplace_back(v);
    } else if (!a[i].empty() && a[i][0] == '-') {
      return fail(fmt::format("unknown option '{}' for start; put '--' before a command that starts with '-'", a[i]));
    } else {
      break;
    }
    if (!err.empty()) return fail(err);
  }
  if (i >= a.size()) return fail("start needs a command, e.g. sbsh start --name web 'npm run dev'");
  for (size_t k = i; k < a.size(); ++k) o.command += (k > i ? " " : "") + std::string(a[k]);
  auto conn = connect(g, true);
  if (!conn) return fail(conn.err().message);
  auto p = conn->start(o);
  if (!p) return fail(p.err().message);
  std::printf("%llu\n", static_cast<unsigned long long>(p->id));
  return 0;
}

int cmd_logs(const global_opts& g, const args& a) {
  client::logs_options o;
  std::string id, err;
  bool only_out = false, only_err = false;
  for (size_t i = 0; i < a.size(); ++i) {
    std::string_view v;
    if (a[i] == "-h" || a[i] == "--help") return print_usage(*find_command("logs"));
    if (a[i] == "-f" || a[i] == "--follow") o.follow = true;
    else if (a[i] == "--stdout") only_out = true;
    else if (a[i] == "--stderr") only_err = true;
    else if (take_option(a, i, "-n", "--tail", &v, &err)) {
      char* end = nullptr;
      std::string s(v);
      o.tail = std::strtoull(s.c_str(), &end, 10);
      if (s.empty() || *end != '\0' || o.tail == 0) err = fmt::format("--tail takes a positive number of lines, not '{}'", v);
    } else if (!a[i].empty() && a[i][0] == '-') {
      return fail(fmt::format("unknown option '{}' for logs", a[i]));
    } else if (id.empty()) {
      id = std::string(a[i]);
    } else {
      return fail("logs takes one process ID");
    }
    if (!err.empty()) return fail(err);
  }
  if (id.empty()) return fail("logs needs a process ID or name; 'sbsh ps -a' lists them");
  if (only_out || only_err) {
    o.out = only_out;
    o.err = only_err;
  }
  auto conn = connect(g, false);
  if (!conn) return fail(conn.err().message);
  auto r = conn->logs(id, o, [](client::stream s, std::string_view d) { write_all(s == client::stream::err ? 2 : 1, d); });
  if (!r) return fail(r.err().message);
  return 0;
}

int cmd_kill(const global_opts& g, const args& a) {
  int sig = SIGTERM;
  std::string id, err;
  for (size_t i = 0; i < a.size(); ++i) {
    std::string_view v;
    if (a[i] == "-h" || a[i] == "--help") return print_usage(*find_command("kill"));
    if (take_option(a, i, "-s", "--signal", &v, &err)) {
      auto s = ipc::signal_from_name(v);
      if (!s) return fail(fmt::format("unknown signal '{}'; use a name such as TERM, KILL, INT or a number", v));
      sig = *s;
    } else if (a[i].size() > 1 && a[i][0] == '-') {
      auto s = ipc::signal_from_name(a[i].substr(1));  // -9, -KILL, -SIGKILL as kill(1) takes them
      if (!s) return fail(fmt::format("unknown signal or option '{}'", a[i]));
      sig = *s;
    } else if (id.empty()) {
      id = std::string(a[i]);
    } else {
      return fail("kill takes one process ID");
    }
    if (!err.empty()) return fail(err);
  }
  if (id.empty()) return fail("kill needs a process ID or name; 'sbsh ps' lists them");
  auto conn = connect(g, false);
  if (!conn) return fail(conn.err().message);
  auto p = conn->kill(id, sig);
  if (!p) return fail(p.err().message);
  return 0;
}

int cmd_wait(const global_opts& g, const args& a) {
  std::chrono::milliseconds timeout{0};
  std::string id, err;
  for (size_t i = 0; i < a.size(); ++i) {
    std::string_view v;
    if (a[i] == "-h" || a[i] == "--help") return print_usage(*find_command("wait"));
    if (take_option(a, i, "-t", "--timeout", &v, &err)) {
      auto d = client::parse_duration(v);
      if (!d) return fail(d.err().message);
      timeout = *d;
    } else if (!a[i].empty() && a[i][0] == '-') {
      return fail(fmt::format("unknown option '{}' for wait", a[i]));
    } else if (id.empty()) {
      id = std::string(a[i]);
    } else {
      return fail("wait takes one process ID");
    }
    if (!err.empty()) return fail(err);
  }
  if (id.empty()) return fail("wait needs a process ID or name");
  auto conn = connect(g, false);
  if (!conn) return fail(conn.err().message);
  auto p = conn->wait(id, timeout);
  if (!p) {
    if (p.err().code == "timeout") {
      fail(fmt::format("process {} is still running after {} ms", id, timeout.count()));
      return kExitTimeout;
    }
    return fail(p.err().message);
  }
  if (p->state == "lost" || p->state == "failed") fail(fmt::format("process {} {}: {}", id, p->state, p->error));
  return proc_exit_status(*p);
}

}  // namespace sbsh::cli
