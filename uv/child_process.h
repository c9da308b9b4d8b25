// A child process (sbshd's: a session's wrapper), started with posix_spawn and watched
// through a pidfd on the loop.
//
// posix_spawn runs the child on the parent's own memory until exec (clone with CLONE_VFORK):
// libuv's uv_spawn forks, which copies sbshd's page tables and costs a new session a few
// hundred microseconds more. The pidfd lets the loop learn of the exit without a SIGCHLD
// handler, and a signal sent through it can never reach a recycled pid.
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

class child_process final : public uv_owned<child_process, uv_poll_t> {
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
  void on_close_requested();

 private:
  friend class uv_owned<child_process, uv_poll_t>;
  friend struct child_releaser;
  child_process(int pid, unique_fd pidfd) : pid_(pid), pidfd_(std::move(pidfd)) {}
  ~child_process() = default;
  static child_ptr start_watching(uv_loop_t* loop, int pid, unique_fd pidfd, exit_callback cb);
  void on_readable();
  void let_go(exit_callback last);

  exit_callback cb_;
  int pid_ = 0;
  unique_fd pidfd_;
  bool exited_ = false;
  bool released_ = false;  // no owner holds it: it closes once the child has ended
};

}  // namespace sbsh::uv
