// Starting bash. The code the child runs before exec() lives in spawn.cpp alone and is
// async-signal-safe.
#pragma once

#include <sys/types.h>

#include <span>

#include "ipc/limits.h"
#include "ipc/result.h"

namespace sbsh::wrapper {

// Starts bash with `script_fd` as its stdin, `status_fd` as its stdout and
// /dev/null as stderr, dying with its parent, under `limits` (the session's). Every other
// descriptor is closed.
result<pid_t> spawn_shell(const char* bash_path, int script_fd, int status_fd,
                          std::span<const ipc::rlimit_spec> limits = {});

}  // namespace sbsh::wrapper
