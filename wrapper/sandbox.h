// What a confined session's shell is given besides its Landlock ruleset, prepared by the wrapper
// before it starts bash and applied by the child in spawn.cpp: the files it sees (a mount
// namespace whose root holds only the system's directories and the session's own), who it is
// (a user namespace mapped to an unprivileged id, no capabilities) and the system calls it may
// not make (seccomp). Everything the child reads from here is made beforehand, so that the
// child allocates nothing.
#pragma once

#include <linux/filter.h>
#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "common/confine.h"
#include "ipc/result.h"

namespace sbsh::wrapper {

// One path of the shell's view.
struct view_mount {
  enum class kind : unsigned char { bind_dir, bind_file, symlink };
  kind what = kind::bind_dir;
  bool read_only = true;
  // One of the session's own paths (its root, TMPDIR, --allow-*): when sbshd runs as root,
  // mounted idmapped, so that what sbshd's user owns there is the shell's own.
  bool own = false;
  std::string path;    // where the shell sees it
  std::string target;  // where the child mounts it: kNewRoot + path
  std::string source;  // kOldRoot + the host's real path; for a symlink, its text
  std::string host;    // the host's real path
};

// The most paths of its own a session may have (its root, TMPDIR, 64 of each --allow-* kind):
// each may come to the child as a descriptor, and one message carries at most 253.
inline constexpr size_t kMaxOwnMounts = 224;

// Whether `p` is `dir` or lies beneath it.
inline bool path_within(std::string_view p, std::string_view dir) {
  if (dir == "/") return true;
  return p.starts_with(dir) && (p.size() == dir.size() || p[dir.size()] == '/');
}

// Where the child builds the view and where it sees the host's root meanwhile.
inline constexpr const char* kNewRoot = "/newroot";
inline constexpr const char* kOldRoot = "/oldroot";

struct sandbox_plan {
  // Parents before what lies beneath them, so that no mount hides another.
  std::vector<view_mount> mounts;
  size_t own_count = 0;  // how many of them are `own`
  std::string cwd;       // where bash starts: the same path in the view
  // With `map_by_parent` (the wrapper is root) the wrapper writes the shell's maps: its root
  // is `uid`/`gid` outside (nobody by default, sbshd --confine-user). Otherwise the shell
  // maps its own user and group to themselves, as an unprivileged user may.
  bool map_by_parent = false;
  uid_t uid = 65534;
  gid_t gid = 65534;
  std::vector<sock_filter> seccomp;  // installed last, before execve
};

// The view for a shell with the system's rules (`system`, confine::system_rules() and bash
// and the builtin) and the session's own (`own`), starting in `cwd`. The special file
// systems (/proc, /dev, /tmp) are the child's to make. Fails when an own path is missing.
result<sandbox_plan> plan_sandbox(const std::vector<confine::rule>& system, const std::vector<confine::rule>& own,
                                  const std::string& cwd);

// The seccomp program of a confined shell: what neither Landlock nor the namespaces refuse
// (ptrace and reading other processes' memory or descriptors, BPF, perf, keyrings,
// userfaultfd, io_uring, changing mounts, new user namespaces) fails with EPERM.
result<std::vector<sock_filter>> seccomp_program();

}  // namespace sbsh::wrapper
