// One exec request: what the client asked for (validated), the descriptors of its I/O, and
// what happened to it. The session runs it; the server parses it and delivers its result.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/procs.h"
#include "daemon/lease_page.h"
#include "ipc/fd.h"
#include "ipc/frame.h"
#include "ipc/result.h"
#include "ipc/socket_io.h"
#include "ipc/text.h"
#include "uv/handles.h"

namespace sbsh::daemon {

class reply_port;
class terminal_screen;
struct session_def;

inline constexpr uint64_t kDefaultGraceMs = 2000;

// How far stopping a command has gone (job_runner::escalate), each stage on a timer.
enum class kill_stage {
  none,          // not being stopped
  first_signal,  // its first signal sent (SIGTERM, or the one asked for), the shell interrupted
  sigkill,       // then SIGKILL, the shell interrupted again
  restart,       // the shell still did not answer: it is being restarted
};

struct exec_outcome {
  std::optional<int> exit_code;
  std::optional<int> signal;  // only when a signal ended the command (or the shell)
  bool timed_out = false;
  bool cancelled = false;
  bool shell_restarted = false;
  bool oom_killed = false;  // the kernel killed a process of the session's for memory meanwhile
  std::string error_code;  // set when the command did not run or did not finish normally
  std::string error;
};

// A number of its own for every job, never reused: what chains of commands refer to, and a
// kept command's %ID (also shown for commands not kept: exec_started). The numbers go on from
// `after` (command_records::start: where an earlier sbshd's stopped), so that no %ID ever names
// two commands, also after a crash: once a serial reaches `mark`, `reserve` runs (on the
// loop) before it is handed out, and says the serial from which it must run again
// (command_records reserves the next block of ids in the state directory). One compare per job.
uint64_t new_job_serial();
void continue_job_serials(uint64_t after);
using serial_reserver = uint64_t (*)(void* ctx, uint64_t serial);
void reserve_job_serials(uint64_t mark, serial_reserver reserve, void* ctx);

struct exec_job {
  // Request
  uint64_t id = 0;
  uint64_t serial = new_job_serial();
  // The running commands (serials) whose processes made this request, directly or through
  // other sessions' commands: a request may not wait for any of them
  // (server::check_not_waiting_on_itself).
  std::vector<uint64_t> inside;
  reply_port* client = nullptr;  // null once the client has gone (runner_ports.h)
  std::string session;
  // What is shown of the command (status, history, errors): shown_command() of its text as
  // the client sent it. Never the whole text, which may be 16 MiB.
  std::string command;
  // What the shell evaluates (the command, or its subshell wrapper); freed once the shell
  // has it.
  std::string text;
  std::string check_cwd;   // exec -C: a directory that must exist, else nothing runs
  // exec -C as the request gave it, with the client's directory and the command's variables,
  // until settle_dir() has placed it in its session; `text` is the command alone until then.
  std::string cwd_given, cwd_base;
  std::vector<std::string> env_given;
  std::string session_cwd;
  // The environment a session this creates starts with, when the request gave one
  // (session_env); keep_env: the connection keeps it; same_env: the one it kept is meant.
  std::vector<std::string> session_env;
  bool keep_env = false, same_env = false;
  uint64_t timeout_ms = 0;  // from the moment the request arrived
  uint64_t grace_ms = kDefaultGraceMs;
  bool io_fds = false;     // descriptors passed by the client, versus output frames
  bool has_stdin = false;
  // A pseudo-terminal instead of pipes (exec --tty): out_r is its master, which in_w writes
  // to as well; out_w is its other end, the command's stdin, stdout and stderr.
  bool tty = false;
  uint16_t cols = 80, rows = 24;
  // What its terminal shows, and its answers to the command's queries (terminal_screen.h).
  std::shared_ptr<terminal_screen> screen;
  // exec --interactive: stdin a pipe that stays open, also after a detach.
  bool interactive = false;
  // Waiting for input (input_wait.h), probed while it runs when it has a terminal or is
  // interactive: the device or pipe it reads, the end of what it printed last (its prompt),
  // and when it last printed.
  dev_t input_rdev = 0;
  ino_t input_ino = 0;
  bool waiting_input = false;
  std::string last_line;
  uint64_t last_output_us = 0;
  uint64_t probe_ms = 0;
  uv::handle_ptr<uv::timer> input_probe;
  bool notify_started = false;  // the client wants exec_started when a shell takes it
  // Its output and result are kept under its serial (command_records.h) for command_logs and
  // command_wait; with detach_after_ms, it goes on without the client once that has passed.
  bool keep = false;
  uint64_t detach_after_ms = 0;
  bool detached = false;  // it went on without its client (exec_detached was sent)
  uv::handle_ptr<uv::timer> detach_timer;
  // Internal jobs (init commands, background starts) have no client: their output is
  // captured here and on_done runs when they end.
  bool internal = false;
  bool init = false;       // one of the session's init commands: its failure fails the start
  std::string captured_out, captured_err;
  std::function<void(exec_job&)> on_done;
  // A lease of the session's shell (the lease request, docs/architecture.md "The direct
  // path"), not a command: current from its turn until the lease ends, while its holder runs
  // commands on the lease socket with no word to sbshd.
  bool lease = false;
  bool lease_held = false;    // the builtin took it and the client has its end
  bool lease_ending = false;  // lease_end sent
  unique_fd lease_client;     // the client's end, until the builtin has taken the lease
  std::string lease_why;      // why it ended, for lease_ended
  // Its record page, and what sbshd last read there: the run its holder has going (seq 0:
  // none), and why sbshd stops it (0, or SBSH_STATUS_TIMED_OUT or _CANCELLED).
  std::optional<lease_page> page;
  lease_page::run leased;
  uint32_t leased_stop = 0;
  uv::handle_ptr<uv::timer> lease_look;  // reads the page while the lease is held
  // Descriptors. fds mode: all from the client. frames mode: made here.
  unique_fd out_w, err_w, in_r;  // ends the shell gets
  unique_fd out_r, err_r;        // ends we read (frames) or keep for draining (fds)
  unique_fd in_w;                // frames mode: where stdin frames go
  // An internal job's descriptors for its text (SBSH_RUN_LENT): a background process's pipes.
  std::vector<unique_fd> lent;

  // Progress
  uint64_t arrived_mono_us = 0;
  uint64_t generation = 0;  // the session's shell generation it was queued against
  uint64_t seq = 0;         // its run on the shell channel
  bool started = false;     // sent to a serving shell
  bool undelivered = false;  // no shell read it (gone, or never started): it never ran
  bool not_run = false;      // the shell refused it before running anything (see error)
  bool state_lost = false;   // it ran in a shell other than the one the last command ran in
  std::string state_lost_why;
  procs::since_mark mark;
  int64_t started_at_ms = 0;
  uint64_t started_mono_us = 0;
  uint64_t oom_kills_before = 0;  // the session cgroup's count when it started (memory limit only)
  exec_outcome outcome;
  daemon::kill_stage kill_stage = kill_stage::none;
  int first_signal = 15;
  bool sent_sigint = false;  // a SIGINT was forwarded to the command (Ctrl-C): a SIGINT it reports is real
  uv::handle_ptr<uv::timer> deadline;
  // Frames mode I/O
  uv::handle_ptr<uv::fd_watch> out_watch, err_watch, in_watch;
  std::string stdin_pending;
  bool stdin_eof = false;
  bool released = false;  // fds mode: client has drained its pipes
  bool wants_release = false;  // fds mode: sbshd drains the pipes once the client releases them

  // Whether any of the text ran.
  [[nodiscard]] bool ran() const { return started && !undelivered && !not_run; }
};

// What sbshd keeps of a command's text to show it: the text, or when longer than
// kShownCommand bytes its start (cut between characters) followed by how long it was.
inline constexpr size_t kShownCommand = 256;
std::string shown_command(std::string_view text);
// The same of a text of `size` bytes of which only `start` is known.
std::string shown_command(std::string_view start, uint64_t size);

// Checks an exec request and fills a job; the error names the field and how to fix it.
result<std::unique_ptr<exec_job>> parse_exec(const ipc::envelope& env);

// Places exec -C in the session defined by `def` (start_dir: a session's root confines it)
// and makes the text the shell evaluates; the error says why it cannot run there.
status settle_dir(exec_job& job, const session_def& def);

// What exec_done says of a finished command.
struct command_result {
  exec_outcome outcome;
  bool ran = false;
  uint64_t duration_us = 0;
  uint64_t generation = 0;
  bool state_lost = false;
  std::string state_lost_why;
  int64_t started_at_ms = 0;
  std::string session, command;  // said only of a kept command (command_records.h)
  std::string screen;            // exec --tty: its terminal's screen at the end, as text
  uint64_t bytes[2] = {0, 0};    // a kept command's: written to each stream, in all
};
command_result result_of(const exec_job& job, uint64_t duration_us);

// The exec_done frame answering request `id` with a finished command's result.
std::string done_frame(const command_result& r, bool release, uint64_t id);
// The exec_done frame for a finished job, to its own client.
std::string done_frame(const exec_job& job, uint64_t duration_us);

using ipc::shell_quote;

}  // namespace sbsh::daemon
