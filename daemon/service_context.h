// What sbshd's services (file requests, kept commands, the replies that send logs) need of the
// daemon: its loop, and finding a client or a session again by what a request named. The
// server is one; a service holds this, not the server, so that it neither sees nor is seen by
// the rest of the server's work (listening, the session table, state files, spare shells).
#pragma once

#include <uv.h>

#include <cstdint>
#include <string>

namespace sbsh::daemon {

class client_conn;
class session;

class service_context {
 public:
  virtual ~service_context() = default;

  virtual uv_loop_t* loop() = 0;
  // The client connection with this serial, or nullptr once it has gone: work that finishes
  // later (on the thread pool, after a wait) finds its client again this way.
  virtual client_conn* client_by_serial(uint64_t serial) = 0;
  // The session named `name`, or nullptr when there is none.
  virtual session* find_session(const std::string& name) = 0;
  // A confined session's private TMPDIR: STATE/tmp/NAME, deleted with the session.
  [[nodiscard]] virtual std::string session_tmp_dir(const std::string& name) const = 0;
};

}  // namespace sbsh::daemon
