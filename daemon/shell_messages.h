// sbshd's end of the shell channel (ipc/shell_channel.h): the one message that runs a command
// in a session's bash, and the statuses that come back. One definition serves sbshd and the
// benchmark that drives a bash over this channel with no daemon at all (bench/, its floor).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "ipc/fd.h"
#include "ipc/result.h"
#include "ipc/shell_channel.h"

namespace sbsh::daemon {

// A socketpair for one shell: first is sbshd's end (non-blocking, and told each message's
// sender: see watch_senders), second bash's.
[[nodiscard]] result<std::pair<unique_fd, unique_fd>> make_shell_channel();

// Has the kernel say which process sent each message that arrives on sbshd's end `channel`
// (SO_PASSCRED): shell_message::sender. The setting belongs to the socket, so a channel taken
// over from an earlier sbshd already has it; setting it again does no harm.
void watch_senders(int channel);

// A number no command can predict, for a run's or a sync's nonce (ipc/shell_channel.h).
[[nodiscard]] uint64_t new_nonce();

// One command for the builtin. Descriptors are sent (SCM_RIGHTS: the shell gets its own
// copies) and stay the caller's.
struct run_message {
  uint64_t seq = 0;
  uint64_t nonce = 0;  // its status must repeat it
  std::string_view text;
  std::string_view check_cwd;  // a directory that must exist for the text to run (exec -C)
  int in = -1;                 // -1: /dev/null
  int out = -1, err = -1;
  int keep_out = -1, keep_err = -1;  // read ends the shell holds while the command runs
  const int* lent = nullptr;         // three more for the text (SBSH_RUN_LENT), or none
  bool tty = false;                  // in, out and err are a terminal's (SBSH_RUN_TTY)
  uint32_t timeout_ms = 0;           // a lease's run (its holder sends it; sbshd never does)
};

// The memfd through which texts too long for one message travel, sized to the longest text
// sent lately (its memory is given back after a long one).
class text_memfd {
 public:
  // The memfd holding `text`, or -1 with errno set.
  int store(std::string_view text);

 private:
  unique_fd fd_;
  size_t size_ = 0;
};

// Sends one run. A text longer than SBSH_CHANNEL_INLINE_TEXT goes through `big`. The error's
// code is "gone" when the shell's end is closed (the shell has ended).
[[nodiscard]] status send_run(int channel, const run_message& m, text_memfd& big);
[[nodiscard]] status send_sync(int channel, uint64_t seq, uint64_t nonce);
// Asks the builtin to stop run `seq` if its command has not started yet (see the interrupt
// message in ipc/shell_channel.h). Best effort: the SIGINT that follows it is the interrupt,
// and a shell that cannot take the message is about to be found gone.
void send_interrupt(int channel, uint64_t seq);
// Hands the builtin `lease`, the shell's end of a lease socket (SOCK_SEQPACKET; sent, so it
// stays the caller's), on which it then also takes runs and answers them until the lease
// ends, and `page`, the memfd of the lease's record page, where it records each of those runs
// (ipc/shell_channel.h; docs/architecture.md, "The direct path"); `flags`: SBSH_LEASE_*. Only
// to a builtin that serves leases (shell_message::serves_leases). Answered with leased, or
// lease_ended when the shell could not take it.
[[nodiscard]] status send_lease(int channel, uint64_t seq, uint64_t nonce, int lease, int page, uint32_t flags);
// Ends the lease between two commands; answered with lease_ended (nothing when none is held).
[[nodiscard]] status send_lease_end(int channel, uint64_t seq);

// One message from the builtin.
struct shell_message {
  sbsh_channel_type type{};
  uint64_t seq = 0;
  int exit_value = 0;
  std::optional<int> signal;  // only when a signal ended the last command
  bool interrupted = false;   // SIGINT stopped the text: the rest of it did not run
  bool not_run = false;       // nothing of the text ran: see err
  int err = 0;                // errno, or SBSH_ERR_*
  pid_t pid = 0;
  bool serves_interrupts = false;  // ready, synced: the builtin reads interrupt messages
  bool serves_leases = false;      // ready, synced: the builtin takes leases
  uint64_t nonce = 0;              // status, synced: the nonce of the message it answers
  std::optional<std::string> cwd;  // status: the shell's $PWD, when it changed
  // The process that sent it, as the kernel says (in sbshd's PID namespace); 0 when the
  // kernel said nothing (the channel's senders are not watched).
  pid_t sender = 0;
};

// The next message waiting on sbshd's (non-blocking) end: nullopt when none is; an error with
// code "gone" at end-of-file. A malformed message is an error with code "bad_message": the
// shell cannot send one, so its channel is not to be trusted any more. Descriptors sent with
// a message (the builtin sends none) are closed.
[[nodiscard]] result<std::optional<shell_message>> receive_message(int channel);

// Why a run was not run, for a user: "No such file or directory", "not a directory", ...
std::string not_run_reason(int err);

}  // namespace sbsh::daemon
