// The state files sbshd keeps in its state directory (sessions/NAME.msgpack, procs.msgpack), each
// one frame: how one is read back, and how one that cannot be is set aside so that sbshd
// starts without it.
#pragma once

#include <string>

#include "ipc/frame.h"
#include "ipc/result.h"

namespace sbsh::daemon {

// Reads a state file written as one frame. *missing is set when it does not exist.
result<ipc::message> read_state_file(const std::string& path, bool* missing);
// Renames an unreadable state file to PATH.corrupt-MS, and logs why.
void move_aside(const std::string& path, const std::string& why);

}  // namespace sbsh::daemon
