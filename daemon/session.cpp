// Sessions: the facade over the shell supervisor and the job runner (session.h).
#include "daemon/session.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "daemon/session_host.h"

namespace sbsh::daemon {

session::session(session_host& srv, std::string name, session_def def)
    : srv_(srv), name_(std::move(name)), def_(std::move(def)), last_active_ms_(wall_ms()),
      shell_(srv, name_, def_),
      jobs_(srv.runner_ctx(), name_, def_, shell_, [this] { activity(); }) {
  shell_.report_to(jobs_);
  // The spare shell started as this session's would, but for its environment (exported on
  // claim), its limits (so only a session with none takes it) and its directory (entered on
  // claim).
  if (spare_can_serve(def_) && ::access(def_.cwd.c_str(), X_OK) == 0) {
    if (auto spare = srv.take_spare()) {
      shell_.claim(std::move(*spare));
      return;
    }
  }
  shell_.start();
}

session::session(session_host& srv, std::string name, session_def def, adopted_shell&& shell)
    : srv_(srv), name_(std::move(name)), def_(std::move(def)), last_active_ms_(wall_ms()),
      shell_(srv, name_, def_),
      jobs_(srv.runner_ctx(), name_, def_, shell_, [this] { activity(); }) {
  shell_.report_to(jobs_);
  shell_.adopt(std::move(shell));
}

session::~session() = default;

void session::activity() {
  touch(wall_ms());
  srv_.session_activity(*this);
}

void session::enqueue(std::unique_ptr<exec_job> job) { jobs_.enqueue(std::move(job)); }

void session::stop(bool removed) {
  refuse_jobs(removed);
  shell_.stop();
}

void session::refuse_jobs(bool removed) {
  if (removed)
    jobs_.refuse_all(ipc::wire_name(ipc::errc::no_such_session),
                     fmt::format("session '{}' was removed before the command ran", name_),
                     fmt::format("session '{}' was removed while the command ran; the command was stopped", name_));
  else
    jobs_.refuse_all(ipc::wire_name(ipc::errc::shutting_down), "sbshd is shutting down",
                     "sbshd is shutting down; the command was stopped");
}

void session::abandon() {
  jobs_.refuse_all(ipc::wire_name(ipc::errc::shutting_down),
                   "sbshd is shutting down; the command did not run (the session is kept for the next sbshd)",
                   "sbshd is shutting down; the command goes on in the session, which the next sbshd adopts, but its "
                   "result cannot be delivered");
  shell_.abandon();
}

session_status session::describe() const {
  // An adopted shell may still run a command the earlier sbshd started (its status comes
  // before the sync line's): shown as running, timed from the adoption.
  const shell_supervisor& sh = shell_;
  const exec_job* current = jobs_.current();
  bool earlier = sh.adopted_busy() && current == nullptr;
  bool has_running = (current != nullptr && !current->internal) || earlier;
  session_status st;
  st.name = name_;
  st.state = has_running && sh.state() == session_state::ready ? "running" : state_name(sh.state());
  st.wrapper_pid = sh.wrapper_pid();
  st.shell_pid = sh.shell_pid();
  st.restarts = sh.restarts();
  st.queued = jobs_.queued();
  st.commands = jobs_.commands();
  st.cwd = def_.cwd;
  // An idle shell's directory changes only when something runs in it: read again then.
  bool idle = current == nullptr && !earlier;
  std::pair<long, uint64_t> now{static_cast<long>(sh.shell_pid()), jobs_.sent()};
  if (sh.shell_pid() > 0 && idle && cwd_seen_for_ == now) {
    st.cwd = cwd_seen_;
  } else if (sh.shell_pid() > 0) {
    char buf[4096];
    ssize_t n = ::readlink(fmt::format("/proc/{}/cwd", sh.shell_pid()).c_str(), buf, sizeof buf - 1);
    if (n > 0) st.cwd.assign(buf, static_cast<size_t>(n));
    else if (!sh.said_cwd().empty()) st.cwd = sh.said_cwd();  // an undumpable shell, sbshd not root
    if (n > 0 && idle) {
      cwd_seen_ = st.cwd;
      cwd_seen_for_ = now;
    }
  }
  st.error = sh.failure();
  st.started_at_ms = sh.started_at_ms();
  st.uptime_ms = sh.uptime_ms();
  st.restart = def_.restart;
  st.implicit = def_.implicit;
  st.idle_expiry_ms = def_.idle_expiry_ms;
  st.timeout_ms = def_.timeout_ms;
  if (!srv_.busy(*this)) {
    st.idle_since_ms = last_active_ms_;
    if (def_.idle_expiry_ms > 0) st.expires_at_ms = last_active_ms_ + static_cast<int64_t>(def_.idle_expiry_ms);
  }
  if (has_running && earlier) {
    st.running = "(started before sbshd restarted)";
    st.running_ms = static_cast<uint64_t>(std::max<int64_t>(0, wall_ms() - sh.adopted_ms()));
  } else if (has_running && current->lease && current->leased.seq != 0) {
    // What its holder runs, as the lease's page said when sbshd last read it.
    st.running = shown_command(current->leased.text, current->leased.full_len);
    uint64_t now = mono_us();
    st.running_ms = now > current->leased.started_us ? (now - current->leased.started_us) / 1000 : 0;
  } else if (has_running) {
    st.running = current->command;  // shown_command(): never more than its start
    st.running_ms = (mono_us() - current->started_mono_us) / 1000;
  }
  return st;
}

session_detail session::describe_full() const {
  session_detail d;
  d.status = describe();
  d.definition = def_;
  d.definition.root = root_of(def_);    // a snapshot session's root is its copy
  d.definition.environment.clear();  // it may hold secrets, and is long
  d.init_output = jobs_.init_output();
  d.history.assign(jobs_.history().begin(), jobs_.history().end());
  return d;
}

}  // namespace sbsh::daemon
