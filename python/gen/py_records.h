// The records the package sbsh shows, each with what its Python form does differently on
// purpose (py_form.h says what can be declared). sbsh-pygen writes them into sbsh/_records.py
// in the order of python_records, which puts a record before those that hold it.
//
// The records Python builds from something else (ExecResult from the C ABI's accessors, a
// plan's report and events, output chunks) stay in sbsh/types.py.
#pragma once

#include <tuple>

#include "python/gen/py_form.h"

namespace sbsh::client::py {

template <>
struct py_form<session_status> {
  static constexpr std::string_view cls = "SessionInfo";
  static constexpr std::string_view doc =
      R"(A session, as `sbsh session ls --json` lists it. state: starting, ready, running,
restarting, exited or failed; running: the command it runs, if any.)";
  static constexpr py_rule rules[] = {{"idle_expiry_ms", py_as::omit},
                                      {"idle_since_ms", py_as::omit},
                                      {"expires_at_ms", py_as::omit},
                                      {"timeout_ms", py_as::omit}};
  static constexpr size_t positional = 15;
};

template <>
struct py_form<session_spec> {
  static constexpr std::string_view cls = "SessionDefinition";
  static constexpr std::string_view doc = R"(How a session's shells start.

setup: the setup that built its environment (create_session(setup=)); sbsh_env: that
environment's directory, its shells' SBSH_ENV. What the kernel holds it to
(create_session(confine=, ...)): landlock_abi is the Landlock ABI in force (0: not
confined); memory_max (bytes), pids_max and cpu_millis (thousandths of a CPU) its cgroup's
limits, 0 for none; cgroup that cgroup's directory.)";
  static constexpr py_rule rules[] = {{"ignore", py_as::omit},
                                      {"no_default_ignores", py_as::omit},
                                      {"gitignore", py_as::omit},
                                      {"keep_copy_on_failure", py_as::omit},
                                      {"special_skipped", py_as::omit},
                                      {"timeout_ms", py_as::omit},
                                      {"confine", py_as::from_helper},
                                      {"allow_write", py_as::from_helper},
                                      {"allow_read", py_as::from_helper},
                                      {"read_only", py_as::from_helper},
                                      {"no_network", py_as::from_helper},
                                      {"landlock_abi", py_as::from_helper},
                                      {"landlock_abi", py_as::not_null},
                                      {"memory_max", py_as::from_helper},
                                      {"memory_max", py_as::not_null},
                                      {"pids_max", py_as::from_helper},
                                      {"pids_max", py_as::not_null},
                                      {"cpu_millis", py_as::from_helper},
                                      {"cpu_millis", py_as::not_null},
                                      {"cgroup", py_as::from_helper}};
  static constexpr size_t positional = 7;
  // The JSON form shows what confines a session as one "confinement" object, by its rules.
  static constexpr std::string_view helper = R"(_confinement(d.get("confinement") or {}))";
};

template <>
struct py_form<history_entry> {
  static constexpr std::string_view doc = "One of a session's last commands.";
  static constexpr size_t positional = 6;
};

template <>
struct py_form<session_detail> {
  static constexpr std::string_view cls = "SessionDetails";
  static constexpr std::string_view doc = "One session in detail, as `sbsh session show NAME --json`.";
  static constexpr size_t positional = 4;
};

template <>
struct py_form<proc_info> {
  static constexpr std::string_view cls = "ProcessInfo";
  static constexpr std::string_view doc =
      R"(The state of a background process. state: starting, running, exited, killed, failed,
lost (sbshd stopped while it ran) or not_started (sbshd stopped before it started). pid is also its process group (None before it starts).)";
  static constexpr std::string_view base = "_ProcessInfoBase";
  static constexpr py_rule rules[] = {{"pgid", py_as::omit},
                                      {"started_at_ms", py_as::seconds},
                                      {"error", py_as::not_null},
                                      {"log", py_as::note, "its stdout log (stderr: the same with .err)"}};
  static constexpr size_t positional = 12;
};

template <>
struct py_form<command_info> {
  static constexpr std::string_view cls = "CommandInfo";
  static constexpr std::string_view doc =
      R"(A command sbshd keeps, detached from its client (`sbsh ps` lists it by %ID): id is the
number after the %, as await_command takes it. state: queued, running or finished. pid is
the session's shell, which runs it (None unless running).)";
  static constexpr std::string_view base = "_CommandInfoBase";
  static constexpr size_t positional = 12;
};

template <>
struct py_form<daemon_counters> {
  static constexpr std::string_view doc = "sbshd's counters since it started (sbsh(1), JSON OUTPUT).";
  static constexpr size_t positional = 6;
};

template <>
struct py_form<daemon_status> {
  static constexpr std::string_view doc = "The daemon, as `sbsh status --json`.";
  static constexpr std::string_view order[] = {"pid", "version", "uptime_ms", "socket", "counters", "sessions"};
  static constexpr py_rule rules[] = {{"descriptor_limit", py_as::note,
                                       "sbshd's soft RLIMIT_NOFILE (0 from an sbshd that does not say)"},
                                      {"sessions_supported", py_as::note,
                                       "the sessions that limit holds, 3 descriptors each"}};
  static constexpr size_t positional = 6;
};

template <>
struct py_form<file_entry> {
  static constexpr std::string_view cls = "FileInfo";
  static constexpr std::string_view doc =
      R"(A file beneath a session's root. type: file, dir, symlink, fifo, socket, char or block;
mode: the permission bits; target: a symlink's. A path or target that is not UTF-8 is
what os.fsdecode makes of its bytes (os.fsencode gives them back), so it names the file
again in read_file and the other calls.)";
  static constexpr size_t positional = 6;
};

template <>
struct py_form<file_edit_result> {
  static constexpr std::string_view cls = "FileEdit";
  static constexpr std::string_view doc =
      R"(What Client.edit_file did: how many occurrences it replaced, the file's size now, and
the line (1 the first) where the first replacement starts.)";
  static constexpr py_rule rules[] = {{"bytes", py_as::rename, "size"}};
  static constexpr py_extra extra[] = {{"path", "str", R"(_name(d, "path") or "")"}};  // to_json(path, r)
  static constexpr std::string_view order[] = {"path"};
  static constexpr size_t positional = 4;
};

template <>
struct py_form<file_match> {
  static constexpr std::string_view cls = "FileMatch";
  static constexpr std::string_view doc =
      R"(A line that matched (Client.search_files): its file, from the directory searched, its
number (1 the first), its text (invalid UTF-8 replaced) and its exact bytes.)";
  static constexpr py_rule rules[] = {{"text", py_as::plain_text}, {"text_bytes", py_as::exact_bytes, "data"}};
  static constexpr size_t positional = 4;
};

template <>
struct py_form<file_search_result> {
  static constexpr std::string_view cls = "FileSearch";
  static constexpr std::string_view doc =
      R"(What Client.search_files found: the matching lines, by file and line; how many files
it read, how many it left out (not text, or over 16 MiB), whether more lines matched
than it gives, and dir, the directory the matches' paths are from (the path searched, or
the directory holding it when it is a file).)";
  static constexpr size_t positional = 5;
};

template <>
struct py_form<kept_copy> {
  static constexpr std::string_view doc =
      R"(A snapshot's copy kept after its session (remove_session's keep_copy, or the session's
keep_copy_on_failure): where it is, for which session, when it was kept and its size (0
in what prune_kept_copies returns).)";
  static constexpr size_t positional = 4;
};

template <>
struct py_form<environment_info> {
  static constexpr std::string_view cls = "EnvironmentInfo";
  static constexpr std::string_view doc =
      R"(An environment a setup built (create_session's setup), shared by every session with
its hash: its directory (their SBSH_ENV), the setup and key files it was built from, its
size, when it was built and last used, and the sessions defined with it now.)";
  static constexpr size_t positional = 8;
};

// Every record of the package's, a record before those that hold it.
using python_records = std::tuple<session_status, session_spec, history_entry, session_detail, proc_info, command_info,
                                  daemon_counters, daemon_status, file_entry, file_edit_result, file_match,
                                  file_search_result, kept_copy, environment_info>;

}  // namespace sbsh::client::py
