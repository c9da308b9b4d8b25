// Adoption at start: the shells an earlier sbshd left running (it shut down keeping its
// sessions, or it crashed) wait in their wrappers, each listening on an adoption socket in
// shells_dir(); this sbshd asks each for its shell, its channel and its background processes'
// pipes, before it serves any request.
#include "daemon/server.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/paths.h"
#include "ipc/messages.h"
#include "ipc/wrapper_link.h"

namespace sbsh::daemon {

namespace {

constexpr uint64_t kMaxLentProcs = 65536;  // background processes one adopted session may report

// The `count` protect_group frames that follow `adopted`: each background process's pipes.
status take_lent_pipes(ipc::channel& ch, uint64_t count, std::map<pid_t, lent_pipes>& out) {
  if (count > kMaxLentProcs)
    return make_error(ipc::errc::bad_request, fmt::format("it reports {} background processes", count));
  for (uint64_t i = 0; i < count; ++i) {
    auto env = ch.recv();
    if (!env) return env.err();
    auto p = ipc::decode_as<ipc::msg::protect_group>(env->msg);
    bool ok = p && p->pgid > 1 && p->proc > 0 && p->streams.size() == env->fds.size();
    for (size_t k = 0; ok && k < env->fds.size(); ++k) {
      char c = p->streams[k];
      ok = kLentStreams.find(c) != std::string_view::npos && p->streams.find(c) == k;
    }
    if (!ok) return make_error(ipc::errc::bad_request, "a background process's pipes are malformed");
    out[static_cast<pid_t>(p->pgid)] = lent_pipes{p->proc, std::string(p->streams), std::move(env->fds)};
  }
  return ok_status();
}

}  // namespace

std::map<std::string, adopted_shell> server::adopt_orphans() {
  std::map<std::string, adopted_shell> found;
  std::string shells = shells_dir();
  std::vector<std::string> dirs;
  if (DIR* d = ::opendir(shells.c_str())) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') dirs.push_back(shells + "/" + e->d_name);
    ::closedir(d);
  }
  for (const auto& dir : dirs) {
    auto fd = ipc::connect_in(dir, wrapper::kAdoptSocket);
    if (!fd) {
      // Its wrapper is gone (killed, or adoption was off): nothing there is of use.
      if (ipc::has_code(fd.err(), ipc::errc::unreachable)) remove_shell_dir(dir);
      else spdlog::warn("cannot adopt the shell of {}: {}", dir, fd.err().message);
      continue;
    }
    auto peer = ipc::peer_of(fd->get());
    if (!peer || peer->uid != ::getuid()) continue;
    ucred cred = *peer;
    ipc::set_io_timeout(fd->get(), 1);  // a stopped wrapper does not hold up the start for long
    ipc::channel ch(std::move(*fd), 4096);
    auto answer = ch.send(ipc::encode(ipc::msg::adopt{pid_}, 1))
                      ? ch.recv()
                      : result<ipc::envelope>(make_error(ipc::errc::io, "cannot send"));
    auto fail = [&](const std::string& why) {
      spdlog::warn("cannot adopt the shell of {} (wrapper pid {}): {}", dir, cred.pid, why);
    };
    if (!answer) {
      // An unclaimed spare ends as soon as its sbshd is gone, maybe just now.
      spdlog::info("the wrapper of {} (pid {}) did not take adoption: {}", dir, cred.pid, answer.err().message);
      continue;
    }
    auto got = ipc::decode_as<ipc::msg::adopted>(answer->msg);
    if (!got || got->shell_pid <= 1 || got->wrapper_pid != cred.pid || answer->fds.size() != 1) {
      fail(fmt::format("its answer is malformed{}", got ? "" : ": " + got.err().message));
      continue;
    }
    const auto& m = *got;
    std::string session(m.session);
    if (!session.empty() && !m.initialized) {
      // The earlier sbshd went before the shell ran its init commands: half set up, it is of
      // no use; the session starts afresh from its definition.
      spdlog::info("not adopting the shell of session {} (wrapper pid {}): it had not finished starting", session,
                   cred.pid);
      ::kill(cred.pid, SIGTERM);
      continue;
    }
    if (session.empty() || !valid_session_name(session) || found.contains(session)) {
      // A spare nobody claimed (or a duplicate): it is of no use, end it. Its pid is the
      // peer of a connection still open, so it is not a recycled one.
      if (!session.empty()) fail(fmt::format("session {} was adopted already", session));
      ::kill(cred.pid, SIGTERM);  // the wrapper removes its socket, then the directory
      continue;
    }
    adopted_shell a;
    a.session = session;
    a.cwd = std::string(m.cwd);
    a.dir = dir;
    a.generation = m.generation;
    a.shell_pid = static_cast<pid_t>(m.shell_pid);
    a.wrapper_pid = cred.pid;
    a.started_at_ms = m.started_at_ms;
    for (int64_t g : m.groups)
      if (g > 1 && g < (1 << 22)) a.groups.insert(static_cast<pid_t>(g));
    a.channel = std::move(answer->fds[0]);
    set_nonblocking(a.channel.get());
    if (auto lent = take_lent_pipes(ch, m.procs, a.pipes); !lent) {
      // The shell is still worth adopting; its background processes will show as lost.
      fail(lent.err().message);
      a.pipes.clear();
    }
    ipc::set_io_timeout(ch.fd(), 0);
    a.ctl = unique_fd(::fcntl(ch.fd(), F_DUPFD_CLOEXEC, 0));  // ch closes its own on return
    spdlog::info("adopting session {} (wrapper pid {}, shell pid {})", session, a.wrapper_pid, a.shell_pid);
    found.emplace(session, std::move(a));
  }
  return found;
}

}  // namespace sbsh::daemon
