// sbsh status: the daemon (pid, version, uptime, socket) and its sessions.
#include <cstdio>
#include <memory>

#include "cli/cli.h"
#include "client/json.h"
#include "client/request.h"

namespace sbsh::cli {

namespace {

int run_status(const global_opts& g, bool json) {
  auto conn = connect(g);
  if (!conn) return fail(conn.err());
  auto st = client::request<ipc::msg::status_reply>(*conn, ipc::msg::status{}, client::daemon_status_of);
  if (!st) return fail(st.err());
  if (json) {
    std::puts(client::to_json(*st).c_str());
    return 0;
  }
  std::printf("sbshd %s, pid %lld, up %s, socket %s\n", displayable(st->version, false).c_str(),
              static_cast<long long>(st->pid), human_duration(st->uptime_ms).c_str(),
              displayable(st->socket_path, false).c_str());
  const auto& n = st->counters;
  // Not bytes_streamed: most output goes straight into the clients' own pipes, never through
  // sbshd, and a figure of 0 after commands printed would mislead (--json has it, explained).
  std::printf("%s (%llu failed, %llu timed out), %s, %s\n", plural(n.commands, "command", "commands").c_str(),
              static_cast<unsigned long long>(n.failed), static_cast<unsigned long long>(n.timed_out),
              plural(n.shell_restarts, "shell restart", "shell restarts").c_str(),
              plural(n.clients, "client", "clients").c_str());
  // What bounds how many sessions this sbshd can hold (absent from an older sbshd).
  if (st->sessions_supported != 0)
    std::printf("%s of at most %llu (descriptor limit %llu, 3 descriptors each)\n",
                plural(st->sessions.size(), "session", "sessions").c_str(),
                static_cast<unsigned long long>(st->sessions_supported),
                static_cast<unsigned long long>(st->descriptor_limit));
  print_session_table(st->sessions);
  return 0;
}

}  // namespace

runner declare_status(command_line& cl) {
  auto json = std::make_shared<bool>(false);
  cl.describe("Shows sbshd's pid, version, uptime and socket, and its sessions.");
  cl.flag("--json", "print one JSON object instead of text", *json);
  return [json](const global_opts& g) { return run_status(g, *json); };
}

}  // namespace sbsh::cli
