// Request handlers, one file per message family; handlers.cpp holds the table that routes to them.
#pragma once

#include "daemon/server.h"

namespace sbsh::daemon {

// handlers_exec.cpp
void on_exec(server& srv, client_conn& c, ipc::envelope& env);
void on_stdin(server& srv, client_conn& c, ipc::envelope& env);  // stdin_data and stdin_eof
void on_cancel(server& srv, client_conn& c, ipc::envelope& env);
void on_release(server& srv, client_conn& c, ipc::envelope& env);

// handlers_session.cpp
void on_session_create(server& srv, client_conn& c, ipc::envelope& env);
void on_session_list(server& srv, client_conn& c, ipc::envelope& env);
void on_session_show(server& srv, client_conn& c, ipc::envelope& env);
void on_session_rm(server& srv, client_conn& c, ipc::envelope& env);
void on_session_restart(server& srv, client_conn& c, ipc::envelope& env);
void on_session_prune(server& srv, client_conn& c, ipc::envelope& env);
void on_kept_list(server& srv, client_conn& c, ipc::envelope& env);
void on_kept_prune(server& srv, client_conn& c, ipc::envelope& env);

// handlers_env.cpp
void on_env_list(server& srv, client_conn& c, ipc::envelope& env);
void on_env_remove(server& srv, client_conn& c, ipc::envelope& env);
void on_env_prune(server& srv, client_conn& c, ipc::envelope& env);

// Every session as `status` and `session_list` report it (handlers_session.cpp).
std::vector<session_status> describe_sessions(const server& srv);

}  // namespace sbsh::daemon
