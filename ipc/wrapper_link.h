// How sbshd and sbsh-wrapper reach each other outside their control messages: the
// descriptors a wrapper starts with, and the name of the socket on which a later sbshd
// adopts it. sbshd starts wrappers (daemon/server.cpp) and adopts them
// (daemon/shell_supervisor.cpp); the wrapper relies on the same numbers (wrapper/wrapper.cpp),
// so both read them from here.
#pragma once

namespace sbsh::wrapper {

inline constexpr int kControlFd = 3;       // the control socket (messages 500-513)
inline constexpr int kChannelFd = 4;       // bash's end of the shell channel (ipc/shell_channel.h)
inline constexpr int kChannelOwnerFd = 5;  // sbshd's end: lent back to it, kept for the next
inline constexpr const char* kAdoptSocket = "w";  // in the shell's directory
// A wrapper told to stop ends every process of its session, then itself, within this; only a
// process stuck in the kernel makes it give up sooner. sbshd's shutdown waits for its wrappers
// that long (and a little more) before it kills one: a wrapper killed while it still ends its
// session would leave the rest of the session's processes to run on without it.
inline constexpr int kEndSessionWithinMs = 10000;
// How long sbshd waits for a wrapper it told to stop (shutdown, session rm) before it takes
// it for stuck: the wrapper's bound and a margin.
inline constexpr int kWrapperStopWaitMs = kEndSessionWithinMs + 2000;

}  // namespace sbsh::wrapper
