// The wrapper's loop: poll the control socket and a signalfd, answer sbshd, reap children.
#include "wrapper/wrapper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ipc/frame.h"
#include "ipc/socket_io.h"
#include "wrapper/procs.h"
#include "wrapper/spawn.h"

namespace sbsh::wrapper {

namespace {

using ipc::frame_builder;
using ipc::msg_type;

void log_error(const char* session, const std::string& what) {
  std::fprintf(stderr, "sbsh-wrapper[%s]: %s\n", session, what.c_str());
}

// Kills what is left of the session: a polite SIGHUP (as a closing terminal would send),
// then SIGKILL for whatever is still there after a short grace.
void end_session(pid_t sid, const std::set<pid_t>& spare) {
  if (procs::signal_session(sid, ::getpid(), SIGHUP, spare) == 0) return;
  for (int i = 0; i < 50; ++i) {  // up to 500 ms
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    timespec ts{0, 10 * 1000 * 1000};
    ::nanosleep(&ts, nullptr);
    bool any = false;
    for (const auto& p : procs::list())
      if (p.sid == sid && p.pid != ::getpid() && spare.count(p.pgid) == 0) any = true;
    if (!any) return;
  }
  procs::signal_session(sid, ::getpid(), SIGKILL, spare);
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

class wrapper_loop {
 public:
  explicit wrapper_loop(std::string session) : session_(std::move(session)) {}

  // `title`: a spare's argument memory (see run_spare), nullptr for a wrapper started for
  // its session.
  int run(char* title = nullptr, size_t title_size = 0) {
    title_ = title;
    title_size_ = title_size;
    sid_ = ::setsid();
    if (sid_ < 0) sid_ = ::getsid(0);
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    ::sigprocmask(SIG_BLOCK, &mask, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    sigfd_ = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    ctl_ = ipc::channel(unique_fd(kControlFd), /*read_chunk=*/1024);  // one per session: keep it small
    ::fcntl(kControlFd, F_SETFD, FD_CLOEXEC);

    unique_fd script(kScriptFd), status(kStatusFd);
    const char* bash = std::getenv("SBSH_BASH");
    result<pid_t> pid = spawn_shell(bash != nullptr && *bash != '\0' ? bash : "/bin/bash", script.get(), status.get());
    script.reset();
    status.reset();
    if (!pid) {
      log_error(session_.c_str(), pid.err().message);
      // No shell ran, so there is no exit status to report: only the reason.
      frame_builder f(msg_type::shell_exited);
      f.str("error", pid.err().message);
      send(f);
      return 1;
    }
    shell_ = *pid;
    frame_builder ready(msg_type::wrapper_ready);
    ready.i64("shell_pid", shell_).i64("wrapper_pid", ::getpid());
    send(ready);
    return loop();
  }

 private:
  // A spare's claim: it now serves this session. sbshd has told its bash to enter the
  // session's directory; the wrapper does too, as one started for the session would be.
  void take_claim(const ipc::message& m) {
    auto name = m.get_str("session");
    auto cwd = m.get_str("cwd");
    if (!name || !name.value() || !cwd || !cwd.value()) return;
    session_ = std::string(*name.value());
    if (title_size_ > 0) {
      std::memset(title_, 0, title_size_);
      std::memcpy(title_, session_.data(), std::min(session_.size(), title_size_ - 1));
    }
    std::string dir(*cwd.value());
    if (::chdir(dir.c_str()) != 0)
      log_error(session_.c_str(), fmt::format("cannot enter the session's directory {}: {}", dir, std::strerror(errno)));
  }

  void send(frame_builder& f) {
    if (!ctl_.open()) return;
    if (!ctl_.send(f.finish())) ctl_.close();
  }

  int loop() {
    for (;;) {
      pollfd fds[2] = {{sigfd_, POLLIN, 0}, {ctl_.fd(), POLLIN, 0}};
      int n = ::poll(fds, ctl_.open() ? 2 : 1, -1);
      if (n < 0 && errno != EINTR) return 1;
      if (fds[0].revents != 0) {
        if (int code = on_signals(); code >= 0) return code;
      }
      if (ctl_.open() && fds[1].revents != 0) {
        if (!on_control()) {
          // sbshd is gone: nobody can use this session any more.
          end_session(sid_, spare_);
          return 0;
        }
      }
    }
  }

  // Returns an exit code when the wrapper should stop, -1 to go on.
  int on_signals() {
    signalfd_siginfo si;
    bool stop = false;
    while (::read(sigfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      if (si.ssi_signo != SIGCHLD) stop = true;
    }
    if (stop) {  // sbshd asked us to end the session (rm, restart, shutdown)
      procs::signal_session(sid_, ::getpid(), SIGKILL, spare_);
      while (::waitpid(-1, nullptr, WNOHANG) > 0) {
      }
      return 0;
    }
    int st;
    pid_t p;
    while ((p = ::waitpid(-1, &st, WNOHANG)) > 0) {
      if (p != shell_) continue;  // an orphan of the session, adopted and reaped
      frame_builder f(msg_type::shell_exited);
      if (WIFSIGNALED(st)) f.i64("signal", WTERMSIG(st));
      else f.i64("exit_code", WEXITSTATUS(st));
      send(f);
      end_session(sid_, spare_);
      return 0;
    }
    return -1;
  }

  bool on_control() {
    auto env = ctl_.recv();
    if (!env) return false;
    const auto& m = env->msg;
    switch (m.type()) {
      case msg_type::signal_command: {
        procs::since_mark mark;
        auto since = m.get_i64("since_pid");
        auto ticks = m.get_u64("since_ticks");
        auto sig = m.get_i64("signal");
        if (!since || !ticks || !sig || !sig.value()) return true;
        mark.last_pid = static_cast<pid_t>(since.value().value_or(0));
        mark.start_ticks = ticks.value().value_or(0);
        int s = static_cast<int>(*sig.value());
        size_t count = (s > 0 && s < NSIG) ? procs::signal_command(shell_, sid_, mark, s) : 0;
        frame_builder f(msg_type::signal_result, m.id());
        f.u64("count", count);
        send(f);
        return true;
      }
      case msg_type::protect_group:
      case msg_type::unprotect_group: {
        auto g = m.get_i64("pgid");
        if (!g || !g.value() || *g.value() <= 1) return true;
        if (m.type() == msg_type::protect_group) spare_.insert(static_cast<pid_t>(*g.value()));
        else spare_.erase(static_cast<pid_t>(*g.value()));
        return true;
      }
      case msg_type::claim:
        take_claim(m);
        return true;
      case msg_type::ping: {
        frame_builder f(msg_type::pong, m.id());
        send(f);
        return true;
      }
      default:
        return true;  // unknown messages are ignored, as everywhere in the protocol
    }
  }

  std::string session_;
  char* title_ = nullptr;  // a spare's argument memory, where ps reads its session's name
  size_t title_size_ = 0;
  ipc::channel ctl_;
  int sigfd_ = -1;
  pid_t sid_ = 0;
  pid_t shell_ = 0;
  std::set<pid_t> spare_;  // background processes' groups: they outlive the shell
};

}  // namespace

int run(const char* session_name) { return wrapper_loop(session_name).run(); }

int run_spare(char* title, size_t title_size) { return wrapper_loop("(spare)").run(title, title_size); }

}  // namespace sbsh::wrapper
