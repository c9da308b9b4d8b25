// A session's definition: what `sbsh session create` said, and what every new shell of the
// session is started with. Definitions are compared (re-creating with the same definition
// is a no-op), sent to clients, and persisted in the state directory. Here too are the checks
// of what a request names within a session (its name, a variable, a directory), which every
// request family shares.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/confine.h"
#include "daemon/session_environ.h"
#include "ipc/records.h"
#include "ipc/result.h"

namespace sbsh::daemon {

// The session name rule: ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$
bool valid_session_name(std::string_view name);
status check_session_name(std::string_view name);

// The longest timeout taken, a command's or a session's default: beyond it, a mistake.
inline constexpr uint64_t kMaxTimeoutMs = 100ull * 365 * 24 * 3600 * 1000;

// NAME=VALUE with a valid variable name and no NUL byte.
status check_env_entry(std::string_view entry);

enum class restart_policy { always, on_failure, never };
std::optional<restart_policy> parse_policy(std::string_view s);

// A session's definition as sbshd holds it: the session_spec a client sent or the state file
// kept (ipc/records.h), checked by def_from_request or def_from_saved (absolute paths,
// canonical limits, a known restart policy). It is sent back and saved as it is, as a
// session_spec; its name is the session table's, left empty here. Its creator's environment
// is not in session_spec::environment (left empty) but in `environ`, one copy shared by every
// definition with the same (session_environ.h).
struct session_def : session_spec {
  environ_ref environ;
  // The variables every shell starts with, before `env`.
  [[nodiscard]] const std::vector<std::string>& environment_vars() const {
    static const std::vector<std::string> none;
    return environ ? environ->vars : none;
  }
  // Takes `vars` as the creator's environment (interned), and none in session_spec's field.
  void set_environment(std::vector<std::string> vars) {
    environ = intern_environ(std::move(vars));
    environment.clear();
  }
  // The restart policy `restart` names (checked when the definition was made).
  [[nodiscard]] restart_policy policy() const { return parse_policy(restart).value_or(restart_policy::always); }
  [[nodiscard]] bool has_cgroup_limits() const { return memory_max != 0 || pids_max != 0 || cpu_millis != 0; }
  // Whether `o` defines the same shells (environment, implicitness, expiry and default
  // timeout aside, and what is read back: the copy's skipped files, the environment's
  // directory, the Landlock ABI, the cgroup).
  [[nodiscard]] bool same_shells(const session_def& o) const {
    return cwd == o.cwd && env == o.env && init == o.init && limits == o.limits && snapshot == o.snapshot &&
           root == o.root && restart == o.restart && same_copy(o) && setup == o.setup && setup_keys == o.setup_keys &&
           confine == o.confine && allow_write == o.allow_write && allow_read == o.allow_read &&
           read_only == o.read_only && no_network == o.no_network && memory_max == o.memory_max &&
           pids_max == o.pids_max && cpu_millis == o.cpu_millis;
  }
  [[nodiscard]] bool same_copy(const session_def& o) const {
    return ignore == o.ignore && no_default_ignores == o.no_default_ignores && gitignore == o.gitignore &&
           keep_copy_on_failure == o.keep_copy_on_failure;
  }
  // Interned, the same environment is the same copy; the hash says so for copies made apart.
  [[nodiscard]] bool same_environ(const session_def& o) const {
    if (environ == o.environ) return true;
    if (environ && o.environ) return environ->hash == o.environ->hash;
    return environment_vars() == o.environment_vars();  // none, or none given
  }
  bool operator==(const session_def& o) const {
    return same_shells(o) && same_environ(o) && implicit == o.implicit &&
           idle_expiry_ms == o.idle_expiry_ms && timeout_ms == o.timeout_ms;
  }
};

// The directory a session is confined to: its root, a snapshot session's copy (its cwd), or
// empty when it has none.
inline const std::string& root_of(const session_def& d) { return d.snapshot.empty() ? d.root : d.cwd; }

// The directories the session defined by `d` has of its own: its root (root_of), read and
// write; for a confined session also `tmp` (its TMPDIR) read and write, then --allow-write,
// --allow-read (read and execute), --read-only, and the directory its setup built (SBSH_ENV,
// read and execute), in that order. A confined shell's Landlock
// rules beside the system's (confine::system_rules), and what file requests may reach.
std::vector<confine::rule> own_rules(const session_def& d, const std::string& tmp);

// Gives the pipes a command of a confined session is started with to the user its shell is
// outside its user namespace (`uid`, `gid`: sbshd --confine-user) when sbshd is root: a pipe
// is its maker's, mode 0600, and a command that opens one anew (/dev/stdout, /dev/stdin,
// /proc/self/fd/N) may otherwise not. Nothing otherwise, nor to a terminal.
void give_to_confined_shell(const session_def& d, uid_t uid, gid_t gid, std::initializer_list<int> fds);

// Whether absolute path `p` is `dir` or lies beneath it, by its text (`dir` has no trailing
// slash; neither has "." or ".." components).
bool path_within(std::string_view p, std::string_view dir);

// Where a command started with a directory (exec -C, start -C) starts in the session defined
// by `def`: `given` as the request names it, `base` the client's own directory (sent only
// over a local connection). With a root (root_of), a relative `given` is taken from the
// root and an absolute one must lie within it; either must then lead, symlinks and all, to a
// directory beneath the root (one openat2 with RESOLVE_BENEATH, beneath.h): the result is the
// path the kernel reached, so the shell's cd cannot be led elsewhere by ".." after a symlink.
// Errors (outside_root, bad_directory) name `given`, never the host path it would reach.
// Without a root, a relative `given` is taken from `base`, and refused when there is none.
// This is checked when the request arrives; the command itself is not confined.
result<std::string> start_dir(std::string_view given, std::string_view base, const session_def& def);

// Checks a request's cwd and cwd_base fields (exec, proc_start) before its session is known.
status check_dir_fields(std::string_view cwd, std::string_view base);
// The directory a command given `given` (-C) and `base` starts in, in the session defined by
// `def` (start_dir), within the shell channel's bound.
result<std::string> settle_cwd(std::string_view given, std::string_view base, const session_def& def);

// Checks a session's starting environment: NAME=VALUE entries without NUL, a NAME without
// '=', within kMaxSessionEnv bytes in all. An empty one (a remote client's, or a client
// with none) is replaced by a minimal one from the user's account: HOME, USER, LOGNAME,
// SHELL and a default PATH. sbsh's own variables are dropped (SBSH_SESSION is set per
// session; SBSH_BASH is read from sbshd's environment).
result<std::vector<std::string>> session_environment(std::vector<std::string> given);
inline constexpr size_t kMaxSessionEnv = 1u << 20;

// Whether `p` can be given as an ignore pattern (one gitignore line that is not a comment
// or blank); the error says what is wrong with it.
status check_ignore_pattern(std::string_view p);

// The bytes of text a definition holds (what ipc::kMaxDefinitionText bounds), and those it
// holds but its environment (shared with other definitions: counted once for them all).
size_t text_size(const session_def& d);
size_t own_text_size(const session_def& d);

// Checks a definition that was sent (a session_create request) or saved (the state file)
// and puts its limits in canonical form, its environment interned; the error says what is
// wrong.
result<session_def> def_from_request(session_spec spec);
result<session_def> def_from_saved(session_spec spec);

}  // namespace sbsh::daemon
