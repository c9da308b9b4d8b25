// Private state of sbsh::client::connection, shared by the files that implement it.
#pragma once

#include <chrono>
#include <optional>
#include <span>
#include <string>

#include "ipc/socket_io.h"
#include "sbsh/client.h"

namespace sbsh::client {

struct connection::impl {
  ipc::channel ch;
  std::string socket_path;
  uint64_t next_id = 1;
  // The hello whose welcome has not been read yet (0: read), and how long it may take.
  // connect() reads it at once, or (wait_for_welcome = false) leaves it for the first
  // request, which then travels right behind the hello.
  uint64_t hello_id = 0;
  std::chrono::steady_clock::time_point hello_deadline;
  std::chrono::milliseconds hello_timeout{0};
  // Set when the handshake failed: the connection is unusable and every request says why.
  std::optional<error> handshake_error;

  // Reads the welcome that answers connect()'s hello if it is still due.
  sbsh::status await_welcome();
  // Sends a request (with descriptors), then makes sure the handshake succeeded.
  sbsh::status send(std::string_view frame, std::span<const int> fds = {});
  // Sends a request and waits for the reply with the same id (other frames are an error:
  // one connection runs one request at a time).
  result<ipc::envelope> call(ipc::frame_builder&& f, uint64_t id);
  // The second half of call(): waits for the reply to request `id`.
  result<ipc::envelope> recv_reply(uint64_t id);
};

// The error an `error` frame carries (code and message), with a fallback message.
error error_from(const ipc::message& m, std::string_view fallback);

std::vector<session_status> decode_sessions(const ipc::message& m);
session_status decode_session(const msgpack::object& o);

// Connects to the daemon at `path` (no auto-start). errno-style failure in the error code:
// "unreachable" when nothing listens there.
result<unique_fd> dial(const std::string& path);

// Starts sbshd for `path` unless one answers, holding a lock so that concurrent callers
// start only one. Returns the connected socket.
result<unique_fd> dial_or_start(const std::string& path, const connect_options& opts);

}  // namespace sbsh::client
