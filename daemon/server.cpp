// sbshd's life: the server's construction and teardown, start (signal handlers, readiness,
// the service manager's watchdog), and orderly shutdown. The rest of `server` is split by role:
//   server_clients.cpp   the listening socket, client connections and their bounds
//   server_sessions.cpp  the session table: create, define (snapshots, environments), remove, expiry
//   server_state.cpp     the state files: atomic writes, and the sessions loaded at start
//   server_spares.cpp    starting wrappers, and the spare shells started ahead of need
//   server_adopt.cpp     adopting the shells an earlier sbshd left
//   handlers.cpp         server::handle and the table of request handlers
#include "daemon/server.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "daemon/service_manager.h"
#include "daemon/session.h"
#include "daemon/state_lock.h"
#include "ipc/wrapper_link.h"

namespace sbsh::daemon {

namespace {
// A short key for a state directory (FNV-1a): the sessions' cgroups of sbshds with different
// state directories do not meet.
std::string state_key(std::string_view dir) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : dir) h = (h ^ c) * 1099511628211ULL;
  return fmt::format("{:012x}", h & 0xffffffffffffULL);
}
}  // namespace

server::server(options opts)
    : opts_(std::move(opts)), pid_(::getpid()), snapshots_(&loop_, opts_.state_dir + "/snapshots", opts_.state_dir + "/kept", opts_.wrapper_path),
      envs_(&loop_, opts_.state_dir + "/envs", [] {
        const char* bash = std::getenv("SBSH_BASH");  // the bash sessions run (the wrapper reads it too)
        return std::string(bash != nullptr && *bash != '\0' ? bash : "/bin/bash");
      }(), opts_.wrapper_path),
      cgroups_(state_key(opts_.state_dir)) {
  uv_loop_init(&loop_);
  devnull_ = unique_fd(::open("/dev/null", O_RDWR | O_CLOEXEC));
  accept_reserve_ = unique_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ns_last_pid_ = unique_fd(::open("/proc/sys/kernel/ns_last_pid", O_RDONLY | O_CLOEXEC));
  started_us_ = mono_us();
  procs_ = std::make_unique<proc_table>(*this);
  records_ = std::make_unique<command_records>(*this, opts_.state_dir + "/commands");
  runner_ctx_ = {&loop_, &counters_, records_.get(), opts_.confine_uid, opts_.confine_gid, ns_last_pid_.get()};
  files_ = std::make_unique<file_service>(*this);
}

server::~server() {
  stopper_.abandon();  // before the sessions it would ask to end go
  inherited_.reset();
  procs_.reset();
  sessions_.clear();
  clients_.clear();
  dead_clients_.clear();
  records_.reset();  // after the sessions, whose commands report to it
  drop_spares();
  close_bound_timers();
  farewells_.close_all();
  listen_watch_.reset();
  spare_timer_.reset();
  watchdog_timer_.reset();
  upkeep_.stop();
  activity_save_timer_.reset();
  signals_.clear();
  // Let every close callback run, then check that nothing was left open.
  uv_run(&loop_, UV_RUN_DEFAULT);
  if (uv_loop_close(&loop_) != 0) {
    uv_walk(&loop_, [](uv_handle_t* h, void*) {
      spdlog::error("handle still open at exit: {}", uv_handle_type_name(h->type));
    }, nullptr);
  }
  if (bound_) ::unlink(opts_.socket_path.c_str());
}

uint64_t server::uptime_ms() const { return (mono_us() - started_us_) / 1000; }

void server::begin_shutdown(const std::string& why, bool keep_sessions) {
  if (shutting_down_) return;
  shutting_down_ = true;
  keep_sessions_ = keep_sessions;
  spdlog::info("shutting down{}: {}", keep_sessions ? ", keeping the sessions for the next sbshd" : "", why);
  service_manager::notify("STOPPING=1\nSTATUS=shutting down: " + why);
  // An sbshd started meanwhile waits for this one to let go of the state directory.
  if (opts_.state_lock_fd >= 0) write_state_lock(opts_.state_lock_fd, opts_.socket_path, true);
  drop_spares();
  if (activity_save_timer_) save_state();  // idle times not yet saved
  upkeep_.stop();
  for (auto& [name, p] : pending_) {
    snapshots_.cancel(name);
    if (p.env_ticket != 0) envs_.leave(std::exchange(p.env_ticket, 0));  // its setup stops
  }
  while (!rebuilds_.empty()) cancel_rebuild(rebuilds_.begin()->first);
  listen_watch_.reset();
  listen_fd_.reset();
  if (bound_) {
    ::unlink(opts_.socket_path.c_str());
    bound_ = false;
  }
  std::deque<session*> order;  // the sessions to end, in that order
  if (keep_sessions) {
    for (auto& [name, s] : sessions_) s->abandon();
  } else {
    procs_->kill_all("");
    // Every command is answered now; the shells that run one end first.
    for (auto& [name, s] : sessions_) {
      bool busy = !s->jobs().idle();
      s->refuse_jobs();
      if (busy) order.push_front(s.get());
      else order.push_back(s.get());
    }
  }
  // Wait for the wrappers to end their sessions and for the setups stopped above to end with
  // all they started, then finish: each session says when its wrapper has gone, the
  // environments when no setup runs. A wrapper still there once its own bound for ending its
  // session has passed is stuck, and is killed; one killed sooner, on a loaded machine, would
  // leave the rest of its session running.
  stopper_.expect(std::move(order), sessions_.size(), 1);
  for (auto& [name, s] : sessions_) s->when_gone([this, gone = s.get()] { stopper_.gone(gone); });
  envs_.when_idle([this] { stopper_.other_done(); });
  stopper_.stop_more();
}

void server::finish_shutdown() {
  watchdog_timer_.reset();
  upkeep_.stop();
  activity_save_timer_.reset();
  // Sessions that end with sbshd take their cgroups with them (the next sbshd makes them again).
  if (!keep_sessions_) {
    for (const auto& [name, s] : sessions_) cgroup::kill_and_remove(s->def().cgroup, 1000);
    cgroups_.release();
  }
  sessions_.clear();  // any wrapper still there is killed by its session's destructor
  clients_.clear();
  procs_.reset();
  records_.reset();
  close_bound_timers();
  farewells_.close_all();
  signals_.clear();
  if (inherited_) inherited_->look();  // the last word on what wrappers killed above left
  inherited_.reset();
}

// Pings at half the interval the service manager asked for, as sd_watchdog_enabled(3)
// advises; a loop that is stuck stops pinging, and systemd restarts sbshd.
void server::watchdog_tick(uint64_t interval_ms) {
  service_manager::notify("WATCHDOG=1");
  watchdog_timer_->start(std::max<uint64_t>(interval_ms / 2, 1), [this, interval_ms] { watchdog_tick(interval_ms); });
}

void server::on_signal(int signum) {
  if (signum == SIGHUP) {
    spdlog::info("SIGHUP: nothing to reload");
    return;
  }
  begin_shutdown(fmt::format("signal {}", strsignal(signum)));
}

int server::run(const std::function<void()>& on_ready) {
  start(on_ready);
  uv_run(&loop_, UV_RUN_DEFAULT);
  return exit_code_;
}

void server::start(const std::function<void()>& on_ready) {
  ::signal(SIGPIPE, SIG_IGN);
  for (int signum : {SIGTERM, SIGINT, SIGHUP}) {
    signals_.push_back(uv::make_handle<uv::signal_watch>(&loop_));
    signals_.back()->start(signum, [this](int sig) { on_signal(sig); });
  }
  inherited_ = std::make_unique<inherited_children>(&loop_, [this] {
    std::set<pid_t> kept;
    for (const auto& [name, s] : sessions_)
      for (const auto& [pgid, pipes] : s->shell().lent()) kept.insert(pgid);
    return kept;
  });
  spdlog::info("sbshd {} listening on {} (pid {})", SBSH_VERSION, opts_.socket_path, pid_);
  if (on_ready) on_ready();
  service_manager::notify(fmt::format("READY=1\nMAINPID={}\nSTATUS=listening on {}", pid_, opts_.socket_path));
  if (uint64_t interval = service_manager::watchdog_interval_ms(); interval > 0) {
    watchdog_timer_ = uv::make_handle<uv::timer>(&loop_);
    watchdog_tick(interval);
  }
  start_spares();  // before the first request: an auto-started sbshd gets one at once
}

}  // namespace sbsh::daemon
