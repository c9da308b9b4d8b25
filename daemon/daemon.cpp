// Start-up: resolve paths, raise the descriptor limit, detach from the terminal unless
// --foreground (the parent exits only once the socket is ready, so `sbshd && sbsh ...`
// never races), then serve.
#include "daemon/daemon.h"

#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/paths.h"
#include "daemon/capacity.h"
#include "daemon/inherited.h"
#include "daemon/log.h"
#include "daemon/service_manager.h"
#include "daemon/state_lock.h"

namespace sbsh::daemon {

namespace {

std::string find_wrapper() {
  if (auto beside = beside_self("sbsh-wrapper"); !beside.empty()) return beside;
  const char* path = std::getenv("PATH");
  std::string p = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string cand = p.substr(start, end - start) + "/sbsh-wrapper";
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return {};
}

// glibc raises its mmap threshold to the size of any large block freed, so that after one
// 16 MiB frame, blocks of up to that size come from the heap and stay in the process when
// freed. A fixed threshold keeps large buffers (frames, decoded messages) in mappings of
// their own, given back to the system as soon as they are freed.
void return_large_blocks() {
  ::mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  ::mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
}

// `ready`: where the starting process waits for one NUL byte (ready) or the reason sbshd
// is not; none in the foreground.
int serve(run_options& opts, unique_fd ready, unique_fd activated) {
  inherited_children::become_subreaper();
  server srv(opts);
  if (auto s = srv.listen(std::move(activated)); !s) {
    std::string msg = "sbshd: " + s.err().message + "\n";
    if (ready) {
      ssize_t r = ::write(ready.get(), msg.data(), msg.size());
      (void)r;
    } else {
      std::fputs(msg.c_str(), stderr);
    }
    return 1;
  }
  // run() returns only when sbshd ends: `ready` outlives the callback.
  return srv.run([&ready] {
    if (ready) {
      ssize_t r = ::write(ready.get(), "", 1);  // one NUL byte: ready
      (void)r;
      ready.reset();
    }
  });
}

}  // namespace

// ---- sbshd as PID 1 (a container's main process) ---------------------------------------
// PID 1 of a PID namespace differs from other processes in three ways that matter here: the
// kernel drops every signal it has no handler for (SIGKILL and SIGSTOP from inside the
// container included), every process whose parent ends becomes its child, to be reaped by
// it, and when it ends the kernel kills everything else in the namespace. So sbshd does not
// serve as PID 1 itself: PID 1 stays a small init that starts the daemon as its child,
// passes it the signals the engine sends (SIGTERM from `podman stop` and the kubelet), reaps
// every orphan, and when the daemon is killed or crashes starts another at once, which
// adopts the sessions the first left running (their wrappers live on, under PID 1). When
// the daemon exits (SIGTERM, `sbsh shutdown`, a start-up error), PID 1 ends what is left
// with SIGTERM, then SIGKILL after a grace period, and exits with the daemon's status: the
// container's restart policy takes over from there.
namespace {

constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
constexpr auto kRestartWindow = std::chrono::seconds(60);
constexpr size_t kRestartsPerWindow = 5;  // more crashes than this within the window: give up
constexpr auto kRestartPause = std::chrono::milliseconds(200);
constexpr auto kLeftoverGrace = std::chrono::seconds(2);

void init_says(const std::string& what) { std::fputs(("sbshd (pid 1): " + what + "\n").c_str(), stderr); }

std::string describe(int status) {
  if (WIFSIGNALED(status)) return fmt::format("was killed by {}", strsignal(WTERMSIG(status)));
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

// Reaps every child that has ended; returns the daemon's status if it is among them.
std::optional<int> reap_all(pid_t daemon) {
  std::optional<int> daemon_status;
  int st = 0;
  pid_t p;
  while ((p = ::waitpid(-1, &st, WNOHANG)) > 0)
    if (p == daemon) daemon_status = st;
  return daemon_status;
}

// Once the daemon is gone: what it left (a background process that ignored its session's
// end, a client's dial-stdio) gets SIGTERM, then SIGKILL after a grace period, before PID 1
// exits and the kernel would kill it without a word.
void end_leftovers(const sigset_t& waited) {
  if (::kill(-1, SIGTERM) != 0 && errno == ESRCH) return;
  auto deadline = std::chrono::steady_clock::now() + kLeftoverGrace;
  for (;;) {
    reap_all(-1);
    if (::kill(-1, 0) != 0 && errno == ESRCH) return;  // nobody left
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) break;
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(100)));
    timespec ts{0, static_cast<long>(ns.count())};
    ::sigtimedwait(&waited, nullptr, &ts);
  }
  init_says("processes were left after the grace period: killing them");
  ::kill(-1, SIGKILL);
  while (::waitpid(-1, nullptr, 0) > 0 || errno == EINTR) {
  }
}

// Returns -1 in the daemon's process (which then starts as usual), else PID 1's exit status.
int init_or_serve() {
  sigset_t waited, before;
  sigemptyset(&waited);
  sigaddset(&waited, SIGCHLD);
  for (int sig : kForwarded) sigaddset(&waited, sig);
  ::sigprocmask(SIG_BLOCK, &waited, &before);
  std::deque<std::chrono::steady_clock::time_point> restarts;
  bool stopping = false;
  pid_t daemon = -1;
  // When to start the daemon: now, or after a pause between crashes; pending until then.
  bool start_pending = true;
  auto start_at = std::chrono::steady_clock::now();
  for (;;) {
    if (daemon < 0 && start_pending && std::chrono::steady_clock::now() >= start_at) {
      start_pending = false;
      daemon = ::fork();
      if (daemon == 0) {
        // A process group of its own: a terminal's Ctrl-C reaches it once, through PID 1.
        ::setpgid(0, 0);
        ::sigprocmask(SIG_SETMASK, &before, nullptr);
        return -1;
      }
      if (daemon < 0) {
        init_says(fmt::format("cannot start sbshd: fork: {}", std::strerror(errno)));
        end_leftovers(waited);
        return 1;
      }
    }
    siginfo_t info{};
    timespec wait{1, 0};
    if (start_pending) {
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(start_at - std::chrono::steady_clock::now());
      wait = timespec{0, static_cast<long>(std::clamp<int64_t>(ns.count(), 0, 999999999))};
    }
    int sig = ::sigtimedwait(&waited, &info, &wait);
    if (sig > 0 && sig != SIGCHLD) {
      if (sig == SIGTERM || sig == SIGINT) stopping = true;
      if (daemon > 0) ::kill(daemon, sig);
      else if (stopping) start_pending = false;
    }
    auto status = reap_all(daemon);
    if (!status && !(stopping && daemon < 0 && !start_pending)) continue;
    int st = status.value_or(0);
    daemon = -1;
    auto now = std::chrono::steady_clock::now();
    while (!restarts.empty() && now - restarts.front() > kRestartWindow) restarts.pop_front();
    // Killed or crashed while nobody asked it to stop: another adopts its sessions.
    if (status && WIFSIGNALED(st) && !stopping && restarts.size() < kRestartsPerWindow) {
      init_says(fmt::format("sbshd {}; starting another, which adopts its sessions", describe(st)));
      restarts.push_back(now);
      start_pending = true;
      start_at = now + (restarts.size() > 1 ? kRestartPause : std::chrono::milliseconds(0));
      continue;
    }
    if (status && WIFSIGNALED(st) && !stopping)
      init_says(fmt::format("sbshd {}, the {}th time within {} s: giving up", describe(st), restarts.size() + 1,
                            kRestartWindow.count()));
    end_leftovers(waited);
    if (!status) return 0;  // stopped between two daemons
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
}

}  // namespace

int run_or_die(run_options opts) {
  // A container's main process: see init_or_serve. Logging goes to stderr, the container's log.
  if (::getpid() == 1) {
    opts.foreground = true;
    if (int st = init_or_serve(); st >= 0) return st;
  }
  // Socket activation: the socket systemd passed decides the path; a --socket must name it.
  auto activated = service_manager::take_listen_socket();
  if (!activated) {
    std::fprintf(stderr, "sbshd: %s\n", activated.err().message.c_str());
    return 1;
  }
  if (*activated) {
    auto path = service_manager::bound_path(activated->get());
    if (!path) {
      std::fprintf(stderr, "sbshd: %s\n", path.err().message.c_str());
      return 1;
    }
    if (!opts.socket_path.empty() && opts.socket_path != *path) {
      std::fprintf(stderr,
                   "sbshd: --socket is %s, but the service manager passed the socket %s: drop --socket from "
                   "ExecStart= or make it match ListenStream=\n",
                   opts.socket_path.c_str(), path->c_str());
      return 1;
    }
    opts.socket_path = *path;
  }
  opts.socket_path = resolve_socket_path(opts.socket_path);
  opts.state_dir = resolve_state_dir(opts.state_dir);
  if (opts.wrapper_path.empty()) opts.wrapper_path = find_wrapper();
  if (opts.wrapper_path.empty()) {
    std::fputs("sbshd: cannot find sbsh-wrapper beside sbshd or on PATH; install sbsh completely\n", stderr);
    return 1;
  }
  if (auto s = setup_logging(opts.log); !s) {
    std::fprintf(stderr, "sbshd: %s\n", s.err().message.c_str());
    return 2;
  }
  // Session definitions in it are run as this user: it must be as private as the socket's.
  if (auto s = ensure_private_dir(opts.state_dir, dir_role::state); !s) {
    std::fprintf(stderr, "sbshd: %s\n", s.err().message.c_str());
    return 1;
  }
  // Before anything is read or written there, the log included; held until sbshd exits
  // (the starting process's copy closes when it exits, the daemon's stays).
  auto state_lock = lock_state_dir(opts.state_dir, opts.socket_path);
  if (!state_lock) {
    std::fprintf(stderr, "sbshd: %s\n", state_lock.err().message.c_str());
    return 1;
  }
  opts.state_lock_fd = state_lock->get();
  opts.children_nofile = raise_descriptor_limit();
  return_large_blocks();
  if (opts.foreground) {
    write_state_lock(opts.state_lock_fd, opts.socket_path, false);
    return serve(opts, unique_fd(), std::move(*activated));
  }

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    std::perror("sbshd: pipe");
    return 1;
  }
  unique_fd ready_read(fds[0]), ready_write(fds[1]);
  pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("sbshd: fork");
    return 1;
  }
  if (pid > 0) {
    ready_write.reset();
    std::string msg;
    char buf[512];
    ssize_t n;
    while ((n = ::read(ready_read.get(), buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(n));
    if (msg.size() == 1 && msg[0] == '\0') return 0;
    std::fputs(msg.empty() ? "sbshd: the daemon exited before it was ready\n" : msg.c_str(), stderr);
    return 1;
  }
  ready_read.reset();
  write_state_lock(opts.state_lock_fd, opts.socket_path, false);  // with the daemon's pid
  ::setsid();
  if (::chdir("/") != 0) {
  }
  // Not close-on-exec: it may itself be 0, 1 or 2 (then it is kept), and is closed at once
  // otherwise, with no thread running to exec meanwhile.
  unique_fd devnull(::open("/dev/null", O_RDWR));
  for (int std_fd : {0, 1, 2}) ::dup2(devnull.get(), std_fd);
  if (devnull.get() <= 2) (void)devnull.release();
  // From here on the log is STATE/sbshd.log, rotated by size; the logger also points fd 2 at
  // the current file.
  opts.log.file = opts.state_dir + "/sbshd.log";
  if (auto s = setup_logging(opts.log); !s) {
    std::string msg = "sbshd: " + s.err().message + "\n";
    ssize_t r = ::write(ready_write.get(), msg.data(), msg.size());
    (void)r;
    return 1;
  }
  return serve(opts, std::move(ready_write), std::move(*activated));
}

}  // namespace sbsh::daemon
