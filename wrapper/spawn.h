// Starting bash. The code the child runs before exec() lives in spawn.cpp alone and is
// async-signal-safe.
#pragma once

#include <sys/types.h>

#include <span>
#include <string>
#include <vector>

#include "common/limits.h"
#include "ipc/result.h"

namespace sbsh::wrapper {

// What bash starts with besides /dev/null on stdin. A one-shot run (a setup) has no channel
// and no script, and its own stdout.
struct shell_fds {
  int channel = -1;    // bash's end of the shell channel: becomes SBSH_CHANNEL_FD; -1: none
  int script = -1;     // the read end of the script pipe: becomes SBSH_SCRIPT_FD (/dev/fd/3); -1: none
  int early_err = -1;  // stderr until the builtin serves: what a failed start says
  int out = -1;        // stdout; -1: /dev/null
};

struct sandbox_plan;  // sandbox.h

// Where bash runs (session create --confine, --no-network): see common/confine.h.
struct shell_confinement {
  int ruleset = -1;      // a Landlock ruleset applied to bash and all it starts; -1: none
  bool pid_ns = false;   // bash is the init of a PID namespace of its own
  bool net_ns = false;   // in a network namespace of its own, with loopback up
  int cgroup_procs = -1;  // a cgroup's cgroup.procs, open for writing: bash starts in it; -1: none
  // A confined session's (sandbox.h): a user, mount, UTS and IPC namespace of its own, the
  // view, no capabilities, the seccomp program. nullptr: none of these.
  const sandbox_plan* sandbox = nullptr;
};

// Starts `bash_path --noprofile --norc /dev/fd/3` (or `argv`, when given: a null-terminated
// argument array) with those descriptors, dying with its parent, under `limits` (the
// session's) and `confinement`. Every other descriptor is closed. Namespaces need
// CAP_SYS_ADMIN: without it, bash also gets a user namespace of its own in which it has the
// same user and group IDs. A sandboxed shell always gets one: when this process is root,
// mapped to the plan's unprivileged user, and then the child waits for this process to write
// its maps and hand it the session's directories, mounted idmapped.
result<pid_t> spawn_shell(const char* bash_path, const shell_fds& fds, std::span<const rlimit_spec> limits = {},
                          const shell_confinement& confinement = {}, char* const* argv = nullptr);

// A confined shell started before its session is known (a confined spare, sbsh-wrapper
// --spare-confined): the child is cloned into its namespaces, mapped, and builds the part of
// the view that is the same for every session (`system`: a plan of the system's paths alone,
// with the seccomp program), then waits. finish() gives it the session's part and it execs
// bash, as spawn_shell's child would have. The child is a copy of this process (never
// CLONE_VM): it waits on its own memory. It dies with this process; dropping an unfinished
// stage kills it.
class staged_shell {
 public:
  staged_shell() = default;
  staged_shell(staged_shell&& o) noexcept { *this = std::move(o); }
  staged_shell& operator=(staged_shell&& o) noexcept;
  staged_shell(const staged_shell&) = delete;
  staged_shell& operator=(const staged_shell&) = delete;
  ~staged_shell();

  // `system` must outlive the call only; `fds` stay open in the child until it execs.
  static result<staged_shell> start(const char* bash_path, const shell_fds& fds, const sandbox_plan& system);

  // Whether `full` (the session's plan: `system`'s mounts and its own) can be finished from
  // this stage: its mounts beyond the system's are all its own, none holds or hides a path of
  // the system's view, and the system's are those the child built.
  [[nodiscard]] bool fits(const sandbox_plan& full) const;

  // Places `full`'s own paths, enters the view at full.cwd (and, with `network`, the network
  // namespace the stage made ahead, only loopback up) and execs bash with `env`, restricted by
  // `ruleset` (Landlock) and the seccomp program; returns bash's pid once it runs. On failure
  // the child is gone.
  result<pid_t> finish(const sandbox_plan& full, int ruleset, bool network, const std::vector<std::string>& env);

  [[nodiscard]] explicit operator bool() const { return pid_ > 0; }

 private:
  void reset();  // kills and reaps an unfinished child

  pid_t pid_ = 0;
  int pidfd_ = -1;
  int link_ = -1;  // this process's end of the socket to the child
  bool map_by_parent_ = false;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  std::vector<std::string> system_;  // the mounts the child built, in order (path, source, kind)
};

}  // namespace sbsh::wrapper
