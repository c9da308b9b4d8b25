// sbsh-wrapper: holds one persistent bash for one session.
//
// sbshd starts it with the control socket on fd 3, bash's end of the shell channel
// (ipc/shell_channel.h) on fd 4, and sbshd's own end of it on fd 5. The wrapper starts bash
// with the sbsh builtin (shell/sbsh_builtin.c) loaded from a one-line script; sbshd then
// sends each command to the builtin and reads each status itself, so the exec round trip does
// not pass through here. This process supervises: it starts bash in a session of its own,
// reports what a failed start printed, reaps orphans (it is a child subreaper), signals a
// command's processes and interrupts the shell on request (timeouts, cancels), reports
// bash's exit, and kills everything the session started when the shell ends or sbshd asks it
// to (SIGTERM).
//
// When sbshd goes away without ending the session (it crashed, or stopped with
// --keep-sessions), the wrapper keeps the session for the adoption timeout: it holds
// sbshd's end of the shell channel (fd 5), so the builtin neither reads end-of-file nor loses
// a status, drains the output of a command still running (its pipes have no other reader
// left), keeps the background processes' pipes sbshd lent it (protect_group), and listens
// on DIR/w. The next sbshd connects there, sends `adopt`, and gets all of them back with
// what it needs to know of the session (`adopted`); the connection becomes the control
// socket. Nobody within the timeout, or its adoption socket removed (looked at every few
// seconds): the session ends. A spare nobody claimed ends as soon as its sbshd is gone.
// sbshd is gone once the control socket is closed, whether a read met its end or a write
// failed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/confine.h"
#include "common/limits.h"
#include "ipc/result.h"
#include "ipc/wrapper_link.h"  // the descriptor numbers and the adoption socket's name
#include "wrapper/spawn.h"

namespace sbsh::wrapper {

// The builtin's file, relative to the directory of the running sbsh-wrapper (the build tree
// and an installation lay them out alike).
#ifndef SBSH_BUILTIN_RELPATH
#define SBSH_BUILTIN_RELPATH "../lib/sbsh/sbsh-builtin.so"
#endif

struct options {
  std::string dir;                // the shell's directory, for the adoption socket (--dir)
  uint64_t adopt_timeout_ms = 0;  // 0: the session ends with sbshd
  std::vector<rlimit_spec> limits;  // set on bash (--limit)
  // Landlock rules (--rule MODE:PATH). With any, bash and all it starts may touch only these
  // paths, the system's (confine::system_rules()), bash and the builtin.
  std::vector<confine::rule> rules;
  bool pid_ns = false;  // --ns pid: bash is the init of a PID namespace of its own
  bool net_ns = false;  // --ns net: a network namespace of its own, only loopback
  std::string cgroup;   // --cgroup DIR: bash starts in this cgroup (made by sbshd, with the limits)
  // --as UID:GID: who a confined shell is outside its user namespace when the wrapper runs
  // as root (sbshd --confine-user; nobody by default). Unprivileged, the shell is the
  // wrapper's user.
  uid_t confine_uid = 65534;
  gid_t confine_gid = 65534;
  // --nofile SOFT[:HARD]: the RLIMIT_NOFILE of the wrapper and its shell (idle_memory.h); 0:
  // as inherited.
  uint64_t nofile_soft = 0, nofile_hard = 0;
};

// Takes option `name` (--limit, --rule, --ns, --as, --cgroup, --dir, --adopt-timeout, --nofile) with
// `value` into `o`: 1 when taken, 0 when `name` is not one, -1 when `value` is wrong (with
// the reason in `error`, or none for a usage error).
int set_option(std::string_view name, const char* value, options& o, std::string& error);

// The sbsh builtin beside this program (SBSH_BUILTIN_RELPATH), or why it cannot be used.
result<std::string> find_builtin();
// The one line bash's script holds at start: load the builtin and hand the shell to it.
std::string shell_script(const std::string& builtin);
// Starts `bash_path` on that script (a pipe made, written and closed here) with the shell
// channel's bash end and stderr on `early_err` until the builtin serves (spawn_shell).
result<pid_t> spawn_serving_shell(const char* bash_path, const std::string& builtin, int channel, int early_err,
                                  std::span<const rlimit_spec> limits = {},
                                  const shell_confinement& confinement = {});

// Runs until the shell ends or the session is ended; returns the process exit code.
int run(const char* session_name, const options& o);

// A spare: started, with its bash, before any session needs it, so that a new session does
// not wait for two processes to start. It runs as run() does; sbshd's claim gives it the
// session's name and directory. `title` is the memory of its arguments, rewritten then to
// show the session's name.
//
// A confined spare (`confined`, sbsh-wrapper --spare-confined) cannot start its bash before
// the session is known: its view of the files holds the session's directories. It stages one
// instead (staged_shell): namespaces made and mapped, the system's part of the view built, the
// seccomp program compiled. The claim brings the options and environment a wrapper started for
// the session would have had; the shell is then finished with them, or, when they ask for what
// the stage cannot give (limits, a network namespace, a cgroup, an own path that would hide
// part of the system's view), started anew as run() would start it.
int run_spare(char* title, std::size_t title_size, const options& o, bool confined = false);

// A one-shot run (sbsh-wrapper --setup TEXT), how sbshd runs an environment's setup
// (daemon/env_store.h): `bash -c TEXT` started as a session's shell is (spawn_shell), with
// the limits, Landlock rules and namespaces of `o`, on this process's stdin, stdout and
// stderr; this process waits for it, ends whatever it left, and ends as bash did (its exit
// status, or the signal that killed it). It dies with its parent, and bash with it.
int run_setup(const char* text, const options& o);

}  // namespace sbsh::wrapper
