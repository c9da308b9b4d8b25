// Connecting to sbshd (with race-free auto-start), the handshake, status and shutdown.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>

#include <fmt/format.h>

#include "client/connection_impl.h"
#include "common/environ.h"
#include "common/paths.h"
#include "ipc/protocol.h"

namespace sbsh::client {

using ipc::msg_type;
namespace msg = ipc::msg;

result<unique_fd> dial(const std::string& path) {
  if (auto s = check_socket_path(path); !s) return s.err();
  unique_fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return make_error(ipc::errc::io, fmt::format("socket: {}", std::strerror(errno)));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int rc;
  do rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int e = errno;
    if (e == ENOENT || e == ECONNREFUSED)
      return make_error(ipc::errc::unreachable, fmt::format("no sbshd is listening on {}", path));
    return make_error(ipc::errc::io, fmt::format("cannot connect to {}: {}", path, std::strerror(e)));
  }
  return fd;
}

namespace {

std::string find_daemon(const connect_options& opts) {
  if (!opts.daemon_path.empty()) return opts.daemon_path;
  std::string beside = beside_self("sbshd");
  return beside.empty() ? "sbshd" : beside;  // posix_spawnp searches PATH
}

using steady = std::chrono::steady_clock;

// Milliseconds left until `deadline` (0 when it has passed), for poll(2).
int ms_left(steady::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()).count();
  return left > 0 ? static_cast<int>(std::min<int64_t>(left, 1 << 30)) : 0;
}

// Runs `sbshd --socket PATH`, which returns once it is ready (or prints why it is not), and
// gives up at `deadline`.
status start_daemon(const std::string& path, const connect_options& opts, steady::time_point deadline) {
  std::string exe = find_daemon(opts);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return make_error(ipc::errc::io, "pipe failed");
  unique_fd err_read(fds[0]), err_write(fds[1]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, err_write.get(), 2);
  std::string sock_arg = path;
  char a0[] = "sbshd";
  char a1[] = "--socket";
  char* argv[] = {a0, a1, sock_arg.data(), nullptr};
  pid_t pid;
  std::vector<std::string> env = inherited_environment();
  std::vector<char*> envp = c_pointers(env);
  int rc = ::posix_spawnp(&pid, exe.c_str(), &fa, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  err_write.reset();  // sbshd's copy is the only writer left: its end reads as end of file
  if (rc != 0) {
    return make_error(ipc::errc::unreachable, fmt::format("no sbshd answers on {} and {} could not be started: {}",
                                                          path, exe, std::strerror(rc)));
  }
  std::string msg;
  char buf[512];
  for (;;) {
    pollfd pf{err_read.get(), POLLIN, 0};
    int ready = ::poll(&pf, 1, ms_left(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      // Not ready in time: stop what we started (by its pid) and say where to look.
      err_read.reset();
      ::kill(pid, SIGTERM);
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      return make_error(ipc::errc::unreachable,
                        fmt::format("{} did not become ready on {} within {} ms (its log is sbshd.log in the "
                                    "state directory); try `sbshd --socket {} --foreground` to see why",
                                    exe, path, opts.start_timeout.count(), path));
    }
    ssize_t n = ::read(err_read.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    msg.append(buf, static_cast<size_t>(n));
  }
  err_read.reset();
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return ok_status();
  while (!msg.empty() && msg.back() == '\n') msg.pop_back();
  return make_error(ipc::errc::unreachable, msg.empty() ? fmt::format("{} failed to start", exe) : msg);
}

}  // namespace

result<unique_fd> dial_or_start(const std::string& path, const connect_options& opts) {
  auto fd = dial(path);
  if (fd || !ipc::has_code(fd.err(), ipc::errc::unreachable) || !opts.autostart) return fd;
  if (auto s = ensure_socket_dir(dirname_of(path)); !s) return s.err();
  // Many clients may find no daemon at once. The first to take the lock starts one; the
  // others wait for the lock and then, like tmux, try the connect once more before
  // deciding to start a daemon themselves.
  // All of it, waiting for another client's start included, within start_timeout.
  auto deadline = steady::now() + opts.start_timeout;
  std::string lock_path = path + ".start-lock";
  unique_fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock) return make_error(ipc::errc::io, fmt::format("cannot open {}: {}", lock_path, std::strerror(errno)));
  while (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR)
      return make_error(ipc::errc::io, fmt::format("cannot lock {}: {}", lock_path, std::strerror(errno)));
    if (ms_left(deadline) == 0)
      return make_error(ipc::errc::unreachable,
                        fmt::format("another client has been starting sbshd on {} for more than "
                                    "{} ms; is it stuck? (see `sbsh status`)",
                                    path, opts.start_timeout.count()));
    ::poll(nullptr, 0, 5);
  }
  fd = dial(path);
  if (fd || !ipc::has_code(fd.err(), ipc::errc::unreachable)) return fd;
  if (auto s = start_daemon(path, opts, deadline); !s) return s.err();
  return dial(path);
}

error error_from(const ipc::message& m, std::string_view fallback) {
  auto e = ipc::decode<msg::error>(m);
  std::string_view code = e && !e->code.empty() ? e->code : "error";
  std::string_view text = e && !e->message.empty() ? e->message : fallback;
  return make_error(code, std::string(text));
}

error refusal_or(ipc::channel& ch, error e) {
  // The write failed, so sbshd has closed the connection: reading cannot block.
  pollfd pf{ch.fd(), POLLIN, 0};
  if (!ch.buffered() && ::poll(&pf, 1, 0) != 1) return e;
  auto env = ch.recv();
  if (env && env->msg.type() == msg_type::error) return error_from(env->msg, e.message);
  return e;
}

std::optional<std::pair<stream, std::string_view>> output_chunk(const ipc::message& m) {
  auto out = ipc::decode<msg::output>(m);
  if (!out) return std::nullopt;
  return std::pair(out->stream == ipc::kStderr ? stream::err : stream::out, out->data.bytes);
}

std::string connection::impl::absolute(const std::string& path) const {
  char buf[4096];
  if (remote || (!path.empty() && path[0] == '/') || ::getcwd(buf, sizeof buf) == nullptr) return path;
  if (path.empty() || path == ".") return buf;
  return std::string(buf) + "/" + path;
}

std::string connection::impl::local_cwd() const {
  char buf[4096];
  if (remote || ::getcwd(buf, sizeof buf) == nullptr) return {};
  return buf;
}

sbsh::status connection::impl::send_hello() {
  uint64_t id = next_id++;
  hello_id = id;
  hello_deadline = steady::now() + hello_timeout;
  return ch.send(ipc::encode(msg::hello{ipc::kProtocolVersion, "libsbsh " SBSH_VERSION}, id));
}

// A connection can land in the backlog of an sbshd that is dying (killed, or crashing): it is
// reset or closed unread. What was sent on it then never ran, and a new sbshd can serve it.
// That is certain only when nothing at all came back: sbshd answers a hello as soon as it
// reads it, before it reads what follows on the connection, so a request behind a hello
// that got no answer was never read. A request whose hello was answered is never sent
// again, whatever happened to it: it may have run.
bool connection::impl::redial_if_unanswered(const error& e) {
  if (remote || !redial_opts || hello_id == 0 || ch.buffered() ||
      (!ipc::has_code(e, ipc::errc::eof) && !ipc::has_code(e, ipc::errc::io)))
    return false;
  connect_options opts = std::move(*redial_opts);
  redial_opts.reset();  // once
  auto fd = dial_or_start(socket_path, opts);
  if (!fd) return false;
  ch = ipc::channel(std::move(*fd));
  handshake_error.reset();
  env_kept.reset();  // a new sbshd keeps nothing of the old one's
  server_keeps_env = false;
  return send_hello().ok();
}

sbsh::status connection::impl::await_welcome() {
  if (handshake_error) return *handshake_error;
  if (hello_id == 0) return ok_status();
  auto fail = [&](error e) -> sbsh::status {
    handshake_error = e;
    return e;
  };
  // A socket can take connections with no sbshd behind it: one that systemd holds while the
  // daemon it starts fails, or a daemon that is stuck. Wait for the welcome no longer than
  // for a start.
  while (!ch.buffered()) {
    pollfd pf{ch.fd(), POLLIN, 0};
    int ready = ::poll(&pf, 1, ms_left(hello_deadline));
    if (ready > 0) break;
    if (ready < 0 && errno == EINTR) continue;
    if (remote) {
      end_dial(dial_pid, std::chrono::milliseconds(0));  // it never answered: no grace
      dial_pid = -1;
      return fail(
          make_error(ipc::errc::unreachable, fmt::format("no sbshd answered through the dial command `{}` within {} "
                                                         "ms; does it reach `sbsh dial-stdio`?",
                                                         socket_path, hello_timeout.count())));
    }
    return fail(
        make_error(ipc::errc::unreachable, fmt::format("sbshd on {} took the connection but did not answer within {} "
                                                       "ms; is it stuck or failing to start? (see `sbsh status` and "
                                                       "its log, sbshd.log in the state directory or the journal "
                                                       "under systemd)",
                                                       socket_path, hello_timeout.count())));
  }
  auto env = ch.recv();
  if (!env) {
    if (remote) return fail(dial_failed());
    if (ipc::has_code(env.err(), ipc::errc::eof))
      return fail(make_error(ipc::errc::eof, "sbshd closed the connection during the handshake"));
    return fail(env.err());
  }
  if (env->msg.type() == msg_type::error) return fail(error_from(env->msg, "sbshd refused the handshake"));
  if (env->msg.type() != msg_type::welcome || env->msg.id() != hello_id)
    return fail(make_error(ipc::errc::protocol, "sbshd did not answer hello with welcome"));
  if (auto w = ipc::decode<msg::welcome>(env->msg)) server_keeps_env = w->keeps_env;
  hello_id = 0;
  return ok_status();
}

error connection::impl::dial_failed() {
  // Most often the transport failed (ssh could not log in, no sbsh on the far PATH): the
  // command has said why on its stderr, which is the caller's. Add how it ended.
  std::string how = "it is still running";
  if (auto st = reap_dial(dial_pid, std::chrono::milliseconds(2000))) {
    how = "it ended with " + describe_wait_status(*st);
    dial_pid = -1;
  }
  return make_error(ipc::errc::unreachable, fmt::format("the dial command `{}` closed the connection before any sbshd "
                                                        "answered ({}; its own messages, if any, are above)",
                                                        socket_path, how));
}

sbsh::status connection::impl::send(std::string_view frame, std::span<const int> fds) {
  if (handshake_error) return *handshake_error;
  if (lease_id != 0)
    return make_error(ipc::errc::usage,
                      "this connection holds a lease of a session's shell: release it (lease::release, "
                      "sbsh_lease_release, Lease.release) before sending other requests on it, or use another "
                      "connection");
  for (;;) {
    sbsh::status sent = ch.send(frame, fds);
    if (!sent) {
      // Behind an unanswered hello, the reason is the handshake's (a refusal, or a dial
      // command that ended), not the write that found the connection closed.
      if (hello_id == 0) return refusal_or(ch, sent.err());
      if (remote) return *(handshake_error = dial_failed());
    }
    sbsh::status h = await_welcome();
    if (h) return sent;
    // The hello got no answer: the same request, on a new connection, once.
    if (!redial_if_unanswered(h.err())) return h;
  }
}

result<ipc::envelope> connection::impl::call(std::string_view frame, uint64_t id) {
  if (auto s = send(frame); !s) return s.err();
  return recv_reply(id);
}

result<ipc::envelope> connection::impl::recv_reply(uint64_t id) {
  auto env = ch.recv();
  if (!env) {
    if (ipc::has_code(env.err(), ipc::errc::eof)) return make_error(ipc::errc::eof, "sbshd closed the connection");
    return env.err();
  }
  if (env->msg.type() == msg_type::error) return error_from(env->msg, "sbshd reported an error");
  if (env->msg.id() != id)
    return make_error(ipc::errc::protocol,
                      fmt::format("sbshd answered request {} while {} was pending", env->msg.id(), id));
  return env;
}

connection::connection(std::unique_ptr<impl> p) : p_(std::move(p)) {}
connection::connection(connection&&) noexcept = default;
connection& connection::operator=(connection&&) noexcept = default;
connection::~connection() = default;

const std::string& connection::socket_path() const { return p_->socket_path; }
bool connection::remote() const { return p_->remote; }
int connection::fd() const { return p_->ch.fd(); }

result<connection> connection::connect(const connect_options& opts) {
  auto p = std::make_unique<impl>();
  if (!opts.dial_command.empty()) {
    auto d = spawn_dial(opts.dial_command);
    if (!d) return d.err();
    p->socket_path = command_line(opts.dial_command);
    p->dial_pid = d->pid;
    p->remote = true;
    p->ch = ipc::channel(std::move(d->sock));
  } else {
    p->socket_path = resolve_socket_path(opts.socket_path);
    auto fd = dial_or_start(p->socket_path, opts);
    if (!fd) return fd.err();
    p->ch = ipc::channel(std::move(*fd));
  }
  p->hello_timeout = opts.start_timeout;
  if (!p->remote) p->redial_opts = opts;
  sbsh::status s = p->send_hello();
  for (;;) {
    if (!s) {
      if (p->remote) return p->dial_failed();
      s = refusal_or(p->ch, s.err());
    } else if (opts.wait_for_welcome) {
      s = p->await_welcome();
    }
    if (s) break;
    if (!p->redial_if_unanswered(s.err())) return s.err();
    s = ok_status();  // the hello went out again, on the new connection
  }
  return connection(std::move(p));
}

result<daemon_status> connection::status() {
  return request<msg::status_reply>(*this, msg::status{}, daemon_status_of);
}

daemon_status daemon_status_of(msg::status_reply&& r) {
  daemon_status st;
  st.pid = r.pid;
  st.version = r.version;
  st.uptime_ms = r.uptime_ms;
  st.socket_path = r.socket;
  st.sessions = std::move(r.sessions);
  st.counters = r.counters;
  st.descriptor_limit = r.descriptor_limit;
  st.sessions_supported = r.sessions_supported;
  return st;
}

sbsh::status connection::shutdown(bool keep_sessions) { return request_ok(*this, msg::shutdown{keep_sessions}); }

}  // namespace sbsh::client
