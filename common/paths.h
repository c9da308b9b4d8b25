// Where sbsh keeps its socket and state, and the safety checks on those directories.
// Shared by sbshd (which creates them) and the client (which finds them and auto-starts).
#pragma once

#include <string>

#include "ipc/result.h"

namespace sbsh {

// The user's runtime directory: $XDG_RUNTIME_DIR, else LOGIN_BASE/$UID (/run/user/$UID) when
// it is a directory of ours that only we may enter, as a login makes it; else "". So sbsh
// finds the same sbshd whether its environment has XDG_RUNTIME_DIR or not.
std::string runtime_dir(const std::string& login_base = "/run/user");
// --socket, else $SBSH_SOCKET, else RUNTIME/sbsh/sbshd.sock (runtime_dir()), else
// /tmp/sbsh-$UID/sbshd.sock.
std::string resolve_socket_path(const std::string& explicit_path);
// --state-dir, else $SBSH_STATE_DIR, else $XDG_STATE_HOME/sbsh, else ~/.local/state/sbsh.
std::string resolve_state_dir(const std::string& explicit_path);

// What a private directory holds, which decides how strict its check is and what its
// errors advise.
enum class dir_role {
  runtime,  // the socket's: no permission at all for group or others (0700)
  state,    // sbshd's state (session definitions it runs, logs): no one else may write there
};
// Creates `dir` (mode 0700, and its missing parents) when it is missing, then refuses it
// unless it is a real directory (not a symbolic link) owned by us and private as `role`
// requires. The error says what is wrong and how to fix it.
status ensure_private_dir(const std::string& dir, dir_role role = dir_role::runtime);
// The socket's directory: created (0700) only when it is the default one,
// RUNTIME/sbsh (runtime_dir()) or /tmp/sbsh-$UID, whose parent must exist; a directory named by
// --socket or SBSH_SOCKET must exist already, since nothing outside the directories sbsh owns
// is ever created. Then checked as ensure_private_dir does.
status ensure_socket_dir(const std::string& dir);
// Like mkdir -p with mode 0700 for each created component.
status make_dirs(const std::string& dir);
// Replaces `path` with `bytes` durably: a temporary file beside it (PATH.tmp, mode 0600),
// fsynced, renamed over it, and the directory fsynced. A crash leaves the old contents or
// the new, never half of them. Blocks: call it off the loop.
status write_file_atomically(const std::string& path, std::string_view bytes);

// A unix socket path must fit in sockaddr_un::sun_path.
status check_socket_path(const std::string& path);

std::string dirname_of(const std::string& path);

// The executable `name` in the directory of the running program, or "" when there is none:
// sbsh finds sbshd, and sbshd finds sbsh-wrapper, this way before looking on PATH.
std::string beside_self(const std::string& name);

}  // namespace sbsh
