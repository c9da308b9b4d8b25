// The records sbshd sends and clients receive: a session's state, its definition and
// history, sbshd's counters, a background process. One definition serves sbshd, which fills them, and
// libsbsh, whose API returns them (sbsh/client.h names them in sbsh::client).
//
// This header is installed with the client library (beside result.h), so it depends on the
// standard library alone. How each record travels, field by field, is declared in
// ipc/messages.h.
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sbsh {

// A session as `status` and `session ls` show it.
struct session_status {
  std::string name;
  std::string state;       // starting | ready | running | restarting | exited | failed
  int64_t wrapper_pid = 0;
  int64_t shell_pid = 0;
  uint64_t restarts = 0;
  uint64_t queued = 0;
  uint64_t commands = 0;
  std::string running;     // command text, when one runs
  uint64_t running_ms = 0;
  std::string cwd;         // the shell's current directory
  std::string error;       // why the session is failed or exited
  std::string restart;     // always | on-failure | never
  uint64_t uptime_ms = 0;  // of the current shell
  int64_t started_at_ms = 0;
  bool implicit = false;        // made by exec -s or start -s, not session create
  uint64_t idle_expiry_ms = 0;  // 0: never removed for being idle
  int64_t idle_since_ms = 0;    // when it became idle; 0 while busy
  int64_t expires_at_ms = 0;    // when it is removed if it stays idle; 0: not while busy, or never
  uint64_t timeout_ms = 0;      // the definition's default timeout of a command; 0: none
};

// What `session create` defines: every new shell of the session starts this way.
struct session_spec {
  std::string name;
  std::string cwd;                 // empty: the caller's directory (relative: from it)
  std::vector<std::string> env;    // NAME=VALUE
  std::vector<std::string> init;   // commands run in every new shell before any other
  std::string restart = "always";  // always | on-failure | never
  // Resource limits of every shell and so of every command: NAME=VALUE, VALUE being SOFT:HARD
  // or one value for both; NAME one of as, core, cpu, data, fsize, memlock, nofile, nproc,
  // stack (sbsh(1), session create --limit). Read back in canonical form, e.g.
  // "nofile=1024:1024".
  std::vector<std::string> limits;
  // A directory (relative: to this process's, on a local connection) that sbshd copies, less
  // what ignore_rules() leave out, before the session's first shell starts: every shell starts
  // in the copy, which lives as long as the session is defined and goes (or is kept) at removal.
  // Not with `cwd`. Read back: the source here, and the copy as `cwd`.
  std::string snapshot;
  // The directory the session is confined to (absolute; a symlink in it is resolved at
  // creation): exec -C and start -C must stay beneath it, the file requests (file_*) reach
  // nothing outside it, and the shell gets it as SBSH_ROOT. `cwd` defaults to it, and a relative
  // `cwd` is taken from it. A snapshot session's root is its copy (read back here as well).
  // Not with `snapshot`.
  std::string root;
  // The environment every shell of the session starts with, before `env`: the one of the
  // client that created the session (the CLI's own, a library caller's or the one it gave, a
  // plan's), never sbshd's. Kept with the definition so that every restart of the shell, and
  // of sbshd, starts from the same; `session show` leaves it out (it may hold secrets).
  std::vector<std::string> environment;
  // Made by `exec -s NAME` or `start -s NAME` rather than `session create`.
  bool implicit = false;
  // How long the session may stay idle (no command running or queued, no background process
  // running) before sbshd removes it; 0: never. Sessions made implicitly get sbshd's
  // --idle-expiry (24 h by default).
  uint64_t idle_expiry_ms = 0;
  // The timeout of a command that gives none (an exec whose timeout_ms is 0); 0: none.
  uint64_t timeout_ms = 0;
  // What a snapshot's copy leaves out, with gitignore's semantics (ignore_rules() below):
  // patterns added to the defaults (kDefaultIgnores) unless no_default_ignores, and with
  // gitignore the tree's own .gitignore files too.
  std::vector<std::string> ignore;
  bool no_default_ignores = false;
  bool gitignore = false;
  // Removing the session keeps its copy (as session_rm's keep_copy does) when the last
  // command it ran failed: a non-zero status, a timeout, or the shell lost.
  bool keep_copy_on_failure = false;
  // Read back: the fifos, sockets and device nodes the copy skipped.
  uint64_t special_skipped = 0;
  // An environment built once and shared by content: `setup` (bash text) runs with SBSH_ENV
  // naming a directory keyed by a hash of the setup, the contents of the `setup_keys` files and
  // directories (relative: to the session's directory, where the setup runs) and the bash that runs it. An environment already built with that hash is used as it is;
  // otherwise the setup runs once before the session exists, and session_create fails with
  // its output when it fails. Every shell of the session gets SBSH_ENV.
  std::string setup;
  std::vector<std::string> setup_keys;
  // Read back: the environment's directory (SBSH_ENV), once built.
  std::string sbsh_env;
  // Confinement by the kernel (sbsh(1), session create --confine). With `confine` the shell
  // and all it starts run under a Landlock ruleset: read-write beneath the root and a private
  // TMPDIR, read and execute on the system's programs and libraries, read-only on its
  // configuration and /proc; `allow_write`, `allow_read` (read and execute) and `read_only`
  // add absolute paths. The shell is then the init of a PID namespace of its own, so that
  // everything it starts ends with it. Needs a root (or a snapshot), and a kernel with Landlock.
  bool confine = false;
  std::vector<std::string> allow_write;
  std::vector<std::string> allow_read;
  std::vector<std::string> read_only;
  // The shell runs in a network namespace of its own, with only loopback.
  bool no_network = false;
  // Read back: the Landlock ABI version in force (0: not confined).
  uint64_t landlock_abi = 0;
  // Resources, by a cgroup v2 of the session's own that holds its shell and all it starts:
  // memory.max in bytes (swap included: memory.swap.max is 0), pids.max, and cpu.max in
  // thousandths of a CPU (1500: one and a half). 0: no limit. Refused (not_supported) where
  // sbshd has no cgroup delegated to it with those controllers.
  uint64_t memory_max = 0;
  uint64_t pids_max = 0;
  uint64_t cpu_millis = 0;
  // Read back: the session's cgroup directory, when it has one.
  std::string cgroup;
};

// What a snapshot leaves out unless told otherwise (session create --no-default-ignores).
inline constexpr std::string_view kDefaultIgnores[] = {
    ".git",         ".venv",          "venv",          "node_modules", "__pycache__",
    "*.pyc",        "*.pyo",          "*.egg-info",    ".mypy_cache",  ".pytest_cache",
    ".ruff_cache",  ".tox",           ".idea",         ".vscode",      ".DS_Store"};

// The patterns a snapshot of `s` leaves out, in the order they apply (a later one wins):
// the defaults, then `ignore`.
inline std::vector<std::string> ignore_rules(const session_spec& s) {
  std::vector<std::string> out;
  if (!s.no_default_ignores) out.assign(std::begin(kDefaultIgnores), std::end(kDefaultIgnores));
  out.insert(out.end(), s.ignore.begin(), s.ignore.end());
  return out;
}

// A snapshot's copy kept after its session was removed (session rm --keep-copy).
struct kept_copy {
  std::string session;    // the session it was made for
  std::string path;       // where it is
  int64_t kept_at_ms = 0; // when it was kept (unix ms)
  uint64_t size_bytes = 0;
};

// An environment built by a setup (session create --setup), as `sbsh env ls` lists it.
struct environment_info {
  std::string hash;                   // its key: setup text, key files' contents, bash
  std::string path;                   // its directory, the SBSH_ENV of its sessions
  std::string setup;                  // the setup that built it
  std::vector<std::string> keys;      // the key files it was built from, as given
  uint64_t size_bytes = 0;            // the bytes of its files (links not followed)
  int64_t created_at_ms = 0;          // when its setup succeeded (unix ms)
  int64_t last_used_ms = 0;           // when a session last started with it (unix ms)
  std::vector<std::string> sessions;  // the sessions defined with it now
};

// A file beneath a session's root, as `sbsh file stat` and `sbsh file ls` describe it.
struct file_entry {
  std::string path;  // stat: as given; ls: from the directory listed ("a/b" with recursion)
  std::string type;  // file, dir, symlink, fifo, socket, char, block
  uint64_t size = 0;
  uint32_t mode = 0;  // the permission bits (07777)
  int64_t mtime_ms = 0;
  std::string target;  // a symlink's text, as it is (it may point anywhere)
};

// A finished command, for `session show`.
struct history_entry {
  std::string command;
  std::optional<int> exit_code;
  bool timed_out = false;
  bool shell_restarted = false;
  int64_t started_at_ms = 0;
  uint64_t duration_ms = 0;
};

struct session_detail {
  session_status status;
  session_spec definition;
  std::string init_output;              // what the last start's init commands printed
  std::vector<history_entry> history;   // the last commands, oldest first
};

// What sbshd has done since it started (sbsh(1), status).
struct daemon_counters {
  uint64_t commands = 0;        // commands from clients that ended, run or not
  uint64_t failed = 0;          // of those, with no exit status or a non-zero one
  uint64_t timed_out = 0;       // of those, stopped by their timeout
  uint64_t shell_restarts = 0;  // shells started in place of one a session had
  uint64_t bytes_streamed = 0;  // output sent in frames and input received, through sbshd
  uint64_t clients = 0;         // connected now, the one asking included
};

// A background process (`sbsh start`).
struct proc_info {
  uint64_t id = 0;
  std::string name, session, command;
  std::string state;           // starting | running | exited | killed | failed | lost | not_started
  int64_t pid = 0;             // also its process group
  std::optional<int> exit_code;
  std::optional<int> signal;
  int64_t started_at_ms = 0;
  int64_t ended_at_ms = 0;     // 0 while it runs
  std::string error;
  std::string log_path;        // its stdout log (stderr: the same with .err)
};

// A command sbshd keeps (exec --detach-after, --json), as `sbsh ps` lists it beside the
// background processes: by its %ID.
struct command_info {
  uint64_t id = 0;  // shown as %ID
  std::string session, command;
  std::string state;      // queued | running | finished
  bool detached = false;  // it went on without the client that started it
  int64_t pid = 0;        // while it runs: the session's shell, which runs it
  std::optional<int> exit_code;
  std::optional<int> signal;
  bool timed_out = false, cancelled = false;
  int64_t started_at_ms = 0;  // 0 until it starts
  int64_t ended_at_ms = 0;    // 0 until it ends
};

}  // namespace sbsh
