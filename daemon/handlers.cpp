// How a request reaches its handler: server::handle checks the handshake, then routes each
// message type through the table below, grouped as the protocol numbers them (ipc/protocol.h),
// each group's comment naming the one file that holds its handlers. The handshake (hello) and
// the daemon's own requests (status, shutdown) are handled here.
#include <unistd.h>

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
namespace msg = ipc::msg;

void on_hello(server&, client_conn& c, ipc::envelope& env) {
  auto hello = ipc::decode<msg::hello>(env.msg);
  if (!hello) return c.send_error(env.msg.id(), hello.err());
  if (hello->version != ipc::kProtocolVersion) {
    c.send_error(env.msg.id(), errc::version_mismatch,
                 fmt::format("this sbshd speaks protocol version {}, the client speaks {}; use an sbsh "
                             "client from the same release as sbshd ({})",
                             ipc::kProtocolVersion, hello->version, SBSH_VERSION));
    return;
  }
  c.greeted = true;
  c.send(ipc::encode(msg::welcome{ipc::kProtocolVersion, "sbshd " SBSH_VERSION, ::getpid()}, env.msg.id()));
}

void on_status(server& srv, client_conn& c, ipc::envelope& env) {
  daemon_counters counts = srv.counters();
  counts.clients = srv.client_count();
  msg::status_reply r{::getpid(), SBSH_VERSION, srv.uptime_ms(), srv.opts().socket_path, srv.opts().state_dir,
                      describe_sessions(srv), counts};
  c.send(ipc::encode(r, env.msg.id()));
}

void on_shutdown(server& srv, client_conn& c, ipc::envelope& env) {
  auto req = ipc::decode<msg::shutdown>(env.msg);
  if (!req) return c.send_error(env.msg.id(), req.err());
  c.send(ipc::encode(msg::ok{}, env.msg.id()));
  srv.begin_shutdown(fmt::format("requested by client pid {}", c.peer_pid), req->keep_sessions);
}

using handler_fn = void (*)(server&, client_conn&, ipc::envelope&);
struct handler_entry {
  msg_type type;
  handler_fn fn;
};
constexpr handler_entry kHandlers[] = {
    // 100 handshake
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
    // 300 exec: handlers_exec.cpp; kept commands: kept_commands.cpp
    {msg_type::exec, on_exec},
    {msg_type::stdin_data, on_stdin},
    {msg_type::stdin_eof, on_stdin},
    {msg_type::cancel, on_cancel},
    {msg_type::release, on_release},
    {msg_type::command_wait, [](server& s, client_conn& c, ipc::envelope& e) { s.kept().handle_wait(c, e); }},
    {msg_type::command_logs, [](server& s, client_conn& c, ipc::envelope& e) { s.kept().handle_logs(c, e); }},
    {msg_type::command_kill, [](server& s, client_conn& c, ipc::envelope& e) { s.kept().handle_kill(c, e); }},
    {msg_type::command_input, [](server& s, client_conn& c, ipc::envelope& e) { s.kept().handle_input(c, e); }},
    // 400 daemon
    {msg_type::status, on_status},
    {msg_type::shutdown, on_shutdown},
    // 600 background processes: proc_table.cpp
    {msg_type::proc_start, [](server& s, client_conn& c, ipc::envelope& e) { s.procs().handle_start(c, e); }},
    {msg_type::proc_list, [](server& s, client_conn& c, ipc::envelope& e) { s.procs().handle_list(c, e); }},
    {msg_type::proc_kill, [](server& s, client_conn& c, ipc::envelope& e) { s.procs().handle_kill(c, e); }},
    {msg_type::proc_wait, [](server& s, client_conn& c, ipc::envelope& e) { s.procs().handle_wait(c, e); }},
    {msg_type::proc_logs, [](server& s, client_conn& c, ipc::envelope& e) { s.procs().handle_logs(c, e); }},
    // 700 files: files.cpp
    {msg_type::file_read, [](server& s, client_conn& c, ipc::envelope& e) { s.files().handle_read(c, e); }},
    {msg_type::file_write, [](server& s, client_conn& c, ipc::envelope& e) { s.files().handle_write(c, e); }},
    {msg_type::file_data, [](server& s, client_conn& c, ipc::envelope& e) { s.files().handle_data(c, e); }},
    {msg_type::file_close, [](server& s, client_conn& c, ipc::envelope& e) { s.files().handle_close(c, e); }},
    {msg_type::file_stat, [](server& s, client_conn& c, ipc::envelope& e) { s.files().handle_stat(c, e); }},
    {msg_type::file_list, [](server& s, client_conn& c, ipc::envelope& e) { s.files().handle_list(c, e); }},
    {msg_type::file_remove, [](server& s, client_conn& c, ipc::envelope& e) { s.files().handle_remove(c, e); }},
    {msg_type::file_mkdir, [](server& s, client_conn& c, ipc::envelope& e) { s.files().handle_mkdir(c, e); }},
    {msg_type::file_move, [](server& s, client_conn& c, ipc::envelope& e) { s.files().handle_move(c, e); }},
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
