// The session table: finding a session, creating one (implicitly, or from a definition whose
// snapshot is copied and whose environment is built first), the environments sessions use,
// removing sessions and sweeping what they leave, and the expiry of idle ones.
#include "daemon/off_loop.h"
#include "daemon/server.h"

#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "common/confine.h"
#include "common/environ.h"
#include "common/paths.h"
#include "common/procs.h"
#include "daemon/capacity.h"
#include "daemon/session.h"
#include "ipc/text.h"
#include "ipc/wrapper_link.h"
#include "uv/child_process.h"

namespace sbsh::daemon {

session* server::find_session(const std::string& name) {
  auto it = sessions_.find(name);
  return it == sessions_.end() ? nullptr : it->second.get();
}

namespace {

// The directory a session starts in: the one asked for, which must exist (a command meant
// for it must never run elsewhere); none asked for: $HOME, else /.
result<std::string> session_dir(const std::string& dir) {
  if (dir.empty()) {
    const char* home = std::getenv("HOME");
    return std::string(home != nullptr && *home != '\0' ? home : "/");
  }
  if (dir[0] != '/')
    return make_error(ipc::errc::bad_request, fmt::format("the session's directory '{}' is not absolute", ipc::printable(dir)));
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0)
    return make_error(ipc::errc::bad_directory, fmt::format("cannot use {} as the session's directory: {}",
                                                           ipc::printable(dir, 256), std::strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    return make_error(ipc::errc::bad_directory,
                      fmt::format("cannot use {} as the session's directory: it is not a directory",
                                  ipc::printable(dir, 256)));
  return dir;
}

std::string describe_difference(const session_def& a, const session_def& b) {
  std::vector<std::string> diffs;
  auto source = [](const session_def& d) {
    return d.snapshot.empty() ? std::string("none") : ipc::printable(d.snapshot, 256);
  };
  if (a.snapshot != b.snapshot) diffs.push_back(fmt::format("snapshot of {} (asked: {})", source(a), source(b)));
  else if (a.cwd != b.cwd) diffs.push_back(fmt::format("directory {} (asked: {})", ipc::printable(a.cwd, 256), ipc::printable(b.cwd, 256)));
  if (a.env != b.env) diffs.emplace_back("environment");
  if (a.init != b.init) diffs.emplace_back("init commands");
  auto limits = [](const session_def& d) {
    return d.limits.empty() ? std::string("none") : fmt::format("{}", fmt::join(d.limits, " "));
  };
  if (a.limits != b.limits) diffs.push_back(fmt::format("limits {} (asked: {})", limits(a), limits(b)));
  if (a.restart != b.restart) diffs.push_back(fmt::format("restart policy {} (asked: {})", a.restart, b.restart));
  auto timeout = [](const session_def& d) {
    return d.timeout_ms == 0 ? std::string("none") : fmt::format("{} ms", d.timeout_ms);
  };
  if (a.timeout_ms != b.timeout_ms)
    diffs.push_back(fmt::format("default timeout {} (asked: {})", timeout(a), timeout(b)));
  if (a.ignore != b.ignore || a.no_default_ignores != b.no_default_ignores || a.gitignore != b.gitignore)
    diffs.emplace_back("ignore rules");
  if (a.keep_copy_on_failure != b.keep_copy_on_failure) diffs.emplace_back("keep-copy-on-failure");
  if (a.setup != b.setup) diffs.emplace_back("setup");
  if (a.setup_keys != b.setup_keys) diffs.emplace_back("setup keys");
  if (a.confine != b.confine || a.allow_write != b.allow_write || a.allow_read != b.allow_read ||
      a.read_only != b.read_only)
    diffs.emplace_back("confinement");
  if (a.no_network != b.no_network) diffs.emplace_back("network");
  if (a.memory_max != b.memory_max || a.pids_max != b.pids_max || a.cpu_millis != b.cpu_millis)
    diffs.emplace_back("memory, process or CPU limits");
  return fmt::format("{}", fmt::join(diffs, ", "));
}

// How a pending session is being made, for messages.
std::string being_made(const session_def& d) {
  if (d.snapshot.empty()) return "(its environment's setup is running)";
  return fmt::format("from a snapshot of {}{}", d.snapshot, d.setup.empty() ? "" : " (then its environment's setup)");
}

// The setup's key files of `def`, absolute.
std::vector<std::string> setup_key_paths(const session_def& def) {
  // Relative key files are the session directory's: where the setup runs.
  std::vector<std::string> keys;
  for (const auto& k : def.setup_keys) keys.push_back(k[0] == '/' ? k : def.cwd + "/" + k);
  return keys;
}

// The ignore rules of a directory setup key: those of a snapshot of the session.
snapshot_store::rules key_rules(const session_def& def) {
  // A directory key leaves out what a snapshot's copy of it would (node_modules, .git): what
  // a setup builds or a checkout's history are not what it reads.
  return {ignore_rules(def), def.gitignore};
}

// What the setup of `def` runs under, as env_store::key takes it.
std::string setup_confinement(const session_def& def) {
  // A confined setup builds what only a setup so confined builds: such environments are
  // keyed apart from those of unconfined setups.
  return def.confine && def.no_network ? "confine,no-network"
         : def.confine                 ? "confine"
         : def.no_network              ? "no-network"
                                       : "";
}

}  // namespace

result<session*> server::get_or_create_session(const std::string& name, const std::string& cwd,
                                               const std::function<std::vector<std::string>()>& environment) {
  // The shells end a bounded number at a time: none may take a new command meanwhile.
  if (shutting_down_) return make_error(ipc::errc::shutting_down, "sbshd is shutting down");
  if (auto* s = find_session(name)) return s;
  if (auto p = pending_.find(name); p != pending_.end())
    return make_error(ipc::errc::session_creating,
                      fmt::format("session '{}' is still being made {}; run commands in it once "
                                  "'sbsh session create' has returned",
                                  name, being_made(p->second.def)));
  auto dir = session_dir(cwd);
  if (!dir) return dir.err();
  session_def def;
  def.cwd = *dir;
  auto env = session_environment(environment());
  if (!env) return env.err();
  def.set_environment(std::move(*env));
  def.implicit = true;
  def.idle_expiry_ms = opts_.idle_expiry_ms;
  return create_session(name, std::move(def));
}

result<session*> server::create_session(const std::string& name, session_def def, adopted_shell* adopted) {
  if (shutting_down_) return make_error(ipc::errc::shutting_down, "sbshd is shutting down");
  if (opts_.no_sessions) return make_error(ipc::errc::session_failed, "this sbshd runs no sessions (a test build)");
  if (auto* s = find_session(name)) {
    // A session made implicitly takes the expiry and default timeout asked for; one defined
    // on purpose keeps its own, and another default timeout is another definition.
    if (s->def().same_shells(def) && (s->def().implicit || def.implicit || s->def().timeout_ms == def.timeout_ms)) {
      if (s->def().implicit && !def.implicit) {
        upkeep_.expiry_removed(s->def().idle_expiry_ms);
        upkeep_.expiry_added(def.idle_expiry_ms);
        s->make_explicit(def.idle_expiry_ms, def.timeout_ms);
        store_.save(name, s->def(), s->last_active_ms());
        upkeep_.arm_expiry();
      }
      return s;
    }
    return make_error(ipc::errc::session_exists,
                      fmt::format("session '{}' exists with a different definition: {}; remove it first with "
                                  "'sbsh session rm {}'",
                                  name, describe_difference(s->def(), def), name));
  }
  // Refused before any descriptor runs out, with room left for clients (capacity.h).
  if (auto room = room_for_session(sessions_.size()); !room && adopted == nullptr) return room.err();
  // A cgroup of the session's own for its limits. Only for them: moving bash into a cgroup
  // costs about 10 ms (the kernel's migration waits for RCU), more than the rest of a
  // confined session's start, whose PID namespace already ends all it started.
  def.cgroup.clear();
  if (def.has_cgroup_limits()) {
    auto dir = cgroups_.make(name, {def.memory_max, def.pids_max, def.cpu_millis});
    if (!dir) return dir.err();
    def.cgroup = std::move(*dir);
  }
  // A definition saved before sessions kept their creator's environment (or an adopted shell
  // not in the state file): the minimal one, never sbshd's.
  if (def.environment_vars().empty())
    if (auto login = session_environment({})) def.set_environment(std::move(*login));
  auto s = adopted != nullptr ? std::make_unique<session>(*this, name, def, std::move(*adopted))
                              : std::make_unique<session>(*this, name, def);
  session* raw = s.get();
  sessions_.emplace(name, std::move(s));
  spdlog::info("session {} created in {}{}", name, def.cwd, def.implicit ? " (implicitly)" : "");
  own_text_ += own_text_size(raw->def());
  store_.save(name, raw->def(), raw->last_active_ms(), state_on_disk_);
  upkeep_.expiry_added(raw->def().idle_expiry_ms);
  upkeep_.activity(*raw);
  return raw;
}

status server::room_for_definition(const std::string& name, const session_def& def) {
  if (find_session(name) != nullptr) return ok_status();  // the same definition, or create_session says how not
  // Kept as a sum, so that a creation costs the same however many sessions there are; an
  // environment shared by many definitions counts once.
  size_t total = own_text_ + store_.environ_bytes();
  std::set<std::string> more;  // environments not yet counted
  auto add = [&](const session_def& d) {
    total += own_text_size(d);
    if (d.environ && !store_.has_environ(d.environ->hash) && more.insert(d.environ->hash).second)
      total += d.environ->bytes;
  };
  add(def);
  for (const auto& [n, p] : pending_) add(p.def);
  if (total <= ipc::kMaxDefinitionsText) return ok_status();
  return make_error(ipc::errc::bad_request,
                    fmt::format("session '{}' cannot be defined: the definitions of all sessions would hold {:.1f} MiB "
                                "of directories, variables, init commands and environments ({} sessions, {} distinct "
                                "environments, each counted once), more than the {} MiB sbshd keeps; remove sessions "
                                "no longer needed with 'sbsh session rm' or 'sbsh session prune', or create sessions "
                                "from one environment (sessions whose creators' environments are the same share it)",
                                name, static_cast<double>(total) / (1u << 20), sessions_.size() + 1,
                                store_.environ_count() + more.size(), ipc::kMaxDefinitionsText >> 20));
}

void server::define_session(const std::string& name, session_def def, uint64_t serial,
                            std::function<void(result<session*>)> done, output_fn output) {
  if (opts_.no_sessions) return done(create_session(name, std::move(def)));  // refused: copies nothing
  if (!def.snapshot.empty()) {
    def.cwd = snapshots_.path_of(name);
  } else {
    auto dir = session_dir(def.cwd);
    if (!dir) return done(dir.err());
    def.cwd = *dir;
  }
  if (auto p = pending_.find(name); p != pending_.end() && !shutting_down_) {
    if (p->second.def != def)
      return done(make_error(ipc::errc::session_creating,
                             fmt::format("session '{}' is being made {}; wait for that, then "
                                         "remove it with 'sbsh session rm {}' to define it again",
                                         name, being_made(p->second.def), name)));
    p->second.waiters.push_back({serial, std::move(done), std::move(output)});
    return;
  }
  if (auto room = room_for_definition(name, def); !room) return done(room.err());
  if ((def.snapshot.empty() && def.setup.empty()) || shutting_down_ || find_session(name) != nullptr) {
    auto made = create_session(name, std::move(def));  // made, the same, or says why not
    if (!made) return done(made);
    return after_state_written([made, done = std::move(done)] { done(made); });
  }
  if (!def.snapshot.empty())
    if (auto ok = snapshots_.check_source(def.snapshot); !ok) return done(ok.err());
  auto& p = pending_[name];
  p.def = std::move(def);
  p.waiters.push_back({serial, std::move(done), std::move(output)});
  if (p.def.snapshot.empty()) return prepare_env(name);
  snapshot_store::rules rules{ignore_rules(p.def), p.def.gitignore};
  snapshots_.copy(name, p.def.snapshot, rules,
                  [this, name](result<uint64_t> copied) { snapshot_copied(name, std::move(copied)); });
}

void server::snapshot_copied(const std::string& name, result<uint64_t> copied) {
  auto p = pending_.find(name);
  if (p == pending_.end()) return;
  if (!copied) return pending_done(name, copied.err());
  p->second.def.special_skipped = *copied;
  if (p->second.def.setup.empty() || shutting_down_) return pending_done(name, ok_status());
  prepare_env(name);
}

void server::prepare_env(const std::string& name) {
  const session_def& def = pending_.at(name).def;
  std::vector<std::string> keys = setup_key_paths(def);
  uint64_t owner = pending_.at(name).waiters.empty() ? 0 : pending_.at(name).waiters.front().serial;
  envs_.key(def.setup, std::move(keys), key_rules(def), setup_confinement(def), owner,
            [this, name](result<std::string> hash) { env_keyed(name, std::move(hash)); });
}

env_store::setup_run server::setup_run_of(const std::string& name, const session_def& def) const {
  // What the session's shells start with (shell_supervisor.cpp), SBSH_ENV added by the store.
  env_store::setup_run how{def.setup, def.setup_keys, def.cwd, def.environment, {}};
  for (const auto& e : def.env) how.env.push_back(e);
  how.env.push_back("SBSH_SESSION=" + name);
  if (!root_of(def).empty()) how.env.push_back("SBSH_ROOT=" + root_of(def));
  how.wrapper_args = setup_wrapper_args(name, def, how.env);
  return how;
}

std::vector<std::string> server::setup_wrapper_args(const std::string& name, const session_def& def,
                                                    std::vector<std::string>& env) const {
  // As shell_supervisor::start_shell starts the session's shells, plus read-write on the
  // environment's directory, and a PID namespace even for a session that has none.
  std::vector<std::string> args;
  add_nofile_arg(opts_.children_nofile, args);
  for (const auto& l : def.limits) {
    args.emplace_back("--limit");
    args.push_back(l);
  }
  if (def.confine) {
    std::string tmp = session_tmp_dir(name);
    if (auto made = make_dirs(tmp); !made)
      spdlog::warn("cannot make the session's TMPDIR {}: {}", tmp, made.err().message);
    env.push_back("TMPDIR=" + tmp);
    for (const auto& r : own_rules(def, tmp)) {
      args.emplace_back("--rule");
      args.push_back(confine::rule_text(r));
    }
    args.emplace_back("--rule");
    args.push_back(confine::rule_text({def.sbsh_env, confine::access::read_write}));
  }
  args.emplace_back("--ns");
  args.emplace_back(def.no_network ? "pid,net" : "pid");
  return args;
}

void server::env_keyed(const std::string& name, result<std::string> hash) {
  auto p = pending_.find(name);
  if (p == pending_.end()) return;
  if (!hash) return pending_done(name, hash.err());
  if (p->second.waiters.empty() || shutting_down_)
    return pending_done(name, make_error(ipc::errc::cancelled, "nobody waits for the session any more"));
  session_def& def = p->second.def;
  def.sbsh_env = envs_.path_of(*hash);
  if (envs_.use_if_ready(*hash)) return pending_done(name, ok_status());
  spdlog::info("session {}: building its environment {}", name, *hash);
  p->second.env_ticket = envs_.build(
      *hash, setup_run_of(name, def),
      [this, name](uint32_t stream, std::string_view data) {
        auto it = pending_.find(name);
        if (it == pending_.end()) return;
        std::vector<output_fn> outs;  // a copy: a client may go while it is told
        for (const auto& w : it->second.waiters)
          if (w.output) outs.push_back(w.output);
        for (const auto& out : outs) out(stream, data);
      },
      [this, name, h = *hash](const status& built) {
        if (auto it = pending_.find(name); it != pending_.end()) it->second.env_ticket = 0;
        if (built) envs_.use_if_ready(h);
        pending_done(name, built);
        if (built) enforce_env_cap();
      });
}

uint64_t server::rebuild_env(const std::string& name, const session_def& def, std::function<void(const status&)> done) {
  uint64_t ticket = next_rebuild_++;
  rebuilds_[ticket].done = std::move(done);
  // The session may not be in the table yet (one loaded from the state file starts as it is
  // made): it is looked up once keyed.
  envs_.key(def.setup, setup_key_paths(def), key_rules(def), setup_confinement(def), 0, [this, name, ticket](result<std::string> hash) {
    auto it = rebuilds_.find(ticket);
    session* s = find_session(name);
    if (it == rebuilds_.end() || s == nullptr) return;  // cancelled: the session's shell went
    auto finish = [this, ticket](const status& outcome) {
      auto r = rebuilds_.find(ticket);
      if (r == rebuilds_.end()) return;
      auto d = std::move(r->second.done);
      rebuilds_.erase(r);
      d(outcome);
    };
    const session_def& def = s->def();
    if (!hash) return finish(hash.err());
    // Key files that changed key another environment: building that one under this one's
    // hash would make the hash lie, and the session was made for this one.
    if (envs_.path_of(*hash) != def.sbsh_env)
      return finish(make_error(ipc::errc::setup_failed,
                               fmt::format("its setup keys ({}) no longer key the same environment (they changed "
                                           "since the session was made, or an earlier sbsh keyed it otherwise), so "
                                           "its setup would build another one; remove the session with 'sbsh "
                                           "session rm {}' and create it again",
                                           fmt::join(def.setup_keys, ", "), name)));
    if (envs_.use_if_ready(*hash)) return finish(ok_status());  // built again meanwhile
    spdlog::warn("session {}: its environment {} is gone; running its setup again", name, *hash);
    it->second.env_ticket =
        envs_.build(*hash, setup_run_of(name, def), nullptr, [this, ticket, h = *hash](const status& built) {
          if (auto r = rebuilds_.find(ticket); r != rebuilds_.end()) r->second.env_ticket = 0;
          if (built) envs_.use_if_ready(h);
          auto r = rebuilds_.find(ticket);
          if (r == rebuilds_.end()) return;
          auto d = std::move(r->second.done);
          rebuilds_.erase(r);
          d(built);
        });
  });
  return ticket;
}

void server::cancel_rebuild(uint64_t ticket) {
  auto it = rebuilds_.find(ticket);
  if (it == rebuilds_.end()) return;
  if (it->second.env_ticket != 0) envs_.leave(it->second.env_ticket);
  rebuilds_.erase(it);
}

std::vector<std::string> server::env_users(const std::string& path) const {
  std::vector<std::string> names;
  for (const auto& [name, s] : sessions_)
    if (s->def().sbsh_env == path) names.push_back(name);
  for (const auto& [name, p] : pending_)
    if (p.def.sbsh_env == path) names.push_back(name);
  return names;
}

void server::list_envs(std::function<void(std::vector<environment_info>)> done) {
  envs_.list([this, done = std::move(done)](std::vector<environment_info> envs) {
    for (auto& e : envs) e.sessions = env_users(e.path);
    done(std::move(envs));
  });
}

void server::evict_envs(env_picker pick, std::function<void(std::vector<environment_info>)> done) {
  list_envs([this, pick = std::move(pick), done = std::move(done)](std::vector<environment_info> envs) {
    auto victims = pick(std::move(envs));
    auto left = std::make_shared<size_t>(victims.size() + 1);
    auto gone = std::make_shared<std::vector<environment_info>>();
    auto one_done = [left, gone, done] {
      if (--*left == 0) done(std::move(*gone));
    };
    for (auto& v : victims) {
      // Used since the list was made (a session created meanwhile), or being rebuilt: kept.
      if (!env_users(v.path).empty() || !envs_.remove(v.hash, one_done)) {
        one_done();
        continue;
      }
      spdlog::info("environment {} deleted ({} bytes)", v.hash, v.size_bytes);
      gone->push_back(std::move(v));
    }
    one_done();
  });
}

void server::enforce_env_cap() {
  if (opts_.env_cap == 0) return;
  evict_envs(
      [cap = opts_.env_cap](std::vector<environment_info> envs) {
        // All of them count, those in use too; the least recently used unused ones go first.
        uint64_t total = 0;
        for (const auto& e : envs) total += e.size_bytes;
        std::vector<environment_info> out;
        for (auto it = envs.rbegin(); it != envs.rend() && total > cap; ++it) {
          if (!it->sessions.empty()) continue;
          total -= it->size_bytes;
          out.push_back(*it);
        }
        if (total > cap) spdlog::warn("environments hold {} bytes, over the cap of {}, and sessions use them all", total, cap);
        return out;
      },
      [](const std::vector<environment_info>&) {});
}

void server::pending_done(const std::string& name, const status& outcome) {
  auto p = pending_.find(name);
  if (p == pending_.end()) return;
  pending_session waiting = std::move(p->second);
  pending_.erase(p);
  // Every client that asked for it went away meanwhile (killed while its copy ran, or while
  // the copy's end waited for the loop): an interrupted creation leaves nothing.
  auto anyone = [this](const std::vector<pending_session::waiter>& ws) {
    return std::any_of(ws.begin(), ws.end(), [this](const auto& w) { return client_by_serial(w.serial) != nullptr; });
  };
  status wanted = outcome && !anyone(waiting.waiters)
                      ? status(make_error(ipc::errc::cancelled, "nobody waits for the session any more"))
                      : outcome;
  result<session*> made = wanted ? create_session(name, waiting.def) : result<session*>(wanted.err());
  // A copy that belongs to no session (it failed, or sbshd is shutting down) is deleted.
  if (!made && !waiting.def.snapshot.empty()) {
    std::string aside = snapshots_.set_aside(name);
    if (!aside.empty()) snapshots_.remove_later(aside, nullptr);
  }
  if (!made && !anyone(waiting.waiters)) spdlog::info("session {} was not made: {}", name, made.err().message);
  session* mine = made ? *made : nullptr;
  after_state_written([this, name, made, mine, anyone, waiters = std::move(waiting.waiters)] {
    // The answer waited for the state file (behind other work on the thread pool): if every
    // client that asked has gone meanwhile, the session it made goes too, unless something
    // has used it since.
    session* s = mine != nullptr ? find_session(name) : nullptr;
    if (s != nullptr && s == mine && !anyone(waiters) && !s->jobs().used() && !procs_->any_running(name)) {
      spdlog::info("session {}: removed, as nobody waits for it any more", name);
      remove_session(name, false, [](const std::string&) {});
      return;
    }
    for (const auto& w : waiters) w.done(made);
  });
}

namespace {

// Whether the last command `s` ran failed: a non-zero status, a timeout, or the shell lost.
bool last_command_failed(const session& s) {
  auto history = s.describe_full().history;
  if (history.empty()) return false;
  const history_entry& h = history.back();
  return h.timed_out || h.shell_restarted || !h.exit_code || *h.exit_code != 0;
}

}  // namespace

void server::remove_session(const std::string& name, bool keep_copy, std::function<void(std::string)> done) {
  auto it = sessions_.find(name);
  if (it == sessions_.end()) {
    done({});
    return;
  }
  std::unique_ptr<session> s = std::move(it->second);
  sessions_.erase(it);
  // The copy is renamed now, so that a new session of this name gets a fresh one: into the
  // kept copies, or aside to be deleted once the session's processes are gone.
  const bool snapshot = !s->def().snapshot.empty();
  std::string kept;
  if (snapshot && (keep_copy || (s->def().keep_copy_on_failure && last_command_failed(*s)))) kept = snapshots_.keep(name);
  std::function<void()> finished = [done = std::move(done), kept] { done(kept); };
  if (std::string aside = !snapshot || !kept.empty() ? "" : snapshots_.set_aside(name); !aside.empty())
    finished = [this, aside, finished = std::move(finished)] { snapshots_.remove_later(aside, finished); };
  // A confined session's TMPDIR goes the same way: renamed now, deleted once its processes are.
  if (std::string tmp = session_tmp_dir(name), aside = fmt::format("{}.removed-{}", tmp, mono_us());
      s->def().confine && ::rename(tmp.c_str(), aside.c_str()) == 0)
    finished = [this, aside, finished = std::move(finished)] { snapshots_.remove_later(aside, finished); };
  own_text_ -= own_text_size(s->def());
  store_.remove(name);
  procs_->kill_all(name);
  s->stop(/*removed=*/true);
  upkeep_.expiry_removed(s->def().idle_expiry_ms);
  session* raw = s.get();
  removed_.push_back(std::move(s));
  // Wait for the wrapper to end the session's processes, then sweep for stragglers. A wrapper
  // still there once its own bound for that has passed is stuck, and is killed; one killed
  // sooner, on a loaded machine, would leave what it had not reached yet running.
  auto deadline = std::make_shared<uv::handle_ptr<uv::timer>>(uv::make_handle<uv::timer>(&loop_));
  auto finish = [this, raw, deadline, done = std::make_shared<std::function<void()>>(std::move(finished))] {
    deadline->reset();
    removed(raw, std::move(*done));
  };
  (*deadline)->start(wrapper::kWrapperStopWaitMs, finish);
  raw->when_gone(finish);
}

void server::removed(session* s, std::function<void()> done) {
  auto it = std::find_if(removed_.begin(), removed_.end(), [s](const auto& p) { return p.get() == s; });
  if (it == removed_.end()) return;  // finished already (the deadline and the exit both came)
  pid_t sid = s->last_wrapper_pid();
  std::string cgroup = s->def().cgroup;
  removed_.erase(it);
  sweep_session(sid, std::move(done), {}, std::move(cgroup));
}

void server::sweep_session(pid_t sid, std::function<void()> done, std::set<pid_t> spare, std::string cgroup) {
  off_loop(
      &loop_, [sid, spare = std::move(spare), cgroup = std::move(cgroup)] {
        if (sid > 1) procs::signal_session(sid, 0, SIGKILL, spare);
        cgroup::kill_and_remove(cgroup, 2000);
      },
      std::move(done));
}

void server::reap_session_later(pid_t sid, const std::set<pid_t>& spare) {
  if (sid > 1) sweep_session(sid, nullptr, spare);
}

bool server::busy(const session& s) const {
  return s.jobs_const().current() != nullptr || s.jobs_const().queued() > 0 || (procs_ && procs_->any_running(s.name()));
}

void server::session_activity(const session& s) {
  // Idle times are saved at most once a minute (and at shutdown): losing a minute of one in
  // a crash changes nothing that matters, and a command's end costs no write.
  if (!shutting_down_ && s.def().idle_expiry_ms > 0 && !activity_save_timer_) {
    activity_save_timer_ = uv::make_handle<uv::timer>(&loop_);
    activity_save_timer_->start(60'000, [this] { save_state(); });
  }
  upkeep_.activity(s);
}

void server::expire(const std::string& name) {
  spdlog::info("session {} removed: idle for {} ms, its expiry", name, find_session(name)->def().idle_expiry_ms);
  remove_session(name, false, [](const std::string&) {});
}

void server::prune_sessions(uint64_t idle_ms, std::function<void(std::vector<std::string>)> done) {
  int64_t now = wall_ms();
  std::vector<std::string> names;
  for (const auto& [name, s] : sessions_)
    if (s->def().implicit && !busy(*s) && now - s->last_active_ms() >= static_cast<int64_t>(idle_ms))
      names.push_back(name);
  auto left = std::make_shared<size_t>(names.size());
  auto finish = std::make_shared<std::function<void(std::vector<std::string>)>>(std::move(done));
  if (names.empty()) return (*finish)({});
  for (const auto& name : names) {
    spdlog::info("session {} pruned: idle for {} ms", name, now - find_session(name)->last_active_ms());
    remove_session(name, false, [left, finish, names](const std::string&) {
      if (--*left == 0) (*finish)(names);
    });
  }
  upkeep_.arm_expiry();
}

}  // namespace sbsh::daemon
