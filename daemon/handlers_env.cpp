// Environment requests (the 800 group): list the environments that setups built, remove one,
// prune those no session uses.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "common/clock.h"
#include "daemon/handlers.h"
#include "ipc/messages.h"

namespace sbsh::daemon {

namespace msg = ipc::msg;

void on_env_list(server& srv, client_conn& c, ipc::envelope& env) {
  uint64_t id = env.msg.id();
  uint64_t serial = c.serial();
  srv.list_envs([&srv, serial, id](std::vector<environment_info> envs) {
    if (auto* conn = srv.client_by_serial(serial)) conn->send(ipc::encode(msg::env_info{std::move(envs)}, id));
  });
}

void on_env_remove(server& srv, client_conn& c, ipc::envelope& env) {
  auto req = ipc::decode<msg::env_remove>(env.msg);
  if (!req) return c.send_error(env.msg.id(), req.err());
  uint64_t id = env.msg.id();
  uint64_t serial = c.serial();
  // Refused while in use (checked now, on the loop: no listing needed).
  std::string hash(req->hash);
  auto users = hash.empty() || hash.find('/') != std::string::npos ? std::vector<std::string>{}
                                                                    : srv.env_users(srv.envs().path_of(hash));
  if (!users.empty() && !req->force)
    return c.send_error(id, ipc::errc::env_in_use,
                        fmt::format("environment {} is used by session{} {}; remove {} first, or give --force (their "
                                    "next shell then runs the setup again)",
                                    hash, users.size() == 1 ? "" : "s", fmt::join(users, ", "),
                                    users.size() == 1 ? "it" : "them"));
  auto removed = srv.envs().remove(hash, [&srv, serial, id] {
    if (auto* conn = srv.client_by_serial(serial)) conn->send(ipc::encode(msg::ok{}, id));
  });
  if (!removed) c.send_error(id, removed.err());
}

void on_env_prune(server& srv, client_conn& c, ipc::envelope& env) {
  auto req = ipc::decode<msg::env_prune>(env.msg);
  if (!req) return c.send_error(env.msg.id(), req.err());
  uint64_t id = env.msg.id();
  uint64_t serial = c.serial();
  auto keep = req->keep;
  uint64_t older_than_ms = req->older_than_ms;
  srv.envs().sweep_incomplete();
  srv.evict_envs(
      [keep, older_than_ms](std::vector<environment_info> envs) {
        int64_t before = wall_ms() - static_cast<int64_t>(std::min<uint64_t>(older_than_ms, INT64_MAX / 2));
        std::vector<environment_info> out;
        uint64_t kept = 0;
        for (auto& e : envs) {  // most recently used first
          if (!e.sessions.empty()) continue;
          bool stays = (keep && kept < *keep) || (older_than_ms > 0 && e.last_used_ms >= before);
          if (stays) ++kept;
          else out.push_back(std::move(e));
        }
        return out;
      },
      [&srv, serial, id](std::vector<environment_info> gone) {
        if (auto* conn = srv.client_by_serial(serial)) conn->send(ipc::encode(msg::env_info{std::move(gone)}, id));
      });
}

}  // namespace sbsh::daemon
