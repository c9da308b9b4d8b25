// Sessions: the facade over the shell supervisor and the job runner (session.h).
#include "daemon/session.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "daemon/server.h"

namespace sbsh::daemon {

session::session(server& srv, std::string name, session_def def)
    : name_(std::move(name)), def_(std::move(def)), shell_(srv, *this), jobs_(srv, *this) {
  // The spare shell started exactly as this session's would, but for the session's own
  // variables and limits (so only a session with none takes it) and its directory (entered
  // on claim).
  if (def_.env.empty() && def_.limits.empty() && ::access(def_.cwd.c_str(), X_OK) == 0) {
    if (auto spare = srv.take_spare()) {
      shell_.claim(std::move(*spare));
      return;
    }
  }
  shell_.start();
}

session::session(server& srv, std::string name, session_def def, adopted_shell&& shell)
    : name_(std::move(name)), def_(std::move(def)), shell_(srv, *this), jobs_(srv, *this) {
  shell_.adopt(std::move(shell));
}

session::~session() = default;

void session::enqueue(std::unique_ptr<exec_job> job) { jobs_.enqueue(std::move(job)); }

void session::stop() {
  jobs_.refuse_all(ipc::err::shutting_down, "sbshd is shutting down", "sbshd is shutting down; the command was stopped");
  shell_.stop();
}

void session::abandon() {
  jobs_.refuse_all(ipc::err::shutting_down,
                   "sbshd is shutting down; the command did not run (the session is kept for the next sbshd)",
                   "sbshd is shutting down; the command goes on in the session, which the next sbshd adopts, but its "
                   "result cannot be delivered");
  shell_.abandon();
}

void session::describe(msgpack::packer<ipc::frame_builder>& pk, bool full) const {
  // An adopted shell may still run a command the earlier sbshd started (its status comes
  // before the sync line's): shown as running, timed from the adoption.
  const shell_supervisor& sh = shell_;
  const exec_job* current = jobs_.current();
  bool earlier = sh.adopted_busy() && current == nullptr;
  bool has_running = (current != nullptr && !current->internal) || earlier;
  std::string cwd = def_.cwd;
  if (sh.shell_pid() > 0) {
    char buf[4096];
    ssize_t n = ::readlink(fmt::format("/proc/{}/cwd", sh.shell_pid()).c_str(), buf, sizeof buf - 1);
    if (n > 0) cwd.assign(buf, static_cast<size_t>(n));
  }
  uint32_t fields = 12 + (has_running ? 2 : 0) + (full ? 3 : 0);
  pk.pack_map(fields);
  auto key = [&](std::string_view k) {
    pk.pack_str(static_cast<uint32_t>(k.size()));
    pk.pack_str_body(k.data(), static_cast<uint32_t>(k.size()));
  };
  auto kv_str = [&](std::string_view k, std::string_view v) {
    key(k);
    pk.pack_str(static_cast<uint32_t>(v.size()));
    pk.pack_str_body(v.data(), static_cast<uint32_t>(v.size()));
  };
  auto kv_int = [&](std::string_view k, int64_t v) {
    key(k);
    pk.pack_int64(v);
  };
  kv_str("name", name_);
  kv_str("state", has_running && sh.state() == session_state::ready ? "running" : state_name(sh.state()));
  kv_int("wrapper_pid", sh.wrapper_pid());
  kv_int("shell_pid", sh.shell_pid());
  kv_int("restarts", static_cast<int64_t>(sh.restarts()));
  kv_int("queued", static_cast<int64_t>(jobs_.queued()));
  kv_int("commands", static_cast<int64_t>(jobs_.commands()));
  kv_str("cwd", cwd);
  kv_str("error", sh.failure());
  kv_int("started_at_ms", sh.started_at_ms());
  kv_int("uptime_ms", static_cast<int64_t>(sh.uptime_ms()));
  kv_str("restart", policy_name(def_.restart));
  if (has_running && earlier) {
    kv_str("running", "(started before sbshd restarted)");
    kv_int("running_ms", std::max<int64_t>(0, wall_ms() - sh.adopted_ms()));
  } else if (has_running) {
    kv_str("running", std::string_view(current->command).substr(0, 256));
    kv_int("running_ms", static_cast<int64_t>((mono_us() - current->started_mono_us) / 1000));
  }
  if (!full) return;
  key("definition");
  pack_def(pk, def_);
  kv_str("init_output", jobs_.init_output());
  key("history");
  pk.pack_array(static_cast<uint32_t>(jobs_.history().size()));
  for (const auto& h : jobs_.history()) {
    pk.pack_map(6);
    kv_str("command", h.command);
    key("exit_code");
    if (h.exit_code) pk.pack_int64(*h.exit_code);
    else pk.pack_nil();
    key("timed_out");
    h.timed_out ? pk.pack_true() : pk.pack_false();
    key("shell_restarted");
    h.shell_restarted ? pk.pack_true() : pk.pack_false();
    kv_int("started_at_ms", h.started_at_ms);
    kv_int("duration_ms", static_cast<int64_t>(h.duration_ms));
  }
}

}  // namespace sbsh::daemon
