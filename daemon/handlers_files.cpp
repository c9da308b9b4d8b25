// File requests (the 700 group): read, write, stat, list, remove, make and move files beneath a
// session's root (`sbsh file`). The file service (files.h) answers them.
#include "daemon/handlers.h"

namespace sbsh::daemon {

void on_file_read(server& srv, client_conn& c, ipc::envelope& env) { srv.files().handle_read(c, env); }
void on_file_write(server& srv, client_conn& c, ipc::envelope& env) { srv.files().handle_write(c, env); }
void on_file_data(server& srv, client_conn& c, ipc::envelope& env) { srv.files().handle_data(c, env); }
void on_file_close(server& srv, client_conn& c, ipc::envelope& env) { srv.files().handle_close(c, env); }
void on_file_stat(server& srv, client_conn& c, ipc::envelope& env) { srv.files().handle_stat(c, env); }
void on_file_list(server& srv, client_conn& c, ipc::envelope& env) { srv.files().handle_list(c, env); }
void on_file_remove(server& srv, client_conn& c, ipc::envelope& env) { srv.files().handle_remove(c, env); }
void on_file_mkdir(server& srv, client_conn& c, ipc::envelope& env) { srv.files().handle_mkdir(c, env); }
void on_file_move(server& srv, client_conn& c, ipc::envelope& env) { srv.files().handle_move(c, env); }

}  // namespace sbsh::daemon
