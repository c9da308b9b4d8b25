// Starting wrappers through the fork server; see fork_server.h.
#include "daemon/fork_server.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "daemon/capacity.h"
#include "ipc/fork_server.h"
#include "ipc/protocol.h"
#include "ipc/socket_io.h"

namespace sbsh::daemon {

namespace {

// How long sbshd waits for the server to say it is ready, or to answer a request: it answers
// in well under a millisecond; one that does not in this long is stuck and is killed.
constexpr int kAnswerWithinMs = 5000;
constexpr int kFailuresBeforeGivingUp = 3;

// The server's answer, or nothing when it ended or did not answer in time.
std::optional<wrapper::fork_reply> answer(int sock) {
  pollfd p{sock, POLLIN, 0};
  int n;
  while ((n = ::poll(&p, 1, kAnswerWithinMs)) < 0 && errno == EINTR) {
  }
  if (n <= 0) return std::nullopt;
  wrapper::fork_reply r;
  ssize_t got;
  while ((got = ::recv(sock, &r, sizeof r, 0)) < 0 && errno == EINTR) {
  }
  if (got != static_cast<ssize_t>(sizeof r)) return std::nullopt;
  return r;
}

// The request's bytes (ipc/fork_server.h), or nothing when they exceed what the server reads.
std::optional<std::vector<char>> encode(char* const* argv, char* const* envp, const char* cwd) {
  wrapper::fork_request_header h;
  std::vector<char> out(sizeof h);
  auto add = [&](const char* s) { out.insert(out.end(), s, s + std::strlen(s) + 1); };
  add(cwd != nullptr ? cwd : "");
  for (; argv[h.argc] != nullptr; ++h.argc) add(argv[h.argc]);
  for (; envp[h.envc] != nullptr; ++h.envc) add(envp[h.envc]);
  if (out.size() > wrapper::kMaxForkRequest) return std::nullopt;
  h.size = static_cast<uint32_t>(out.size() - sizeof h);
  std::memcpy(out.data(), &h, sizeof h);
  return out;
}

}  // namespace

fork_server::fork_server(uv_loop_t* loop, std::string wrapper_path, int devnull)
    : loop_(loop), path_(std::move(wrapper_path)), devnull_(devnull) {
  const char* off = std::getenv("SBSH_FORK_SERVER");
  if (off != nullptr && std::strcmp(off, "0") == 0) {
    given_up_ = true;
    spdlog::info("wrappers are started by exec (SBSH_FORK_SERVER=0)");
  }
}

fork_server::~fork_server() { stop(); }

void fork_server::stop() {
  sock_.reset();  // it exits when it reads the end
  if (proc_) proc_->kill(SIGKILL);
  proc_.reset();  // reaped when the loop sees it end
}

void fork_server::give_up(const std::string& why) {
  stop();
  given_up_ = true;
  spdlog::warn("wrappers are started by exec from now on, each with pages of its own: {}", why);
}

bool fork_server::same_limits() const {
  for (int r = 0; r < RLIM_NLIMITS; ++r) {
    rlimit now{};
    if (::getrlimit(static_cast<__rlimit_resource>(r), &now) != 0) continue;
    if (now.rlim_cur != limits_[r].rlim_cur || now.rlim_max != limits_[r].rlim_max) return false;
  }
  return true;
}

bool fork_server::running() {
  bool alive = proc_ && sock_ && proc_->running();
  if (alive && same_limits()) return true;
  if (alive) spdlog::info("sbshd's resource limits changed; a fork server with the new ones starts");
  else if (proc_) spdlog::info("the fork server ended; another starts");
  stop();
  return false;
}

bool fork_server::launch() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    give_up(resource_failure(errno, "create the fork server's socket"));
    return false;
  }
  unique_fd ours(sv[0]), theirs(sv[1]);
  for (int r = 0; r < RLIM_NLIMITS; ++r) (void)::getrlimit(static_cast<__rlimit_resource>(r), &limits_[r]);
  static_assert(wrapper::kForkServerFd == 3);
  int fds[] = {devnull_, 2, 2, theirs.get()};
  std::string arg0 = "sbsh-wrapper", arg1 = wrapper::kForkServerArg;
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  char* envp[] = {nullptr};
  uv::child_process::options po;
  po.file = path_.c_str();
  po.argv = argv;
  po.envp = envp;
  po.fds = fds;
  po.explain = spawn_failure;
  auto proc = uv::child_process::spawn(loop_, po, nullptr);
  if (!proc) {
    give_up(fmt::format("cannot start the fork server: {}", proc.err().message));
    return false;
  }
  proc_ = std::move(*proc);
  theirs.reset();
  auto hello = answer(ours.get());
  if (hello && hello->error != 0) {
    give_up(fmt::format("the fork server cannot serve: {}", std::strerror(hello->error)));
    return false;
  }
  if (!hello) {
    stop();
    if (++failures_ >= kFailuresBeforeGivingUp) give_up("the fork server did not start, three times in a row");
    return false;
  }
  failures_ = 0;
  sock_ = std::move(ours);
  return true;
}

std::optional<result<pid_t>> fork_server::start(char* const* argv, char* const* envp, const char* cwd,
                                                std::span<const int> fds) {
  if (given_up_ || fds.size() != wrapper::kForkFds) return std::nullopt;
  auto request = encode(argv, envp, cwd);
  if (!request) return std::nullopt;  // larger than the server reads: started by exec
  // A server that ended since the last request is seen here or when the send fails: nothing
  // reached it, so another one takes the request.
  for (int attempt = 0;; ++attempt) {
    if (!running() && !launch()) return std::nullopt;
    ssize_t n = ipc::send_with_fds(sock_.get(), request->data(), request->size(), fds);
    if (n == static_cast<ssize_t>(request->size())) break;
    if (n < 0 && errno == EMSGSIZE) return std::nullopt;
    stop();
    if (attempt > 0) return std::nullopt;
  }
  auto r = answer(sock_.get());
  if (!r || (r->pid <= 0 && r->error == 0)) {
    // It ended or hung with the request: whether a wrapper started is not known, so this one
    // fails rather than start a second wrapper on the same descriptors.
    stop();
    return ipc::make_error(ipc::errc::spawn, "the fork server ended while starting the wrapper; try again");
  }
  if (r->pid <= 0) return ipc::make_error(ipc::errc::spawn, spawn_failure(r->error));
  return static_cast<pid_t>(r->pid);
}

}  // namespace sbsh::daemon
