// Starting wrappers (each session's shell runs under one), and the pool of spare shells
// started ahead of need, which a new session claims instead of waiting for a shell to start.
#include "daemon/server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/environ.h"
#include "common/paths.h"
#include "daemon/capacity.h"
#include "daemon/shell_messages.h"
#include "ipc/wrapper_link.h"

namespace sbsh::daemon {

namespace {

// The first of `spares` still alive, taken off; the dead ones met are forgotten.
std::optional<spare_shell> first_alive(std::deque<spare_shell>& spares) {
  // A dying process's descriptors close before it is a zombie (child_process::running): the
  // control socket's hang-up is the first sign.
  auto alive = [](const spare_shell& s) {
    pollfd p{s.wrapper.ctl.get(), POLLRDHUP, 0};
    return s.wrapper.proc->running() && ::poll(&p, 1, 0) == 0;
  };
  std::optional<spare_shell> out;
  while (!spares.empty() && !out) {
    spare_shell s = std::move(spares.front());
    spares.pop_front();
    if (alive(s)) {
      out = std::move(s);
    } else {
      s.wrapper.proc.reset();  // ended unseen: reaped when the loop sees it
      remove_shell_dir(s.dir);
    }
  }
  return out;
}

}  // namespace

std::optional<spare_shell> server::take_spare() {
  std::optional<spare_shell> out = first_alive(spares_);
  start_spares_in(0);
  return out;
}

std::optional<spare_shell> server::take_confined_spare() {
  confined_spares_wanted_ = true;
  std::optional<spare_shell> out = first_alive(confined_spares_);
  start_spares_in(0);
  return out;
}

void server::start_spares_in(uint64_t ms) {
  if (shutting_down_ || opts_.spare_wrappers == 0) return;
  if (!spare_timer_) spare_timer_ = uv::make_handle<uv::timer>(&loop_);
  spare_timer_->start(ms, [this] { start_spares(); });
}

result<wrapper_process> server::start_wrapper(const std::string& dir, const std::vector<std::string>& args,
                                              std::vector<std::string>& env, const char* cwd,
                                              uv::child_process::exit_callback on_exit) {
  // Out of descriptors, the message says which limit and how to raise it (capacity.h).
  auto failed = [](const char* what) { return ipc::make_error(ipc::errc::io, resource_failure(errno, what)); };
  upkeep_.relieve_descriptors();
  int ctl[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) != 0) return failed("create its control socket");
  wrapper_process w{{}, unique_fd(ctl[0]), {}};
  unique_fd theirs(ctl[1]);
  auto channel = make_shell_channel();
  if (!channel) return channel.err();
  unique_fd owner(::fcntl(channel->first.get(), F_DUPFD_CLOEXEC, 0));
  if (!owner) return failed("duplicate the shell's channel");
  if (::mkdir(dir.c_str(), 0700) != 0) return failed(fmt::format("create {}", dir).c_str());
  std::vector<std::string> argv_store{"sbsh-wrapper"};
  add_nofile_arg(opts_.children_nofile, argv_store);
  argv_store.insert(argv_store.end(), {"--dir", dir, "--adopt-timeout", std::to_string(opts_.adopt_timeout_ms)});
  argv_store.insert(argv_store.end(), args.begin(), args.end());
  std::vector<char*> argv = c_pointers(argv_store);
  std::vector<char*> envp = c_pointers(env);
  static_assert(wrapper::kControlFd == 3 && wrapper::kChannelFd == 4 && wrapper::kChannelOwnerFd == 5);
  int fds[] = {devnull_.get(), 2, 2, theirs.get(), channel->second.get(), owner.get()};
  // Through the fork server when it can (fork_server.h): a copy of one started wrapper
  // shares the pages its runtime set up.
  if (!forks_ && !shutting_down_) forks_ = std::make_unique<fork_server>(&loop_, opts_.wrapper_path, devnull_.get());
  std::optional<result<pid_t>> forked;
  if (forks_ && !shutting_down_) forked = forks_->start(argv.data(), envp.data(), cwd, fds);
  auto proc = [&]() -> result<uv::child_ptr> {
    if (forked && !*forked) return forked->err();
    // Its parent is sbshd: watched, and its status read, as one spawned here.
    if (forked) {
      if (auto watched = uv::child_process::watch(&loop_, **forked, std::move(on_exit))) return watched;
      return ipc::make_error(ipc::errc::spawn, "the wrapper ended at once");
    }
    uv::child_process::options po;
    po.file = opts_.wrapper_path.c_str();
    po.argv = argv.data();
    po.envp = envp.data();
    po.cwd = cwd;
    po.fds = fds;
    po.explain = spawn_failure;
    return uv::child_process::spawn(&loop_, po, std::move(on_exit));
  }();
  if (!proc) {
    ::rmdir(dir.c_str());
    return proc.err();
  }
  w.proc = std::move(*proc);
  w.channel = std::move(channel->first);
  return w;
}

std::string server::new_shell_dir() { return fmt::format("{}/{}.{}", shells_dir(), pid_, ++shell_seq_); }

void server::start_spares() {
  // A confined spare's shell is staged for a confined session (wrapper::run_spare): its
  // wrapper runs as sbshd's user, its shell as the user confined shells are (--as).
  auto want = [this](bool confined) {
    size_t kept = confined ? confined_spares_.size() : spares_.size();
    size_t wanted = confined && !confined_spares_wanted_ ? 0 : opts_.spare_wrappers;
    return !shutting_down_ && kept < wanted;
  };
  for (bool confined : {false, true}) {
    while (want(confined)) {
      // Its bash starts at once (a confined one's once claimed), with an empty environment
      // (the session that claims it exports its own, or gives a confined one its own: none of
      // sbshd's reaches a shell), in / (it holds no directory busy while it waits). The
      // padding is the argument memory in which the wrapper will show its session's name, as
      // long as the longest name.
      std::vector<std::string> env;
      if (const char* bash = std::getenv("SBSH_BASH"); bash != nullptr)
        env.push_back(fmt::format("SBSH_BASH={}", bash));
      std::vector<std::string> args;
      if (confined && ::geteuid() == 0) args = {"--as", fmt::format("{}:{}", opts_.confine_uid, opts_.confine_gid)};
      args.insert(args.end(), {confined ? "--spare-confined" : "--spare", std::string(64, ' ')});
      std::string dir = new_shell_dir();
      auto spare = start_wrapper(dir, args, env, "/", [this](int64_t status, int sig) {
        // It ended unclaimed: forget it (its handle closes after this callback).
        for (auto* list : {&spares_, &confined_spares_})
          std::erase_if(*list, [](const spare_shell& s) {
            if (!s.wrapper.proc->exited()) return false;
            remove_shell_dir(s.dir);
            return true;
          });
        spdlog::warn("a spare wrapper {}; another starts in 1 s", sig != 0
                                                                      ? fmt::format("was killed by signal {}", sig)
                                                                      : fmt::format("exited with status {}", status));
        start_spares_in(1000);
      });
      if (!spare) {
        spdlog::warn("cannot start a spare wrapper ({}): {}; sessions start their own", opts_.wrapper_path,
                     spare.err().message);
        return;
      }
      (confined ? confined_spares_ : spares_).push_back({std::move(*spare), std::move(dir)});
    }
  }
}

void server::drop_spares() {
  for (auto* list : {&spares_, &confined_spares_}) {
    for (auto& s : *list) {
      s.wrapper.proc->kill(SIGTERM);
      remove_shell_dir(s.dir);
    }
    list->clear();  // let go of: reaped when they end; their control sockets close
  }
  spare_timer_.reset();
  forks_.reset();  // it holds no session; it ends when its socket closes
}

}  // namespace sbsh::daemon
