// What a session (session.h) and its shell supervisor (shell_supervisor.h) need of sbshd: the
// loop and counters, what every job runner shares, the options, starting a wrapper or taking
// a spare shell, cleaning up after a dead one, a session's environment built again, and
// telling sbshd that a session was active. The server is the one host; a session sees it only
// through this, so neither it nor its shell includes the server, nor it them.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/counters.h"
#include "daemon/env_store.h"
#include "daemon/options.h"
#include "daemon/runner_ports.h"
#include "daemon/session_def.h"
#include "daemon/wrapper_process.h"
#include "ipc/result.h"
#include "uv/child_process.h"

namespace sbsh::daemon {

class session;

class session_host {
 public:
  virtual ~session_host() = default;

  virtual uv_loop_t* loop() = 0;
  // What sbshd has done since it started (sbsh status); counted where it happens.
  virtual daemon::counters& counters() = 0;
  // What every session's job runner shares (runner_ports.h).
  [[nodiscard]] virtual const runner_context& runner_ctx() const = 0;
  [[nodiscard]] virtual const options& opts() const = 0;
  [[nodiscard]] virtual uint64_t health_interval_ms() const = 0;

  // Starts sbsh-wrapper with `args` after its options, for a shell whose directory (for the
  // adoption socket) is `dir`, with the environment `env`, in `cwd`: /dev/null as stdin,
  // sbshd's stderr as stdout and stderr, a new control socket at wrapper::kControlFd, and a
  // new shell channel, bash's end at wrapper::kChannelFd and a copy of sbshd's at
  // wrapper::kChannelOwnerFd (kept by the wrapper for adoption). An error says what failed.
  virtual result<wrapper_process> start_wrapper(const std::string& dir, const std::vector<std::string>& args,
                                                std::vector<std::string>& env, const char* cwd,
                                                uv::child_process::exit_callback on_exit) = 0;
  // A new directory for a shell about to start: SOCKET.d/PID.N, unique to this sbshd.
  virtual std::string new_shell_dir() = 0;
  // A confined session's private TMPDIR: STATE/tmp/NAME, deleted with the session.
  [[nodiscard]] virtual std::string session_tmp_dir(const std::string& name) const = 0;
  // A running spare shell for a new session to claim, or nullopt when none is ready;
  // another is started on the next turn of the loop.
  virtual std::optional<spare_shell> take_spare() = 0;
  // The same for a confined session's shell: a confined spare (sbsh-wrapper
  // --spare-confined), whose shell waits, staged, for the session's options (msg::claim's
  // args and env). None are kept until a confined session's shell first starts.
  virtual std::optional<spare_shell> take_confined_spare() = 0;
  // Kills whatever is left of a dead wrapper's process session, but `spare`, on the thread
  // pool.
  virtual void reap_session_later(pid_t sid, const std::set<pid_t>& spare) = 0;

  // The environments built by setups (env_store.h).
  virtual env_store& envs() = 0;
  // The environment of existing session `name`, defined by `def`, is gone (env rm --force, or
  // deleted by hand): its setup runs again when its key files still key the same environment,
  // and `done` gets the outcome (an error saying what to run when they have changed). Returns
  // a ticket for cancel_rebuild, after which `done` never runs and a setup nobody else waits
  // for stops.
  virtual uint64_t rebuild_env(const std::string& name, const session_def& def,
                               std::function<void(const status&)> done) = 0;
  virtual void cancel_rebuild(uint64_t ticket) = 0;

  // A session's activity changed (a command or background process started or ended): its
  // idle time counts from now, and the expiry timer is set again.
  virtual void session_activity(const session& s) = 0;
  // Whether the session has something to do: a command running or queued, a background
  // process running.
  [[nodiscard]] virtual bool busy(const session& s) const = 0;
  // How many shells' channels sbshd holds its end of now (an idle session's is parked with
  // its wrapper: shell_supervisor::park); held_channel keeps it.
  virtual uint64_t& channels_held() = 0;
};

}  // namespace sbsh::daemon
