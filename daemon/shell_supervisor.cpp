// A session's shell across its generations; see shell_supervisor.h.
#include "daemon/shell_supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/environ.h"
#include "common/paths.h"
#include "common/procs.h"
#include "daemon/session_host.h"
#include "ipc/messages.h"
#include "ipc/wrapper_link.h"

namespace sbsh::daemon {

namespace {

namespace msg = ipc::msg;
using ipc::msg_type;

// Start limit: this many failed starts (the shell or an init command failed before any
// user command ran) within the window puts the session in state failed.
constexpr size_t kStartLimit = 5;
constexpr uint64_t kStartWindowUs = 10'000'000;
// Back-off between failed starts: the first restart is immediate, then 100 ms, doubling.
constexpr uint64_t kBackoffBaseMs = 100;
constexpr uint64_t kBackoffCapMs = 10'000;

// Variables that a bash takes into account only when it starts, or refuses to take from an
// export (read-only): a session whose environment sets one cannot use a spare, which started
// before its environment was known.
bool startup_variable(std::string_view name) {
  static constexpr std::array<std::string_view, 9> kNames = {"SHELLOPTS", "ENV",  "POSIXLY_CORRECT", "IFS", "UID",
                                                             "EUID",      "PPID", "GROUPS",          "HOSTTYPE"};
  return name.starts_with("BASH") || std::find(kNames.begin(), kNames.end(), name) != kNames.end();
}

bool shell_identifier(std::string_view n) {
  if (n.empty() || (n[0] >= '0' && n[0] <= '9')) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  });
}

// The environment of a session's shell when it starts: the session's environment, then its
// variables. Bash keeps the last of two entries for one name.
std::string value_of(const std::vector<std::string>& env, std::string_view name, bool* found) {
  *found = false;
  std::string value;
  for (const auto& e : env)
    if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=') {
      *found = true;
      value = e.substr(name.size() + 1);
    }
  return value;
}

// The line a claimed spare runs first: what a shell started for the session would have had
// from the start. The spare's bash started with an empty environment; this exports the
// session's (its environment, then its variables), its name, its directory, OLDPWD and
// SHLVL as bash sets them from the environment at start-up, and SECONDS counted from now.
// No user code has run in the spare yet, so plain names are safe. The text is an internal
// job's: no history, listing or log shows it.
std::string claim_text(const std::string& name, const session_def& def) {
  std::string t;
  auto add = [&t](const std::string& e) {
    std::string_view n = std::string_view(e).substr(0, e.find('='));
    if (n == "PWD" || n == "OLDPWD" || n == "SHLVL" || n == "_" || n == "SBSH_SESSION" || n == "SBSH_ROOT" || n == "SBSH_ENV") return;
    t += fmt::format("export {}={};", n, shell_quote(std::string_view(e).substr(n.size() + 1)));
  };
  for (const auto& e : def.environment_vars()) add(e);
  for (const auto& e : def.env) add(e);
  t += fmt::format("export SBSH_SESSION={};", shell_quote(name));
  if (!root_of(def).empty()) t += fmt::format("export SBSH_ROOT={};", shell_quote(root_of(def)));
  if (!def.sbsh_env.empty()) t += fmt::format("export SBSH_ENV={};", shell_quote(def.sbsh_env));
  t += fmt::format("cd -P -- {}||exit 1;", shell_quote(def.cwd));
  bool has_old = false;
  std::string old = value_of(def.environment_vars(), "OLDPWD", &has_old);
  bool has_old_var = false;
  std::string old_var = value_of(def.env, "OLDPWD", &has_old_var);
  if (has_old_var) old = old_var;
  if (has_old || has_old_var)
    t += fmt::format("if [[ -d {0} ]];then export OLDPWD={0};else unset OLDPWD;export OLDPWD;fi;", shell_quote(old));
  else
    t += "unset OLDPWD;export OLDPWD;";
  bool has_level = false;
  std::string level = value_of(def.environment_vars(), "SHLVL", &has_level);
  long n = 0;
  auto [ptr, ec] = std::from_chars(level.data(), level.data() + level.size(), n);
  n = has_level && ec == std::errc() && ptr == level.data() + level.size() && n >= 0 && n < 999 ? n + 1 : 1;
  t += fmt::format("export SHLVL={};SECONDS=0", n);
  return t;
}

// A variable of the client's environment that names a way out of a confined session: an
// agent's or a bus's socket, a display, a container engine, the user's runtime directory.
// The sockets stay out of the shell's view; the variables would only mislead its programs
// (and give their paths away), so they are not passed in.
bool leads_outside_confinement(const std::string& entry) {
  std::string_view name = std::string_view(entry).substr(0, entry.find('='));
  constexpr std::string_view kOutside[] = {
      "SSH_AUTH_SOCK",  "SSH_AGENT_PID",  "GPG_AGENT_INFO", "DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS",
      "DISPLAY",        "XAUTHORITY",     "WAYLAND_DISPLAY", "WAYLAND_SOCKET",          "DOCKER_HOST",
      "CONTAINER_HOST", "XDG_RUNTIME_DIR", "SBSH_SOCKET"};
  return std::ranges::any_of(kOutside, [name](std::string_view v) { return name == v; });
}

}  // namespace

bool spare_can_serve(const session_def& def) {
  // A spare's bash was started unconfined, in sbshd's namespaces.
  if (!def.limits.empty() || def.confine || def.no_network || def.has_cgroup_limits()) return false;
  for (const auto* list : {&def.environment_vars(), &def.env})
    for (const auto& e : *list) {
      std::string_view n = std::string_view(e).substr(0, e.find('='));
      if (!shell_identifier(n) || startup_variable(n)) return false;
    }
  return true;
}

void remove_shell_dir(const std::string& dir) {
  if (dir.empty()) return;
  ::unlink((dir + "/" + wrapper::kAdoptSocket).c_str());
  ::rmdir(dir.c_str());
}

shell_supervisor::shell_supervisor(session_host& srv, const std::string& name, const session_def& def)
    : srv_(srv), name_(name), def_(def), channel_(srv.channels_held()) {}

shell_supervisor::~shell_supervisor() {
  stopping_ = true;
  if (rebuild_ticket_ != 0) srv_.cancel_rebuild(rebuild_ticket_);
  if (wrapper_ != nullptr) {
    // stop() already asked politely; a wrapper still alive now is stuck.
    wrapper_->kill(SIGKILL);
    auto pid = static_cast<pid_t>(wrapper_pid_);
    session_host* srv = &srv_;
    uv::child_process::release(std::move(wrapper_), [srv, pid, spare = protected_groups()](int64_t, int sig) {
      if (sig != 0) srv->reap_session_later(pid, spare);
    });
  }
  remove_shell_dir(dir_);  // a killed wrapper cannot remove its socket
}

uint64_t shell_supervisor::uptime_ms() const {
  return shell_pid_ > 0 ? (mono_us() - started_mono_us_) / 1000 : 0;
}

uint64_t shell_supervisor::begin_start() {
  state_ = session_state::starting;
  shell_pid_ = wrapper_pid_ = 0;
  said_cwd_.clear();
  started_mono_us_ = mono_us();
  shell_started_ms_ = wall_ms();
  served_ = false;
  initialized_ = false;
  run_out_ = 0;
  interrupts_ = false;
  ping_sent_us_ = 0;
  parked_ = lending_ = false;
  last_active_ms_ = uv_now(srv_.loop());
  return generation_;
}

void shell_supervisor::fail_start(std::string why) {
  failure_ = std::move(why);
  state_ = session_state::failed;
  spdlog::error("session {}: {}", name_, failure_);
  channel_.reset();
  parked_ = lending_ = false;
  remove_shell_dir(dir_);
  dir_.clear();
  events_->shell_changed();  // refuses what is queued
}

void shell_supervisor::start() { start_shell(); }

void shell_supervisor::start_shell() {
  uint64_t gen = begin_start();
  const session_def& def = def_;
  // A directory that has gone is never replaced by another: the session's commands were
  // meant for that one.
  if (::access(def.cwd.c_str(), X_OK) != 0) {
    int e = errno;
    return fail_start(def.snapshot.empty()
                          ? fmt::format("cannot enter the session's directory {}: {}", def.cwd, std::strerror(e))
                          : fmt::format("cannot enter the session's copy of {} ({}): {}; remove the session and "
                                        "create it again for a new copy",
                                        def.snapshot, def.cwd, std::strerror(e)));
  }
  if (!def.sbsh_env.empty() && !srv_.envs().use_if_ready(def.sbsh_env.substr(def.sbsh_env.rfind('/') + 1)))
    return rebuild_env(gen);
  dir_ = srv_.new_shell_dir();
  // The session's own environment, never sbshd's: only the bash to run comes from sbshd
  // (the wrapper reads SBSH_BASH and takes it out before bash starts).
  std::vector<std::string> env_store = def.environment_vars();
  if (def.confine) std::erase_if(env_store, leads_outside_confinement);
  if (const char* bash = std::getenv("SBSH_BASH"); bash != nullptr) env_store.push_back(fmt::format("SBSH_BASH={}", bash));
  for (const auto& e : def.env) env_store.push_back(e);  // bash takes the last of two entries
  env_store.push_back("SBSH_SESSION=" + name_);
  if (!root_of(def).empty()) env_store.push_back("SBSH_ROOT=" + root_of(def));
  if (!def.sbsh_env.empty()) env_store.push_back("SBSH_ENV=" + def.sbsh_env);
  std::vector<std::string> args;
  for (const auto& l : def.limits) {
    args.emplace_back("--limit");
    args.push_back(l);
  }
  if (def.confine) {
    std::string tmp = srv_.session_tmp_dir(name_);
    if (auto made = make_dirs(tmp); !made)
      return fail_start(fmt::format("cannot make the session's TMPDIR {}: {}", tmp, made.err().message));
    env_store.push_back("TMPDIR=" + tmp);
    for (const auto& r : own_rules(def, tmp)) {
      args.emplace_back("--rule");
      args.push_back(confine::rule_text(r));
    }
    if (::geteuid() == 0) {
      args.emplace_back("--as");
      args.push_back(fmt::format("{}:{}", srv_.opts().confine_uid, srv_.opts().confine_gid));
    }
  }
  if (!def.cgroup.empty()) {
    args.emplace_back("--cgroup");
    args.push_back(def.cgroup);
  }
  if (def.confine || def.no_network) {
    args.emplace_back("--ns");
    args.emplace_back(def.confine && def.no_network ? "pid,net" : def.confine ? "pid" : "net");
  }
  // A confined spare's stage has no limits nor cgroup to give (its network namespace, made
  // ahead, it gives).
  if (def.confine && def.limits.empty() && def.cgroup.empty())
    if (auto spare = srv_.take_confined_spare()) return claim_confined(gen, std::move(*spare), args, env_store);
  args.push_back(name_);
  auto started = srv_.start_wrapper(dir_, args, env_store, def.cwd.c_str(),
                                    [this, gen](int64_t status, int sig) { on_wrapper_exit(gen, status, sig); });
  if (!started) return fail_start(fmt::format("cannot start {}: {}", srv_.opts().wrapper_path, started.err().message));
  wrapper_ = std::move(started->proc);
  channel_ = std::move(started->channel);
  watch(gen, std::move(started->ctl), /*run_init=*/true);
}

void shell_supervisor::rebuild_env(uint64_t gen) {
  // Its environment was deleted (env rm --force, or by hand): the shell would find nothing
  // in SBSH_ENV, and a confined one could not even start. The definition holds the setup:
  // it runs again, then this start goes on.
  rebuild_ticket_ = srv_.rebuild_env(name_, def_, [this, gen](const status& built) {
    rebuild_ticket_ = 0;
    if (gen != generation_ || stopping_) return;
    if (!built)
      return fail_start(fmt::format("its environment {} was deleted, and it cannot be built again: {}",
                                    def_.sbsh_env, built.err().message));
    start_shell();
  });
}

void shell_supervisor::claim(spare_shell&& spare) {
  uint64_t gen = begin_start();
  dir_ = std::move(spare.dir);
  wrapper_ = std::move(spare.wrapper.proc);
  channel_ = std::move(spare.wrapper.channel);
  wrapper_->on_exit([this, gen](int64_t status, int sig) { on_wrapper_exit(gen, status, sig); });
  watch(gen, std::move(spare.wrapper.ctl), /*run_init=*/true);
  // Ahead of the init commands that watch() queued: they run in the session's directory and
  // environment, as in a shell started for the session.
  events_->run_first({claim_text(name_, def_)}, /*init=*/false);
  // The wrapper learns the session's name (for ps and its log) and enters its directory.
  if (ctl_) ctl_->send(ipc::encode(msg::claim{name_, def_.cwd, {}, {}}));
}

void shell_supervisor::claim_confined(uint64_t gen, spare_shell&& spare, const std::vector<std::string>& args,
                                      const std::vector<std::string>& env) {
  remove_shell_dir(dir_);  // named for a wrapper that is not started
  dir_ = std::move(spare.dir);
  wrapper_ = std::move(spare.wrapper.proc);
  channel_ = std::move(spare.wrapper.channel);
  wrapper_->on_exit([this, gen](int64_t status, int sig) { on_wrapper_exit(gen, status, sig); });
  watch(gen, std::move(spare.wrapper.ctl), /*run_init=*/true);
  if (ctl_) ctl_->send(ipc::encode(msg::claim{name_, def_.cwd, args, env}));
}

void shell_supervisor::adopt(adopted_shell&& shell) {
  if (shell.generation > 0) generation_ = shell.generation;  // the same shell keeps its number
  uint64_t gen = begin_start();
  dir_ = shell.dir;
  channel_ = std::move(shell.channel);
  wrapper_ = uv::child_process::watch(srv_.loop(), shell.wrapper_pid,
                                      [this, gen](int64_t status, int sig) { on_wrapper_exit(gen, status, sig); });
  // The sync tells the statuses of commands the earlier sbshd started (at most one, and
  // maybe one it sent that the shell has not read yet) from those of ours.
  watch_senders(channel_.get());
  sync_seq_ = ++seq_;
  sync_nonce_ = new_nonce();
  auto synced = wrapper_ != nullptr ? send_sync(channel_.get(), sync_seq_, sync_nonce_)
                                    : status(make_error(ipc::errc::gone, "ended"));
  if (wrapper_ == nullptr || !synced) {
    spdlog::warn("session {}: cannot take over its shell ({}); starting a new one", name_,
                 wrapper_ == nullptr ? "its wrapper has ended" : synced.err().message);
    if (wrapper_ != nullptr) {
      wrapper_->kill(SIGTERM);  // it ends the shell and what it started
      wrapper_.reset();
    }
    events_->note_state_lost("sbshd restarted and could not take over the session's shell");
    ++generation_;
    channel_.reset();
    remove_shell_dir(dir_);
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
  served_ = true;
  initialized_ = true;
  adopted_ms_ = wall_ms();
  state_ = session_state::ready;
  watch(gen, std::move(shell.ctl), /*run_init=*/false);
}

void shell_supervisor::watch(uint64_t gen, unique_fd ctl, bool run_init) {
  wrapper_pid_ = wrapper_->pid();
  ctl_ = std::make_unique<uv::framed_socket>(
      srv_.loop(), std::move(ctl),
      uv::framed_socket::callbacks{[this, gen](ipc::envelope&& env) { on_control(gen, std::move(env)); },
                                   [this, gen](const std::string& reason) {
                                     shell_lost(gen, std::nullopt, std::nullopt,
                                                fmt::format("its wrapper's control socket closed ({})", reason));
                                   }},
      /*read_chunk=*/1024);
  channel_watch_ = uv::make_handle<uv::fd_watch>(srv_.loop(), channel_.get());
  channel_watch_->start(UV_READABLE, [this, gen](int, int) { on_channel(gen); });
  if (run_init) {
    spdlog::info("session {}: shell starting (wrapper pid {}, generation {})", name_, wrapper_pid_, gen);
    // The background processes' pipes were lent to the wrapper that ended: lend them to
    // this one, which is the one a later sbshd would adopt.
    for (const auto& [g, pipes] : protected_)
      if (!pipes.fds.empty()) send_protect(g, pipes);
    events_->run_first(def_.init, /*init=*/true);
  } else {
    spdlog::info("session {}: adopted its running shell (wrapper pid {}, shell pid {})", name_,
                 wrapper_pid_, shell_pid_);
  }
  if (!health_timer_ && srv_.health_interval_ms() > 0) {
    health_timer_ = uv::make_handle<uv::timer>(srv_.loop());
    health_timer_->start(srv_.health_interval_ms(), [this] { health_tick(); });
  }
  events_->shell_changed();
}

void shell_supervisor::on_channel(uint64_t gen) {
  while (gen == generation_ && channel_) {
    auto m = receive_message(channel_.get());
    if (!m) {
      // The shell ended (its end closed) or says what it cannot: either way this generation
      // is over. The wrapper's report of how it ended usually comes first; if not, this
      // stands in for it.
      channel_watch_.reset();
      if (ipc::has_code(m.err(), ipc::errc::bad_message)) {
        restart_shell(m.err().message, /*forced=*/true);  // "the shell sent a malformed message ..."
      } else if (wrapper_ != nullptr && ctl_) {
        ctl_->read_pending();  // may end this generation with the wrapper's own words
      }
      return;
    }
    if (!m.value()) return;
    const shell_message& msg = *m.value();
    if (auto forged = untrusted(msg)) {
      // Something other than the shell's builtin reached the channel: no result it carries is
      // reported, and the shell, whose channel something else may hold, is replaced.
      channel_watch_.reset();
      spdlog::warn("session {}: {}", name_, *forged);
      restart_shell(*forged, /*forced=*/true);
      return;
    }
    switch (msg.type) {
      case SBSH_MSG_READY:
        served_ = true;
        interrupts_ = msg.serves_interrupts;
        leases_ = msg.serves_leases;
        // The kernel names the sender: the shell's pid as sbshd sees it, also from a PID
        // namespace of its own (a confined session), where the shell sees itself as 1.
        if (shell_pid_ <= 0) shell_pid_ = msg.sender;
        if (state_ == session_state::starting) state_ = session_state::ready;
        spdlog::debug("session {}: shell pid {} serves", name_, shell_pid_);
        events_->shell_ready();
        break;
      case SBSH_MSG_SYNCED:
        interrupts_ = msg.serves_interrupts;
        leases_ = msg.serves_leases;
        if (awaiting_sync_ && msg.seq == sync_seq_) {
          awaiting_sync_ = lease_sync_ = false;
          events_->shell_ready();
        }
        break;
      case SBSH_MSG_STATUS:
        if (lease_sync_) {
          // A run of the lease's holder whose status could not go back on the lease: not
          // sbshd's to report. It says where the shell is, which sbshd did not see meanwhile.
          if (msg.cwd) said_cwd_ = *msg.cwd;
          break;
        }
        if (awaiting_sync_) {
          // A command the earlier sbshd started ran on while no sbshd was there. Nobody waits
          // for its result any more; `session show` lists it.
          spdlog::info("session {}: a command started before sbshd restarted ended with status {}", name_,
                       msg.exit_value);
          events_->earlier_command_ended(msg.exit_value, adopted_ms_);
          break;
        }
        if (msg.seq == run_out_) run_out_ = 0;
        if (msg.cwd) said_cwd_ = *msg.cwd;
        last_active_ms_ = uv_now(srv_.loop());
        events_->run_answered(msg);
        break;
      case SBSH_MSG_LEASED:
        if (lease_out_ != 0 && msg.seq == lease_out_) events_->lease_answered(msg);
        break;
      case SBSH_MSG_LEASE_ENDED:
        if (lease_out_ == 0 || msg.seq != lease_out_) break;
        lease_out_ = 0;
        // What the builtin sends after lease_ended (a status it could not send on the lease)
        // comes before the sync's answer: sbshd's next run waits for it (serving()).
        sync_seq_ = ++seq_;
        sync_nonce_ = new_nonce();
        if (send_sync(channel_.get(), sync_seq_, sync_nonce_)) awaiting_sync_ = lease_sync_ = true;
        events_->lease_answered(msg);
        break;
      case SBSH_MSG_RECORDS:
        if (lease_out_ != 0) events_->records_due();
        break;
      default:  // keepers, meant for a wrapper that waited for a new sbshd (its descriptors closed)
        break;
    }
  }
}

void shell_supervisor::on_wrapper_exit(uint64_t gen, int64_t status, int sig) {
  if (gen != generation_) return;
  wrapper_.reset();  // its handle closes after this callback
  auto pid = static_cast<pid_t>(wrapper_pid_);
  std::set<pid_t> spare = protected_groups();
  // What the wrapper said before it exited (how its shell ended, or why it could not
  // start) may still be unread on the control socket, and explains the loss better than
  // the wrapper's own exit: deliver it first. It may end this generation.
  if (ctl_) ctl_->read_pending();
  if (sig != 0) srv_.reap_session_later(pid, spare);
  shell_lost(gen, std::nullopt, std::nullopt,
             sig != 0     ? fmt::format("its wrapper was killed by signal {}", sig)
             : status < 0 ? std::string("its wrapper ended")  // adopted: not our child
                          : fmt::format("its wrapper exited with status {}", status));
  notify_if_gone();
}

void shell_supervisor::health_tick() {
  // A wrapper answers pings from its own loop whatever the shell is doing, so a long command
  // is never mistaken for a hang; a stopped or deadlocked wrapper is.
  uint64_t interval = srv_.health_interval_ms();
  if (ctl_ && state_ != session_state::restarting) {
    if (ping_sent_us_ != 0 && mono_us() - ping_sent_us_ > interval * 1000) {
      wrapper_hung_ = true;  // it would not act on a request to end either
      restart_shell(fmt::format("its wrapper did not answer a health check within {} ms (stopped or hung)", interval),
                    /*forced=*/false);
    } else if (ping_sent_us_ == 0) {
      ping_sent_us_ = mono_us();
      ctl_->send(ipc::encode(msg::ping{}, ++ping_seq_));
    }
  }
  if (health_timer_) health_timer_->start(interval, [this] { health_tick(); });
}

void shell_supervisor::on_control(uint64_t gen, ipc::envelope&& env) {
  if (gen != generation_) return;
  const auto& m = env.msg;
  switch (m.type()) {
    case msg_type::pong:
      if (m.id() == ping_seq_) ping_sent_us_ = 0;
      break;
    case msg_type::wrapper_ready: {
      auto ready = ipc::decode<msg::wrapper_ready>(m);
      if (ready && ready->shell_pid > 0 && shell_pid_ == 0) shell_pid_ = ready->shell_pid;
      break;
    }
    case msg_type::signal_result: {
      events_->signal_answered();
      break;
    }
    case msg_type::channel_lent:
      if (lending_ && m.id() == lend_seq_) unparked(gen, std::move(env.fds));
      break;
    case msg_type::shell_exited: {
      auto exited = ipc::decode<msg::shell_exited>(m);
      if (!exited) spdlog::warn("session {}: {}", name_, exited.err().message);
      std::optional<int> c, s;
      std::string said;
      if (exited) {
        if (exited->exit_code) c = static_cast<int>(*exited->exit_code);
        if (exited->signal) s = static_cast<int>(*exited->signal);
        said = std::string(exited->error);
      }
      // A shell that ended on its own before it served could not start: the next will not
      // do better (a missing bash, a builtin it refuses).
      start_failed_ = !served_ && !s;
      std::string why = !served_ && !said.empty() ? fmt::format("its shell could not start: {}", said)
                        : s                       ? fmt::format("its shell was killed by signal {}", *s)
                        : c                       ? fmt::format("its shell exited with status {}", *c)
                                                  : fmt::format("its shell could not start: {}",
                                                                said.empty() ? "unknown reason" : said);
      shell_lost(gen, c, s, why);
      break;
    }
    default:
      break;
  }
}

void shell_supervisor::shell_lost(uint64_t gen, std::optional<int> exit_code, std::optional<int> signal,
                                  const std::string& why) {
  if (gen != generation_ || stopping_) return;
  spdlog::warn("session {}: shell lost: {}", name_, why);
  const session_def& def = def_;
  bool never_served = !served_;
  bool failed_start = !events_->ran_user_commands() || events_->init_failed();
  bool forced = forcing_restart_;
  bool clean_exit = exit_code && *exit_code == 0 && !signal;
  bool wanted =
      forced || def.policy() == restart_policy::always || (def.policy() == restart_policy::on_failure && !clean_exit);
  bool hopeless = std::exchange(start_failed_, false) && !forced;
  shell_loss loss{exit_code, signal, why, wanted && !hopeless, never_served};
  events_->shell_lost(gen, loss);  // the next generation is gen + 1
  // After shell_exited the wrapper is cleaning up the session's processes and exits by
  // itself; in every other case it is dead or must die now.
  detach(/*kill_wrapper=*/!exit_code && !signal);
  ++generation_;
  if (hopeless) {
    failure_ = why;
    state_ = session_state::failed;
    spdlog::error("session {}: failed: {}", name_, failure_);
    events_->shell_changed();  // refuses what is queued
    return;
  }
  if (!wanted) {
    state_ = session_state::exited;
    failure_ = fmt::format("its shell ended ({}) and its restart policy is {}", why, def.restart);
    events_->shell_changed();  // refuses what is queued
    return;
  }
  schedule_restart(why, failed_start, forced);
}

void shell_supervisor::schedule_restart(const std::string& why, bool failed_start, bool forced) {
  ++restarts_;
  srv_.counters().shell_restarted();
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
    failure_ = fmt::format("{} starts failed within {} s (last: {}{})", failed_starts_.size(), kStartWindowUs / 1000000,
                           why, events_->init_failed() ? "; see the init output with 'sbsh session show'" : "");
    spdlog::error("session {}: failed: {}", name_, failure_);
    events_->shell_changed();  // refuses what is queued
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
  restart_timer_ = uv::make_handle<uv::timer>(srv_.loop());
  restart_timer_->start(delay, [this] {
    restart_timer_.reset();
    start_shell();
  });
}

void shell_supervisor::restart_shell(const std::string& why, bool forced) {
  forcing_restart_ = forced;
  shell_lost(generation_, std::nullopt, std::nullopt, why);
  forcing_restart_ = false;
}

void shell_supervisor::restart(const std::string& why) {
  restart_timer_.reset();
  failed_starts_.clear();
  consecutive_failures_ = 0;
  failure_.clear();
  if (ctl_ || wrapper_ != nullptr) {
    restart_shell(why, /*forced=*/true);
    return;
  }
  ++generation_;  // what waited for the old shell must not run in the new one unawares
  ++restarts_;
  srv_.counters().shell_restarted();
  events_->note_state_lost(why);
  start_shell();
}

void shell_supervisor::retry_if_failed() {
  if (state_ == session_state::failed && !failed_starts_.empty() && mono_us() - failed_starts_.back() > kStartWindowUs) {
    spdlog::info("session {}: trying to start its shell again", name_);
    restart("a command arrived after the start limit's window");
  }
}

void shell_supervisor::detach(bool kill_wrapper) {
  if (wrapper_ != nullptr && kill_wrapper) {
    // SIGUSR1 asks the wrapper to end its shell and every process the shell's commands left,
    // wherever they moved (a setsid, a double fork), sparing the background processes, and
    // to exit. One that does not answer pings cannot: sbshd ends the session itself, and
    // does so while the wrapper still lives. The wrapper is the subreaper of its session, so
    // until it dies every process the session left (one that called setsid, one whose parent
    // ended) descends from it; once it is dead they belong to init, and nothing would find
    // them. It is rare enough for /proc to be read here, on the loop.
    if (std::exchange(wrapper_hung_, false)) {
      procs::signal_session(static_cast<pid_t>(wrapper_pid_), 0, SIGKILL, protected_groups());
      wrapper_->kill(SIGKILL);
    } else {
      wrapper_->kill(SIGUSR1);
    }
  }
  if (wrapper_ != nullptr) {
    // A wrapper that dies of a signal leaves the session's other processes behind.
    auto pid = static_cast<pid_t>(wrapper_pid_);
    session_host* srv = &srv_;
    uv::child_process::release(std::move(wrapper_), [srv, pid, spare = protected_groups()](int64_t, int sig) {
      if (sig != 0) srv->reap_session_later(pid, spare);
    });
  }
  ctl_.reset();
  channel_watch_.reset();
  channel_.reset();
  parked_ = lending_ = false;
  // A wrapper that exits by itself removes its adoption socket, and then the directory; a
  // killed one cannot. One asked to end may not have yet: no later sbshd must find it.
  if (kill_wrapper) remove_shell_dir(dir_);
  dir_.clear();
  awaiting_sync_ = lease_sync_ = leases_ = false;
  lease_out_ = 0;
  shell_pid_ = 0;
}

void shell_supervisor::stop() {
  stopping_ = true;
  restart_timer_.reset();
  health_timer_.reset();
  if (wrapper_ != nullptr) wrapper_->kill(SIGTERM);  // the wrapper ends the whole session
}

void shell_supervisor::abandon() {
  stopping_ = true;
  restart_timer_.reset();
  health_timer_.reset();
  // The wrapper sees its control socket close, keeps the shell, and waits for adoption.
  uv::child_process::forget(std::move(wrapper_));
  ctl_.reset();
  channel_watch_.reset();
  channel_.reset();
  parked_ = lending_ = false;
  dir_.clear();  // the directory stays for the next sbshd
}

bool shell_supervisor::stopped_and_gone() const { return wrapper_ == nullptr || wrapper_->exited(); }

void shell_supervisor::when_gone(std::function<void()> gone) {
  on_gone_ = std::move(gone);
  notify_if_gone();
}

void shell_supervisor::notify_if_gone() {
  if (!on_gone_ || !stopped_and_gone()) return;
  // From the loop's next turn: the callback may destroy this session.
  gone_timer_ = uv::make_handle<uv::timer>(srv_.loop());
  gone_timer_->start(0, [this] {
    auto gone = std::move(on_gone_);
    on_gone_ = nullptr;
    if (gone) gone();
  });
}

void shell_supervisor::initialized() {
  if (initialized_ || !ctl_) return;
  initialized_ = true;
  // The wrapper keeps the generation for a later sbshd, so that a shell taken over keeps its
  // number and a client sees a change only when the shell changed.
  ctl_->send(ipc::encode(msg::initialized{generation_}));
}

status shell_supervisor::send_run(run_message& m) {
  m.seq = ++seq_;
  m.nonce = new_nonce();
  last_active_ms_ = uv_now(srv_.loop());
  auto sent = daemon::send_run(channel_.get(), m, big_text_);
  if (sent) {
    run_out_ = m.seq;
    run_nonce_ = m.nonce;
  }
  return sent;
}

std::optional<std::string> shell_supervisor::untrusted(const shell_message& msg) const {
  if (msg.sender <= 0) return "its shell's channel did not say who wrote on it; the shell is replaced";
  if (shell_pid_ > 0 && msg.sender != shell_pid_)
    return fmt::format("process {} (not its shell, pid {}) wrote on the shell's channel; the shell is replaced",
                       msg.sender, shell_pid_);
  // A second ready, or an answer whose nonce is not the one sbshd sent, comes from a command
  // writing on the shell's descriptor: the builtin sends neither.
  bool forged = (msg.type == SBSH_MSG_READY && served_ && !awaiting_sync_) ||
                ((msg.type == SBSH_MSG_LEASED || msg.type == SBSH_MSG_LEASE_ENDED) && lease_out_ != 0 &&
                 msg.seq == lease_out_ && msg.nonce != lease_nonce_) ||
                (msg.type == SBSH_MSG_STATUS && !awaiting_sync_ && msg.seq == run_out_ && msg.nonce != run_nonce_) ||
                (msg.type == SBSH_MSG_SYNCED && awaiting_sync_ && msg.seq == sync_seq_ && msg.nonce != sync_nonce_);
  if (forged) return "a command wrote a message of its own on the shell's channel; the shell is replaced";
  return std::nullopt;
}

status shell_supervisor::send_lease(uint64_t& seq, int lease, int page, uint32_t flags) {
  seq = ++seq_;
  uint64_t nonce = new_nonce();
  last_active_ms_ = uv_now(srv_.loop());
  auto sent = daemon::send_lease(channel_.get(), seq, nonce, lease, page, flags);
  if (sent) {
    lease_out_ = seq;
    lease_nonce_ = nonce;
  }
  return sent;
}

void shell_supervisor::end_lease() {
  if (lease_out_ != 0 && channel_) (void)send_lease_end(channel_.get(), lease_out_);
}

void shell_supervisor::interrupt_leased(uint64_t seq) {
  if (lease_out_ != 0 && interrupts_ && channel_) send_interrupt(channel_.get(), seq);
}

uint64_t shell_supervisor::signal_command(const procs::since_mark& mark, int sig, bool interrupt) {
  if (!ctl_) return 0;
  // Ahead of the SIGINT, which the shell drops if it comes before the command has started.
  if (interrupt && interrupts_ && run_out_ != 0 && channel_) send_interrupt(channel_.get(), run_out_);
  uint64_t id = ++signal_seq_;
  ctl_->send(ipc::encode(msg::signal_command{mark.last_pid, mark.start_ticks, sig, interrupt}, id));
  return id;
}

void shell_supervisor::protect_group(pid_t pgid, lent_pipes pipes) {
  auto& kept = protected_[pgid] = std::move(pipes);
  send_protect(pgid, kept);
}

void shell_supervisor::send_protect(pid_t pgid, const lent_pipes& pipes) {
  if (!ctl_) return;
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
  msg::protect_group req{pgid, 0, {}, 0};
  if (!fds.empty()) req = {pgid, pipes.proc, pipes.streams, fds.size()};
  ctl_->send(ipc::encode(req), std::move(fds));
}

std::set<pid_t> shell_supervisor::protected_groups() const {
  std::set<pid_t> groups;
  for (const auto& [g, pipes] : protected_) groups.insert(g);
  return groups;
}

void shell_supervisor::unprotect_group(pid_t pgid) {
  protected_.erase(pgid);
  if (ctl_) ctl_->send(ipc::encode(msg::unprotect_group{pgid}));
}

bool shell_supervisor::parkable() const {
  if (parked_ || !channel_ || !ctl_ || wrapper_ == nullptr || state_ != session_state::ready || !served_ ||
      awaiting_sync_ || run_out_ != 0 || lease_out_ != 0 || stopping_ || events_ == nullptr || !events_->idle())
    return false;
  // A message the shell sent that is not read yet (or its end-of-file) is read first.
  char b = 0;
  return ::recv(channel_.get(), &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

void shell_supervisor::park() {
  // The wrapper holds a copy of sbshd's end (wrapper::kChannelOwnerFd): closing this one
  // loses nothing, and what the builtin sends meanwhile waits in the socket.
  channel_watch_.reset();
  channel_.reset();
  parked_ = true;
  spdlog::debug("session {}: idle, its shell's channel parked with its wrapper", name_);
}

void shell_supervisor::want_channel() {
  if (!parked_ || lending_ || !ctl_) return;
  lending_ = true;
  spdlog::debug("session {}: asks its wrapper for the shell's channel", name_);
  ctl_->send(ipc::encode(msg::lend_channel{}, ++lend_seq_));
}

void shell_supervisor::unparked(uint64_t gen, std::vector<unique_fd> fds) {
  lending_ = false;
  if (fds.size() != 1 || !fds[0]) {
    restart_shell("its wrapper did not give back the shell's channel", /*forced=*/true);
    return;
  }
  // The same socket as before: non-blocking, its senders watched.
  channel_ = std::move(fds[0]);
  parked_ = false;
  last_active_ms_ = uv_now(srv_.loop());
  channel_watch_ = uv::make_handle<uv::fd_watch>(srv_.loop(), channel_.get());
  channel_watch_->start(UV_READABLE, [this, gen](int, int) { on_channel(gen); });
  events_->shell_ready();
}

}  // namespace sbsh::daemon
