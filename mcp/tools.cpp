// The tool table: each tool's arguments (a struct, from which its input schema, check and
// parse follow: tool_args.h), output schema, and the handler that calls the client library
// with the arguments parsed. The JSON each returns is the CLI's --json record
// (client/json.h), parsed back, so the fields are written in one place.
#include "mcp/tools.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "client/file_ops.h"
#include "client/json.h"
#include "client/json_form.h"
#include "client/resources.h"
#include "ipc/protocol.h"
#include "ipc/records.h"
#include "ipc/text.h"
#include "mcp/render.h"
#include "mcp/results.h"
#include "mcp/tool_args.h"

namespace sbsh::mcp {

namespace {

using namespace std::chrono_literals;

// Per stream, in a run_command result: an agent's context is the limit, not memory.
constexpr size_t kOutputLimit = 1u << 20;
// How long run_command and await_command wait before answering with a command still running.
constexpr auto kDefaultWait = std::chrono::milliseconds(30000);

// Each tool's arguments (tool_args.h): their schema, check and parse follow from these.
// What several tools share is written once, here or where the protocol defines it.
constexpr double kMaxTimeoutSeconds = 604800;  // a week
constexpr double kMaxWaitSeconds = 3600;
constexpr double kMinBudget = 2000, kMaxBudget = 1000000;
constexpr std::string_view kAssignmentKey = "^[^=]+$";
constexpr std::string_view kAbsolutePath = "^/";
constexpr std::string_view kCommandIdText = "the command's id, as run_command returned it (%N)";
constexpr std::string_view kBudgetText = "the most characters of output in the result (default 30000)";
constexpr std::string_view kFileSessionText =
    "session name (default: default); in one without a root, paths are taken as its shell takes them";
constexpr std::string_view kFilePathText =
    "the file, from the session's root (an absolute path must lie beneath it); in a session without a root, from "
    "its shell's current directory";
constexpr std::string_view kProcessIdText = "the process id (as start_process returned it) or its name";

template <typename S>
constexpr auto session_arg(std::string S::*member, std::string_view description) {
  return arg("session", member, description).longest(ipc::kSessionNameMax).matching(ipc::kSessionNamePattern);
}
template <typename S>
constexpr auto name_arg(std::string S::*member) {
  return arg("name", member, "session name")
      .required()
      .longest(ipc::kSessionNameMax)
      .matching(ipc::kSessionNamePattern);
}
template <typename S>
constexpr auto command_id_arg(std::string S::*member) {
  return arg("id", member, kCommandIdText).required().matching(client::kCommandRefPattern);
}
template <typename S, typename M>
constexpr auto budget_arg(M S::*member, std::string_view description = kBudgetText) {
  return arg("max_output_chars", member, description).at_least(kMinBudget).at_most(kMaxBudget);
}
template <typename S>
constexpr auto wait_seconds_arg(std::optional<double> S::*member, std::string_view description) {
  return arg("wait_seconds", member, description).above(0).at_most(kMaxWaitSeconds);
}
template <typename S>
constexpr auto env_arg(std::map<std::string, std::string> S::*member, std::string_view description) {
  return arg("env", member, description).keys_matching(kAssignmentKey);
}

struct run_args {
  std::string command, session, cwd;
  std::map<std::string, std::string> env;
  std::optional<double> timeout_seconds, wait_seconds;
  std::optional<std::string> stdin_text;
  bool tty = false, interactive = false;
  uint64_t max_output_chars = kDefaultBudget;
  static constexpr auto arguments() {
    using s = run_args;
    return std::tuple{
        arg("command", &s::command,
            "shell text, run at the top level of the session's bash, so cd, variables and functions persist")
            .required()
            .non_empty(),
        session_arg(&s::session, "session name (default: default), created on first use"),
        arg("cwd", &s::cwd, "run in this directory, in a subshell: changes do not persist").non_empty(),
        env_arg(&s::env, "variables for this command only, in a subshell"),
        arg("timeout_seconds", &s::timeout_seconds,
            "stop the command and its whole process tree after this long (default: the session's timeout, else "
            "none)")
            .above(0)
            .at_most(kMaxTimeoutSeconds),
        arg("stdin", &s::stdin_text, "bytes the command reads on stdin (default: none, as from /dev/null)"),
        arg("tty", &s::tty,
            "give it a terminal of its own (a REPL, a pager, a program that asks questions): its output comes as a "
            "terminal shows it (stderr merged, lines ending in CR LF), queries of the terminal are answered, and the "
            "result returns as soon as it waits for input (waiting_for_input, prompt): send_input answers it"),
        arg("interactive", &s::interactive,
            "keep its stdin open (a pipe) instead of /dev/null, and return as soon as it waits for input, for "
            "send_input; tty implies it"),
        wait_seconds_arg(&s::wait_seconds,
                         "answer after at most this long (default 30): a command still running then goes on in the "
                         "session, and the result has running: true and its id for await_command and "
                         "cancel_command. At most 50 unless the call carries a progress token (hosts give up on a "
                         "silent call after about 60 s; progress notifications keep it alive)"),
        budget_arg(&s::max_output_chars,
                   "the most characters of output in the result (default 30000): past it the output keeps its head "
                   "and tail, with a marker at the cut saying how many bytes were left out and the process_logs "
                   "call that reads them")};
  }
};

struct await_args {
  std::string id;
  std::optional<double> wait_seconds;
  uint64_t stdout_offset = 0, stderr_offset = 0;
  uint64_t max_output_chars = kDefaultBudget;
  static constexpr auto arguments() {
    using s = await_args;
    return std::tuple{
        command_id_arg(&s::id),
        wait_seconds_arg(&s::wait_seconds,
                         "answer after at most this long (default 30) with the output so far, if it still runs; at "
                         "most 50 unless the call carries a progress token (hosts give up on a silent call after "
                         "about 60 s)"),
        arg("stdout_offset", &s::stdout_offset,
            "leave out the stdout before this byte: the stdout_bytes of the previous result, to get only what is new")
            .at_least(0),
        arg("stderr_offset", &s::stderr_offset,
            "leave out the stderr before this byte: the stderr_bytes of the previous result")
            .at_least(0),
        budget_arg(&s::max_output_chars)};
  }
};

constexpr std::string_view kKeyNames[] = {"Enter", "Tab", "Esc",       "Up",     "Down",   "Left",     "Right",
                                          "Home",  "End", "Backspace", "Delete", "PageUp", "PageDown", "Space",
                                          "C-a",   "C-b", "C-c",       "C-d",    "C-e",    "C-f",      "C-g",
                                          "C-h",   "C-i", "C-j",       "C-k",    "C-l",    "C-m",      "C-n",
                                          "C-o",   "C-p", "C-q",       "C-r",    "C-s",    "C-t",      "C-u",
                                          "C-v",   "C-w", "C-x",       "C-y",    "C-z"};

struct input_args {
  std::string id;
  std::optional<std::string> text;
  bool enter = true, eof = false;
  std::vector<std::string> keys;
  std::optional<double> wait_seconds;
  uint64_t max_output_chars = kDefaultBudget;
  static constexpr auto arguments() {
    using s = input_args;
    return std::tuple{
        command_id_arg(&s::id),
        arg("text", &s::text, "what to type (a line of input, an answer)").longest(size_t{1} << 20),
        arg("enter", &s::enter, "type Enter after text (default true)"),
        arg("keys", &s::keys,
            "keys to send after text, in order (C-c: SIGINT to its foreground job on a terminal; C-d: end of input)")
            .most_items(256)
            .items_among(kKeyNames),
        arg("eof", &s::eof, "then end its input"),
        wait_seconds_arg(&s::wait_seconds,
                         "answer after at most this long (default 30) with what it wrote so far, if it neither ended "
                         "nor waits for input again; at most 50 unless the call carries a progress token"),
        budget_arg(&s::max_output_chars)};
  }
};

struct cancel_args {
  std::string id;
  std::string signal = "TERM";
  uint64_t max_output_chars = kDefaultBudget;
  static constexpr auto arguments() {
    using s = cancel_args;
    return std::tuple{command_id_arg(&s::id),
                      arg("signal", &s::signal, "the first signal (default TERM; KILL follows after 2 s)"),
                      budget_arg(&s::max_output_chars)};
  }
};

struct name_args {
  std::string name;
  static constexpr auto arguments() { return std::tuple{name_arg(&name_args::name)}; }
};

struct create_args {
  std::string name, cwd, root;
  std::map<std::string, std::string> env;
  std::vector<std::string> init;
  std::optional<std::string> restart;
  std::optional<double> timeout_seconds;
  std::string setup;
  std::vector<std::string> setup_keys;
  bool confine = false;
  std::vector<std::string> allow_write, allow_read, read_only;
  bool no_network = false;
  std::optional<std::variant<uint64_t, std::string>> memory;
  std::optional<uint64_t> pids;
  std::optional<double> cpu;
  static constexpr auto arguments() {
    using s = create_args;
    return std::tuple{
        name_arg(&s::name),
        arg("cwd", &s::cwd,
            "directory its shells start in (default: the root if given, else the one sbsh mcp runs in; relative: "
            "from the root)")
            .non_empty(),
        arg("root", &s::root,
            "directory the session is confined to: the file tools reach only what is beneath it, and run_command's "
            "cwd must stay beneath it")
            .non_empty(),
        env_arg(&s::env, "variables every shell of the session starts with"),
        arg("init", &s::init, "commands run in every new shell before any other"),
        arg("restart", &s::restart, "when a shell that ended is replaced (default: always)")
            .among(ipc::kRestartPolicies),
        arg("timeout_seconds", &s::timeout_seconds, "default timeout of a command that gives none")
            .above(0)
            .at_most(kMaxTimeoutSeconds),
        arg("setup", &s::setup,
            "bash that builds the session's environment once (a venv, node_modules) in the directory SBSH_ENV "
            "names; sessions with the same setup and key files share it, built once, and it is ready before this "
            "returns")
            .non_empty(),
        arg("setup_keys", &s::setup_keys,
            "files or directories (relative to the session's directory) whose contents key the environment, such "
            "as requirements.txt, package-lock.json or wheels/ (a directory counts as its files' paths, executable "
            "bits and bytes, less node_modules, .git and what else a snapshot leaves out)")
            .items_non_empty(),
        arg("confine", &s::confine,
            "with root: the kernel (Landlock) confines the session's shell and all it starts to reading and writing "
            "beneath the root and a private TMPDIR and reading and running the system's programs; reading anything "
            "else fails with Permission denied, and all it starts ends with the session"),
        arg("allow_write", &s::allow_write, "with confine: absolute paths it may also read and write beneath")
            .items_matching(kAbsolutePath, "an absolute path"),
        arg("allow_read", &s::allow_read, "with confine: absolute paths it may also read and run what is beneath")
            .items_matching(kAbsolutePath, "an absolute path"),
        arg("read_only", &s::read_only, "with confine: absolute paths it may also read (not run) beneath")
            .items_matching(kAbsolutePath, "an absolute path"),
        arg("no_network", &s::no_network, "the session has a network of its own with only loopback"),
        arg("memory", &s::memory,
            "memory limit of the session's processes together: bytes, or a size such as 512M or 2G (needs a cgroup "
            "v2 delegated to sbshd)")
            .at_least(1)
            .at_most(1e18),
        arg("pids", &s::pids, "most processes the session may have at once (needs a delegated cgroup v2)")
            .at_least(1)
            .at_most(ipc::kMaxSessionPids),
        arg("cpu", &s::cpu, "CPUs the session may use, such as 0.5 or 2 (needs a delegated cgroup v2)")
            .at_least(static_cast<double>(ipc::kMinSessionCpuMillis) / 1000)
            .at_most(static_cast<double>(ipc::kMaxSessionCpuMillis) / 1000)};
  }
};

struct start_args {
  std::string command, session, name, cwd;
  std::map<std::string, std::string> env;
  static constexpr auto arguments() {
    using s = start_args;
    return std::tuple{arg("command", &s::command,
                          "shell text, run in the background in a subshell of the session's shell")
                          .required()
                          .non_empty(),
                      session_arg(&s::session, "session name (default: default)"),
                      arg("name", &s::name, "a name to use instead of the id").non_empty(),
                      arg("cwd", &s::cwd, "run in this directory").non_empty(),
                      env_arg(&s::env, "variables for this process only")};
  }
};

struct list_procs_args {
  bool all = false;
  static constexpr auto arguments() {
    return std::tuple{arg("all", &list_procs_args::all, "include finished processes")};
  }
};

// A background process's id or name, or (process_logs) a command's id.
using process_id = std::variant<std::string, int64_t>;

struct kill_args {
  process_id id;
  std::string signal = "TERM";
  static constexpr auto arguments() {
    using s = kill_args;
    return std::tuple{arg("id", &s::id, kProcessIdText).required(),
                      arg("signal", &s::signal,
                          "TERM (the default: KILL follows after 2 s), KILL, INT, HUP and so on, or a number")};
  }
};

struct wait_args {
  process_id id;
  std::optional<double> timeout_seconds;
  static constexpr auto arguments() {
    using s = wait_args;
    return std::tuple{arg("id", &s::id, kProcessIdText).required(),
                      arg("timeout_seconds", &s::timeout_seconds, "give up waiting after this long (default 30)")
                          .above(0)
                          .at_most(kMaxTimeoutSeconds)};
  }
};

constexpr std::string_view kStreams[] = {"both", "stdout", "stderr"};

struct logs_args {
  process_id id;
  std::optional<uint64_t> tail;
  std::string stream = "both";
  std::optional<uint64_t> stdout_offset, stderr_offset;
  uint64_t max_output_chars = kDefaultBudget;
  static constexpr auto arguments() {
    using s = logs_args;
    return std::tuple{
        arg("id", &s::id,
            "a background process's id (as start_process returned it) or name, or a command's id (%N, as "
            "run_command returned it)")
            .required(),
        arg("tail", &s::tail, "a background process's only: the last N lines of each stream").at_least(1),
        arg("stream", &s::stream, "which output (default: both)").among(kStreams),
        arg("stdout_offset", &s::stdout_offset,
            "read stdout from this byte on (as a cut's marker names it), as much as the budget holds; without it, "
            "the newest stdout")
            .at_least(0),
        arg("stderr_offset", &s::stderr_offset, "read stderr from this byte on; without it, the newest stderr")
            .at_least(0),
        budget_arg(&s::max_output_chars)};
  }
};

struct read_file_args {
  std::string path, session;
  uint64_t offset = 0, length = kOutputLimit;
  std::optional<int64_t> line;
  std::optional<uint64_t> lines, max_output_chars;
  static constexpr auto arguments() {
    using s = read_file_args;
    return std::tuple{
        arg("path", &s::path, kFilePathText).required().non_empty(),
        session_arg(&s::session, kFileSessionText),
        arg("offset", &s::offset, "start at this byte").at_least(0),
        arg("length", &s::length, "bytes to read (default and most: 1 MiB)").at_least(0).at_most(kOutputLimit),
        arg("line", &s::line,
            "read lines instead of bytes, from this line (1 is the first); negative counts from the end (-20: the "
            "last 20 lines)")
            .at_least(-1e8)
            .at_most(1e8),
        arg("lines", &s::lines, "with line: how many lines (default: as many as max_output_chars holds)")
            .at_least(1)
            .at_most(1e8),
        budget_arg(&s::max_output_chars,
                   "with line: the most characters of content (default 30000); the result stops at a whole line")};
  }
};

constexpr std::string_view kEncodings[] = {"utf-8", "base64"};

struct write_file_args {
  std::string path, content;
  std::string encoding = "utf-8";
  std::string session;
  std::optional<uint32_t> mode;
  static constexpr auto arguments() {
    using s = write_file_args;
    return std::tuple{
        arg("path", &s::path,
            "the file, from the session's root (in one without a root, from its shell's current directory); missing "
            "parent directories are made")
            .required()
            .non_empty(),
        arg("content", &s::content, "the file's whole new content").required(),
        arg("encoding", &s::encoding, "how content is written (default: utf-8)").among(kEncodings),
        session_arg(&s::session, kFileSessionText),
        arg("mode", &s::mode, "permission bits (default: an existing file's, else 0644)").at_least(0).at_most(07777)};
  }
};

struct list_files_args {
  std::string path, session;
  bool recursive = false;
  uint64_t depth = 0;
  static constexpr auto arguments() {
    using s = list_files_args;
    return std::tuple{
        arg("path", &s::path,
            "the directory, from the session's root (default: the root; in a session without a root, its shell's "
            "current directory)"),
        session_arg(&s::session, kFileSessionText), arg("recursive", &s::recursive, "list all beneath it too"),
        arg("depth", &s::depth, "list this many levels beneath the directory (1: its entries; implies recursive)")
            .at_least(1)
            .at_most(1000)};
  }
};

struct edit_file_args {
  std::string path, old_string, new_string;
  bool replace_all = false;
  std::string session;
  static constexpr auto arguments() {
    using s = edit_file_args;
    return std::tuple{
        arg("path", &s::path, kFilePathText).required().non_empty(),
        arg("old_string", &s::old_string,
            "the exact text to replace, whitespace and indentation included; it must occur exactly once unless "
            "replace_all")
            .required()
            .non_empty(),
        arg("new_string", &s::new_string, "the text to put in its place").required(),
        arg("replace_all", &s::replace_all,
            "replace every occurrence (default: false, and old_string must then be unique)"),
        session_arg(&s::session, kFileSessionText)};
  }
};

struct search_args {
  std::string pattern, path, glob;
  bool ignore_case = false;
  std::string session;
  uint64_t max_output_chars = kDefaultBudget;
  static constexpr auto arguments() {
    using s = search_args;
    return std::tuple{
        arg("pattern", &s::pattern, "a POSIX extended regular expression, matched against each line")
            .required()
            .non_empty()
            .longest(1000),
        arg("path", &s::path,
            "the directory to search, or one file, from the session's root (default: the root; in a session "
            "without a root, its shell's current directory)"),
        arg("glob", &s::glob, "only files whose name matches this shell pattern, such as *.py").non_empty(),
        arg("ignore_case", &s::ignore_case, "match regardless of case"),
        session_arg(&s::session, kFileSessionText),
        budget_arg(&s::max_output_chars, "the most characters of matches in the result (default 30000)")};
  }
};

// The output schemas of the tools that return records: each record's schema is derived from
// its declaration (client/json_form.h, json_schema_of), the same rules that write its JSON
// form; only the descriptions, prose for a model, are written here, by key.
constexpr client::json_doc kSessionDocs[] = {
    {"name", "the session's name"},
    {"state", "what it is doing (idle, busy, failed and so on)"},
    {"shell_pid", "its bash's pid (0 when none runs)"},
    {"wrapper_pid", "the pid of the process that holds its shell"},
    {"restarts", "how many times its shell was replaced"},
    {"queued", "commands waiting for the shell"},
    {"commands", "commands it has run"},
    {"cwd", "the shell's current directory"},
    {"restart", "when an ended shell is replaced: always, on-failure or never"},
    {"uptime_ms", "how long its shell has run"},
    {"started_at", "when its shell started (UTC, ISO 8601)"},
    {"running", "the command it runs now, else null"},
    {"running_ms", "how long that command has run"},
    {"error", "why it failed, else null"},
    {"implicit", "made on first use, not by create_session"},
    {"idle_expiry_ms", "it is removed after this long idle, else null"},
    {"idle_since", "when it became idle"},
    {"expires_at", "when it will be removed for idleness"},
    {"timeout_ms", "its commands' default timeout, else null"},
};
constexpr client::json_doc kProcDocs[] = {
    {"id", "the process's id"},
    {"name", "the name it was given"},
    {"session", "the session it started from"},
    {"command", "its command"},
    {"state", "running, exited, killed or failed"},
    {"pid", "its pid while it runs"},
    {"pgid", "its process group"},
    {"exit_code", "its exit status once it has ended"},
    {"signal", "the signal that ended it"},
    {"started_at", "when it started (UTC, ISO 8601)"},
    {"ended_at", "when it ended"},
    {"error", "why it failed to start, or other trouble"},
    {"log", "where sbshd keeps its output"},
};
constexpr client::json_doc kCommandDocs[] = {
    {"id", "the command's id (%N)"},
    {"session", "its session"},
    {"command", "its text"},
    {"state", "queued, running or finished"},
    {"detached", "it runs with no client waiting for it"},
    {"pid", "the pid of the shell running it"},
    {"exit_code", "its exit status once it has ended"},
    {"signal", "the signal that ended it"},
    {"timed_out", "its timeout stopped it"},
    {"cancelled", "it was cancelled"},
    {"started_at", "when it started"},
    {"ended_at", "when it ended"},
};
constexpr client::json_doc kEntryDocs[] = {
    {"path", "from the directory listed"},
    {"path_base64",
     "only when path is not valid UTF-8 (path then has U+FFFD in place of those bytes): its exact bytes"},
    {"type", "file, dir, symlink or other"},
    {"size", "bytes"},
    {"mode", "permission bits, in octal"},
    {"mtime", "last modified (UTC, ISO 8601)"},
    {"target", "a symlink's target"},
    {"target_base64", "only when target is not valid UTF-8: its exact bytes"},
};

// A command's result: exec --json's form (client::exec_result_schema), its streams cut to the
// budget with the fields saying where (cut_stream).
constexpr client::json_doc kExecDocs[] = {
    {"session", "the session it ran in"},
    {"command", "the command's text; past 200 bytes only its start and its length (the caller has it)"},
    {"id", "the command's id (%N): await_command, cancel_command and process_logs take it"},
    {"running", "it still runs (wait_seconds passed): await_command gives what follows and its end"},
    {"waiting_for_input",
     "it still runs because it waits for input (a process of it is blocked reading its terminal or stdin, as the "
     "kernel says): send_input answers it"},
    {"prompt", "while it runs: the last line it printed (its question), else null"},
    {"screen", "with tty, once it has ended: what its terminal showed, as text, else null"},
    {"next_offset", "N:M, the bytes it has written to stdout and stderr so far (as stdout_bytes and stderr_bytes)"},
    {"exit_code",
     "its exit status as $? shows it (128+N after signal N); null while it runs or when nothing reported one (see "
     "error)"},
    {"signal", "the signal that ended it (SIGTERM, SIGKILL...), else null"},
    {"timed_out", "timeout_seconds passed: it was stopped with its whole process tree; the shell kept its state"},
    {"shell_restarted",
     "the session's shell ended while it ran (exit, exec, a crash): the next command runs in a new shell, without "
     "the state (directory, variables) the old one had"},
    {"cancelled", "cancel_command or a cancelled call stopped it; the shell kept its state"},
    {"ran", "false: no shell took it, so it certainly did not run and is safe to send again"},
    {"generation", "which shell ran it: a number that changes whenever the session's shell is replaced"},
    {"state_lost",
     "the shell was replaced between the session's previous command and this one (killed, restarted, sbshd "
     "restarted), which no earlier result reported: this one ran without the state the earlier ones left"},
    {"state_lost_reason", "why state_lost, else null"},
    {"oom_killed", "the kernel killed a process of the session's for memory meanwhile"},
    {"stdout",
     "its standard output (invalid UTF-8 replaced by U+FFFD); past the budget its head and tail with a marker line "
     "at the cut"},
    {"stderr", "its standard error, kept as stdout is"},
    {"stdout_base64", "stdout's exact bytes in base64 when they are not UTF-8 and were kept whole, else null"},
    {"stderr_base64", "stderr's exact bytes in base64 when they are not UTF-8 and were kept whole, else null"},
    {"stdout_truncated", "part of stdout was left out (stdout_omitted_bytes, at the marker)"},
    {"stderr_truncated", "part of stderr was left out"},
    {"stdout_omitted_bytes", "bytes of stdout left out at the marker"},
    {"stderr_omitted_bytes", "bytes of stderr left out at the marker"},
    {"duration_ms", "how long it has run, in milliseconds"},
    {"started_at", "when it started (UTC, ISO 8601), null if it never did"},
    {"error", "why exit_code is null, or other trouble, else null"},
};
// What cut_stream adds to each stream, after the record's keys.
constexpr client::json_doc kStreamDocs[] = {
    {"stdout_omitted_from",
     "the offset of the first stdout byte left out: process_logs with stdout_offset set to it reads them"},
    {"stdout_offset", "the offset in its whole stdout where this result's stdout starts (the stdout_offset asked for)"},
    {"stdout_bytes", "bytes it has written to stdout so far: the stdout_offset that gets only what is new"},
    {"stderr_omitted_from", "the offset of the first stderr byte left out"},
    {"stderr_offset", "the offset in its whole stderr where this result's stderr starts"},
    {"stderr_bytes", "bytes it has written to stderr so far"},
};
json exec_output() {
  json j(client::exec_result_schema(kExecDocs));
  for (const auto& d : kStreamDocs) {
    j["properties"][std::string(d.key)] = {{"type", "integer"}, {"description", d.text}};
    j["required"].push_back(d.key);
  }
  return j;
}

// The file tools' results: json_of(path, r) of the library's results (client/json.h).
constexpr client::json_doc kReadDocs[] = {
    {"path", "the path as given"},
    {"bytes", "bytes read"},
    {"content", "the bytes read, as encoding says"},
    {"encoding", "utf-8, or base64 when the bytes are not UTF-8"},
    {"truncated", "the file goes on past what was read: read again from offset + bytes"},
    {"start_line", "with line: the number of the first line given"},
    {"end_line", "with line: the number of the last line given (start_line - 1 when none)"},
    {"total_lines", "with line: how many lines the file has"},
};
constexpr client::json_doc kWriteDocs[] = {{"path", "the path as given"}, {"bytes", "bytes written"}};
constexpr client::json_doc kEditDocs[] = {
    {"path", "the path as given"},
    {"replacements", "how many occurrences were replaced"},
    {"bytes", "the file's size now"},
    {"first_line", "the line where the first replacement starts"},
};
constexpr client::json_doc kSearchDocs[] = {
    {"matches", "the matching lines, by file and line"},
    {"matches.path", "the file, from the directory searched"},
    {"matches.line", "the line's number (1 the first)"},
    {"matches.text", "the line (past 400 bytes, its start)"},
    {"files_searched", "files read"},
    {"files_skipped", "files not read: larger than 16 MiB, or not text (a NUL byte)"},
    {"truncated", "more lines matched than the budget holds: narrow pattern, path or glob"},
    {"dir",
     "the directory the matches' paths are from: path, or the directory holding it when path is a file (searched "
     "alone)"},
};
json read_file_output() { return client::json_schema_at_path<client::file_lines>(kReadDocs); }
json write_file_output() { return client::json_schema_at_path<client::file_written>(kWriteDocs); }
json edit_file_output() { return client::json_schema_at_path<client::file_edit_result>(kEditDocs); }
json search_output() { return client::json_schema_of<client::file_search_result>(kSearchDocs); }

json described(const client::json_value& schema, std::string_view description) {
  json j(schema);
  j["description"] = description;
  return j;
}
json session_schema() {
  return described(client::json_schema_of<session_status>(kSessionDocs), "the session as list_sessions gives it");
}
json proc_schema() {
  json j(client::json_schema_of<proc_info>(kProcDocs));
  return j;
}
json list_of(json items, std::string_view description) {
  return {{"type", "array"}, {"description", description}, {"items", std::move(items)}};
}

json sessions_output() {
  return {{"type", "object"},
          {"required", {"sessions"}},
          {"properties", {{"sessions", list_of(session_schema(), "every session, by name")}}}};
}
json session_output() {
  return {{"type", "object"}, {"required", {"session"}}, {"properties", {{"session", session_schema()}}}};
}
// The schema of the record at `key` of `schema`, described by `docs` (keys of that record).
json with_docs(json schema, const char* key, std::span<const client::json_doc> docs) {
  client::json_value inner(schema["properties"][key]);
  client::json_detail::describe(inner, docs);
  schema["properties"][key] = json(inner);
  return schema;
}
constexpr client::json_doc kRemovedDocs[] = {{"removed", "the name of the session removed"}};
json removed_output() { return client::json_schema_of<session_removed>(kRemovedDocs); }
// create_session's: the session, and its definition as session show --json gives it (the
// confinement in force under definition.confinement).
constexpr client::json_doc kCreatedDocs[] = {
    {"session", "the session as list_sessions gives it"},
    {"setup_stdout", "what the setup wrote on stdout when it ran for this call (its last 16 KiB), else null"},
    {"setup_stderr", "what the setup wrote on stderr when it ran for this call (its last 16 KiB), else null"},
    {"definition",
     "how its shells start and what confines them (confinement: landlock_abi, rules, namespaces, limits)"},
};
json created_output() {
  return with_docs(client::json_schema_of<session_created>(kCreatedDocs), "session", kSessionDocs);
}
json proc_output() { return proc_schema(); }
json procs_output() {
  json commands = json(client::json_schema_of<command_info>(kCommandDocs));
  return {{"type", "object"},
          {"required", {"processes"}},
          {"properties",
           {{"processes", list_of(proc_schema(), "the background processes, oldest first")},
            {"commands", list_of(commands,
                                 "the commands run_command left running (all: every command sbshd keeps, ended ones "
                                 "too), by id: await_command, send_input, cancel_command and process_logs take it")}}}};
}
constexpr client::json_doc kLogsDocs[] = {
    {"command", "the command, when id named one (%N)"},
    {"command.id", "the command's id"},
    {"command.session", "its session"},
    {"command.command", "its text; past 200 bytes only its start and its length"},
    {"command.running", "it still runs"},
    {"command.exit_code", "its exit status once it has ended, else null"},
    {"command.signal", "the signal that ended it, else null"},
    {"command.duration_ms", "how long it has run"},
    {"process", "the background process, when id named one"},
    {"stdout",
     "the part of stdout asked for (invalid UTF-8 replaced by U+FFFD), within the budget, with a marker line where "
     "bytes were left out"},
    {"stderr", "the part of stderr asked for, as stdout"},
    {"stdout_base64", "stdout's exact bytes in base64 when they are not UTF-8 and were kept whole, else null"},
    {"stderr_base64", "stderr's exact bytes in base64 when they are not UTF-8 and were kept whole, else null"},
    {"stdout_truncated", "part of the stdout asked for was left out (at the marker)"},
    {"stderr_truncated", "part of the stderr asked for was left out"},
    {"stdout_omitted_bytes", "bytes of stdout left out"},
    {"stderr_omitted_bytes", "bytes of stderr left out"},
    {"stdout_omitted_from", "the offset of the first stdout byte left out"},
    {"stderr_omitted_from", "the offset of the first stderr byte left out"},
    {"stdout_offset", "the offset of the first stdout byte given (after the marker when the start was left out)"},
    {"stderr_offset", "the offset of the first stderr byte given"},
    {"stdout_bytes", "bytes of stdout so far: the stdout_offset that reads only what comes next"},
    {"stderr_bytes", "bytes of stderr so far"},
};
json logs_output() { return with_docs(client::json_schema_of<logs_result>(kLogsDocs), "process", kProcDocs); }
json list_files_output() {
  json entries = json(client::json_schema_of<file_entry>(kEntryDocs));
  return {{"type", "object"},
          {"required", {"entries"}},
          {"properties", {{"entries", list_of(entries, "the entries, by path")}}}};
}

// The budget of a call's result (max_output_chars), less what its status line, headers, notes
// and markers may take.
size_t output_budget(size_t budget) { return budget > 2 * kBudgetReserve ? budget - kBudgetReserve : budget / 2; }

// What a stream of a result gives: the piece kept, with its marker, and where it lies.
stream_part cut_stream(const char* name, const kept_stream& k, const kept_stream::piece& p, const json& id) {
  stream_part s;
  std::string text = with_marker(p, cut_marker(name, p, id, k.end()));
  bool valid = true;
  s.text = client::utf8_repair(text, &valid);
  bool raw_valid = valid || ipc::valid_utf8(p.bytes);
  if (!raw_valid && p.omitted == 0) s.base64 = client::base64(p.bytes);
  s.truncated = p.omitted > 0;
  s.omitted_bytes = p.omitted;
  s.omitted_from = p.omitted_from;
  s.offset = k.skip();
  s.bytes = k.end();
  return s;
}

// A command's result: exec --json's record with its output cut to the budget (the streams'
// keys as process_logs gives them), and its plain text; a failure is isError, a command still
// running not.
tool_outcome command_result(const client::exec_result& r, std::string_view session, std::string_view command,
                            const kept_stream& out, const kept_stream& err, size_t budget) {
  client::json_value record;
  client::add_exec_result(record, session, short_command(command), r);
  json j(record);
  json id = r.command_id != 0 ? json(client::command_ref(r.command_id)) : json(nullptr);
  auto [out_share, err_share] = share_budget(budget, out.size(), err.size());
  logs_result streams;
  streams.out = cut_stream("stdout", out, out.cut(out_share, kept_stream::keep::head_and_tail), id);
  streams.err = cut_stream("stderr", err, err.cut(err_share, kept_stream::keep::head_and_tail), id);
  client::json_value keys = client::json_form_of(streams);
  for (auto& [key, value] : keys.items()) j[key] = json(value);
  std::string text = render_command(j);
  return {std::move(j), !r.running && !r.ok(), {}, std::move(text)};
}

// sbshd's messages name CLI commands ('sbsh session ls'); a model here has the tools: each
// such quoted command becomes the tool call that does the same, when there is one.
std::string tool_words(std::string_view cli) {
  auto words = [](std::string_view t) {
    std::vector<std::string> v;
    size_t i = 0;
    while (i < t.size()) {
      size_t j = t.find(' ', i);
      if (j == std::string_view::npos) j = t.size();
      if (j > i) v.emplace_back(t.substr(i, j - i));
      i = j + 1;
    }
    return v;
  };
  auto w = words(cli);
  auto named = [&](const char* tool, const char* key) {
    return w.size() >= 3 && w[2].find_first_of("<>") == std::string::npos && w[2] != "NAME"
               ? fmt::format("{} {}", tool, json{{key, w[2]}}.dump())
               : std::string(tool);
  };
  if (w.size() >= 2 && w[0] == "session") {
    if (w[1] == "ls") return "list_sessions";
    if (w[1] == "create") return "create_session with name and root";
    if (w[1] == "restart") return named("restart_session", "name");
    if (w[1] == "rm") return named("remove_session", "name");
    if (w[1] == "show") return "create_session's definition";
  }
  if (w.size() >= 2 && w[0] == "file" && w[1] == "ls") return "list_files";
  if (!w.empty() && w[0] == "ps") return "list_processes {\"all\": true}";
  if (!w.empty() && w[0] == "logs") return "process_logs";
  if (w.size() >= 2 && w[0] == "wait" && w[1].starts_with('%')) return "await_command";
  if (w.size() >= 2 && w[0] == "kill" && w[1].starts_with('%')) return "cancel_command";
  if (w.size() >= 2 && w[0] == "kill") return fmt::format("kill_process {}", json{{"id", w[1]}}.dump());
  return {};
}

std::string in_tool_terms(std::string_view text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    size_t at = text.find("'sbsh ", i);
    size_t end = at == std::string_view::npos ? at : text.find('\'', at + 6);
    if (end == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    std::string tool = tool_words(text.substr(at + 6, end - at - 6));
    std::string before(text.substr(i, at - i));
    if (!tool.empty() && before.ends_with("run ")) before.replace(before.size() - 4, 4, "call ");
    out += before;
    out += tool.empty() ? std::string(text.substr(at, end + 1 - at)) : tool;
    i = end + 1;
  }
  return out;
}

tool_outcome refused(const error& e) {
  tool_outcome o;
  o.is_error = true;
  if (e.code == ipc::wire_name(ipc::errc::no_root)) {
    // Its own words: a snapshot, which the message offers too, is the CLI's only.
    std::string_view m = e.message;
    o.message = fmt::format(
        "sbsh: {}: the file tools reach only beneath a session's root; create_session with name "
        "and root makes such a session, and run_command reads and writes files in any session "
        "({})",
        m.substr(0, m.find(':')), e.code);
    return o;
  }
  o.message = fmt::format("sbsh: {} ({})", in_tool_terms(e.message), e.code);
  return o;
}

std::vector<std::string> assignments(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::chrono::milliseconds seconds_arg(const std::optional<double>& seconds, std::chrono::milliseconds fallback) {
  if (!seconds) return fallback;
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(*seconds * 1000)));
}

std::chrono::milliseconds wait_arg(const std::optional<double>& wait_seconds, const tool_context& ctx) {
  return wait_limit(wait_seconds, ctx.has_progress);
}

// "signal": a name (TERM, SIGKILL, hup) or a number.
result<int> signal_arg(const std::string& name) {
  if (auto sig = ipc::signal_from_name(name)) return *sig;
  return make_error(ipc::errc::usage, fmt::format("unknown signal '{}'; use TERM, KILL, INT, HUP or a number", name));
}

std::string id_arg(const process_id& id) {
  if (const auto* text = std::get_if<std::string>(&id)) return *text;
  return std::to_string(std::get<int64_t>(id));
}
json id_json(const process_id& id) {
  if (const auto* text = std::get_if<std::string>(&id)) return *text;
  return std::get<int64_t>(id);
}

// Holds a connection for the duration of a call, made through the context.
result<client::connection> open(tool_context& ctx) { return ctx.connect(); }

// What sbshd says of a command still running lacks its shell's generation (the start of
// its run says it), so each server remembers it, for the commands it started; and a
// running command's duration is the time since it started.
std::mutex generations_lock;
std::map<uint64_t, uint64_t> generations;  // command id -> generation, the newest kept
constexpr size_t kGenerationsKept = 4096;

void remember_generation(uint64_t command_id, uint64_t generation) {
  std::lock_guard lock(generations_lock);
  generations[command_id] = generation;
  if (generations.size() > kGenerationsKept) generations.erase(generations.begin());
}

void running_facts(client::exec_result& r) {
  // sbshd says which shell runs a kept command; a detached exec's own result does not.
  if (r.generation == 0) {
    std::lock_guard lock(generations_lock);
    if (auto it = generations.find(r.command_id); it != generations.end()) r.generation = it->second;
  }
  if (r.started_at_ms > 0) {
    int64_t now =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    r.duration_us = static_cast<uint64_t>(std::max<int64_t>(now - r.started_at_ms, 0)) * 1000;
  }
}

tool_outcome run_command(const run_args& a, tool_context& ctx) {
  client::exec_options o;
  o.command = a.command;
  o.session = a.session;
  o.cwd = a.cwd;
  o.env = assignments(a.env);
  o.timeout = seconds_arg(a.timeout_seconds, 0ms);
  o.stdin_data = a.stdin_text;
  o.signal_fd = ctx.cancel_fd;
  o.tty = a.tty;
  o.interactive = a.tty || a.interactive;
  // A command still running after wait_seconds goes on, kept by sbshd as %ID: the call
  // answers in time for hosts that give up after a minute, and await_command takes it up.
  o.detach_after = wait_arg(a.wait_seconds, ctx);
  o.keep = true;
  // Output is collected here, its first and last part within the budget (the whole stays
  // with sbshd, for process_logs), and its size watched, for progress.
  size_t budget = output_budget(a.max_output_chars);
  kept_stream out(budget, 0), err(budget, 0);
  o.on_output = [&](client::stream s, std::string_view d) {
    (s == client::stream::out ? out : err).add(d);
    if (ctx.output_seen) ctx.output_seen(d.size());
  };
  client::exec_start started;
  o.on_started = [&](const client::exec_start& s) {
    started = s;
    remember_generation(s.command_id, s.generation);
  };
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  auto r = conn->exec(o);
  if (!r) return refused(r.err());
  if (r->running) {
    r->started_at_ms = started.started_at_ms;
    running_facts(*r);
  }
  return command_result(*r, o.session, o.command, out, err, budget);
}

// A command's id, as the schema's pattern has let it through.
uint64_t command_id_of(const std::string& id) { return client::parse_command_ref(id).value(); }

// A kept command's result with its output from the offsets asked for, within the budget.
tool_outcome kept_result(client::connection& conn, uint64_t id, client::exec_result ended, uint64_t stdout_offset,
                         uint64_t stderr_offset, size_t max_output_chars) {
  if (ended.running) running_facts(ended);
  size_t budget = output_budget(max_output_chars);
  // sbshd sends only what follows the offsets.
  client::logs_options o;
  o.stdout_offset = stdout_offset;
  o.stderr_offset = stderr_offset;
  kept_stream out(budget, o.stdout_offset, o.stdout_offset), err(budget, o.stderr_offset, o.stderr_offset);
  auto logs = conn.command_logs(id, o, [&](client::stream s, std::string_view d) {
    (s == client::stream::out ? out : err).add(d);
  });
  if (!logs) return refused(logs.err());
  return command_result(ended, ended.session, ended.command, out, err, budget);
}

tool_outcome await_command(const await_args& a, tool_context& ctx) {
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  uint64_t id = command_id_of(a.id);
  ctx.blocking_on(conn->fd());
  // Its state (output is read after, from the offsets asked for).
  auto r = conn->await_command(id, wait_arg(a.wait_seconds, ctx), 1);
  ctx.blocking_on(-1);
  if (!r) return refused(r.err());
  return kept_result(*conn, id, *r, a.stdout_offset, a.stderr_offset, a.max_output_chars);
}

// Input for a command that waits for it, then its answer: what it wrote after the input.
tool_outcome send_input(const input_args& a, tool_context& ctx) {
  uint64_t id = command_id_of(a.id);
  std::string data = a.text.value_or("");
  if (a.enter && a.text) data += '\r';
  for (const auto& k : a.keys) {
    auto bytes = client::key_bytes(k);
    if (!bytes)
      return refused(make_error(ipc::errc::usage,
                                fmt::format("argument 'keys' has '{}', not a key: give Enter, Tab, Esc, Up, Down, "
                                            "Left, Right, Home, End, Backspace, Delete, PageUp, PageDown, Space or "
                                            "C-a ... C-z",
                                            k)));
    data += *bytes;
  }
  client::input_options o;
  o.typed = true;
  o.eof = a.eof;
  o.timeout = wait_arg(a.wait_seconds, ctx);
  o.output_limit = output_budget(a.max_output_chars);
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  ctx.blocking_on(conn->fd());
  auto r = conn->send_input(id, data, o);
  ctx.blocking_on(-1);
  if (!r) return refused(r.err());
  if (r->running) running_facts(*r);
  kept_stream out(o.output_limit, 0), err(o.output_limit, 0);
  out.add(r->stdout_data);
  err.add(r->stderr_data);
  return command_result(*r, r->session, r->command, out, err, o.output_limit);
}

tool_outcome cancel_command(const cancel_args& a, tool_context& ctx) {
  auto sig = signal_arg(a.signal);
  if (!sig) return refused(sig.err());
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  uint64_t id = command_id_of(a.id);
  ctx.blocking_on(conn->fd());
  auto killed = conn->kill_command(id, *sig);
  ctx.blocking_on(-1);
  if (!killed) return refused(killed.err());
  // Its result with what it wrote, as await_command gives it.
  auto r = conn->await_command(id, 0ms, 1);
  if (!r) return refused(r.err());
  return kept_result(*conn, id, *r, 0, 0, a.max_output_chars);
}

tool_outcome list_sessions(const no_args&, tool_context& ctx) {
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  auto v = conn->sessions();
  if (!v) return refused(v.err());
  return {json{{"sessions", json(client::json_of(*v))}}, false, {}, {}};
}

result<client::session_status> listed_session(client::connection& conn, const std::string& name) {
  auto v = conn.sessions();
  if (!v) return v.err();
  for (auto& s : *v)
    if (s.name == name) return std::move(s);
  return error{"no_such_session", fmt::format("session '{}' is not listed", name)};
}
tool_outcome session_result(client::connection& conn, const std::string& name) {
  auto s = listed_session(conn, name);
  if (!s) return refused(s.err());
  return {json{{"session", json(client::json_of(*s))}}, false, {}, {}};
}

tool_outcome create_session(const create_args& a, tool_context& ctx) {
  client::session_spec spec;
  spec.name = a.name;
  spec.cwd = a.cwd;
  spec.root = a.root;
  spec.env = assignments(a.env);
  spec.init = a.init;
  spec.restart = a.restart.value_or(spec.restart);
  spec.timeout_ms = static_cast<uint64_t>(seconds_arg(a.timeout_seconds, 0ms).count());
  spec.setup = a.setup;
  spec.setup_keys = a.setup_keys;
  spec.confine = a.confine;
  spec.no_network = a.no_network;
  if (spec.confine && spec.root.empty())
    return refused(make_error(ipc::errc::usage, "confine confines the session to its root: give root too"));
  for (auto [key, from, list] : {std::tuple{"allow_write", &a.allow_write, &spec.allow_write},
                                 std::tuple{"allow_read", &a.allow_read, &spec.allow_read},
                                 std::tuple{"read_only", &a.read_only, &spec.read_only}}) {
    *list = *from;
    if (!list->empty() && !spec.confine)
      return refused(make_error(ipc::errc::usage,
                                fmt::format("{} adds to a confined session's rules: give confine: true too", key)));
  }
  if (a.memory) {
    const auto* text = std::get_if<std::string>(&*a.memory);
    auto m = text != nullptr ? client::parse_memory(*text) : result<uint64_t>(std::get<uint64_t>(*a.memory));
    if (!m) return refused(m.err());
    spec.memory_max = *m;
  }
  if (a.pids) spec.pids_max = *a.pids;
  if (a.cpu) spec.cpu_millis = static_cast<uint64_t>(std::llround(*a.cpu * 1000));
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  // A setup that runs for this call is shown: the end of each stream, where its errors are.
  constexpr size_t kSetupTail = size_t{16} * 1024;
  bool ran = false;
  std::string setup_out[2];
  auto take = [&](client::stream st, std::string_view data) {
    ran = true;
    std::string& to = setup_out[st == client::stream::out ? 0 : 1];
    to.append(data);
    if (to.size() > 2 * kSetupTail) to.erase(0, to.size() - kSetupTail);
  };
  if (auto s = conn->create_session(spec, take); !s) return refused(s.err());
  session_created c;
  auto listed = listed_session(*conn, spec.name);
  if (!listed) return refused(listed.err());
  c.session = std::move(*listed);
  if (ran) {
    for (auto [text, to] : {std::pair{&setup_out[0], &c.setup_stdout}, std::pair{&setup_out[1], &c.setup_stderr}}) {
      if (text->size() > kSetupTail) text->erase(0, text->size() - kSetupTail);
      *to = client::utf8_repair(*text, nullptr);
    }
  }
  // What the kernel confines it to, read back from sbshd.
  if (auto d = conn->show_session(spec.name)) c.definition = std::move(d->definition);
  return {json(client::json_form_of(c)), false, {}, {}};
}

tool_outcome remove_session(const name_args& a, tool_context& ctx) {
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  if (auto s = conn->remove_session(a.name); !s) return refused(s.err());
  return {json(client::json_form_of(session_removed{a.name})), false, {}, {}};
}

tool_outcome restart_session(const name_args& a, tool_context& ctx) {
  const std::string& name = a.name;
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  if (auto s = conn->restart_session(name); !s) return refused(s.err());
  return session_result(*conn, name);
}

tool_outcome proc_result(const result<client::proc_info>& p, bool failed = false) {
  if (!p) return refused(p.err());
  return {json(client::json_of(p.value())), failed, {}, {}};
}

tool_outcome start_process(const start_args& a, tool_context& ctx) {
  client::start_options o;
  o.command = a.command;
  o.session = a.session;
  o.name = a.name;
  o.cwd = a.cwd;
  o.env = assignments(a.env);
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  return proc_result(conn->start(o));
}

tool_outcome list_processes(const list_procs_args& a, tool_context& ctx) {
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  bool all = a.all;
  auto v = conn->processes(all);
  if (!v) return refused(v.err());
  auto cmds = conn->commands(all);
  if (!cmds) return refused(cmds.err());
  return {json{{"processes", json(client::json_of(*v))}, {"commands", json(client::json_of(*cmds))}}, false, {}, {}};
}

tool_outcome kill_process(const kill_args& a, tool_context& ctx) {
  auto sig = signal_arg(a.signal);
  if (!sig) return refused(sig.err());
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  ctx.blocking_on(conn->fd());
  auto p = conn->kill(id_arg(a.id), *sig);
  ctx.blocking_on(-1);
  return proc_result(p);
}

tool_outcome wait_process(const wait_args& a, tool_context& ctx) {
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  ctx.blocking_on(conn->fd());
  auto p = conn->wait(id_arg(a.id), seconds_arg(a.timeout_seconds, 30s));
  ctx.blocking_on(-1);
  return proc_result(p, p && (p->exit_code.value_or(0) != 0 || p->signal));
}

// A command's state in process_logs: what its result says, without the output.
command_state state_of(const client::exec_result& r, uint64_t id) {
  return {id, r.session, short_command(r.command), r.running, r.exit_code, r.signal, r.duration_us / 1000};
}

tool_outcome process_logs(const logs_args& a, tool_context& ctx) {
  bool want_out = a.stream != "stderr", want_err = a.stream != "stdout";
  bool has_tail = a.tail.has_value();
  if (has_tail && (a.stdout_offset || a.stderr_offset))
    return refused(make_error(ipc::errc::usage,
                              "process_logs takes tail (lines) or stdout_offset/stderr_offset (bytes), not both"));
  // From an offset: what follows it, as much as the budget holds. Else the newest output.
  size_t budget = output_budget(a.max_output_chars);
  uint64_t out_from = a.stdout_offset.value_or(0), err_from = a.stderr_offset.value_or(0);
  kept_stream out(budget, out_from), err(budget, err_from);
  auto sink = [&](client::stream s, std::string_view d) { (s == client::stream::out ? out : err).add(d); };
  logs_result l;
  json id = id_json(a.id);
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  if (auto cid = id.is_string() ? client::parse_command_ref(id.get<std::string>()) : std::nullopt) {
    if (has_tail)
      return refused(make_error(
          ipc::errc::usage,
          "tail is for background processes; a command's output is read by stdout_offset and stderr_offset"));
    // A command's: sbshd sends only what follows the offsets.
    client::logs_options o;
    o.out = want_out;
    o.err = want_err;
    o.stdout_offset = out_from;
    o.stderr_offset = err_from;
    out = kept_stream(budget, out_from, out_from);
    err = kept_stream(budget, err_from, err_from);
    auto r = conn->command_logs(*cid, o, sink);
    if (!r) return refused(r.err());
    l.command = state_of(*r, *cid);
  } else {
    client::logs_options o;
    if (has_tail) o.tail = *a.tail;
    o.out = want_out;
    o.err = want_err;
    o.cancel_fd = ctx.cancel_fd;
    auto p = conn->logs(id_arg(a.id), o, sink);
    if (!p) return refused(p.err());
    l.process = std::move(*p);
  }
  auto [out_share, err_share] = share_budget(budget, out.size(), err.size());
  auto keep = [](const std::optional<uint64_t>& offset) {
    return offset ? kept_stream::keep::head : kept_stream::keep::tail;
  };
  auto out_piece = out.cut(out_share, keep(a.stdout_offset)), err_piece = err.cut(err_share, keep(a.stderr_offset));
  l.out = cut_stream("stdout", out, out_piece, id);
  l.err = cut_stream("stderr", err, err_piece, id);
  // Where the bytes given start: after the part left out when the newest were kept.
  if (out_piece.omitted > 0 && out_piece.head == 0) l.out.offset = out.skip() + out_piece.omitted;
  if (err_piece.omitted > 0 && err_piece.head == 0) l.err.offset = err.skip() + err_piece.omitted;
  json j(client::json_form_of(l));
  std::string text = render_logs(j);
  return {std::move(j), false, {}, std::move(text)};
}

// The file tools are the library's file operations (client/file_ops.cpp); in a session
// without a root they act as its shell would (as_shell), since a model's sessions seldom
// have one.
tool_outcome edit_file(const edit_file_args& a, tool_context& ctx) {
  const std::string& path = a.path;
  client::file_edit_options o;
  o.replace_all = a.replace_all;
  o.as_shell = true;
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  auto r = conn->edit_file(a.session, path, a.old_string, a.new_string, o);
  if (!r) {
    error e = r.err();
    if (e.code == "no_match") e.message += " (old_string; read_file shows the file's text)";
    if (e.code == "not_unique") e.message += " (old_string; replace_all: true replaces every one)";
    if (e.code == ipc::wire_name(ipc::errc::usage)) e.message = "arguments 'old_string', 'new_string': " + e.message;
    return refused(e);
  }
  std::string text =
      fmt::format("{}: replaced {} occurrence{} of old_string, the first at line {}; the file has {} bytes\n", path,
                  r->replacements, r->replacements == 1 ? "" : "s", r->first_line, r->bytes);
  return {json(client::json_of(path, *r)), false, {}, std::move(text)};
}

// read_file by lines: the lines asked for, within the budget, stopping at a whole line.
tool_outcome read_lines(const read_file_args& a, tool_context& ctx) {
  const std::string& path = a.path;
  client::file_lines_options o;
  o.line = *a.line;  // read_file comes here with line
  if (a.lines) o.count = *a.lines;
  o.max_bytes = a.max_output_chars.value_or(kDefaultBudget);
  o.as_shell = true;
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  auto r = conn->read_lines(a.session, path, o);
  if (!r && r.err().code == ipc::wire_name(ipc::errc::usage))
    return refused(make_error(ipc::errc::usage, "argument 'line': " + r.err().message));
  if (!r) return refused(r.err());
  json j(client::json_of(path, *r));
  std::string text = fmt::format("{}: lines {} to {} of {}{}\n", path, r->start_line, r->end_line, r->total_lines,
                                 r->truncated ? fmt::format("; read_file {} reads on",
                                                            json{{"path", path}, {"line", r->end_line + 1}}.dump())
                                              : "");
  text += j["encoding"] == "utf-8" ? r->content : "(not UTF-8: content has the bytes in base64)\n";
  return {std::move(j), false, {}, std::move(text)};
}

tool_outcome read_file(const read_file_args& a, tool_context& ctx) {
  if (a.line) return read_lines(a, ctx);
  if (a.lines || a.max_output_chars)
    return refused(
        make_error(ipc::errc::usage, "lines and max_output_chars go with line; offset and length read bytes"));
  // One byte more than asked for says whether the file goes on.
  uint64_t want = a.length;
  const std::string& path = a.path;
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  auto read = client::read_bytes(*conn, a.session, path, a.offset, want + 1, true);
  if (!read) return refused(read.err());
  std::string bytes = std::move(*read);
  bool truncated = bytes.size() > want;
  if (truncated) bytes.resize(want);
  // The form of a read by lines, without the line numbers.
  client::file_lines l;
  l.content = std::move(bytes);
  l.truncated = truncated;
  json j(client::json_of(path, l));
  for (const char* k : {"start_line", "end_line", "total_lines"}) j.erase(k);
  return {std::move(j), false, {}, {}};
}

tool_outcome write_file(const write_file_args& a, tool_context& ctx) {
  const std::string& path = a.path;
  std::string content = a.content;
  if (a.encoding == "base64") {
    auto raw = client::unbase64(content);
    if (!raw) return refused(error{"invalid_argument", "argument 'content' is not base64, as encoding says"});
    content = std::move(*raw);
  }
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  auto n = client::write_bytes(*conn, a.session, path, content, a.mode, true);
  if (!n) return refused(n.err());
  return {json(client::json_of(path, client::file_written{*n})), false, {}, {}};
}

tool_outcome list_files(const list_files_args& a, tool_context& ctx) {
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  client::file_list_options o;
  o.recursive = a.recursive;
  o.depth = a.depth;
  o.as_shell = true;
  auto v = conn->list_files(a.session, a.path, o);
  if (!v) return refused(v.err());
  return {json{{"entries", json(client::json_of(*v))}}, false, {}, {}};
}

tool_outcome search_files(const search_args& a, tool_context& ctx) {
  client::file_search_options o;
  o.path = a.path;
  o.glob = a.glob;
  o.ignore_case = a.ignore_case;
  o.max_bytes = a.max_output_chars;
  o.max_line = 400;
  o.as_shell = true;
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  auto r = conn->search_files(a.session, a.pattern, o);
  if (!r && r.err().code == ipc::wire_name(ipc::errc::usage))
    return refused(make_error(ipc::errc::usage, "argument 'pattern': " + r.err().message));
  if (!r) return refused(r.err());
  json j(client::json_of(*r));
  std::string text;
  for (const auto& m : j["matches"])
    text += fmt::format("{}:{}: {}\n", m["path"].get<std::string>(), m["line"].get<uint64_t>(),
                        m["text"].get<std::string>());
  if (text.empty()) text = fmt::format("no line matches (in {} files)\n", r->files_searched);
  if (r->truncated) text += "[sbsh: more lines match than the budget holds; narrow pattern, path or glob]\n";
  return {std::move(j), false, {}, std::move(text)};
}

// A tool's entry points from its handler, whose first parameter is its arguments' struct
// (tool_args.h): the input schema derived from that struct's table, and a run that parses
// the arguments (already checked against that schema) into it.
template <typename F>
struct handler_of;
template <typename A>
struct handler_of<tool_outcome (*)(const A&, tool_context&)> {
  using args = A;
};
template <auto F>
const json& input_of() {
  return input_schema_of<typename handler_of<decltype(F)>::args>();
}
template <auto F>
tool_outcome typed(const json& args, tool_context& ctx) {
  return F(parse_arguments<typename handler_of<decltype(F)>::args>(args), ctx);
}

constexpr tool kTools[] = {
    {"run_command",
     "Run shell text in a persistent bash session. The session keeps its state between calls (directory, "
     "variables, functions, aliases, options), as an interactive shell would. Returns the exact exit code, stdout "
     "and stderr, and whether it timed out. Output past max_output_chars (default 30000) keeps its head and tail, "
     "with a marker line at the cut naming the bytes left out and the process_logs call that reads them. `exit` "
     "(or exec, or a crash) ends the session's shell: that result has shell_restarted: true, and the next "
     "command runs in a new shell without the old state (directory, variables; its generation differs). A "
     "result with state_lost: true ran in a new shell for another reason (the shell was killed or restarted "
     "between two commands); state_lost_reason says which. A command still running "
     "after wait_seconds (default 30) goes on in the session: the result then has running: true, its id and the "
     "output so far; await_command gives what follows, cancel_command stops it. Processes it starts in the "
     "background (cmd &) outlive the call, and this server too. A command that fails is reported with isError.",
     input_of<run_command>, typed<run_command>, exec_output},
    {"list_sessions", "List sbsh's sessions: name, state, shell pid, directory, running command.",
     input_of<list_sessions>, typed<list_sessions>, sessions_output},
    {"create_session",
     "Define a session: its starting directory, environment, init commands, restart policy and default timeout, "
     "and what confines it: confine (with root) lets its commands reach only the root, a private TMPDIR and the "
     "system's programs, no_network gives it only loopback, memory, pids and cpu limit it. Sessions are also made "
     "on first use by run_command.",
     input_of<create_session>, typed<create_session>, created_output},
    {"remove_session", "Remove a session: its shell and everything it started end.", input_of<remove_session>,
     typed<remove_session>, removed_output},
    {"restart_session", "Replace a session's shell with a new one (its state is lost; background processes stay).",
     input_of<restart_session>, typed<restart_session>, session_output},
    {"start_process",
     "Start a long-running background process (a server, a watcher) from a session's state. Its output goes to "
     "logs (process_logs); it outlives this call. Returns the process record with its id.",
     input_of<start_process>, typed<start_process>, proc_output},
    {"list_processes",
     "List background processes and the commands run_command left running (running ones; all: finished ones "
     "too).",
     input_of<list_processes>, typed<list_processes>, procs_output},
    {"kill_process", "Signal a background process's whole tree; with TERM or KILL, returns once it has ended.",
     input_of<kill_process>, typed<kill_process>, proc_output},
    {"wait_process",
     "Wait for a background process to end (at most timeout_seconds, default 30) and return its exit status.",
     input_of<wait_process>, typed<wait_process>, proc_output},
    {"process_logs",
     "Read the output of a background process (by its id or name) or of a command (by its id, %N): by default "
     "the newest, as much as max_output_chars (default 30000) holds, starting at a line; from stdout_offset or "
     "stderr_offset (as a cut's marker names them), what follows that byte. stdout_bytes and stderr_bytes say "
     "where the output ends so far.",
     input_of<process_logs>, typed<process_logs>, logs_output},
    {"await_command",
     "Wait for a command that run_command left running (by its id, %N) and return its result with its output, or, "
     "after wait_seconds (default 30), running: true with the output so far. Give stdout_offset and stderr_offset "
     "(the stdout_bytes and stderr_bytes of the previous result) to get only what is new.",
     input_of<await_command>, typed<await_command>, exec_output},
    {"cancel_command",
     "Stop a command that run_command left running, as a timeout does (TERM, then KILL after 2 s; the session "
     "keeps its state), and return its result.",
     input_of<cancel_command>, typed<cancel_command>, exec_output},
    {"send_input",
     "Answer a command that waits for input (run_command with tty or interactive returned waiting_for_input and "
     "its prompt): text is typed, then Enter (unless enter is false), then each of keys; then waits, at most "
     "wait_seconds (default 30), until it ends or waits for input again, and returns its state with only the "
     "output it wrote after the input. The session's other commands wait in its queue meanwhile.",
     input_of<send_input>, typed<send_input>, exec_output},
    {"read_file",
     "Read a file beneath the session's root (create_session's root): with line, its lines from that one (1 the "
     "first; negative from the end, -20 the last 20) as many as lines or max_output_chars allow, with the line "
     "numbers; else at most 1 MiB of bytes from offset. truncated says whether it goes on. UTF-8 text, or base64 "
     "when the bytes are not UTF-8. Paths leading outside the root are refused.",
     input_of<read_file>, typed<read_file>, read_file_output},
    {"write_file",
     "Write a file beneath the session's root, whole or not at all (missing directories are made; an existing "
     "file keeps its mode). content is UTF-8 text, or base64 with encoding base64.",
     input_of<write_file>, typed<write_file>, write_file_output},
    {"list_files",
     "List a directory beneath the session's root (recursive: all beneath it; depth: that many levels), with "
     "types and sizes.",
     input_of<list_files>, typed<list_files>, list_files_output},
    {"edit_file",
     "Replace text in a file beneath the session's root: old_string, exactly as in the file (whitespace and "
     "indentation included), becomes new_string. old_string must occur exactly once, else nothing changes and "
     "the error says how many times it occurs; replace_all replaces every occurrence. The file keeps its mode.",
     input_of<edit_file>, typed<edit_file>, edit_file_output},
    {"search_files",
     "Search the files beneath the session's root (or path beneath it) for lines matching a POSIX extended "
     "regular expression: each match as path, line number and text, within max_output_chars (default 30000). "
     "Leaves out what a snapshot leaves out by default (.git, node_modules, .venv, __pycache__ and the like), "
     "files that are not text, and files of more than 16 MiB; glob keeps only files whose name matches.",
     input_of<search_files>, typed<search_files>, search_output},
};

// Each tool's title and annotations (hints to a host: what may be run without asking).
enum hint : unsigned { kReadOnly = 1, kDestructive = 2, kIdempotent = 4, kFileTool = 8 };
// What every file tool's description ends with.
constexpr std::string_view kFilesWithoutRoot =
    " In a session without a root, it acts as the session's shell would: paths from its current directory, with "
    "its user's rights (after the command it runs, if one does).";
struct tool_meta {
  std::string_view name, title;
  unsigned hints;
};
constexpr tool_meta kMeta[] = {
    {"run_command", "Run a shell command", kDestructive},
    {"list_sessions", "List sessions", kReadOnly},
    {"create_session", "Create a session", 0},
    {"remove_session", "Remove a session", kDestructive | kIdempotent},
    {"restart_session", "Restart a session's shell", kDestructive},
    {"start_process", "Start a background process", 0},
    {"list_processes", "List background processes", kReadOnly},
    {"kill_process", "Signal a background process", kDestructive | kIdempotent},
    {"wait_process", "Wait for a background process", kReadOnly},
    {"process_logs", "Read output", kReadOnly},
    {"await_command", "Await a running command", kReadOnly},
    {"cancel_command", "Cancel a running command", kDestructive | kIdempotent},
    {"send_input", "Answer a waiting command", 0},
    {"read_file", "Read a file", kReadOnly | kFileTool},
    {"write_file", "Write a file", kDestructive | kIdempotent | kFileTool},
    {"list_files", "List files", kReadOnly | kFileTool},
    {"edit_file", "Edit a file", kDestructive | kFileTool},
    {"search_files", "Search files", kReadOnly | kFileTool},
};
constexpr bool meta_in_order() {
  if (std::size(kMeta) != std::size(kTools)) return false;
  for (size_t i = 0; i < std::size(kMeta); ++i)
    if (kMeta[i].name != kTools[i].name) return false;
  return true;
}
static_assert(meta_in_order(), "kMeta lists the tools of kTools, in its order");

json annotations_of(const tool_meta& m) {
  json a = {{"title", m.title}, {"readOnlyHint", (m.hints & kReadOnly) != 0}};
  if ((m.hints & kReadOnly) == 0) {
    a["destructiveHint"] = (m.hints & kDestructive) != 0;
    a["idempotentHint"] = (m.hints & kIdempotent) != 0;
  }
  return a;
}

// The output schemas, built once.
const std::vector<json>& output_schemas() {
  static const std::vector<json> all = [] {
    std::vector<json> v;
    for (const auto& t : kTools) v.push_back(t.output());
    return v;
  }();
  return all;
}

}  // namespace

std::span<const tool> tools() { return kTools; }

std::chrono::milliseconds wait_limit(const std::optional<double>& wait_seconds, bool has_progress) {
  auto wait = seconds_arg(wait_seconds, kDefaultWait);
  return has_progress ? wait : std::min(wait, kMaxSilentWait);
}

const tool* find_tool(std::string_view name) {
  for (const auto& t : kTools)
    if (t.name == name) return &t;
  return nullptr;
}

const json& tool_list() {
  static const json list = [] {
    json v = json::array();
    for (size_t i = 0; i < std::size(kTools); ++i) {
      json a = annotations_of(kMeta[i]);
      a.erase("title");  // given as the tool's own title (annotations.title before 2025-06-18)
      v.push_back({{"name", kTools[i].name},
                   {"title", kMeta[i].title},
                   {"description", std::string(kTools[i].description) +
                                       std::string((kMeta[i].hints & kFileTool) != 0 ? kFilesWithoutRoot : "")},
                   {"annotations", std::move(a)},
                   {"inputSchema", kTools[i].input()},
                   {"outputSchema", output_schemas()[i]}});
    }
    return v;
  }();
  return list;
}

std::string check_arguments(const tool& t, const json& args) { return check_value("", args, t.input()); }

}  // namespace sbsh::mcp
