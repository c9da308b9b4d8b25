// /proc scanning and tree signalling; see procs.h for the rules.
#include "common/procs.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <set>
#include <string>
#include <unordered_map>

namespace sbsh::procs {

bool read_stat(pid_t pid, proc_info* out) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
  //  utime stime cutime cstime priority nice num_threads itrealvalue starttime ..."
  // comm may hold spaces and parentheses, so parse from the last ')'.
  char* rp = std::strrchr(buf, ')');
  if (rp == nullptr) return false;
  char state;
  int ppid, pgrp, session;
  unsigned long long start = 0;
  int got = std::sscanf(rp + 1,
                        " %c %d %d %d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                        &state, &ppid, &pgrp, &session, &start);
  if (got != 5) return false;
  if (state == 'Z') return false;  // zombies cannot be signalled into doing anything
  out->pid = pid;
  out->ppid = ppid;
  out->pgid = pgrp;
  out->sid = session;
  out->start_ticks = start;
  return true;
}

std::vector<proc_info> list() {
  std::vector<proc_info> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    char* end;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    proc_info p;
    if (read_stat(static_cast<pid_t>(pid), &p)) out.push_back(p);
  }
  ::closedir(d);
  return out;
}

bool task_children(pid_t pid, pid_t tid, std::vector<pid_t>& out) {
  char file[96];
  std::snprintf(file, sizeof file, "/proc/%d/task/%d/children", static_cast<int>(pid), static_cast<int>(tid));
  int fd = ::open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  ::close(fd);
  for (const char* p = text.c_str(); *p != '\0';) {
    char* end;
    long child = std::strtol(p, &end, 10);
    if (end == p) break;
    if (child > 0) out.push_back(static_cast<pid_t>(child));
    p = end;
  }
  return true;
}

std::vector<proc_info> children_of(pid_t pid) {
  std::vector<proc_info> out;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/task", static_cast<int>(pid));
  DIR* tasks = ::opendir(path);
  bool listed = false;
  if (tasks != nullptr) {
    while (dirent* t = ::readdir(tasks)) {
      if (t->d_name[0] == '.') continue;
      std::vector<pid_t> pids;
      if (!task_children(pid, static_cast<pid_t>(std::strtol(t->d_name, nullptr, 10)), pids))
        break;  // this kernel does not list children
      listed = true;
      for (pid_t child : pids) {
        proc_info info;
        if (read_stat(child, &info) && info.ppid == pid) out.push_back(info);
      }
    }
    ::closedir(tasks);
  }
  if (listed) return out;
  for (const auto& p : list())
    if (p.ppid == pid) out.push_back(p);
  return out;
}

bool descends_from(pid_t pid, pid_t ancestor) {
  // Bounded: a chain of parents is never longer than pid_max, and a loop cannot form, but a
  // process table read piecewise is not one snapshot.
  for (int depth = 0; pid > 1 && depth < 4096; ++depth) {
    if (pid == ancestor) return true;
    proc_info p;
    if (!read_stat(pid, &p)) return false;
    pid = p.ppid;
  }
  return pid == ancestor;
}

since_mark mark_now(int ns_last_pid_fd) {
  since_mark m;
  if (ns_last_pid_fd >= 0) {
    char buf[32];
    ssize_t n = ::pread(ns_last_pid_fd, buf, sizeof buf - 1, 0);
    if (n > 0) {
      buf[n] = '\0';
      m.last_pid = static_cast<pid_t>(std::atoi(buf));
    }
  }
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  static const long hz = ::sysconf(_SC_CLK_TCK);
  m.start_ticks = static_cast<uint64_t>(ts.tv_sec) * static_cast<uint64_t>(hz) +
                  static_cast<uint64_t>(ts.tv_nsec) / (1000000000ull / static_cast<uint64_t>(hz));
  return m;
}

bool started_after(const proc_info& p, const since_mark& m) {
  if (p.start_ticks != m.start_ticks) return p.start_ticks > m.start_ticks;
  return p.pid > m.last_pid;
}

bool same_pid_namespace(pid_t pid) {
  static const ino_t own = [] {
    struct stat st {};
    return ::stat("/proc/self/ns/pid", &st) == 0 ? st.st_ino : 0;
  }();
  if (own == 0) return true;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/ns/pid", static_cast<int>(pid));
  struct stat st {};
  if (::stat(path, &st) != 0) return errno != ENOENT && errno != ESRCH;
  return st.st_ino == own;
}

namespace {

using proc_map = std::unordered_map<pid_t, proc_info>;

void add_descendants(const std::vector<proc_info>& all, std::set<pid_t>& pids) {
  // Repeat until no new child is found; the table is small enough for this to be cheap.
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& p : all)
      if (pids.contains(p.ppid) && pids.insert(p.pid).second) grew = true;
  }
}

// The processes of the groups `spare` and their descendants.
std::set<pid_t> spared_by(const std::vector<proc_info>& all, const std::set<pid_t>& spare) {
  std::set<pid_t> spared;
  for (const auto& p : all)
    if (spare.contains(p.pgid)) spared.insert(p.pid);
  add_descendants(all, spared);
  return spared;
}

size_t deliver(const std::set<pid_t>& groups, const std::set<pid_t>& pids, int sig) {
  for (pid_t g : groups) ::kill(-g, sig);
  for (pid_t p : pids) ::kill(p, sig);
  // A stopped process cannot act on a terminating signal until it runs again.
  if (sig != SIGKILL && sig != SIGCONT && sig != SIGSTOP) {
    for (pid_t g : groups) ::kill(-g, SIGCONT);
    for (pid_t p : pids) ::kill(p, SIGCONT);
  }
  return pids.size();
}

}  // namespace

size_t signal_command(pid_t shell_pid, pid_t sid, const since_mark& m, int sig) {
  auto all = list();
  proc_map by_pid;
  for (const auto& p : all) by_pid[p.pid] = p;
  pid_t shell_pgid = by_pid.contains(shell_pid) ? by_pid[shell_pid].pgid : shell_pid;

  // Orphans come back to the caller (the wrapper, a child subreaper): among them, those a
  // command left behind in a session of their own (`setsid cmd &`), out of the shell's session
  // and tree both.
  std::set<pid_t> shell_tree{shell_pid};
  for (const auto& p : all)
    if (p.ppid == ::getpid() && p.pid != shell_pid) shell_tree.insert(p.pid);
  add_descendants(all, shell_tree);

  std::set<pid_t> pids;
  std::set<pid_t> groups;
  for (const auto& p : all) {
    if (p.pid == shell_pid || p.pid == ::getpid()) continue;
    if (p.sid != sid && !shell_tree.contains(p.pid)) continue;
    if (!started_after(p, m)) continue;
    if (p.pgid == shell_pgid) {  // job control off: a child in the shell's own group
      pids.insert(p.pid);
      continue;
    }
    auto leader = by_pid.find(p.pgid);
    bool new_group = leader == by_pid.end() ? p.pgid > m.last_pid : started_after(leader->second, m);
    if (!new_group) continue;  // a background job of an earlier command
    pids.insert(p.pid);
    groups.insert(p.pgid);
  }
  add_descendants(all, pids);
  pids.erase(shell_pid);
  pids.erase(::getpid());
  return deliver(groups, pids, sig);
}

size_t signal_session(pid_t sid, pid_t except, int sig, const std::set<pid_t>& spare) {
  auto all = list();
  std::set<pid_t> spared = spared_by(all, spare);
  std::set<pid_t> pids;
  std::set<pid_t> groups;
  for (const auto& p : all) {
    if (p.sid != sid || p.pid == except || spared.contains(p.pid)) continue;
    pids.insert(p.pid);
    if (p.pgid != sid) groups.insert(p.pgid);
  }
  add_descendants(all, pids);
  for (pid_t s : spared) pids.erase(s);
  pids.erase(except);
  pids.erase(::getpid());
  return deliver(groups, pids, sig);
}

size_t signal_tree(pid_t pgid, int sig) {
  if (pgid <= 1) return 0;
  auto all = list();
  std::set<pid_t> pids;
  for (const auto& p : all)
    if (p.pgid == pgid) pids.insert(p.pid);
  add_descendants(all, pids);
  pids.erase(::getpid());
  return deliver({pgid}, pids, sig);
}

size_t signal_trees(const std::set<pid_t>& roots, int sig, const std::set<pid_t>& spare) {
  if (roots.empty()) return 0;
  auto all = list();
  std::set<pid_t> spared = spared_by(all, spare);
  std::set<pid_t> pids = roots;
  add_descendants(all, pids);
  for (pid_t s : spared) pids.erase(s);
  pids.erase(::getpid());
  return deliver({}, pids, sig);
}

size_t signal_kept_tree(pid_t pgid, pid_t keeper, int sig) {
  if (pgid <= 1 || keeper <= 1) return 0;
  auto all = list();
  std::set<pid_t> pids{keeper};
  for (const auto& p : all)
    if (p.pgid == pgid) pids.insert(p.pid);
  add_descendants(all, pids);
  pids.erase(keeper);
  pids.erase(::getpid());
  if (sig == SIGKILL || sig == SIGSTOP) return deliver({}, pids, sig);
  return deliver({pgid}, pids, sig);
}

bool group_alive(pid_t pgid) {
  return std::ranges::any_of(list(), [pgid](const auto& p) { return p.pgid == pgid; });
}

}  // namespace sbsh::procs
