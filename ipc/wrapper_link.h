// How sbshd and sbsh-wrapper reach each other outside their control messages: the
// descriptors a wrapper starts with, and the name of the socket on which a later sbshd
// adopts it. sbshd starts wrappers (daemon/server.cpp); the wrapper relies on the same
// numbers (wrapper/wrapper.cpp), so both read them from here.
#pragma once

namespace sbsh::wrapper {

inline constexpr int kControlFd = 3;      // the control socket (messages 500-510)
inline constexpr int kScriptFd = 4;       // bash's stdin: the read end of its script pipe
inline constexpr int kStatusFd = 5;       // becomes bash's stdout between commands
inline constexpr int kScriptOwnerFd = 6;  // sbshd's end of the script pipe
inline constexpr int kStatusOwnerFd = 7;  // sbshd's end of the status pipe
inline constexpr const char* kAdoptSocket = "w";  // in the shell's link directory

}  // namespace sbsh::wrapper
