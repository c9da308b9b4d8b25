// A child process (sbshd's: a session's wrapper), started with posix_spawn and watched on
// the loop.
//
// posix_spawn runs the child on the parent's own memory until exec (clone with CLONE_VFORK):
// libuv's uv_spawn forks, which copies sbshd's page tables and costs a new session a few
// hundred microseconds more.
//
// A child of the loop's thread holds no descriptor: one SIGCHLD watch per loop reaps every
// child of that thread that has ended (waitid(P_ALL, ..., __WNOTHREAD)) and calls back the
// watch of each. So 10,000 wrappers cost sbshd no descriptor each, and one exit costs one
// waitid, not one per child. Until it is reaped here, a child's pid cannot be reused, so a
// signal sent to it reaches it. A process that is not this thread's child (a wrapper an
// earlier sbshd left) is watched through a pidfd instead, which is as safe.
//
// The loop's thread owns every child it starts: a child started on it must not be waited
// for elsewhere (common/ignored.cpp's `git` runs and is waited for at once, so no loop
// iteration sees it).
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "ipc/fd.h"
#include "ipc/result.h"
#include "uv/handles.h"

namespace sbsh::uv {

class child_process;
// Resetting or destroying a child_ptr lets go of its child (child_process::release with no
// callback): the child is still reaped when it ends, and its handle closes then.
struct child_releaser {
  void operator()(child_process* c) const;
};
using child_ptr = std::unique_ptr<child_process, child_releaser>;

class child_process final {
 public:
  using exit_callback = std::function<void(int64_t exit_status, int term_signal)>;
  struct options {
    const char* file = nullptr;       // searched on PATH when it holds no slash
    char* const* argv = nullptr;
    char* const* envp = nullptr;
    const char* cwd = nullptr;        // nullptr: the parent's own
    std::span<const int> fds;         // fds[i] becomes descriptor i; every other one is closed
    bool new_session = false;         // the child leads a process session of its own (setsid)
    // What an error says for errno `err` (sbshd names the limit that ran out); nullptr:
    // the system's reason.
    std::string (*explain)(int err) = nullptr;
  };
  // Starts the child with default signal dispositions and an empty signal mask. An error
  // (errc::spawn, the system's reason) when it cannot be started, including when the file
  // cannot be executed.
  // The child_ptr owns the watch: the object stays valid, exited() once the child has ended,
  // until the owner lets go of it.
  static result<child_ptr> spawn(uv_loop_t* loop, const options& opts, exit_callback cb);
  // Watches a running process that is not this process's child (sbshd's adopted wrapper): its exit is
  // seen, its status is not (the callback gets -1). Empty when it has already ended. A child
  // of this process that it did not spawn itself (a fork server's copy) is watched as one it
  // did, its status read.
  static child_ptr watch(uv_loop_t* loop, int pid, exit_callback cb);
  // Whether it is watched through a descriptor of its own (a process not this thread's
  // child, until it ends).
  [[nodiscard]] bool holds_descriptor() const { return pidfd_.get() >= 0; }
  // How many watches in this process hold a descriptor (sbshd counts them against its limit).
  [[nodiscard]] static size_t descriptors_held();
  // The owner lets go of `child`: `last` still runs at exit, then the handle closes. The
  // handle stays open until then so that the child is reaped.
  static void release(child_ptr child, exit_callback last);
  // The owner lets go and stops watching at once: the process runs on unwatched (a wrapper
  // left for the next sbshd) and the handle closes.
  static void forget(child_ptr child);

  // Whether `pid` is a child that spawn() started in this process and that has not been
  // reaped yet: a child of sbshd's that is not is one it inherited (daemon/inherited.h).
  [[nodiscard]] static bool spawned_here(int pid);

  [[nodiscard]] int pid() const { return pid_; }
  [[nodiscard]] bool exited() const { return exited_; }
  // Whether the child is still running now, even if the loop has not yet seen it end.
  [[nodiscard]] bool running() const;
  // Replaces the callback that runs at exit (a spare wrapper passes to its session).
  void on_exit(exit_callback cb) { cb_ = std::move(cb); }
  void kill(int sig);

  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

 private:
  friend struct child_releaser;
  friend class reaper;
  child_process(uv_loop_t* loop, int pid, exit_callback cb);
  ~child_process();
  static child_ptr watch_child(uv_loop_t* loop, int pid, exit_callback cb);
  void watch_pidfd(unique_fd pidfd);
  void on_pidfd_readable();
  void drop_pidfd();
  // The child has ended with this status (-1 and 0: not known) and was reaped.
  void ended(int64_t status, int sig);
  void let_go(exit_callback last);

  uv_loop_t* loop_;
  exit_callback cb_;
  int pid_ = 0;
  unique_fd pidfd_;                     // only for a process that is not this thread's child
  handle_ptr<fd_watch> pidfd_watch_;
  bool exited_ = false;
  bool released_ = false;  // no owner holds it: it is freed once the child has ended
  bool calling_ = false;   // in its exit callback, which may let go of it
};

}  // namespace sbsh::uv
