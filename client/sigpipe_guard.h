// Keeps SIGPIPE from killing the caller of libsbsh while it writes to pipes.
// Internal: not installed.
#pragma once

#include <pthread.h>

#include <cerrno>
#include <csignal>
#include <ctime>

namespace sbsh::client {

// While libsbsh writes to a pipe (an exec to the command's stdin or to a descriptor given
// for its output, a run to its event log), a reader that went away raises SIGPIPE, which would kill the caller: a library must not
// count on its caller ignoring it. Block it in this thread (the write then fails with EPIPE,
// handled below), and consume one that became pending meanwhile so that it is not
// delivered when the mask is restored. (The technique of libcurl and OpenSSL.)
class sigpipe_guard {
 public:
  explicit sigpipe_guard(bool active) : active_(active) {
    if (!active_) return;
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigemptyset(&pending);
    was_pending_ = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
  }
  ~sigpipe_guard() {
    if (!active_) return;
    sigset_t pending;
    sigemptyset(&pending);
    if (!was_pending_ && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
      timespec zero{};
      while (sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  sigpipe_guard(const sigpipe_guard&) = delete;
  sigpipe_guard& operator=(const sigpipe_guard&) = delete;

 private:
  bool active_;
  bool was_pending_ = false;
  sigset_t pipe_{};
  sigset_t old_{};
};

}  // namespace sbsh::client
