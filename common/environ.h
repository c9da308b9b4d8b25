// The environment sbsh passes on to the processes it starts.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sbsh {

// Variables through which a service manager (systemd) talks to the one process it started:
// NOTIFY_SOCKET, WATCHDOG_PID, WATCHDOG_USEC, LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES.
// A child that inherited them could send readiness or watchdog messages in that process's
// name, or take its sockets, so sbsh never passes them on.
[[nodiscard]] bool is_service_manager_variable(std::string_view entry);

// This process's environment ("NAME=value" entries) without the service manager's variables
// and without the variable named `drop` (when not empty).
[[nodiscard]] std::vector<std::string> inherited_environment(std::string_view drop = {});

// Pointers into `entries` with a null at the end, as execve and posix_spawn take an
// environment or arguments; valid while `entries` is neither changed nor destroyed.
[[nodiscard]] std::vector<char*> c_pointers(std::vector<std::string>& entries);

}  // namespace sbsh
