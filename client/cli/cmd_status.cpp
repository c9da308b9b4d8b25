// sbsh status: the daemon (pid, version, uptime, socket) and its sessions.
#include <cstdio>
#include <memory>

#include "client/cli/cli.h"
#include "client/json.h"

namespace sbsh::cli {

namespace {

int run_status(const global_opts& g, bool json) {
  auto conn = connect(g, false);
  if (!conn) return fail(conn.err().message);
  auto st = conn->status();
  if (!st) return fail(st.err().message);
  if (json) {
    std::puts(client::to_json(*st).c_str());
    return 0;
  }
  std::printf("sbshd %s, pid %lld, up %s, socket %s\n", st->version.c_str(), static_cast<long long>(st->pid),
              human_duration(st->uptime_ms).c_str(), st->socket_path.c_str());
  const auto& n = st->counters;
  std::printf("%llu commands (%llu failed, %llu timed out), %llu shell restarts, %llu bytes streamed, %llu clients\n",
              static_cast<unsigned long long>(n.commands), static_cast<unsigned long long>(n.failed),
              static_cast<unsigned long long>(n.timed_out), static_cast<unsigned long long>(n.shell_restarts),
              static_cast<unsigned long long>(n.bytes_streamed), static_cast<unsigned long long>(n.clients));
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
