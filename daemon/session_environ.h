// The environment a session's shells start with (its creator's: session_spec::environment),
// held once however many definitions have it. A client that creates 10,000 sessions sends
// the same 2 kB each time; sbshd interns it by content (a SHA-256 of its variables), so that
// every definition refers to one immutable copy, freed with the last definition that uses
// it, and the state directory holds it once (STATE/environs/HASH.msgpack, session_store.h).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace sbsh::daemon {

struct session_environ {
  std::string hash;               // 64 hex digits: SHA-256 of the variables, each length-prefixed
  std::vector<std::string> vars;  // NAME=VALUE, as the definition gave them
  size_t bytes = 0;               // the text it holds: every variable and a separator
};
using environ_ref = std::shared_ptr<const session_environ>;

// The one copy of the environment `vars` (in this order) that sbshd holds: the one already
// held, or a new one. Safe from any thread; an unused copy goes with its last reference.
environ_ref intern_environ(std::vector<std::string> vars);

// The hash intern_environ gives `vars`.
std::string environ_hash(const std::vector<std::string>& vars);

// Whether a name is a hash intern_environ gives (what an environment's file may be named).
bool valid_environ_hash(const std::string& s);

// How many distinct environments are held now (for tests and status).
size_t interned_environs();

}  // namespace sbsh::daemon
