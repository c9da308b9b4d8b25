// sbsh-wrapper: holds one persistent bash for one session.
//
// sbshd starts it with the control socket on fd 3, the read end of bash's script pipe on
// fd 4 and the write end of the status pipe on fd 5. sbshd itself writes each command's line into that pipe and reads each command's
// status (so the exec round trip does not pass through here); this process supervises:
// it starts bash in a session of its own, reaps orphans (it is a child subreaper), signals
// a command's processes on request (timeouts, cancels), reports bash's exit, and kills
// everything the session started when the shell ends or sbshd goes away.
#pragma once

namespace sbsh::wrapper {

inline constexpr int kControlFd = 3;
inline constexpr int kScriptFd = 4;
inline constexpr int kStatusFd = 5;  // becomes bash's stdout between commands

// Runs until the shell ends or the control socket closes; returns the process exit code.
int run(const char* session_name);

}  // namespace sbsh::wrapper
