// One sbshd per state directory: a lock on STATE/sbshd.lock, held for sbshd's life. Two
// daemons on one state directory would each restart a shell for every session, hand out the
// same process ids and rewrite each other's definitions. The file says who holds it (its
// pid, whether it is stopping, its socket), so that the one refused can say so.
#pragma once

#include <string>

#include "ipc/fd.h"
#include "ipc/result.h"

namespace sbsh::daemon {

// Takes the lock of `state_dir` for an sbshd on `socket`. A holder that is stopping, or that
// serves the same socket (a predecessor being replaced), is given 5 s to let go; any other is
// an error that names its pid and socket and says what to do.
result<unique_fd> lock_state_dir(const std::string& state_dir, const std::string& socket);
// Says in the lock's file who holds it now: this process, on `socket`.
void write_state_lock(int fd, const std::string& socket, bool stopping);

}  // namespace sbsh::daemon
