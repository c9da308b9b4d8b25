// sbsh status, sbsh shutdown, sbsh version: the daemon itself.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>

#include <fmt/format.h>

#include "client/cli/cli.h"
#include "client/cli/json.h"
#include "ipc/protocol.h"

namespace sbsh::cli {

namespace {

std::string human_duration(uint64_t ms) {
  uint64_t s = ms / 1000;
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{}m", s / 3600, (s % 3600) / 60);
  return fmt::format("{}d{}h", s / 86400, (s % 86400) / 3600);
}

bool only_json_flag(const args& a, std::string_view cmd, bool* json, int* rc) {
  for (auto v : a) {
    if (v == "--json") *json = true;
    else if (v == "-h" || v == "--help") {
      *rc = print_usage(*find_command(cmd));
      return false;
    } else {
      *rc = fail(fmt::format("unknown argument '{}' for {}", v, cmd));
      return false;
    }
  }
  return true;
}

}  // namespace

int cmd_status(const global_opts& g, const args& a) {
  bool json = false;
  int rc = 0;
  if (!only_json_flag(a, "status", &json, &rc)) return rc;
  auto conn = connect(g, false);
  if (!conn) return fail(conn.err().message);
  auto st = conn->status();
  if (!st) return fail(st.err().message);
  if (json) {
    std::string sessions = "[";
    for (const auto& s : st->sessions) {
      if (sessions.size() > 1) sessions += ',';
      json_object o;
      o.str("name", s.name).str("state", s.state).num("shell_pid", s.shell_pid).num("wrapper_pid", s.wrapper_pid);
      o.num("restarts", static_cast<int64_t>(s.restarts)).num("queued", static_cast<int64_t>(s.queued));
      o.num("commands", static_cast<int64_t>(s.commands));
      if (!s.running.empty()) o.str("running", s.running).num("running_ms", static_cast<int64_t>(s.running_ms));
      else o.null("running").null("running_ms");
      sessions += o.finish();
    }
    sessions += ']';
    json_object j;
    j.num("pid", st->pid).str("version", st->version).num("uptime_ms", static_cast<int64_t>(st->uptime_ms));
    j.str("socket", st->socket_path).raw("sessions", sessions);
    std::puts(j.finish().c_str());
    return 0;
  }
  std::printf("sbshd %s, pid %lld, up %s, socket %s\n", st->version.c_str(), static_cast<long long>(st->pid),
              human_duration(st->uptime_ms).c_str(), st->socket_path.c_str());
  if (st->sessions.empty()) {
    std::puts("no sessions");
    return 0;
  }
  std::printf("%-20s %-9s %8s %8s %8s %6s %8s  %s\n", "SESSION", "STATE", "SHELL", "WRAPPER", "RESTARTS", "QUEUE",
              "COMMANDS", "RUNNING");
  for (const auto& s : st->sessions) {
    std::string running = s.running.empty() ? "" : fmt::format("{} ({})", s.running, human_duration(s.running_ms));
    if (running.size() > 60) running = running.substr(0, 57) + "...";
    for (auto& ch : running)
      if (ch == '\n' || ch == '\t') ch = ' ';
    std::printf("%-20s %-9s %8lld %8lld %8llu %6llu %8llu  %s\n", s.name.c_str(), s.state.c_str(),
                static_cast<long long>(s.shell_pid), static_cast<long long>(s.wrapper_pid),
                static_cast<unsigned long long>(s.restarts), static_cast<unsigned long long>(s.queued),
                static_cast<unsigned long long>(s.commands), running.c_str());
  }
  return 0;
}

int cmd_shutdown(const global_opts& g, const args& a) {
  bool json = false;
  int rc = 0;
  if (!only_json_flag(a, "shutdown", &json, &rc)) return rc;
  auto conn = connect(g, false);
  if (!conn) {
    if (conn.err().code == "unreachable") return 0;  // already stopped: nothing to do
    return fail(conn.err().message);
  }
  auto st = conn->status();
  if (!st) return fail(st.err().message);
  if (auto s = conn->shutdown(); !s) return fail(s.err().message);
  // Return only once the daemon is gone, so that `sbsh shutdown && ...` sees no leftovers.
  for (int i = 0; i < 1000 && ::kill(static_cast<pid_t>(st->pid), 0) == 0; ++i) ::usleep(10000);
  if (::kill(static_cast<pid_t>(st->pid), 0) == 0)
    return fail(fmt::format("sbshd (pid {}) is still running 10 s after the shutdown request", st->pid));
  return 0;
}

int cmd_version(const global_opts&, const args& a) {
  if (!a.empty() && (a[0] == "-h" || a[0] == "--help")) return print_usage(*find_command("version"));
  std::printf("sbsh %s (protocol %u)\n", SBSH_VERSION, ipc::kProtocolVersion);
  return 0;
}

}  // namespace sbsh::cli
