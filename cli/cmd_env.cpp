// sbsh env ls|rm|prune: the environments that setups built (session create --setup).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/cli.h"
#include "client/json.h"
#include "client/request.h"

namespace sbsh::cli {

namespace {

namespace msg = ipc::msg;

struct env_args {
  bool json = false;
  std::string hash;
  bool force = false;
  std::string keep;
  std::chrono::milliseconds older_than{0};
};

// ls, and what prune deleted.
int print_envs(const std::vector<client::environment_info>& envs, bool json, bool pruned) {
  if (json) {
    std::puts(client::to_json(envs).c_str());
  } else if (pruned) {
    for (const auto& e : envs)
      std::printf("deleted %s (%s)\n", e.hash.c_str(), human_bytes(e.size_bytes).c_str());
  } else if (!envs.empty()) {
    std::printf("%-32s %9s  %-24s %-20s %s\n", "HASH", "SIZE", "LAST USED", "SESSIONS", "KEYS");
    for (const auto& e : envs) {
      std::string sessions, keys;
      for (const auto& s : e.sessions) sessions += (sessions.empty() ? "" : ",") + displayable(s, false);
      for (const auto& k : e.keys) keys += (keys.empty() ? "" : " ") + displayable(k, false);
      std::printf("%-32s %9s  %-24s %-20s %s\n", e.hash.c_str(), human_bytes(e.size_bytes).c_str(),
                  client::rfc3339_ms(e.last_used_ms).c_str(), sessions.empty() ? "-" : sessions.c_str(),
                  keys.empty() ? "-" : keys.c_str());
    }
  }
  return 0;
}

}  // namespace

runner declare_env(command_line& cl) {
  auto a = std::make_shared<env_args>();
  cl.describe(
      "Environments are the directories that setups build (session create --setup COMMAND --setup-key FILE), one per "
      "hash of the setup, its key files' contents and the bash that runs it, shared by every session with that hash. "
      "sbshd deletes the least recently used that no session uses when all of them hold more than its --env-cap.");
  auto& ls = cl.subcommand("ls", "list the environments, most recently used first", "list");
  ls.flag("--json", "print a JSON array instead of a table", a->json);
  auto& rm = cl.subcommand("rm", "delete an environment");
  rm.describe("Deletes the environment HASH. While a session is defined with it, it is refused unless --force.");
  rm.flag("--force", "delete it even while sessions use it (their next shell runs the setup again)", a->force);
  rm.argument("HASH", a->hash);
  auto& prune = cl.subcommand("prune", "delete the environments that no session uses");
  prune.describe(
      "Deletes every environment that no session uses, and what interrupted setups left; with --keep or "
      "--older-than, only some of them. Prints each one deleted.");
  prune.option("--keep", "N", "keep the N most recently used of them", a->keep, [](std::string_view, const std::string& v) {
    return !v.empty() && v.find_first_not_of("0123456789") == std::string::npos && v.size() < 10
               ? std::string()
               : std::string("--keep takes a number of environments, such as 3");
  });
  prune.duration("--older-than", "DURATION", "only those unused for at least DURATION (7d, 12h)", a->older_than);
  prune.flag("--json", "print a JSON array of those deleted", a->json);
  return [a, &cl, &ls, &rm, &prune](const global_opts& g) {
    if (!ls.given() && !rm.given() && !prune.given()) {
      std::fputs(cl.help().c_str(), stdout);
      return 0;
    }
    auto conn = connect(g);
    if (!conn) return fail(conn.err());
    if (ls.given()) {
      auto envs = client::request<msg::env_info>(*conn, msg::env_list{}, &msg::env_info::envs);
      if (!envs) return fail(envs.err());
      return print_envs(*envs, a->json, false);
    }
    if (rm.given()) {
      if (auto s = client::request_ok(*conn, msg::env_remove{a->hash, a->force}); !s) return fail(s.err());
      return 0;
    }
    msg::env_prune req;
    if (!a->keep.empty()) req.keep = std::stoull(a->keep);
    req.older_than_ms = static_cast<uint64_t>(std::max<int64_t>(a->older_than.count(), 0));
    auto gone = client::request<msg::env_info>(*conn, req, &msg::env_info::envs);
    if (!gone) return fail(gone.err());
    return print_envs(*gone, a->json, true);
  };
}

}  // namespace sbsh::cli
