// sbsh wait: wait for a background process, or a kept command (%ID), and exit as it did.
#include <cstdio>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "cli/cli.h"
#include "client/json.h"
#include "client/request.h"
#include "ipc/protocol.h"

namespace sbsh::cli {

namespace {

struct wait_args {
  std::chrono::milliseconds timeout{0};
  std::string id;
  bool json = false;
  uint64_t output_limit = client::exec_options{}.output_limit;
};

// The exit status a process's end maps to, as for exec: its code, 128+N for signal N.
int proc_exit_status(const client::proc_info& p) {
  if (p.state == "exited" && p.exit_code) return *p.exit_code;
  if (p.state == "killed") return p.signal ? 128 + *p.signal : kExitFailure;
  return kExitFailure;
}

// A command exec kept (%ID): its exact result, as exec would have given it.
int wait_command(client::connection& conn, const wait_args& a, uint64_t id) {
  auto r = conn.await_command(id, a.timeout, a.output_limit);
  if (!r) return fail(r.err());
  if (r->running) {
    fail(fmt::format("command {} is still running after {} ms", a.id, a.timeout.count()), "timeout");
    return kExitTimeout;
  }
  if (a.json) print_exec_json(r->session, r->command, *r);
  else if (r->timed_out) fail(fmt::format("command {} timed out; it was stopped", a.id), "timeout");
  else explain_result(r->session, {}, *r);
  return exec_exit_status(*r);
}

int run_wait(const global_opts& g, const wait_args& a) {
  if (a.json) report_failures_as(failure_format::json);
  if (a.id.empty()) return fail("wait needs a process ID or name, or a command's %ID");
  auto conn = connect(g);
  if (!conn) return fail(conn.err());
  if (auto cmd = client::parse_command_ref(a.id)) return wait_command(*conn, a, *cmd);
  auto ms = static_cast<uint64_t>(std::max<int64_t>(a.timeout.count(), 0));
  auto p = client::request<ipc::msg::proc_info>(*conn, ipc::msg::proc_wait{{0, a.id}, ms}, &ipc::msg::proc_info::proc);
  if (!p) {
    if (ipc::has_code(p.err(), ipc::errc::timeout)) {
      // Its command may have ended with processes it started still running: sbshd says so.
      const std::string& why = p.err().message;
      fail(fmt::format("process {} is still running after {} ms{}", a.id, a.timeout.count(),
                       why.find("has ended") != std::string::npos ? ": " + why : ""));
      return kExitTimeout;
    }
    return fail(p.err());
  }
  if (a.json) {
    std::string s = client::to_json(*p) + "\n";
    std::fwrite(s.data(), 1, s.size(), stdout);
  }
  if (p->state == "lost" || p->state == "failed") fail(fmt::format("process {} {}: {}", a.id, p->state, p->error));
  if (p->state == "not_started") fail(fmt::format("process {} was not started: {}", a.id, p->error));
  return proc_exit_status(*p);
}

}  // namespace

runner declare_wait(command_line& cl) {
  auto a = std::make_shared<wait_args>();
  cl.describe(
      "Waits until the background process, or the command exec kept (%ID: exec --detach-after, --json), ends and "
      "exits as it did.");
  cl.duration("-t,--timeout", "DURATION", "give up after DURATION (500ms, 30s, 5m, 1h, or seconds)", a->timeout);
  cl.flag("--json", "print the result as JSON: for a %ID the fields of exec --json, its output included; for a "
                    "process, its record as in ps --json",
          a->json);
  cl.number("--output-limit", "N", "with --json and a %ID, keep at most N bytes per stream: the first and last N/2",
            a->output_limit, "a number of bytes", 0, std::numeric_limits<size_t>::max());
  cl.argument("ID", a->id);
  cl.complete(value_kind::process);
  cl.footer(
      "Exit status: the process's; 128+N if signal N ended it; 124 if DURATION passed first; 255 if its status "
      "is unknown (lost when sbshd restarted, not started, or it failed to start).");
  return [a](const global_opts& g) { return run_wait(g, *a); };
}

}  // namespace sbsh::cli
