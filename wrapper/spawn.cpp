// Starting bash: clone() with CLONE_VM | CLONE_VFORK, then exec, as posix_spawn does. The
// child runs on the wrapper's memory until execve(): it calls only async-signal-safe
// functions and writes nothing but its own stack and, when it fails, the error it reports.
//
// A confined session's shell (a sandbox_plan, sandbox.h) gets user, mount, PID, UTS and IPC
// namespaces of its own; the child builds its view of the files, drops every capability,
// applies the Landlock ruleset and installs the seccomp program, in that order, before it
// execs bash. When this process is root, the shell's user namespace maps its root to an
// unprivileged user, which only this process may write (the child, as a namespace's maker,
// may map only its own user): the child is then cloned without CLONE_VM | CLONE_VFORK, waits
// until this process has written its maps and sent it the session's directories mounted
// idmapped, and reports a failure over a socket that its execve() closes.
#include "wrapper/spawn.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <span>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/confine.h"
#include "ipc/fd.h"
#include "ipc/protocol.h"
#include "ipc/shell_channel.h"
#include "ipc/socket_io.h"
#include "wrapper/sandbox.h"

namespace sbsh::wrapper {

namespace {

// What a child that cannot exec bash reports: the errno value, and what it was doing. The
// pointers are valid in the parent too: they point to string literals or to the limits, at
// the same addresses in a child that is a copy of this process.
struct child_report {
  int error = 0;
  const rlimit_spec* failed_limit = nullptr;  // set with error when a limit was refused
  const char* failed_step = nullptr;          // set with error when confinement failed
};

struct child_args {
  const char* bash_path;
  shell_fds fds;
  pid_t parent;
  std::span<const rlimit_spec> limits;
  shell_confinement confinement;
  char* const* argv = nullptr;  // nullptr: the serving shell's
  bool user_ns = false;
  char uid_map[64] = {}, gid_map[64] = {};  // written by the child into its user namespace
  // The child's end of the socket to its parent when the parent maps it (sandbox_plan's
  // map_by_parent); -1 when the child shares the parent's memory and reports in `report`.
  int link = -1;
  child_report report{};  // set by a child sharing the parent's memory; read once it has exited
};

[[noreturn]] void child_fail(child_args* a, int err, const char* step = nullptr) {
  a->report.error = err;
  if (step != nullptr) a->report.failed_step = step;
  if (a->link >= 0) (void)::send(a->link, &a->report, sizeof a->report, MSG_NOSIGNAL);
  ::_exit(127);
}

// Writes `text` to /proc/self/FILE (a user namespace's maps).
void write_self(child_args* a, const char* path, const char* text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || ::write(fd, text, std::strlen(text)) < 0) child_fail(a, errno, path);
  ::close(fd);
}

// Makes each missing directory above `path`, as `mkdir -p` of its parent would.
void make_parents(child_args* a, const char* path) {
  char buf[PATH_MAX];
  size_t n = std::strlen(path);
  if (n >= sizeof buf) child_fail(a, ENAMETOOLONG, "building the shell's view of the files");
  std::memcpy(buf, path, n + 1);
  for (size_t i = 1; i < n; ++i) {
    if (buf[i] != '/') continue;
    buf[i] = '\0';
    if (::mkdir(buf, 0755) != 0 && errno != EEXIST) child_fail(a, errno, "building the shell's view of the files");
    buf[i] = '/';
  }
}

void mount_or_fail(child_args* a, const char* source, const char* target, const char* type, unsigned long flags,
                   const char* data, const char* step) {
  if (::mount(source, target, type, flags, data) != 0) child_fail(a, errno, step);
}

// Puts `m` in the view: its symlink, or its host path bound there (`fd`, when not -1, is
// that path already mounted idmapped by the parent), read-only as the rule says, never
// honouring set-user-ID bits, nor device nodes outside /dev.
void place(child_args* a, const view_mount& m, int fd) {
  const char* target = m.target.c_str();
  make_parents(a, target);
  if (m.what == view_mount::kind::symlink) {
    if (::symlink(m.source.c_str(), target) != 0 && errno != EEXIST) child_fail(a, errno, "making the view's symlinks");
    return;
  }
  if (m.what == view_mount::kind::bind_dir) {
    if (::mkdir(target, 0755) != 0 && errno != EEXIST) child_fail(a, errno, "building the shell's view of the files");
  } else {
    int f = ::open(target, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
    if (f < 0) child_fail(a, errno, "building the shell's view of the files");
    ::close(f);
  }
  if (fd >= 0) {
    if (::move_mount(fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) != 0)
      child_fail(a, errno, "mounting the session's directories");
    ::close(fd);
    return;
  }
  mount_or_fail(a, m.source.c_str(), target, nullptr, MS_BIND | MS_REC, nullptr, "mounting the session's directories");
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_NOSUID | (m.read_only ? MOUNT_ATTR_RDONLY : 0);
  if (std::strncmp(m.path.c_str(), "/dev/", 5) != 0) attr.attr_set |= MOUNT_ATTR_NODEV;
  if (::mount_setattr(AT_FDCWD, target, AT_RECURSIVE, &attr, sizeof attr) != 0)
    child_fail(a, errno, "making the view's mounts read-only");
}

// The special file systems of the view: a /proc of the shell's PID namespace (made while the
// host's is still mounted: the kernel allows a new one only then), a /dev of the usual
// devices (bound by `place`), a devpts instance of its own, and shared memory.
void make_special_mounts(child_args* a) {
  constexpr unsigned long kSafe = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  make_parents(a, "/newroot/proc/");
  mount_or_fail(a, "proc", "/newroot/proc", "proc", kSafe, nullptr, "mounting the shell's /proc");
  make_parents(a, "/newroot/dev/pts/");
  mount_or_fail(a, "devpts", "/newroot/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620",
                "mounting the shell's /dev/pts");
  make_parents(a, "/newroot/dev/shm/");
  mount_or_fail(a, "tmpfs", "/newroot/dev/shm", "tmpfs", kSafe, "mode=1777", "mounting the shell's /dev/shm");
  const char* links[][2] = {{"pts/ptmx", "/newroot/dev/ptmx"},
                            {"/proc/self/fd", "/newroot/dev/fd"},
                            {"/proc/self/fd/0", "/newroot/dev/stdin"},
                            {"/proc/self/fd/1", "/newroot/dev/stdout"},
                            {"/proc/self/fd/2", "/newroot/dev/stderr"}};
  for (const auto& l : links)
    if (::symlink(l[0], l[1]) != 0 && errno != EEXIST) child_fail(a, errno, "making the view's symlinks");
}

// The first step of the shell's view, as bubblewrap builds one: a tmpfs becomes the root (the
// host's is then at kOldRoot), and a second one (kNewRoot) will receive the system's
// directories, the session's own and the special file systems; the private /tmp first: the
// session's directories may lie beneath it.
void begin_view(child_args* a) {
  mount_or_fail(a, nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr, "making the mounts private");
  mount_or_fail(a, "tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k",
                "mounting a tmpfs to build the view on");
  if (::chdir("/tmp") != 0 || ::mkdir("newroot", 0755) != 0 || ::mkdir("oldroot", 0755) != 0 ||
      ::syscall(SYS_pivot_root, "/tmp", "/tmp/oldroot") != 0 || ::chdir("/") != 0)
    child_fail(a, errno, "entering the tmpfs to build the view on");
  mount_or_fail(a, "tmpfs", kNewRoot, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755", "mounting the view's root");
  make_parents(a, "/newroot/tmp/");
  mount_or_fail(a, "tmpfs", "/newroot/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", "mounting the shell's /tmp");
}

// The last step: kNewRoot becomes the root in turn and the first tmpfs, with the host's tree
// beneath it, is detached; the view's root is made read-only and the shell's directory entered.
void detach_host(child_args* a) {
  // One lazy unmount, after the pivot, detaches the tmpfs built on and the host's tree beneath
  // it together: each unmount waits for an RCU grace period.
  if (::chdir(kNewRoot) != 0 || ::syscall(SYS_pivot_root, ".", ".") != 0 || ::umount2(".", MNT_DETACH) != 0 ||
      ::chdir("/") != 0)
    child_fail(a, errno, "entering the view");
}

void seal_view(child_args* a, const char* cwd) {
  mount_attr ro{};
  ro.attr_set = MOUNT_ATTR_RDONLY;
  if (::mount_setattr(AT_FDCWD, "/", 0, &ro, sizeof ro) != 0) child_fail(a, errno, "making the view's root read-only");
  if (::chdir(cwd) != 0) child_fail(a, errno, "entering the session's directory in the view");
}

void enter_view(child_args* a, const char* cwd) {
  detach_host(a);
  seal_view(a, cwd);
}

// Builds the shell's view: `fds` holds, for each own path in order, its idmapped mount or -1.
void build_view(child_args* a, const sandbox_plan& plan, const int* fds) {
  begin_view(a);
  size_t own = 0;
  for (const auto& m : plan.mounts) place(a, m, m.own ? fds[own++] : -1);
  make_special_mounts(a);
  enter_view(a, plan.cwd.c_str());
}

// Waits for the parent to map this child's user namespace, and receives the idmapped mounts
// of the session's own paths into `fds` (-1 where there is none), in order. Then becomes the
// namespace's root, that is the unprivileged user outside, without supplementary groups.
void take_maps_from_parent(child_args* a, const sandbox_plan& plan, int* fds) {
  unsigned char has_fd[kMaxOwnMounts] = {};
  std::array<int, kMaxOwnMounts> got{};
  iovec iov{has_fd, sizeof has_fd};
  ipc::received r = ipc::recv_parts_with_fds(a->link, {&iov, 1}, got);
  if (r.bytes <= 0) child_fail(a, r.bytes < 0 ? errno : EPIPE, "waiting for the user namespace's maps");
  size_t next = 0;
  for (size_t i = 0; i < plan.own_count && i < kMaxOwnMounts; ++i)
    fds[i] = has_fd[i] != 0 && next < r.fds ? got[next++] : -1;
  if (::syscall(SYS_setresgid, 0, 0, 0) != 0 || ::syscall(SYS_setgroups, 0, nullptr) != 0 ||
      ::syscall(SYS_setresuid, 0, 0, 0) != 0)
    child_fail(a, errno, "taking the unprivileged user's identity");
}

// Leaves the shell no capability now nor after execve: none effective, permitted,
// inheritable or ambient, an empty bounding set, and securebits that give root inside the
// namespace nothing on exec.
void drop_capabilities(child_args* a) {
  constexpr const char* kStep = "dropping capabilities";
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) child_fail(a, errno, kStep);
  for (int c = 0; c < 64; ++c)
    if (::prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL) child_fail(a, errno, kStep);
  constexpr unsigned long kBits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                  SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                                  SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
  if (::prctl(PR_SET_SECUREBITS, kBits, 0, 0, 0) != 0) child_fail(a, errno, kStep);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capset, &header, data) != 0) child_fail(a, errno, kStep);
}

// Landlock for the file systems only the view has, then the ruleset itself (no_new_privs).
void restrict_files(child_args* a, bool sandboxed) {
  using confine::access;
  if (sandboxed) {
    const std::pair<const char*, access> own[] = {
        {"/proc", access::read_only}, {"/tmp", access::read_write}, {"/dev/pts", access::read_write},
        {"/dev/shm", access::read_write}};
    for (const auto& [path, what] : own)
      if (int e = confine::add_rule_in_child(a->confinement.ruleset, path, what); e != 0)
        child_fail(a, e, "adding the view's own file systems to the Landlock ruleset");
  }
  if (int e = confine::restrict_self(a->confinement.ruleset); e != 0) child_fail(a, e, "applying the Landlock ruleset");
}

// Where this child puts bash's descriptors: stdin and stdout on /dev/null, stderr on
// early_err, the script and the channel at their numbers.
void place_descriptors(child_args* a) {
  // Every source first goes above every target, so that no dup2 below overwrites a source.
  constexpr int kAbove = SBSH_CHANNEL_FD + 2;
  // A one-shot run has neither channel nor script (-1 stays -1), and its own stdout.
  int devnull = ::open("/dev/null", O_RDWR);
  int null_fd = ::fcntl(devnull, F_DUPFD, kAbove);
  int channel = a->fds.channel < 0 ? -1 : ::fcntl(a->fds.channel, F_DUPFD, kAbove);
  int script = a->fds.script < 0 ? -1 : ::fcntl(a->fds.script, F_DUPFD, kAbove);
  int early = ::fcntl(a->fds.early_err, F_DUPFD, kAbove);
  int out = a->fds.out < 0 ? null_fd : ::fcntl(a->fds.out, F_DUPFD, kAbove);
  if (devnull < 0 || null_fd < 0 || (channel < 0 && a->fds.channel >= 0) || (script < 0 && a->fds.script >= 0) ||
      early < 0 || out < 0)
    child_fail(a, errno);
  if (::dup2(null_fd, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(early, 2) < 0 ||
      (script >= 0 && ::dup2(script, SBSH_SCRIPT_FD) < 0) || (channel >= 0 && ::dup2(channel, SBSH_CHANNEL_FD) < 0))
    child_fail(a, errno);
}

// Every disposition back to the default, through the kernel's call: glibc's sigaction()
// refuses its two internal signals (32 and 33), which its posix_spawn (how sbshd starts this
// wrapper) leaves ignored, and an ignored signal would stay ignored in bash and in every
// command. A zeroed kernel sigaction is SIG_DFL, no flags and an empty mask on every
// architecture. Only then are signals unblocked (the parent blocked them all).
void reset_signals() {
  const unsigned long dfl[4] = {};
  for (int s = 1; s < NSIG; ++s)
    if (s != SIGKILL && s != SIGSTOP) ::syscall(SYS_rt_sigaction, s, dfl, nullptr, NSIG / 8);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

int child_main(void* p) {
  auto* a = static_cast<child_args*>(p);
  const sandbox_plan* plan = a->confinement.sandbox;
  // Out of the way of the descriptors bash is given, and of the ranges closed below.
  if (a->link >= 0 && (a->link = ::fcntl(a->link, F_DUPFD_CLOEXEC, SBSH_CHANNEL_FD + 8)) < 0) ::_exit(127);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The parent died before prctl took effect. In a PID namespace of its own the child sees no
  // parent (0): the check is then for a parent outside it.
  if (::getppid() != (a->confinement.pid_ns ? 0 : a->parent)) ::_exit(127);
  // Into the session's cgroup before anything is charged elsewhere ("0": the writer).
  if (a->confinement.cgroup_procs >= 0 && ::write(a->confinement.cgroup_procs, "0", 1) != 1)
    child_fail(a, errno, "joining the session's cgroup");
  int own_fds[kMaxOwnMounts];
  std::fill(own_fds, own_fds + kMaxOwnMounts, -1);
  if (a->link >= 0) take_maps_from_parent(a, *plan, own_fds);
  if (a->user_ns) {
    write_self(a, "/proc/self/setgroups", "deny");
    write_self(a, "/proc/self/uid_map", a->uid_map);
    write_self(a, "/proc/self/gid_map", a->gid_map);
  }
  if (plan != nullptr) build_view(a, *plan, own_fds);
  if (a->confinement.net_ns)
    if (int e = confine::loopback_up(); e != 0) child_fail(a, e, "bringing up the loopback interface");
  place_descriptors(a);
  // Before the capabilities go: a hard limit above this process's needs CAP_SYS_RESOURCE.
  for (const auto& l : a->limits)
    if (::setrlimit(static_cast<__rlimit_resource>(l.resource), &l.value) != 0) {
      a->report.failed_limit = &l;
      child_fail(a, errno);
    }
  if (plan != nullptr) drop_capabilities(a);
  // Before the descriptors above SBSH_CHANNEL_FD close: the ruleset's is one of them.
  if (a->confinement.ruleset >= 0) restrict_files(a, plan != nullptr);
  // One call per range instead of a close() per possible descriptor; the link to the parent
  // stays open until execve closes it, which tells the parent that bash runs.
  ::close_range(SBSH_SCRIPT_FD + 1, SBSH_CHANNEL_FD - 1, 0);
  if (a->link > SBSH_CHANNEL_FD) {
    ::close_range(SBSH_CHANNEL_FD + 1, static_cast<unsigned>(a->link) - 1, 0);
    ::close_range(static_cast<unsigned>(a->link) + 1, ~0U, 0);
  } else {
    ::close_range(SBSH_CHANNEL_FD + 1, ~0U, 0);
  }
  // A one-shot run (a setup) has neither script nor channel: nothing stays at their numbers.
  if (a->fds.script < 0) ::close(SBSH_SCRIPT_FD);
  if (a->fds.channel < 0) ::close(SBSH_CHANNEL_FD);
  reset_signals();
  char arg0[] = "bash";
  char arg1[] = "--noprofile";
  char arg2[] = "--norc";
  char arg3[] = "/dev/fd/3";
  static_assert(SBSH_SCRIPT_FD == 3);
  char* argv[] = {arg0, arg1, arg2, arg3, nullptr};
  // Last: from here on, the calls it refuses fail for this child too.
  if (plan != nullptr) {
    sock_fprog prog{static_cast<unsigned short>(plan->seccomp.size()), const_cast<sock_filter*>(plan->seccomp.data())};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
      child_fail(a, errno, "installing the seccomp filter");
  }
  ::execve(a->bash_path, a->argv != nullptr ? a->argv : argv, environ);
  child_fail(a, errno);
}

// A staged shell's child (staged_shell): the session's part of its view, what it starts in
// and with, as the parent serialized them (finish()), read back. The child is a copy of its
// parent, not sharing its memory: it may allocate.
struct session_part {
  std::vector<view_mount> own;
  std::vector<int> fds;  // each own path's idmapped mount, or -1
  std::string cwd;
  bool network = false;  // in the network namespace made ahead (--ns net)
  std::vector<std::string> env;
};

// The serialization: each string as its 4-byte length and its bytes.
void put_string(std::string& out, std::string_view v) {
  auto n = static_cast<uint32_t>(v.size());
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out.append(v);
}

bool get_string(std::string_view& in, std::string& out) {
  uint32_t n = 0;
  if (in.size() < sizeof n) return false;
  std::memcpy(&n, in.data(), sizeof n);
  in.remove_prefix(sizeof n);
  if (in.size() < n) return false;
  out.assign(in.substr(0, n));
  in.remove_prefix(n);
  return true;
}

bool get_count(std::string_view& in, size_t& n) {
  std::string text;
  if (!get_string(in, text)) return false;
  char* end = nullptr;
  n = std::strtoul(text.c_str(), &end, 10);
  return end != text.c_str() && *end == '\0';
}

// Receives the session's part: one byte, and the memfd holding the rest, the Landlock ruleset
// and the idmapped mounts (has_fd says which own paths have one) as descriptors.
bool receive_session_part(child_args* a, session_part& part) {
  constexpr size_t kMaxFds = kMaxOwnMounts + 2;
  char byte = 0;
  iovec iov{&byte, 1};
  std::array<int, kMaxFds> fds{};
  ipc::received r = ipc::recv_parts_with_fds(a->link, {&iov, 1}, fds);
  if (r.bytes <= 0) ::_exit(0);  // the parent dropped this stage unused
  std::span<const int> got(fds.data(), r.fds);
  if (got.size() < 2 || r.fds_cut) return false;
  a->confinement.ruleset = got[1];
  struct stat st {};
  if (::fstat(got[0], &st) != 0) return false;
  std::string buf(static_cast<size_t>(st.st_size), '\0');
  if (::pread(got[0], buf.data(), buf.size(), 0) != static_cast<ssize_t>(buf.size())) return false;
  ::close(got[0]);
  std::string_view in = buf;
  size_t own = 0, env = 0, next_fd = 2;
  if (!get_count(in, own) || own > kMaxOwnMounts) return false;
  for (size_t i = 0; i < own; ++i) {
    view_mount m;
    std::string flags;
    if (!get_string(in, flags) || flags.size() != 3 || !get_string(in, m.path) || !get_string(in, m.host))
      return false;
    m.own = true;
    m.what = flags[0] == 'f' ? view_mount::kind::bind_file : view_mount::kind::bind_dir;
    m.read_only = flags[1] == 'r';
    part.fds.push_back(flags[2] == 'i' && next_fd < got.size() ? got[next_fd++] : -1);
    part.own.push_back(std::move(m));
  }
  std::string network;
  if (!get_string(in, part.cwd) || !get_string(in, network) || !get_count(in, env)) return false;
  part.network = network == "n";
  part.env.resize(env);
  for (auto& e : part.env)
    if (!get_string(in, e)) return false;
  return in.empty();
}

// A network namespace made ahead for a session that asks for one (--ns net), with its loopback
// up: making one waits on the kernel's locks that the teardown of earlier ones holds
// (milliseconds), entering one (setns) does not. A child sharing this one's memory and
// descriptors makes it and opens it here; returns the descriptor.
struct network_args {
  int fd = -1;
  int error = 0;
};

int make_network(void* p) {
  auto* n = static_cast<network_args*>(p);
  if (int e = confine::loopback_up(); e != 0) {
    n->error = e;
    ::_exit(1);
  }
  n->fd = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (n->fd < 0) n->error = errno;
  ::_exit(0);
}

// -1 with *err set when it cannot: the stage still serves sessions with the network, and a
// --no-network claim then fails over to a shell started anew, which reports why.
int network_ahead(int* err) {
  constexpr size_t kStack = size_t{64} * 1024;
  void* stack = ::mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) {
    *err = errno;
    return -1;
  }
  network_args n;
  pid_t pid = ::clone(make_network, static_cast<char*>(stack) + kStack,
                      CLONE_VM | CLONE_VFORK | CLONE_FILES | CLONE_NEWNET | SIGCHLD, &n);
  if (pid < 0) n.error = errno;
  else ::waitpid(pid, nullptr, 0);
  ::munmap(stack, kStack);
  if (n.fd < 0) *err = n.error != 0 ? n.error : EPROTO;
  return n.fd;
}

// Sends `len` bytes and, when there are any, `fds` with them (SCM_RIGHTS) on a link between
// parent and child; false with errno set when it is gone.
bool send_with_fds(int link, void* data, size_t len, const std::vector<int>& fds) {
  iovec iov{data, len};
  return ipc::send_parts_with_fds(link, {&iov, 1}, fds) >= 0;
}

// A copy of the host's tree (kOldRoot), detached from every namespace, sent to the parent as
// well (one byte, 't', with it) before the host's tree is detached.
int copy_host_tree(child_args* a) {
  int tree = ::open_tree(AT_FDCWD, kOldRoot, OPEN_TREE_CLONE | AT_RECURSIVE | OPEN_TREE_CLOEXEC);
  if (tree < 0) child_fail(a, errno, "copying the host's tree");
  char byte = 't';
  if (!send_with_fds(a->link, &byte, 1, {tree})) child_fail(a, errno, "copying the host's tree");
  return tree;
}

// An own path, bound from the copy of the host's tree: a mount of its own, with the
// attributes `place` gives a bound path (read-only as the rule says, no set-user-ID bits, no
// device nodes outside /dev), ready to be moved into the view.
int clone_from_host(child_args* a, int host, const view_mount& m) {
  const char* relative = m.host.size() > 1 ? m.host.c_str() + 1 : ".";
  int fd = ::open_tree(host, relative, OPEN_TREE_CLONE | AT_RECURSIVE | OPEN_TREE_CLOEXEC);
  if (fd < 0) child_fail(a, errno, "mounting the session's directories");
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_NOSUID | (m.read_only ? MOUNT_ATTR_RDONLY : 0);
  if (std::strncmp(m.path.c_str(), "/dev/", 5) != 0) attr.attr_set |= MOUNT_ATTR_NODEV;
  if (::mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0)
    child_fail(a, errno, "making the view's mounts read-only");
  return fd;
}

int staged_main(void* p) {
  auto* a = static_cast<child_args*>(p);
  const sandbox_plan& system = *a->confinement.sandbox;
  if ((a->link = ::fcntl(a->link, F_DUPFD_CLOEXEC, SBSH_CHANNEL_FD + 8)) < 0) ::_exit(127);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != 0) ::_exit(127);  // the parent died before prctl took effect
  int none[1] = {-1};
  if (system.map_by_parent) take_maps_from_parent(a, system, none);
  if (a->user_ns) {
    write_self(a, "/proc/self/setgroups", "deny");
    write_self(a, "/proc/self/uid_map", a->uid_map);
    write_self(a, "/proc/self/gid_map", a->gid_map);
  }
  int network_error = 0;
  int network = network_ahead(&network_error);
  begin_view(a);
  for (const auto& m : system.mounts) place(a, m, -1);
  make_special_mounts(a);
  // The host's tree is detached now, and the unmount's wait for an RCU grace period is not the
  // session's. As root the parent idmaps every own path from its own tree; otherwise they are
  // bound from a copy of the host's tree taken first, which the parent holds too, so that the
  // copy's release (another grace period) is the parent's, after the claim.
  int host = -1;
  if (!system.map_by_parent) host = copy_host_tree(a);
  detach_host(a);
  // Here it waits for its session.
  session_part part;
  if (!receive_session_part(a, part)) child_fail(a, EPROTO, "receiving the session's part of the view");
  for (size_t i = 0; i < part.own.size(); ++i) {
    view_mount& m = part.own[i];
    if (host >= 0) part.fds[i] = clone_from_host(a, host, m);
    if (part.fds[i] < 0) child_fail(a, EPROTO, "receiving the session's part of the view");
    m.target = m.path;  // the view is the root already
    place(a, m, part.fds[i]);
  }
  if (host >= 0) ::close(host);
  seal_view(a, part.cwd.c_str());
  if (part.network) {
    if (network < 0) child_fail(a, network_error, "making the shell's network namespace");
    if (::setns(network, CLONE_NEWNET) != 0) child_fail(a, errno, "entering the shell's network namespace");
  }
  if (network >= 0) ::close(network);  // unused, it is torn down off this path
  place_descriptors(a);
  drop_capabilities(a);
  restrict_files(a, true);
  ::close_range(SBSH_SCRIPT_FD + 1, SBSH_CHANNEL_FD - 1, 0);
  ::close_range(SBSH_CHANNEL_FD + 1, static_cast<unsigned>(a->link) - 1, 0);
  ::close_range(static_cast<unsigned>(a->link) + 1, ~0U, 0);
  reset_signals();
  char arg0[] = "bash";
  char arg1[] = "--noprofile";
  char arg2[] = "--norc";
  char arg3[] = "/dev/fd/3";
  char* argv[] = {arg0, arg1, arg2, arg3, nullptr};
  std::vector<char*> envp;
  for (auto& e : part.env) envp.push_back(e.data());
  envp.push_back(nullptr);
  sock_fprog prog{static_cast<unsigned short>(system.seccomp.size()), const_cast<sock_filter*>(system.seccomp.data())};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
    child_fail(a, errno, "installing the seccomp filter");
  ::execve(a->bash_path, argv, envp.data());
  child_fail(a, errno);
}

}  // namespace

namespace {

// Writes `text` to /proc/PID/FILE.
status write_proc(pid_t pid, const char* file, const std::string& text) {
  std::string path = fmt::format("/proc/{}/{}", pid, file);
  unique_fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    return make_error(ipc::errc::spawn, fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  return ok_status();
}

// The session's own paths mounted idmapped to the child's user namespace, in the plan's order
// (-1 where the file system cannot be idmapped: the child then binds it as it is). Through
// them, what sbshd's user owns there is owned by the shell, and what the shell makes is
// sbshd's user's outside: the session's files keep one owner. Only a process with
// CAP_SYS_ADMIN over the file system may do this, so this process, not the child, does it.
std::vector<unique_fd> idmapped_mounts(pid_t pid, const sandbox_plan& plan) {
  std::vector<unique_fd> fds;
  unique_fd userns(::open(fmt::format("/proc/{}/ns/user", pid).c_str(), O_RDONLY | O_CLOEXEC));
  for (const auto& m : plan.mounts) {
    if (!m.own) continue;
    unique_fd tree;
    if (userns) tree = unique_fd(::open_tree(AT_FDCWD, m.host.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (m.read_only ? MOUNT_ATTR_RDONLY : 0);
    attr.userns_fd = static_cast<uint64_t>(userns.get());
    if (tree && ::mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) tree.reset();
    fds.push_back(std::move(tree));
  }
  return fds;
}

// For a child cloned by root: writes its maps (its root is the plan's unprivileged user),
// sends it the idmapped mounts, and waits until it has exec'd bash (end of file) or failed
// (its report).
result<child_report> map_and_release(pid_t pid, const sandbox_plan& plan, int link) {
  if (auto s = write_proc(pid, "uid_map", fmt::format("0 {} 1\n", plan.uid)); !s) return s.err();
  if (auto s = write_proc(pid, "gid_map", fmt::format("0 {} 1\n", plan.gid)); !s) return s.err();
  std::vector<unique_fd> mounts = idmapped_mounts(pid, plan);
  std::vector<unsigned char> has_fd(std::max<size_t>(mounts.size(), 1), 0);
  std::vector<int> fds;
  for (size_t i = 0; i < mounts.size(); ++i)
    if (mounts[i]) {
      has_fd[i] = 1;
      fds.push_back(mounts[i].get());
    }
  if (!send_with_fds(link, has_fd.data(), has_fd.size(), fds))
    return make_error(ipc::errc::spawn, fmt::format("cannot release the shell: {}", std::strerror(errno)));
  child_report report;
  ssize_t n;
  do n = ::recv(link, &report, sizeof report, 0);
  while (n < 0 && errno == EINTR);
  if (n != 0 && n != static_cast<ssize_t>(sizeof report)) report = {EPIPE, nullptr, "starting the shell"};
  return report;
}

}  // namespace

result<pid_t> spawn_shell(const char* bash_path, const shell_fds& fds, std::span<const rlimit_spec> limits,
                          const shell_confinement& confinement, char* const* argv) {
  // The child runs on this process's memory, on a stack of its own, and this thread waits
  // until it has exec'd or exited (CLONE_VFORK): unlike fork(), no page tables are copied
  // for a child that is about to exec anyway. Every signal stays blocked until the child has
  // reset its dispositions, so that no handler of this process's runs on the shared memory.
  constexpr size_t kStack = size_t{256} * 1024;  // generous: sanitizer builds use more stack
  void* stack = ::mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED)
    return make_error(ipc::errc::spawn, fmt::format("cannot start bash: {}", std::strerror(errno)));
  child_args args{bash_path, fds, ::getpid(), limits, confinement, argv};
  const sandbox_plan* plan = confinement.sandbox;
  int flags = CLONE_VM | CLONE_VFORK | SIGCHLD;
  if (confinement.pid_ns) flags |= CLONE_NEWPID;
  if (confinement.net_ns) flags |= CLONE_NEWNET;
  if (plan != nullptr) flags |= CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC;
  // Without CAP_SYS_ADMIN the namespaces belong to a user namespace of bash's own, in which
  // its user and group are what they are outside.
  auto in_user_namespace = [&flags, &args] {
    flags |= CLONE_NEWUSER;
    args.user_ns = true;
    fmt::format_to_n(args.uid_map, sizeof args.uid_map - 1, "{0} {0} 1\n", ::geteuid());
    fmt::format_to_n(args.gid_map, sizeof args.gid_map - 1, "{0} {0} 1\n", ::getegid());
  };
  unique_fd link;  // this process's end, when it maps the child
  if (plan != nullptr && plan->map_by_parent) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
      ::munmap(stack, kStack);
      return make_error(ipc::errc::spawn, fmt::format("cannot start bash: socketpair: {}", std::strerror(errno)));
    }
    link = unique_fd(pair[0]);
    args.link = pair[1];
    // A pipe belongs to its maker, mode 0600, and bash opens its script by /dev/fd/3, which
    // opens the pipe anew: as the unprivileged user, only a pipe of that user's.
    for (int fd : {fds.script, fds.early_err}) (void)::fchown(fd, plan->uid, plan->gid);
    flags = (flags & ~(CLONE_VM | CLONE_VFORK)) | CLONE_NEWUSER;
  } else if (plan != nullptr || ((confinement.pid_ns || confinement.net_ns) && ::geteuid() != 0)) {
    in_user_namespace();
  }
  sigset_t all, old;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, &old);
  pid_t pid = ::clone(child_main, static_cast<char*>(stack) + kStack, flags, &args);
  int clone_errno = errno;
  if (pid < 0 && clone_errno == EPERM && !args.user_ns && plan == nullptr &&
      (flags & (CLONE_NEWPID | CLONE_NEWNET)) != 0) {
    // Root without CAP_SYS_ADMIN (a container's): as an unprivileged user would.
    in_user_namespace();
    pid = ::clone(child_main, static_cast<char*>(stack) + kStack, flags, &args);
    clone_errno = errno;
  }
  if (args.link >= 0) ::close(args.link);
  child_report report = args.report;
  status released = ok_status();
  if (pid > 0 && link) {
    auto r = map_and_release(pid, *plan, link.get());
    if (r) report = *r;
    else released = r.err();
  }
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  ::munmap(stack, kStack);
  if (pid < 0 && (flags & (CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUSER)) != 0)
    return make_error(ipc::errc::spawn,
                      fmt::format("cannot start bash in namespaces of its own{}: {}",
                                  (flags & CLONE_NEWUSER) != 0
                                      ? " (in a user namespace: this system may not allow them to unprivileged "
                                        "users, see user.max_user_namespaces)"
                                      : "",
                                  std::strerror(clone_errno)));
  if (pid < 0) return make_error(ipc::errc::spawn, fmt::format("cannot start bash: {}", std::strerror(clone_errno)));
  if (!released) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return make_error(ipc::errc::spawn, fmt::format("cannot confine bash: {}", released.err().message));
  }
  // The child has exec'd or exited: an error it set is final.
  if (report.error != 0) {
    ::waitpid(pid, nullptr, 0);
    if (report.failed_step != nullptr)
      return make_error(ipc::errc::spawn,
                        fmt::format("cannot confine bash: {}: {}", report.failed_step, std::strerror(report.error)));
    if (report.failed_limit != nullptr)
      return make_error(ipc::errc::spawn, fmt::format("cannot set limit {}: {}", format_limit(*report.failed_limit),
                                                      std::strerror(report.error)));
    return make_error(ipc::errc::spawn, fmt::format("cannot run {}: {}", bash_path, std::strerror(report.error)));
  }
  return pid;
}

namespace {

// What the child makes besides the plan's mounts (make_special_mounts): no own path may hold
// one, nor lie beneath one.
constexpr std::string_view kSpecialPaths[] = {"/proc",   "/dev/pts",   "/dev/shm",    "/dev/ptmx",
                                              "/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr"};

// Closes `fd` on a thread of its own: the last reference to a detached mount tree unmounts it,
// which waits for an RCU grace period (milliseconds) that this thread need not.
void release_off_thread(unique_fd fd) {
  if (!fd) return;
  try {
    std::thread closer([raw = fd.get()] { ::close(raw); });
    (void)fd.release();
    closer.detach();
  } catch (const std::system_error&) {
    // No thread to spare: fd's destructor closes it here.
  }
}

std::string signature(const view_mount& m) {
  return fmt::format("{}\n{}\n{}{}", m.path, m.source, static_cast<int>(m.what), m.read_only ? 'r' : 'w');
}

}  // namespace

staged_shell& staged_shell::operator=(staged_shell&& o) noexcept {
  if (this != &o) {
    reset();
    pid_ = std::exchange(o.pid_, 0);
    pidfd_ = std::exchange(o.pidfd_, -1);
    link_ = std::exchange(o.link_, -1);
    map_by_parent_ = o.map_by_parent_;
    uid_ = o.uid_;
    gid_ = o.gid_;
    system_ = std::move(o.system_);
  }
  return *this;
}

staged_shell::~staged_shell() { reset(); }

void staged_shell::reset() {
  if (pidfd_ >= 0) {
    // Unfinished: it dies, and is reaped here unless the caller's reaper was first.
    ::syscall(SYS_pidfd_send_signal, pidfd_, SIGKILL, nullptr, 0);
    siginfo_t info{};
    constexpr int kByPidfd = 3;  // P_PIDFD, which this C library's idtype_t does not name
    ::waitid(static_cast<idtype_t>(kByPidfd), static_cast<id_t>(pidfd_), &info, WEXITED);
    ::close(pidfd_);
  }
  if (link_ >= 0) ::close(link_);
  pid_ = 0;
  pidfd_ = link_ = -1;
}

result<staged_shell> staged_shell::start(const char* bash_path, const shell_fds& fds, const sandbox_plan& system) {
  constexpr size_t kStack = size_t{256} * 1024;
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
    return make_error(ipc::errc::spawn,
                      fmt::format("cannot stage a confined shell: socketpair: {}", std::strerror(errno)));
  staged_shell st;
  st.link_ = pair[0];
  unique_fd theirs(pair[1]);
  for (const auto& m : system.mounts) st.system_.push_back(signature(m));
  st.map_by_parent_ = system.map_by_parent;
  st.uid_ = system.uid;
  st.gid_ = system.gid;
  child_args args{bash_path, fds, ::getpid(), {}, {}, nullptr};
  args.confinement.pid_ns = true;
  args.confinement.sandbox = &system;
  args.link = theirs.get();
  int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC | SIGCHLD;
  if (system.map_by_parent) {
    for (int fd : {fds.script, fds.early_err}) (void)::fchown(fd, system.uid, system.gid);
  } else {
    args.user_ns = true;
    fmt::format_to_n(args.uid_map, sizeof args.uid_map - 1, "{0} {0} 1\n", ::geteuid());
    fmt::format_to_n(args.gid_map, sizeof args.gid_map - 1, "{0} {0} 1\n", ::getegid());
  }
  void* stack = ::mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED)
    return make_error(ipc::errc::spawn, fmt::format("cannot stage a confined shell: {}", std::strerror(errno)));
  sigset_t all, old;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, &old);
  pid_t pid = ::clone(staged_main, static_cast<char*>(stack) + kStack, flags, &args);
  int clone_errno = errno;
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  ::munmap(stack, kStack);  // the child has its own copy
  if (pid < 0)
    return make_error(ipc::errc::spawn, fmt::format("cannot stage a confined shell in namespaces of its own: {}",
                                                    std::strerror(clone_errno)));
  st.pid_ = pid;
  st.pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (st.pidfd_ < 0) {
    int e = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    st.pid_ = 0;
    return make_error(ipc::errc::spawn, fmt::format("cannot stage a confined shell: pidfd_open: {}", std::strerror(e)));
  }
  if (system.map_by_parent) {
    // Its maps, then one byte without descriptors: it may take its identity.
    status mapped = write_proc(pid, "uid_map", fmt::format("0 {} 1\n", system.uid));
    if (mapped) mapped = write_proc(pid, "gid_map", fmt::format("0 {} 1\n", system.gid));
    unsigned char none = 0;
    if (mapped && ::send(st.link_, &none, 1, MSG_NOSIGNAL) != 1)
      mapped = make_error(ipc::errc::spawn, fmt::format("cannot release the staged shell: {}", std::strerror(errno)));
    if (!mapped) return mapped.err();  // st's destructor ends the child
  }
  return st;
}

bool staged_shell::fits(const sandbox_plan& full) const {
  if (pid_ <= 0 || full.map_by_parent != map_by_parent_ || full.uid != uid_ || full.gid != gid_) return false;
  std::vector<std::string> system;
  std::vector<const view_mount*> own, others;
  for (const auto& m : full.mounts) {
    if (m.own) {
      own.push_back(&m);
    } else {
      system.push_back(signature(m));
      others.push_back(&m);
    }
  }
  if (system != system_) return false;
  // In one step, the view's mounts go in path order, the special file systems after them; here
  // the system's came first. The same view results unless an own path holds (or is) a path of
  // the system's or a special one, lies beneath a special one, or beneath a system symlink.
  for (const view_mount* o : own) {
    if (path_within("/tmp", o->path)) return false;
    for (const view_mount* s : others)
      if (path_within(s->path, o->path) || (s->what == view_mount::kind::symlink && path_within(o->path, s->path)))
        return false;
    for (std::string_view special : kSpecialPaths)
      if (path_within(special, o->path) || path_within(o->path, special)) return false;
  }
  return true;
}

result<pid_t> staged_shell::finish(const sandbox_plan& full, int ruleset, bool network,
                                   const std::vector<std::string>& env) {
  auto fail = [this](std::string why) -> result<pid_t> {
    reset();
    return make_error(ipc::errc::spawn, std::move(why));
  };
  if (pid_ <= 0) return make_error(ipc::errc::spawn, "no staged shell to finish");
  pollfd ended{pidfd_, POLLIN, 0};  // a pidfd is readable once its process has ended
  if (::poll(&ended, 1, 0) != 0) return fail("the staged shell has ended");
  std::vector<unique_fd> mounts = map_by_parent_ ? idmapped_mounts(pid_, full) : std::vector<unique_fd>();
  // As root the stage has detached the host's tree: a path that cannot be idmapped (its file
  // system does not allow it) could only be bound from there.
  if (map_by_parent_ && std::any_of(mounts.begin(), mounts.end(), [](const unique_fd& m) { return !m; }))
    return fail("a path of the session's cannot be mounted idmapped, and the stage no longer sees the host's");
  std::string text;
  size_t own = 0;
  for (const auto& m : full.mounts)
    if (m.own) ++own;
  put_string(text, std::to_string(own));
  std::vector<int> fds;
  size_t i = 0;
  for (const auto& m : full.mounts) {
    if (!m.own) continue;
    bool idmapped = i < mounts.size() && mounts[i];
    if (idmapped) fds.push_back(mounts[i].get());
    ++i;
    char flags[] = {m.what == view_mount::kind::bind_file ? 'f' : 'd', m.read_only ? 'r' : 'w', idmapped ? 'i' : '-'};
    put_string(text, std::string_view(flags, sizeof flags));
    put_string(text, m.path);
    put_string(text, m.host);
  }
  put_string(text, full.cwd);
  put_string(text, network ? "n" : "-");
  put_string(text, std::to_string(env.size()));
  for (const auto& e : env) put_string(text, e);
  unique_fd mem(::memfd_create("sbsh-session-part", MFD_CLOEXEC));
  if (!mem || ::write(mem.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    return fail(fmt::format("cannot hand the staged shell its session: {}", std::strerror(errno)));
  fds.insert(fds.begin(), {mem.get(), ruleset});
  char byte = 'c';
  if (!send_with_fds(link_, &byte, 1, fds))
    return fail(fmt::format("the staged shell is gone: {}", std::strerror(errno)));
  // End of file once it has exec'd bash (its end closes on exec), or its report; before them,
  // unless the parent idmaps, the copy of the host's tree it took (copy_host_tree).
  child_report report;
  unique_fd host_tree;
  ssize_t n;
  for (;;) {
    iovec iov{&report, sizeof report};
    int fd = -1;
    ipc::received r = ipc::recv_parts_with_fds(link_, {&iov, 1}, {&fd, 1});
    n = r.bytes;
    unique_fd tree(r.fds == 1 ? fd : -1);
    if (n != 1 || !tree) break;
    host_tree = std::move(tree);
    report = {};
  }
  // Releasing the copy waits for an RCU grace period: not on the way to the session's shell.
  release_off_thread(std::move(host_tree));
  if (n != 0 && n != static_cast<ssize_t>(sizeof report)) report = {EPIPE, nullptr, "starting the shell"};
  if (report.error != 0)
    return fail(report.failed_step != nullptr
                    ? fmt::format("cannot confine bash: {}: {}", report.failed_step, std::strerror(report.error))
                    : fmt::format("cannot run bash: {}", std::strerror(report.error)));
  pid_t pid = pid_;
  ::close(pidfd_);
  ::close(link_);
  pid_ = 0;
  pidfd_ = link_ = -1;
  return pid;
}

}  // namespace sbsh::wrapper
