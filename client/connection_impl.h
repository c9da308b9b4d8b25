// Private state of sbsh::client::connection, shared by the files that implement it.
#pragma once

#include <string>

#include "ipc/socket_io.h"
#include "sbsh/client.h"

namespace sbsh::client {

struct connection::impl {
  ipc::channel ch;
  std::string socket_path;
  uint64_t next_id = 1;

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
