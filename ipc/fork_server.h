// The fork server: one sbsh-wrapper, started by sbshd with --fork-server, that starts every
// other wrapper as a copy of itself (wrapper/fork_server.h), so that the pages the C and C++
// runtimes wrote at start are shared by all wrappers rather than written again in each.
// sbshd's side is daemon/fork_server.h. Both read the grammar from here.
//
// Over a SOCK_SEQPACKET socket pair, at descriptor kForkServerFd in the server, one message
// each way at a time:
//   server -> sbshd, once at start: reply{0, 0} ready; reply{0, errno} it cannot serve
//   sbshd -> server: request_header, then the working directory, argc arguments and envc
//                    variables, each ending in a NUL; with exactly kForkFds descriptors
//                    (SCM_RIGHTS), which become the new wrapper's 0 .. kForkFds-1
//   server -> sbshd: reply{pid, 0}: started, sbshd's child (clone with CLONE_PARENT);
//                    reply{0, errno}: not started (the directory, a malformed request, ...)
#pragma once

#include <cstddef>
#include <cstdint>

namespace sbsh::wrapper {

inline constexpr int kForkServerFd = 3;
inline constexpr int kForkFds = 6;  // stdin, stdout, stderr, kControlFd, kChannelFd, kChannelOwnerFd
// The largest request; a wrapper whose arguments and environment need more is started by
// sbshd itself (posix_spawn), as are all when no fork server runs.
inline constexpr size_t kMaxForkRequest = size_t{64} * 1024;
inline constexpr const char* kForkServerArg = "--fork-server";

struct fork_request_header {
  uint32_t argc = 0;
  uint32_t envc = 0;
  uint32_t size = 0;  // of the strings that follow: directory, arguments, variables
};

struct fork_reply {
  int32_t pid = 0;
  int32_t error = 0;  // an errno
};

}  // namespace sbsh::wrapper
