// sbsh-wrapper: holds one persistent bash for one session.
//
// sbshd starts it with the control socket on fd 3, the read end of bash's script pipe on
// fd 4 and the write end of the status pipe on fd 5, which become bash's stdin and stdout,
// and sbshd's own ends of those two pipes on fds 6 and 7. sbshd itself writes each
// command's line into the script pipe and reads each command's status (so the exec round
// trip does not pass through here); this process supervises: it starts bash in a session of
// its own, reaps orphans (it is a child subreaper), signals a command's processes on request
// (timeouts, cancels), reports bash's exit, and kills everything the session started when
// the shell ends or sbshd asks it to (SIGTERM).
//
// When sbshd goes away without ending the session (it crashed, or stopped with
// --keep-sessions), the wrapper keeps the session for the adoption timeout: it holds
// sbshd's ends of bash's pipes (fds 6 and 7), so bash neither reads end-of-file nor loses a
// status, and the background processes' pipes sbshd lent it (protect_group), and listens
// on DIR/w. The next sbshd connects there, sends `adopt`, and gets all of them back with
// what it needs to know of the session (`adopted`); the connection becomes the control
// socket. Nobody within the timeout: the session ends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ipc/limits.h"
#include "ipc/wrapper_link.h"  // the descriptor numbers and the adoption socket's name

namespace sbsh::wrapper {

struct options {
  std::string dir;                // the shell's link directory (--dir)
  uint64_t adopt_timeout_ms = 0;  // 0: the session ends with sbshd
  std::vector<ipc::rlimit_spec> limits;  // set on bash (--limit)
};

// Runs until the shell ends or the session is ended; returns the process exit code.
int run(const char* session_name, const options& o);

// A spare: started, with its bash, before any session needs it, so that a new session does
// not wait for two processes to start. It runs as run() does; sbshd's claim gives it the
// session's name and directory. `title` is the memory of its arguments, rewritten then to
// show the session's name.
int run_spare(char* title, std::size_t title_size, const options& o);

}  // namespace sbsh::wrapper
