// Request handlers: one free function per request, on_NAME, in one file per protocol group
// (ipc/protocol.h); handlers.cpp holds the table that routes to them.
#pragma once

#include "daemon/server.h"

namespace sbsh::daemon {

// handlers_daemon.cpp: the handshake (100) and the daemon's own requests (400)
void on_hello(server& srv, client_conn& c, ipc::envelope& env);
void on_status(server& srv, client_conn& c, ipc::envelope& env);
void on_shutdown(server& srv, client_conn& c, ipc::envelope& env);

// handlers_exec.cpp (300); kept commands are answered by kept_commands.h
void on_exec(server& srv, client_conn& c, ipc::envelope& env);
void on_stdin(server& srv, client_conn& c, ipc::envelope& env);  // stdin_data and stdin_eof
void on_cancel(server& srv, client_conn& c, ipc::envelope& env);
void on_release(server& srv, client_conn& c, ipc::envelope& env);
void on_command_wait(server& srv, client_conn& c, ipc::envelope& env);
void on_command_logs(server& srv, client_conn& c, ipc::envelope& env);
void on_command_kill(server& srv, client_conn& c, ipc::envelope& env);
void on_command_input(server& srv, client_conn& c, ipc::envelope& env);

// handlers_session.cpp (200)
void on_session_create(server& srv, client_conn& c, ipc::envelope& env);
void on_session_list(server& srv, client_conn& c, ipc::envelope& env);
void on_session_show(server& srv, client_conn& c, ipc::envelope& env);
void on_session_rm(server& srv, client_conn& c, ipc::envelope& env);
void on_session_restart(server& srv, client_conn& c, ipc::envelope& env);
void on_session_prune(server& srv, client_conn& c, ipc::envelope& env);
void on_kept_list(server& srv, client_conn& c, ipc::envelope& env);
void on_kept_prune(server& srv, client_conn& c, ipc::envelope& env);

// handlers_procs.cpp (600), answered by proc_table.h
void on_proc_start(server& srv, client_conn& c, ipc::envelope& env);
void on_proc_list(server& srv, client_conn& c, ipc::envelope& env);
void on_proc_kill(server& srv, client_conn& c, ipc::envelope& env);
void on_proc_wait(server& srv, client_conn& c, ipc::envelope& env);
void on_proc_logs(server& srv, client_conn& c, ipc::envelope& env);

// handlers_files.cpp (700), answered by files.h
void on_file_read(server& srv, client_conn& c, ipc::envelope& env);
void on_file_write(server& srv, client_conn& c, ipc::envelope& env);
void on_file_data(server& srv, client_conn& c, ipc::envelope& env);
void on_file_close(server& srv, client_conn& c, ipc::envelope& env);
void on_file_stat(server& srv, client_conn& c, ipc::envelope& env);
void on_file_list(server& srv, client_conn& c, ipc::envelope& env);
void on_file_remove(server& srv, client_conn& c, ipc::envelope& env);
void on_file_mkdir(server& srv, client_conn& c, ipc::envelope& env);
void on_file_move(server& srv, client_conn& c, ipc::envelope& env);

// handlers_env.cpp (800)
void on_env_list(server& srv, client_conn& c, ipc::envelope& env);
void on_env_remove(server& srv, client_conn& c, ipc::envelope& env);
void on_env_prune(server& srv, client_conn& c, ipc::envelope& env);

// Every session as `status` and `session_list` report it (handlers_session.cpp).
std::vector<session_status> describe_sessions(const server& srv);

}  // namespace sbsh::daemon
