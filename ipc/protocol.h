// The sbsh wire protocol: message numbers, error codes and limits.
//
// One codec (frame.h) carries these messages on both links: client <-> sbshd over the
// unix socket, and sbshd <-> sbsh-wrapper over the control socketpair. Each message's
// fields, their types and which side sends it are declared once, in ipc/messages.h; that
// declaration encodes and decodes them and writes the MESSAGES section of
// man/sbsh-protocol.7 (tests/unit/schema_test.cpp keeps the page in step).
//
// A frame is a 4-byte big-endian length followed by that many bytes of one msgpack map.
// Every map has "type" (one of msg_type) and, on requests and their replies, "id".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ipc/result.h"

namespace sbsh::ipc {

// Bump this if any message, field or meaning below changes incompatibly.
inline constexpr uint32_t kProtocolVersion = 1;

// Hard cap on one frame's body, checked before anything is allocated.
inline constexpr size_t kMaxFrame = 16u << 20;
// Largest bin chunk sbshd puts in one output frame, and the largest a client should send.
inline constexpr size_t kMaxChunk = 256u << 10;
// Most file descriptors one frame may carry (SCM_RIGHTS).
inline constexpr size_t kMaxFds = 8;

// Numbered in groups; a number is never reused (a retired one stays here as `// unused`).
enum class msg_type : uint32_t {
  // 100: handshake and generic replies
  hello = 100,
  welcome = 101,
  error = 102,
  ok = 103,

  // 200: sessions
  session_list = 200,
  session_info = 201,
  session_create = 202,
  session_show = 203,
  session_detail = 204,
  session_rm = 205,
  session_restart = 206,
  session_prune = 207,
  session_pruned = 208,
  session_removed = 209,
  kept_list = 210,
  kept_info = 211,
  kept_prune = 212,

  // 300: exec and its I/O
  exec = 300,
  output = 301,
  stdin_data = 302,
  stdin_eof = 303,
  exec_done = 304,
  cancel = 305,
  release = 306,
  exec_started = 307,
  exec_detached = 308,
  command_wait = 309,
  command_logs = 310,
  command_kill = 311,
  command_running = 312,
  command_input = 313,
  lease = 314,
  lease_granted = 315,
  lease_ended = 316,

  // 400: daemon
  status = 400,
  status_reply = 401,
  shutdown = 402,

  // 500: daemon <-> wrapper (control socketpair, or a wrapper's adoption socket)
  wrapper_ready = 500,
  signal_command = 501,
  signal_result = 502,
  shell_exited = 503,
  ping = 504,
  pong = 505,
  protect_group = 506,
  unprotect_group = 507,
  claim = 508,
  adopt = 509,
  adopted = 510,
  initialized = 511,
  lend_channel = 512,
  channel_lent = 513,

  // 600: background processes
  proc_start = 600,
  proc_info = 601,
  proc_list = 602,
  proc_table = 603,
  proc_kill = 604,
  proc_wait = 605,
  proc_logs = 606,
  logs_end = 607,

  // 700: files beneath a session's root
  file_read = 700,
  file_opened = 701,
  file_chunk = 702,
  file_end = 703,
  file_write = 704,
  file_data = 705,
  file_close = 706,
  file_stat = 707,
  file_info = 708,
  file_list = 709,
  file_entries = 710,
  file_remove = 711,
  file_mkdir = 712,
  file_move = 713,

  // 800: environments built by setups
  env_list = 800,
  env_info = 801,
  env_remove = 802,
  env_prune = 803,
};

// The name of a message type ("exec_done"), or "unknown" (messages.cpp).
std::string_view type_name(msg_type t);

// A session's name: 1 to kSessionNameMax letters, digits, '.', '_' or '-', starting with a
// letter or digit. sbshd refuses any other (invalid_session_name); clients that check before
// sending (the MCP tools' schemas) take the rule from here.
inline constexpr size_t kSessionNameMax = 64;
inline constexpr std::string_view kSessionNamePattern = "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$";
// A session's restart policies (when a shell that ended is replaced), the first the default.
inline constexpr std::string_view kRestartPolicies[] = {"always", "on-failure", "never"};
// The most a session's pids limit may be: Linux's own (the largest pid_max).
inline constexpr uint64_t kMaxSessionPids = uint64_t{1} << 22;
// The range of a session's CPU limit, in thousandths of a CPU: 0.01 to 1000 CPUs.
inline constexpr uint64_t kMinSessionCpuMillis = 10;
inline constexpr uint64_t kMaxSessionCpuMillis = 1'000'000;

// Error codes, carried as strings in "code" of an error message and in "error_code" of
// exec_done. Clients compare against these; wire_name() is the string.
enum class errc {
  bad_frame,             // not a msgpack map, too large: the connection is closed
  bad_request,           // a field is missing, of the wrong type or invalid
  version_mismatch,      // hello with another protocol version
  handshake_required,    // a request before hello
  invalid_session_name,  // a session name outside ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$
  unknown_request,       // a message type this sbshd does not serve
  shell_restarted,       // the shell ended: the command did not run, or its state was lost
  session_failed,        // the session is failed or exited: see the message
  session_exists,        // a session of that name is defined differently
  session_creating,      // the session's snapshot is still being copied
  no_such_session,
  no_such_process,
  no_such_command,  // no kept command of that id (never kept, expired, or sbshd restarted)
  bad_directory,    // a directory that does not exist or cannot be entered
  start_failed,     // a background process could not start
  not_started,      // a background process has not started yet
  timeout,          // the deadline passed first
  too_slow,         // a client left replies unread, or a proc_logs follower fell behind
  cancelled,        // exec: cancelled before it started
  shutting_down,
  internal,
  // Refusals and drops that protect sbshd (bounds.h): the message says which bound and why.
  permission_denied,  // a connection from another uid
  too_many_clients,   // sbshd serves as many connections as it allows
  memory_limit,       // all clients together held too much of sbshd's memory
  would_deadlock,     // the request comes from inside the command it would wait for
  no_input,           // command_input: the command takes no input (now)
  input_full,         // command_input: the command has not read what it was sent yet
  // Files beneath a session's root (file_*), and exec -C / start -C in a session with one.
  no_root,        // the session has no root to reach files beneath
  outside_root,   // the path leads outside the session's root
  file_failed,    // the file request failed: no such file, not a directory, ...
  setup_failed,   // session_create: the environment's setup failed (its output is in the message)
  env_in_use,     // env_remove: sessions use the environment
  no_such_env,    // env_remove: no environment of that hash
  not_supported,  // the kernel or the system lacks what the request needs (Landlock, namespaces)
  read_only,      // file requests: a write beneath a directory a confined session may only read
  // Codes the programs and the client library give themselves; sbshd never sends them.
  io,                // a system call on a socket, pipe or file failed
  eof,               // the other end closed the connection
  unreachable,       // no sbshd listens on the socket
  protocol,          // sbshd's reply broke the protocol
  usage,             // a command line, option or argument is wrong
  invalid_argument,  // the C ABI: an argument is NULL or has no valid value
  write_error,       // a command's output could not be written where it was going
  too_large,         // a request would not fit in one frame
  file,              // a plan, or a file a plan writes, cannot be read or written
  invalid_plan,      // a plan is not valid YAML or JSON, or not a valid plan
  bad_socket,        // the socket path is empty, too long, or not a socket
  unsafe_dir,        // the runtime or state directory is a link, another user's, or open to others
  already_running,   // another sbshd serves this socket or state directory
  bad_activation,    // the sockets a service manager passed cannot be used
  log_file,          // sbshd's log file cannot be opened
  spawn,             // a program could not be started (bash, the wrapper, a setup, a copy)
  gone,              // sbshd: the session's shell closed its channel
  bad_message,       // sbshd: the shell sent a malformed message on its channel
  no_landlock,       // the kernel has no Landlock, so a session cannot be confined
  invalid,           // a confinement rule is malformed
};

// A setup_failed message ends with the end of the setup's output, after these words, one
// line of it per line (each made printable). A client that showed the output as it came
// (the CLI) shows the message only up to them.
inline constexpr std::string_view kSetupOutputFollows = "; the end of its output:\n";

// Where a code comes from: sbshd sends it, or a program or the client library gives it
// without a reply from sbshd (the C ABI and the CLI's --json show both kinds).
enum class errc_origin { sbshd, local };

// Each code with its string and what it means, in the order of errc; the ERROR CODES section
// of man/sbsh-protocol.7 is this table.
struct errc_info {
  errc code;
  std::string_view wire;
  std::string_view meaning;
  errc_origin origin = errc_origin::sbshd;
};
inline constexpr auto kErrorCodes = std::to_array<errc_info>({
    {errc::bad_frame, "bad_frame", "the frame is not one msgpack map within the limits; the connection is closed"},
    {errc::bad_request, "bad_request", "a field is missing, of the wrong type or invalid; the message says which"},
    {errc::version_mismatch, "version_mismatch", "hello named another protocol version"},
    {errc::handshake_required, "handshake_required", "a request came before a successful hello"},
    {errc::invalid_session_name, "invalid_session_name",
     "a session name does not match ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"},
    {errc::unknown_request, "unknown_request", "this sbshd serves no request of that type"},
    {errc::shell_restarted, "shell_restarted",
     "the session's shell ended: the command did not run, or ran and the session's state was lost"},
    {errc::session_failed, "session_failed", "the session is failed or exited; the message says why"},
    {errc::session_exists, "session_exists", "a session of that name exists with another definition"},
    {errc::session_creating, "session_creating", "the session's snapshot is still being copied"},
    {errc::no_such_session, "no_such_session", "no session of that name"},
    {errc::no_such_process, "no_such_process", "no background process of that id or name"},
    {errc::no_such_command, "no_such_command",
     "no kept command of that id: never kept, expired, or kept by an sbshd that has since restarted"},
    {errc::bad_directory, "bad_directory",
     "a directory (cwd, snapshot, exec's cwd) does not exist or cannot be entered"},
    {errc::start_failed, "start_failed", "the background process could not start"},
    {errc::not_started, "not_started", "the background process has not started yet"},
    {errc::timeout, "timeout",
     "the deadline passed first: proc_wait's process still runs, or exec's command waited in the queue past its "
     "timeout"},
    {errc::too_slow, "too_slow",
     "the client left its replies unread (more than 32 MiB, or unread for 60 s) and is dropped; or a proc_logs "
     "follower fell more than 16 MiB behind"},
    {errc::cancelled, "cancelled", "exec: cancelled before it started"},
    {errc::shutting_down, "shutting_down", "sbshd is shutting down"},
    {errc::internal, "internal", "sbshd failed for a reason of its own; the message says which"},
    {errc::permission_denied, "permission_denied",
     "the connection comes from another user; only sbshd's own uid is served"},
    {errc::too_many_clients, "too_many_clients",
     "sbshd already serves as many connections as it allows; the connection is closed"},
    {errc::memory_limit, "memory_limit",
     "all clients together held more of sbshd's memory than it allows; the biggest holder is dropped"},
    {errc::would_deadlock, "would_deadlock",
     "exec, proc_start: the request comes from a process of the command its session is running (or of a command "
     "waiting for that one), so it would wait for itself; it is refused at once"},
    {errc::no_input, "no_input",
     "command_input: the command takes no input: it was started without --interactive or --tty, its input was "
     "ended, or it has ended; the message says which"},
    {errc::input_full, "input_full",
     "command_input: the command has not read the 1 MiB of input it was sent yet; send the rest once it has"},
    {errc::no_root, "no_root",
     "file requests: the session has no root (create it with a root or from a snapshot) for paths to be beneath"},
    {errc::outside_root, "outside_root",
     "the path leads outside the session's root: .. above it, an absolute path elsewhere, or a symlink pointing "
     "out; the message names the path as given, never where it leads"},
    {errc::file_failed, "file_failed",
     "a file request failed (no such file, not a directory, not a regular file, exists already, ...); the "
     "message names the path as given and the reason"},
    {errc::setup_failed, "setup_failed",
     "session_create: the environment's setup exited non-zero or was killed; the message holds its exit status and "
     "the end of its output, nothing of it was kept, and the next creator runs it again"},
    {errc::env_in_use, "env_in_use",
     "env_remove: sessions are defined with the environment (or one is being made with it); remove them, or force"},
    {errc::no_such_env, "no_such_env", "env_remove: no complete environment of that hash"},
    {errc::not_supported, "not_supported",
     "the kernel or the system lacks what the request needs (Landlock for confine); the message says what"},
    {errc::read_only, "read_only",
     "file requests: the path lies beneath a directory a confined session may only read (allow_read, read_only), "
     "and the request would write, remove, make or move there"},
    {errc::io, "io", "a system call on a socket, pipe or file failed; the message names it and the system's reason",
     errc_origin::local},
    {errc::eof, "eof", "the other end closed the connection before the reply was whole", errc_origin::local},
    {errc::unreachable, "unreachable",
     "no sbshd listens on the socket (the CLI and the library start one where they may)", errc_origin::local},
    {errc::protocol, "protocol", "sbshd's reply broke the protocol: a descriptor or a field it promised is missing",
     errc_origin::local},
    {errc::usage, "usage", "a command line, an option or an argument is wrong; the message says how to write it",
     errc_origin::local},
    {errc::invalid_argument, "invalid_argument",
     "the C ABI: an argument is NULL or has no valid value; the message names the function", errc_origin::local},
    {errc::write_error, "write_error",
     "a command's output could not be written where it was going (the client's stdout, a file)", errc_origin::local},
    {errc::too_large, "too_large", "the request would not fit in one frame; the message says by how much",
     errc_origin::local},
    {errc::file, "file", "a plan, or a file a plan writes, cannot be read or written", errc_origin::local},
    {errc::invalid_plan, "invalid_plan",
     "a plan is not valid YAML or JSON, or not a valid plan; the message says where", errc_origin::local},
    {errc::bad_socket, "bad_socket",
     "the socket path is empty, too long for a socket, or names something that is not a socket", errc_origin::local},
    {errc::unsafe_dir, "unsafe_dir",
     "the runtime or state directory is a symbolic link, another user's, or open to others", errc_origin::local},
    {errc::already_running, "already_running", "another sbshd already serves this socket or state directory",
     errc_origin::local},
    {errc::bad_activation, "bad_activation", "sbshd cannot use the sockets its service manager passed",
     errc_origin::local},
    {errc::log_file, "log_file", "sbshd cannot open its log file", errc_origin::local},
    {errc::spawn, "spawn", "a program could not be started: the session's bash, its wrapper, an environment's setup or a snapshot's "
     "copy; the message gives the system's reason", errc_origin::local},
    {errc::gone, "gone",
     "inside sbshd: the session's shell closed its channel (its loss is reported as shell_restarted)",
     errc_origin::local},
    {errc::bad_message, "bad_message", "inside sbshd: the shell sent a malformed message on its channel",
     errc_origin::local},
    {errc::no_landlock, "no_landlock",
     "the kernel has no Landlock, so a session cannot be confined; the message names the kernel", errc_origin::local},
    {errc::invalid, "invalid", "a confinement rule is malformed; the message says how to write it", errc_origin::local},
});
static_assert([] {
  for (size_t i = 0; i < kErrorCodes.size(); ++i)
    if (kErrorCodes[i].code != static_cast<errc>(i)) return false;
  return true;
}(), "kErrorCodes lists every errc once, in the enum's order");

constexpr std::string_view wire_name(errc c) { return kErrorCodes[static_cast<size_t>(c)].wire; }
constexpr std::optional<errc> errc_from_name(std::string_view s) {
  for (const auto& e : kErrorCodes)
    if (e.wire == s) return e.code;
  return std::nullopt;
}
using sbsh::make_error;
inline error make_error(errc c, std::string message) { return error{std::string(wire_name(c)), std::move(message)}; }
// Whether `e` carries wire error code `c`.
inline bool has_code(const error& e, errc c) { return e.code == wire_name(c); }

// The two codes the frame reader (frame.cpp) gives, which works below the schema; everything
// else uses errc.
namespace err {
inline constexpr std::string_view bad_frame = wire_name(errc::bad_frame);
inline constexpr std::string_view bad_request = wire_name(errc::bad_request);
}  // namespace err

// Streams in output frames.
inline constexpr uint32_t kStdout = 1;
inline constexpr uint32_t kStderr = 2;

}  // namespace sbsh::ipc
