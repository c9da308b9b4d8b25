// sbsh status, sbsh shutdown, sbsh version, sbsh dial-stdio: the daemon itself.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <ctime>

#include <fmt/format.h>

#include "client/cli/cli.h"
#include "client/json.h"
#include "ipc/protocol.h"

namespace sbsh::cli {

namespace {

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

int cmd_shutdown(const global_opts& g, const args& a) {
  bool keep = false;
  for (auto v : a) {
    if (v == "--keep-sessions") {
      keep = true;
    } else if (v == "-h" || v == "--help") {
      return print_usage(*find_command("shutdown"));
    } else {
      return fail(fmt::format("unknown argument '{}' for shutdown; see 'sbsh shutdown --help'", v));
    }
  }
  auto conn = connect(g, false);
  if (!conn) {
    if (conn.err().code == "unreachable") return 0;  // already stopped: nothing to do
    return fail(conn.err().message);
  }
  auto st = conn->status();
  if (!st) return fail(st.err().message);
  if (auto s = conn->shutdown(keep); !s) return fail(s.err().message);
  // Return only once the daemon is gone, so that `sbsh shutdown && ...` sees no leftovers.
  // A zombie (its parent has not reaped it yet) counts as gone.
  auto running = [pid = st->pid] {
    char path[64], buf[512];
    std::snprintf(path, sizeof path, "/proc/%lld/stat", static_cast<long long>(pid));
    FILE* f = std::fopen(path, "r");
    if (f == nullptr) return false;
    size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    const char* rp = std::strrchr(buf, ')');
    return rp != nullptr && rp[1] == ' ' && rp[2] != 'Z';
  };
  for (int i = 0; i < 1000 && running(); ++i) ::usleep(10000);
  if (running())
    return fail(fmt::format("sbshd (pid {}) is still running 10 s after the shutdown request", st->pid));
  return 0;
}

int cmd_version(const global_opts&, const args& a) {
  if (!a.empty() && (a[0] == "-h" || a[0] == "--help")) return print_usage(*find_command("version"));
  std::printf("sbsh %s (protocol %u)\n", SBSH_VERSION, ipc::kProtocolVersion);
  return 0;
}

int cmd_dial_stdio(const global_opts& g, const args& a) {
  for (auto v : a) {
    if (v == "-h" || v == "--help") return print_usage(*find_command("dial-stdio"));
    return fail(fmt::format("unknown argument '{}' for dial-stdio", v));
  }
  client::connect_options o;
  o.socket_path = g.socket;
  o.autostart = g.autostart;
  if (auto s = client::dial_stdio(o, STDIN_FILENO, STDOUT_FILENO); !s) return fail(s.err().message);
  return 0;
}

}  // namespace sbsh::cli
