// sendmsg/recvmsg with descriptors, and the blocking channel built on them.
#include "ipc/socket_io.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace sbsh::ipc {

ssize_t send_parts_with_fds(int sock, std::span<const iovec> data, std::span<const int> fds) {
  if (fds.size() > kMaxPassedFds) {
    errno = EINVAL;
    return -1;
  }
  msghdr mh{};
  mh.msg_iov = const_cast<iovec*>(data.data());
  mh.msg_iovlen = data.size();
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  if (!fds.empty()) {
    mh.msg_control = ctl;
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    std::memset(ctl, 0, mh.msg_controllen);
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t r;
  do r = ::sendmsg(sock, &mh, MSG_NOSIGNAL);
  while (r < 0 && errno == EINTR);
  return r;
}

received recv_parts_with_fds(int sock, std::span<const iovec> data, std::span<int> fds, int flags) {
  msghdr mh{};
  mh.msg_iov = const_cast<iovec*>(data.data());
  mh.msg_iovlen = data.size();
  // Room for the descriptors asked for and the credentials: the kernel closes those beyond.
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxPassedFds) + CMSG_SPACE(sizeof(ucred))];
  mh.msg_control = ctl;
  mh.msg_controllen = CMSG_SPACE(sizeof(int) * std::min(fds.size(), kMaxPassedFds)) + CMSG_SPACE(sizeof(ucred));
  received got;
  do got.bytes = ::recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
  while (got.bytes < 0 && errno == EINTR);
  if (got.bytes < 0) return got;
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (got.fds < fds.size()) {
        fds[got.fds++] = fd;
      } else {
        ::close(fd);
        got.fds_cut = true;
      }
    }
  }
  got.data_cut = (mh.msg_flags & MSG_TRUNC) != 0;
  got.fds_cut = got.fds_cut || (mh.msg_flags & MSG_CTRUNC) != 0;
  return got;
}

ssize_t send_with_fds(int sock, const char* data, size_t n, std::span<const int> fds) {
  if (fds.size() > kMaxFds) {
    errno = EINVAL;
    return -1;
  }
  iovec iov{const_cast<char*>(data), n};
  return send_parts_with_fds(sock, {&iov, 1}, fds);
}

namespace {

// Runs `use` on a socket and the address of dir/name, reached through dir's descriptor.
template <typename F>
result<unique_fd> at_socket_in(const std::string& dir, const char* name, int type, F use) {
  unique_fd d(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!d) return make_error(errc::io, fmt::format("cannot open {}: {}", dir, std::strerror(errno)));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  auto path = fmt::format("/proc/self/fd/{}/{}", d.get(), name);
  if (path.size() >= sizeof addr.sun_path) return make_error(errc::io, fmt::format("socket name too long: {}", name));
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  unique_fd fd(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
  if (!fd) return make_error(errc::io, fmt::format("socket: {}", std::strerror(errno)));
  if (!use(fd.get(), reinterpret_cast<const sockaddr*>(&addr))) {
    int e = errno;
    return make_error(e == ENOENT || e == ECONNREFUSED ? "unreachable" : "io",
                      fmt::format("{}/{}: {}", dir, name, std::strerror(e)));
  }
  return fd;
}

}  // namespace

std::optional<ucred> peer_of(int sock) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return std::nullopt;
  return cred;
}

void set_io_timeout(int sock, int seconds) {
  timeval limit{seconds, 0};
  ::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  ::setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
}

result<unique_fd> listen_in(const std::string& dir, const char* name, int backlog) {
  return at_socket_in(dir, name, SOCK_STREAM | SOCK_NONBLOCK, [&](int fd, const sockaddr* a) {
    return ::bind(fd, a, sizeof(sockaddr_un)) == 0 && ::listen(fd, backlog) == 0;
  });
}

result<unique_fd> connect_in(const std::string& dir, const char* name) {
  return at_socket_in(dir, name, SOCK_STREAM, [&](int fd, const sockaddr* a) {
    int rc;
    do rc = ::connect(fd, a, sizeof(sockaddr_un));
    while (rc != 0 && errno == EINTR);
    return rc == 0;
  });
}

// NOLINTNEXTLINE(readability-non-const-parameter): recvmsg() writes `data` through the iovec.
ssize_t recv_with_fds(int sock, char* data, size_t n, std::deque<unique_fd>& fds) {
  iovec iov{data, n};
  std::array<int, kMaxFds> got{};
  received r = recv_parts_with_fds(sock, {&iov, 1}, got);
  for (size_t i = 0; i < r.fds; ++i) fds.emplace_back(got[i]);
  // Descriptors lost: the stream can no longer be trusted.
  if (r.bytes >= 0 && r.fds_cut) {
    errno = EPROTO;
    return -1;
  }
  return r.bytes;
}

result<std::vector<unique_fd>> take_fds(const message& m, std::deque<unique_fd>& queue) {
  auto n = m.get_u64("fds");
  if (!n) return n.err();
  size_t want = n.value().value_or(0);
  if (want > kMaxFds)
    return make_error(errc::bad_request, fmt::format("field 'fds' is {}, at most {} allowed", want, kMaxFds));
  if (queue.size() < want)
    return make_error(errc::bad_request,
                      fmt::format("frame declares {} descriptors but {} arrived", want, queue.size()));
  std::vector<unique_fd> out;
  out.reserve(want);
  for (size_t i = 0; i < want; ++i) {
    out.push_back(std::move(queue.front()));
    queue.pop_front();
  }
  return out;
}

status channel::send(std::string_view frame, std::span<const int> fds) {
  size_t off = 0;
  while (off < frame.size()) {
    ssize_t r = send_with_fds(fd_.get(), frame.data() + off, frame.size() - off,
                              off == 0 ? fds : std::span<const int>{});
    if (r < 0) return make_error(errc::io, fmt::format("cannot write to the socket: {}", std::strerror(errno)));
    off += static_cast<size_t>(r);
  }
  return ok_status();
}

result<envelope> channel::recv() {
  for (;;) {
    auto body = reader_.next_body();
    if (!body) return body.err();
    if (body.value()) {
      auto m = message::parse(body.value()->data(), body.value()->size());
      if (!m) return m.err();
      auto fds = take_fds(*m, fds_);
      if (!fds) return fds.err();
      return envelope{std::move(*m), std::move(*fds)};
    }
    if (!scratch_) scratch_ = std::make_unique_for_overwrite<char[]>(read_chunk_);
    ssize_t r = recv_with_fds(fd_.get(), scratch_.get(), read_chunk_, fds_);
    if (r == 0) return make_error(errc::eof, "the peer closed the connection");
    if (r < 0) return make_error(errc::io, fmt::format("cannot read from the socket: {}", std::strerror(errno)));
    reader_.feed(scratch_.get(), static_cast<size_t>(r));
  }
}

}  // namespace sbsh::ipc
