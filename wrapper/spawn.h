// Starting bash. The code between fork() and exec() lives in spawn.cpp alone and is
// async-signal-safe.
#pragma once

#include <sys/types.h>

#include "ipc/result.h"

namespace sbsh::wrapper {

// Forks and execs bash with `script_fd` as its stdin and /dev/null as stdout and stderr,
// in its own process group, dying with its parent. Every other descriptor is closed.
result<pid_t> spawn_shell(const char* bash_path, int script_fd);

}  // namespace sbsh::wrapper
