// Every message of the protocol and every record inside one, declared once.
//
// Each message is a struct in ipc::msg named as its msg_type, with its kind (number, name,
// which side sends it, whether it carries a request id) and the table of its fields (the
// codec is ipc/wire.h). Send one with ipc::encode(msg::exec_done{...}, id); read one with
// ipc::decode<msg::exec>(message). The records both sides share (ipc/records.h) have their
// tables in schema_of<> below. The MESSAGES section of man/sbsh-protocol.7 is generated from
// this file (tests/unit/schema_test.cpp checks it), so it cannot drift from the code.
//
// Adding a message: a number in protocol.h, a struct here, its name in msg::all, a
// handler; then regenerate the manual's section (see schema_test.cpp). Adding a field: a
// member and one table entry.
#pragma once

#include <csignal>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "ipc/protocol.h"
#include "ipc/records.h"
#include "ipc/wire.h"

namespace sbsh::ipc {

enum class route { client_to_daemon, daemon_to_client, daemon_to_wrapper, wrapper_to_daemon, state_file };

struct message_kind {
  msg_type type;
  std::string_view name;
  route dir;
  bool has_id;  // carries the request's id
  // Every str in a frame to a client is valid UTF-8; other frames carry text exactly.
  [[nodiscard]] constexpr text_rule texts() const {
    return dir == route::daemon_to_client ? text_rule::utf8 : text_rule::exact;
  }
};

// "signal": a number or a name ("TERM", "SIGTERM"); 0 when absent. Decoding checks it.
struct signal_spec {
  int number = 0;
};
template <>
struct wire<signal_spec> {
  static constexpr std::string_view noun = "a signal number or name";
  static std::string doc() { return "int or str"; }
  static void pack(wire_packer& pk, signal_spec v) { pk.pack_int64(v.number); }
  static bool empty(signal_spec v) { return v.number == 0; }
  static std::string show(signal_spec v) { return v.number == 0 ? "" : std::to_string(v.number); }
  static bool read(const msgpack::object& o, signal_spec& out, decoder& d);
};

// "proc": a background process by id, or by name (or its id as a decimal string).
struct proc_ref {
  uint64_t id = 0;
  std::string_view name;  // when sent as a string
};
template <>
struct wire<proc_ref> {
  static constexpr std::string_view noun = "a process id or name";
  static std::string doc() { return "uint or str"; }
  static void pack(wire_packer& pk, proc_ref v) {
    if (v.name.empty()) pk.pack_uint64(v.id);
    else wire<std::string_view>::pack(pk, v.name);
  }
  static bool empty(proc_ref v) { return v.id == 0 && v.name.empty(); }
  static std::string show(proc_ref) { return ""; }
  static bool read(const msgpack::object& o, proc_ref& out, decoder& d);
};

// ---- Records ----------------------------------------------------------------------------

template <>
struct schema_of<session_status> {
  static constexpr std::string_view name = "session";
  static bool running(const session_status& s) { return !s.running.empty(); }
  static constexpr auto fields() {
    using s = session_status;
    return std::tuple{field("name", &s::name),
                      field("state", &s::state),
                      field("wrapper_pid", &s::wrapper_pid),
                      field("shell_pid", &s::shell_pid),
                      field("restarts", &s::restarts),
                      field("queued", &s::queued),
                      field("commands", &s::commands),
                      field("cwd", &s::cwd),
                      bytes_of("cwd_bytes", &s::cwd, "only when cwd is not valid UTF-8: its exact bytes"),
                      field("error", &s::error),
                      field("started_at_ms", &s::started_at_ms),
                      field("uptime_ms", &s::uptime_ms),
                      field("restart", &s::restart),
                      field("running", &s::running).only_if(running, "while a command runs"),
                      field("running_ms", &s::running_ms).only_if(running, "while a command runs"),
                      field("implicit", &s::implicit, kOmitEmpty),
                      field("idle_expiry_ms", &s::idle_expiry_ms, kOmitEmpty),
                      field("idle_since_ms", &s::idle_since_ms, kOmitEmpty),
                      field("expires_at_ms", &s::expires_at_ms, kOmitEmpty),
                      field("timeout_ms", &s::timeout_ms, kOmitEmpty)};
  }
};

// A session's definition: session_create's fields, and `definition` in session_detail and
// the state file. The name travels beside it, never in it.
template <>
struct schema_of<session_spec> {
  static constexpr std::string_view name = "definition";
  static constexpr auto fields() {
    using s = session_spec;
    return std::tuple{field("cwd", &s::cwd),
                      bytes_of("cwd_bytes", &s::cwd, "only when cwd is not valid UTF-8: its exact bytes"),
                      field("env", &s::env),
                      field("init", &s::init),
                      field("restart", &s::restart),
                      field("limits", &s::limits),
                      field("snapshot", &s::snapshot),
                      bytes_of("snapshot_bytes", &s::snapshot, "only when snapshot is not valid UTF-8: its exact bytes"),
                      field("root", &s::root, kOmitEmpty),
                      bytes_of("root_bytes", &s::root, "only when root is not valid UTF-8: its exact bytes"),
                      field("environment", &s::environment, kOmitEmpty),
                      field("implicit", &s::implicit, kOmitEmpty),
                      field("idle_expiry_ms", &s::idle_expiry_ms, kOmitEmpty),
                      field("timeout_ms", &s::timeout_ms, kOmitEmpty),
                      field("ignore", &s::ignore, kOmitEmpty),
                      field("no_default_ignores", &s::no_default_ignores, kOmitEmpty),
                      field("gitignore", &s::gitignore, kOmitEmpty),
                      field("keep_copy_on_failure", &s::keep_copy_on_failure, kOmitEmpty),
                      field("special_skipped", &s::special_skipped, kOmitEmpty),
                      field("setup", &s::setup, kOmitEmpty),
                      field("setup_keys", &s::setup_keys, kOmitEmpty),
                      bytes_of("setup_keys_bytes", &s::setup_keys, "only when a key is not valid UTF-8: each one's exact bytes"),
                      field("sbsh_env", &s::sbsh_env, kOmitEmpty),
                      field("confine", &s::confine, kOmitEmpty),
                      field("allow_write", &s::allow_write, kOmitEmpty),
                      bytes_of("allow_write_bytes", &s::allow_write, "only when a path is not valid UTF-8: each one's exact bytes"),
                      field("allow_read", &s::allow_read, kOmitEmpty),
                      bytes_of("allow_read_bytes", &s::allow_read, "only when a path is not valid UTF-8: each one's exact bytes"),
                      field("read_only", &s::read_only, kOmitEmpty),
                      bytes_of("read_only_bytes", &s::read_only, "only when a path is not valid UTF-8: each one's exact bytes"),
                      field("no_network", &s::no_network, kOmitEmpty),
                      field("landlock_abi", &s::landlock_abi, kOmitEmpty),
                      field("memory_max", &s::memory_max, kOmitEmpty),
                      field("pids_max", &s::pids_max, kOmitEmpty),
                      field("cpu_millis", &s::cpu_millis, kOmitEmpty),
                      field("cgroup", &s::cgroup, kOmitEmpty)};
  }
};

template <>
struct schema_of<environment_info> {
  static constexpr std::string_view name = "environment";
  static constexpr auto fields() {
    using s = environment_info;
    return std::tuple{field("hash", &s::hash),
                      field("path", &s::path),
                      bytes_of("path_bytes", &s::path, "only when path is not valid UTF-8: its exact bytes"),
                      field("setup", &s::setup),
                      field("keys", &s::keys),
                      field("size_bytes", &s::size_bytes),
                      field("created_at_ms", &s::created_at_ms),
                      field("last_used_ms", &s::last_used_ms),
                      field("sessions", &s::sessions)};
  }
};

template <>
struct schema_of<kept_copy> {
  static constexpr std::string_view name = "kept copy";
  static constexpr auto fields() {
    using s = kept_copy;
    return std::tuple{field("session", &s::session), field("path", &s::path),
                      bytes_of("path_bytes", &s::path, "only when path is not valid UTF-8: its exact bytes"),
                      field("kept_at_ms", &s::kept_at_ms), field("size_bytes", &s::size_bytes)};
  }
};

template <>
struct schema_of<file_entry> {
  static constexpr std::string_view name = "file entry";
  static constexpr auto fields() {
    using s = file_entry;
    return std::tuple{field("path", &s::path),
                      bytes_of("path_bytes", &s::path, "only when path is not valid UTF-8: its exact bytes"),
                      field("type", &s::type),
                      field("size", &s::size),
                      field("mode", &s::mode),
                      field("mtime_ms", &s::mtime_ms),
                      field("target", &s::target, kOmitEmpty),
                      bytes_of("target_bytes", &s::target, "only when target is not valid UTF-8: its exact bytes")};
  }
};

template <>
struct schema_of<history_entry> {
  static constexpr std::string_view name = "history entry";
  static constexpr auto fields() {
    using s = history_entry;
    return std::tuple{field("command", &s::command),
                      bytes_of("command_bytes", &s::command, "only when command is not valid UTF-8: its exact bytes"),
                      field("exit_code", &s::exit_code),
                      field("timed_out", &s::timed_out),
                      field("shell_restarted", &s::shell_restarted),
                      field("started_at_ms", &s::started_at_ms),
                      field("duration_ms", &s::duration_ms)};
  }
};

template <>
struct schema_of<daemon_counters> {
  static constexpr std::string_view name = "counters";
  static constexpr auto fields() {
    using s = daemon_counters;
    return std::tuple{field("commands", &s::commands),         field("failed", &s::failed),
                      field("timed_out", &s::timed_out),       field("shell_restarts", &s::shell_restarts),
                      field("bytes_streamed", &s::bytes_streamed), field("clients", &s::clients)};
  }
};

template <>
struct schema_of<session_detail> {
  static constexpr std::string_view name = "session detail";
  static constexpr auto fields() {
    using s = session_detail;
    return std::tuple_cat(embed(&s::status),
                          std::tuple{field("definition", &s::definition),
                                     field("init_output", &s::init_output),
                                     field("history", &s::history)});
  }
};

std::optional<int64_t> pgid_of(const proc_info& p);
std::string signal_name_of(const proc_info& p);

template <>
struct schema_of<proc_info> {
  static constexpr std::string_view name = "process";
  static constexpr auto fields() {
    using s = proc_info;
    return std::tuple{field("id", &s::id),
                      field("name", &s::name),
                      field("session", &s::session),
                      field("command", &s::command),
                      field("pid", &s::pid, kNilIfZero),
                      derived("pgid", pgid_of),
                      field("state", &s::state),
                      field("exit_code", &s::exit_code),
                      field("signal", &s::signal),
                      derived("signal_name", signal_name_of),
                      field("started_at_ms", &s::started_at_ms),
                      field("ended_at_ms", &s::ended_at_ms, kNilIfZero),
                      field("error", &s::error),
                      field("log", &s::log_path),
                      bytes_of("log_bytes", &s::log_path, "only when log is not valid UTF-8: its exact bytes")};
  }
};

std::string signal_name_of_command(const command_info& c);

template <>
struct schema_of<command_info> {
  static constexpr std::string_view name = "kept command";
  static constexpr auto fields() {
    using s = command_info;
    return std::tuple{field("id", &s::id),
                      field("session", &s::session),
                      field("command", &s::command),
                      field("state", &s::state),
                      field("detached", &s::detached),
                      field("pid", &s::pid, kNilIfZero),
                      field("exit_code", &s::exit_code),
                      field("signal", &s::signal),
                      derived("signal_name", signal_name_of_command),
                      field("timed_out", &s::timed_out),
                      field("cancelled", &s::cancelled),
                      field("started_at_ms", &s::started_at_ms, kNilIfZero),
                      field("ended_at_ms", &s::ended_at_ms, kNilIfZero)};
  }
};

// ---- Messages ---------------------------------------------------------------------------

namespace msg {

using enum route;

// 100: handshake and generic replies

struct hello {
  static constexpr message_kind kind{msg_type::hello, "hello", client_to_daemon, true};
  uint64_t version = 0;
  std::string_view client;
  static constexpr auto fields() {
    return std::tuple{field("version", &hello::version, kRequired), field("client", &hello::client, kOmitEmpty)};
  }
};

struct welcome {
  static constexpr message_kind kind{msg_type::welcome, "welcome", daemon_to_client, true};
  uint64_t version = 0;
  std::string_view server;
  int64_t pid = 0;
  // It keeps the environment an exec sends with keep_env for the connection's later execs
  // (same_env): a client then sends its environment once, not with every command.
  bool keeps_env = false;
  static constexpr auto fields() {
    return std::tuple{field("version", &welcome::version), field("server", &welcome::server),
                      field("pid", &welcome::pid), field("keeps_env", &welcome::keeps_env, kOmitEmpty)};
  }
};

// The id is the request's, or absent when the error is not about one.
struct error {
  static constexpr message_kind kind{msg_type::error, "error", daemon_to_client, true};
  std::string_view code;
  std::string_view message;
  static constexpr auto fields() {
    return std::tuple{field("code", &error::code), field("message", &error::message)};
  }
};

struct ok {
  static constexpr message_kind kind{msg_type::ok, "ok", daemon_to_client, true};
  static constexpr auto fields() { return std::tuple{}; }
};

// 200: sessions

struct session_list {
  static constexpr message_kind kind{msg_type::session_list, "session_list", client_to_daemon, true};
  static constexpr auto fields() { return std::tuple{}; }
};

struct session_info {
  static constexpr message_kind kind{msg_type::session_info, "session_info", daemon_to_client, true};
  std::vector<session_status> sessions;
  static constexpr auto fields() { return std::tuple{field("sessions", &session_info::sessions)}; }
};

struct session_create {
  static constexpr message_kind kind{msg_type::session_create, "session_create", client_to_daemon, true};
  std::string_view name;
  session_spec definition;  // its name is not sent: `name` is
  static constexpr auto fields() {
    return std::tuple_cat(std::tuple{field("name", &session_create::name, kRequired)},
                          embed(&session_create::definition, "snapshot"));
  }
};

struct session_show {
  static constexpr message_kind kind{msg_type::session_show, "session_show", client_to_daemon, true};
  std::string_view name;
  static constexpr auto fields() { return std::tuple{field("name", &session_show::name, kRequired)}; }
};

struct session_detail {
  static constexpr message_kind kind{msg_type::session_detail, "session_detail", daemon_to_client, true};
  sbsh::session_detail session;
  static constexpr auto fields() { return std::tuple{field("session", &session_detail::session, kRequired)}; }
};

// Removes a session; keep_copy leaves its snapshot's copy in place, as a kept copy. The
// reply is ok, or session_removed when a copy was kept.
struct session_rm {
  static constexpr message_kind kind{msg_type::session_rm, "session_rm", client_to_daemon, true};
  std::string_view name;
  bool keep_copy = false;
  static constexpr auto fields() {
    return std::tuple{field("name", &session_rm::name, kRequired), field("keep_copy", &session_rm::keep_copy, kOmitEmpty)};
  }
};

struct session_restart {
  static constexpr message_kind kind{msg_type::session_restart, "session_restart", client_to_daemon, true};
  std::string_view name;
  static constexpr auto fields() { return std::tuple{field("name", &session_restart::name, kRequired)}; }
};

// Removes every session made implicitly (exec -s, start -s) that has been idle for at least
// idle_ms; the reply names them once nothing of them is left.
struct session_prune {
  static constexpr message_kind kind{msg_type::session_prune, "session_prune", client_to_daemon, true};
  uint64_t idle_ms = 0;
  static constexpr auto fields() { return std::tuple{field("idle_ms", &session_prune::idle_ms)}; }
};

struct session_pruned {
  static constexpr message_kind kind{msg_type::session_pruned, "session_pruned", daemon_to_client, true};
  str_list names;
  static constexpr auto fields() { return std::tuple{field("names", &session_pruned::names)}; }
};

// A session was removed and its snapshot's copy kept, at `kept`.
struct session_removed {
  static constexpr message_kind kind{msg_type::session_removed, "session_removed", daemon_to_client, true};
  std::string kept;
  static constexpr auto fields() { return std::tuple{field("kept", &session_removed::kept)}; }
};

// The kept copies (kept_info), oldest first.
struct kept_list {
  static constexpr message_kind kind{msg_type::kept_list, "kept_list", client_to_daemon, true};
  static constexpr auto fields() { return std::tuple{}; }
};

struct kept_info {
  static constexpr message_kind kind{msg_type::kept_info, "kept_info", daemon_to_client, true};
  std::vector<kept_copy> copies;
  static constexpr auto fields() { return std::tuple{field("copies", &kept_info::copies)}; }
};

// Deletes every kept copy; the reply (kept_info) lists those deleted, once they are gone.
struct kept_prune {
  static constexpr message_kind kind{msg_type::kept_prune, "kept_prune", client_to_daemon, true};
  static constexpr auto fields() { return std::tuple{}; }
};

// 300: exec and its I/O

struct exec {
  static constexpr message_kind kind{msg_type::exec, "exec", client_to_daemon, true};
  std::string_view session = "default";
  std::string_view command;
  std::string_view cwd;
  str_list env;
  uint64_t timeout_ms = 0;
  uint64_t grace_ms = 0;
  std::string_view session_cwd;
  str_list session_env;  // the environment a session this creates starts with (the client's)
  // keep_env: sbshd keeps session_env for this connection's later execs; same_env: this one's
  // is the one kept (sent instead of session_env, to a sbshd whose welcome said keeps_env).
  bool keep_env = false;
  bool same_env = false;
  // The client's directory, from which a relative `cwd` is taken in a session without a root
  // (in one with a root, a relative `cwd` is taken from the root). Sent over local
  // connections only; without it, a relative `cwd` needs a root.
  std::string_view cwd_base;
  std::string_view io = "frames";
  bool has_stdin = false;
  bool drain = false;
  uint64_t fds = 0;
  bool notify_started = false;  // send exec_started when a shell takes it
  // Keep the command's output and result under its command_id (command_logs, command_wait)
  // after it ends. Only with io "frames": sbshd must read the output to keep it.
  bool keep = false;
  // When the command has not ended this long after the request arrived, sbshd answers
  // exec_detached and the command goes on without the client (implies keep).
  uint64_t detach_after_ms = 0;
  // A pseudo-terminal as the command's controlling terminal, stdin, stdout and stderr (its
  // output comes as stdout), of this size. Only with io "frames".
  bool tty = false;
  uint64_t cols = 0;  // 0: 80
  uint64_t rows = 0;  // 0: 24
  // Its stdin a pipe that stays open for input after a detach (with tty: the terminal);
  // either lets sbshd see it wait for input and, with detach_after_ms, detach at once then.
  bool interactive = false;
  static constexpr auto fields() {
    return std::tuple{field("session", &exec::session, kOmitEmpty),
                      field("command", &exec::command, kRequired),
                      field("cwd", &exec::cwd, kOmitEmpty),
                      field("env", &exec::env, kOmitEmpty),
                      field("timeout_ms", &exec::timeout_ms, kOmitEmpty),
                      field("grace_ms", &exec::grace_ms, kOmitEmpty),
                      field("session_cwd", &exec::session_cwd, kOmitEmpty),
                      field("session_env", &exec::session_env, kOmitEmpty),
                      field("keep_env", &exec::keep_env, kOmitEmpty),
                      field("same_env", &exec::same_env, kOmitEmpty),
                      field("cwd_base", &exec::cwd_base, kOmitEmpty),
                      field("io", &exec::io),
                      field("stdin", &exec::has_stdin),
                      field("drain", &exec::drain, kOmitEmpty),
                      field("fds", &exec::fds, kOmitEmpty),
                      field("notify_started", &exec::notify_started, kOmitEmpty),
                      field("keep", &exec::keep, kOmitEmpty),
                      field("detach_after_ms", &exec::detach_after_ms, kOmitEmpty),
                      field("tty", &exec::tty, kOmitEmpty),
                      field("cols", &exec::cols, kOmitEmpty),
                      field("rows", &exec::rows, kOmitEmpty),
                      field("interactive", &exec::interactive, kOmitEmpty)};
  }
};

// Sent, when the exec asked for it, as the command is handed to a shell and before anything
// it writes can reach the client. `command_id` is sbshd's number for the command, unique
// until sbshd restarts; `generation` the shell's (exec_done's says which shell ran it, should
// that shell end before reading it and the command go to the next).
struct exec_started {
  static constexpr message_kind kind{msg_type::exec_started, "exec_started", daemon_to_client, true};
  uint64_t command_id = 0;
  uint64_t generation = 0;
  int64_t started_at_ms = 0;
  static constexpr auto fields() {
    return std::tuple{field("command_id", &exec_started::command_id), field("generation", &exec_started::generation),
                      field("started_at_ms", &exec_started::started_at_ms)};
  }
};

// The answer to an exec with detach_after_ms whose command had not ended by then: it goes on
// at the session's top level without the client (no more output frames and no exec_done for
// this request; a client that leaves no longer stops it), its output and result kept under
// command_id.
struct exec_detached {
  static constexpr message_kind kind{msg_type::exec_detached, "exec_detached", daemon_to_client, true};
  uint64_t command_id = 0;
  // It went on because it waits for input (exec --tty or interactive): a process of it is
  // blocked reading its terminal or stdin; `prompt` is the last line it printed.
  bool waiting_for_input = false;
  std::string_view prompt;
  static constexpr auto fields() {
    return std::tuple{field("command_id", &exec_detached::command_id, kRequired),
                      field("waiting_for_input", &exec_detached::waiting_for_input, kOmitEmpty),
                      field("prompt", &exec_detached::prompt, kOmitEmpty)};
  }
};

// Waits for a kept command (exec keep or detach_after_ms) to end; answered with its
// exec_done, or a timeout error once timeout_ms (0: none) has passed with it still running.
// With until_input, also answered (command_running, waiting_for_input) once it waits for
// input: at once when it does already.
struct command_wait {
  static constexpr message_kind kind{msg_type::command_wait, "command_wait", client_to_daemon, true};
  uint64_t command_id = 0;
  uint64_t timeout_ms = 0;
  bool until_input = false;
  static constexpr auto fields() {
    return std::tuple{field("command_id", &command_wait::command_id, kRequired),
                      field("timeout_ms", &command_wait::timeout_ms, kOmitEmpty),
                      field("until_input", &command_wait::until_input, kOmitEmpty)};
  }
};

// Input for a kept command whose input is open (exec --tty or --interactive, detached): the
// bytes are typed into its terminal or written to its stdin pipe, in order, as it reads them;
// with typed, they are keys as a person types them, and on a pipe each Enter (CR) becomes the
// LF a terminal would make of it; eof then ends its input (Ctrl-D on a terminal). Answered
// with command_running: the bytes it had written to each stream when the input went in, so
// that command_logs from there gives its answer. Refused with no_input, or input_full while
// more than 1 MiB it was sent is unread.
struct command_input {
  static constexpr message_kind kind{msg_type::command_input, "command_input", client_to_daemon, true};
  uint64_t command_id = 0;
  bin_view data;
  bool typed = false;
  bool eof = false;
  static constexpr auto fields() {
    using s = command_input;
    return std::tuple{field("command_id", &s::command_id, kRequired), field("data", &s::data),
                      field("typed", &s::typed, kOmitEmpty), field("eof", &s::eof, kOmitEmpty)};
  }
};

// A kept command's output so far (each stream whole, stdout's first), as output frames; with
// follow, then what it writes until it ends. Ends with its exec_done when it has ended, else
// (without follow) command_running.
struct command_logs {
  static constexpr message_kind kind{msg_type::command_logs, "command_logs", client_to_daemon, true};
  uint64_t command_id = 0;
  bool follow = false;
  bool out = true;
  bool err = true;
  // Only what follows these offsets in each stream (the stdout_bytes and stderr_bytes of an
  // earlier answer): what was written since. Bytes the cap dropped are skipped.
  uint64_t stdout_offset = 0;
  uint64_t stderr_offset = 0;
  static constexpr auto fields() {
    using s = command_logs;
    return std::tuple{field("command_id", &s::command_id, kRequired), field("follow", &s::follow, kOmitEmpty),
                      field("stdout", &s::out),
                      field("stderr", &s::err),
                      field("stdout_offset", &s::stdout_offset, kOmitEmpty),
                      field("stderr_offset", &s::stderr_offset, kOmitEmpty)};
  }
};

// Stops a kept command as a timeout does (`signal` first, SIGTERM when absent; SIGKILL after
// the grace period; the shell keeps its state); answered with its exec_done once it has ended.
struct command_kill {
  static constexpr message_kind kind{msg_type::command_kill, "command_kill", client_to_daemon, true};
  uint64_t command_id = 0;
  signal_spec signal;
  static constexpr auto fields() {
    return std::tuple{field("command_id", &command_kill::command_id, kRequired),
                      field("signal", &command_kill::signal, kOmitEmpty)};
  }
};

// A kept command that has not ended: where it is, and how much it has written.
struct command_running {
  static constexpr message_kind kind{msg_type::command_running, "command_running", daemon_to_client, true};
  uint64_t command_id = 0;
  std::string_view session;
  std::string_view command;
  bool started = false;  // a shell has it (else it waits in the session's queue)
  int64_t started_at_ms = 0;
  uint64_t stdout_bytes = 0;
  uint64_t stderr_bytes = 0;
  bool waiting_for_input = false;  // it is blocked reading its terminal or stdin (the kernel says)
  std::string_view prompt;         // then the last line it printed
  std::string_view screen;         // exec --tty: what its terminal shows now, as text
  uint64_t generation = 0;         // of the session's shell that runs it (once started)
  static constexpr auto fields() {
    using s = command_running;
    return std::tuple{field("command_id", &s::command_id),
                      field("session", &s::session),
                      field("command", &s::command),
                      field("started", &s::started),
                      field("started_at_ms", &s::started_at_ms, kOmitEmpty),
                      field("stdout_bytes", &s::stdout_bytes),
                      field("stderr_bytes", &s::stderr_bytes),
                      field("waiting_for_input", &s::waiting_for_input, kOmitEmpty),
                      field("prompt", &s::prompt, kOmitEmpty),
                      field("screen", &s::screen, kOmitEmpty),
                      field("generation", &s::generation, kOmitEmpty)};
  }
};

struct output {
  static constexpr message_kind kind{msg_type::output, "output", daemon_to_client, true};
  uint64_t stream = kStdout;
  bin_view data;
  static constexpr auto fields() {
    return std::tuple{field("stream", &output::stream), field("data", &output::data, kRequired)};
  }
};

struct stdin_data {
  static constexpr message_kind kind{msg_type::stdin_data, "stdin_data", client_to_daemon, true};
  bin_view data;
  static constexpr auto fields() { return std::tuple{field("data", &stdin_data::data)}; }
};

struct stdin_eof {
  static constexpr message_kind kind{msg_type::stdin_eof, "stdin_eof", client_to_daemon, true};
  static constexpr auto fields() { return std::tuple{}; }
};

std::string done_signal_name(const struct exec_done& d);

// How a command ended. The error pair only when it did not run or did not end normally;
// state_lost_reason only with state_lost.
struct exec_done {
  static constexpr message_kind kind{msg_type::exec_done, "exec_done", daemon_to_client, true};
  std::optional<int> exit_code;
  std::optional<int> signal;
  bool timed_out = false;
  bool cancelled = false;
  bool shell_restarted = false;
  bool ran = true;
  uint64_t duration_us = 0;
  uint64_t generation = 0;  // the session's shell generation the command was queued against
  bool state_lost = false;  // it ran in another shell than the command before it
  bool oom_killed = false;  // the kernel killed a process of the session's for memory meanwhile
  bool release = true;      // io "fds": sbshd waits for a release (absent from an older sbshd: true)
  std::optional<int64_t> started_at_ms;  // nil when it never started
  std::string_view state_lost_reason;
  std::string_view error_code;
  std::string_view error;
  // In answers about a kept command (command_wait, command_logs, command_kill): which.
  std::string_view session;
  std::string_view command;
  // exec --tty: what its terminal's screen showed at the end, as text (terminal_screen.h).
  std::string_view screen;
  // In answers about a kept command: the bytes it wrote to each stream in all (the offsets
  // after which command_logs gives nothing more).
  uint64_t stdout_bytes = 0;
  uint64_t stderr_bytes = 0;
  static bool lost(const exec_done& d) { return d.state_lost; }
  static bool failed(const exec_done& d) { return !d.error.empty(); }
  static constexpr auto fields() {
    using s = exec_done;
    return std::tuple{field("exit_code", &s::exit_code),
                      field("signal", &s::signal),
                      derived("signal_name", done_signal_name, kOmitEmpty),
                      field("timed_out", &s::timed_out),
                      field("cancelled", &s::cancelled),
                      field("shell_restarted", &s::shell_restarted),
                      field("ran", &s::ran),
                      field("duration_us", &s::duration_us),
                      field("generation", &s::generation),
                      field("state_lost", &s::state_lost),
                      field("oom_killed", &s::oom_killed, kOmitEmpty),
                      field("release", &s::release),
                      field("started_at_ms", &s::started_at_ms),
                      field("state_lost_reason", &s::state_lost_reason).only_if(lost, "with state_lost"),
                      field("error_code", &s::error_code).only_if(failed, "when it did not run or end normally"),
                      field("error", &s::error).only_if(failed, "when it did not run or end normally"),
                      field("session", &s::session, kOmitEmpty),
                      field("command", &s::command, kOmitEmpty),
                      field("screen", &s::screen, kOmitEmpty),
                      field("stdout_bytes", &s::stdout_bytes, kOmitEmpty),
                      field("stderr_bytes", &s::stderr_bytes, kOmitEmpty)};
  }
};

// No signal: stop the command (SIGTERM first, then SIGKILL after its grace). A signal and
// "stop": stop it, that signal first. A signal alone: deliver it once.
struct cancel {
  static constexpr message_kind kind{msg_type::cancel, "cancel", client_to_daemon, true};
  signal_spec signal;
  std::optional<bool> stop;  // absent: true without a signal, false with one
  static constexpr auto fields() {
    return std::tuple{field("signal", &cancel::signal, kOmitEmpty), field("stop", &cancel::stop, kOmitEmpty)};
  }
};

struct release {
  static constexpr message_kind kind{msg_type::release, "release", client_to_daemon, true};
  // With a lease's id: the read ends of pipes that background jobs of its runs still hold,
  // for sbshd to read into nothing (as it does an exec's), so that they never meet a pipe
  // without a reader.
  uint64_t fds = 0;
  static constexpr auto fields() { return std::tuple{field("fds", &release::fds, kOmitEmpty)}; }
};

// Asks for a lease of a session's shell (docs/architecture.md, "The direct path"): queued as
// an exec is; at its turn answered with lease_granted, which carries the lease socket. Ended
// by a release with this request's id, by the connection's end, or by any other request
// queued on the session; lease_ended (same id) says it is over.
struct lease {
  static constexpr message_kind kind{msg_type::lease, "lease", client_to_daemon, true};
  std::string_view session;
  static constexpr auto fields() { return std::tuple{field("session", &lease::session, kRequired)}; }
};

// The lease is held: the attached descriptor (fds 1) is the holder's end of a SOCK_SEQPACKET
// socket on which it sends the builtin runs (ipc/shell_channel.h) and reads their statuses,
// which the shell (shell_pid, as this connection's peer sees it) sends. sbshd keeps no copy.
struct lease_granted {
  static constexpr message_kind kind{msg_type::lease_granted, "lease_granted", daemon_to_client, true};
  int64_t shell_pid = 0;
  uint64_t generation = 0;
  uint64_t fds = 1;
  static constexpr auto fields() {
    using s = lease_granted;
    return std::tuple{field("shell_pid", &s::shell_pid), field("generation", &s::generation), field("fds", &s::fds)};
  }
};

// The lease is over (its socket is closed at the shell's end): why.
struct lease_ended {
  static constexpr message_kind kind{msg_type::lease_ended, "lease_ended", daemon_to_client, true};
  std::string_view reason;
  static constexpr auto fields() { return std::tuple{field("reason", &lease_ended::reason)}; }
};

// 400: daemon

struct status {
  static constexpr message_kind kind{msg_type::status, "status", client_to_daemon, true};
  static constexpr auto fields() { return std::tuple{}; }
};

struct status_reply {
  static constexpr message_kind kind{msg_type::status_reply, "status_reply", daemon_to_client, true};
  int64_t pid = 0;
  std::string_view version;
  uint64_t uptime_ms = 0;
  std::string_view socket;
  std::string_view state_dir;
  std::vector<session_status> sessions;
  daemon_counters counters;
  // sbshd's soft RLIMIT_NOFILE, and the sessions it holds within it (daemon/capacity.h).
  uint64_t descriptor_limit = 0;
  uint64_t sessions_supported = 0;
  static constexpr auto fields() {
    using s = status_reply;
    return std::tuple{field("pid", &s::pid),       field("version", &s::version),
                      field("uptime_ms", &s::uptime_ms), field("socket", &s::socket),
                      field("state_dir", &s::state_dir), field("sessions", &s::sessions),
                      field("counters", &s::counters),
                      field("descriptor_limit", &s::descriptor_limit, kOmitEmpty),
                      field("sessions_supported", &s::sessions_supported, kOmitEmpty)};
  }
};

struct shutdown {
  static constexpr message_kind kind{msg_type::shutdown, "shutdown", client_to_daemon, true};
  bool keep_sessions = false;
  static constexpr auto fields() { return std::tuple{field("keep_sessions", &shutdown::keep_sessions, kOmitEmpty)}; }
};

// 500: daemon <-> wrapper

struct wrapper_ready {
  static constexpr message_kind kind{msg_type::wrapper_ready, "wrapper_ready", wrapper_to_daemon, false};
  int64_t shell_pid = 0;
  int64_t wrapper_pid = 0;
  static constexpr auto fields() {
    return std::tuple{field("shell_pid", &wrapper_ready::shell_pid), field("wrapper_pid", &wrapper_ready::wrapper_pid)};
  }
};

// Signal the processes the running command started after the mark (procs::since_mark);
// with interrupt, also interrupt the shell, which abandons the rest of the command's text.
struct signal_command {
  static constexpr message_kind kind{msg_type::signal_command, "signal_command", daemon_to_wrapper, true};
  int64_t since_pid = 0;
  uint64_t since_ticks = 0;
  int64_t signal = 0;
  bool interrupt = false;
  static constexpr auto fields() {
    using s = signal_command;
    return std::tuple{field("since_pid", &s::since_pid), field("since_ticks", &s::since_ticks),
                      field("signal", &s::signal), field("interrupt", &s::interrupt)};
  }
};

struct signal_result {
  static constexpr message_kind kind{msg_type::signal_result, "signal_result", wrapper_to_daemon, true};
  uint64_t count = 0;
  static constexpr auto fields() { return std::tuple{field("count", &signal_result::count)}; }
};

// One of exit_code or signal when the shell ended; error, alone when it could not start,
// or with them when a shell that never served printed something (what it said).
struct shell_exited {
  static constexpr message_kind kind{msg_type::shell_exited, "shell_exited", wrapper_to_daemon, false};
  std::optional<int64_t> exit_code;
  std::optional<int64_t> signal;
  std::string_view error;
  static constexpr auto fields() {
    using s = shell_exited;
    return std::tuple{field("exit_code", &s::exit_code, kOmitEmpty), field("signal", &s::signal, kOmitEmpty),
                      field("error", &s::error, kOmitEmpty)};
  }
};

struct ping {
  static constexpr message_kind kind{msg_type::ping, "ping", daemon_to_wrapper, true};
  static constexpr auto fields() { return std::tuple{}; }
};

struct pong {
  static constexpr message_kind kind{msg_type::pong, "pong", wrapper_to_daemon, true};
  static constexpr auto fields() { return std::tuple{}; }
};

// Spare this group when the shell ends, and hold the read ends of its pipes (`fds` of them,
// one letter each in `streams`: o stdout, e stderr, s status) for a later sbshd.
struct protect_group {
  static constexpr message_kind kind{msg_type::protect_group, "protect_group", daemon_to_wrapper, false};
  int64_t pgid = 0;
  uint64_t proc = 0;
  std::string_view streams;
  uint64_t fds = 0;
  static constexpr auto fields() {
    using s = protect_group;
    return std::tuple{field("pgid", &s::pgid), field("proc", &s::proc, kOmitEmpty),
                      field("streams", &s::streams, kOmitEmpty), field("fds", &s::fds, kOmitEmpty)};
  }
};

struct unprotect_group {
  static constexpr message_kind kind{msg_type::unprotect_group, "unprotect_group", daemon_to_wrapper, false};
  int64_t pgid = 0;
  static constexpr auto fields() { return std::tuple{field("pgid", &unprotect_group::pgid)}; }
};

// A spare becomes this session's. A confined spare (sbsh-wrapper --spare-confined), whose
// bash has not started yet, is also given the options a wrapper started for the session
// would have had (`args`, sbsh-wrapper's options but the session's name) and the
// environment its bash starts with (`env`).
struct claim {
  static constexpr message_kind kind{msg_type::claim, "claim", daemon_to_wrapper, false};
  std::string_view session;
  std::string_view cwd;
  str_list args;
  str_list env;
  static constexpr auto fields() {
    return std::tuple{field("session", &claim::session), field("cwd", &claim::cwd),
                      field("args", &claim::args, kOmitEmpty), field("env", &claim::env, kOmitEmpty)};
  }
};

// On a wrapper's adoption socket, the first frame of a new sbshd.
struct adopt {
  static constexpr message_kind kind{msg_type::adopt, "adopt", daemon_to_wrapper, true};
  int64_t pid = 0;
  static constexpr auto fields() { return std::tuple{field("pid", &adopt::pid)}; }
};

// With 1 descriptor (sbshd's end of the shell channel), then `procs` protect_group frames,
// one per background process whose pipes the wrapper holds, each as it was received.
// initialized: the shell ran its init commands (see initialized); a later sbshd adopts only
// such a shell.
struct adopted {
  static constexpr message_kind kind{msg_type::adopted, "adopted", wrapper_to_daemon, true};
  std::string_view session;  // empty: a spare nobody claimed
  std::string_view cwd;
  int64_t shell_pid = 0;
  int64_t wrapper_pid = 0;
  int64_t started_at_ms = 0;
  std::vector<int64_t> groups;
  uint64_t procs = 0;
  bool initialized = true;  // absent (an older wrapper): true
  uint64_t fds = 0;
  uint64_t generation = 0;  // as the earlier sbshd numbered the shell (initialized); 0: unknown
  static constexpr auto fields() {
    using s = adopted;
    return std::tuple{field("session", &s::session),         field("cwd", &s::cwd),
                      field("shell_pid", &s::shell_pid),     field("wrapper_pid", &s::wrapper_pid),
                      field("started_at_ms", &s::started_at_ms), field("groups", &s::groups),
                      field("procs", &s::procs),             field("initialized", &s::initialized),
                      field("fds", &s::fds),                 field("generation", &s::generation)};
  }
};

// The shell ran its init commands (or a spare was claimed): from now on a later sbshd may
// adopt it; until then it would be half set up. The wrapper keeps the generation for that
// sbshd, which goes on numbering the session's shells from it.
struct initialized {
  static constexpr message_kind kind{msg_type::initialized, "initialized", daemon_to_wrapper, false};
  uint64_t generation = 0;
  static constexpr auto fields() { return std::tuple{field("generation", &initialized::generation)}; }
};

// sbshd closed its end of the shell channel while the session was idle (it then holds one
// descriptor fewer) and wants it back for a command: the wrapper answers channel_lent with a
// copy of the one it holds (wrapper::kChannelOwnerFd).
struct lend_channel {
  static constexpr message_kind kind{msg_type::lend_channel, "lend_channel", daemon_to_wrapper, true};
  static constexpr auto fields() { return std::tuple{}; }
};

// With 1 descriptor: sbshd's end of the shell channel, a copy of the wrapper's (0 when the
// wrapper holds none).
struct channel_lent {
  static constexpr message_kind kind{msg_type::channel_lent, "channel_lent", wrapper_to_daemon, true};
  uint64_t fds = 0;
  static constexpr auto fields() { return std::tuple{field("fds", &channel_lent::fds)}; }
};

// 600: background processes

struct proc_start {
  static constexpr message_kind kind{msg_type::proc_start, "proc_start", client_to_daemon, true};
  std::string_view session = "default";
  std::string_view name;
  std::string_view command;
  std::string_view cwd;
  str_list env;
  std::string_view session_cwd;
  str_list session_env;  // as in exec
  std::string_view cwd_base;  // as in exec
  static constexpr auto fields() {
    using s = proc_start;
    return std::tuple{field("session", &s::session, kOmitEmpty), field("name", &s::name, kOmitEmpty),
                      field("command", &s::command, kRequired),  field("cwd", &s::cwd, kOmitEmpty),
                      field("env", &s::env, kOmitEmpty),         field("session_cwd", &s::session_cwd),
                      field("session_env", &s::session_env, kOmitEmpty),
                      field("cwd_base", &s::cwd_base, kOmitEmpty)};
  }
};

struct proc_info {
  static constexpr message_kind kind{msg_type::proc_info, "proc_info", daemon_to_client, true};
  sbsh::proc_info proc;
  static constexpr auto fields() { return std::tuple{field("proc", &proc_info::proc, kRequired)}; }
};

struct proc_list {
  static constexpr message_kind kind{msg_type::proc_list, "proc_list", client_to_daemon, true};
  bool all = false;  // finished ones too
  static constexpr auto fields() { return std::tuple{field("all", &proc_list::all)}; }
};

struct proc_table {
  static constexpr message_kind kind{msg_type::proc_table, "proc_table", daemon_to_client, true};
  std::vector<sbsh::proc_info> procs;
  // The commands sbshd keeps that run detached (with `all`, also those that have ended).
  std::vector<sbsh::command_info> commands;
  static constexpr auto fields() {
    return std::tuple{field("procs", &proc_table::procs), field("commands", &proc_table::commands, kOmitEmpty)};
  }
};

struct proc_kill {
  static constexpr message_kind kind{msg_type::proc_kill, "proc_kill", client_to_daemon, true};
  proc_ref proc;
  signal_spec signal{SIGTERM};
  static constexpr auto fields() {
    return std::tuple{field("proc", &proc_kill::proc, kRequired), field("signal", &proc_kill::signal)};
  }
};

struct proc_wait {
  static constexpr message_kind kind{msg_type::proc_wait, "proc_wait", client_to_daemon, true};
  proc_ref proc;
  uint64_t timeout_ms = 0;  // 0: none
  static constexpr auto fields() {
    return std::tuple{field("proc", &proc_wait::proc, kRequired), field("timeout_ms", &proc_wait::timeout_ms, kOmitEmpty)};
  }
};

struct proc_logs {
  static constexpr message_kind kind{msg_type::proc_logs, "proc_logs", client_to_daemon, true};
  proc_ref proc;
  bool follow = false;
  bool out = true;
  bool err = true;
  uint64_t tail = 0;  // lines; 0: all kept
  static constexpr auto fields() {
    using s = proc_logs;
    return std::tuple{field("proc", &s::proc, kRequired), field("follow", &s::follow), field("stdout", &s::out),
                      field("stderr", &s::err), field("tail", &s::tail, kOmitEmpty)};
  }
};

struct logs_end {
  static constexpr message_kind kind{msg_type::logs_end, "logs_end", daemon_to_client, true};
  sbsh::proc_info proc;
  static constexpr auto fields() { return std::tuple{field("proc", &logs_end::proc, kRequired)}; }
};

// 700: files beneath a session's root. A path is taken from the session's root (an absolute
// one only if it lies beneath it) and resolved beneath it, following symlinks that stay in it
// (openat2 RESOLVE_BENEATH): ".." above the root, an absolute path elsewhere and a symlink
// pointing out are refused (outside_root), and no error names more than the path as given.

// Opens a regular file for reading. The reply, file_opened, carries the open file itself with
// pass_fd (a local connection: the client reads [offset, offset + length) from it); without,
// it is followed by the bytes in file_chunk frames, paced by the client, and file_end.
struct file_read {
  static constexpr message_kind kind{msg_type::file_read, "file_read", client_to_daemon, true};
  std::string_view session = "default";
  std::string_view path;
  uint64_t offset = 0;
  std::optional<uint64_t> length;  // absent: to the end
  bool pass_fd = false;
  static constexpr auto fields() {
    using s = file_read;
    return std::tuple{field("session", &s::session, kOmitEmpty), field("path", &s::path, kRequired),
                      field("offset", &s::offset, kOmitEmpty), field("length", &s::length, kOmitEmpty),
                      field("pass_fd", &s::pass_fd, kOmitEmpty)};
  }
};

// The answer to file_read (the file's size and mode, and how many bytes follow from offset)
// and to file_write (the file is ready to take its bytes; size 0). With pass_fd it carries the
// file: file_read's, open for reading; file_write's, a new file beside the target, open for
// writing, that file_close puts in place.
struct file_opened {
  static constexpr message_kind kind{msg_type::file_opened, "file_opened", daemon_to_client, true};
  uint64_t size = 0;
  uint32_t mode = 0;
  uint64_t length = 0;
  uint64_t fds = 0;  // 1 with pass_fd: the file is attached
  static constexpr auto fields() {
    using s = file_opened;
    return std::tuple{field("size", &s::size), field("mode", &s::mode), field("length", &s::length),
                      field("fds", &s::fds, kOmitEmpty)};
  }
};

struct file_chunk {
  static constexpr message_kind kind{msg_type::file_chunk, "file_chunk", daemon_to_client, true};
  bin_view data;
  static constexpr auto fields() { return std::tuple{field("data", &file_chunk::data, kRequired)}; }
};

// The end of a file_read (the bytes sent), or of a file_write once the file is in place (the
// bytes it holds).
struct file_end {
  static constexpr message_kind kind{msg_type::file_end, "file_end", daemon_to_client, true};
  uint64_t bytes = 0;
  static constexpr auto fields() { return std::tuple{field("bytes", &file_end::bytes)}; }
};

// Writes a file whole: its bytes go to a new file beside it (with pass_fd, straight into the
// descriptor file_opened carries; without, in file_data frames), and file_close renames that
// over the path, so a reader sees the old file or the new one, never part of one. Parent
// directories are made unless parents is false. mode: the new file's permission bits; absent,
// an existing file's are kept, and a new file gets 0644.
struct file_write {
  static constexpr message_kind kind{msg_type::file_write, "file_write", client_to_daemon, true};
  std::string_view session = "default";
  std::string_view path;
  std::optional<uint32_t> mode;
  bool parents = true;
  bool pass_fd = false;
  static constexpr auto fields() {
    using s = file_write;
    return std::tuple{field("session", &s::session, kOmitEmpty), field("path", &s::path, kRequired),
                      field("mode", &s::mode, kOmitEmpty), field("parents", &s::parents),
                      field("pass_fd", &s::pass_fd, kOmitEmpty)};
  }
};

struct file_data {
  static constexpr message_kind kind{msg_type::file_data, "file_data", client_to_daemon, true};
  bin_view data;
  static constexpr auto fields() { return std::tuple{field("data", &file_data::data, kRequired)}; }
};

// Ends a file_write: puts the file in place (answered with file_end), or with discard drops
// it and leaves the path as it was (answered with ok). A client that leaves first discards.
struct file_close {
  static constexpr message_kind kind{msg_type::file_close, "file_close", client_to_daemon, true};
  bool discard = false;
  static constexpr auto fields() { return std::tuple{field("discard", &file_close::discard, kOmitEmpty)}; }
};

// What a path is (symlinks in the path followed while they stay beneath the root; a last
// component that is a symlink is described itself): answered with file_info.
struct file_stat {
  static constexpr message_kind kind{msg_type::file_stat, "file_stat", client_to_daemon, true};
  std::string_view session = "default";
  std::string_view path;
  static constexpr auto fields() {
    return std::tuple{field("session", &file_stat::session, kOmitEmpty), field("path", &file_stat::path, kRequired)};
  }
};

struct file_info {
  static constexpr message_kind kind{msg_type::file_info, "file_info", daemon_to_client, true};
  file_entry entry;
  static constexpr auto fields() { return std::tuple{field("entry", &file_info::entry, kRequired)}; }
};

// The entries of a directory (path absent: the root), sorted by path; with recursive, of
// everything beneath it too (symlinks are listed, not followed). Answered with file_entries
// frames of at most 1024 entries each, the last with more false.
struct file_list {
  static constexpr message_kind kind{msg_type::file_list, "file_list", client_to_daemon, true};
  std::string_view session = "default";
  std::string_view path;
  bool recursive = false;
  static constexpr auto fields() {
    using s = file_list;
    return std::tuple{field("session", &s::session, kOmitEmpty), field("path", &s::path, kOmitEmpty),
                      field("recursive", &s::recursive, kOmitEmpty)};
  }
};

struct file_entries {
  static constexpr message_kind kind{msg_type::file_entries, "file_entries", daemon_to_client, true};
  std::vector<file_entry> entries;
  bool more = false;
  static constexpr auto fields() {
    return std::tuple{field("entries", &file_entries::entries), field("more", &file_entries::more)};
  }
};

// Removes a file, a symlink (not what it points to) or, with recursive, a directory and all
// beneath it (an empty directory without). Never the root itself. Answered with ok.
struct file_remove {
  static constexpr message_kind kind{msg_type::file_remove, "file_remove", client_to_daemon, true};
  std::string_view session = "default";
  std::string_view path;
  bool recursive = false;
  static constexpr auto fields() {
    using s = file_remove;
    return std::tuple{field("session", &s::session, kOmitEmpty), field("path", &s::path, kRequired),
                      field("recursive", &s::recursive, kOmitEmpty)};
  }
};

// Makes a directory; with parents, its missing parents too, and an existing directory is no
// error. Answered with ok.
struct file_mkdir {
  static constexpr message_kind kind{msg_type::file_mkdir, "file_mkdir", client_to_daemon, true};
  std::string_view session = "default";
  std::string_view path;
  bool parents = false;
  static constexpr auto fields() {
    using s = file_mkdir;
    return std::tuple{field("session", &s::session, kOmitEmpty), field("path", &s::path, kRequired),
                      field("parents", &s::parents, kOmitEmpty)};
  }
};

// Renames `from` to `to` (both beneath the root; `to` replaced if it is a file). Answered
// with ok.
struct file_move {
  static constexpr message_kind kind{msg_type::file_move, "file_move", client_to_daemon, true};
  std::string_view session = "default";
  std::string_view from;
  std::string_view to;
  static constexpr auto fields() {
    using s = file_move;
    return std::tuple{field("session", &s::session, kOmitEmpty), field("from", &s::from, kRequired),
                      field("to", &s::to, kRequired)};
  }
};

// 800: environments built by setups (session create --setup)

// The complete environments (env_info), most recently used first, with the sessions that use
// each and its size.
struct env_list {
  static constexpr message_kind kind{msg_type::env_list, "env_list", client_to_daemon, true};
  static constexpr auto fields() { return std::tuple{}; }
};

struct env_info {
  static constexpr message_kind kind{msg_type::env_info, "env_info", daemon_to_client, true};
  std::vector<environment_info> envs;
  static constexpr auto fields() { return std::tuple{field("envs", &env_info::envs)}; }
};

// Deletes the environment `hash`; refused (env_in_use) while a session is defined with it,
// unless `force` (its sessions keep their SBSH_ENV, which then names nothing). Answered with
// ok once it is gone.
struct env_remove {
  static constexpr message_kind kind{msg_type::env_remove, "env_remove", client_to_daemon, true};
  std::string_view hash;
  bool force = false;
  static constexpr auto fields() {
    return std::tuple{field("hash", &env_remove::hash, kRequired), field("force", &env_remove::force, kOmitEmpty)};
  }
};

// Deletes environments no session uses: all of them, or those beyond the `keep` most recently
// used, or those unused for `older_than_ms`; and whatever an interrupted setup left. The
// reply (env_info) lists those deleted, once they are gone.
struct env_prune {
  static constexpr message_kind kind{msg_type::env_prune, "env_prune", client_to_daemon, true};
  std::optional<uint64_t> keep;
  uint64_t older_than_ms = 0;
  static constexpr auto fields() {
    return std::tuple{field("keep", &env_prune::keep, kOmitEmpty),
                      field("older_than_ms", &env_prune::older_than_ms, kOmitEmpty)};
  }
};

// Every message, in the order of their numbers.
using all = std::tuple<hello, welcome, error, ok, session_list, session_info, session_create, session_show,
                       session_detail, session_rm, session_restart, session_prune, session_pruned, session_removed, kept_list, kept_info, kept_prune, exec, output, stdin_data, stdin_eof,
                       exec_done, cancel, release, exec_started, exec_detached, command_wait, command_logs, command_kill, command_running, command_input, lease, lease_granted, lease_ended, status, status_reply, shutdown, wrapper_ready, signal_command,
                       signal_result, shell_exited, ping, pong, protect_group, unprotect_group, claim, adopt,
                       adopted, initialized, lend_channel, channel_lent, proc_start, proc_info, proc_list, proc_table, proc_kill, proc_wait, proc_logs,
                       logs_end, file_read, file_opened, file_chunk, file_end, file_write, file_data, file_close,
                       file_stat, file_info, file_list, file_entries, file_remove, file_mkdir, file_move,
                       env_list, env_info, env_remove, env_prune>;

}  // namespace msg

// ---- State files ------------------------------------------------------------------------
// sbshd's files in the state directory are single frames of the same codec.

// STATE/sessions/NAME.msgpack: one session's definition (daemon/session_store.h). Its
// creator's environment is not in it but named by hash, in STATE/environs/HASH.msgpack
// (environ_file), which every session with that environment shares.
struct session_file {
  static constexpr message_kind kind{msg_type::session_info, "a session's state file", route::state_file, false};
  uint64_t version = 1;
  std::string name;         // the session's: the file's name, less ".msgpack"
  session_spec definition;  // its environment empty
  std::string environ;      // its environment's hash (daemon/session_environ.h); "": none
  // When the session last had something to do (unix ms): a restart of sbshd neither resets
  // nor loses its idle time. 0: not known.
  int64_t last_active = 0;
  static constexpr auto fields() {
    return std::tuple{field("version", &session_file::version), field("name", &session_file::name, kRequired),
                      field("definition", &session_file::definition, kRequired),
                      field("environ", &session_file::environ, kOmitEmpty),
                      field("last_active", &session_file::last_active, kOmitEmpty)};
  }
};

// STATE/environs/HASH.msgpack: an environment sessions start with, NAME=VALUE each; HASH is
// the hash of `vars` (daemon/session_environ.h), checked when it is read.
struct environ_file {
  static constexpr message_kind kind{msg_type::session_info, "a session environment's state file",
                                     route::state_file, false};
  uint64_t version = 1;
  std::vector<std::string> vars;
  static constexpr auto fields() {
    return std::tuple{field("version", &environ_file::version), field("vars", &environ_file::vars)};
  }
};

// STATE/sessions.msgpack, of earlier versions: every session's definition, by name. Read
// once at start and converted into the files above.
struct sessions_file {
  static constexpr message_kind kind{msg_type::session_info, "the session table", route::state_file, false};
  uint64_t version = 1;
  std::map<std::string, session_spec> sessions;
  // When each session that can expire last had something to do (unix ms), so that a restart
  // of sbshd neither resets nor loses its idle time.
  std::map<std::string, int64_t> last_active;
  static constexpr auto fields() {
    return std::tuple{field("version", &sessions_file::version), field("sessions", &sessions_file::sessions, kRequired),
                      field("last_active", &sessions_file::last_active, kOmitEmpty)};
  }
};

// STATE/activity.msgpack: when each session that can expire last had something to do (unix
// ms), all in one file, so that saving the idle times of 10,000 sessions (at most once a
// minute, and at shutdown) writes one file, not each session's. A session's own file has the
// idle time it had when it was written; the later of the two counts.
struct activity_file {
  static constexpr message_kind kind{msg_type::session_info, "the sessions' idle times", route::state_file, false};
  uint64_t version = 1;
  std::map<std::string, int64_t> last_active;
  static constexpr auto fields() {
    return std::tuple{field("version", &activity_file::version),
                      field("last_active", &activity_file::last_active, kOmitEmpty)};
  }
};

// STATE/procs.msgpack: the process table.
struct procs_file {
  static constexpr message_kind kind{msg_type::proc_table, "the process table", route::state_file, false};
  uint64_t version = 1;
  uint64_t next_id = 1;
  std::vector<proc_info> procs;
  static constexpr auto fields() {
    return std::tuple{field("version", &procs_file::version), field("next_id", &procs_file::next_id),
                      field("procs", &procs_file::procs, kRequired)};
  }
};

}  // namespace sbsh::ipc
