// The fork server (ipc/fork_server.h): an sbsh-wrapper that starts the others as copies of
// itself.
//
// A wrapper started by exec writes its own copy of the pages its C and C++ runtimes set up
// (relocations, stdio, locale, malloc's state: about 30 kB), though they are the same in
// every wrapper. A copy of one initialized process shares them copy-on-write, and /proc's
// proportional set size divides them among all the wrappers: at ten thousand idle sessions
// that is the larger part of what a wrapper costs beside its bash.
//
// The copy must be what exec would have made: it is sbshd's child (CLONE_PARENT), holds the
// descriptors sbshd sent at 0-5 and no other, an empty signal mask with every disposition at
// its default (the server changes none), the working directory and environment sbshd gave,
// and /proc/PID/cmdline and environ show its own arguments and variables (PR_SET_MM_MAP,
// which needs no privilege; a server on a kernel without it says it cannot serve). The
// limits, credentials, process group and session are the server's, which are sbshd's: the
// wrapper sets its own (--nofile, setsid) as one started by exec does.
#pragma once

namespace sbsh::wrapper {

struct forked_wrapper {
  int argc = 0;
  char** argv = nullptr;
};

// Serves sbshd on kForkServerFd: returns in each wrapper it starts, with that wrapper's
// arguments; the server itself exits once sbshd closes its end.
forked_wrapper serve_forks();

}  // namespace sbsh::wrapper
