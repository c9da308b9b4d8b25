// The sbsh command-line interface: global options, the subcommand table, shared helpers.
//
// Each subcommand is one file (cmd_*.cpp) with one function, declare_NAME, that declares its
// options and arguments on a command_line (command_line.h) and returns what runs it once
// they are parsed. commands.cpp lists them; main.cpp parses the global options, finds the
// subcommand, declares and parses only that one (sbsh starts for every command, so it builds
// no parser it does not use), and runs it.
#pragma once

#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/command_line.h"
#include "sbsh/client.h"

namespace sbsh::cli {

inline constexpr int kExitFailure = 255;  // sbsh itself failed (not the command)
inline constexpr int kExitTimeout = 124;
// exec --detach-after passed with the command still running: it goes on (sbsh wait %ID).
inline constexpr int kExitDetached = 254;
// A command that was stopped (cancelled) and still exited 0: it did not succeed.
inline constexpr int kExitCancelled = 130;

struct global_opts {
  std::string socket;
  bool autostart = true;
  std::string host;  // ssh://, podman://, docker://, kubectl://: sbshd over there (host_dial_command)
  std::string dial;  // a command line whose stdin and stdout reach `sbsh dial-stdio`
};

// Runs a subcommand with the values its declaration parsed; returns sbsh's exit status.
using runner = std::function<int(const global_opts&)>;

struct command {
  std::string_view name;
  std::string_view summary;  // one line, for `sbsh --help`
  runner (*declare)(command_line& cl);
};

std::span<const command> commands();
const command* find_command(std::string_view name);

// sbsh's own options, before the command (main.cpp).
struct root_args {
  global_opts g;
  bool no_autostart = false, version = false;
  std::vector<std::string> rest;  // the subcommand and its words
};
void declare_root(command_line& cl, root_args& a);

// The shells `sbsh completion` writes a script for, and the script for one of them, written
// from the declarations of sbsh's options and of every command (completion.cpp).
inline constexpr std::string_view kCompletionShells[] = {"bash", "zsh"};
std::string completion_script(std::string_view shell);

// -s, --session SESSION, as exec, start and attach take it.
void add_session_option(command_line& cl, std::string& into);
// The values of options that several subcommands take: a session's name (not empty: sbshd
// checks the rest, for every client) and NAME=VALUE.
std::string check_session_name(std::string_view option, const std::string& value);
std::string check_assignment(std::string_view option, const std::string& value);

// Shared by session ls and ps.
int list_sessions(const global_opts& g, bool json, bool with_processes, bool all);
// Shared by the listing commands.
std::string human_duration(uint64_t ms);
// A local file's bytes, exactly ("-": standard input), for `option` (named in errors); more
// than max_bytes is refused, saying what `holds` that much at most.
result<std::string> local_bytes(std::string_view option, const std::string& path, uint64_t max_bytes,
                                std::string_view holds);
std::string human_bytes(uint64_t n);
// Text from sbshd as it may be shown on a terminal: control characters escaped (\e, \n, \t,
// \x07, C1 controls and bidirectional marks as \u009b), and bytes that are not UTF-8 as
// \xNN; with keep_lines, newlines and tabs stay.
std::string displayable(std::string_view s, bool keep_lines);
// displayable on one line, at most `max` characters: the start, or the end (tail_of, for
// paths), with an ellipsis where it was cut.
std::string one_line(std::string_view s, size_t max);
std::string tail_of(std::string_view s, size_t max);
std::string plural(uint64_t n, std::string_view one, std::string_view many);  // "1 client", "2 clients"
void print_session_table(const std::vector<client::session_status>& v);
void print_proc_table(const std::vector<client::proc_info>& v);
// Kept commands (ps): %ID, session, pid, state, result, start, command.
void print_command_table(const std::vector<client::command_info>& v);

// From now on SIGINT, SIGTERM, SIGHUP and SIGQUIT are not fatal to sbsh: each becomes a byte
// on the returned descriptor, for exec_options::signal_fd: SIGINT and SIGQUIT are forwarded to
// the command (as ssh does), SIGTERM and SIGHUP stop it whole (SIGTERM, then SIGKILL). Calling it again reuses the
// same pipe.
int forward_signals_to_command();

// What exec and attach say on stderr about a result besides the command's own output: that
// the session's shell was replaced before it (warn_state_lost, before its output), and after
// it that the shell was lost, that the command did not run and why, or that it timed out.
void warn_state_lost(std::string_view session, const client::exec_result& r);
void explain_result(std::string_view session, std::chrono::milliseconds timeout, const client::exec_result& r);
// The exit status of exec (and of wait on a kept command) for a result.
int exec_exit_status(const client::exec_result& r);
// exec --json's object for a result, on stdout.
void print_exec_json(std::string_view session, std::string_view command, const client::exec_result& r);

// Prints "sbsh: MESSAGE" on stderr and returns kExitFailure. After
// report_failures_as(json), also one object {"error": MESSAGE, "code": CODE} on stdout (with
// "type": "error" first for jsonl), so that a program reading --json or --jsonl learns of
// sbsh's own failures there. CODE is the error's (sbsh-protocol(7) ERROR CODES, or the
// client's: "unreachable", "eof", "io", "protocol", "write_error"), "usage" for a command
// line that cannot run.
int fail(std::string_view message, std::string_view code = "usage");
int fail(const error& e);
enum class failure_format { text, json, jsonl };
void report_failures_as(failure_format f);

// A connection to sbshd, starting one when none answers (unless --no-autostart): every verb
// but shutdown, version and completion reads or changes what sbshd holds, and a daemon
// started now adopts the sessions an earlier one kept. shutdown alone says otherwise: it
// starts one only to end the sessions kept for adoption.
result<client::connection> connect(const global_opts& g, bool autostart = true);

// exec -f: the whole text of a script file ("-": stdin), checked to be one that sbshd takes
// as a command (at most kMaxFrame bytes, no NUL); the error names the option and the file.
result<std::string> read_script(const std::string& path);

}  // namespace sbsh::cli
