// sbsh shutdown: stop sbshd, and return once it is gone.
#include <dirent.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "cli/cli.h"
#include "client/request.h"
#include "common/paths.h"
#include "ipc/protocol.h"
#include "ipc/wrapper_link.h"

namespace sbsh::cli {

namespace {

// Whether the process runs; a zombie (its parent has not reaped it yet) counts as gone.
bool running(int64_t pid) {
  char path[64], buf[512];
  std::snprintf(path, sizeof path, "/proc/%lld/stat", static_cast<long long>(pid));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* rp = std::strrchr(buf, ')');
  return rp != nullptr && rp[1] == ' ' && rp[2] != 'Z';
}

// sbshd waits for its wrappers to end their sessions up to kWrapperStopWaitMs, then exits.
constexpr int kGoneWithinMs = wrapper::kWrapperStopWaitMs + 3000;

// Whether the connection's far end closed it within kGoneWithinMs: sbshd closes its
// connections as it exits, and through a dial command (-H, --dial) that end is all there is to watch, since
// sbshd's pid is another host's or another PID namespace's (in a container, where podman
// exec reaches it, its pid means nothing here).
bool closed_in_time(int fd) {
  char buf[4096];
  for (int waited = 0; waited < kGoneWithinMs; waited += 100) {
    pollfd pf{fd, POLLIN, 0};
    if (::poll(&pf, 1, 100) > 0) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return true;
    }
  }
  return false;
}

// Whether shells kept by an earlier sbshd (shutdown --keep-sessions, a crash) wait in
// SOCKET.d for the next one to adopt them: each has a directory there.
bool kept_sessions_wait(const global_opts& g) {
  if (!g.host.empty() || !g.dial.empty()) return false;
  std::string dir = resolve_socket_path(g.socket) + ".d";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return false;
  bool any = false;
  while (const dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) any = true;
  ::closedir(d);
  return any;
}

int run_shutdown(const global_opts& g, bool keep) {
  // No sbshd: nothing to stop, unless sessions kept by the last one wait to be adopted;
  // then one is started to adopt them and end them.
  auto conn = connect(g, !keep && kept_sessions_wait(g));
  if (!conn) {
    if (ipc::has_code(conn.err(), ipc::errc::unreachable)) return 0;  // already stopped: nothing to do
    return fail(conn.err().message);
  }
  auto pid = client::request<ipc::msg::status_reply>(*conn, ipc::msg::status{}, &ipc::msg::status_reply::pid);
  if (!pid) return fail(pid.err().message);
  if (auto s = client::request_ok(*conn, ipc::msg::shutdown{keep}); !s) return fail(s.err().message);
  // Return only once the daemon is gone, so that `sbsh shutdown && ...` sees no leftovers.
  if (conn->remote()) {
    if (!closed_in_time(conn->fd()))
      return fail(fmt::format("sbshd is still running {} s after the shutdown request", kGoneWithinMs / 1000));
    return 0;
  }
  for (int i = 0; i < kGoneWithinMs / 10 && running(*pid); ++i) ::usleep(10000);
  if (running(*pid))
    return fail(
        fmt::format("sbshd (pid {}) is still running {} s after the shutdown request", *pid, kGoneWithinMs / 1000));
  return 0;
}

}  // namespace

runner declare_shutdown(command_line& cl) {
  auto keep = std::make_shared<bool>(false);
  cl.describe("Stops sbshd; every session's shell and its processes end. Waits until it is gone.");
  cl.flag("--keep-sessions",
          "leave the sessions running (their shells, their state, a running command) for the next sbshd on this "
          "socket to adopt, as when upgrading sbshd; a command in flight goes on, but its result is lost; "
          "background processes go on too, with their logs (see sbshd(8), ADOPTION)",
          *keep);
  return [keep](const global_opts& g) { return run_shutdown(g, *keep); };
}

}  // namespace sbsh::cli
