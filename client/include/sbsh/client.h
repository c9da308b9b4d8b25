// libsbsh: the C++ client of sbshd. The sbsh CLI is built on it.
//
// One `connection` is one unix-socket connection to sbshd. It is not thread-safe: use one
// connection per thread, or guard it with a mutex. No process is forked per call (only
// connect() may start sbshd when none answers and autostart is on, or start the program of
// connect_options::dial_command, which lives as long as the connection).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "export.h"
#include "ipc/records.h"
#include "ipc/result.h"

namespace sbsh::client {

// What sbshd reports of sessions and background processes (ipc/records.h: sbshd fills the
// same records): session_status, session_spec (what `session create` defines),
// history_entry, session_detail, proc_info, command_info, daemon_counters.
using sbsh::command_info;
using sbsh::daemon_counters;
using sbsh::environment_info;
using sbsh::file_entry;
using sbsh::history_entry;
using sbsh::kept_copy;
using sbsh::proc_info;
using sbsh::session_detail;
using sbsh::session_spec;
using sbsh::session_status;

struct connect_options {
  std::string socket_path;   // empty: $SBSH_SOCKET, $XDG_RUNTIME_DIR/sbsh/sbshd.sock, ...
  bool autostart = true;     // start sbshd when nothing answers (race-free)
  std::string daemon_path;   // empty: sbshd beside the running program, else on PATH
  // How long auto-start may take, waiting for another client that is starting one included;
  // and how long to wait for the daemon's first answer once the socket took the connection.
  std::chrono::milliseconds start_timeout{10000};
  // false: connect() returns as soon as its hello is sent, and the first request follows
  // it at once (one round trip less, for a client that makes one request); a failed
  // handshake is then that request's error.
  bool wait_for_welcome = true;
  // Non-empty: reach sbshd through this program (argv; argv[0] is looked up on PATH) instead
  // of a socket. Its stdin and stdout must lead to `sbsh dial-stdio` where that sbshd runs,
  // as `ssh HOST sbsh dial-stdio` or `kubectl exec -i POD -- sbsh dial-stdio` do (see
  // host_dial_command). It runs in a process group of its own, so that a terminal's Ctrl-C
  // reaches only the caller (exec forwards signals itself), with the caller's stderr; it is
  // ended when the connection closes. socket_path, autostart and daemon_path then do not
  // apply (they are the far end's); command output travels in frames, since descriptors
  // cannot cross; and the caller's directory is never a default, since it is not on that host.
  // start_timeout bounds the wait for the far sbshd's first answer.
  std::vector<std::string> dial_command;
};

// The dial_command that reaches sbshd on another host over ssh. url: ssh://[USER@]HOST[:PORT]
// (an IPv6 address in brackets). remote_socket (empty: the far user's default) and autostart
// are passed to the far `sbsh`, which must be on that user's PATH. ssh runs in batch mode: it
// must not need to ask for a password (use keys or an agent).
SBSH_API result<std::vector<std::string>> ssh_dial_command(std::string_view url,
                                                           const std::string& remote_socket = {},
                                                           bool autostart = true);

// The dial_command for a host URL, as `sbsh -H URL` takes it:
//   ssh://[USER@]HOST[:PORT]                  ssh -T -o BatchMode=yes ... HOST sbsh dial-stdio
//   podman://CONTAINER, docker://CONTAINER     podman (docker) exec -i CONTAINER sbsh dial-stdio
//   kubectl://[NAMESPACE/]POD[/CONTAINER]      kubectl exec -i [-n NAMESPACE] [-c CONTAINER] POD -- sbsh dial-stdio
// (kubectl:///POD/CONTAINER: a container in the current namespace). Names are checked against
// the rules of their kind (a container's name or id; Kubernetes' RFC 1123 names), so that
// none can be taken for an option. remote_socket and autostart are passed to the far `sbsh`,
// which must be on the PATH of the far user (the container's user, for an engine's exec); the
// engine's own configuration (CONTAINER_HOST, DOCKER_HOST, KUBECONFIG, its current context)
// applies as when it is run by hand.
SBSH_API result<std::vector<std::string>> host_dial_command(std::string_view url,
                                                            const std::string& remote_socket = {},
                                                            bool autostart = true);

// The far end of a dial_command (`sbsh dial-stdio`): connects to sbshd as connect() would
// (auto-start included, no handshake of its own) and copies bytes from in_fd to it and from it
// to out_fd, until sbshd closes the connection or out_fd's reader goes away. At EOF on in_fd
// it shuts down its side of the connection and still copies what sbshd sends.
SBSH_API sbsh::status dial_stdio(const connect_options& opts, int in_fd, int out_fd);

enum class stream { out = 1, err = 2 };

// What sbshd says as a shell takes a command (exec_options::on_started).
struct exec_start {
  uint64_t command_id = 0;   // sbshd's number for the command, never reused, across restarts of sbshd too
  uint64_t generation = 0;   // the generation of the session's shell it was handed to
  int64_t started_at_ms = 0;  // unix time in milliseconds
};

struct exec_options {
  std::string session;                 // empty: "default"
  std::string command;                 // shell text, run at the session shell's top level
  std::string cwd;                     // non-empty: run in a subshell, in this directory
  std::vector<std::string> env;        // NAME=VALUE for this command only (subshell)
  std::chrono::milliseconds timeout{0};  // 0: none
  std::chrono::milliseconds grace{0};    // 0: daemon default (SIGTERM -> SIGKILL delay)
  // Input: nothing (/dev/null), the given bytes, or everything read from stdin_fd until EOF.
  std::optional<std::string> stdin_data;
  int stdin_fd = -1;
  // When set, output chunks are passed here as they arrive and not kept in the result
  // (unless collect_output).
  std::function<void(stream, std::string_view)> on_output;
  // With on_output: the output is kept in the result too, as it is without on_output (up to
  // output_limit per stream: its first and last half, the bytes between them counted).
  bool collect_output = false;
  // When set, called once as a shell takes the command, before any of its output is passed
  // on (a command that never reaches a shell never calls it).
  std::function<void(const exec_start&)> on_started;
  // When >= 0 (and on_output is unset), output is copied straight to these descriptors
  // (with splice(2) where possible) and not kept in the result. If one loses its reader,
  // the command is sent SIGPIPE, as in a shell pipeline. exec never raises SIGPIPE in the
  // caller: while it writes to pipes it blocks SIGPIPE in the calling thread. Any other
  // failure to write to one (a full disk, a closed descriptor) stops the command as a timeout
  // does, and exec fails with code "write_error" once it has ended.
  int stdout_fd = -1;
  int stderr_fd = -1;
  // When >= 0: each byte readable here is a signal number N (1-64) to deliver once to the
  // running command's processes (how the CLI forwards Ctrl-C; SIGINT also interrupts the
  // shell when the command has no process of its own, as a terminal's Ctrl-C would); 0 to
  // stop it; or 128+N to stop it with signal N first. Stopping abandons the rest of the
  // command's text, as Ctrl-C does at an interactive prompt: the command's processes get
  // SIGTERM (or N), SIGKILL after the grace period, and the shell keeps its state. See
  // `canceller` for a ready-made source.
  int signal_fd = -1;
  // Per stream, when collecting into the result: a longer output keeps its first and its
  // last part (about half the limit each, cut between UTF-8 characters), and the result
  // counts the bytes left out between them (stdout_omitted_bytes).
  size_t output_limit = 16u << 20;
  // sbshd keeps the command's output and result under its id (exec_result::command_id) for
  // an hour after it ends: await_command(), command_logs() and kill_command() reach it, and
  // a result cut short here has the whole output there (up to 64 MiB of each stream, the
  // newest). The output then travels through sbshd rather than straight to this process.
  bool keep = false;
  // When set (implies keep) and the command has not ended this long after the request: exec
  // returns with running = true, command_id and the output so far, and the command goes on
  // at the session's top level (its state changes persist; later commands queue behind it),
  // stopped by nothing but its own timeout or kill_command(). Its input ends there.
  std::chrono::milliseconds detach_after{0};
  // A pseudo-terminal (exec --tty) as the command's controlling terminal, stdin, stdout and
  // stderr: its output, stderr merged, arrives as stdout (a line ends in CR LF, as a
  // terminal's does), TERM is set when the session has none (xterm-256color), and its input
  // (stdin_data, stdin_fd) is typed into the terminal, whose end of file is Ctrl-D. It still
  // runs at the session shell's top level. cols and rows: its size (0: 80 by 24).
  bool tty = false;
  uint16_t cols = 0, rows = 0;
  // The command's stdin is a pipe that stays open for input, also after detach_after (with
  // tty, the terminal stays so). With either, sbshd watches whether the command waits for
  // input, and detach_after returns as soon as it does (exec_result::waiting_for_input).
  bool interactive = false;
  // Directory the session starts in if this exec creates it (empty: the caller's cwd).
  std::string session_cwd;
  // The environment (NAME=VALUE entries) the session starts with if this exec creates it.
  // Unset: this process's environment on a local connection; on a remote one, a minimal
  // environment from the far user's account (HOME, USER, LOGNAME, SHELL, PATH).
  std::optional<std::vector<std::string>> session_env;
};

// Stops or signals a running exec from another thread or a signal handler: give fd() to
// exec_options::signal_fd, then call cancel() or signal() from anywhere (both only write
// one byte to a pipe, which is async-signal-safe).
class SBSH_API canceller {
 public:
  canceller();
  ~canceller();
  canceller(const canceller&) = delete;
  canceller& operator=(const canceller&) = delete;
  [[nodiscard]] int fd() const { return read_end_; }
  void cancel() const { signal(0); }
  // Stops the command as cancel() does, with `sig` as the first signal (SIGHUP, say).
  void stop_with(int sig) const { signal(128 + sig); }
  void signal(int sig) const;

 private:
  // Plain descriptors, closed by the destructor: this installed header cannot use sbsh's
  // internal unique_fd, and the class's layout is part of the C++ ABI.
  int read_end_ = -1;
  int write_end_ = -1;
};

struct exec_result {
  // The status the command ended with, as $? would show it; the shell's own when the shell
  // ended (137 when it was killed by SIGKILL, 3 after `exit 3`). Absent when nothing ran or
  // nothing reported one (see error).
  std::optional<int> exit_code;
  // The signal that ended the last command of the text (or the shell), only when a signal
  // did: `sh -c 'exit 137'` has exit_code 137 and no signal.
  std::optional<int> signal;
  bool timed_out = false;           // the timeout passed: the command was stopped, or never ran
  bool cancelled = false;
  bool shell_restarted = false;     // the shell ended while running it; the session's state was lost
  // Which shell ran it: a number that changes whenever the session's shell is replaced.
  uint64_t generation = 0;
  // The session's shell was replaced since its previous command (killed, crashed, restarted,
  // or sbshd restarted without it): this command ran in a fresh shell, without the state the
  // earlier ones left. state_lost_reason says what happened.
  bool state_lost = false;
  std::string state_lost_reason;
  // The kernel killed a process of the session's for memory while it ran: the session's
  // cgroup reached its memory limit (session_spec::memory_max).
  bool oom_killed = false;
  // false: the command certainly did not run (no shell took it: its shell had ended or could
  // not start, the session had failed, sbshd was shutting down), so it is safe to send again.
  // true: a shell took it (it may still have been cut short; see the other fields).
  bool ran = true;
  std::string stdout_data;
  std::string stderr_data;
  bool stdout_truncated = false;   // some of it was left out: see stdout_omitted_bytes
  bool stderr_truncated = false;
  // Bytes left out between the first and the last part kept (exec_options::output_limit).
  uint64_t stdout_omitted_bytes = 0;
  uint64_t stderr_omitted_bytes = 0;
  // The command still runs (exec_options::detach_after passed, or await_command's timeout):
  // exit_code and the rest are not known yet; command_id reaches it.
  bool running = false;
  // It went on (running) because it waits for input: a process of it is blocked reading its
  // terminal or its stdin (exec_options::tty, interactive), as the kernel says; prompt is the
  // last line it printed ("Enter name: ").
  bool waiting_for_input = false;
  std::string prompt;
  // Bytes the command wrote to each stream so far (the data kept here plus what was left
  // out): the offsets from which logs_options gives only what is new.
  uint64_t stdout_bytes = 0, stderr_bytes = 0;
  // exec_options::tty: what the command's terminal showed at its end (or, in an answer about
  // a kept command that still runs, what it shows now), as text (each row
  // without trailing blanks, empty rows at the bottom left out), rendered by a terminal
  // emulator from its output; empty otherwise.
  std::string screen;
  // sbshd's id for the command when it keeps it (keep, detach_after), else 0; and, in what
  // await_command, command_logs and kill_command return, its session and (shown) text.
  uint64_t command_id = 0;
  std::string session;
  std::string command;
  uint64_t duration_us = 0;
  int64_t started_at_ms = 0;        // unix time in milliseconds; 0 when it never started
  std::string error;                // why exit_code is absent, or other trouble
  // Whether it ended as a command that succeeded: ran, exit code 0, not stopped.
  [[nodiscard]] bool ok() const {
    return ran && exit_code == 0 && !timed_out && !cancelled && !shell_restarted;
  }
};

struct daemon_status {
  int64_t pid = 0;
  std::string version;
  uint64_t uptime_ms = 0;
  std::string socket_path;
  std::vector<session_status> sessions;
  daemon_counters counters;
  uint64_t descriptor_limit = 0;    // sbshd's soft RLIMIT_NOFILE (0: an sbshd that does not say)
  uint64_t sessions_supported = 0;  // the sessions that limit holds (1 descriptor each)
};

struct start_options {
  std::string session;                // empty: "default"
  std::string name;                   // optional, to refer to it later
  std::string command;
  std::string cwd;                    // run in this directory (the session's is not changed)
  std::vector<std::string> env;       // NAME=VALUE for this process only
  std::string session_cwd;            // where the session starts if this creates it
  std::optional<std::vector<std::string>> session_env;  // as in exec_options
};

struct logs_options {
  bool follow = false;                // keep streaming until the process ends
  uint64_t tail = 0;                  // only the last N lines of each stream (0: all kept)
  bool out = true, err = true;        // which streams
  // A kept command's (command_logs): only what follows these offsets in each stream, such as
  // an earlier result's stdout_bytes and stderr_bytes: what it wrote since.
  uint64_t stdout_offset = 0, stderr_offset = 0;
  // When >= 0: a byte readable here ends a follow early (logs() then returns the process's
  // state as usual); canceller::fd() is such a descriptor.
  int cancel_fd = -1;
};

// The bytes a key sends, as a terminal (xterm) sends them: Enter (CR), Tab, Esc, Up, Down,
// Left, Right, Home, End, Backspace, Delete, PageUp, PageDown, Space, and C-a ... C-z (the
// control characters); nullopt for a name that is none of them.
SBSH_API std::optional<std::string> key_bytes(std::string_view name);

// connection::send_input.
struct input_options {
  // `data` is keys as a person types them: an Enter is CR, which on a pipe (interactive
  // without a terminal) becomes LF, as a terminal would make it.
  bool typed = false;
  bool eof = false;   // then end its input (Ctrl-D on a terminal)
  bool wait = true;   // wait for its answer (below); else return once the input is in
  // How long to wait for the answer: until it ends or waits for input again (0: no limit).
  std::chrono::milliseconds timeout{0};
  size_t output_limit = 1u << 20;  // of the answer's output kept, as exec_options::output_limit
};

// Files beneath a session's root (file_read and file_write in sbsh-protocol(7)).
struct file_read_options {
  uint64_t offset = 0;
  std::optional<uint64_t> length;  // absent: to the end
};
struct file_write_options {
  std::optional<uint32_t> mode;  // absent: an existing file's, else 0644
  bool parents = true;           // make missing parent directories
};

// The file operations agents use (sbsh file edit, search, read --lines, ls --depth; MCP's
// edit_file, search_files, read_file by lines, list_files with depth), built on the file
// requests: edit, search and lines read each file whole, at most kMaxWholeFile bytes (a
// larger one fails with "file_failed"). In a session without a root they fail with "no_root"
// unless `as_shell`: then a subshell of the session's shell does the work (cat, a temporary
// file renamed over the old one, find), from its current directory, with its user's rights,
// after the command it runs if one does, leaving the shell's state as it was.
inline constexpr uint64_t kMaxWholeFile = 16u << 20;
struct file_edit_options {
  bool replace_all = false;  // else the old text must occur exactly once
  bool as_shell = false;
};
struct file_edit_result {
  uint64_t replacements = 0;  // occurrences replaced
  uint64_t bytes = 0;         // the file's size now
  uint64_t first_line = 0;    // the line where the first replacement starts (1 the first)
};
struct file_lines_options {
  int64_t line = 1;                   // the first line (1 the first); negative: from the end (-20: the last 20)
  std::optional<uint64_t> count;      // how many lines; absent: to the end
  std::optional<uint64_t> max_bytes;  // stop before a line that would pass this (a first line always comes)
  bool as_shell = false;
};
struct file_lines {
  std::string content;      // the lines' exact bytes, newlines included
  int64_t start_line = 1;   // the number of the first line given
  int64_t end_line = 0;     // the number of the last (start_line - 1 when none)
  int64_t total_lines = 0;  // how many lines the file has (a last one without a newline counts)
  bool truncated = false;   // the file goes on past end_line
};
struct file_search_options {
  std::string path;  // the directory searched, or a file, from the root ("": the root)
  std::string glob;  // only files whose name matches this shell pattern ("*.py")
  bool ignore_case = false;
  std::optional<uint64_t> max_bytes;  // of matches, each counted as "path:line: text\n"
  size_t max_line = 0;                // a line's text past this many bytes is cut, marked (0: whole)
  bool as_shell = false;
};
struct file_match {
  std::string path;  // from the directory searched (dir)
  uint64_t line = 0;
  std::string text;  // the line's bytes, without its newline
};
struct file_search_result {
  std::vector<file_match> matches;
  uint64_t files_searched = 0;
  uint64_t files_skipped = 0;  // larger than kMaxWholeFile, or not text (a NUL byte)
  bool truncated = false;      // more lines matched than max_bytes holds
  // The directory searched, from the root, that the matches' paths are from: the path given,
  // or the directory holding it when it names a file (which is then searched alone, as grep
  // searches a file it is given, glob still applying and the default ignores not).
  std::string dir;
};
struct file_list_options {
  bool recursive = false;  // all beneath it
  uint64_t depth = 0;      // > 0: that many levels beneath it (1: its own entries); implies recursive
  bool as_shell = false;
};

// A lease of a session's shell (connection::lease; docs/architecture.md, "The direct path"):
// its commands go from this process to the shell and back on a socket of their own, with no
// word to sbshd, each with fresh pipes: exact stdout and stderr, and the status the shell
// sends (checked to come from it). The shell's state (variables, directory) carries to and
// from the session's other commands. The shell records each command in memory sbshd reads
// (its start, its deadline, its end), so sbshd's timeouts, cancels, `sbsh ps`, history and
// counters see commands run on a lease as they see any other. The lease ends with release()
// (the destructor releases it), when its connection closes, or when any other request is
// queued on the session: run() then fails with code "eof", and the command did not run (the
// shell answers a run it had not read as not run, and one sent later fails at once). Its
// connection, which must outlive it, serves nothing else while it is held.
class SBSH_API lease {
 public:
  lease(lease&&) noexcept;
  lease& operator=(lease&&) noexcept;
  ~lease();
  // Runs `command` at the shell's top level, stdin /dev/null, and waits for it. With
  // `timeout_ms` > 0, sbshd stops it when that has passed, as it stops an exec that times out
  // (its processes signalled, the rest of the text abandoned): timed_out then says so, and
  // cancelled when another client stopped it (sbsh kill %N, or a cancel of the lease).
  result<exec_result> run(std::string_view command, uint64_t timeout_ms = 0);
  // Ends the lease and waits for sbshd to say so.
  sbsh::status release();
  [[nodiscard]] bool held() const;
  [[nodiscard]] int64_t shell_pid() const;  // the shell, as this process sees it
  [[nodiscard]] uint64_t generation() const;

  struct state;

 private:
  friend class connection;
  explicit lease(std::unique_ptr<state> s);
  std::unique_ptr<state> s_;
};

// An exec that the caller's event loop drives (connection::start_exec) instead of waiting
// in exec(): when fd() is readable, call step(); it does what can be done without blocking
// and gives the result once the command has ended. The connection serves nothing else
// until then. Destroying a call before its end leaves the connection out of step with
// sbshd: close that connection. Callbacks (on_output, on_started) run inside step().
class SBSH_API exec_call {
 public:
  exec_call(exec_call&&) noexcept;
  exec_call& operator=(exec_call&&) noexcept;
  ~exec_call();
  // An epoll descriptor, readable when step() has work; owned by the call.
  [[nodiscard]] int fd() const;
  // The result once the command has ended (then done()); nullopt while it runs; an error
  // as exec() gives one (after which the call is done too).
  result<std::optional<exec_result>> step();
  [[nodiscard]] bool done() const;

  struct state;

 private:
  friend class connection;
  explicit exec_call(std::unique_ptr<state> s);
  std::unique_ptr<state> s_;
};

class SBSH_API connection {
 public:
  static result<connection> connect(const connect_options& opts = {});
  connection(connection&&) noexcept;
  connection& operator=(connection&&) noexcept;
  ~connection();

  // Runs one command and waits for it. Errors (result without value) mean the request was
  // refused or the daemon was lost; a command that ran always yields an exec_result.
  result<exec_result> exec(const exec_options& opts);
  // Sends the exec request and returns at once: see exec_call.
  result<exec_call> start_exec(exec_options opts);
  result<daemon_status> status();

  // Sessions. create() with an existing name and the same definition is a no-op; with a
  // different one it is an error. remove() returns once nothing of the session is left.
  // With a setup (session_spec::setup) that has not built its environment yet, it runs
  // before this returns: `on_output` gets what it writes as it runs, and a failed setup is an
  // error with code "setup_failed" whose message holds its status and the end of its output.
  sbsh::status create_session(const session_spec& spec);
  sbsh::status create_session(const session_spec& spec, const std::function<void(stream, std::string_view)>& on_output);
  result<std::vector<session_status>> sessions();
  result<session_detail> show_session(const std::string& name);
  sbsh::status remove_session(const std::string& name);
  // As remove_session(name); with `keep_copy` the snapshot's copy is left in place (a
  // session without a snapshot is refused). Returns where a copy was kept (asked for, or by
  // the definition's keep_copy_on_failure), or "" when none was.
  result<std::string> remove_session(const std::string& name, bool keep_copy);
  // The snapshot copies kept after their sessions, oldest first; prune deletes them all and
  // returns those deleted once they are gone.
  result<std::vector<kept_copy>> kept_copies();
  result<std::vector<kept_copy>> prune_kept_copies();
  // Environments built by setups (session_spec::setup), most recently used first, each with
  // its size and the sessions using it. remove refuses (code "env_in_use") while a session is
  // defined with it unless `force`; prune deletes those no session uses: all, or all but the
  // `keep` most recently used, or those unused for `older_than` (both: either keeps one), and
  // returns them once they are gone.
  result<std::vector<environment_info>> environments();
  sbsh::status remove_environment(const std::string& hash, bool force = false);
  result<std::vector<environment_info>> prune_environments(std::optional<uint64_t> keep,
                                                           std::chrono::milliseconds older_than);
  sbsh::status restart_session(const std::string& name);
  // Removes every session made implicitly (exec or start with a session name that did not
  // exist) that has been idle for at least `idle`; returns their names once they are gone.
  result<std::vector<std::string>> prune_sessions(std::chrono::milliseconds idle);

  // Background processes, named by id ("7") or by name. kill() with a terminating signal
  // returns once the process has ended (SIGTERM escalates to SIGKILL after 2 s); wait()
  // fails with error code "timeout" when the timeout passes first.
  result<proc_info> start(const start_options& opts);
  result<std::vector<proc_info>> processes(bool include_finished);
  // The commands sbshd keeps that run detached from any client (exec_options::detach_after),
  // as `sbsh ps` lists them; with include_finished every command kept, those ended too.
  result<std::vector<command_info>> commands(bool include_finished);
  result<proc_info> kill(const std::string& proc, int signal);
  result<proc_info> wait(const std::string& proc, std::chrono::milliseconds timeout);
  result<proc_info> logs(const std::string& proc, const logs_options& opts,
                         const std::function<void(stream, std::string_view)>& sink);
  // Kept commands (exec_options::keep, detach_after), by command_id; errors with code
  // "no_such_command" once forgotten. await_command waits for it to end, at most `timeout`
  // (0: no limit), and returns its result with its kept output collected as exec collects it
  // (output_limit); running = true, with the output so far, when the timeout passed first.
  result<exec_result> await_command(uint64_t command_id, std::chrono::milliseconds timeout,
                                    size_t output_limit = 16u << 20);
  // Passes its kept output, from the start, to `sink`; with opts.follow, then what it writes
  // until it ends (opts.cancel_fd ends that early). Returns its result without output
  // (running = true when it has not ended). opts.tail is not taken here.
  result<exec_result> command_logs(uint64_t command_id, const logs_options& opts,
                                   const std::function<void(stream, std::string_view)>& sink);
  // Stops it as a timeout does (`signal` first, SIGTERM when 0; SIGKILL after the grace
  // period; the shell keeps its state) and returns its result once it has ended.
  result<exec_result> kill_command(uint64_t command_id, int signal = 0);
  // Input for a kept command whose input is open (exec_options::tty or interactive, detached):
  // `data` is typed into its terminal or written to its stdin as it reads it (any size: sent
  // as it makes room). Then, unless !opts.wait, waits until it ends, waits for input again,
  // or opts.timeout passes, and returns its state (running, waiting_for_input, prompt, or how
  // it ended) with only the output it wrote after the input, within opts.output_limit.
  // Errors: "no_input" when it takes no input (never opened, ended, or the command is over).
  result<exec_result> send_input(uint64_t command_id, std::string_view data, const input_options& opts = {});
  // A lease of `session`'s shell (see class lease), granted once the commands queued before
  // it have run. Refused over a dial command (code "not_supported": no descriptor passes).
  result<client::lease> lease(const std::string& session);
  // Files beneath a session's root (session_spec::root, or a snapshot session's copy). A
  // path is taken from the root (an absolute one only if it lies beneath it) and resolved
  // beneath it: one leading outside fails with code "outside_root" (the message names the
  // path as given and nothing outside), a write beneath what a confined session may only
  // read (--allow-read, --read-only) with "read_only", a session without a root with "no_root", anything
  // else with "file_failed" and the reason. Bytes are exact, and no size is too large: on a
  // local connection sbshd passes the open file itself, through a dial command they go in
  // chunks. A write lands whole or not at all (a new file renamed over the old one).
  //
  // read_file copies the file (opts: a part of it) to `out_fd`, or passes it to `sink` in
  // chunks; write_file writes `in_fd`'s bytes to its end, or `data`. Both return the bytes
  // copied.
  result<uint64_t> read_file(const std::string& session, const std::string& path, int out_fd,
                             const file_read_options& opts = {});
  result<uint64_t> read_file(const std::string& session, const std::string& path,
                             const std::function<void(std::string_view)>& sink, const file_read_options& opts = {});
  result<uint64_t> write_file(const std::string& session, const std::string& path, int in_fd,
                              const file_write_options& opts = {});
  result<uint64_t> write_file(const std::string& session, const std::string& path, std::string_view data,
                              const file_write_options& opts = {});
  // What `path` is (a symlink at its end is described itself, with its target).
  result<file_entry> stat_file(const std::string& session, const std::string& path);
  // A directory's entries ("" or ".": the root's), sorted; recursive: all beneath it, paths
  // from it ("a/b"), symlinks listed and not followed.
  result<std::vector<file_entry>> list_files(const std::string& session, const std::string& path, bool recursive);
  // A file or symlink; a directory when empty, or with recursive all of it. Never the root.
  sbsh::status remove_file(const std::string& session, const std::string& path, bool recursive);
  sbsh::status make_directory(const std::string& session, const std::string& path, bool parents);
  sbsh::status move_file(const std::string& session, const std::string& from, const std::string& to);
  // The operations above kMaxWholeFile describes. edit_file replaces `old_text` (exactly, not
  // empty) with `new_text` and writes the file whole, keeping its mode; when old_text occurs
  // 0 times it fails with code "no_match", more than once without replace_all with
  // "not_unique" (the message says how many), and the file is left as it was. read_lines
  // gives a range of lines ("usage" for line 0). search_files gives the lines matching a POSIX
  // extended regular expression ("usage" when it is not one) in the files beneath a
  // directory, leaving out what a snapshot leaves out by default (kDefaultIgnores), files
  // that are not text and files past kMaxWholeFile. list_files with options lists to a depth.
  result<file_edit_result> edit_file(const std::string& session, const std::string& path, std::string_view old_text,
                                     std::string_view new_text, const file_edit_options& opts = {});
  result<file_lines> read_lines(const std::string& session, const std::string& path,
                                const file_lines_options& opts = {});
  result<file_search_result> search_files(const std::string& session, const std::string& pattern,
                                          const file_search_options& opts = {});
  result<std::vector<file_entry>> list_files(const std::string& session, const std::string& path,
                                             const file_list_options& opts);

  // Stops sbshd. Its sessions and background processes end too, unless `keep_sessions`:
  // then the sessions, and their background processes, go on running for the next sbshd to
  // adopt (sbshd(8), ADOPTION).
  sbsh::status shutdown(bool keep_sessions = false);
  // The socket path, or for a connection through a dial_command, that command line.
  [[nodiscard]] const std::string& socket_path() const;
  // Whether this connection goes through a dial_command (so possibly to another host).
  [[nodiscard]] bool remote() const;

  // For callers that multiplex: the underlying socket.
  [[nodiscard]] int fd() const;

  struct impl;

 private:
  friend struct generic_request;  // the generic call (client/request.h, client/request_json.h)
  explicit connection(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

// "500ms", "30s", "5m", "1h", or a bare number of seconds ("1.5").
SBSH_API result<std::chrono::milliseconds> parse_duration(std::string_view text);

}  // namespace sbsh::client
