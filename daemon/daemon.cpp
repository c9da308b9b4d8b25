// Start-up: resolve paths, raise the descriptor limit, detach from the terminal unless
// --foreground (the parent exits only once the socket is ready, so `sbshd && sbsh ...`
// never races), then serve.
#include "daemon/daemon.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/paths.h"
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

// Each session holds about ten descriptors; the default soft limit of 1024 would cap us
// near a hundred sessions.
void raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
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

int run_or_die(run_options opts) {
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
  raise_fd_limit();
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
