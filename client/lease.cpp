// A lease of a session's shell (sbsh/client.h, class lease; docs/architecture.md, "The direct
// path"): commands run on the lease's socket as sbshd runs them on the shell's channel
// (ipc/shell_channel.h), with as few system calls as the benchmark's driver makes: two pipes,
// one message out, one poll, the status and the pipes read as they come.
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "client/connection_impl.h"
#include "ipc/shell_channel.h"
#include "ipc/socket_io.h"

namespace sbsh::client {

namespace msg = ipc::msg;
using ipc::msg_type;

struct lease::state {
  connection::impl* conn = nullptr;  // the connection it was granted on, which outlives it
  uint64_t id = 0;                   // the lease request's
  unique_fd sock;
  int64_t shell_pid = 0;
  uint64_t generation = 0;
  uint64_t seq = 0;
  std::mt19937_64 nonces{std::random_device{}()};
  std::string ended;  // why it is over, once it is
  // Pipes of earlier runs that their background jobs still hold: read into nothing while
  // runs wait, and handed to sbshd at release, so that those jobs never meet a pipe without
  // a reader (as an exec's never do).
  std::vector<unique_fd> draining;
};

namespace {

error lease_over(const lease::state& st) {
  return make_error(ipc::errc::eof, fmt::format("the lease has ended ({}): ask for another, or run the command with "
                                                "exec",
                                                st.ended.empty() ? "its socket closed" : st.ended));
}

// The pipes a lease keeps draining at most: beyond, the oldest is let go.
constexpr size_t kMaxDraining = 16;

void keep_draining(lease::state& st, unique_fd fd) {
  if (st.draining.size() >= kMaxDraining) st.draining.erase(st.draining.begin());
  st.draining.push_back(std::move(fd));
}

// Reads what the drained pipes polled in `p` (as many as st.draining, in its order) hold, into
// nothing; those at end-of-file are closed.
void drain_ready(lease::state& st, const pollfd* p, size_t n) {
  std::vector<int> done;
  for (size_t i = 0; i < n; ++i) {
    if (p[i].revents == 0) continue;
    char buf[16384];
    ssize_t got = ::read(p[i].fd, buf, sizeof buf);
    if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) done.push_back(p[i].fd);
  }
  std::erase_if(st.draining, [&done](const unique_fd& fd) {
    return std::find(done.begin(), done.end(), fd.get()) != done.end();
  });
}

// A text too long for one message, in a memfd (as sbshd's text_memfd does).
unique_fd text_in_memfd(std::string_view text) {
  unique_fd fd(::memfd_create("sbsh-lease-text", MFD_CLOEXEC));
  if (!fd) return fd;
  size_t off = 0;
  while (off < text.size()) {
    ssize_t w = ::write(fd.get(), text.data() + off, text.size() - off);
    if (w <= 0) return {};
    off += static_cast<size_t>(w);
  }
  return fd;
}

}  // namespace

lease::lease(std::unique_ptr<state> s) : s_(std::move(s)) {}
lease::lease(lease&&) noexcept = default;
lease& lease::operator=(lease&& o) noexcept {
  if (this != &o) {
    if (s_) (void)release();
    s_ = std::move(o.s_);
  }
  return *this;
}
lease::~lease() {
  if (s_) (void)release();
}

bool lease::held() const { return s_ && s_->sock && s_->conn != nullptr; }
int64_t lease::shell_pid() const { return s_ ? s_->shell_pid : 0; }
uint64_t lease::generation() const { return s_ ? s_->generation : 0; }

namespace {

// Reads the shell's answer to run `h` from the lease, into `r`: false when none has come yet.
// A message that is not the shell's status of that run drops the lease.
result<bool> take_status(lease::state& st, const sbsh_run_header& h, exec_result& r) {
  sbsh_status_msg m{};
  char cwd[SBSH_CHANNEL_MAX_CWD];
  iovec in[2] = {{&m, sizeof m}, {cwd, sizeof cwd}};
  alignas(cmsghdr) char cred[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(4 * sizeof(int))];
  msghdr rh{};
  rh.msg_iov = in;
  rh.msg_iovlen = 2;
  rh.msg_control = cred;
  rh.msg_controllen = sizeof cred;
  ssize_t n = ::recvmsg(st.sock.get(), &rh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return false;
  if (n <= 0) {
    // The shell closed the lease while the command ran (the holder's connection closed, or
    // the command closed the lease's descriptor): its status went to sbshd.
    st.sock.reset();
    return make_error(ipc::errc::eof, fmt::format("the lease ended while the command ran, before its status came "
                                                  "back; it may have run in part ({})",
                                                  st.ended.empty() ? "its socket closed" : st.ended));
  }
  pid_t sender = 0;
  for (cmsghdr* k = CMSG_FIRSTHDR(&rh); k != nullptr; k = CMSG_NXTHDR(&rh, k)) {
    if (k->cmsg_level != SOL_SOCKET) continue;
    if (k->cmsg_type == SCM_CREDENTIALS) {
      ucred u{};
      std::memcpy(&u, CMSG_DATA(k), sizeof u);
      sender = u.pid;
    } else if (k->cmsg_type == SCM_RIGHTS) {  // the shell sends none: closed
      for (size_t i = 0; i < (k->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(k) + i * sizeof(int), sizeof fd);
        ::close(fd);
      }
    }
  }
  if (static_cast<size_t>(n) < sizeof m || m.magic != SBSH_CHANNEL_MAGIC || m.version != SBSH_CHANNEL_VERSION ||
      m.type != SBSH_MSG_STATUS || m.seq != h.seq || m.nonce != h.nonce || sender != st.shell_pid) {
    st.sock.reset();
    return make_error(ipc::errc::protocol,
                      fmt::format("the lease's socket carried a message that is not the shell's status of the "
                                  "command (from pid {}, the shell is {}); the lease is dropped",
                                  sender, st.shell_pid));
  }
  if ((m.flags & SBSH_STATUS_NOT_RUN) != 0) {
    // The shell did not run it: the lease ended first (or the run was refused).
    st.sock.reset();
    if (m.err == SBSH_ERR_LEASE_ENDED)
      return make_error(ipc::errc::eof,
                        fmt::format("the lease ended before the shell read the command, which did not run ({}): "
                                    "run it with exec, or on a new lease",
                                    st.ended.empty() ? "another request was queued on the session, or it was "
                                                       "released"
                                                     : st.ended));
    return make_error(ipc::errc::protocol,
                      fmt::format("the shell refused the command (error {}); the lease is dropped", m.err));
  }
  r.exit_code = m.exit_value;
  if ((m.flags & SBSH_STATUS_SIGNALED) != 0 && m.exit_signal > 0 && m.exit_signal < 65) r.signal = m.exit_signal;
  r.timed_out = (m.flags & SBSH_STATUS_TIMED_OUT) != 0;
  r.cancelled = (m.flags & SBSH_STATUS_CANCELLED) != 0;
  return true;
}

}  // namespace

result<exec_result> lease::run(std::string_view command, uint64_t timeout_ms) {
  if (!s_) return make_error(ipc::errc::invalid_argument, "a lease that was moved from");
  state& st = *s_;
  if (!st.sock) return lease_over(st);
  if (command.size() > UINT32_MAX) return make_error(ipc::errc::too_large, "the command is longer than 4 GiB");
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return make_error(ipc::errc::io, fmt::format("pipe: {}", std::strerror(errno)));
  unique_fd out_r(out[0]), out_w(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return make_error(ipc::errc::io, fmt::format("pipe: {}", std::strerror(errno)));
  unique_fd err_r(err[0]), err_w(err[1]);
  sbsh_run_header h{};
  h.magic = SBSH_CHANNEL_MAGIC;
  h.version = SBSH_CHANNEL_VERSION;
  h.type = SBSH_MSG_RUN;
  h.seq = ++st.seq;
  h.nonce = st.nonces();
  h.text_len = static_cast<uint32_t>(command.size());
  h.timeout_ms = static_cast<uint32_t>(std::min<uint64_t>(timeout_ms, UINT32_MAX));
  int fds[3] = {out_w.get(), err_w.get(), -1};
  size_t nfds = 2;
  unique_fd memfd;
  std::string_view inline_text = command;
  if (command.size() > SBSH_CHANNEL_INLINE_TEXT) {
    memfd = text_in_memfd(command);
    if (!memfd) return make_error(ipc::errc::io, fmt::format("cannot store the command: {}", std::strerror(errno)));
    h.flags |= SBSH_RUN_TEXT_MEMFD;
    fds[nfds++] = memfd.get();
    inline_text = {};
  }
  iovec iov[2] = {{&h, sizeof h}, {const_cast<char*>(inline_text.data()), inline_text.size()}};
  ssize_t sent = ipc::send_parts_with_fds(st.sock.get(), {iov, inline_text.empty() ? size_t{1} : size_t{2}},
                                          {fds, nfds});
  if (sent < 0) {
    st.sock.reset();
    return lease_over(st);
  }
  out_w.reset();
  err_w.reset();
  memfd.reset();
  // What sbshd says of an exec: when it started, how long it took, the bytes written (a lease
  // keeps them all).
  exec_result r;
  r.generation = st.generation;
  r.started_at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  auto t0 = std::chrono::steady_clock::now();
  bool answered = false;
  while (!answered || out_r || err_r) {
    pollfd p[3 + kMaxDraining] = {{answered ? -1 : st.sock.get(), POLLIN, 0},
                                  {out_r ? out_r.get() : -1, POLLIN, 0},
                                  {err_r ? err_r.get() : -1, POLLIN, 0}};
    size_t n_polled = 3;
    for (const auto& d : st.draining) p[n_polled++] = {d.get(), POLLIN, 0};
    // Once the status is in, the command's own output is in its pipes already (its processes
    // have ended, the shell has let go of them): what does not come at once is a background
    // job's, which the lease drains from now on.
    int ready = ::poll(p, n_polled, answered ? 0 : -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return make_error(ipc::errc::io, fmt::format("poll: {}", std::strerror(errno)));
    }
    drain_ready(st, p + 3, n_polled - 3);
    if (answered && p[1].revents == 0 && p[2].revents == 0) {
      for (unique_fd* fd : {&out_r, &err_r})
        if (*fd) keep_draining(st, std::move(*fd));
      break;
    }
    for (int i = 1; i < 3; ++i) {
      if (p[i].revents == 0) continue;
      unique_fd& fd = i == 1 ? out_r : err_r;
      char buf[65536];
      ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n > 0) (i == 1 ? r.stdout_data : r.stderr_data).append(buf, static_cast<size_t>(n));
      else if (n == 0 || errno != EINTR) fd.reset();
    }
    if (p[0].revents == 0) continue;
    auto status = take_status(st, h, r);
    if (!status) return status.err();
    answered = *status;
  }
  r.duration_us = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
  r.stdout_bytes = r.stdout_data.size();
  r.stderr_bytes = r.stderr_data.size();
  return r;
}

sbsh::status lease::release() {
  if (!s_ || s_->conn == nullptr) return ok_status();
  state& st = *s_;
  connection::impl& p = *st.conn;
  st.conn = nullptr;
  // sbshd drains what background jobs of its runs still hold, from now on: sent while the
  // lease is still sbshd's current job (the socket's hang-up would end it first).
  std::vector<int> fds;
  for (const auto& d : st.draining) fds.push_back(d.get());
  msg::release rel;
  rel.fds = fds.size();
  auto sent = p.ch.send(ipc::encode(rel, st.id), fds);
  st.draining.clear();
  st.sock.reset();  // the shell sees the hang-up and ends the lease by itself too
  if (!sent) {
    p.lease_id = 0;
    return sent.err();
  }
  for (;;) {
    auto env = p.ch.recv();
    if (!env) {
      p.lease_id = 0;
      return env.err();
    }
    if (env->msg.id() != st.id) continue;
    if (env->msg.type() == msg_type::lease_ended || env->msg.type() == msg_type::error) break;
  }
  p.lease_id = 0;
  return ok_status();
}

result<lease> connection::lease(const std::string& session) {
  impl& p = *p_;
  if (p.remote)
    return make_error(ipc::errc::not_supported,
                      "a lease needs a local connection to sbshd: its socket cannot pass through a dial command "
                      "(--host, --dial); run commands with exec");
  uint64_t id = p.next_id++;
  if (auto s = p.send(ipc::encode(msg::lease{session}, id)); !s) return s.err();
  auto env = p.recv_reply(id);
  if (!env) return env.err();
  if (env->msg.type() != msg_type::lease_granted || env->fds.size() != 1)
    return make_error(ipc::errc::protocol, fmt::format("sbshd answered a lease with a {} carrying {} descriptors",
                                                       ipc::type_name(env->msg.type()), env->fds.size()));
  auto granted = ipc::decode<msg::lease_granted>(env->msg);
  if (!granted) return granted.err();
  auto st = std::make_unique<lease::state>();
  st->conn = &p;
  st->id = id;
  st->sock = std::move(env->fds[0]);
  st->shell_pid = granted->shell_pid;
  st->generation = granted->generation;
  p.lease_id = id;
  return client::lease(std::move(st));
}

}  // namespace sbsh::client
