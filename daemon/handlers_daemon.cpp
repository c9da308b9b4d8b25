// The handshake (the 100 group: hello) and the daemon's own requests (the 400 group: status,
// shutdown).
#include <unistd.h>

#include <fmt/format.h>

#include "daemon/capacity.h"
#include "daemon/handlers.h"
#include "ipc/messages.h"

namespace sbsh::daemon {

using ipc::errc;
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
  c.send(ipc::encode(msg::welcome{ipc::kProtocolVersion, "sbshd " SBSH_VERSION, ::getpid(), /*keeps_env=*/true},
                     env.msg.id()));
}

void on_status(server& srv, client_conn& c, ipc::envelope& env) {
  auto sessions = describe_sessions(srv);  // first: the counters then include what leases ran
  daemon_counters counts = srv.counters();
  counts.clients = srv.client_count();
  msg::status_reply r{::getpid(), SBSH_VERSION, srv.uptime_ms(), srv.opts().socket_path, srv.opts().state_dir,
                      std::move(sessions), counts};
  r.descriptor_limit = descriptor_limit();
  r.sessions_supported = sessions_supported(r.descriptor_limit);
  c.send(ipc::encode(r, env.msg.id()));
}

void on_shutdown(server& srv, client_conn& c, ipc::envelope& env) {
  auto req = ipc::decode<msg::shutdown>(env.msg);
  if (!req) return c.send_error(env.msg.id(), req.err());
  c.send(ipc::encode(msg::ok{}, env.msg.id()));
  srv.begin_shutdown(fmt::format("requested by client pid {}", c.peer_pid), req->keep_sessions);
}

}  // namespace sbsh::daemon
