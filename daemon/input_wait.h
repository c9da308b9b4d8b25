// Whether a command waits for input, as the kernel tells it: one of its processes is blocked
// reading its terminal or its stdin pipe (exec --tty, exec --interactive). Not a guess from
// silence or a prompt's look: a program that sleeps, computes or reads a file or a socket
// never counts; silence only confirms it (job_runner's settle).
#pragma once

#include <sys/types.h>

namespace sbsh::daemon {

// What a command reads its input from, and where its processes are.
struct input_source {
  pid_t shell = 0;       // the session's shell: it and every process below it are looked at
  pid_t foreground = 0;  // with a terminal: its foreground process group (others are not asked); 0: any
  dev_t tty_rdev = 0;    // the terminal's device, or 0
  ino_t pipe_ino = 0;    // the stdin pipe's inode, or 0
};

// Whether a process of the command is blocked reading `src` (read, readv, pread, or waiting
// in poll, select or epoll with it as its stdin). Reads /proc: the shell's tree, and each
// process's syscall (or, where that is refused, its wchan).
bool waits_for_input(const input_source& src);

}  // namespace sbsh::daemon
