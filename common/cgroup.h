// A session's resources by cgroup v2 (session create --memory, --pids, --cpu): sbshd makes a
// cgroup of the session's own beneath the one delegated to it, with the limits, and the
// wrapper starts bash in it, so that the shell and everything it starts are held by them and
// end together (cgroup.kill). cgroup v1 hierarchies are not used: where the controllers are
// not offered in v2, the limits are refused with the reason.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ipc/result.h"

namespace sbsh::cgroup {

// The controllers a session's limits need.
struct controllers {
  bool memory = false, pids = false, cpu = false;
  [[nodiscard]] bool any() const { return memory || pids || cpu; }
};

struct limits {
  uint64_t memory_max = 0;  // bytes; swap is not allowed beside it
  uint64_t pids_max = 0;
  uint64_t cpu_millis = 0;  // thousandths of a CPU
  [[nodiscard]] controllers needs() const { return {memory_max != 0, pids_max != 0, cpu_millis != 0}; }
};

// Where the cgroups of one sbshd's sessions go: a directory `sbsh-KEY` beside or beneath
// sbshd's own cgroup (KEY tells sbshds with different state directories apart).
class manager {
 public:
  explicit manager(std::string key) : key_(std::move(key)) {}

  // Makes sure the sessions' directory exists and gives its children `need`; error
  // not_supported with what is missing and what to do. When sbshd's cgroup is not the
  // hierarchy's root, sbshd and the processes it started move to a leaf of their own first:
  // cgroup v2 gives controllers to children only of a cgroup that holds no process.
  status prepare(controllers need);

  // Makes (or, for a session sbshd made before, finds) `name`'s cgroup with `l`, and returns
  // its directory.
  result<std::string> make(const std::string& name, const limits& l);

  // Removes the sessions' directory if no session's cgroup is left in it (sbshd's end).
  void release();

 private:
  std::string key_;
  std::string parent_;  // the sessions' directory, once found
  controllers enabled_;
};

// Kills every process in the cgroup at `dir` at once and removes it, waiting up to `wait_ms`
// for them to be gone. Blocks: for a worker thread, or for a wrapper with nothing else to do.
void kill_and_remove(const std::string& dir, int wait_ms);

// Kills every process in the cgroup (cgroup.kill); false when it cannot (the reason in errno).
bool kill(const std::string& dir);

// How many processes of the cgroup the kernel has killed for memory (memory.events'
// oom_kill); 0 when it says nothing.
uint64_t oom_kills(const std::string& dir);

}  // namespace sbsh::cgroup
