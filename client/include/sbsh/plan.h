// Plans: staged commands run in one fresh session, with a report and a live event log. What
// `sbsh run PLAN` does, for programs (sbsh(1), PLANS, REPORT and EVENTS, are the reference for
// the file format and the two JSON documents).
//
// A plan is a list of stages, each a list of shell commands. run_plan creates a session of
// its own, runs every command in it in order (so directory, variables and functions carry
// from one command to the next, across stages), and stops at the first stage that does not
// meet its expectation; the stages after it are skipped. A stage runs its commands until one
// fails (the rest of the stage is skipped, as under `set -e`): with expect success (the
// default) it passes when none failed; with expect failure it passes when one did.
//
// A command "fails" when it ran and did not exit 0: a non-zero exit status, a signal, a
// timeout, or the end of its shell (`exit`, a crash: the session's state is then lost and the
// next command runs in a new shell). A command that did not run at all (no shell took it,
// or sbshd could not be reached) meets no expectation: its stage fails whatever it expects.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sbsh/client.h"
#include "sbsh/export.h"

namespace sbsh::client {

enum class expectation { success, failure };

struct plan_command {
  std::string run;                                   // shell text, at the shell's top level
  std::optional<std::chrono::milliseconds> timeout;  // unset: the plan's; 0: none
  std::string cwd;                // non-empty: run in a subshell in this directory (relative:
                                  // to the shell's); its changes to the session do not persist
  std::vector<std::string> env;   // NAME=VALUE for this command only (a subshell, as cwd)
  // Lines typed into its input in order, each followed by Enter, then its end: the answers
  // to the questions it asks (read -p, input(), "[Y/n]").
  std::vector<std::string> input;
  bool tty = false;  // a terminal of its own (exec --tty): input typed into it
};

struct plan_stage {
  std::string name;  // ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$, unique in the plan (a directory name)
  expectation expect = expectation::success;
  std::vector<plan_command> commands;  // at least one
};

struct plan {
  // The run's session: cwd, env, init, restart, limits, snapshot (see session_spec). Its
  // name is the run's (run_options::session).
  session_spec session;
  std::chrono::milliseconds timeout{0};  // per command, unless the command sets one; 0: none
  std::vector<plan_stage> stages;        // at least one
};

enum class plan_format { detect, json, yaml };

// Parses a plan from JSON or YAML text. detect: JSON when the first non-blank character is
// '{', else YAML. An invalid plan is an error with code "invalid_plan" whose message names
// the field and says what was expected, e.g.
//   stages[1].commands[0].timeout: "10 minutes" is not a duration (500ms, 30s, 5m, 1h, or seconds)
SBSH_API result<plan> parse_plan(std::string_view text, plan_format format = plan_format::detect);

// Reads a plan file ("-": standard input) and parses it: JSON for *.json, YAML for *.yaml and
// *.yml, else detected. Messages start with the path.
SBSH_API result<plan> load_plan(const std::string& path);

// The checks parse_plan makes of a plan's values, for a plan built in code (run_plan makes
// them too). The message names the field as parse_plan's do.
SBSH_API sbsh::status validate_plan(const plan& p);

// ---- The report ------------------------------------------------------------------------

enum class run_status { passed, failed, cancelled };
enum class stage_status { passed, failed, skipped, cancelled };
// succeeded: ran and exited 0; failed: ran and did not (see the top of this file);
// cancelled: stopped because the run was cancelled; not_run: no shell took it (see error);
// skipped: not reached.
enum class command_status { succeeded, failed, cancelled, not_run, skipped };

SBSH_API std::string_view name_of(expectation e);
SBSH_API std::string_view name_of(run_status s);
SBSH_API std::string_view name_of(stage_status s);
SBSH_API std::string_view name_of(command_status s);

struct command_report {
  std::string command;
  std::string cwd;
  std::vector<std::string> env;          // NAME=VALUE
  std::chrono::milliseconds timeout{0};  // what applied; 0: none
  command_status status = command_status::skipped;
  std::optional<int> exit_code;          // absent when no process produced one
  std::optional<int> signal;
  bool timed_out = false;
  bool shell_restarted = false;
  // Output kept in the report: at most run_options::output_limit bytes of each stream.
  std::string stdout_data, stderr_data;
  bool stdout_truncated = false, stderr_truncated = false;
  uint64_t stdout_bytes = 0, stderr_bytes = 0;  // everything the command wrote
  std::string stdout_file, stderr_file;  // with artifacts: absolute paths of the whole streams
  uint64_t duration_ms = 0;
  int64_t started_at_ms = 0;             // unix time; 0: it did not start
  std::string error;                     // why it did not run, or other trouble
};

struct stage_report {
  std::string name;
  expectation expect = expectation::success;
  stage_status status = stage_status::skipped;
  std::vector<command_report> commands;  // every command of the stage, run or not
};

// Why a run did not pass.
struct run_reason {
  int stage = -1;    // index into run_report::stages; -1: before any stage (the session)
  int command = -1;  // index into that stage's commands; -1: the stage as a whole
  std::string message;
};

struct run_report {
  run_status status = run_status::passed;
  std::optional<run_reason> reason;      // absent when passed
  std::string session;                   // the run's session
  bool session_kept = false;             // run_options::keep_session: it is still there
  int64_t started_at_ms = 0;
  uint64_t duration_ms = 0;
  // sbsh's own failure: the session could not be made, the connection was lost, or the
  // artifacts or the event log could not be written. The run then ends (except for a write
  // failure of the event log, after which the run goes on without it) and exit_status is
  // 255, unless the run was cancelled.
  std::optional<sbsh::error> error;
  std::vector<stage_report> stages;      // every stage of the plan, run or not
};

// The report as one line of JSON (sbsh(1), REPORT): the document `sbsh run --report` writes.
SBSH_API std::string report_json(const run_report& r);

// `sbsh run`'s exit status for a report: 130 cancelled, else 255 when there is an error,
// else 0 passed, 1 failed.
SBSH_API int exit_status(const run_report& r);

// ---- Running ---------------------------------------------------------------------------

// One event of a run, as it happens: plan_started, stage_started, command_started,
// command_finished, stage_finished, plan_finished (sbsh(1), EVENTS).
struct run_event {
  std::string_view name;
  int stage = -1;             // for stage_* and command_*: the index into report.stages
  int command = -1;           // for command_*: the index into that stage's commands
  const run_report& report;   // the report so far
  std::string_view json;      // the event as the event log has it: one JSON object, no newline
};

struct run_options {
  // The session's name. Empty: "run-<pid>-<n>", a name no session has. A session of that
  // name must not exist: a run starts from a fresh shell.
  std::string session;
  bool keep_session = false;          // false: the session is removed when the run ends
  size_t output_limit = 1u << 20;     // bytes of each stream kept in the report, per command
  // Non-empty: each command's whole stdout and stderr are written, as they arrive, to
  // DIR/<stage>/<n>.stdout and .stderr (n: the command's index in its stage, from 0),
  // which the report names by absolute path. DIR and its stage directories are made as needed.
  std::string artifacts_dir;
  // Non-empty: the report is written to this file when the run ends, cancelled or not.
  std::string report_path;
  // Non-empty: the event log goes to this file, one JSON object per line, each written
  // when it happens. events_fd >= 0: it goes to that descriptor too (left open).
  std::string events_path;
  int events_fd = -1;
  // >= 0: once a byte is readable here (it is not read), the run is cancelled: the running
  // command is stopped (SIGTERM, SIGKILL after the grace period), the run's status is
  // cancelled, and the report is still written. canceller::fd() and the CLI's signal pipe
  // are such descriptors; since the byte stays, a canceller must be emptied before it serves
  // another run or exec.
  int cancel_fd = -1;
};

// Runs a plan in a fresh session of `conn`. An error means nothing ran: the plan is invalid
// (code "invalid_plan"), an option is (code "usage"), or a file could not be opened (code
// "file"). Once the run has begun there is always a report, which may carry an error; the
// callback receives each event after the event log has it, on the calling thread.
SBSH_API result<run_report> run_plan(connection& conn, const plan& p, const run_options& opts = {},
                                     const std::function<void(const run_event&)>& on_event = {});

}  // namespace sbsh::client
