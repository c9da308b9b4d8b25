// connection::exec: one command, its I/O on pipes handed to sbshd (or, over a dial command,
// in frames), its result.
//
// The client makes the pipes and passes sbshd the ends the shell needs (plus dups of the
// read ends, which sbshd keeps after the command so that background jobs writing late do
// not die of SIGPIPE). Output therefore travels command -> pipe -> client with no copy
// through the daemon, and a slow reader slows the command instead of growing anything.
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "client/connection_impl.h"
#include "client/head_tail.h"
#include "client/sigpipe_guard.h"
#include "common/environ.h"
#include "ipc/fd.h"

namespace sbsh::client {

using ipc::msg_type;
namespace msg = ipc::msg;

namespace {

struct pipe_pair {
  unique_fd r, w;
};

result<pipe_pair> make_pipe() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return make_error(ipc::errc::io, fmt::format("pipe: {}", std::strerror(errno)));
  return pipe_pair{unique_fd(p[0]), unique_fd(p[1])};
}

// sbshd drops a client that sends a frame over kMaxFrame, with a bare "frame length" error:
// a command's text is what makes an exec that large, so say so before sending it.
status check_request_size(const std::string& frame, size_t text) {
  if (frame.size() <= ipc::kMaxFrame + 4) return ok_status();  // the body, after its 4-byte length
  return make_error(ipc::errc::too_large,
                    fmt::format("the command's text ({} bytes) and the rest of the request ({} bytes, mostly the "
                                "environment a new session would start with) are more than the {} MiB sbshd takes "
                                "in one request; put the script where the session can read it and run '. FILE'",
                                text, frame.size() - 4 - text, ipc::kMaxFrame >> 20));  // the text is in the body
}

// One output stream of a running command: where its bytes go.
struct sink {
  unique_fd r;
  stream which;
  int fd_out = -1;
  bool splice_ok = true;
  head_tail* keep = nullptr;
  const std::function<void(stream, std::string_view)>* cb = nullptr;
  bool eof = false;
  // fd_out's reader went away (EPIPE): the rest is read and dropped, and the command is
  // sent SIGPIPE once, as a writer into a closed pipe would get it in a shell pipeline.
  bool broken = false;
  // Any other error writing to fd_out (ENOSPC, EIO, EBADF...): the output has nowhere to go,
  // so the rest is dropped too, the command is stopped as on a timeout, and exec fails with
  // this errno once it has ended.
  int write_errno = 0;
  bool told = false;  // the command was sent SIGPIPE, or stopped, for it

  // Reads what is available (non-blocking). Returns false at EOF.
  bool pump(bool until_empty) {
    if (!r) return false;
    char buf[128 * 1024];
    for (int round = 0; until_empty || round < 8; ++round) {
      if (fd_out >= 0 && splice_ok && !broken) {
        ssize_t n = ::splice(r.get(), nullptr, fd_out, nullptr, 1 << 20, SPLICE_F_NONBLOCK);
        if (n > 0) continue;
        if (n == 0) return !(eof = true);
        if (errno == EAGAIN) {
          // EAGAIN may also mean fd_out is full (a pipe); wait for it rather than spin.
          pollfd pf[2] = {{r.get(), POLLIN, 0}, {fd_out, POLLOUT, 0}};
          if (::poll(pf, 2, 0) > 0 && (pf[0].revents & POLLIN) && !(pf[1].revents & POLLOUT)) {
            pf[1].revents = 0;
            ::poll(&pf[1], 1, -1);
            continue;
          }
          return true;
        }
        if (errno == EINTR) continue;
        if (errno == EPIPE) {
          broken = true;
          continue;
        }
        splice_ok = false;  // fd_out does not take splice (a tty, say): copy instead
      }
      ssize_t n = ::read(r.get(), buf, sizeof buf);
      if (n == 0) return !(eof = true);
      if (n < 0) return errno == EAGAIN || errno == EINTR ? true : !(eof = true);
      deliver(std::string_view(buf, static_cast<size_t>(n)));
    }
    return true;
  }

  void deliver(std::string_view chunk) {
    if (cb != nullptr && *cb) {
      (*cb)(which, chunk);
    } else if (fd_out >= 0) {
      if (int e = broken ? 0 : write_all(fd_out, chunk); e != 0) {
        if (e != EPIPE) write_errno = e;
        broken = true;
      }
      return;
    }
    if (keep != nullptr) keep->add(chunk);
  }
};

// A result's two streams as kept (head and tail), and what was left out of them.
struct kept_output {
  head_tail out, err;
  kept_output(exec_result& r, size_t limit) : out(&r.stdout_data, limit), err(&r.stderr_data, limit) {}
  void add(stream s, std::string_view d) { (s == stream::err ? err : out).add(d); }
  void finish(exec_result& r) {
    r.stdout_omitted_bytes = out.finish();
    r.stderr_omitted_bytes = err.finish();
    // All it wrote, from its first byte: what was kept and what was left out.
    r.stdout_bytes = std::max<uint64_t>(r.stdout_bytes, r.stdout_data.size() + r.stdout_omitted_bytes);
    r.stderr_bytes = std::max<uint64_t>(r.stderr_bytes, r.stderr_data.size() + r.stderr_omitted_bytes);
    r.stdout_truncated = r.stdout_omitted_bytes > 0;
    r.stderr_truncated = r.stderr_omitted_bytes > 0;
  }
};

// Reads exec_done into `r`; the result says whether sbshd waits for a release of the pipes.
result<bool> read_done(const ipc::message& m, exec_result& r) {
  auto d = read_reply<msg::exec_done>(m);
  if (!d) return d.err();
  r.exit_code = d->exit_code;
  r.signal = d->signal;
  r.timed_out = d->timed_out;
  r.cancelled = d->cancelled;
  r.shell_restarted = d->shell_restarted;
  r.ran = d->ran;
  r.duration_us = d->duration_us;
  r.started_at_ms = d->started_at_ms.value_or(0);
  r.error = d->error;
  r.generation = d->generation;
  r.state_lost = d->state_lost;
  r.state_lost_reason = d->state_lost_reason;
  r.oom_killed = d->oom_killed;
  r.session = d->session;
  r.command = d->command;
  r.screen = d->screen;
  r.stdout_bytes = d->stdout_bytes;
  r.stderr_bytes = d->stderr_bytes;
  return d->release;
}

// What each descriptor the exec loop polls is for. The socket is always polled, and first.
enum class slot { socket, out, err, stdin_target, stdin_source, signal_fd };
constexpr size_t kSlots = 6;

}  // namespace

canceller::canceller() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0) {
    read_end_ = p[0];
    write_end_ = p[1];
  }
}

canceller::~canceller() {
  if (read_end_ >= 0) ::close(read_end_);
  if (write_end_ >= 0) ::close(write_end_);
}

void canceller::signal(int sig) const {
  auto b = static_cast<unsigned char>(sig);
  ssize_t r = ::write(write_end_, &b, 1);
  (void)r;
}

// One exec in flight: all that connection::exec's loop works on, kept between rounds so that
// a caller with an event loop of its own can drive it (exec_call). Heap-allocated and never
// moved: the sinks and `kept` point into it.
struct __attribute__((visibility("hidden"))) exec_call::state {
  connection::impl* p = nullptr;
  exec_options owned;  // exec_call's copy of the options (connection::exec uses the caller's)
  const exec_options* opts = nullptr;
  bool keep = false, frames = false, has_stdin = false, guard_pipes = false;
  pipe_pair in;
  uint64_t id = 0;
  bool started_told = false;
  // The environment this exec asks sbshd to keep for the connection (keep_env), which the
  // connection then names instead of sending it (same_env) once sbshd has answered.
  std::optional<std::vector<std::string>> env_to_keep;
  exec_result res;
  std::optional<kept_output> kept;  // made by begin(), with the limit
  sink sinks[2] = {{unique_fd(), stream::out}, {unique_fd(), stream::err}};
  std::string_view pending;
  std::string in_buf;
  bool src_eof = true, in_open = false;
  int in_target = -1;
  bool done = false;
  // exec_call only: an epoll descriptor that holds what the next round would poll.
  unique_fd ep;
  std::vector<std::pair<int, uint32_t>> registered;

  state() = default;
  state(const state&) = delete;
  state& operator=(const state&) = delete;

  status begin(connection::impl* impl, const exec_options& o);
  // The descriptors the next round polls (at most kSlots), with their events, and what each
  // is for in `map`.
  size_t wanted(pollfd* pf, slot* map) const;
  // Polls (timeout_ms: -1 waits, 0 does not) and handles what is ready, until the command
  // has ended (the result) or, with timeout 0, nothing more is ready (nullopt).
  result<std::optional<exec_result>> rounds(int timeout_ms);
  status sync_epoll();

  void close_input() {
    if (!in_open) return;
    in_open = false;
    if (frames) (void)p->ch.send(ipc::encode(msg::stdin_eof{}, id));
    in.w.reset();
  }
  ssize_t put_input(std::string_view src) const {
    if (!frames) return ::write(in.w.get(), src.data(), src.size());
    size_t n = std::min<size_t>(src.size(), size_t{64} * 1024);
    return p->ch.send(ipc::encode(msg::stdin_data{{src.substr(0, n)}}, id)) ? static_cast<ssize_t>(n) : -1;
  }
  // Asks sbshd to deliver `sig` to the command's processes (0: stop it, with escalation;
  // 128+N: stop it, N first).
  void send_signal(int sig) const {
    msg::cancel c;
    c.signal.number = sig > 128 ? sig - 128 : sig;
    if (sig > 128) c.stop = true;
    (void)p->ch.send(ipc::encode(c, id));
  }
};

status exec_call::state::begin(connection::impl* impl, const exec_options& o) {
  p = impl;
  opts = &o;
  // Over a dial command (remote()), descriptors cannot reach sbshd: it makes the pipes and
  // sends the output in frames, and takes the input in frames (io "frames").
  // So does a command sbshd keeps: it must read the output to keep it.
  keep = o.keep || o.detach_after.count() > 0;
  frames = p->remote || keep || o.tty || o.interactive;
  has_stdin = o.stdin_data.has_value() || o.stdin_fd >= 0;
  guard_pipes = has_stdin || (!o.on_output && (o.stdout_fd >= 0 || o.stderr_fd >= 0));
  pipe_pair out, err;
  if (!frames) {
    auto op = make_pipe();
    if (!op) return op.err();
    auto ep2 = make_pipe();
    if (!ep2) return ep2.err();
    out = std::move(*op);
    err = std::move(*ep2);
    if (has_stdin) {
      auto i = make_pipe();
      if (!i) return i.err();
      in = std::move(*i);
      set_nonblocking(in.w.get());
    }
    if (o.stdout_fd >= 0 && !o.on_output) ::fcntl(out.w.get(), F_SETPIPE_SZ, 1 << 20);
  }

  id = p->next_id++;
  msg::exec req;
  req.session = o.session;
  req.command = o.command;
  // A relative directory goes as given: sbshd takes it from the session's root, or else from
  // this process's directory (sent along on a local connection only).
  req.cwd = o.cwd;
  std::string base = o.cwd.empty() || o.cwd[0] == '/' ? std::string() : p->local_cwd();
  req.cwd_base = base;
  req.env = o.env;
  req.timeout_ms = static_cast<uint64_t>(std::max<int64_t>(o.timeout.count(), 0));
  req.grace_ms = static_cast<uint64_t>(std::max<int64_t>(o.grace.count(), 0));
  char cwd[4096];
  if (!o.session_cwd.empty()) req.session_cwd = o.session_cwd;
  else if (!frames && ::getcwd(cwd, sizeof cwd) != nullptr) req.session_cwd = cwd;
  // A session this creates starts with this process's environment (or the one given).
  std::vector<std::string> own_env;
  if (!o.session_env && !p->remote) own_env = inherited_environment();
  if (!o.session_env && !p->remote && p->env_kept && *p->env_kept == own_env) {
    req.same_env = true;  // sbshd has it: not sent again with every command
  } else {
    req.session_env = o.session_env ? *o.session_env : own_env;
    if (!o.session_env && !p->remote && !own_env.empty()) {
      req.keep_env = true;
      env_to_keep = own_env;
    }
  }
  req.io = frames ? "frames" : "fds";
  req.has_stdin = has_stdin;
  req.notify_started = static_cast<bool>(o.on_started) || keep;
  req.keep = keep;
  req.detach_after_ms = static_cast<uint64_t>(std::max<int64_t>(o.detach_after.count(), 0));
  req.tty = o.tty;
  req.interactive = o.interactive;
  req.cols = o.cols;
  req.rows = o.rows;
  if (frames) {
    std::string frame = ipc::encode(req, id);
    if (auto s = check_request_size(frame, o.command.size()); !s) return s.err();
    if (auto s = p->send(frame); !s) return s.err();
  } else {
    req.drain = true;
    std::array<int, 5> fds{};
    size_t nfds = 0;
    for (int fd : {out.w.get(), err.w.get(), has_stdin ? in.r.get() : -1, out.r.get(), err.r.get()})
      if (fd >= 0) fds[nfds++] = fd;
    req.fds = nfds;
    std::string frame = ipc::encode(req, id);
    if (auto s = check_request_size(frame, o.command.size()); !s) return s.err();
    if (auto s = p->send(frame, std::span<const int>(fds.data(), nfds)); !s) return s.err();
    out.w.reset();
    err.w.reset();
    in.r.reset();
    set_nonblocking(out.r.get());
    set_nonblocking(err.r.get());
  }

  kept.emplace(res, o.output_limit);
  sinks[0].r = std::move(out.r);
  sinks[1].r = std::move(err.r);
  for (auto& s : sinks) {
    s.eof = !s.r;
    s.cb = o.on_output ? &o.on_output : nullptr;
    s.fd_out = o.on_output ? -1 : (s.which == stream::out ? o.stdout_fd : o.stderr_fd);
    s.keep = o.on_output && !o.collect_output ? nullptr : s.which == stream::out ? &kept->out : &kept->err;
  }
  pending = o.stdin_data ? std::string_view(*o.stdin_data) : std::string_view();
  src_eof = o.stdin_fd < 0;
  // Input goes into the stdin pipe, or in stdin_data frames of at most 64 KiB, sent only
  // when the socket has room: sbshd stops reading a client whose input the command does not
  // take, and the output that command writes meanwhile must still be read.
  in_open = has_stdin;
  in_target = frames ? p->ch.fd() : in.w.get();
  if (has_stdin && pending.empty() && src_eof) close_input();
  return ok_status();
}

size_t exec_call::state::wanted(pollfd* pf, slot* map) const {
  size_t n = 0;
  auto add = [&](int fd, short ev, slot tag) {
    if (fd < 0) return;
    pf[n] = {fd, ev, 0};
    map[n++] = tag;
  };
  add(p->ch.fd(), POLLIN, slot::socket);
  if (!sinks[0].eof) add(sinks[0].r.get(), POLLIN, slot::out);
  if (!sinks[1].eof) add(sinks[1].r.get(), POLLIN, slot::err);
  bool have_input = !pending.empty() || !in_buf.empty();
  if (in_open && have_input) add(in_target, POLLOUT, slot::stdin_target);
  if (in_open && !have_input && !src_eof) add(opts->stdin_fd, POLLIN, slot::stdin_source);
  add(opts->signal_fd, POLLIN, slot::signal_fd);
  return n;
}

result<std::optional<exec_result>> exec_call::state::rounds(int timeout_ms) {
  for (;;) {
    pollfd pf[kSlots];
    slot map[kSlots];
    int n = static_cast<int>(wanted(pf, map));
    if (p->ch.buffered()) pf[0].revents = POLLIN;  // a frame already read: take it first
    else {
      int ready = ::poll(pf, static_cast<nfds_t>(n), timeout_ms);
      if (ready < 0) {
        if (errno == EINTR) continue;
        return make_error(ipc::errc::io, fmt::format("poll: {}", std::strerror(errno)));
      }
      if (ready == 0) return std::optional<exec_result>();  // only with a timeout: not yet
    }
    for (int i = 0; i < n; ++i) {
      if (pf[i].revents == 0) continue;
      switch (map[i]) {
        case slot::out: sinks[0].pump(false); break;
        case slot::err: sinks[1].pump(false); break;
        case slot::stdin_target: {
          std::string_view src = !in_buf.empty() ? std::string_view(in_buf) : pending;
          ssize_t w = put_input(src);
          if (w > 0) {
            if (!in_buf.empty()) in_buf.erase(0, static_cast<size_t>(w));
            else pending.remove_prefix(static_cast<size_t>(w));
            if (in_buf.empty() && pending.empty() && src_eof) close_input();
          } else if (w < 0 && (frames || (errno != EAGAIN && errno != EINTR))) {
            // The command closed its stdin (or the connection failed, which the socket
            // will report): no more input.
            in_open = false;
            in.w.reset();
          }
          break;
        }
        case slot::stdin_source: {
          char buf[64 * 1024];
          ssize_t r = ::read(opts->stdin_fd, buf, sizeof buf);
          if (r > 0) in_buf.assign(buf, static_cast<size_t>(r));
          else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
            src_eof = true;
            close_input();
          }
          break;
        }
        case slot::signal_fd: {
          unsigned char sig;
          if (::read(opts->signal_fd, &sig, 1) == 1) send_signal(sig);
          break;
        }
        case slot::socket: {
          auto env = p->ch.recv();
          if (!env) {
            if (ipc::has_code(env.err(), ipc::errc::eof))
              return make_error(ipc::errc::eof, "sbshd closed the connection before the command finished");
            return env.err();
          }
          const auto& m = env->msg;
          if (m.type() == msg_type::error) return error_from(m, "sbshd refused the command");
          if (m.id() != id) break;
          if (env_to_keep && p->server_keeps_env) {  // sbshd took the request: it keeps the environment
            p->env_kept = std::move(*env_to_keep);
            env_to_keep.reset();
          }
          if (m.type() == msg_type::exec_started) {
            // Once: a command whose shell ended before reading it goes to the next shell.
            auto st = ipc::decode<msg::exec_started>(m);
            if (st && keep) res.command_id = st->command_id;
            if (st && !started_told && opts->on_started)
              opts->on_started({st->command_id, st->generation, st->started_at_ms});
            started_told = true;
            break;
          }
          if (m.type() == msg_type::exec_detached) {
            // It goes on without us: what it wrote so far is the result's output.
            auto d = read_reply<msg::exec_detached>(m);
            if (!d) return d.err();
            res.running = true;
            res.command_id = d->command_id;
            res.waiting_for_input = d->waiting_for_input;
            res.prompt = std::string(d->prompt);
            kept->finish(res);
            done = true;
            return std::optional<exec_result>(std::move(res));
          }
          if (m.type() == msg_type::output) {
            if (auto c = output_chunk(m)) sinks[c->first == stream::err ? 1 : 0].deliver(c->second);
            break;
          }
          if (m.type() != msg_type::exec_done) break;
          auto release = read_done(m, res);
          if (!release) return release.err();
          // The command has ended. In frames, sbshd sent all it wrote before exec_done.
          // Else what it wrote is in the pipes now: take it, and leave whatever background
          // jobs write later to sbshd (which needs no word when none can).
          if (!frames) {
            sinks[0].pump(true);
            sinks[1].pump(true);
            if (*release) (void)p->ch.send(ipc::encode(msg::release{}, id));
          }
          for (const auto& s : sinks)
            if (s.write_errno != 0)
              return make_error(ipc::errc::write_error, fmt::format("write error: {}", std::strerror(s.write_errno)));
          kept->finish(res);
          done = true;
          return std::optional<exec_result>(std::move(res));
        }
      }
    }
    for (auto& s : sinks) {
      if (s.broken && !s.told) {
        s.told = true;
        send_signal(s.write_errno != 0 ? 0 : SIGPIPE);
      }
    }
  }
}

// Makes the epoll set what the next round would poll: one entry per descriptor (the socket
// may be wanted for reading and, with input in frames, for writing).
status exec_call::state::sync_epoll() {
  pollfd pf[kSlots];
  slot map[kSlots];
  size_t n = wanted(pf, map);
  std::vector<std::pair<int, uint32_t>> want;
  for (size_t i = 0; i < n; ++i) {
    uint32_t ev = (pf[i].events & POLLIN ? EPOLLIN : 0u) | (pf[i].events & POLLOUT ? EPOLLOUT : 0u);
    auto it = std::find_if(want.begin(), want.end(), [&](const auto& w) { return w.first == pf[i].fd; });
    if (it != want.end()) it->second |= ev;
    else want.emplace_back(pf[i].fd, ev);
  }
  for (const auto& [fd, ev] : registered) {
    if (std::none_of(want.begin(), want.end(), [fd = fd](const auto& w) { return w.first == fd; }))
      (void)::epoll_ctl(ep.get(), EPOLL_CTL_DEL, fd, nullptr);  // may be closed already: no matter
  }
  for (const auto& [fd, ev] : want) {
    epoll_event e{};
    e.events = ev;
    e.data.fd = fd;
    auto it = std::find_if(registered.begin(), registered.end(), [fd = fd](const auto& r) { return r.first == fd; });
    int op = it == registered.end() ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
    if (op == EPOLL_CTL_MOD && it->second == ev) continue;
    if (::epoll_ctl(ep.get(), op, fd, &e) != 0 &&
        !(op == EPOLL_CTL_ADD && errno == EEXIST && ::epoll_ctl(ep.get(), EPOLL_CTL_MOD, fd, &e) == 0))
      return make_error(ipc::errc::io, fmt::format("epoll_ctl: {}", std::strerror(errno)));
  }
  registered = std::move(want);
  return ok_status();
}

result<exec_result> connection::exec(const exec_options& opts) {
  exec_call::state st;
  sigpipe_guard guard(opts.stdin_data.has_value() || opts.stdin_fd >= 0 ||
                      (!opts.on_output && (opts.stdout_fd >= 0 || opts.stderr_fd >= 0)));
  if (auto s = st.begin(p_.get(), opts); !s) return s.err();
  auto r = st.rounds(-1);  // waits: never returns without the result or an error
  if (!r) return r.err();
  return std::move(**r);
}

result<exec_call> connection::start_exec(exec_options opts) {
  auto st = std::make_unique<exec_call::state>();
  st->owned = std::move(opts);
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return make_error(ipc::errc::io, fmt::format("epoll_create1: {}", std::strerror(errno)));
  st->ep = unique_fd(ep);
  {
    sigpipe_guard guard(st->owned.stdin_data.has_value() || st->owned.stdin_fd >= 0 ||
                        (!st->owned.on_output && (st->owned.stdout_fd >= 0 || st->owned.stderr_fd >= 0)));
    if (auto s = st->begin(p_.get(), st->owned); !s) return s.err();
  }
  if (auto s = st->sync_epoll(); !s) return s.err();
  return exec_call(std::move(st));
}

exec_call::exec_call(std::unique_ptr<state> s) : s_(std::move(s)) {}
exec_call::exec_call(exec_call&&) noexcept = default;
exec_call& exec_call::operator=(exec_call&&) noexcept = default;
exec_call::~exec_call() = default;

int exec_call::fd() const { return s_ ? s_->ep.get() : -1; }

bool exec_call::done() const { return !s_ || s_->done; }

result<std::optional<exec_result>> exec_call::step() {
  if (done()) return make_error(ipc::errc::usage, "exec_call::step: the command has ended already");
  sigpipe_guard guard(s_->guard_pipes);
  auto r = s_->rounds(0);
  if (!r) {
    s_->done = true;  // the connection is out of step now: nothing more to drive
    return r.err();
  }
  if (!*r) {
    if (auto s = s_->sync_epoll(); !s) {
      s_->done = true;
      return s.err();
    }
  }
  return r;
}

namespace {

// The end of a kept command's reply: its exec_done, or command_running.
status read_end(const ipc::message& m, exec_result& r) {
  if (m.type() == msg_type::command_running) {
    auto c = read_reply<msg::command_running>(m);
    if (!c) return c.err();
    r.running = true;
    r.command_id = c->command_id;
    r.started_at_ms = c->started_at_ms;
    r.session = c->session;
    r.command = c->command;
    r.stdout_bytes = c->stdout_bytes;
    r.stderr_bytes = c->stderr_bytes;
    r.waiting_for_input = c->waiting_for_input;
    r.prompt = c->prompt;
    r.screen = c->screen;
    r.generation = c->generation;
    return ok_status();
  }
  auto release = read_done(m, r);
  if (!release) return release.err();
  return ok_status();
}

// A kept command's output (after `from`'s offsets), kept as exec keeps it (output_limit),
// with how it stands: one command_logs, without follow.
result<exec_result> logs_as_result(connection& c, uint64_t command_id, const logs_options& from,
                                   size_t output_limit) {
  exec_result res;
  kept_output kept(res, output_limit);
  auto end = c.command_logs(command_id, from, [&](stream s, std::string_view d) { kept.add(s, d); });
  if (!end) return end.err();
  std::string out = std::move(res.stdout_data), err = std::move(res.stderr_data);
  res = std::move(*end);
  res.stdout_data = std::move(out);
  res.stderr_data = std::move(err);
  kept.finish(res);
  return res;
}

}  // namespace

result<exec_result> connection::command_logs(uint64_t command_id, const logs_options& opts,
                                             const std::function<void(stream, std::string_view)>& sink) {
  uint64_t id = p_->next_id++;
  msg::command_logs req;
  req.command_id = command_id;
  req.follow = opts.follow;
  req.out = opts.out;
  req.err = opts.err;
  req.stdout_offset = opts.stdout_offset;
  req.stderr_offset = opts.stderr_offset;
  auto env = p_->stream_reply(ipc::encode(req, id), id, opts.follow, opts.cancel_fd, sink);
  if (!env) return env.err();
  exec_result r;
  r.command_id = command_id;
  if (auto s = read_end(env->msg, r); !s) return s.err();
  return r;
}

result<exec_result> connection::await_command(uint64_t command_id, std::chrono::milliseconds timeout,
                                              size_t output_limit) {
  uint64_t id = p_->next_id++;
  msg::command_wait req;
  req.command_id = command_id;
  req.timeout_ms = static_cast<uint64_t>(std::max<int64_t>(timeout.count(), 0));
  // An error frame is an error here: "timeout" only says that it still runs.
  auto reply = p_->call(ipc::encode(req, id), id);
  if (!reply && reply.err().code != ipc::wire_name(ipc::errc::timeout)) return reply.err();
  // Ended or not, its output so far, then how it stands, in one reply.
  return logs_as_result(*this, command_id, {}, output_limit);
}

std::optional<std::string> key_bytes(std::string_view name) {
  static constexpr std::pair<std::string_view, std::string_view> kKeys[] = {
      {"Enter", "\r"},       {"Tab", "\t"},           {"Esc", "\x1b"},           {"Up", "\x1b[A"},  {"Down", "\x1b[B"},
      {"Right", "\x1b[C"},   {"Left", "\x1b[D"},      {"Home", "\x1b[H"},        {"End", "\x1b[F"}, {"Backspace", "\x7f"},
      {"Delete", "\x1b[3~"}, {"PageUp", "\x1b[5~"},   {"PageDown", "\x1b[6~"},   {"Space", " "}};
  for (const auto& [k, bytes] : kKeys)
    if (k == name) return std::string(bytes);
  if (name.size() == 3 && name[0] == 'C' && name[1] == '-' && name[2] >= 'a' && name[2] <= 'z')
    return std::string(1, static_cast<char>(name[2] - 'a' + 1));
  return std::nullopt;
}

result<exec_result> connection::send_input(uint64_t command_id, std::string_view data, const input_options& opts) {
  using clock = std::chrono::steady_clock;
  auto deadline = opts.timeout.count() > 0 ? clock::now() + opts.timeout : clock::time_point::max();
  // In pieces that fit a frame; a command that has not read what it was sent yet is given
  // time to (input_full), the rest waits meanwhile.
  constexpr size_t kPiece = size_t{256} * 1024;
  exec_result before;
  bool first = true;
  do {
    std::string_view piece = data.substr(0, kPiece);
    msg::command_input req;
    req.command_id = command_id;
    req.data = {piece};
    req.typed = opts.typed;
    req.eof = opts.eof && piece.size() == data.size();
    for (;;) {
      uint64_t id = p_->next_id++;
      auto reply = p_->call(ipc::encode(req, id), id);
      if (reply) {
        if (first)
          if (auto s = read_end(reply->msg, before); !s) return s.err();
        break;
      }
      if (reply.err().code != ipc::wire_name(ipc::errc::input_full) || clock::now() >= deadline) return reply.err();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    first = false;
    data.remove_prefix(piece.size());
  } while (!data.empty());
  if (!opts.wait) return before;
  // Its answer: until it ends or waits for input again.
  uint64_t id = p_->next_id++;
  msg::command_wait wait;
  wait.command_id = command_id;
  wait.until_input = true;
  if (deadline != clock::time_point::max())
    wait.timeout_ms = static_cast<uint64_t>(std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count()));
  auto reply = p_->call(ipc::encode(wait, id), id);
  if (!reply && reply.err().code != ipc::wire_name(ipc::errc::timeout)) return reply.err();
  // What it wrote since the input went in, and how it stands.
  logs_options from;
  from.stdout_offset = before.stdout_bytes;
  from.stderr_offset = before.stderr_bytes;
  return logs_as_result(*this, command_id, from, opts.output_limit);
}

result<exec_result> connection::kill_command(uint64_t command_id, int signal) {
  uint64_t id = p_->next_id++;
  msg::command_kill req;
  req.command_id = command_id;
  req.signal.number = signal;
  auto reply = p_->call(ipc::encode(req, id), id);
  if (!reply) return reply.err();
  exec_result r;
  r.command_id = command_id;
  if (auto s = read_end(reply->msg, r); !s) return s.err();
  return r;
}

}  // namespace sbsh::client
