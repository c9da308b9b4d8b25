// Starting bash. The code the child runs before exec() lives in spawn.cpp alone and is
// async-signal-safe.
#pragma once

#include <sys/types.h>

#include <span>

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

}  // namespace sbsh::wrapper
