// What sbshd holds of a wrapper process outside any session: a started wrapper, a spare
// shell waiting to be claimed, a shell an earlier sbshd left running, and the pipes of
// background processes lent to a wrapper. The server keeps these (the spare pool, adoption
// at start) without knowing a session's parts; shell_supervisor.h takes them over.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/fd.h"
#include "uv/child_process.h"

namespace sbsh::daemon {

// A started sbsh-wrapper: the process, sbshd's end of its control socket, and of its shell's
// channel.
struct wrapper_process {
  uv::child_ptr proc;
  unique_fd ctl;
  unique_fd channel;
};

// A wrapper started ahead of need (wrapper::run_spare) whose bash is already running its
// builtin: the next new session takes it (shell_supervisor::claim).
struct spare_shell {
  wrapper_process wrapper;
  std::string dir;  // its directory, for the adoption socket
};

// A background process's pipes, lent to the session's wrapper so that they outlive sbshd:
// the read ends of its stdout ('o'), stderr ('e') and status ('s') pipes, one letter per
// descriptor in `streams` (a stream already at end-of-file is left out). The wrapper never
// reads them; it only keeps them open, so the process neither gets SIGPIPE nor loses a byte
// while no sbshd runs, and hands them to the next sbshd in `adopted`.
struct lent_pipes {
  uint64_t proc = 0;  // its id in the process table
  std::string streams;
  std::vector<unique_fd> fds;
};
inline constexpr std::string_view kLentStreams = "oes";

// A session's wrapper and bash left running by an earlier sbshd, taken over at start-up
// (server::adopt_orphans): what the wrapper said of them in `adopted`.
struct adopted_shell {
  std::string session;  // empty: a spare nobody claimed
  std::string cwd, dir;
  pid_t shell_pid = 0, wrapper_pid = 0;
  int64_t started_at_ms = 0;
  uint64_t generation = 0;            // as the earlier sbshd numbered the shell (0: not known)
  std::set<pid_t> groups;             // background processes' groups, spared when the shell ends
  std::map<pid_t, lent_pipes> pipes;  // by group: the pipes the wrapper held
  unique_fd ctl;                      // the connection to the wrapper's adoption socket
  unique_fd channel;                  // sbshd's end of the shell channel
};

// Removes a shell's directory (its wrapper's adoption socket, then the directory), when its
// wrapper cannot: it was killed, or never started.
void remove_shell_dir(const std::string& dir);

}  // namespace sbsh::daemon
