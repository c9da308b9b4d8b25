// sbshd under a service manager (see service_manager.h).
#include "daemon/service_manager.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "ipc/protocol.h"

namespace sbsh::daemon::service_manager {

result<unique_fd> take_listen_socket() {
  int n = ::sd_listen_fds(1);
  if (n < 0)
    return make_error(ipc::errc::bad_activation,
                      fmt::format("cannot take the sockets passed by the service manager: {}", std::strerror(-n)));
  if (n == 0) return unique_fd();
  // Own every passed descriptor first, so that none leaks whatever is wrong with them.
  unique_fd first(SD_LISTEN_FDS_START);
  for (int fd = SD_LISTEN_FDS_START + 1; fd < SD_LISTEN_FDS_START + n; ++fd) ::close(fd);
  if (n > 1)
    return make_error(ipc::errc::bad_activation,
                      fmt::format("the service manager passed {} sockets, but sbshd listens on "
                                  "one: give its .socket unit a single ListenStream=",
                                  n));
  if (::sd_is_socket_unix(first.get(), SOCK_STREAM, 1, nullptr, 0) <= 0)
    return make_error(ipc::errc::bad_activation,
                      "the socket passed by the service manager is not a listening unix stream "
                      "socket: use ListenStream=/path in sbshd's .socket unit, with Accept=no");
  if (!set_nonblocking(first.get()))
    return make_error(ipc::errc::io,
                      fmt::format("cannot make the passed socket non-blocking: {}", std::strerror(errno)));
  return first;
}

result<std::string> bound_path(int fd) {
  sockaddr_un addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return make_error(ipc::errc::io, fmt::format("cannot read the passed socket's address: {}", std::strerror(errno)));
  size_t path_len = len > offsetof(sockaddr_un, sun_path) ? len - offsetof(sockaddr_un, sun_path) : 0;
  if (path_len == 0 || addr.sun_path[0] == '\0')
    return make_error(ipc::errc::bad_activation,
                      "the socket passed by the service manager has no path (it is unnamed or "
                      "abstract); sbsh clients find sbshd by a path: use ListenStream=/path");
  return std::string(addr.sun_path, ::strnlen(addr.sun_path, path_len));
}

bool notify(const std::string& state) { return ::sd_notify(0, state.c_str()) > 0; }

uint64_t watchdog_interval_ms() {
  uint64_t usec = 0;
  if (::sd_watchdog_enabled(0, &usec) <= 0) return 0;
  return usec / 1000;
}

}  // namespace sbsh::daemon::service_manager
