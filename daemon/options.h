// sbshd's options: what its command line (main.cpp) and the tests set, read by the server and
// by what it starts (sessions, their shells).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "daemon/capacity.h"
#include "ipc/bounds.h"

namespace sbsh::daemon {

struct options {
  std::string socket_path;
  std::string state_dir;
  std::string wrapper_path;  // empty: sbsh-wrapper beside sbshd, else on PATH
  bool foreground = false;
  uint64_t health_interval_ms = 10'000;  // 0: no health checks
  uint64_t log_cap = 64u << 20;          // bytes of each background process stream kept
  unsigned spare_wrappers = 1;           // wrappers started ahead of need (wrapper::run_spare)
  // How long a session outlives sbshd, waiting for the next sbshd to adopt it (0: it ends
  // with sbshd).
  uint64_t adopt_timeout_ms = 600'000;
  // How long a session made implicitly (exec -s, start -s) may stay idle before sbshd removes
  // it (0: never).
  uint64_t idle_expiry_ms = 24ull * 3600 * 1000;
  // Bounds that tests lower (hidden options of sbshd; bounds.h has the defaults and why).
  size_t max_clients = ipc::kMaxClients;
  uint64_t stalled_client_ms = ipc::kStalledClientMs;
  size_t keep_finished = 1000;  // finished background processes kept in the table
  // How long a session's shell channel stays unused before sbshd parks it with the wrapper
  // (shell_supervisor::park); 0: only when descriptors run short.
  uint64_t park_after_ms = 2000;
  // How many sessions a shutdown ends at a time (server::stop_more_sessions).
  size_t stop_at_once = 256;
  // The most bytes all environments (session create --setup) may hold; the least recently
  // used that no session uses are deleted to stay within it. 0: no cap.
  uint64_t env_cap = 10ull << 30;
  // For fuzzing request handling: every request that would create a session (and so start
  // a wrapper and a shell, or copy a snapshot) is refused.
  bool no_sessions = false;
  // Who a confined session's shell is outside its user namespace when sbshd runs as root
  // (--confine-user; nobody by default). Unprivileged, sbshd's shells are its own user.
  uid_t confine_uid = 65534;
  gid_t confine_gid = 65534;
  // The RLIMIT_NOFILE the wrappers give themselves and their shells: sbshd's own before it
  // raised it (capacity.h); 0: sbshd's own.
  nofile_limit children_nofile;
  // The state directory's lock (state_lock.h), held by the caller; -1 when there is none.
  int state_lock_fd = -1;
};

}  // namespace sbsh::daemon
