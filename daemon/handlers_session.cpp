// Session requests (the 200 group): create, list, show, remove, restart, prune, and the
// copies of snapshots kept after their session was removed.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "daemon/handlers.h"
#include "daemon/session.h"
#include "ipc/messages.h"

namespace sbsh::daemon {

namespace msg = ipc::msg;

namespace {

// The session a request names, or an error already sent.
session* named_session(server& srv, client_conn& c, uint64_t id, std::string_view name) {
  if (auto s = check_session_name(name); !s) {
    c.send_error(id, s.err());
    return nullptr;
  }
  session* s = srv.find_session(std::string(name));
  if (s == nullptr)
    c.send_error(id, ipc::errc::no_such_session,
                 fmt::format("no session named '{}'; 'sbsh session ls' lists them", name));
  return s;
}

// Decodes a request that names a session and finds it; null when an error was sent.
template <typename M>
session* requested_session(server& srv, client_conn& c, ipc::envelope& env, std::string* name) {
  auto req = ipc::decode<M>(env.msg);
  if (!req) {
    c.send_error(env.msg.id(), req.err());
    return nullptr;
  }
  *name = std::string(req->name);
  return named_session(srv, c, env.msg.id(), *name);
}

}  // namespace

std::vector<session_status> describe_sessions(server& srv) {
  std::vector<session_status> out;
  out.reserve(srv.sessions().size());
  for (const auto& [name, s] : srv.sessions()) {
    s->jobs().read_lease();  // what a lease's holder runs, and has run
    out.push_back(s->describe());
  }
  return out;
}

void on_session_create(server& srv, client_conn& c, ipc::envelope& env) {
  auto req = ipc::decode<msg::session_create>(env.msg);
  if (!req) return c.send_error(env.msg.id(), req.err());
  std::string name(req->name);
  if (auto s = check_session_name(name); !s) return c.send_error(env.msg.id(), s.err());
  auto def = def_from_request(std::move(req->definition));
  if (!def) return c.send_error(env.msg.id(), def.err());
  // Limits this host cannot keep are refused before anything is made.
  if (def->has_cgroup_limits())
    if (auto s = srv.cgroups().prepare(cgroup::limits{def->memory_max, def->pids_max, def->cpu_millis}.needs()); !s)
      return c.send_error(env.msg.id(), s.err());
  // The creating client's environment (none: a minimal one from the user's account).
  auto environment = session_environment(def->environment_vars());
  if (!environment) return c.send_error(env.msg.id(), environment.err());
  def->set_environment(std::move(*environment));
  def->implicit = false;  // made on purpose; it expires only when idle_expiry_ms says so
  uint64_t id = env.msg.id();
  uint64_t serial = c.serial();
  // The reply may wait for a snapshot copy; the client may be gone by then.
  srv.define_session(
      name, std::move(*def), serial,
      [&srv, serial, id](const result<session*>& s) {
        auto* conn = srv.client_by_serial(serial);
        if (conn == nullptr) return;
        if (!s) conn->send_error(id, s.err());
        else conn->send(ipc::encode(msg::ok{}, id));
      },
      // An environment's setup speaks as it runs: output frames before the reply.
      [&srv, serial, id](uint32_t stream, std::string_view data) {
        if (auto* conn = srv.client_by_serial(serial)) conn->send(ipc::encode(msg::output{stream, {data}}, id));
      });
}

void on_session_list(server& srv, client_conn& c, ipc::envelope& env) {
  c.send(ipc::encode(msg::session_info{describe_sessions(srv)}, env.msg.id()));
}

void on_session_show(server& srv, client_conn& c, ipc::envelope& env) {
  std::string name;
  session* s = requested_session<msg::session_show>(srv, c, env, &name);
  if (s == nullptr) return;
  s->jobs().read_lease();
  c.send(ipc::encode(msg::session_detail{s->describe_full()}, env.msg.id()));
}

void on_session_rm(server& srv, client_conn& c, ipc::envelope& env) {
  auto req = ipc::decode<msg::session_rm>(env.msg);
  if (!req) return c.send_error(env.msg.id(), req.err());
  std::string name(req->name);
  session* s = named_session(srv, c, env.msg.id(), name);
  if (s == nullptr) return;
  if (req->keep_copy && s->def().snapshot.empty())
    return c.send_error(env.msg.id(), ipc::errc::bad_request,
                        fmt::format("session '{}' was not made from a snapshot: it has no copy to keep; "
                                    "remove it without --keep-copy",
                                    name));
  uint64_t id = env.msg.id();
  uint64_t serial = c.serial();
  // The reply waits until nothing of the session is left; the client may be gone by then.
  srv.remove_session(name, req->keep_copy, [&srv, serial, id](const std::string& kept) {
    auto* conn = srv.client_by_serial(serial);
    if (conn == nullptr) return;
    if (kept.empty()) conn->send(ipc::encode(msg::ok{}, id));
    else conn->send(ipc::encode(msg::session_removed{kept}, id));
  });
}

void on_kept_list(server& srv, client_conn& c, ipc::envelope& env) {
  uint64_t id = env.msg.id();
  uint64_t serial = c.serial();
  srv.snapshots().list_kept([&srv, serial, id](std::vector<kept_copy> copies) {
    if (auto* conn = srv.client_by_serial(serial)) conn->send(ipc::encode(msg::kept_info{std::move(copies)}, id));
  });
}

void on_kept_prune(server& srv, client_conn& c, ipc::envelope& env) {
  uint64_t id = env.msg.id();
  uint64_t serial = c.serial();
  srv.snapshots().prune_kept([&srv, serial, id](std::vector<kept_copy> copies) {
    if (auto* conn = srv.client_by_serial(serial)) conn->send(ipc::encode(msg::kept_info{std::move(copies)}, id));
  });
}

void on_session_restart(server& srv, client_conn& c, ipc::envelope& env) {
  std::string name;
  session* s = requested_session<msg::session_restart>(srv, c, env, &name);
  if (s == nullptr) return;
  s->restart(fmt::format("restarted on request (client pid {})", c.peer_pid));
  c.send(ipc::encode(msg::ok{}, env.msg.id()));
}

void on_session_prune(server& srv, client_conn& c, ipc::envelope& env) {
  auto req = ipc::decode<msg::session_prune>(env.msg);
  if (!req) return c.send_error(env.msg.id(), req.err());
  uint64_t id = env.msg.id();
  uint64_t serial = c.serial();
  // The reply waits until nothing of the sessions is left; the client may be gone by then.
  srv.prune_sessions(req->idle_ms, [&srv, serial, id](const std::vector<std::string>& names) {
    if (auto* conn = srv.client_by_serial(serial)) conn->send(ipc::encode(msg::session_pruned{names}, id));
  });
}

}  // namespace sbsh::daemon
