// Request handlers: one free function per request, on_NAME, in one file per protocol group
// (ipc/protocol.h); handlers.cpp holds the table that routes to them.
#pragma once

#include "daemon/server.h"

namespace sbsh::daemon {

// Every request sbshd answers, each by its handler on_NAME, a free function in the file of its
// protocol group (ipc/protocol.h). Naming a request here declares its handler and gives it its
// row in the dispatch table (handlers.cpp), which checks against msg::all (ipc/messages.h),
// when it compiles, that every request a client may send has one and nothing else does.
#define SBSH_REQUEST_HANDLERS(X)                                                            \
  /* 100 handshake, 400 the daemon's own: handlers_daemon.cpp */                           \
  X(hello) X(status) X(shutdown)                                                            \
  /* 200 sessions: handlers_session.cpp */                                                  \
  X(session_create) X(session_list) X(session_show) X(session_rm) X(session_restart)        \
  X(session_prune) X(kept_list) X(kept_prune)                                               \
  /* 300 exec: handlers_exec.cpp; kept commands are answered by command_records.h */          \
  X(exec) X(stdin_data) X(stdin_eof) X(cancel) X(release) X(command_wait) X(command_logs)   \
  X(command_kill) X(command_input) X(lease)                                                 \
  /* 600 background processes: handlers_procs.cpp, answered by proc_table.h */              \
  X(proc_start) X(proc_list) X(proc_kill) X(proc_wait) X(proc_logs)                         \
  /* 700 files: handlers_files.cpp, answered by files.h */                                  \
  X(file_read) X(file_write) X(file_data) X(file_close) X(file_stat) X(file_list)           \
  X(file_remove) X(file_mkdir) X(file_move)                                                 \
  /* 800 environments: handlers_env.cpp */                                                  \
  X(env_list) X(env_remove) X(env_prune)

#define SBSH_DECLARE_HANDLER(name) void on_##name(server& srv, client_conn& c, ipc::envelope& env);
SBSH_REQUEST_HANDLERS(SBSH_DECLARE_HANDLER)
#undef SBSH_DECLARE_HANDLER

// Exec's stdin, both stdin_data and stdin_eof (handlers_exec.cpp).
void on_stdin(server& srv, client_conn& c, ipc::envelope& env);

// Every session as `status` and `session_list` report it (handlers_session.cpp).
std::vector<session_status> describe_sessions(server& srv);

}  // namespace sbsh::daemon
