// sbsh wait: wait for a background process and exit with its exit status.
#include <memory>

#include <fmt/format.h>

#include "client/cli/cli.h"

namespace sbsh::cli {

namespace {

struct wait_args {
  std::chrono::milliseconds timeout{0};
  std::string id;
};

// The exit status a process's end maps to, as for exec: its code, 128+N for signal N.
int proc_exit_status(const client::proc_info& p) {
  if (p.state == "exited" && p.exit_code) return *p.exit_code;
  if (p.state == "killed") return p.signal ? 128 + *p.signal : kExitFailure;
  return kExitFailure;
}

int run_wait(const global_opts& g, const wait_args& a) {
  if (a.id.empty()) return fail("wait needs a process ID or name");
  auto conn = connect(g, true);
  if (!conn) return fail(conn.err().message);
  auto p = conn->wait(a.id, a.timeout);
  if (!p) {
    if (p.err().code == "timeout") {
      fail(fmt::format("process {} is still running after {} ms", a.id, a.timeout.count()));
      return kExitTimeout;
    }
    return fail(p.err().message);
  }
  if (p->state == "lost" || p->state == "failed") fail(fmt::format("process {} {}: {}", a.id, p->state, p->error));
  return proc_exit_status(*p);
}

}  // namespace

runner declare_wait(command_line& cl) {
  auto a = std::make_shared<wait_args>();
  cl.describe("Waits until the process ends and exits as it did.");
  cl.duration("-t,--timeout", "DURATION", "give up after DURATION (500ms, 30s, 5m, 1h, or seconds)", a->timeout);
  cl.argument("ID", a->id);
  cl.footer(
      "Exit status: the process's; 128+N if signal N ended it; 124 if DURATION passed first; 255 if its status "
      "is unknown (lost when sbshd restarted, or it failed to start).");
  return [a](const global_opts& g) { return run_wait(g, *a); };
}

}  // namespace sbsh::cli
