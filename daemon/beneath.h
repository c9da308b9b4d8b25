// Paths beneath a directory, resolved by the kernel: what the file requests (files.h) and
// exec -C in a session with a root use to reach nothing outside the session's root.
//
// Every lookup is openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS from a descriptor
// of the root: ".." above it and a symlink whose target leaves it fail in the kernel (EXDEV),
// atomically with the lookup, so a symlink a running command plants or swaps meanwhile cannot
// take it elsewhere. The kernel refuses every absolute symlink too; one whose target lies
// beneath the root's real path (the root with its own symlinks resolved) is followed all the
// same, as the session's shell follows it: the path is looked up again with that link written
// out as a path from the root, still with RESOLVE_BENEATH. (RESOLVE_IN_ROOT would instead
// take an absolute target as from the root, as in a chroot, which is not where the shell
// finds it.) What is then done to a name (rename, unlink, mkdir) is done relative to its
// parent's descriptor, never by path again.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "ipc/fd.h"
#include "ipc/result.h"

namespace sbsh::daemon::beneath {

// `given` as a path from the root at `root` (absolute, without symlinks): a relative one as
// it is, an absolute one only if it lies beneath the root (by its text) with the root's part
// taken off; "." for the root itself. Refused (outside_root) otherwise; errors name `given`.
result<std::string> relative(std::string_view given, std::string_view root);

// The root itself, for the lookups below.
result<unique_fd> open_root(const std::string& root);

// openat2(root, rel, flags, mode) beneath the root. The error names `given`, the path as the
// caller gave it: outside_root when the path leads out, file_failed with the reason otherwise.
result<unique_fd> open(int root, const std::string& rel, int flags, mode_t mode, std::string_view given);

// The directory holding the last component of `rel` (opened beneath the root, O_PATH) and that
// component's name. With make_parents, missing directories on the way are made (0755, less
// the umask). `rel` must name something below the root, not the root: "." and a path ending
// in ".." are refused.
struct parent {
  unique_fd dir;
  std::string name;
};
result<parent> open_parent(int root, const std::string& rel, bool make_parents, std::string_view given);

// Makes the directory `rel` and, with parents, what is missing above it (an existing one is
// then no error), beneath the root.
status make_dirs(int root, const std::string& rel, bool parents, std::string_view given);

// The names in the open directory `dir` (not "." and ".."), in the order read; false with
// errno when it cannot be read.
bool names_in(int dir, std::vector<std::string>* names);

// Removes everything beneath the open directory `dir` (not `dir` itself), never following a
// symlink; false when something could not be removed (errno then says why).
bool remove_contents(int dir);

// The error for errno value `e` met on `given`: outside_root for EXDEV, file_failed with
// strerror's reason otherwise.
error error_for(int e, std::string_view given);

}  // namespace sbsh::daemon::beneath
