// The tables that status, ps and session ls print: sessions, then background processes.
#include <cstdio>

#include <fmt/format.h>

#include "client/cli/cli.h"
#include "client/json.h"
#include "ipc/text.h"

namespace sbsh::cli {

std::string human_duration(uint64_t ms) {
  uint64_t s = ms / 1000;
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{}m", s / 3600, (s % 3600) / 60);
  return fmt::format("{}d{}h", s / 86400, (s % 86400) / 3600);
}

std::string one_line(std::string s, size_t max) {
  for (auto& ch : s)
    if (ch == '\n' || ch == '\t') ch = ' ';
  if (s.size() > max) s = s.substr(0, max - 3) + "...";
  return s;
}

void print_session_table(const std::vector<client::session_status>& v) {
  if (v.empty()) {
    std::puts("no sessions");
    return;
  }
  std::printf("%-16s %-10s %8s %8s %8s %8s %5s  %-24s %s\n", "SESSION", "STATE", "WRAPPER", "SHELL", "RESTARTS",
              "UPTIME", "QUEUE", "CWD", "RUNNING");
  for (const auto& s : v) {
    std::string running =
        s.running.empty() ? "" : fmt::format("{} ({})", one_line(s.running, 40), human_duration(s.running_ms));
    if (!s.error.empty() && s.running.empty()) running = one_line(s.error, 60);
    std::printf("%-16s %-10s %8lld %8lld %8llu %8s %5llu  %-24s %s\n", s.name.c_str(), s.state.c_str(),
                static_cast<long long>(s.wrapper_pid), static_cast<long long>(s.shell_pid),
                static_cast<unsigned long long>(s.restarts), human_duration(s.uptime_ms).c_str(),
                static_cast<unsigned long long>(s.queued), one_line(s.cwd, 24).c_str(), running.c_str());
  }
}

void print_proc_table(const std::vector<client::proc_info>& v) {
  if (v.empty()) return;
  std::printf("\n%-5s %-14s %-12s %8s %-8s %-10s %-20s %s\n", "ID", "NAME", "SESSION", "PID", "STATE", "RESULT",
              "STARTED", "COMMAND");
  for (const auto& p : v) {
    std::string result = p.state == "exited" && p.exit_code ? fmt::format("exit {}", *p.exit_code)
                         : p.signal                         ? ipc::signal_name(*p.signal)
                                                            : "";
    std::printf("%-5llu %-14s %-12s %8lld %-8s %-10s %-20s %s\n", static_cast<unsigned long long>(p.id), p.name.c_str(),
                p.session.c_str(), static_cast<long long>(p.pid), p.state.c_str(), result.c_str(),
                client::rfc3339_ms(p.started_at_ms).substr(0, 19).c_str(), one_line(p.command, 50).c_str());
  }
}

}  // namespace sbsh::cli
