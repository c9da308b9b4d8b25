// sbshd's end of the shell channel; see shell_channel.h and ipc/shell_channel.h.
#include "daemon/shell_messages.h"

#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "daemon/capacity.h"
#include "ipc/protocol.h"

namespace sbsh::daemon {

result<std::pair<unique_fd, unique_fd>> make_shell_channel() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return make_error(ipc::errc::io, resource_failure(errno, "create the shell's channel"));
  unique_fd mine(sv[0]), bash(sv[1]);
  set_nonblocking(mine.get());
  watch_senders(mine.get());
  return std::pair(std::move(mine), std::move(bash));
}

void watch_senders(int channel) {
  int on = 1;
  (void)::setsockopt(channel, SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
}

uint64_t new_nonce() {
  // Drawn from the kernel a batch at a time: one getrandom() per 64 runs.
  static uint64_t batch[64];
  static size_t left = 0;
  if (left == 0) {
    size_t got = 0;
    while (got < sizeof batch) {
      ssize_t n = ::getrandom(reinterpret_cast<char*>(batch) + got, sizeof batch - got, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // cannot happen once the pool is ready (it is, long before sbshd runs)
      got += static_cast<size_t>(n);
    }
    left = std::size(batch);
  }
  uint64_t v = batch[--left];
  batch[left] = 0;
  return v;
}

int text_memfd::store(std::string_view text) {
  constexpr size_t kKeepBytes = 1u << 20;
  if (!fd_) {
    fd_ = unique_fd(::memfd_create("sbsh-text", MFD_CLOEXEC));
    if (!fd_) return -1;
  }
  // The builtin reads exactly the text's length, so what follows it from a longer earlier
  // text does no harm; but a large one's memory is not kept for later small ones.
  if (size_ > kKeepBytes && text.size() < size_ / 2) {
    if (::ftruncate(fd_.get(), 0) != 0) return -1;
    size_ = 0;
  }
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::pwrite(fd_.get(), text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    done += static_cast<size_t>(n);
  }
  size_ = std::max(size_, text.size());
  return fd_.get();
}

namespace {

status send_message(int channel, const void* head, size_t head_len, std::string_view a, std::string_view b,
                    const int* fds, size_t nfds) {
  iovec iov[3] = {{const_cast<void*>(head), head_len},
                  {const_cast<char*>(a.data()), a.size()},
                  {const_cast<char*>(b.data()), b.size()}};
  msghdr mh{};
  mh.msg_iov = iov;
  mh.msg_iovlen = 3;
  alignas(cmsghdr) char control[CMSG_SPACE(9 * sizeof(int))];
  if (nfds > 0) {
    mh.msg_control = control;
    mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
  }
  for (;;) {
    if (::sendmsg(channel, &mh, MSG_NOSIGNAL) >= 0) return ok_status();
    if (errno == EINTR) continue;
    // The builtin reads a message as soon as it is idle, and sbshd sends one at a time: a
    // full queue means the shell has stopped reading, which the caller treats as gone.
    std::string why = std::strerror(errno);
    bool gone = errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN || errno == EAGAIN;
    return make_error(gone ? ipc::errc::gone : ipc::errc::io,
                      fmt::format("cannot write to the session's shell: {}", why));
  }
}

sbsh_run_header header(uint16_t type, uint64_t seq, uint64_t nonce = 0) {
  sbsh_run_header h{};
  h.magic = SBSH_CHANNEL_MAGIC;
  h.version = SBSH_CHANNEL_VERSION;
  h.type = type;
  h.seq = seq;
  h.nonce = nonce;
  return h;
}

// Closes the descriptors a message carried (the builtin sends none: whatever does send some
// must not make sbshd hold them), and returns the sender the kernel named, or 0.
pid_t take_control(msghdr& mh) {
  pid_t sender = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET) continue;
    if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(ucred))) {
      ucred cred{};
      std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
      sender = cred.pid;
    } else if (c->cmsg_type == SCM_RIGHTS) {
      size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < n; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        ::close(fd);
      }
    }
  }
  return sender;
}

}  // namespace

status send_run(int channel, const run_message& m, text_memfd& big) {
  sbsh_run_header h = header(SBSH_MSG_RUN, m.seq, m.nonce);
  h.timeout_ms = m.timeout_ms;
  h.text_len = static_cast<uint32_t>(m.text.size());
  h.cwd_len = static_cast<uint32_t>(m.check_cwd.size());
  if (m.text.size() > UINT32_MAX || m.check_cwd.size() > SBSH_CHANNEL_MAX_CWD)
    return make_error(ipc::errc::io, "the command text or its directory is too long for the shell's channel");
  int fds[9];
  size_t n = 0;
  if (m.in >= 0) {
    h.flags |= SBSH_RUN_STDIN;
    fds[n++] = m.in;
  }
  fds[n++] = m.out;
  fds[n++] = m.err;
  if (m.tty) h.flags |= SBSH_RUN_TTY;
  if (m.keep_out >= 0 && m.keep_err >= 0) {
    h.flags |= SBSH_RUN_KEEPERS;
    fds[n++] = m.keep_out;
    fds[n++] = m.keep_err;
  }
  std::string_view inline_text = m.text;
  if (m.text.size() > SBSH_CHANNEL_INLINE_TEXT) {
    int fd = big.store(m.text);
    if (fd < 0)
      return make_error(ipc::errc::io, fmt::format("cannot store the command text: {}", std::strerror(errno)));
    h.flags |= SBSH_RUN_TEXT_MEMFD;
    fds[n++] = fd;
    inline_text = {};
  }
  if (m.lent != nullptr) {
    h.flags |= SBSH_RUN_LENT;
    for (int i = 0; i < 3; ++i) fds[n++] = m.lent[i];
  }
  return send_message(channel, &h, sizeof h, m.check_cwd, inline_text, fds, n);
}

status send_sync(int channel, uint64_t seq, uint64_t nonce) {
  sbsh_run_header h = header(SBSH_MSG_SYNC, seq, nonce);
  return send_message(channel, &h, sizeof h, {}, {}, nullptr, 0);
}

void send_interrupt(int channel, uint64_t seq) {
  sbsh_run_header h = header(SBSH_MSG_INTERRUPT, seq);
  (void)send_message(channel, &h, sizeof h, {}, {}, nullptr, 0);
}

status send_lease(int channel, uint64_t seq, uint64_t nonce, int lease, int page, uint32_t flags) {
  sbsh_run_header h = header(SBSH_MSG_LEASE, seq, nonce);
  h.flags = flags;
  int fds[2] = {lease, page};
  return send_message(channel, &h, sizeof h, {}, {}, fds, 2);
}

status send_lease_end(int channel, uint64_t seq) {
  sbsh_run_header h = header(SBSH_MSG_LEASE_END, seq);
  return send_message(channel, &h, sizeof h, {}, {}, nullptr, 0);
}

result<std::optional<shell_message>> receive_message(int channel) {
  sbsh_status_msg raw{};
  char cwd[SBSH_CHANNEL_MAX_CWD];
  iovec iov[2] = {{&raw, sizeof raw}, {cwd, sizeof cwd}};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(8 * sizeof(int))];
  msghdr mh{};
  ssize_t n;
  do {
    mh = msghdr{};
    mh.msg_iov = iov;
    mh.msg_iovlen = 2;
    mh.msg_control = control;
    mh.msg_controllen = sizeof control;
    n = ::recvmsg(channel, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return std::optional<shell_message>();
  if (n <= 0) return make_error(ipc::errc::gone, n == 0 ? "the shell closed its channel" : std::strerror(errno));
  pid_t sender = take_control(mh);
  size_t tail = static_cast<size_t>(n) - std::min(static_cast<size_t>(n), sizeof raw);
  bool with_cwd = raw.type == SBSH_MSG_STATUS && (raw.flags & SBSH_STATUS_CWD) != 0;
  if (static_cast<size_t>(n) < sizeof raw || (with_cwd ? tail == 0 : tail != 0) ||
      (mh.msg_flags & MSG_TRUNC) != 0 || raw.magic != SBSH_CHANNEL_MAGIC || raw.version != SBSH_CHANNEL_VERSION ||
      (raw.type != SBSH_MSG_READY && raw.type != SBSH_MSG_STATUS && raw.type != SBSH_MSG_SYNCED &&
       raw.type != SBSH_MSG_KEEPERS && raw.type != SBSH_MSG_LEASED && raw.type != SBSH_MSG_LEASE_ENDED &&
       raw.type != SBSH_MSG_RECORDS))
    return make_error(ipc::errc::bad_message, "the shell sent a malformed message on its channel");
  shell_message m;
  m.type = static_cast<sbsh_channel_type>(raw.type);
  m.seq = raw.seq;
  m.exit_value = raw.exit_value;
  if ((raw.flags & SBSH_STATUS_SIGNALED) != 0 && raw.exit_signal > 0 && raw.exit_signal < 65) m.signal = raw.exit_signal;
  m.interrupted = (raw.flags & SBSH_STATUS_INTERRUPTED) != 0;
  m.not_run = (raw.flags & SBSH_STATUS_NOT_RUN) != 0;
  m.err = raw.err;
  m.pid = static_cast<pid_t>(raw.pid);
  m.nonce = raw.nonce;
  m.sender = sender;
  if (with_cwd) m.cwd.emplace(cwd, tail);
  if (raw.type == SBSH_MSG_READY || raw.type == SBSH_MSG_SYNCED) {
    m.serves_interrupts = (raw.flags & SBSH_SERVES_INTERRUPTS) != 0;
    m.serves_leases = (raw.flags & SBSH_SERVES_LEASES) != 0;
  }
  return std::optional<shell_message>(m);
}

std::string not_run_reason(int err) {
  switch (err) {
    case SBSH_ERR_BAD_MESSAGE: return "the shell could not read the command";
    case SBSH_ERR_NOT_A_DIR: return "not a directory";
    case SBSH_ERR_NO_TERMINAL: return "the shell could not take the terminal as its controlling terminal";
    case SBSH_ERR_LEASE_ENDED: return "the lease ended before the shell read it";
    default: return std::strerror(err);
  }
}

}  // namespace sbsh::daemon
