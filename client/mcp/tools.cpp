// The tool table: each tool's schemas and the handler that calls the client library. The
// JSON each returns is the CLI's --json record (client/json.h), parsed back, so the fields
// are written in one place.
#include "client/mcp/tools.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <regex>
#include <utility>

#include <fmt/format.h>

#include "client/head_tail.h"
#include "client/json.h"
#include "client/resources.h"
#include "ipc/protocol.h"
#include "ipc/text.h"

namespace sbsh::mcp {

namespace {

using namespace std::chrono_literals;

// Per stream, in a run_command result: an agent's context is the limit, not memory.
constexpr size_t kOutputLimit = 1u << 20;
// How long run_command and await_command wait before answering with a command still running.
constexpr auto kDefaultWait = std::chrono::milliseconds(30000);

// The schemas (JSON text), parsed once by parsed_schemas().
constexpr std::string_view kRunInput =
    R"J({"type": "object", "additionalProperties": false, "required": ["command"], "properties": {"command": {"type": "string", "minLength": 1, "description": "shell text, run at the top level of the session's bash, so cd, variables and functions persist"}, "session": {"type": "string", "maxLength": 64, "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", "description": "session name (default: default), created on first use"}, "cwd": {"type": "string", "minLength": 1, "description": "run in this directory, in a subshell: changes do not persist"}, "env": {"type": "object", "additionalProperties": {"type": "string"}, "propertyNames": {"pattern": "^[^=]+$"}, "description": "variables for this command only, in a subshell"}, "timeout_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 604800, "description": "stop the command and its whole process tree after this long (default: the session's timeout, else none)"}, "stdin": {"type": "string", "description": "bytes the command reads on stdin (default: none, as from /dev/null)"}, "wait_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600, "description": "answer after at most this long (default 30, below the minute after which hosts give up on a call): a command still running then goes on in the session, and the result has running: true and its id for await_command and cancel_command"}}})J";
// The fields of `sbsh exec --json` (client::add_exec_result).
constexpr std::string_view kExecOutput =
    R"J({"type": "object", "required": ["exit_code", "timed_out", "cancelled", "state_lost", "generation", "stdout", "stderr"], "properties": {"session": {"type": "string"}, "command": {"type": "string"}, "exit_code": {"type": ["integer", "null"]}, "signal": {"type": ["string", "null"]}, "timed_out": {"type": "boolean"}, "shell_restarted": {"type": "boolean"}, "cancelled": {"type": "boolean"}, "ran": {"type": "boolean"}, "generation": {"type": "integer"}, "state_lost": {"type": "boolean"}, "state_lost_reason": {"type": ["string", "null"]}, "oom_killed": {"type": "boolean", "description": "the kernel killed a process of the session's for memory meanwhile"}, "stdout": {"type": "string"}, "stderr": {"type": "string"}, "stdout_base64": {"type": ["string", "null"]}, "stderr_base64": {"type": ["string", "null"]}, "stdout_truncated": {"type": "boolean"}, "stderr_truncated": {"type": "boolean"}, "stdout_omitted_bytes": {"type": "integer", "description": "bytes left out between the first and the last part kept"}, "stderr_omitted_bytes": {"type": "integer"}, "id": {"type": ["string", "null"], "description": "the command's id (%N): await_command and cancel_command take it"}, "running": {"type": "boolean", "description": "it still runs: await_command for its result"}, "duration_ms": {"type": "integer"}, "started_at": {"type": ["string", "null"]}, "error": {"type": ["string", "null"]}}})J";
constexpr std::string_view kAwaitInput =
    R"J({"type": "object", "additionalProperties": false, "required": ["id"], "properties": {"id": {"type": "string", "pattern": "^%[1-9][0-9]{0,18}$", "description": "the command's id, as run_command returned it (%N)"}, "wait_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600, "description": "answer after at most this long (default 30) with the output so far, if it still runs"}}})J";
constexpr std::string_view kCancelInput =
    R"J({"type": "object", "additionalProperties": false, "required": ["id"], "properties": {"id": {"type": "string", "pattern": "^%[1-9][0-9]{0,18}$", "description": "the command's id, as run_command returned it (%N)"}, "signal": {"type": "string", "description": "the first signal (default TERM; KILL follows after 2 s)"}}})J";
constexpr std::string_view kNoInput = R"J({"type": "object", "additionalProperties": false, "properties": {}})J";
constexpr std::string_view kNameInput =
    R"J({"type": "object", "additionalProperties": false, "required": ["name"], "properties": {"name": {"type": "string", "maxLength": 64, "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", "description": "session name"}}})J";
constexpr std::string_view kSessionsOutput =
    R"J({"type": "object", "required": ["sessions"], "properties": {"sessions": {"type": "array", "items": {"type": "object"}}}})J";
constexpr std::string_view kSessionOutput =
    R"J({"type": "object", "required": ["session"], "properties": {"session": {"type": "object", "description": "the session as list_sessions gives it"}}})J";
// create_session's: the session, and its definition as session show --json gives it (the
// confinement in force under definition.confinement).
constexpr std::string_view kCreatedOutput =
    R"J({"type": "object", "required": ["session"], "properties": {"session": {"type": "object", "description": "the session as list_sessions gives it"}, "definition": {"type": "object", "description": "how its shells start and what confines them (confinement: landlock_abi, rules, namespaces, limits)"}, "setup_stdout": {"type": ["string", "null"], "description": "what the setup wrote on stdout when it ran for this call (its last 16 KiB), else null"}, "setup_stderr": {"type": ["string", "null"], "description": "what the setup wrote on stderr when it ran for this call (its last 16 KiB), else null"}}})J";
constexpr std::string_view kRemovedOutput =
    R"J({"type": "object", "required": ["removed"], "properties": {"removed": {"type": "string"}}})J";
constexpr std::string_view kCreateInput =
    R"J({"type": "object", "additionalProperties": false, "required": ["name"], "properties": {"name": {"type": "string", "maxLength": 64, "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", "description": "session name"}, "cwd": {"type": "string", "minLength": 1, "description": "directory its shells start in (default: the root if given, else the one sbsh mcp runs in; relative: from the root)"}, "root": {"type": "string", "minLength": 1, "description": "directory the session is confined to: the file tools reach only what is beneath it, and run_command's cwd must stay beneath it"}, "env": {"type": "object", "additionalProperties": {"type": "string"}, "propertyNames": {"pattern": "^[^=]+$"}, "description": "variables every shell of the session starts with"}, "init": {"type": "array", "items": {"type": "string"}, "description": "commands run in every new shell before any other"}, "restart": {"type": "string", "enum": ["always", "on-failure", "never"], "description": "when a shell that ended is replaced (default: always)"}, "timeout_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 604800, "description": "default timeout of a command that gives none"}, "setup": {"type": "string", "minLength": 1, "description": "bash that builds the session's environment once (a venv, node_modules) in the directory SBSH_ENV names; sessions with the same setup and key files share it, built once, and it is ready before this returns"}, "setup_keys": {"type": "array", "items": {"type": "string", "minLength": 1}, "description": "files or directories (relative to the session's directory) whose contents key the environment, such as requirements.txt, package-lock.json or wheels/ (a directory counts as its files' paths, executable bits and bytes, less node_modules, .git and what else a snapshot leaves out)"}, "confine": {"type": "boolean", "description": "with root: the kernel (Landlock) confines the session's shell and all it starts to reading and writing beneath the root and a private TMPDIR and reading and running the system's programs; reading anything else fails with Permission denied, and all it starts ends with the session"}, "allow_write": {"type": "array", "items": {"type": "string", "pattern": "^/", "description": "an absolute path"}, "description": "with confine: absolute paths it may also read and write beneath"}, "allow_read": {"type": "array", "items": {"type": "string", "pattern": "^/", "description": "an absolute path"}, "description": "with confine: absolute paths it may also read and run what is beneath"}, "read_only": {"type": "array", "items": {"type": "string", "pattern": "^/", "description": "an absolute path"}, "description": "with confine: absolute paths it may also read (not run) beneath"}, "no_network": {"type": "boolean", "description": "the session has a network of its own with only loopback"}, "memory": {"type": ["integer", "string"], "minimum": 1, "maximum": 1000000000000000000, "description": "memory limit of the session's processes together: bytes, or a size such as 512M or 2G (needs a cgroup v2 delegated to sbshd)"}, "pids": {"type": "integer", "minimum": 1, "maximum": 4194304, "description": "most processes the session may have at once (needs a delegated cgroup v2)"}, "cpu": {"type": "number", "minimum": 0.001, "maximum": 1000000, "description": "CPUs the session may use, such as 0.5 or 2 (needs a delegated cgroup v2)"}}})J";
constexpr std::string_view kStartInput =
    R"J({"type": "object", "additionalProperties": false, "required": ["command"], "properties": {"command": {"type": "string", "minLength": 1, "description": "shell text, run in the background in a subshell of the session's shell"}, "session": {"type": "string", "maxLength": 64, "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", "description": "session name (default: default)"}, "name": {"type": "string", "minLength": 1, "description": "a name to use instead of the id"}, "cwd": {"type": "string", "minLength": 1, "description": "run in this directory"}, "env": {"type": "object", "additionalProperties": {"type": "string"}, "propertyNames": {"pattern": "^[^=]+$"}, "description": "variables for this process only"}}})J";
// The fields of a process in `sbsh ps --json` (client::json_of(proc_info)).
constexpr std::string_view kProcOutput =
    R"J({"type": "object", "required": ["id", "state"], "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "session": {"type": "string"}, "command": {"type": "string"}, "state": {"type": "string"}, "pid": {"type": ["integer", "null"]}, "pgid": {"type": ["integer", "null"]}, "exit_code": {"type": ["integer", "null"]}, "signal": {"type": ["string", "null"]}, "started_at": {"type": "string"}, "ended_at": {"type": ["string", "null"]}, "error": {"type": ["string", "null"]}, "log": {"type": "string"}}})J";
constexpr std::string_view kProcsOutput =
    R"J({"type": "object", "required": ["processes"], "properties": {"processes": {"type": "array", "items": {"type": "object", "required": ["id", "state"], "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "session": {"type": "string"}, "command": {"type": "string"}, "state": {"type": "string"}, "pid": {"type": ["integer", "null"]}, "pgid": {"type": ["integer", "null"]}, "exit_code": {"type": ["integer", "null"]}, "signal": {"type": ["string", "null"]}, "started_at": {"type": "string"}, "ended_at": {"type": ["string", "null"]}, "error": {"type": ["string", "null"]}, "log": {"type": "string"}}}}}})J";
constexpr std::string_view kListProcsInput =
    R"J({"type": "object", "additionalProperties": false, "properties": {"all": {"type": "boolean", "description": "include finished processes"}}})J";
constexpr std::string_view kKillInput =
    R"J({"type": "object", "additionalProperties": false, "required": ["id"], "properties": {"id": {"type": ["string", "integer"], "description": "the process id (as start_process returned it) or its name"}, "signal": {"type": "string", "description": "TERM (the default: KILL follows after 2 s), KILL, INT, HUP and so on, or a number"}}})J";
constexpr std::string_view kWaitInput =
    R"J({"type": "object", "additionalProperties": false, "required": ["id"], "properties": {"id": {"type": ["string", "integer"], "description": "the process id (as start_process returned it) or its name"}, "timeout_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 604800, "description": "give up waiting after this long (default 30)"}}})J";
constexpr std::string_view kLogsInput =
    R"J({"type": "object", "additionalProperties": false, "required": ["id"], "properties": {"id": {"type": ["string", "integer"], "description": "the process id (as start_process returned it) or its name"}, "tail": {"type": "integer", "minimum": 1, "description": "only the last N lines of each stream"}, "stream": {"type": "string", "enum": ["both", "stdout", "stderr"], "description": "which output (default: both)"}}})J";
constexpr std::string_view kLogsOutput =
    R"J({"type": "object", "required": ["process", "stdout", "stderr"], "properties": {"process": {"type": "object", "required": ["id", "state"], "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "session": {"type": "string"}, "command": {"type": "string"}, "state": {"type": "string"}, "pid": {"type": ["integer", "null"]}, "pgid": {"type": ["integer", "null"]}, "exit_code": {"type": ["integer", "null"]}, "signal": {"type": ["string", "null"]}, "started_at": {"type": "string"}, "ended_at": {"type": ["string", "null"]}, "error": {"type": ["string", "null"]}, "log": {"type": "string"}}}, "stdout": {"type": "string"}, "stderr": {"type": "string"}, "stdout_truncated": {"type": "boolean"}, "stderr_truncated": {"type": "boolean"}}})J";

// A command's result: exec --json's record; a failure is isError, a command still running not.
tool_outcome command_result(const client::exec_result& r, std::string_view session, std::string_view command) {
  client::json_value j;
  client::add_exec_result(j, session, command, r);
  return {json(j), !r.running && !r.ok(), {}};
}

tool_outcome refused(const error& e) {
  tool_outcome o;
  o.is_error = true;
  o.message = fmt::format("sbsh: {} ({})", e.message, e.code);
  return o;
}

std::vector<std::string> assignments(const json& args, const char* key) {
  std::vector<std::string> out;
  if (auto it = args.find(key); it != args.end())
    for (const auto& [k, v] : it->items()) out.push_back(k + "=" + v.get<std::string>());
  return out;
}

std::string str_arg(const json& args, const char* key, const std::string& fallback = {}) {
  auto it = args.find(key);
  return it == args.end() ? fallback : it->get<std::string>();
}

std::chrono::milliseconds seconds_arg(const json& args, const char* key, std::chrono::milliseconds fallback) {
  auto it = args.find(key);
  if (it == args.end()) return fallback;
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(it->get<double>() * 1000)));
}

// "signal": a name (TERM, SIGKILL, hup) or a number; TERM when absent.
result<int> signal_arg(const json& args) {
  std::string name = str_arg(args, "signal", "TERM");
  if (auto sig = ipc::signal_from_name(name)) return *sig;
  return make_error(ipc::errc::usage, fmt::format("unknown signal '{}'; use TERM, KILL, INT, HUP or a number", name));
}

std::string id_arg(const json& args) {
  const json& v = args.at("id");
  return v.is_string() ? v.get<std::string>() : std::to_string(v.get<int64_t>());
}

// Holds a connection for the duration of a call, made through the context.
result<client::connection> open(tool_context& ctx) { return ctx.connect(); }

tool_outcome run_command(const json& args, tool_context& ctx) {
  client::exec_options o;
  o.command = args.at("command").get<std::string>();
  o.session = str_arg(args, "session");
  o.cwd = str_arg(args, "cwd");
  o.env = assignments(args, "env");
  o.timeout = seconds_arg(args, "timeout_seconds", 0ms);
  if (args.contains("stdin")) o.stdin_data = args["stdin"].get<std::string>();
  o.signal_fd = ctx.cancel_fd;
  // A command still running after wait_seconds goes on, kept by sbshd as %ID: the call
  // answers in time for hosts that give up after a minute, and await_command takes it up.
  o.detach_after = seconds_arg(args, "wait_seconds", kDefaultWait);
  o.keep = true;
  // Output is collected here, its first and last part (the whole stays with sbshd), and its
  // size watched, for progress.
  std::string out, err;
  client::head_tail out_kept(&out, kOutputLimit), err_kept(&err, kOutputLimit);
  o.on_output = [&](client::stream s, std::string_view d) {
    (s == client::stream::out ? out_kept : err_kept).add(d);
    if (ctx.output_seen) ctx.output_seen(d.size());
  };
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  auto r = conn->exec(o);
  if (!r) return refused(r.err());
  r->stdout_omitted_bytes = out_kept.finish();
  r->stderr_omitted_bytes = err_kept.finish();
  r->stdout_truncated = r->stdout_omitted_bytes > 0;
  r->stderr_truncated = r->stderr_omitted_bytes > 0;
  r->stdout_data = std::move(out);
  r->stderr_data = std::move(err);
  return command_result(*r, o.session, o.command);
}

uint64_t command_id_arg(const json& args) { return client::parse_command_ref(args.at("id").get<std::string>()).value(); }

tool_outcome await_command(const json& args, tool_context& ctx) {
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  ctx.blocking_on(conn->fd());
  auto r = conn->await_command(command_id_arg(args), seconds_arg(args, "wait_seconds", kDefaultWait), kOutputLimit);
  ctx.blocking_on(-1);
  if (!r) return refused(r.err());
  return command_result(*r, r->session, r->command);
}

tool_outcome cancel_command(const json& args, tool_context& ctx) {
  auto sig = signal_arg(args);
  if (!sig) return refused(sig.err());
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  uint64_t id = command_id_arg(args);
  ctx.blocking_on(conn->fd());
  auto killed = conn->kill_command(id, *sig);
  ctx.blocking_on(-1);
  if (!killed) return refused(killed.err());
  // Its result with what it wrote, as await_command gives it.
  auto r = conn->await_command(id, 0ms, kOutputLimit);
  if (!r) return refused(r.err());
  return command_result(*r, r->session, r->command);
}

tool_outcome list_sessions(const json&, tool_context& ctx) {
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  auto v = conn->sessions();
  if (!v) return refused(v.err());
  return {json{{"sessions", json(client::json_of(*v))}}, false, {}};
}

tool_outcome session_result(client::connection& conn, const std::string& name) {
  auto v = conn.sessions();
  if (!v) return refused(v.err());
  for (const auto& s : *v)
    if (s.name == name) return {json{{"session", json(client::json_of(s))}}, false, {}};
  return refused(error{"no_such_session", fmt::format("session '{}' is not listed", name)});
}

tool_outcome create_session(const json& args, tool_context& ctx) {
  client::session_spec spec;
  spec.name = args.at("name").get<std::string>();
  spec.cwd = str_arg(args, "cwd");
  spec.root = str_arg(args, "root");
  spec.env = assignments(args, "env");
  if (auto it = args.find("init"); it != args.end()) spec.init = it->get<std::vector<std::string>>();
  spec.restart = str_arg(args, "restart", spec.restart);
  spec.timeout_ms = static_cast<uint64_t>(seconds_arg(args, "timeout_seconds", 0ms).count());
  spec.setup = str_arg(args, "setup");
  if (auto it = args.find("setup_keys"); it != args.end()) spec.setup_keys = it->get<std::vector<std::string>>();
  spec.confine = args.value("confine", false);
  spec.no_network = args.value("no_network", false);
  if (spec.confine && spec.root.empty())
    return refused(make_error(ipc::errc::usage, "confine confines the session to its root: give root too"));
  for (auto [key, list] : {std::pair{"allow_write", &spec.allow_write}, std::pair{"allow_read", &spec.allow_read},
                           std::pair{"read_only", &spec.read_only}}) {
    if (auto it = args.find(key); it != args.end()) *list = it->get<std::vector<std::string>>();
    if (!list->empty() && !spec.confine)
      return refused(make_error(ipc::errc::usage,
                                fmt::format("{} adds to a confined session's rules: give confine: true too", key)));
  }
  if (auto it = args.find("memory"); it != args.end()) {
    auto m = it->is_string() ? client::parse_memory(it->get<std::string>()) : result<uint64_t>(it->get<uint64_t>());
    if (!m) return refused(m.err());
    spec.memory_max = *m;
  }
  if (auto it = args.find("pids"); it != args.end()) spec.pids_max = it->get<uint64_t>();
  if (auto it = args.find("cpu"); it != args.end())
    spec.cpu_millis = static_cast<uint64_t>(std::llround(it->get<double>() * 1000));
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
  auto r = session_result(*conn, spec.name);
  for (int i = 0; i < 2; ++i) {
    std::string& text = setup_out[i];
    if (text.size() > kSetupTail) text.erase(0, text.size() - kSetupTail);
    bool valid = true;
    r.structured[i == 0 ? "setup_stdout" : "setup_stderr"] = ran ? json(client::utf8_repair(text, &valid)) : json();
  }
  // What the kernel confines it to, read back from sbshd.
  if (auto d = conn->show_session(spec.name); d && !r.is_error)
    r.structured["definition"] = json(client::json_of(*d)).at("definition");
  return r;
}

tool_outcome remove_session(const json& args, tool_context& ctx) {
  std::string name = args.at("name").get<std::string>();
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  if (auto s = conn->remove_session(name); !s) return refused(s.err());
  return {json{{"removed", name}}, false, {}};
}

tool_outcome restart_session(const json& args, tool_context& ctx) {
  std::string name = args.at("name").get<std::string>();
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  if (auto s = conn->restart_session(name); !s) return refused(s.err());
  return session_result(*conn, name);
}

tool_outcome proc_result(const result<client::proc_info>& p, bool failed = false) {
  if (!p) return refused(p.err());
  return {json(client::json_of(p.value())), failed, {}};
}

tool_outcome start_process(const json& args, tool_context& ctx) {
  client::start_options o;
  o.command = args.at("command").get<std::string>();
  o.session = str_arg(args, "session");
  o.name = str_arg(args, "name");
  o.cwd = str_arg(args, "cwd");
  o.env = assignments(args, "env");
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  return proc_result(conn->start(o));
}

tool_outcome list_processes(const json& args, tool_context& ctx) {
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  auto v = conn->processes(args.value("all", false));
  if (!v) return refused(v.err());
  return {json{{"processes", json(client::json_of(*v))}}, false, {}};
}

tool_outcome kill_process(const json& args, tool_context& ctx) {
  auto sig = signal_arg(args);
  if (!sig) return refused(sig.err());
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  ctx.blocking_on(conn->fd());
  auto p = conn->kill(id_arg(args), *sig);
  ctx.blocking_on(-1);
  return proc_result(p);
}

tool_outcome wait_process(const json& args, tool_context& ctx) {
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  ctx.blocking_on(conn->fd());
  auto p = conn->wait(id_arg(args), seconds_arg(args, "timeout_seconds", 30s));
  ctx.blocking_on(-1);
  return proc_result(p, p && (p->exit_code.value_or(0) != 0 || p->signal));
}

tool_outcome process_logs(const json& args, tool_context& ctx) {
  client::logs_options o;
  if (auto it = args.find("tail"); it != args.end()) o.tail = it->get<uint64_t>();
  std::string which = str_arg(args, "stream", "both");
  o.out = which != "stderr";
  o.err = which != "stdout";
  o.cancel_fd = ctx.cancel_fd;
  std::string out, err;
  bool out_cut = false, err_cut = false;
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  auto p = conn->logs(id_arg(args), o, [&](client::stream s, std::string_view d) {
    std::string& into = s == client::stream::out ? out : err;
    bool& cut = s == client::stream::out ? out_cut : err_cut;
    size_t room = kOutputLimit > into.size() ? kOutputLimit - into.size() : 0;
    into.append(d.substr(0, room));
    if (d.size() > room) cut = true;
  });
  if (!p) return refused(p.err());
  bool ok1, ok2;
  json j = {{"process", json(client::json_of(*p))},
            {"stdout", client::utf8_repair(out, &ok1)},
            {"stderr", client::utf8_repair(err, &ok2)},
            {"stdout_truncated", out_cut},
            {"stderr_truncated", err_cut}};
  return {std::move(j), false, {}};
}

// Files beneath a session's root.
constexpr std::string_view kReadFileInput =
    R"J({"type": "object", "additionalProperties": false, "required": ["path"], "properties": {"path": {"type": "string", "minLength": 1, "description": "the file, from the session's root (an absolute path must lie beneath it)"}, "session": {"type": "string", "maxLength": 64, "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", "description": "session name (default: default); it must have a root"}, "offset": {"type": "integer", "minimum": 0, "description": "start at this byte"}, "length": {"type": "integer", "minimum": 0, "maximum": 1048576, "description": "bytes to read (default and most: 1 MiB)"}}})J";
constexpr std::string_view kReadFileOutput =
    R"J({"type": "object", "required": ["path", "bytes", "content", "encoding", "truncated"], "properties": {"path": {"type": "string"}, "bytes": {"type": "integer"}, "content": {"type": "string"}, "encoding": {"type": "string", "enum": ["utf-8", "base64"]}, "truncated": {"type": "boolean"}}})J";
constexpr std::string_view kWriteFileInput =
    R"J({"type": "object", "additionalProperties": false, "required": ["path", "content"], "properties": {"path": {"type": "string", "minLength": 1, "description": "the file, from the session's root; missing parent directories are made"}, "content": {"type": "string", "description": "the file's whole new content"}, "encoding": {"type": "string", "enum": ["utf-8", "base64"], "description": "how content is written (default: utf-8)"}, "session": {"type": "string", "maxLength": 64, "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", "description": "session name (default: default); it must have a root"}, "mode": {"type": "integer", "minimum": 0, "maximum": 4095, "description": "permission bits (default: an existing file's, else 0644)"}}})J";
constexpr std::string_view kWriteFileOutput =
    R"J({"type": "object", "required": ["path", "bytes"], "properties": {"path": {"type": "string"}, "bytes": {"type": "integer"}}})J";
constexpr std::string_view kListFilesInput =
    R"J({"type": "object", "additionalProperties": false, "properties": {"path": {"type": "string", "description": "the directory, from the session's root (default: the root)"}, "session": {"type": "string", "maxLength": 64, "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", "description": "session name (default: default); it must have a root"}, "recursive": {"type": "boolean", "description": "list all beneath it too"}}})J";
constexpr std::string_view kListFilesOutput =
    R"J({"type": "object", "required": ["entries"], "properties": {"entries": {"type": "array", "items": {"type": "object", "required": ["path", "type", "size", "mode", "mtime"], "properties": {"path": {"type": "string"}, "path_base64": {"type": "string", "description": "only when path is not valid UTF-8 (path then has U+FFFD in place of those bytes): its exact bytes"}, "type": {"type": "string"}, "size": {"type": "integer"}, "mode": {"type": "string"}, "mtime": {"type": "string"}, "target": {"type": "string"}, "target_base64": {"type": "string", "description": "only when target is not valid UTF-8: its exact bytes"}}}}}})J";

tool_outcome read_file(const json& args, tool_context& ctx) {
  // One byte more than asked for says whether the file goes on.
  uint64_t want = args.value("length", uint64_t{kOutputLimit});
  client::file_read_options o;
  o.offset = args.value("offset", uint64_t{0});
  o.length = want + 1;
  std::string path = args.at("path").get<std::string>();
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  std::string bytes;
  auto n = conn->read_file(str_arg(args, "session"), path, [&bytes](std::string_view d) { bytes.append(d); }, o);
  if (!n) return refused(n.err());
  bool truncated = bytes.size() > want;
  if (truncated) bytes.resize(want);
  bool utf8 = ipc::valid_utf8(bytes);
  json j = {{"path", path},
            {"bytes", bytes.size()},
            {"content", utf8 ? bytes : client::base64(bytes)},
            {"encoding", utf8 ? "utf-8" : "base64"},
            {"truncated", truncated}};
  return {std::move(j), false, {}};
}

tool_outcome write_file(const json& args, tool_context& ctx) {
  std::string path = args.at("path").get<std::string>(), content = args.at("content").get<std::string>();
  if (str_arg(args, "encoding", "utf-8") == "base64") {
    auto raw = client::unbase64(content);
    if (!raw) return refused(error{"invalid_argument", "argument 'content' is not base64, as encoding says"});
    content = std::move(*raw);
  }
  client::file_write_options o;
  if (auto it = args.find("mode"); it != args.end()) o.mode = it->get<uint32_t>();
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  auto n = conn->write_file(str_arg(args, "session"), path, content, o);
  if (!n) return refused(n.err());
  return {json{{"path", path}, {"bytes", *n}}, false, {}};
}

tool_outcome list_files(const json& args, tool_context& ctx) {
  auto conn = open(ctx);
  if (!conn) return refused(conn.err());
  auto v = conn->list_files(str_arg(args, "session"), str_arg(args, "path"), args.value("recursive", false));
  if (!v) return refused(v.err());
  return {json{{"entries", json(client::json_of(*v))}}, false, {}};
}

constexpr tool kTools[] = {
    {"run_command",
     "Run shell text in a persistent bash session. The session keeps its state between calls (directory, "
     "variables, functions, aliases, options), as an interactive shell would. Returns the exact exit code, stdout "
     "and stderr (of more than 1 MiB, the first and last 512 KiB, with *_omitted_bytes counting what was left "
     "out), whether it timed out, and whether the session's shell was replaced (state_lost). A command still "
     "running after wait_seconds (default 30) goes on in the session: the result then has running: true, its id "
     "and the output so far; await_command gives its result later, cancel_command stops it. A command that fails "
     "is reported with isError.",
     kRunInput, kExecOutput, run_command},
    {"list_sessions", "List sbsh's sessions: name, state, shell pid, directory, running command.", kNoInput,
     kSessionsOutput, list_sessions},
    {"create_session",
     "Define a session: its starting directory, environment, init commands, restart policy and default timeout, "
     "and what confines it: confine (with root) lets its commands reach only the root, a private TMPDIR and the "
     "system's programs, no_network gives it only loopback, memory, pids and cpu limit it. Sessions are also made "
     "on first use by run_command.",
     kCreateInput, kCreatedOutput, create_session},
    {"remove_session", "Remove a session: its shell and everything it started end.", kNameInput, kRemovedOutput,
     remove_session},
    {"restart_session", "Replace a session's shell with a new one (its state is lost; background processes stay).",
     kNameInput, kSessionOutput, restart_session},
    {"start_process",
     "Start a long-running background process (a server, a watcher) from a session's state. Its output goes to "
     "logs (process_logs); it outlives this call. Returns the process record with its id.",
     kStartInput, kProcOutput, start_process},
    {"list_processes", "List background processes (running ones; all: finished ones too).", kListProcsInput,
     kProcsOutput, list_processes},
    {"kill_process", "Signal a background process's whole tree; with TERM or KILL, returns once it has ended.",
     kKillInput, kProcOutput, kill_process},
    {"wait_process",
     "Wait for a background process to end (at most timeout_seconds, default 30) and return its exit status.",
     kWaitInput, kProcOutput, wait_process},
    {"process_logs", "Read a background process's output so far (each stream capped at 1 MiB).", kLogsInput,
     kLogsOutput, process_logs},
    {"await_command",
     "Wait for a command that run_command left running (by its id, %N) and return its result with its output, or, "
     "after wait_seconds (default 30), running: true with the output so far.",
     kAwaitInput, kExecOutput, await_command},
    {"cancel_command",
     "Stop a command that run_command left running, as a timeout does (TERM, then KILL after 2 s; the session "
     "keeps its state), and return its result.",
     kCancelInput, kExecOutput, cancel_command},
    {"read_file",
     "Read a file beneath the session's root (its --root directory or its snapshot's copy): at most 1 MiB from "
     "offset (truncated says whether it goes on), as UTF-8 text, or base64 when the bytes are not UTF-8. Paths leading outside the root are refused.",
     kReadFileInput, kReadFileOutput, read_file},
    {"write_file",
     "Write a file beneath the session's root, whole or not at all (missing directories are made; an existing "
     "file keeps its mode). content is UTF-8 text, or base64 with encoding base64.",
     kWriteFileInput, kWriteFileOutput, write_file},
    {"list_files", "List a directory beneath the session's root (recursive: all beneath it), with types and sizes.",
     kListFilesInput, kListFilesOutput, list_files},
};

// The checker of check_arguments: a subset of JSON Schema, the one the schemas above use.
std::string type_name(const json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  return "null";
}

bool has_type(const json& v, std::string_view t) {
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_boolean();
  if (t == "integer")
    return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (t == "number") return v.is_number();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "null") return v.is_null();
  return false;
}

std::string check_value(const std::string& path, const json& v, const json& schema) {
  if (auto t = schema.find("type"); t != schema.end()) {
    bool fits = false;
    std::string wanted;
    for (const auto& one : t->is_array() ? *t : json::array({*t})) {
      fits = fits || has_type(v, one.get<std::string>());
      wanted += (wanted.empty() ? "" : " or ") + one.get<std::string>();
    }
    if (!fits)
      return fmt::format("argument '{}' must be {} {}, not {}", path, wanted[0] == 'i' ? "an" : "a", wanted,
                         type_name(v));
  }
  if (auto e = schema.find("enum"); e != schema.end() && std::find(e->begin(), e->end(), v) == e->end()) {
    std::vector<std::string> names;
    for (const auto& x : *e) names.push_back(x.get<std::string>());
    std::string list;
    for (size_t i = 0; i < names.size(); ++i) list += (i ? ", " : "") + names[i];
    return fmt::format("argument '{}' must be one of {}", path, list);
  }
  if (v.is_string()) {
    auto s = v.get<std::string>();
    if (schema.value("minLength", 0) > 0 && s.empty()) return fmt::format("argument '{}' must not be empty", path);
    if (auto m = schema.find("maxLength"); m != schema.end() && s.size() > m->get<size_t>())
      return fmt::format("argument '{}' must be at most {} characters", path, m->get<size_t>());
    // libstdc++'s regex recurses per character: a long text is refused before it meets one.
    constexpr size_t kMaxMatched = 1024;
    if (auto p = schema.find("pattern"); p != schema.end()) {
      if (s.size() > kMaxMatched) return fmt::format("argument '{}' must be at most {} bytes", path, kMaxMatched);
      if (!std::regex_search(s, std::regex(p->get<std::string>())))
        return fmt::format("argument '{}' must match {}", path, p->get<std::string>());
    }
  }
  if (v.is_number()) {
    double d = v.get<double>();
    if (auto m = schema.find("exclusiveMinimum"); m != schema.end() && !(d > m->get<double>()))
      return fmt::format("argument '{}' must be more than {}", path, m->dump());
    if (auto m = schema.find("minimum"); m != schema.end() && d < m->get<double>())
      return fmt::format("argument '{}' must be at least {}", path, m->dump());
    if (auto m = schema.find("maximum"); m != schema.end() && d > m->get<double>())
      return fmt::format("argument '{}' must be at most {}", path, m->dump());
  }
  if (v.is_array()) {
    if (auto items = schema.find("items"); items != schema.end())
      for (size_t i = 0; i < v.size(); ++i)
        if (auto e = check_value(fmt::format("{}[{}]", path, i), v[i], *items); !e.empty()) return e;
  }
  if (v.is_object()) {
    const json props = schema.value("properties", json::object());
    for (const auto& req : schema.value("required", json::array()))
      if (!v.contains(req.get<std::string>()))
        return fmt::format("argument '{}' is missing",
                           path.empty() ? req.get<std::string>() : path + "." + req.get<std::string>());
    for (const auto& [key, x] : v.items()) {
      const std::string& k = key;
      // Names quoted in a message are the client's text: a long one is cut.
      std::string shown = k.size() <= 64 ? k : k.substr(0, 64) + "...";
      std::string sub = path.empty() ? shown : path + "." + shown;
      if (auto p = props.find(k); p != props.end()) {
        if (auto e = check_value(sub, x, *p); !e.empty()) return e;
        continue;
      }
      auto extra = schema.find("additionalProperties");
      if (extra == schema.end()) continue;
      if (extra->is_boolean()) {
        if (!extra->get<bool>()) return fmt::format("unknown argument '{}'", sub);
        continue;
      }
      if (auto names = schema.find("propertyNames"); names != schema.end())
        if (auto e = check_value(sub, k, *names); !e.empty())
          return k.size() > 1024 ? fmt::format("argument '{}' has a key of more than 1024 bytes", path)
                                 : fmt::format("argument '{}' has a key '{}' that must match {}", path, shown,
                                               names->value("pattern", std::string()));
      if (auto e = check_value(sub, x, *extra); !e.empty()) return e;
    }
  }
  return "";
}

struct parsed_tool {
  json input, output;
};

const std::vector<parsed_tool>& parsed_schemas() {
  static const std::vector<parsed_tool> all = [] {
    std::vector<parsed_tool> v;
    for (const auto& t : kTools) v.push_back({json::parse(t.input_schema), json::parse(t.output_schema)});
    return v;
  }();
  return all;
}

}  // namespace

std::span<const tool> tools() { return kTools; }

const tool* find_tool(std::string_view name) {
  for (const auto& t : kTools)
    if (t.name == name) return &t;
  return nullptr;
}

const json& tool_list() {
  static const json list = [] {
    json v = json::array();
    for (size_t i = 0; i < std::size(kTools); ++i)
      v.push_back({{"name", kTools[i].name},
                   {"description", kTools[i].description},
                   {"inputSchema", parsed_schemas()[i].input},
                   {"outputSchema", parsed_schemas()[i].output}});
    return v;
  }();
  return list;
}

std::string check_arguments(const tool& t, const json& args) {
  return check_value("", args, parsed_schemas()[static_cast<size_t>(&t - kTools)].input);
}

}  // namespace sbsh::mcp
