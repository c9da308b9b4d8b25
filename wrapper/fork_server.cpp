// The fork server; see fork_server.h and the grammar in ipc/fork_server.h.
#include "wrapper/fork_server.h"

#include <fcntl.h>
#include <linux/prctl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "ipc/fork_server.h"
#include "ipc/socket_io.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): unistd.h declares it only with _GNU_SOURCE

namespace sbsh::wrapper {

namespace {

// Requests are read here, not on the heap: the server writes no heap page after a copy, and
// each copy drops its pages of this buffer once it has taken its arguments out.
alignas(4096) char g_request[kMaxForkRequest];  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

// The memory map PR_SET_MM_MAP sets, as /proc/self/stat shows the server's; a copy changes
// only where its arguments, environment and program break are.
prctl_mm_map g_layout{};  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

// A copy's arguments and variables, which it keeps for its whole life as exec's are kept
// (here, so that a leak checker sees them held after environ points elsewhere).
struct kept_args {
  char* block = nullptr;
  char** argv = nullptr;
  char** envp = nullptr;
} g_kept;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

// Fields 26-28 and 45-51 of /proc/self/stat; false when it cannot be read.
bool read_layout(prctl_mm_map& m) {
  char buf[2048];
  int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  char* p = std::strrchr(buf, ')');  // the command's name may hold anything, even ')'
  if (p == nullptr) return false;
  uint64_t field[52] = {};
  int at = 2;
  for (; at < 51 && (p = std::strchr(p, ' ')) != nullptr; ++at) field[at + 1] = std::strtoull(++p, nullptr, 10);
  if (at != 51) return false;
  m = prctl_mm_map{};
  m.start_code = field[26];
  m.end_code = field[27];
  m.start_stack = field[28];
  m.start_data = field[45];
  m.end_data = field[46];
  m.start_brk = field[47];
  m.brk = reinterpret_cast<uintptr_t>(::sbrk(0));
  m.arg_start = field[48];
  m.arg_end = field[49];
  m.env_start = field[50];
  m.env_end = field[51];
  m.exe_fd = static_cast<uint32_t>(-1);  // unchanged
  return true;
}

bool set_layout(const prctl_mm_map& m) {
  return ::prctl(PR_SET_MM, PR_SET_MM_MAP, reinterpret_cast<uintptr_t>(&m), sizeof m, 0) == 0;
}

void reply(int32_t pid, int32_t error) {
  fork_reply r{pid, error};
  while (::send(kForkServerFd, &r, sizeof r, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

// A request taken apart; its strings point into g_request.
struct request {
  const char* cwd = nullptr;
  const char* args = nullptr;  // argc strings, then envc
  size_t args_size = 0, env_size = 0;
  uint32_t argc = 0, envc = 0;
  int fds[kForkFds] = {};
};

// Whether the `size` bytes at `p` hold exactly `count` strings each ending in a NUL; the
// bytes they take in `used`.
bool strings_at(const char* p, size_t size, uint32_t count, size_t& used) {
  used = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const void* nul = std::memchr(p + used, '\0', size - used);
    if (nul == nullptr) return false;
    used = static_cast<size_t>(static_cast<const char*>(nul) - p) + 1;
  }
  return true;
}

// Reads one request: 0 when it is whole and well formed, else the errno to answer; -1 once
// sbshd has closed its end.
int receive(request& r) {
  iovec iov{g_request, sizeof g_request};
  ipc::received got = ipc::recv_parts_with_fds(kForkServerFd, {&iov, 1}, r.fds);
  if (got.bytes <= 0) return -1;
  auto fail = [&](int e) {
    for (size_t i = 0; i < got.fds; ++i) ::close(r.fds[i]);
    return e;
  };
  if (got.data_cut || got.fds_cut) return fail(EMSGSIZE);
  auto n = static_cast<size_t>(got.bytes);
  fork_request_header h;
  if (got.fds != kForkFds || n < sizeof h) return fail(EINVAL);
  std::memcpy(&h, g_request, sizeof h);
  const char* p = g_request + sizeof h;
  size_t size = n - sizeof h, cwd = 0;
  if (h.size != size || h.argc == 0 || !strings_at(p, size, 1, cwd) ||
      !strings_at(p + cwd, size - cwd, h.argc, r.args_size) ||
      !strings_at(p + cwd + r.args_size, size - cwd - r.args_size, h.envc, r.env_size) ||
      cwd + r.args_size + r.env_size != size)
    return fail(EINVAL);
  r.cwd = p;
  r.args = p + cwd;
  r.argc = h.argc;
  r.envc = h.envc;
  return 0;
}

// In the copy: what exec would have given it. Nothing here returns an error to sbshd, which
// has its pid already; a step that fails ends the copy, as exec's failure would.
forked_wrapper become(const request& r) {
  // Each descriptor first above the range, so that no dup2 overwrites one still to move.
  int high[kForkFds];
  for (int i = 0; i < kForkFds; ++i)
    if ((high[i] = ::fcntl(r.fds[i], F_DUPFD_CLOEXEC, kForkFds)) < 0) ::_exit(127);
  for (int i = 0; i < kForkFds; ++i)
    if (::dup2(high[i], i) < 0) ::_exit(127);
  // The server's socket, the request's descriptors and their copies: nothing above 5 stays.
  ::close_range(kForkFds, ~0U, 0);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  // Its arguments and variables in one block, which /proc/PID/cmdline and environ show.
  size_t total = r.args_size + r.env_size;
  auto* block = g_kept.block = static_cast<char*>(std::malloc(total));
  auto* argv = g_kept.argv = static_cast<char**>(std::malloc((r.argc + 1) * sizeof(char*)));
  auto* envp = g_kept.envp = static_cast<char**>(std::malloc((r.envc + 1) * sizeof(char*)));
  if (block == nullptr || argv == nullptr || envp == nullptr) ::_exit(127);
  std::memcpy(block, r.args, total);
  char* s = block;
  for (uint32_t i = 0; i < r.argc; s += std::strlen(s) + 1) argv[i++] = s;
  argv[r.argc] = nullptr;
  for (uint32_t i = 0; i < r.envc; s += std::strlen(s) + 1) envp[i++] = s;
  envp[r.envc] = nullptr;
  environ = envp;
  prctl_mm_map m = g_layout;
  m.brk = reinterpret_cast<uintptr_t>(::sbrk(0));
  m.arg_start = reinterpret_cast<uintptr_t>(block);
  m.arg_end = m.arg_start + r.args_size;
  m.env_start = m.arg_end;
  m.env_end = m.env_start + r.env_size;
  if (!set_layout(m)) ::_exit(127);
  ::madvise(g_request, sizeof g_request, MADV_DONTNEED);
  return {static_cast<int>(r.argc), argv};
}

}  // namespace

forked_wrapper serve_forks() {
  // The copies' directory when sbshd names none: the server's, which is sbshd's.
  int home = ::open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  // What a copy changes must be changeable: tried once on the server itself, unchanged.
  if (!read_layout(g_layout) || home < 0 || !set_layout(g_layout)) {
    reply(0, errno != 0 ? errno : EINVAL);
    std::exit(1);
  }
  // malloc sets itself up on first use: once here rather than in every copy.
  std::free(std::malloc(1));
  reply(0, 0);
  for (;;) {
    request r;
    int e = receive(r);
    if (e < 0) std::exit(0);
    if (e > 0) {
      reply(0, e);
      continue;
    }
    if (*r.cwd != '\0' && ::chdir(r.cwd) != 0) {
      e = errno;
    } else {
      // The copy's parent is sbshd (CLONE_PARENT), which watches and reaps it as a child it
      // started itself. Like fork() without glibc's bookkeeping: glibc caches no pid, and
      // the server runs one thread and holds no lock here.
      long pid = ::syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0);
      if (pid == 0) return become(r);
      e = pid < 0 ? errno : 0;
      if (*r.cwd != '\0') (void)::fchdir(home);
      if (pid > 0) {
        for (int fd : r.fds) ::close(fd);
        reply(static_cast<int32_t>(pid), 0);
        continue;
      }
    }
    for (int fd : r.fds) ::close(fd);
    reply(0, e);
  }
}

}  // namespace sbsh::wrapper
