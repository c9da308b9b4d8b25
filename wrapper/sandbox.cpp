// Preparing a confined shell's view and seccomp program (sandbox.h). Runs in the wrapper before
// it starts bash; spawn.cpp's child applies what is made here.
#include "wrapper/sandbox.h"

#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string_view>

#include <fmt/format.h>

#include "ipc/fd.h"
#include "ipc/protocol.h"

namespace sbsh::wrapper {

namespace {

// What the child makes itself: a /proc of the shell's PID namespace, a devpts instance, and
// no /sys at all (it tells about the host's devices, and nothing a shell needs is there).
bool made_by_child(std::string_view p) {
  return p == "/proc" || p == "/sys" || p == "/dev/ptmx" || p == "/dev/pts";
}

// The entry for `r`, or nullopt when an optional system path is absent here.
result<std::optional<view_mount>> entry_for(const confine::rule& r, bool own) {
  view_mount m;
  m.own = own;
  m.path = r.path;
  m.target = kNewRoot + r.path;
  m.read_only = r.what != confine::access::read_write;
  struct stat st{};
  if (::lstat(r.path.c_str(), &st) != 0) {
    if (r.optional && (errno == ENOENT || errno == ENOTDIR)) return std::optional<view_mount>();
    return make_error(ipc::errc::bad_directory, fmt::format("cannot give the shell {}: {}", r.path, std::strerror(errno)));
  }
  // The system's symlinks (/bin -> usr/bin on a merged /usr) are made again as they are.
  if (S_ISLNK(st.st_mode) && !own) {
    char text[PATH_MAX];
    ssize_t n = ::readlink(r.path.c_str(), text, sizeof text - 1);
    if (n > 0) {
      m.what = view_mount::kind::symlink;
      m.source.assign(text, static_cast<size_t>(n));
      return std::optional<view_mount>(std::move(m));
    }
  }
  char real[PATH_MAX];
  if (::realpath(r.path.c_str(), real) == nullptr || ::stat(real, &st) != 0)
    return make_error(ipc::errc::bad_directory, fmt::format("cannot give the shell {}: {}", r.path, std::strerror(errno)));
  m.host = real;
  m.source = kOldRoot + m.host;
  m.what = S_ISDIR(st.st_mode) ? view_mount::kind::bind_dir : view_mount::kind::bind_file;
  return std::optional<view_mount>(std::move(m));
}

}  // namespace

result<sandbox_plan> plan_sandbox(const std::vector<confine::rule>& system, const std::vector<confine::rule>& own,
                                  const std::string& cwd) {
  sandbox_plan plan;
  plan.cwd = cwd;
  std::vector<std::string> system_dirs;  // the host's real paths of the system's directories
  for (const auto& r : system) {
    if (made_by_child(r.path)) continue;
    auto e = entry_for(r, false);
    if (!e) return e.err();
    if (!*e) continue;
    view_mount& m = **e;
    // bash and the builtin where a system directory already holds them.
    if (m.what != view_mount::kind::symlink &&
        std::any_of(system_dirs.begin(), system_dirs.end(),
                    [&m](const std::string& d) { return path_within(m.host, d); }))
      continue;
    if (m.what == view_mount::kind::bind_dir) system_dirs.push_back(m.host);
    if (r.path.starts_with("/dev/")) m.read_only = false;  // the devices every program writes to
    plan.mounts.push_back(std::move(m));
  }
  for (const auto& r : own) {
    auto e = entry_for(r, true);
    if (!e) return e.err();
    if (*e) plan.mounts.push_back(std::move(**e));
  }
  std::stable_sort(plan.mounts.begin(), plan.mounts.end(),
                   [](const view_mount& a, const view_mount& b) { return a.path < b.path; });
  plan.own_count = static_cast<size_t>(std::count_if(plan.mounts.begin(), plan.mounts.end(),
                                                     [](const view_mount& m) { return m.own; }));
  if (plan.own_count > kMaxOwnMounts)
    return make_error(ipc::errc::invalid, fmt::format("a confined session may have at most {} paths of its own", kMaxOwnMounts));
  return plan;
}

result<std::vector<sock_filter>> seccomp_program() {
  std::unique_ptr<void, void (*)(scmp_filter_ctx)> ctx(seccomp_init(SCMP_ACT_ALLOW), seccomp_release);
  if (!ctx) return make_error(ipc::errc::spawn, "cannot make a seccomp filter");
  const uint32_t deny = SCMP_ACT_ERRNO(EPERM);
  int rc = 0;
  for (const char* name :
       {"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "bpf", "perf_event_open", "keyctl",
        "add_key", "request_key", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "mount",
        "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
        "mount_setattr", "setns", "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
        "acct", "swapon", "swapoff", "reboot", "syslog", "personality"}) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not a system call of this architecture
    if (std::strcmp(name, "personality") == 0) {
      // Only the flags that weaken address-space randomisation or enable old behaviours are
      // refused; setarch and the like use the rest.
      rc = seccomp_rule_add(ctx.get(), deny, nr, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, 0x0040000, 0x0040000));
    } else {
      rc = seccomp_rule_add(ctx.get(), deny, nr, 0);
    }
    if (rc != 0) break;
  }
  // A new user namespace would give its maker every capability again, inside it. clone3's
  // flags are in memory, beyond seccomp's reach: it fails with ENOSYS, and the C library falls
  // back to clone, whose flags are checked.
  if (rc == 0)
    rc = seccomp_rule_add(ctx.get(), deny, SCMP_SYS(unshare), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
  if (rc == 0)
    rc = seccomp_rule_add(ctx.get(), deny, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
  if (rc == 0) rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (rc != 0) return make_error(ipc::errc::spawn, fmt::format("cannot make a seccomp filter: {}", std::strerror(-rc)));
  unique_fd mem(::memfd_create("sbsh-seccomp", MFD_CLOEXEC));
  if (!mem || (rc = seccomp_export_bpf(ctx.get(), mem.get())) != 0)
    return make_error(ipc::errc::spawn, fmt::format("cannot make a seccomp filter: {}",
                                                    std::strerror(mem ? -rc : errno)));
  off_t size = ::lseek(mem.get(), 0, SEEK_END);
  if (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0)
    return make_error(ipc::errc::spawn, "cannot make a seccomp filter: libseccomp exported no program");
  std::vector<sock_filter> prog(static_cast<size_t>(size) / sizeof(sock_filter));
  if (::pread(mem.get(), prog.data(), static_cast<size_t>(size), 0) != size)
    return make_error(ipc::errc::spawn, fmt::format("cannot read the seccomp filter: {}", std::strerror(errno)));
  return prog;
}

}  // namespace sbsh::wrapper
