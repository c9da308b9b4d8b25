// What bounds the number of sessions one sbshd holds, and the refusals that name it.
//
// An idle session holds 1 of sbshd's descriptors: the control socket to its wrapper, which
// the wrapper watches to learn that sbshd went away. sbshd learns of its wrappers' ends from
// SIGCHLD (uv/child_process.h), with no descriptor each; a wrapper an earlier sbshd left
// (adopted, not sbshd's child) is watched through a pidfd, 1 more until it ends
// (uv::child_process::descriptors_held). Its shell channel (the per-command fast path, a
// direct socket to the builtin) is parked with the wrapper, which holds a copy, while the
// session is idle, and taken back for the next command (shell_supervisor::park): a session
// whose channel is held (a command runs, or it ran one in the last --park-after-ms) costs 2.
// sbshd parks the least recently used idle sessions' channels at once when descriptors run
// short (idle_upkeep::relieve_descriptors), so sessions_supported() counts 1 a session; the
// channels in use come out of the descriptors kept for what is not a session. sbshd also
// raises its limit at start to what the system allows (raise_descriptor_limit), and says how
// many sessions that makes (`sbsh status`); when they run out anyway, the refusal names the
// resource, its figure and how to raise it. Each session is also 2 processes (its wrapper
// and its bash).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/result.h"

namespace sbsh::daemon {

inline constexpr uint64_t kDescriptorsPerSession = 1;
inline constexpr uint64_t kProcessesPerSession = 2;
// About what an idle session holds in memory: its wrapper and sbshd's share (about 45 kB)
// and an idle bash (about 325 kB), as sbsh-supervision-bench measures them.
inline constexpr uint64_t kIdleSessionKb = 370;

// The soft and hard RLIMIT_NOFILE.
struct nofile_limit {
  uint64_t soft = 0, hard = 0;
};

// At start: the hard RLIMIT_NOFILE up to fs.nr_open where sbshd may raise it (root, or
// CAP_SYS_RESOURCE), then the soft one up to the hard one. Returns the limits sbshd was
// started with, which the wrappers give back to themselves and their shells: what a shell
// would have had without sbshd in between (a huge soft limit slows programs that close every
// descriptor up to it, and breaks those that select() on a descriptor past 1023). {0, 0}
// when they cannot be read.
nofile_limit raise_descriptor_limit();
// Adds to a wrapper's arguments the --nofile that gives it and its shell `started` back
// (what raise_descriptor_limit returned), when sbshd's own limit is above it.
void add_nofile_arg(const nofile_limit& started, std::vector<std::string>& args);

// Descriptors of `limit` kept for what is not a session: clients (and the pipes their
// commands pass), state files, logs, spare shells, the channels of sessions whose commands run.
uint64_t reserved_descriptors(uint64_t limit);
// sbshd's soft RLIMIT_NOFILE now.
uint64_t descriptor_limit();
// How many sessions `limit` descriptors hold, after those kept for clients, commands' pipes,
// state files and spare shells.
uint64_t sessions_supported(uint64_t limit);
// Entries of /proc/self/fd: the descriptors sbshd holds now.
uint64_t open_descriptors();

// A new session when `sessions` exist: refused, saying which limit and how to raise it,
// when it would not fit under the descriptor limit.
status room_for_session(size_t sessions);

// What to say when making a descriptor or starting a process (`what`: "create its control
// socket") failed with `err`: for EMFILE, ENFILE, EAGAIN and ENOMEM the resource, its figure
// and how to raise it; otherwise the system's reason.
std::string resource_failure(int err, std::string_view what);

// What to say when starting a process failed with `err` (uv::child_process::options::explain).
std::string spawn_failure(int err);

}  // namespace sbsh::daemon
