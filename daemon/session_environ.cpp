// Interned session environments: one immutable copy per distinct content, found by hash.
#include "daemon/session_environ.h"

#include <sha2.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

namespace sbsh::daemon {

namespace {

// The table of environments held, by hash. A copy's deleter removes its entry, and may run
// on any thread that drops the last reference (a definition copied into work on the thread
// pool), hence the mutex. Each copy holds the table, so that the table outlives them all.
struct environ_table {
  std::mutex mu;
  std::unordered_map<std::string, std::weak_ptr<const session_environ>> held;
};

std::shared_ptr<environ_table> table() {
  static const auto t = std::make_shared<environ_table>();
  return t;
}

}  // namespace

std::string environ_hash(const std::vector<std::string>& vars) {
  SHA2_CTX ctx;
  SHA256Init(&ctx);
  for (const auto& v : vars) {
    uint64_t n = v.size();  // each variable's length first, so that no two lists hash alike
    SHA256Update(&ctx, reinterpret_cast<const uint8_t*>(&n), sizeof n);
    SHA256Update(&ctx, reinterpret_cast<const uint8_t*>(v.data()), v.size());
  }
  uint8_t d[SHA256_DIGEST_LENGTH];
  SHA256Final(d, &ctx);
  std::string out;
  out.reserve(2 * sizeof d);
  for (uint8_t b : d) out += fmt::format("{:02x}", b);
  return out;
}

bool valid_environ_hash(const std::string& s) {
  if (s.size() != size_t{2} * SHA256_DIGEST_LENGTH) return false;
  return std::ranges::all_of(s, [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

environ_ref intern_environ(std::vector<std::string> vars) {
  std::string hash = environ_hash(vars);
  auto t = table();
  std::lock_guard lock(t->mu);
  auto& slot = t->held[hash];
  if (auto held = slot.lock()) return held;
  auto fresh = std::make_unique<session_environ>();
  fresh->hash = hash;
  for (const auto& v : vars) fresh->bytes += v.size() + 1;
  fresh->vars = std::move(vars);
  environ_ref ref(fresh.release(), [t](const session_environ* e) {
    {
      std::lock_guard lock(t->mu);
      // Interned again since it expired: the entry is the new copy's.
      if (auto it = t->held.find(e->hash); it != t->held.end() && it->second.expired()) t->held.erase(it);
    }
    delete e;
  });
  slot = ref;
  return ref;
}

size_t interned_environs() {
  auto t = table();
  std::lock_guard lock(t->mu);
  size_t n = 0;
  for (const auto& [hash, e] : t->held) n += e.expired() ? 0 : 1;
  return n;
}

}  // namespace sbsh::daemon
