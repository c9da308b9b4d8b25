// Process-table queries over /proc: who belongs to a session, who a command started, and
// signalling them. Used by the wrapper (timeouts, cancels, shell exit) and by sbshd (clean-up
// after a wrapper that died without cleaning up).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <vector>

namespace sbsh::procs {

struct proc_info {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgid = 0;
  pid_t sid = 0;
  uint64_t start_ticks = 0;  // clock ticks since boot (field 22 of /proc/PID/stat)
};

// Every process visible in /proc. Processes that vanish while being read are skipped.
std::vector<proc_info> list();
bool read_stat(pid_t pid, proc_info* out);
// Appends the children thread `tid` of process `pid` started or inherited, zombies included,
// from /proc/PID/task/TID/children; false when the kernel does not keep that file
// (CONFIG_PROC_CHILDREN) or the thread is gone.
bool task_children(pid_t pid, pid_t tid, std::vector<pid_t>& out);
// The live (not zombie) children of `pid`: from /proc/PID/task/*/children where the kernel
// keeps it (CONFIG_PROC_CHILDREN), else by parent pid over /proc.
std::vector<proc_info> children_of(pid_t pid);
// Whether `pid` is `ancestor` or descends from it, following parent pids (a process whose
// parent ended counts from its new parent, a subreaper or init).
bool descends_from(pid_t pid, pid_t ancestor);

// Whether `pid` runs in the caller's PID namespace. A confined session's processes run in one
// of their own: sbshd and a wrapper's adoption socket refuse them, since through either they
// would run commands outside their confinement. A process that has gone is not (it may have
// handed its connection on); one whose namespace cannot be read (EACCES: it runs outside the
// caller's user namespace, so no session made it) is; without /proc, every process is.
bool same_pid_namespace(pid_t pid);

// The point in time a command started, to tell its processes from older ones. pids wrap
// (pid_max is often 32768), so a process counts as newer when it started in a later clock
// tick, or in the same tick with a larger pid.
struct since_mark {
  pid_t last_pid = 0;        // /proc/sys/kernel/ns_last_pid when the command started
  uint64_t start_ticks = 0;  // CLOCK_BOOTTIME in clock ticks when the command started
};
since_mark mark_now(int ns_last_pid_fd);
bool started_after(const proc_info& p, const since_mark& m);

// Signals the processes a command started: those in `sid` (the shell's session) or
// descended from `shell_pid` or (orphans that left the session) from the caller, created
// after `m`, excluding the shell itself and process
// groups that existed before `m` (background jobs of earlier commands). Whole process groups
// are signalled, then each process, then every descendant (catching children that called
// setsid). Returns how many processes were signalled.
size_t signal_command(pid_t shell_pid, pid_t sid, const since_mark& m, int sig);

// Signals every process of session `sid` except `except`, sparing the process groups in
// `spare` (background processes) and their descendants.
size_t signal_session(pid_t sid, pid_t except, int sig, const std::set<pid_t>& spare = {});

// Signals a process tree: the group `pgid`, and every descendant of its members (found by
// parent pid, so children that called setsid are included). Returns how many processes.
size_t signal_tree(pid_t pgid, int sig);
// Signals the processes `roots` and every descendant of theirs, sparing the process groups in
// `spare` and their descendants. Returns how many processes.
size_t signal_trees(const std::set<pid_t>& roots, int sig, const std::set<pid_t>& spare = {});
// Signals a background process's tree without its keeper: the process `keeper` leads group
// `pgid`, is a child subreaper (so every process the command started is its descendant, those
// that called setsid included) and survives every signal it can catch. The group and every
// descendant of the keeper are signalled; SIGKILL and SIGSTOP, which the keeper cannot catch,
// go to each process but the keeper and never to the group. Returns how many processes.
size_t signal_kept_tree(pid_t pgid, pid_t keeper, int sig);
// True while any process of group `pgid` is alive (zombies excluded).
bool group_alive(pid_t pgid);

}  // namespace sbsh::procs
