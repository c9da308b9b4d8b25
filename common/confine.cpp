#include "common/confine.h"
#include "ipc/protocol.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

namespace sbsh::confine {

namespace {

// The access rights of every ABI, named here: Debian 12's headers stop at ABI 2.
constexpr uint64_t kFsV1 = (1ULL << 13) - 1;  // EXECUTE .. MAKE_SYM
constexpr uint64_t kFsRefer = 1ULL << 13;      // ABI 2
constexpr uint64_t kFsTruncate = 1ULL << 14;   // ABI 3
constexpr uint64_t kFsIoctlDev = 1ULL << 15;   // ABI 5
constexpr uint64_t kScopeAbstractUnix = 1ULL << 0;  // ABI 6
constexpr uint64_t kScopeSignal = 1ULL << 1;        // ABI 6

constexpr uint64_t kExecute = 1ULL << 0, kWriteFile = 1ULL << 1, kReadFile = 1ULL << 2, kReadDir = 1ULL << 3;
// What a rule on a file (not a directory) may grant.
constexpr uint64_t kFileRights = kExecute | kWriteFile | kReadFile | kFsTruncate | kFsIoctlDev;

// landlock_ruleset_attr as ABI 6 has it; the size given to the kernel says which fields it reads.
struct ruleset_attr {
  uint64_t handled_access_fs = 0;
  uint64_t handled_access_net = 0;
  uint64_t scoped = 0;
};

uint64_t handled_fs(int abi) {
  uint64_t fs = kFsV1;
  if (abi >= 2) fs |= kFsRefer;
  if (abi >= 3) fs |= kFsTruncate;
  if (abi >= 5) fs |= kFsIoctlDev;
  return fs;
}

uint64_t rights_of(access a, uint64_t handled) {
  switch (a) {
    case access::read_write:
      return handled;
    case access::read_exec:
      return kExecute | kReadFile | kReadDir;
    case access::read_only:
      return kReadFile | kReadDir;
  }
  return 0;
}

std::string kernel_release() {
  utsname u{};
  return ::uname(&u) == 0 ? u.release : "unknown";
}

}  // namespace

int landlock_abi(std::string* why) {
  long v = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (v > 0) return static_cast<int>(v);
  int e = errno;
  if (why != nullptr) {
    if (e == EOPNOTSUPP)
      *why = fmt::format(
          "Landlock is built into this kernel ({}) but not enabled: add landlock to its lsm= boot parameter",
          kernel_release());
    else
      *why = fmt::format("this kernel ({}) has no Landlock (Linux 5.13 or later, built with "
                         "CONFIG_SECURITY_LANDLOCK, is needed): {}",
                         kernel_release(), std::strerror(e));
  }
  return 0;
}

bool user_namespaces(std::string* why) {
  auto say = [why](std::string text) {
    if (why != nullptr) *why = std::move(text);
    return false;
  };
  struct stat st{};
  if (::stat("/proc/self/ns/user", &st) != 0)
    return say(fmt::format("this kernel ({}) has no user namespaces (CONFIG_USER_NS)", kernel_release()));
  long most = -1;
  if (FILE* f = std::fopen("/proc/sys/user/max_user_namespaces", "re")) {
    if (std::fscanf(f, "%ld", &most) != 1) most = -1;
    std::fclose(f);
  }
  if (most == 0) return say("user namespaces are disabled here (user.max_user_namespaces is 0): raise it");
  if (FILE* f = std::fopen("/proc/sys/kernel/unprivileged_userns_clone", "re")) {
    int allowed = 1;
    if (std::fscanf(f, "%d", &allowed) != 1) allowed = 1;
    std::fclose(f);
    if (allowed == 0 && ::geteuid() != 0)
      return say("this kernel allows user namespaces only to root (kernel.unprivileged_userns_clone is 0)");
  }
  // What the settings cannot say: a process in a chroot, or in a container whose seccomp
  // profile or LSM forbids them, gets none. Asked once, of a child that exits at once.
  static const int refused = [] {
    constexpr size_t kStack = size_t{64} * 1024;
    void* stack = ::mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) return errno;
    pid_t child = ::clone(+[](void*) -> int { return 0; }, static_cast<char*>(stack) + kStack, CLONE_NEWUSER | SIGCHLD,
                          nullptr);
    int e = child < 0 ? errno : 0;
    if (child > 0) ::waitpid(child, nullptr, 0);
    ::munmap(stack, kStack);
    return e;
  }();
  if (refused != 0)
    return say(fmt::format("the kernel refuses this process a user namespace ({}): it may run in a chroot, or in a "
                           "container that forbids them; run sbshd where it may have one",
                           std::strerror(refused)));
  return true;
}

std::string rule_text(const rule& r) {
  std::string_view mode = r.what == access::read_write ? "rw" : r.what == access::read_exec ? "rx" : "ro";
  return fmt::format("{}:{}", mode, r.path);
}

result<rule> parse_rule(std::string_view text) {
  size_t colon = text.find(':');
  std::string_view mode = text.substr(0, colon);
  rule r;
  r.path = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
  if (mode == "rw") r.what = access::read_write;
  else if (mode == "rx") r.what = access::read_exec;
  else if (mode == "ro") r.what = access::read_only;
  else return make_error(ipc::errc::invalid, fmt::format("--rule {}: give rw:PATH, rx:PATH or ro:PATH", text));
  if (r.path.empty() || r.path[0] != '/')
    return make_error(ipc::errc::invalid, fmt::format("--rule {}: the path must be absolute", text));
  return r;
}

std::vector<rule> system_rules() {
  std::vector<rule> r;
  for (const char* p : {"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/opt"})
    r.push_back({p, access::read_exec, true});
  for (const char* p : {"/etc", "/proc", "/sys", "/run/systemd/resolve"}) r.push_back({p, access::read_only, true});
  for (const char* p : {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx",
                        "/dev/pts"})
    r.push_back({p, access::read_write, true});
  return r;
}

result<unique_fd> build_ruleset(const std::vector<rule>& rules) {
  std::string why;
  int abi = landlock_abi(&why);
  if (abi == 0) return make_error(ipc::errc::no_landlock, why);
  ruleset_attr attr;
  attr.handled_access_fs = handled_fs(abi);
  size_t size = sizeof attr.handled_access_fs;
  if (abi >= 6) {
    attr.scoped = kScopeAbstractUnix | kScopeSignal;
    size = sizeof attr;
  }
  int fd = static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, size, 0));
  if (fd < 0)
    return make_error(ipc::errc::no_landlock,
                      fmt::format("cannot create a Landlock ruleset: {}", std::strerror(errno)));
  unique_fd ruleset(fd);
  for (const auto& r : rules) {
    unique_fd path(::open(r.path.c_str(), O_PATH | O_CLOEXEC));
    if (!path) {
      if (r.optional && (errno == ENOENT || errno == ENOTDIR)) continue;
      return make_error(ipc::errc::bad_directory,
                        fmt::format("cannot open {} for its rule: {}", r.path, std::strerror(errno)));
    }
    struct stat st{};
    if (::fstat(path.get(), &st) != 0)
      return make_error(ipc::errc::bad_directory, fmt::format("cannot stat {}: {}", r.path, std::strerror(errno)));
    uint64_t allowed = rights_of(r.what, attr.handled_access_fs) & attr.handled_access_fs;
    if (!S_ISDIR(st.st_mode)) allowed &= kFileRights;
    landlock_path_beneath_attr beneath{};
    beneath.allowed_access = allowed;
    beneath.parent_fd = path.get();
    if (::syscall(SYS_landlock_add_rule, ruleset.get(), LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) != 0)
      return make_error(ipc::errc::no_landlock,
                        fmt::format("cannot add the rule for {}: {}", r.path, std::strerror(errno)));
  }
  return ruleset;
}

int add_rule_in_child(int ruleset, const char* path, access what) {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi <= 0) return errno;
  int fd = ::open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return errno;
  struct stat st{};
  int e = ::fstat(fd, &st) == 0 ? 0 : errno;
  uint64_t handled = handled_fs(static_cast<int>(abi));
  landlock_path_beneath_attr beneath{};
  beneath.allowed_access = rights_of(what, handled) & handled;
  if (e == 0 && !S_ISDIR(st.st_mode)) beneath.allowed_access &= kFileRights;
  beneath.parent_fd = fd;
  if (e == 0 && ::syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) != 0) e = errno;
  ::close(fd);
  return e;
}

int restrict_self(int ruleset) {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (::syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) return errno;
  return 0;
}

int loopback_up() {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return errno;
  ifreq ifr;
  std::memset(&ifr, 0, sizeof ifr);
  std::memcpy(ifr.ifr_name, "lo", 3);
  int e = 0;
  if (::ioctl(s, SIOCGIFFLAGS, &ifr) != 0) e = errno;
  if (e == 0) {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
    if (::ioctl(s, SIOCSIFFLAGS, &ifr) != 0) e = errno;
  }
  ::close(s);
  return e;
}

}  // namespace sbsh::confine
