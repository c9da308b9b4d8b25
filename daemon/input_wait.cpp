// See input_wait.h.
#include "daemon/input_wait.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace sbsh::daemon {

namespace {

constexpr size_t kMaxProcesses = 4096;  // of one command's tree: beyond, the rest is not asked

// The text of a small /proc file ("" when it cannot be read).
std::string read_small(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::array<char, 512> buf{};
  ssize_t n = ::read(fd, buf.data(), buf.size() - 1);
  ::close(fd);
  return n > 0 ? std::string(buf.data(), static_cast<size_t>(n)) : std::string();
}

// `root` and every process below it, each thread's children included.
std::vector<pid_t> tree_of(pid_t root) {
  std::vector<pid_t> all{root};
  for (size_t i = 0; i < all.size() && all.size() < kMaxProcesses; ++i) {
    std::string tasks = "/proc/" + std::to_string(all[i]) + "/task";
    // The children of its main thread hold nearly always all: a thread's own are rare.
    std::string kids = read_small(tasks + "/" + std::to_string(all[i]) + "/children");
    for (const char* p = kids.c_str(); *p != '\0';) {
      char* end = nullptr;
      long pid = std::strtol(p, &end, 10);
      if (end == p) break;
      if (pid > 0) all.push_back(static_cast<pid_t>(pid));
      p = end;
    }
  }
  return all;
}

// Its process group, from /proc/PID/stat (after the command's name, which may hold spaces).
pid_t pgrp_of(pid_t pid) {
  std::string st = read_small("/proc/" + std::to_string(pid) + "/stat");
  auto close = st.rfind(')');
  if (close == std::string::npos) return -1;
  char state = 0;
  int ppid = 0, pgrp = 0;
  if (std::sscanf(st.c_str() + close + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) return -1;
  return state == 'S' ? pgrp : -1;  // only a sleeping process can be waiting
}

bool is_source(pid_t pid, long fd, const input_source& src) {
  struct stat st {};
  if (fd < 0 || ::stat(("/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd)).c_str(), &st) != 0) return false;
  if (src.tty_rdev != 0 && S_ISCHR(st.st_mode) && st.st_rdev == src.tty_rdev) return true;
  return src.pipe_ino != 0 && S_ISFIFO(st.st_mode) && st.st_ino == src.pipe_ino;
}

bool reads_on(long nr) { return nr == SYS_read || nr == SYS_readv || nr == SYS_pread64; }

bool polls(long nr) {
  switch (nr) {
#ifdef SYS_poll
    case SYS_poll:
#endif
#ifdef SYS_select
    case SYS_select:
#endif
#ifdef SYS_epoll_wait
    case SYS_epoll_wait:
#endif
    case SYS_ppoll:
    case SYS_pselect6:
    case SYS_epoll_pwait: return true;
    default: return false;
  }
}

bool waits(pid_t pid, const input_source& src) {
  std::string proc = "/proc/" + std::to_string(pid);
  std::string sc = read_small(proc + "/syscall");
  if (!sc.empty()) {
    // "NR ARG1 ARG2 ...", or "running", or "-1 ..." outside a call.
    char* end = nullptr;
    long nr = std::strtol(sc.c_str(), &end, 10);
    if (end == sc.c_str()) return false;
    if (reads_on(nr)) return is_source(pid, std::strtol(end, nullptr, 16), src);
    return polls(nr) && is_source(pid, 0, src);
  }
  // Its calls are not ours to see (another user's, or a ptrace policy): where it sleeps.
  std::string wchan = read_small(proc + "/wchan");
  bool reading = wchan == "n_tty_read" || wchan == "wait_woken" || wchan == "pipe_read" ||
                 wchan == "pipe_wait_readable" || wchan == "do_select" || wchan == "do_sys_poll" || wchan == "ep_poll";
  return reading && is_source(pid, 0, src);
}

}  // namespace

bool waits_for_input(const input_source& src) {
  if (src.shell <= 0 || (src.tty_rdev == 0 && src.pipe_ino == 0)) return false;
  return std::ranges::any_of(tree_of(src.shell), [&src](pid_t pid) {
    pid_t g = pgrp_of(pid);
    return g >= 0 && (src.foreground <= 0 || g == src.foreground) && waits(pid, src);
  });
}

}  // namespace sbsh::daemon
