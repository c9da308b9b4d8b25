// sbshd under a service manager (systemd): the listening socket it may pass (socket
// activation, sd_listen_fds(3)), and the readiness, status, stopping and watchdog messages
// it may ask for (sd_notify(3)). Without a service manager every function here has nothing
// to do, and says so by its result.
#pragma once

#include <cstdint>
#include <string>

#include "ipc/fd.h"
#include "ipc/result.h"

namespace sbsh::daemon::service_manager {

// The socket passed by socket activation, or an empty unique_fd when none was. Anything but
// one listening unix stream socket is an error that says how to fix the unit. Takes LISTEN_*
// out of the environment. Call it before forking: they name the pid they are meant for.
[[nodiscard]] result<unique_fd> take_listen_socket();

// The path the unix socket `fd` is bound to.
[[nodiscard]] result<std::string> bound_path(int fd);

// Sends `state` ("READY=1", "STATUS=...", several separated by newlines) to the service
// manager; false when there is none or the message could not be sent.
bool notify(const std::string& state);

// How often the service manager wants "WATCHDOG=1" from this process, in ms, or 0 when it
// does not watch it.
[[nodiscard]] uint64_t watchdog_interval_ms();

}  // namespace sbsh::daemon::service_manager
