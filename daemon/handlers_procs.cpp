// Background process requests (the 600 group): start, list, kill, wait for and read the logs
// of the processes `sbsh start` runs. The process table (proc_table.h) answers them.
#include "daemon/handlers.h"

namespace sbsh::daemon {

void on_proc_start(server& srv, client_conn& c, ipc::envelope& env) { srv.procs().handle_start(c, env); }
void on_proc_list(server& srv, client_conn& c, ipc::envelope& env) { srv.procs().handle_list(c, env); }
void on_proc_kill(server& srv, client_conn& c, ipc::envelope& env) { srv.procs().handle_kill(c, env); }
void on_proc_wait(server& srv, client_conn& c, ipc::envelope& env) { srv.procs().handle_wait(c, env); }
void on_proc_logs(server& srv, client_conn& c, ipc::envelope& env) { srv.procs().handle_logs(c, env); }

}  // namespace sbsh::daemon
