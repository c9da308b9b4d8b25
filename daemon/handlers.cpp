// How a request reaches its handler: server::handle checks the handshake, then routes each
// message type through the table below, grouped as the protocol numbers them (ipc/protocol.h),
// each group's comment naming the one file that holds its handlers: free functions on_NAME,
// one per request (handlers.h declares them).
#include <algorithm>
#include <iterator>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "daemon/handlers.h"
#include "ipc/messages.h"

namespace sbsh::daemon {

namespace {

using ipc::errc;
using ipc::msg_type;

using handler_fn = void (*)(server&, client_conn&, ipc::envelope&);
struct handler_entry {
  msg_type type;
  handler_fn fn;
};
constexpr handler_entry kHandlers[] = {
    // 100 handshake: handlers_daemon.cpp
    {msg_type::hello, on_hello},
    // 200 sessions: handlers_session.cpp
    {msg_type::session_create, on_session_create},
    {msg_type::session_list, on_session_list},
    {msg_type::session_show, on_session_show},
    {msg_type::session_rm, on_session_rm},
    {msg_type::session_restart, on_session_restart},
    {msg_type::session_prune, on_session_prune},
    {msg_type::kept_list, on_kept_list},
    {msg_type::kept_prune, on_kept_prune},
    // 300 exec: handlers_exec.cpp
    {msg_type::exec, on_exec},
    {msg_type::stdin_data, on_stdin},
    {msg_type::stdin_eof, on_stdin},
    {msg_type::cancel, on_cancel},
    {msg_type::release, on_release},
    {msg_type::command_wait, on_command_wait},
    {msg_type::command_logs, on_command_logs},
    {msg_type::command_kill, on_command_kill},
    {msg_type::command_input, on_command_input},
    // 400 daemon: handlers_daemon.cpp
    {msg_type::status, on_status},
    {msg_type::shutdown, on_shutdown},
    // 600 background processes: handlers_procs.cpp
    {msg_type::proc_start, on_proc_start},
    {msg_type::proc_list, on_proc_list},
    {msg_type::proc_kill, on_proc_kill},
    {msg_type::proc_wait, on_proc_wait},
    {msg_type::proc_logs, on_proc_logs},
    // 700 files: handlers_files.cpp
    {msg_type::file_read, on_file_read},
    {msg_type::file_write, on_file_write},
    {msg_type::file_data, on_file_data},
    {msg_type::file_close, on_file_close},
    {msg_type::file_stat, on_file_stat},
    {msg_type::file_list, on_file_list},
    {msg_type::file_remove, on_file_remove},
    {msg_type::file_mkdir, on_file_mkdir},
    {msg_type::file_move, on_file_move},
    // 800 environments: handlers_env.cpp
    {msg_type::env_list, on_env_list},
    {msg_type::env_remove, on_env_remove},
    {msg_type::env_prune, on_env_prune},
};

}  // namespace

bool server::handles(msg_type t) {
  return std::any_of(std::begin(kHandlers), std::end(kHandlers), [t](const handler_entry& h) { return h.type == t; });
}

void server::handle(client_conn& c, ipc::envelope&& env) {
  msg_type t = env.msg.type();
  if (!c.greeted && t != msg_type::hello) {
    c.send_error(env.msg.id(), errc::handshake_required, "the first message on a connection must be hello");
    return;
  }
  for (const auto& h : kHandlers) {
    if (h.type == t) {
      h.fn(*this, c, env);
      return;
    }
  }
  c.send_error(env.msg.id(), errc::unknown_request,
               fmt::format("message type {} is not a request this sbshd knows", static_cast<uint32_t>(t)));
}

}  // namespace sbsh::daemon
