// Session requests: create, list, show, remove, restart.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "daemon/handlers.h"

namespace sbsh::daemon {

using ipc::frame_builder;
using ipc::msg_type;

namespace {

// The session named in a request, or an error already sent.
session* named_session(server& srv, client_conn& c, ipc::envelope& env, std::string* name) {
  auto n = env.msg.get_str("name");
  if (!n || !n.value()) {
    c.send_error(env.msg.id(), ipc::err::bad_request, "the request needs a 'name' string");
    return nullptr;
  }
  *name = std::string(*n.value());
  if (auto s = check_session_name(*name); !s) {
    c.send_error(env.msg.id(), s.err().code, s.err().message);
    return nullptr;
  }
  session* s = srv.find_session(*name);
  if (s == nullptr)
    c.send_error(env.msg.id(), ipc::err::no_session,
                 fmt::format("no session named '{}'; 'sbsh session ls' lists them", *name));
  return s;
}

}  // namespace

void on_session_create(server& srv, client_conn& c, ipc::envelope& env) {
  auto n = env.msg.get_str("name");
  if (!n || !n.value()) {
    c.send_error(env.msg.id(), ipc::err::bad_request, "session_create needs a 'name' string");
    return;
  }
  std::string name(*n.value());
  if (auto s = check_session_name(name); !s) {
    c.send_error(env.msg.id(), s.err().code, s.err().message);
    return;
  }
  auto def = def_from_request(env.msg);
  if (!def) {
    c.send_error(env.msg.id(), def.err().code, def.err().message);
    return;
  }
  uint64_t id = env.msg.id();
  uint64_t serial = c.serial();
  // The reply may wait for a snapshot copy; the client may be gone by then.
  srv.define_session(name, std::move(*def), serial, [&srv, serial, id](result<session*> s) {
    auto* conn = srv.client_by_serial(serial);
    if (conn == nullptr) return;
    if (!s) conn->send_error(id, s.err().code, s.err().message);
    else conn->send(frame_builder(msg_type::ok, id).take());
  });
}

void on_session_list(server& srv, client_conn& c, ipc::envelope& env) {
  frame_builder f(msg_type::session_info, env.msg.id());
  auto& pk = f.field("sessions");
  pk.pack_array(static_cast<uint32_t>(srv.sessions().size()));
  for (const auto& [name, s] : srv.sessions()) s->describe(pk);
  c.send(f.take());
}

void on_session_show(server& srv, client_conn& c, ipc::envelope& env) {
  std::string name;
  session* s = named_session(srv, c, env, &name);
  if (s == nullptr) return;
  frame_builder f(msg_type::session_detail, env.msg.id());
  s->describe(f.field("session"), /*full=*/true);
  c.send(f.take());
}

void on_session_rm(server& srv, client_conn& c, ipc::envelope& env) {
  std::string name;
  if (named_session(srv, c, env, &name) == nullptr) return;
  uint64_t id = env.msg.id();
  uint64_t serial = c.serial();
  // The reply waits until nothing of the session is left; the client may be gone by then.
  srv.remove_session(name, [&srv, serial, id] {
    if (auto* conn = srv.client_by_serial(serial)) conn->send(frame_builder(msg_type::ok, id).take());
  });
}

void on_session_restart(server& srv, client_conn& c, ipc::envelope& env) {
  std::string name;
  session* s = named_session(srv, c, env, &name);
  if (s == nullptr) return;
  s->restart(fmt::format("restarted on request (client pid {})", c.peer_pid));
  c.send(frame_builder(msg_type::ok, env.msg.id()).take());
}

}  // namespace sbsh::daemon
