// Private state of sbsh::client::connection, shared by the files that implement it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "client/request.h"
#include "ipc/messages.h"
#include "ipc/socket_io.h"
#include "sbsh/client.h"

namespace sbsh::client {

// Hidden: a nested class takes the visibility of the class around it, which libsbsh.so
// exports; this one is no part of the API.
struct __attribute__((visibility("hidden"))) connection::impl {
  ipc::channel ch;
  std::string socket_path;  // or the dial command's line
  // The process of connect_options::dial_command (-1: none, or reaped): the connection is
  // then remote. The destructor closes the channel and ends it.
  pid_t dial_pid = -1;
  bool remote = false;
  uint64_t next_id = 1;
  // The hello whose welcome has not been read yet (0: read), and how long it may take.
  // connect() reads it at once, or (wait_for_welcome = false) leaves it for the first
  // request, which then travels right behind the hello.
  uint64_t hello_id = 0;
  // The welcome said sbshd keeps an exec's environment for the connection (keep_env), and
  // the one it keeps: an exec whose environment is the same names it (same_env).
  bool server_keeps_env = false;
  std::optional<std::vector<std::string>> env_kept;
  std::chrono::steady_clock::time_point hello_deadline;
  std::chrono::milliseconds hello_timeout{0};
  // Set when the handshake failed: the connection is unusable and every request says why.
  std::optional<error> handshake_error;
  // How a local connection was made, to make it once more when it was lost before sbshd
  // answered the hello (see redial_if_unanswered); cleared once used.
  std::optional<connect_options> redial_opts;
  // The lease request whose lease_ended has not come (client::lease): 0 when none. The
  // connection serves nothing else meanwhile.
  uint64_t lease_id = 0;

  impl() = default;
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;
  ~impl();

  // A directory given relative, made absolute from this process's directory on a local
  // connection (sbshd takes absolute directories only). Over a dial command it is left as
  // it is, and sbshd refuses it: this process's directory means nothing on the far host.
  [[nodiscard]] std::string absolute(const std::string& path) const;
  // This process's directory on a local connection; empty over a dial command, where it
  // means nothing to sbshd.
  [[nodiscard]] std::string local_cwd() const;
  // Sends a hello, whose welcome is then due.
  sbsh::status send_hello();
  // Reads the welcome that answers connect()'s hello if it is still due.
  sbsh::status await_welcome();
  // After `e`, met while the hello was unanswered: when it shows that no sbshd read anything
  // of this connection, connects once more (starting sbshd if allowed) and sends a new hello.
  // Returns whether it did; else `e` stands.
  bool redial_if_unanswered(const error& e);
  // The error for a dial command that closed the connection before the welcome (reaps it).
  error dial_failed();
  // Sends a request (with descriptors), then makes sure the handshake succeeded.
  sbsh::status send(std::string_view frame, std::span<const int> fds = {});
  // Sends a request (a whole frame) and waits for the reply with the same id (other frames
  // are an error: one connection runs one request at a time).
  result<ipc::envelope> call(std::string_view frame, uint64_t id);
  // The second half of call(): waits for the reply to request `id`.
  result<ipc::envelope> recv_reply(uint64_t id);
  // Sends `frame` (request `id`, a log reply: proc_logs, command_logs), passes each output
  // frame of its reply to `sink`, and returns the frame that ends it. A byte readable on
  // cancel_fd (>= 0, only with follow) sends a cancel, which sbshd answers with that end.
  result<ipc::envelope> stream_reply(std::string_view frame, uint64_t id, bool follow, int cancel_fd,
                                     const std::function<void(stream, std::string_view)>& sink);
};

// The error an `error` frame carries (code and message), with a fallback message.
error error_from(const ipc::message& m, std::string_view fallback);

// For a write that found the connection closed: the error frame sbshd sent before closing it
// (a refusal, or why it dropped the connection), else `e`.
error refusal_or(ipc::channel& ch, error e);

// The stream and bytes of an `output` frame (exec in frames, proc_logs); nullopt if malformed.
std::optional<std::pair<stream, std::string_view>> output_chunk(const ipc::message& m);

// Connects to the daemon at `path` (no auto-start). errno-style failure in the error code:
// "unreachable" when nothing listens there.
result<unique_fd> dial(const std::string& path);

// Starts sbshd for `path` unless one answers, holding a lock so that concurrent callers
// start only one. Returns the connected socket.
result<unique_fd> dial_or_start(const std::string& path, const connect_options& opts);

// Starts a dial_command (see connect_options) with one end of a socket pair as its stdin and
// stdout; returns the other end and its pid.
struct dialed {
  unique_fd sock;
  pid_t pid = -1;
};
result<dialed> spawn_dial(const std::vector<std::string>& argv);
// Waits up to `limit` for a dial command that is ending on its own; returns its wait status.
std::optional<int> reap_dial(pid_t pid, std::chrono::milliseconds limit);
// Ends a dial command after its connection was closed: it has a moment to leave on its own,
// then its process group gets SIGTERM, then SIGKILL. It is reaped.
void end_dial(pid_t pid, std::chrono::milliseconds grace);
// "exit status 3", "signal 9 (SIGKILL)"
std::string describe_wait_status(int status);
// argv as one line a reader could paste into a shell.
std::string command_line(const std::vector<std::string>& argv);

}  // namespace sbsh::client
