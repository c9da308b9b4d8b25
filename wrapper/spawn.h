// Starting bash. The code the child runs before exec() lives in spawn.cpp alone and is
// async-signal-safe.
#pragma once

#include <sys/types.h>

#include <span>

#include "ipc/limits.h"
#include "ipc/result.h"

namespace sbsh::wrapper {

// What bash starts with besides /dev/null on stdin and stdout.
struct shell_fds {
  int channel = -1;   // bash's end of the shell channel: becomes SBSH_CHANNEL_FD
  int script = -1;    // the read end of the script pipe: becomes SBSH_SCRIPT_FD (/dev/fd/3)
  int early_err = -1;  // stderr until the builtin serves: what a failed start says
};

// Starts `bash_path --noprofile --norc /dev/fd/3` with those descriptors, dying with its
// parent, under `limits` (the session's). Every other descriptor is closed.
result<pid_t> spawn_shell(const char* bash_path, const shell_fds& fds, std::span<const ipc::rlimit_spec> limits = {});

}  // namespace sbsh::wrapper
