// Sessions: starting and restarting the shell, and running exec jobs one at a time.
// The mechanism is described in session.h; docs/architecture.md follows one exec through it.
#include "daemon/session.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "daemon/server.h"
#include "daemon/shell_protocol.h"
#include "ipc/environ.h"
#include "ipc/wrapper_link.h"

namespace sbsh::daemon {

namespace {

using ipc::frame_builder;
using ipc::msg_type;

// After SIGKILL, how long a command may take to be reaped before we decide that the shell
// itself is the one running (a builtin loop) and restart it.
constexpr uint64_t kSettleMs = 300;
// Output frames queued to one client before we stop reading that command's pipes.
constexpr size_t kMaxClientQueue = 1u << 20;
// stdin bytes buffered for one command before we stop reading its client.
constexpr size_t kMaxStdinBuffer = 1u << 20;
// Background output pipes kept open (and discarded) per session after their commands ended.
constexpr size_t kMaxDraining = 64;
// Start limit: this many failed starts (the shell or an init command failed before any
// user command ran) within the window puts the session in state failed.
constexpr size_t kStartLimit = 5;
constexpr uint64_t kStartWindowUs = 10'000'000;
// Back-off between failed starts: the first restart is immediate, then 100 ms, doubling.
constexpr uint64_t kBackoffBaseMs = 100;
constexpr uint64_t kBackoffCapMs = 10'000;
// Kept per session for `session show`.
constexpr size_t kHistory = 20;
constexpr size_t kMaxInitOutput = 64u << 10;
// What `session ls` and `session show` call a command an earlier sbshd started.
constexpr std::string_view kEarlierCommand = "(started before sbshd restarted)";

void set_nonblock(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

}  // namespace

std::string_view state_name(session_state s) {
  switch (s) {
    case session_state::starting: return "starting";
    case session_state::ready: return "ready";
    case session_state::restarting: return "restarting";
    case session_state::exited: return "exited";
    case session_state::failed: return "failed";
  }
  return "unknown";
}

session::session(server& srv, std::string name, session_def def)
    : srv_(srv), name_(std::move(name)), def_(std::move(def)) {
  // The spare shell started exactly as this session's would, but for the session's own
  // variables and limits (so only a session with none takes it) and its directory (entered
  // on claim).
  if (def_.env.empty() && def_.limits.empty() && ::access(def_.cwd.c_str(), X_OK) == 0) {
    if (auto spare = srv_.take_spare()) {
      claim_spare(std::move(*spare));
      return;
    }
  }
  link_ = shell_link::with_slots(srv_.devnull(), name_);
  start_shell();
}

session::session(server& srv, std::string name, session_def def, adopted_shell&& shell)
    : srv_(srv), name_(std::move(name)), def_(std::move(def)) {
  adopt(std::move(shell));
}

session::~session() {
  stopping_ = true;
  for (timer* t : {kill_timer_, restart_timer_, health_timer_})
    if (t != nullptr) t->close();
  for (auto& d : draining_) d.watch->close();
  if (wrapper_ != nullptr) {
    // stop() already asked politely; a wrapper still alive now is stuck.
    wrapper_->kill(SIGKILL);
    pid_t pid = static_cast<pid_t>(wrapper_pid_);
    server* srv = &srv_;
    wrapper_->release([srv, pid, spare = protected_groups()](int64_t, int sig) {
      if (sig != 0) srv->reap_session_later(pid, spare);
    });
  }
  delete ctl_;
  if (status_watch_ != nullptr) status_watch_->close();
  remove_links(link_.dir, wrapper::kAdoptSocket);  // a killed wrapper cannot remove its socket
}

status session::point_slot(const unique_fd& slot, int fd) {
  if (::dup3(fd, slot.get(), O_CLOEXEC) < 0)
    return make_error(ipc::err::internal, fmt::format("dup3: {}", std::strerror(errno)));
  return ok_status();
}

void session::reset_slots() {
  (void)point_slot(link_.in, srv_.devnull());
  (void)point_slot(link_.out, srv_.devnull());
  (void)point_slot(link_.err, srv_.devnull());
}

uint64_t session::begin_start() {
  state_ = session_state::starting;
  shell_pid_ = wrapper_pid_ = 0;
  started_mono_us_ = mono_us();
  shell_started_ms_ = wall_ms();
  gen_user_commands_ = 0;
  init_failed_ = false;
  init_output_.clear();
  ping_sent_us_ = 0;
  return generation_;
}

void session::start_shell() {
  uint64_t gen = begin_start();
  link_.dir = srv_.new_shell_dir();
  auto ends = open_shell(link_, srv_.pid());
  if (!ends) {
    failure_ = ends.err().message;
    state_ = session_state::failed;
    spdlog::error("session {}: {}", name_, failure_);
    link_.script_w.reset();
    link_.status_r.reset();
    remove_links(link_.dir);
    return;
  }
  std::vector<std::string> env_store = ipc::inherited_environment("SBSH_SESSION");
  for (const auto& e : def_.env) env_store.push_back(e);  // later entries win in getenv
  env_store.push_back("SBSH_SESSION=" + name_);
  std::vector<std::string> args;
  for (const auto& l : def_.limits) {
    args.emplace_back("--limit");
    args.push_back(l);
  }
  args.push_back(name_);
  int err = 0;
  auto started = srv_.start_wrapper(
      link_, *ends, args, env_store, def_.cwd.c_str(),
      [this, gen](int64_t status, int sig) { on_wrapper_exit(gen, status, sig); }, &err);
  if (!started) {
    // posix_spawn reports a directory it cannot enter as if the program were missing.
    bool no_dir = ::access(def_.cwd.c_str(), X_OK) != 0;
    failure_ = !no_dir ? fmt::format("cannot start {}: {}", srv_.opts().wrapper_path, std::strerror(err))
               : def_.snapshot.empty()
                   ? fmt::format("cannot enter the session's directory {}: {}", def_.cwd, std::strerror(errno))
                   : fmt::format("cannot enter the session's copy of {} ({}): {}; remove the session and create "
                                 "it again for a new copy",
                                 def_.snapshot, def_.cwd, std::strerror(errno));
    spdlog::error("session {}: {}", name_, failure_);
    state_ = session_state::failed;
    link_.script_w.reset();
    link_.status_r.reset();
    remove_links(link_.dir);
    return;
  }
  wrapper_ = started->proc;
  watch_shell(gen, std::move(started->ctl));
}

void session::adopt(adopted_shell&& shell) {
  uint64_t gen = begin_start();
  link_ = shell_link::with_slots(srv_.devnull(), name_);
  link_.dir = shell.dir;
  link_.script_w = std::move(shell.script_w);
  link_.status_r = std::move(shell.status_r);
  wrapper_ = child_process::watch(srv_.loop(), shell.wrapper_pid,
                                  [this, gen](int64_t status, int sig) { on_wrapper_exit(gen, status, sig); });
  // From here on the shell opens this sbshd's slots. The sync line tells the statuses of
  // commands the earlier sbshd started (at most one) from those of ours.
  auto linked = point_links(link_.dir, link_.slots(srv_.pid()));
  bool synced = linked && ::write(link_.script_w.get(), kSyncLine.data(), kSyncLine.size()) ==
                              static_cast<ssize_t>(kSyncLine.size());
  if (wrapper_ == nullptr || !synced) {
    spdlog::warn("session {}: cannot take over its shell ({}); starting a new one", name_,
                 wrapper_ == nullptr ? "its wrapper has ended"
                 : !linked           ? linked.err().message
                                     : fmt::format("writing to the shell: {}", std::strerror(errno)));
    if (wrapper_ != nullptr) {
      wrapper_->kill(SIGTERM);  // it ends the shell and what it started
      wrapper_->release();
      wrapper_ = nullptr;
    }
    remove_links(link_.dir);
    link_.script_w.reset();
    link_.status_r.reset();
    start_shell();
    return;
  }
  shell_pid_ = shell.shell_pid;
  shell_started_ms_ = shell.started_at_ms;
  uint64_t age_us = static_cast<uint64_t>(std::max<int64_t>(0, wall_ms() - shell.started_at_ms)) * 1000;
  started_mono_us_ = mono_us() - std::min(age_us, mono_us());
  protected_.clear();
  for (pid_t g : shell.groups) protected_[g];
  for (auto& [g, pipes] : shell.pipes) protected_[g] = std::move(pipes);
  awaiting_sync_ = true;
  adopted_ms_ = wall_ms();
  state_ = session_state::ready;
  watch_shell(gen, std::move(shell.ctl), /*run_init=*/false);
}

void session::claim_spare(spare_shell&& spare) {
  uint64_t gen = begin_start();
  link_ = std::move(spare.link);
  wrapper_ = spare.wrapper.proc;
  wrapper_->on_exit([this, gen](int64_t status, int sig) { on_wrapper_exit(gen, status, sig); });
  // What a shell started for this session would have had from the start: the session's
  // name in its environment, its directory (with OLDPWD as bash set it at start-up), and
  // SECONDS counted from now. No user code has run in this shell yet, so the names are
  // plain. The line waits in the pipe behind the start-up script's.
  std::string dir = shell_quote(def_.cwd);
  std::string line = fmt::format(
      "export SBSH_SESSION={0};if [[ -v OLDPWD ]];then __sbsh_o=$OLDPWD;cd -P -- {1};OLDPWD=$__sbsh_o;"
      "unset __sbsh_o;else cd -P -- {1};unset OLDPWD;export OLDPWD;fi;SECONDS=0\n",
      name_, dir);
  if (::write(link_.script_w.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    spdlog::warn("session {}: the spare shell did not take its session: {}", name_, std::strerror(errno));
  // The wrapper learns the session's name (for ps and its log) and enters its directory.
  frame_builder f(msg_type::claim);
  f.str("session", name_).str("cwd", def_.cwd);
  watch_shell(gen, std::move(spare.wrapper.ctl));
  ctl_->send(f.take());
}

void session::on_wrapper_exit(uint64_t gen, int64_t status, int sig) {
  if (gen != generation_) return;
  // The handle frees itself after this callback: forget it first.
  wrapper_ = nullptr;
  pid_t pid = static_cast<pid_t>(wrapper_pid_);
  std::set<pid_t> spare = protected_groups();
  // What the wrapper said before it exited (how its shell ended, or why it could not
  // start) may still be unread on the control socket, and explains the loss better than
  // the wrapper's own exit: deliver it first. It may end this generation.
  if (ctl_ != nullptr) ctl_->read_pending();
  if (sig != 0) srv_.reap_session_later(pid, spare);
  on_shell_lost(gen, std::nullopt, std::nullopt,
                sig != 0     ? fmt::format("its wrapper was killed by signal {}", sig)
                : status < 0 ? std::string("its wrapper ended")  // adopted: not our child
                             : fmt::format("its wrapper exited with status {}", status));
}

void session::watch_shell(uint64_t gen, unique_fd ctl, bool run_init) {
  wrapper_pid_ = wrapper_->pid();
  ctl_ = new framed_socket(srv_.loop(), std::move(ctl),
                           {[this, gen](ipc::envelope&& env) { on_control(gen, std::move(env)); },
                            [this, gen](const std::string& reason) {
                              on_shell_lost(gen, std::nullopt, std::nullopt,
                                            fmt::format("its wrapper's control socket closed ({})", reason));
                            }},
                           /*read_chunk=*/1024);
  status_watch_ = fd_watch::create(srv_.loop(), link_.status_r.get());
  status_watch_->start(UV_READABLE, [this, gen](int, int) { on_status_readable(gen); });
  if (run_init) {
    spdlog::info("session {}: shell starting (wrapper pid {}, generation {})", name_, wrapper_pid_, gen);
    // The background processes' pipes were lent to the wrapper that ended: lend them to
    // this one, which is the one a later sbshd would adopt.
    for (const auto& [g, pipes] : protected_)
      if (!pipes.fds.empty()) send_protect(g, pipes);
    queue_init_jobs();
  } else {
    spdlog::info("session {}: adopted its running shell (wrapper pid {}, shell pid {})", name_, wrapper_pid_,
                 shell_pid_);
  }
  if (health_timer_ == nullptr && srv_.health_interval_ms() > 0) {
    health_timer_ = timer::create(srv_.loop());
    health_timer_->start(srv_.health_interval_ms(), [this] { health_tick(); });
  }
  run_next();
}

void session::queue_init_jobs() {
  for (auto it = def_.init.rbegin(); it != def_.init.rend(); ++it) {
    auto job = std::make_unique<exec_job>();
    job->internal = true;
    job->session = name_;
    job->command = job->text = *it;
    job->generation = generation_;
    job->on_done = [this](exec_job& j) { finish_init_job(j); };
    queue_.push_front(std::move(job));
  }
}

void session::health_tick() {
  // A wrapper answers pings from its own loop whatever the shell is doing, so a long command
  // is never mistaken for a hang; a stopped or deadlocked wrapper is.
  uint64_t interval = srv_.health_interval_ms();
  if (ctl_ != nullptr && state_ != session_state::restarting) {
    if (ping_sent_us_ != 0 && mono_us() - ping_sent_us_ > interval * 1000) {
      restart_shell(fmt::format("its wrapper did not answer a health check within {} ms (stopped or hung)",
                                interval),
                    /*forced=*/false);
    } else if (ping_sent_us_ == 0) {
      ping_sent_us_ = mono_us();
      ctl_->send(frame_builder(msg_type::ping, ++ping_seq_).take());
    }
  }
  if (health_timer_ != nullptr) health_timer_->start(interval, [this] { health_tick(); });
}

void session::on_control(uint64_t gen, ipc::envelope&& env) {
  if (gen != generation_) return;
  const auto& m = env.msg;
  switch (m.type()) {
    case msg_type::pong:
      if (m.id() == ping_seq_) ping_sent_us_ = 0;
      break;
    case msg_type::wrapper_ready: {
      auto pid = m.get_i64("shell_pid");
      if (pid && pid.value()) shell_pid_ = *pid.value();
      if (state_ == session_state::starting) state_ = session_state::ready;
      spdlog::debug("session {}: shell pid {} ready", name_, shell_pid_);
      dispatch_statuses();  // any that came first
      break;
    }
    case msg_type::signal_result: {
      if (!current_ || m.id() != signal_seq_) break;
      auto count = m.get_u64("count");
      exec_job& job = *current_;
      if (job.kill_stage == 1) {
        if (count && count.value().value_or(0) == 0) {
          escalate(job);  // nothing outside the shell to signal: a builtin is running
        } else {
          if (kill_timer_ != nullptr) kill_timer_->close();
          kill_timer_ = timer::create(srv_.loop());
          kill_timer_->start(job.grace_ms, [this] {
            if (current_ && current_->kill_stage == 1) escalate(*current_);
          });
        }
      } else if (job.kill_stage == 2) {
        if (count && count.value().value_or(0) == 0) {
          escalate(job);  // nothing left but the shell itself
          break;
        }
        if (kill_timer_ != nullptr) kill_timer_->close();
        kill_timer_ = timer::create(srv_.loop());
        kill_timer_->start(kSettleMs, [this] {
          if (current_ && current_->kill_stage == 2) escalate(*current_);
        });
      }
      break;
    }
    case msg_type::shell_exited: {
      auto code = m.get_i64("exit_code");
      auto sig = m.get_i64("signal");
      auto error = m.get_str("error");
      std::optional<int> c, s;
      if (code && code.value()) c = static_cast<int>(*code.value());
      if (sig && sig.value()) s = static_cast<int>(*sig.value());
      std::string why = s   ? fmt::format("its shell was killed by signal {}", *s)
                        : c ? fmt::format("its shell exited with status {}", *c)
                            : fmt::format("its shell could not start: {}",
                                          error && error.value() ? *error.value() : "unknown reason");
      if (!c && !s && current_) current_->undelivered = true;  // no shell ever read it
      on_shell_lost(gen, c, s, why);
      break;
    }
    default:
      break;
  }
}

void session::on_status_readable(uint64_t gen) {
  if (gen != generation_) return;
  char buf[256];
  for (;;) {
    ssize_t n = ::read(link_.status_r.get(), buf, sizeof buf);
    if (n <= 0) break;
    status_buf_.append(buf, static_cast<size_t>(n));
  }
  if (status_buf_.size() > 4096) status_buf_.clear();  // garbage written into the pipe
  // The wrapper reports the shell's pid before bash can run anything, but both may arrive in
  // one turn of the loop: statuses wait for that report (wrapper_ready), so that no command
  // is seen to end in a shell whose pid sbsh does not know yet.
  if (state_ != session_state::starting) dispatch_statuses();
}

void session::dispatch_statuses() {
  size_t nl;
  while ((nl = status_buf_.find('\n')) != std::string::npos) {
    std::string_view line(status_buf_.data(), nl);
    bool sync = line == kSyncStatus;
    auto v = parse_status_line(line);
    status_buf_.erase(0, nl + 1);
    if (sync) {
      awaiting_sync_ = false;
      continue;
    }
    if (!v) {
      spdlog::warn("session {}: ignoring a malformed status line from the shell", name_);
      continue;
    }
    if (awaiting_sync_) {
      // A command the earlier sbshd started ran on while no sbshd was there. Nobody waits
      // for its result any more; `session show` lists it, timed from the adoption.
      spdlog::info("session {}: a command started before sbshd restarted ended with status {}", name_, *v);
      history_.push_back({std::string(kEarlierCommand), *v, false, false, adopted_ms_,
                          static_cast<uint64_t>(std::max<int64_t>(0, wall_ms() - adopted_ms_))});
      if (history_.size() > kHistory) history_.pop_front();
      continue;
    }
    if (!current_ || !current_->started) continue;  // a stale status from a cancelled start
    auto job = std::move(current_);
    job->outcome.exit_code = *v;
    if (*v > 128 && *v < 128 + 65) job->outcome.signal = *v - 128;
    finish_job(std::move(job));
  }
  if (status_buf_.size() > 64) status_buf_.clear();  // garbage written into the slot
  if (!current_) run_next();
}

void session::on_shell_lost(uint64_t gen, std::optional<int> exit_code, std::optional<int> signal,
                            const std::string& why) {
  if (gen != generation_ || stopping_) return;
  spdlog::warn("session {}: shell lost: {}", name_, why);
  bool failed_start = gen_user_commands_ == 0 || init_failed_;
  bool forced = forcing_restart_;
  bool clean_exit = exit_code && *exit_code == 0 && !signal;
  bool wanted = forced || def_.restart == restart_policy::always ||
                (def_.restart == restart_policy::on_failure && !clean_exit);
  if (current_) {
    auto job = std::move(current_);
    auto& o = job->outcome;
    o.shell_restarted = true;
    if (job->kill_stage < 3) {
      if (signal) {
        o.exit_code = 128 + *signal;
        o.signal = signal;
      } else if (exit_code) {
        o.exit_code = exit_code;
      }
    }
    if (!o.exit_code) {
      std::string next = wanted ? "a new shell is being started"
                                : fmt::format("no new shell starts (restart policy {})", policy_name(def_.restart));
      o.error_code = std::string(ipc::err::shell_restarted);
      if (o.timed_out || o.cancelled)
        o.error = "the command ran in the shell itself (a builtin), so the shell was restarted "
                  "to stop it; the session's state was lost";
      else if (job->undelivered)
        o.error = fmt::format("the command did not run ({}); {}", why, next);
      else
        o.error = fmt::format("the session's shell ended while running the command ({}); the "
                              "session's state was lost and {}",
                              why, next);
    }
    finish_job(std::move(job));
  }
  // After shell_exited the wrapper is cleaning up the session's processes and exits by
  // itself; in every other case it is dead or must die now.
  detach_generation(/*kill_wrapper=*/!exit_code && !signal);
  ++generation_;
  if (!wanted) {
    state_ = session_state::exited;
    failure_ = fmt::format("its shell ended ({}) and its restart policy is {}", why, policy_name(def_.restart));
    run_next();  // refuses what is queued
    return;
  }
  schedule_restart(why, failed_start, forced);
}

void session::schedule_restart(const std::string& why, bool failed_start, bool forced) {
  ++restarts_;
  uint64_t now = mono_us();
  if (failed_start && !forced) {
    failed_starts_.push_back(now);
    ++consecutive_failures_;
  } else {
    consecutive_failures_ = 0;
  }
  while (!failed_starts_.empty() && now - failed_starts_.front() > kStartWindowUs) failed_starts_.pop_front();
  if (failed_starts_.size() >= kStartLimit) {
    state_ = session_state::failed;
    failure_ = fmt::format("{} starts failed within {} s (last: {}{})", failed_starts_.size(),
                           kStartWindowUs / 1000000, why,
                           init_failed_ ? "; see the init output with 'sbsh session show'" : "");
    spdlog::error("session {}: failed: {}", name_, failure_);
    run_next();  // refuses what is queued
    return;
  }
  uint64_t delay = consecutive_failures_ <= 1
                       ? 0
                       : std::min(kBackoffBaseMs << std::min(consecutive_failures_ - 2, 20u), kBackoffCapMs);
  if (delay == 0) {
    start_shell();
    return;
  }
  state_ = session_state::restarting;
  restart_timer_ = timer::create(srv_.loop());
  restart_timer_->start(delay, [this] {
    restart_timer_->close();
    restart_timer_ = nullptr;
    start_shell();
  });
}

void session::restart(const std::string& why) {
  if (restart_timer_ != nullptr) {
    restart_timer_->close();
    restart_timer_ = nullptr;
  }
  failed_starts_.clear();
  consecutive_failures_ = 0;
  failure_.clear();
  if (ctl_ != nullptr || wrapper_ != nullptr) {
    restart_shell(why, /*forced=*/true);
    return;
  }
  ++generation_;  // what waited for the old shell must not run in the new one unawares
  ++restarts_;
  start_shell();
}

void session::detach_generation(bool kill_wrapper) {
  if (kill_timer_ != nullptr) {
    kill_timer_->close();
    kill_timer_ = nullptr;
  }
  if (wrapper_ != nullptr) {
    if (kill_wrapper) wrapper_->kill(SIGKILL);  // its bash dies with it (PDEATHSIG)
    // A wrapper that dies of a signal leaves the session's other processes behind.
    pid_t pid = static_cast<pid_t>(wrapper_pid_);
    server* srv = &srv_;
    wrapper_->release([srv, pid, spare = protected_groups()](int64_t, int sig) {
      if (sig != 0) srv->reap_session_later(pid, spare);
    });
    wrapper_ = nullptr;
  }
  if (ctl_ != nullptr) {
    delete ctl_;
    ctl_ = nullptr;
  }
  if (status_watch_ != nullptr) {
    status_watch_->close();
    status_watch_ = nullptr;
  }
  link_.status_r.reset();
  link_.script_w.reset();
  // A wrapper that exits by itself removes its adoption socket, and then the directory; a
  // killed one cannot.
  remove_links(link_.dir, kill_wrapper ? wrapper::kAdoptSocket : nullptr);
  link_.dir.clear();
  status_buf_.clear();
  awaiting_sync_ = false;
  shell_pid_ = 0;
  reset_slots();
}

void session::protect_group(pid_t pgid, lent_pipes pipes) {
  auto& kept = protected_[pgid] = std::move(pipes);
  send_protect(pgid, kept);
}

void session::send_protect(pid_t pgid, const lent_pipes& pipes) {
  if (ctl_ == nullptr) return;
  std::vector<unique_fd> fds;
  for (const auto& fd : pipes.fds) {
    unique_fd d(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0));
    if (!d) {
      spdlog::warn("session {}: cannot lend the pipes of process {} to the wrapper: {}", name_, pipes.proc,
                   std::strerror(errno));
      fds.clear();
      break;
    }
    fds.push_back(std::move(d));
  }
  frame_builder f(msg_type::protect_group);
  f.i64("pgid", pgid);
  if (!fds.empty()) f.u64("proc", pipes.proc).str("streams", pipes.streams).u64("fds", fds.size());
  ctl_->send(f.take(), std::move(fds));
}

std::set<pid_t> session::protected_groups() const {
  std::set<pid_t> groups;
  for (const auto& [g, pipes] : protected_) groups.insert(g);
  return groups;
}

void session::unprotect_group(pid_t pgid) {
  protected_.erase(pgid);
  if (ctl_ != nullptr) ctl_->send(frame_builder(msg_type::unprotect_group).i64("pgid", pgid).take());
}

void session::run_internal(std::string text, std::function<void(exec_job&)> on_done) {
  auto job = std::make_unique<exec_job>();
  job->internal = true;
  job->session = name_;
  job->command = job->text = std::move(text);
  job->on_done = std::move(on_done);
  enqueue(std::move(job));
}

void session::enqueue(std::unique_ptr<exec_job> job) {
  // A failed session tries again once the crash-loop window has passed.
  if (state_ == session_state::failed && !failed_starts_.empty() &&
      mono_us() - failed_starts_.back() > kStartWindowUs) {
    spdlog::info("session {}: trying to start its shell again", name_);
    restart("a command arrived after the start limit's window");
  }
  job->generation = generation_;
  queue_.push_back(std::move(job));
  run_next();
}

void session::run_next() {
  while (!current_ && !queue_.empty()) {
    if (state_ == session_state::restarting) return;  // the next shell will take them
    if (awaiting_sync_) return;  // the shell still runs a command an earlier sbshd started
    auto job = std::move(queue_.front());
    queue_.pop_front();
    if (state_ == session_state::failed || state_ == session_state::exited) {
      job->outcome.error_code = std::string(ipc::err::session_failed);
      job->outcome.error =
          fmt::format("session '{}' is {}: {}; run 'sbsh session restart {}' to start a new shell", name_,
                      state_name(state_), failure_, name_);
      finish_job(std::move(job));
      continue;
    }
    if (job->generation != generation_) {
      job->outcome.error_code = std::string(ipc::err::shell_restarted);
      job->outcome.shell_restarted = true;
      job->outcome.error = "not run: the session's shell restarted while this command was queued, "
                           "so the state it expected was lost";
      finish_job(std::move(job));
      continue;
    }
    if (!start_job(*job)) {
      finish_job(std::move(job));
      continue;
    }
    current_ = std::move(job);
  }
}

bool session::start_job(exec_job& job) {
  auto fail = [&](const std::string& what) {
    job.outcome.error_code = std::string(ipc::err::internal);
    job.outcome.error = what;
    return false;
  };
  if (!store_command_text(link_.text.get(), job.text, text_slot_size_))
    return fail(fmt::format("cannot store the command text: {}", std::strerror(errno)));

  if (!job.io_fds) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return fail("cannot create a pipe");
    job.out_r = unique_fd(out[0]);
    job.out_w = unique_fd(out[1]);
    if (::pipe2(err, O_CLOEXEC) != 0) return fail("cannot create a pipe");
    job.err_r = unique_fd(err[0]);
    job.err_w = unique_fd(err[1]);
    set_nonblock(job.out_r.get());
    set_nonblock(job.err_r.get());
    if (job.has_stdin) {
      int in[2];
      if (::pipe2(in, O_CLOEXEC) != 0) return fail("cannot create a pipe");
      job.in_r = unique_fd(in[0]);
      job.in_w = unique_fd(in[1]);
      set_nonblock(job.in_w.get());
    }
  }
  bool piped_stdin = static_cast<bool>(job.in_r);
  if (!point_slot(link_.out, job.out_w.get()) || !point_slot(link_.err, job.err_w.get()) ||
      (piped_stdin && !point_slot(link_.in, job.in_r.get())))
    return fail("cannot set up the command's descriptors");
  job.out_w.reset();
  job.err_w.reset();
  job.in_r.reset();

  job.mark = procs::mark_now(srv_.ns_last_pid_fd());
  job.started_at_ms = wall_ms();
  job.started_mono_us = mono_us();
  std::string_view line = piped_stdin ? kRunLineStdin : kRunLine;
  if (::write(link_.script_w.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    if (errno != EPIPE) {
      reset_slots();
      return fail(fmt::format("cannot write to the session's shell: {}", std::strerror(errno)));
    }
    // Nothing holds the script pipe's read end: the shell has ended, or could not start, and
    // its loss is on its way (on_shell_lost). The command stays in flight until then and is
    // answered as one that never ran.
    job.undelivered = true;
    spdlog::debug("session {}: the shell was gone before command {} reached it", name_, job.id);
  }
  job.started = true;
  if (!job.internal) {
    ++commands_;
    ++gen_user_commands_;
  }

  if (job.timeout_ms > 0) {
    job.deadline = timer::create(srv_.loop());
    exec_job* jp = &job;
    job.deadline->start(job.timeout_ms, [this, jp] {
      if (current_.get() != jp) return;
      jp->outcome.timed_out = true;
      if (jp->kill_stage == 0) escalate(*jp);
    });
  }
  if (!job.io_fds) {
    exec_job* jp = &job;
    job.out_watch = fd_watch::create(srv_.loop(), job.out_r.get());
    job.out_watch->start(UV_READABLE, [this, jp](int, int) { pump_output(*jp, ipc::kStdout, false); });
    job.err_watch = fd_watch::create(srv_.loop(), job.err_r.get());
    job.err_watch->start(UV_READABLE, [this, jp](int, int) { pump_output(*jp, ipc::kStderr, false); });
    if (job.in_w) pump_stdin(job);
  }
  return true;
}

void session::finish_job(std::unique_ptr<exec_job> job) {
  uint64_t dur = job->started ? mono_us() - job->started_mono_us : 0;
  // Input the command did not take is dropped with it; if there was too much of it, its
  // client's socket was paused (stdin_data) and must now serve the client's next requests.
  if (job->client != nullptr && job->stdin_pending.size() > kMaxStdinBuffer) job->client->pause_reading(false);
  job->stdin_pending.clear();
  if (job->started) {
    reset_slots();
    if (!job->io_fds && (job->client != nullptr || job->internal)) {
      // Everything the command wrote before it ended is in the pipes now: forward it.
      pump_output(*job, ipc::kStdout, true);
      pump_output(*job, ipc::kStderr, true);
    }
  }
  if (kill_timer_ != nullptr) {
    kill_timer_->close();
    kill_timer_ = nullptr;
  }
  spdlog::debug("session {}: exec {} done: exit {} signal {} timed_out {}", name_, job->id,
                job->outcome.exit_code.value_or(-1), job->outcome.signal.value_or(0), job->outcome.timed_out);
  if (job->internal) {
    drain_outputs(*job);
    if (job->on_done) job->on_done(*job);
    return;
  }
  if (job->started) {
    history_.push_back({job->command.substr(0, 256), job->outcome.exit_code, job->outcome.timed_out,
                        job->outcome.shell_restarted, job->started_at_ms, dur / 1000});
    if (history_.size() > kHistory) history_.pop_front();
  }
  client_conn* c = job->client;
  if (c != nullptr) c->send(done_frame(*job, dur));
  // Output pipes may still be held by background jobs the command started: keep reading
  // (and discarding) so they do not die of SIGPIPE, but never into a later result.
  if (job->io_fds && c != nullptr && !job->released && (job->out_r || job->err_r)) {
    unreleased_.push_back(std::move(job));
    return;
  }
  drain_outputs(*job);
  if (c != nullptr) srv_.job_done(c, job->id);
}

void session::finish_init_job(exec_job& job) {
  for (const auto* part : {&job.captured_out, &job.captured_err}) {
    size_t room = kMaxInitOutput > init_output_.size() ? kMaxInitOutput - init_output_.size() : 0;
    init_output_.append(part->substr(0, room));
  }
  const auto& o = job.outcome;
  if (o.exit_code == 0 || !job.started || init_failed_) return;
  // A failing init command fails this start: the session's commands must not run in a
  // shell that was not set up as defined.
  init_failed_ = true;
  std::string why = o.exit_code ? fmt::format("init command '{}' exited with status {}", job.command, *o.exit_code)
                                : fmt::format("init command '{}' did not finish: {}", job.command, o.error);
  init_output_ += fmt::format("[{}]\n", why);
  if (ctl_ != nullptr) {
    // Deferred: we may be inside the status callback of this very shell.
    auto* t = timer::create(srv_.loop());
    uint64_t gen = generation_;
    t->start(0, [this, t, gen, why] {
      t->close();
      if (gen == generation_) restart_shell(why, /*forced=*/false);
    });
  }
}

void session::escalate(exec_job& job) {
  switch (job.kill_stage) {
    case 0:
      job.kill_stage = 1;
      send_signal(job, job.first_signal);
      break;
    case 1:
      job.kill_stage = 2;
      send_signal(job, SIGKILL);
      break;
    case 2:
      job.kill_stage = 3;
      restart_shell("a command had to be stopped while the shell itself was running it", /*forced=*/true);
      break;
    default:
      break;
  }
}

void session::send_signal(exec_job& job, int sig) {
  if (ctl_ == nullptr) return;
  frame_builder f(msg_type::signal_command, ++signal_seq_);
  f.i64("since_pid", job.mark.last_pid).u64("since_ticks", job.mark.start_ticks).i64("signal", sig);
  ctl_->send(f.take());
}

void session::restart_shell(const std::string& why, bool forced) {
  forcing_restart_ = forced;
  on_shell_lost(generation_, std::nullopt, std::nullopt, why);
  forcing_restart_ = false;
}

bool session::cancel(client_conn* c, uint64_t id, int sig) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if ((*it)->client == c && (*it)->id == id) {
      auto job = std::move(*it);
      queue_.erase(it);
      job->outcome.cancelled = true;
      job->outcome.error_code = "cancelled";
      job->outcome.error = "cancelled before it started";
      finish_job(std::move(job));
      return true;
    }
  }
  if (!current_ || current_->client != c || current_->id != id) return false;
  if (sig != 0) {
    send_signal(*current_, sig);
    return true;
  }
  current_->outcome.cancelled = true;
  if (current_->kill_stage == 0) escalate(*current_);
  return true;
}

void session::client_gone(client_conn* c) {
  std::erase_if(queue_, [c](const auto& j) { return j->client == c; });
  std::erase_if(unreleased_, [this, c](auto& j) {
    if (j->client != c) return false;
    drain_outputs(*j);
    return true;
  });
  if (current_ && current_->client == c) {
    // As a terminal hang-up would: SIGHUP to the command, then SIGKILL after the grace.
    current_->client = nullptr;
    current_->first_signal = SIGHUP;
    if (current_->kill_stage == 0) escalate(*current_);
    if (current_->in_watch != nullptr) {
      current_->in_watch->close();
      current_->in_watch = nullptr;
    }
    current_->in_w.reset();
  }
}

void session::release(client_conn* c, uint64_t id) {
  for (auto it = unreleased_.begin(); it != unreleased_.end(); ++it) {
    if ((*it)->client == c && (*it)->id == id) {
      auto job = std::move(*it);
      unreleased_.erase(it);
      drain_outputs(*job);
      srv_.job_done(c, id);
      return;
    }
  }
  for (auto& j : queue_)
    if (j->client == c && j->id == id) j->released = true;
  if (current_ && current_->client == c && current_->id == id) current_->released = true;
}

void session::drain_outputs(exec_job& job) {
  // A descriptor can be watched by one handle only: stop the job's own watches first.
  for (fd_watch** w : {&job.out_watch, &job.err_watch}) {
    if (*w != nullptr) (*w)->close();
    *w = nullptr;
  }
  if (job.out_r) keep_draining(std::move(job.out_r));
  if (job.err_r) keep_draining(std::move(job.err_r));
}

void session::keep_draining(unique_fd fd) {
  if (draining_.size() >= kMaxDraining) {
    draining_.front().watch->close();
    draining_.pop_front();
  }
  set_nonblock(fd.get());
  // Usually nobody else holds the pipe and it is at end-of-file already: no need to watch.
  char buf[16384];
  ssize_t n;
  while ((n = ::read(fd.get(), buf, sizeof buf)) > 0) {
  }
  if (n == 0 || errno != EAGAIN) return;
  auto* w = fd_watch::create(srv_.loop(), fd.get());
  int raw = fd.get();
  draining_.push_back({std::move(fd), w});
  w->start(UV_READABLE | UV_DISCONNECT, [this, raw](int, int) {
    char buf[16384];
    ssize_t n;
    while ((n = ::read(raw, buf, sizeof buf)) > 0) {
    }
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      std::erase_if(draining_, [raw](drain_entry& d) {
        if (d.fd.get() != raw) return false;
        d.watch->close();
        return true;
      });
    }
  });
}

void session::pump_output(exec_job& job, int stream_no, bool drain) {
  unique_fd& fd = stream_no == ipc::kStdout ? job.out_r : job.err_r;
  if (!fd) return;
  char buf[64 * 1024];
  for (int rounds = 0; drain || rounds < 4; ++rounds) {
    if (job.client != nullptr && !drain && job.client->queued_bytes() > kMaxClientQueue) {
      set_output_paused(job, true);  // backpressure: the pipe fills and the command waits
      return;
    }
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n <= 0) {
      if (n == 0) {  // every writer is gone: stop watching this stream
        fd_watch*& w = stream_no == ipc::kStdout ? job.out_watch : job.err_watch;
        if (w != nullptr) {
          w->close();
          w = nullptr;
        }
      }
      return;
    }
    if (job.internal) {
      std::string& keep = stream_no == ipc::kStdout ? job.captured_out : job.captured_err;
      size_t room = kMaxInitOutput > keep.size() ? kMaxInitOutput - keep.size() : 0;
      keep.append(buf, std::min(room, static_cast<size_t>(n)));
      continue;
    }
    if (job.client == nullptr) continue;  // nobody to deliver to: discard
    frame_builder f(msg_type::output, job.id);
    f.u64("stream", static_cast<uint64_t>(stream_no)).bin("data", buf, static_cast<size_t>(n));
    job.client->send(f.take());
  }
}

void session::set_output_paused(exec_job& job, bool paused) {
  int ev = paused ? 0 : UV_READABLE;
  if (job.out_watch != nullptr) job.out_watch->set_events(ev);
  if (job.err_watch != nullptr) job.err_watch->set_events(ev);
}

void session::client_drained(client_conn* c) {
  if (current_ && current_->client == c && !current_->io_fds) {
    set_output_paused(*current_, false);
    pump_output(*current_, ipc::kStdout, false);
    if (current_) pump_output(*current_, ipc::kStderr, false);
  }
}

void session::stdin_data(client_conn* c, uint64_t id, std::string_view data, bool eof) {
  exec_job* job = nullptr;
  if (current_ && current_->client == c && current_->id == id) job = current_.get();
  for (auto& j : queue_)
    if (j->client == c && j->id == id) job = j.get();
  if (job == nullptr || job->io_fds || !job->has_stdin || job->stdin_eof) return;
  job->stdin_pending.append(data);
  if (eof) job->stdin_eof = true;
  if (job->stdin_pending.size() > kMaxStdinBuffer) c->pause_reading(true);
  if (job->started && job->in_w) pump_stdin(*job);
}

void session::pump_stdin(exec_job& job) {
  while (!job.stdin_pending.empty()) {
    ssize_t n = ::write(job.in_w.get(), job.stdin_pending.data(), job.stdin_pending.size());
    if (n < 0) {
      if (errno == EAGAIN) break;
      job.stdin_pending.clear();  // the command closed its stdin: the rest is not wanted
      job.in_w.reset();
      break;
    }
    job.stdin_pending.erase(0, static_cast<size_t>(n));
  }
  if (job.client != nullptr && job.stdin_pending.size() <= kMaxStdinBuffer) job.client->pause_reading(false);
  bool waiting = !job.stdin_pending.empty() && job.in_w;
  if (waiting && job.in_watch == nullptr) {
    exec_job* jp = &job;
    job.in_watch = fd_watch::create(srv_.loop(), job.in_w.get());
    job.in_watch->start(UV_WRITABLE, [this, jp](int, int) { pump_stdin(*jp); });
  } else if (!waiting && job.in_watch != nullptr) {
    job.in_watch->close();
    job.in_watch = nullptr;
  }
  if (job.stdin_pending.empty() && job.stdin_eof) job.in_w.reset();
}

void session::stop() {
  stopping_ = true;
  for (timer** t : {&restart_timer_, &health_timer_})
    if (*t != nullptr) {
      (*t)->close();
      *t = nullptr;
    }
  for (auto& j : queue_) {
    j->outcome.error_code = std::string(ipc::err::shutting_down);
    j->outcome.error = "sbshd is shutting down";
  }
  while (!queue_.empty()) {
    auto j = std::move(queue_.front());
    queue_.pop_front();
    finish_job(std::move(j));
  }
  if (current_) {
    auto j = std::move(current_);
    j->outcome.shell_restarted = true;
    j->outcome.error_code = std::string(ipc::err::shutting_down);
    j->outcome.error = "sbshd is shutting down; the command was stopped";
    finish_job(std::move(j));
  }
  if (wrapper_ != nullptr) wrapper_->kill(SIGTERM);  // the wrapper ends the whole session
}

void session::abandon() {
  stopping_ = true;
  for (timer** t : {&restart_timer_, &health_timer_, &kill_timer_})
    if (*t != nullptr) {
      (*t)->close();
      *t = nullptr;
    }
  auto refuse = [](exec_job& j, const char* what) {
    j.outcome.error_code = std::string(ipc::err::shutting_down);
    j.outcome.error = what;
  };
  while (!queue_.empty()) {
    auto j = std::move(queue_.front());
    queue_.pop_front();
    refuse(*j, "sbshd is shutting down; the command did not run (the session is kept for the next sbshd)");
    finish_job(std::move(j));
  }
  if (current_) {
    auto j = std::move(current_);
    refuse(*j, "sbshd is shutting down; the command goes on in the session, which the next sbshd adopts, "
               "but its result cannot be delivered");
    finish_job(std::move(j));
  }
  // The wrapper sees its control socket close, keeps the shell, and waits for adoption.
  if (wrapper_ != nullptr) {
    wrapper_->forget();
    wrapper_ = nullptr;
  }
  delete ctl_;
  ctl_ = nullptr;
  if (status_watch_ != nullptr) {
    status_watch_->close();
    status_watch_ = nullptr;
  }
  link_.dir.clear();  // the links stay for the next sbshd
}

bool session::stopped_and_gone() const { return wrapper_ == nullptr || wrapper_->exited(); }

session_status session::describe() const {
  session_status st;
  st.name = name_;
  // An adopted shell may still run a command the earlier sbshd started (its status comes
  // before the sync line's): shown as running, timed from the adoption.
  bool earlier = awaiting_sync_ && current_ == nullptr;
  bool has_running = (current_ != nullptr && !current_->internal) || earlier;
  st.state = has_running && state_ == session_state::ready ? "running" : state_name(state_);
  st.wrapper_pid = wrapper_pid_;
  st.shell_pid = shell_pid_;
  st.restarts = restarts_;
  st.queued = queue_.size();
  st.commands = commands_;
  st.cwd = def_.cwd;
  if (shell_pid_ > 0) {
    char buf[4096];
    ssize_t n = ::readlink(fmt::format("/proc/{}/cwd", shell_pid_).c_str(), buf, sizeof buf - 1);
    if (n > 0) st.cwd.assign(buf, static_cast<size_t>(n));
  }
  st.error = failure_;
  st.started_at_ms = shell_started_ms_;
  st.uptime_ms = shell_pid_ > 0 ? (mono_us() - started_mono_us_) / 1000 : 0;
  st.restart = policy_name(def_.restart);
  if (has_running && earlier) {
    st.running = kEarlierCommand;
    st.running_ms = static_cast<uint64_t>(std::max<int64_t>(0, wall_ms() - adopted_ms_));
  } else if (has_running) {
    st.running = std::string_view(current_->command).substr(0, 256);
    st.running_ms = (mono_us() - current_->started_mono_us) / 1000;
  }
  return st;
}

session_detail session::describe_full() const {
  session_detail d;
  d.status = describe();
  d.definition = spec_of(def_);
  d.init_output = init_output_;
  d.history.assign(history_.begin(), history_.end());
  return d;
}

}  // namespace sbsh::daemon
