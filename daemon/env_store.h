// Environments built once and shared by content (`sbsh session create --setup COMMAND
// --setup-key FILE...`), in STATE/envs.
//
// An environment is keyed by a hash of its setup's text, the contents of its keys (files, or
// directories walked as a snapshot's copy walks them: wheels/) and
// the bash that runs it (its path and its bytes): STATE/envs/HASH is the directory the
// setup fills (SBSH_ENV), built in place, never moved (a Python venv breaks when it is
// relocated). STATE/envs/HASH.ready, written last and atomically once the setup succeeded,
// marks it complete and says what made it; its modification time is when a session last
// started with it. While a setup runs, STATE/envs/HASH.building names its process session,
// so that a directory an sbshd killed halfway through left behind is recognised, whatever it
// started is ended, and it is built again from nothing.
//
// The setup runs in `bash -c`, started by `sbsh-wrapper --setup` (wrapper/wrapper.cpp) in a
// process session of its own, with the session's environment and directory and SBSH_ENV
// set, stdin from /dev/null; its output goes to everyone waiting for it as it comes.
// The wrapper starts bash as a session's shell is started (wrapper/spawn.cpp): under the
// same confinement when the session is confined (its Landlock rules plus read-write on
// SBSH_ENV, its namespaces), and always as the init of a PID namespace of its own, so that
// when bash ends the kernel ends everything the setup started (a `setsid` daemon
// included), and all of it ends with the wrapper, which ends with sbshd. Creators asking for
// the same hash while it runs wait for the same run and share its outcome. A failed setup
// leaves nothing.
#pragma once

#include <uv.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/snapshots.h"
#include "ipc/records.h"
#include "ipc/result.h"

namespace sbsh::daemon {

class env_store {
 public:
  // Environments live in `dir`; their setups run under `bash`, started by `wrapper`
  // (sbsh-wrapper --setup).
  env_store(uv_loop_t* loop, std::string dir, std::string bash, std::string wrapper);
  ~env_store();
  env_store(const env_store&) = delete;
  env_store& operator=(const env_store&) = delete;

  // The hash keying `setup` with the keys `keys` (absolute paths) and `confinement` (what the
  // setup runs under, "" when nothing: a confined session's environment is built confined,
  // and never shared with an unconfined one), computed on the thread pool as client
  // `owner`'s work (off_loop_client); `done` gets it, or an error naming a key that cannot be
  // read or is neither a regular file nor a directory. A directory key is its tree without
  // what `rules` leave out (the rules of a snapshot's copy): each entry's path relative to
  // it, kind, and contents (a file's bytes and executable bit, a link's target, never
  // followed), in sorted order; one holding a FIFO, device or socket is refused.
  void key(std::string setup, std::vector<std::string> keys, snapshot_store::rules rules, std::string confinement,
           uint64_t owner, std::function<void(result<std::string>)> done);
  [[nodiscard]] std::string path_of(const std::string& hash) const { return dir_ + "/" + hash; }
  // Whether environment `hash` is complete; if so it counts as used now.
  bool use_if_ready(const std::string& hash) const;

  // How a setup runs: its text, the files that keyed it (recorded with it), the session's
  // directory and environment, and the options sbsh-wrapper runs it with (--limit, --rule,
  // --ns: those of the session's shells, a confined setup's rules with read-write on the
  // environment's directory, and always a PID namespace).
  struct setup_run {
    std::string setup;
    std::vector<std::string> keys;
    std::string cwd;
    std::vector<std::string> env;
    std::vector<std::string> wrapper_args;
  };
  using output_fn = std::function<void(uint32_t stream, std::string_view data)>;
  // Builds environment `hash` by running the setup, or joins the build under way: `out` gets
  // its output as it comes, `done` its outcome (ok once the environment is complete, else
  // setup_failed with its status and the end of its output). Returns a ticket for leave().
  uint64_t build(const std::string& hash, const setup_run& how, output_fn out, std::function<void(status)> done);
  // The waiter `ticket` no longer waits (its `done` never runs); a build that nobody waits
  // for any more is stopped, and leaves nothing.
  void leave(uint64_t ticket);
  // Calls `idle` once no setup runs (at once when none does), every process it started
  // gone: sbshd's shutdown waits for it.
  void when_idle(std::function<void()> idle);

  // The complete environments, most recently used first, measured on the thread pool (their
  // `sessions` are left for the caller to fill).
  void list(std::function<void(std::vector<environment_info>)> done);
  // Deletes complete environment `hash`: its marker goes at once (no session starts with it
  // any more), its directory on the thread pool, then `done` runs. no_such_env when there is
  // none, or its setup is running.
  status remove(const std::string& hash, std::function<void()> done);
  // Deletes what interrupted setups left (directories without a marker, no setup running).
  void sweep_incomplete();

 private:
  struct build_job;
  void start(const std::string& hash, const setup_run& how);
  static void read_output(build_job& job, int which);
  void setup_ended(const std::string& hash, int64_t status, int sig);
  void finish(const std::string& hash, const status& outcome);
  uint64_t seq_ = 0;

  uv_loop_t* loop_;
  std::string dir_;
  std::string bash_;
  std::string wrapper_;
  std::map<std::string, std::unique_ptr<build_job>> builds_;  // by hash
  uint64_t next_ticket_ = 1;
  std::function<void()> idle_;  // when_idle's
};

}  // namespace sbsh::daemon
