#include "common/cgroup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/procs.h"
#include "ipc/protocol.h"

namespace sbsh::cgroup {

namespace {

constexpr const char* kDelegate =
    "run sbshd where a cgroup v2 is delegated to it: as a systemd service (its unit says Delegate=yes), or "
    "with 'systemd-run --user -p Delegate=yes sbshd'";

status unsupported(std::string what) { return make_error(ipc::errc::not_supported, std::move(what)); }

// With read(2), not a stream: the wrapper links this file, and iostreams would cost every
// wrapper the pages their static set-up writes.
std::string read_all(const std::string& path) {
  std::string out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

// Calls f(line) for each line of `text`, without its newline.
template <typename F>
void each_line(std::string_view text, F&& f) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    f(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
}

// The words of `line` separated by spaces.
std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < line.size();) {
    size_t end = line.find(' ', i);
    if (end == std::string_view::npos) end = line.size();
    if (end > i) out.push_back(line.substr(i, end - i));
    i = end + 1;
  }
  return out;
}

// Writes `text` to a cgroup file; the error names the file.
// A cgroup file takes one value per write(2), and says in its errno why it refuses one.
int write_value(const std::string& path, std::string_view text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  int err = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) ? 0 : errno;
  ::close(fd);
  return err;
}

// Writes `text` to a cgroup file; the error names the file.
status write_file(const std::string& path, std::string_view text) {
  if (int e = write_value(path, text); e != 0)
    return make_error(ipc::errc::not_supported, fmt::format("cannot write '{}' to {}: {}", text, path, std::strerror(e)));
  return ok_status();
}

// The cgroup v2 hierarchy's mount point, from /proc/self/mountinfo; empty without one.
std::string v2_mount() {
  std::string point;
  each_line(read_all("/proc/self/mountinfo"), [&point](std::string_view line) {
    auto dash = line.find(" - ");
    if (!point.empty() || dash == std::string_view::npos || line.substr(dash + 3).substr(0, 8) != "cgroup2 ") return;
    auto fields = words(line.substr(0, dash));  // id, parent, device, root, mount point, ...
    if (fields.size() >= 5) point = std::string(fields[4]);
  });
  return point;
}

// This process's cgroup v2 path ("0::/PATH" in /proc/self/cgroup); empty without one.
std::string own_path() {
  std::string path;
  each_line(read_all("/proc/self/cgroup"), [&path](std::string_view line) {
    if (path.empty() && line.starts_with("0::")) path = std::string(line.substr(3));
  });
  return path;
}

std::vector<pid_t> procs_of(const std::string& dir) {
  std::vector<pid_t> out;
  each_line(read_all(dir + "/cgroup.procs"), [&out](std::string_view line) {
    pid_t p = 0;
    if (std::from_chars(line.data(), line.data() + line.size(), p).ec == std::errc() && p > 0) out.push_back(p);
  });
  return out;
}

std::string names(controllers c) {
  std::vector<std::string_view> n;
  if (c.memory) n.emplace_back("memory");
  if (c.pids) n.emplace_back("pids");
  if (c.cpu) n.emplace_back("cpu");
  return fmt::format("{}", fmt::join(n, ", "));
}

// Gives the children of the cgroup at `dir` the controllers of `need` it does not give yet.
status enable(const std::string& dir, controllers need) {
  std::string given = " " + read_all(dir + "/cgroup.subtree_control");
  for (auto [on, name] : {std::pair{need.memory, "memory"}, {need.pids, "pids"}, {need.cpu, "cpu"}}) {
    if (!on || given.find(fmt::format(" {}", name)) != std::string::npos) continue;
    if (auto s = write_file(dir + "/cgroup.subtree_control", fmt::format("+{}", name)); !s) return s;
  }
  return ok_status();
}

}  // namespace

status manager::prepare(controllers need) {
  if (!parent_.empty() && (!need.memory || enabled_.memory) && (!need.pids || enabled_.pids) &&
      (!need.cpu || enabled_.cpu))
    return ok_status();
  std::string mount = v2_mount();
  std::string path = own_path();
  if (mount.empty() || path.empty())
    return unsupported(fmt::format("cannot give the session a cgroup{}: this host has no cgroup v2 hierarchy (only "
                                   "cgroup v1, which sbsh does not use); {}",
                                   need.any() ? " for its " + names(need) : "", kDelegate));
  std::string base = path == "/" ? mount : mount + path;
  std::string offered = read_all(base + "/cgroup.controllers");
  controllers missing;
  for (auto [want, name, out] : {std::tuple{need.memory, "memory", &missing.memory},
                                 {need.pids, "pids", &missing.pids},
                                 {need.cpu, "cpu", &missing.cpu}})
    *out = want && (" " + offered).find(fmt::format(" {}", name)) == std::string::npos;
  if (missing.any()) {
    while (!offered.empty() && offered.back() == '\n') offered.pop_back();
    return unsupported(fmt::format("cannot limit a session's {}: sbshd's cgroup {} is not given that controller by "
                                   "cgroup v2 (it offers: {}; a host that runs it under cgroup v1, or a container "
                                   "without delegation, cannot); {}",
                                   names(missing), base, offered.empty() ? "none" : offered, kDelegate));
  }
  if (path != "/" && need.any()) {
    // cgroup v2 gives controllers to the children of a cgroup that holds no process: sbshd,
    // and what it started, move to a leaf of their own, unless something else is there too.
    auto procs = procs_of(base);
    for (pid_t p : procs)
      if (!procs::descends_from(p, ::getpid())) {
        std::string comm = read_all(fmt::format("/proc/{}/comm", p));
        while (!comm.empty() && comm.back() == '\n') comm.pop_back();
        return unsupported(fmt::format("cannot limit a session's {}: sbshd's cgroup {} also holds process {} ({}), "
                                       "which sbshd did not start; {}",
                                       names(need), base, p, comm, kDelegate));
      }
    if (!procs.empty()) {
      std::string leaf = fmt::format("{}/sbshd-{}", base, key_);
      if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST)
        return unsupported(fmt::format("cannot make {}: {}", leaf, std::strerror(errno)));
      for (pid_t p : procs) (void)write_file(leaf + "/cgroup.procs", std::to_string(p));  // one may have ended
    }
  }
  if (auto s = enable(base, need); !s) return s;
  std::string parent = fmt::format("{}/sbsh-{}", base, key_);
  if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST)
    return unsupported(fmt::format("cannot make {}: {}", parent, std::strerror(errno)));
  if (auto s = enable(parent, need); !s) return s;
  parent_ = std::move(parent);
  enabled_.memory |= need.memory;
  enabled_.pids |= need.pids;
  enabled_.cpu |= need.cpu;
  return ok_status();
}

result<std::string> manager::make(const std::string& name, const limits& l) {
  if (auto s = prepare(l.needs()); !s) return s.err();
  std::string dir = parent_ + "/" + name;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return make_error(ipc::errc::not_supported, fmt::format("cannot make {}: {}", dir, std::strerror(errno)));
  status s = ok_status();
  if (s && l.memory_max != 0) {
    s = write_file(dir + "/memory.max", std::to_string(l.memory_max));
    // Without this, a process over the limit would be swapped out rather than stopped.
    if (s && ::access((dir + "/memory.swap.max").c_str(), F_OK) == 0) s = write_file(dir + "/memory.swap.max", "0");
  }
  if (s && l.pids_max != 0) s = write_file(dir + "/pids.max", std::to_string(l.pids_max));
  if (s && l.cpu_millis != 0) s = write_file(dir + "/cpu.max", fmt::format("{} 100000", l.cpu_millis * 100));
  if (!s) {
    ::rmdir(dir.c_str());
    return s.err();
  }
  return dir;
}

void manager::release() {
  if (!parent_.empty()) ::rmdir(parent_.c_str());  // only when no session's cgroup is left in it
  parent_.clear();
  enabled_ = {};
}

bool kill(const std::string& dir) {
  int e = write_value(dir + "/cgroup.kill", "1");
  errno = e;
  return e == 0;
}

void kill_and_remove(const std::string& dir, int wait_ms) {
  if (dir.empty()) return;
  kill(dir);
  // The cgroup goes once its last process has: until then rmdir says EBUSY.
  for (int waited = 0; ::rmdir(dir.c_str()) != 0 && errno == EBUSY && waited < wait_ms; waited += 5)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

uint64_t oom_kills(const std::string& dir) {
  uint64_t kills = 0;
  each_line(read_all(dir + "/memory.events"), [&kills](std::string_view line) {
    auto w = words(line);
    if (w.size() == 2 && w[0] == "oom_kill") std::from_chars(w[1].data(), w[1].data() + w[1].size(), kills);
  });
  return kills;
}

}  // namespace sbsh::cgroup
