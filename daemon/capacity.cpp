// Descriptor and process limits, and refusals that name them; see capacity.h.
#include "daemon/capacity.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "ipc/protocol.h"

namespace sbsh::daemon {

uint64_t reserved_descriptors(uint64_t limit) { return std::min<uint64_t>(512, limit / 4); }

namespace {

uint64_t read_number(const char* path) {
  std::ifstream f(path);
  uint64_t n = 0;
  return f >> n ? n : 0;
}

std::string figure(rlim_t v) { return v == RLIM_INFINITY ? std::string("unlimited") : std::to_string(v); }

}  // namespace

nofile_limit raise_descriptor_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return {};
  const nofile_limit started{rl.rlim_cur, rl.rlim_max};
  // Fails with EPERM without the privilege: the hard limit stays as it was.
  if (uint64_t most = read_number("/proc/sys/fs/nr_open"); most > rl.rlim_max && rl.rlim_max != RLIM_INFINITY) {
    rlimit more{most, most};
    if (::setrlimit(RLIMIT_NOFILE, &more) == 0) rl = more;
  }
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  return started;
}

void add_nofile_arg(const nofile_limit& started, std::vector<std::string>& args) {
  if (started.soft != 0 && started.soft < descriptor_limit())
    args.insert(args.end(), {"--nofile", fmt::format("{}:{}", started.soft, started.hard)});
}

uint64_t descriptor_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
  return rl.rlim_cur;
}

uint64_t sessions_supported(uint64_t limit) {
  if (limit == UINT64_MAX) return UINT64_MAX;
  return (limit - reserved_descriptors(limit)) / kDescriptorsPerSession;
}

uint64_t open_descriptors() {
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return 0;
  uint64_t n = 0;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n > 0 ? n - 1 : 0;  // less the directory's own
}

namespace {

std::string descriptors_exhausted() {
  uint64_t limit = descriptor_limit();
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  // Counting them takes a descriptor too: with none left, sbshd holds them all.
  uint64_t held = open_descriptors();
  return fmt::format("sbshd holds {} descriptors, its limit (RLIMIT_NOFILE {}, hard {}); each session needs {} "
                     "(one more while it runs commands), so it holds at most {} sessions; raise LimitNOFILE= in "
                     "sbshd's unit, or 'ulimit -n' in the shell that starts sbshd, or remove sessions",
                     held != 0 ? held : limit, figure(rl.rlim_cur), figure(rl.rlim_max), kDescriptorsPerSession,
                     sessions_supported(limit));
}

std::string processes_exhausted() {
  rlimit rl{};
  ::getrlimit(RLIMIT_NPROC, &rl);
  return fmt::format("no process can start: the user's limit of processes (RLIMIT_NPROC {}), the system's "
                     "(kernel.pid_max {}, kernel.threads-max {}) or a cgroup's pids.max is reached; each session "
                     "runs {} (its wrapper and its bash); raise LimitNPROC= or TasksMax= in sbshd's unit, 'ulimit -u', "
                     "or the sysctls, or remove sessions",
                     figure(rl.rlim_cur), read_number("/proc/sys/kernel/pid_max"),
                     read_number("/proc/sys/kernel/threads-max"), kProcessesPerSession);
}

// kB of a /proc/meminfo line ("MemAvailable:   123 kB"), 0 when it is missing.
uint64_t meminfo_kb(std::string_view key) {
  std::ifstream f("/proc/meminfo");
  std::string name;
  uint64_t kb = 0;
  std::string unit;
  while (f >> name >> kb >> unit)
    if (name.size() == key.size() + 1 && name.starts_with(key)) return kb;
  return 0;
}

// sbshd's cgroup's memory.max in bytes, 0 when it has none (or cgroup v2 is not mounted).
uint64_t cgroup_memory_max() {
  std::ifstream self("/proc/self/cgroup");
  std::string line;
  while (std::getline(self, line)) {
    if (!line.starts_with("0::")) continue;
    std::ifstream max("/sys/fs/cgroup" + line.substr(3) + "/memory.max");
    uint64_t n = 0;
    return max >> n ? n : 0;  // "max" reads as no number: no limit
  }
  return 0;
}

std::string memory_exhausted() {
  uint64_t cgroup = cgroup_memory_max();
  return fmt::format("out of memory: {} MiB of {} MiB available{}; an idle session takes about {} kB (its wrapper and "
                     "its bash), and what its commands use; free memory, raise MemoryMax= in sbshd's unit, or remove "
                     "sessions",
                     meminfo_kb("MemAvailable") / 1024, meminfo_kb("MemTotal") / 1024,
                     cgroup != 0 ? fmt::format(", and sbshd's cgroup may use {} MiB (memory.max)", cgroup >> 20) : "",
                     kIdleSessionKb);
}

}  // namespace

status room_for_session(size_t sessions) {
  uint64_t most = sessions_supported(descriptor_limit());
  if (sessions < most) return ok_status();
  return ipc::make_error(ipc::errc::session_failed, "no room for another session: " + descriptors_exhausted());
}

std::string resource_failure(int err, std::string_view what) {
  switch (err) {
    case EMFILE:
      return fmt::format("cannot {}: {}", what, descriptors_exhausted());
    case ENFILE:
      return fmt::format("cannot {}: the system's table of open files is full (fs.file-max {}); raise fs.file-max, "
                         "or end what holds descriptors",
                         what, read_number("/proc/sys/fs/file-max"));
    case EAGAIN:
      return fmt::format("cannot {}: {}", what, processes_exhausted());
    case ENOMEM:
      return fmt::format("cannot {}: {}", what, memory_exhausted());
    default:
      return fmt::format("cannot {}: {}", what, std::strerror(err));
  }
}

std::string spawn_failure(int err) {
  bool out_of_something = err == EMFILE || err == ENFILE || err == EAGAIN || err == ENOMEM;
  return out_of_something ? resource_failure(err, "start a process") : std::string(std::strerror(err));
}

}  // namespace sbsh::daemon
