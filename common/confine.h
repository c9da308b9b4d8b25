// Confinement by the kernel (session create --confine, --no-network): a Landlock ruleset that
// limits which files a session's shell and everything it starts may touch, and the
// namespaces it runs in. sbshd decides the rules (daemon/session_def.cpp) and asks the kernel
// what it offers; the wrapper builds the ruleset and applies it, with the namespaces, in the
// child that becomes bash (wrapper/spawn.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/fd.h"
#include "ipc/result.h"

namespace sbsh::confine {

// The Landlock ABI version this kernel offers (1 and up), or 0 without Landlock; `why` then
// says what is missing, naming the kernel.
int landlock_abi(std::string* why = nullptr);

// Whether this kernel lets sbsh-wrapper make a confined shell's user namespace (and the mount,
// PID, UTS and IPC namespaces it owns); `why` says what is missing otherwise.
bool user_namespaces(std::string* why = nullptr);

// What a rule grants beneath its path.
enum class access { read_write, read_exec, read_only };

struct rule {
  std::string path;
  access what = access::read_only;
  bool optional = false;  // a system directory this host may not have: skipped when absent
};

// A rule as text, as sbshd hands it to the wrapper (--rule): "rw:PATH" (read and write),
// "rx:PATH" (read and execute) or "ro:PATH" (read only), PATH absolute.
std::string rule_text(const rule& r);
result<rule> parse_rule(std::string_view text);

// The rules every confined session gets besides its own: the system's programs and libraries
// (read and execute), its configuration (read), the devices every program expects (/dev/null
// and the like, read and write), and /proc.
std::vector<rule> system_rules();

// A ruleset for `rules` that handles every file access this kernel's Landlock knows, and, from
// ABI 6, keeps signals and abstract UNIX sockets within the session. Opens each path (O_PATH):
// one that is absent is an error unless the rule is optional.
result<unique_fd> build_ruleset(const std::vector<rule>& rules);

// Adds a rule for `path` to `ruleset` in the child that is about to apply it: for what exists
// only in the confined shell's own view (its /proc, /tmp, /dev/pts, /dev/shm), which the
// wrapper cannot open beforehand. Async-signal-safe. Returns 0 or an errno value.
int add_rule_in_child(int ruleset, const char* path, access what);

// Applies `ruleset` to the calling thread and what it starts (no_new_privs, then
// landlock_restrict_self). Async-signal-safe: the child of a vfork calls it. Returns 0 or an
// errno value.
int restrict_self(int ruleset);

// Brings the loopback interface of the calling process's network namespace up.
// Async-signal-safe. Returns 0 or an errno value.
int loopback_up();

}  // namespace sbsh::confine
