// The sbsh wire protocol: message numbers, field names and limits.
//
// One codec (frame.h) carries these messages on both links: client <-> sbshd over the
// unix socket, and sbshd <-> sbsh-wrapper over the control socketpair. man/sbsh-protocol.7
// is the user-facing description of this file; keep the two in step.
//
// A frame is a 4-byte big-endian length followed by that many bytes of one msgpack map.
// Every map has "type" (one of msg_type) and, on requests and their replies, "id".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sbsh::ipc {

// Bump this if any message, field or meaning below changes incompatibly.
inline constexpr uint32_t kProtocolVersion = 1;

// Hard cap on one frame's body, checked before anything is allocated.
inline constexpr size_t kMaxFrame = 16u << 20;
// Largest bin chunk sbshd puts in one output frame, and the largest a client should send.
inline constexpr size_t kMaxChunk = 256u << 10;
// Most file descriptors one frame may carry (SCM_RIGHTS).
inline constexpr size_t kMaxFds = 8;

enum class msg_type : uint32_t {
  // 100: handshake and generic replies
  hello = 100,    // c->d  version, client
  welcome = 101,  // d->c  version, server, pid
  error = 102,    // d->c  id, code, message
  ok = 103,       // d->c  id

  // 200: sessions
  session_list = 200,     // c->d  id
  session_info = 201,     // d->c  id, sessions
  session_create = 202,   // c->d  id, name, cwd, env, init, restart      -> ok | error
  session_show = 203,     // c->d  id, name                               -> session_detail
  session_detail = 204,   // d->c  id, session
  session_rm = 205,       // c->d  id, name   (ok once everything is gone) -> ok | error
  session_restart = 206,  // c->d  id, name                               -> ok | error

  // 300: exec and its I/O
  exec = 300,          // c->d  id, session, command, cwd, env, timeout_ms, grace_ms, io, stdin
  output = 301,        // d->c  id, stream, data       (io "frames")
  stdin_data = 302,    // c->d  id, data               (io "frames")
  stdin_eof = 303,     // c->d  id                     (io "frames")
  exec_done = 304,     // d->c  id, exit_code, signal, timed_out, shell_restarted, ...
  cancel = 305,        // c->d  id, signal
  release = 306,       // c->d  id                     (io "fds": client has drained its pipes)

  // 400: daemon
  status = 400,    // c->d  id
  status_reply = 401,  // d->c  id, pid, version, uptime_ms, sessions
  shutdown = 402,  // c->d  id, keep_sessions

  // 500: daemon <-> wrapper (control socketpair only)
  wrapper_ready = 500,   // w->d  shell_pid, wrapper_pid
  signal_command = 501,  // d->w  id, since_pid, since_ticks, signal, interrupt
  signal_result = 502,   // w->d  id, count
  shell_exited = 503,    // w->d  exit_code | signal, [error] (what a shell that never served said)
  ping = 504,            // d->w  id
  pong = 505,            // w->d  id
  protect_group = 506,   // d->w  pgid, proc, streams, fds: spare this group when the shell ends,
                         //       and hold its log and status pipes' read ends (see adopted)
  unprotect_group = 507, // d->w  pgid
  claim = 508,           // d->w  session, cwd: a spare becomes this session's
  // On a wrapper's adoption socket (SOCKET.d/<shell>/w), the first frame of a new sbshd; the
  // connection then serves as the control socket.
  adopt = 509,           // d->w  pid
  adopted = 510,         // w->d  session, cwd, shell_pid, wrapper_pid, started_at_ms, groups,
                         //       procs, initialized, generation, fds [channel] (sbshd's end of the shell
                         //       channel); then `procs` protect_group frames, each as it was
                         //       received
  initialized = 511,     // d->w  generation: the shell ran its init commands (or a spare's claim): a later
                         //       sbshd may adopt it; until then it would be half set up

  // 600: background processes
  proc_start = 600,    // c->d  id, session, name, command, cwd, env, session_cwd -> proc_info
  proc_info = 601,     // d->c  id, proc                 (one process)
  proc_list = 602,     // c->d  id, all                  -> proc_table
  proc_table = 603,    // d->c  id, procs
  proc_kill = 604,     // c->d  id, proc, signal         -> proc_info once it ended (or ok)
  proc_wait = 605,     // c->d  id, proc, timeout_ms     -> proc_info | error "timeout"
  proc_logs = 606,     // c->d  id, proc, follow, tail, stdout, stderr -> output..., logs_end
  logs_end = 607,      // d->c  id, proc
};

// Error codes carried in "code" of an error message.
namespace err {
inline constexpr std::string_view bad_frame = "bad_frame";            // not a msgpack map, too large
inline constexpr std::string_view bad_request = "bad_request";        // a field is missing or of the wrong type
inline constexpr std::string_view version_mismatch = "version_mismatch";
inline constexpr std::string_view not_ready = "handshake_required";   // a request before hello
inline constexpr std::string_view invalid_session = "invalid_session_name";
inline constexpr std::string_view unknown_request = "unknown_request";
inline constexpr std::string_view shell_restarted = "shell_restarted";  // state lost before the command ran
inline constexpr std::string_view session_failed = "session_failed";    // failed or exited: see message
inline constexpr std::string_view session_exists = "session_exists";    // defined differently already
inline constexpr std::string_view session_creating = "session_creating";  // its snapshot is being copied
inline constexpr std::string_view no_session = "no_such_session";
inline constexpr std::string_view shutting_down = "shutting_down";
inline constexpr std::string_view bad_directory = "bad_directory";  // a directory that does not exist
inline constexpr std::string_view timeout = "timeout";              // the deadline passed first
inline constexpr std::string_view internal = "internal";
// Refusals and drops that protect sbshd (bounds.h): the message says which bound and why.
inline constexpr std::string_view permission_denied = "permission_denied";  // another uid
inline constexpr std::string_view too_many_clients = "too_many_clients";
inline constexpr std::string_view too_slow = "too_slow";          // replies left unread
inline constexpr std::string_view memory_limit = "memory_limit";  // all clients held too much
}  // namespace err

// Streams in output frames.
inline constexpr uint32_t kStdout = 1;
inline constexpr uint32_t kStderr = 2;

}  // namespace sbsh::ipc
