// sbsh-wrapper: holds one persistent bash for one session.
//
// sbshd starts it with the control socket on fd 3, the read end of bash's script pipe on
// fd 4 and the write end of the status pipe on fd 5 (or, for a spare, with fd 3 only: the
// pipes come with the claim). sbshd itself writes each command's line into that pipe and reads each command's
// status (so the exec round trip does not pass through here); this process supervises:
// it starts bash in a session of its own, reaps orphans (it is a child subreaper), signals
// a command's processes on request (timeouts, cancels), reports bash's exit, and kills
// everything the session started when the shell ends or sbshd goes away.
#pragma once

#include <cstddef>

namespace sbsh::wrapper {

inline constexpr int kControlFd = 3;
inline constexpr int kScriptFd = 4;
inline constexpr int kStatusFd = 5;  // becomes bash's stdout between commands

// Runs until the shell ends or the control socket closes; returns the process exit code.
int run(const char* session_name);

// A spare: started, with its bash, before any session needs it, so that a new session does
// not wait for two processes to start. It runs as run() does; sbshd's claim gives it the
// session's name and directory. `title` is the memory of its arguments, rewritten then to
// show the session's name.
int run_spare(char* title, std::size_t title_size);

}  // namespace sbsh::wrapper
