// One client connection of sbshd's: its framed socket, and the account of its requests in
// flight. The server accepts and owns it (server_clients.cpp defines its methods); the
// services that answer a client's requests (files, kept commands, background processes) and
// the job runner (as a reply_port) need only this header.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/procs.h"
#include "daemon/runner_ports.h"
#include "ipc/fd.h"
#include "ipc/protocol.h"
#include "ipc/result.h"
#include "uv/framed_socket.h"
#include "uv/handles.h"

namespace sbsh::daemon {

class server;

// One client connection: the framed socket plus the requests in flight on it.
//
// Its memory is bounded (bounds.h): while more than kReplyQueuePause of replies wait for
// the client to read them, its requests are not read; if they still wait after
// stalled_client_ms, or pass kReplyQueueMax, the server drops it with an error frame. What
// it holds (frames partly received, replies queued, command text in flight) is counted in
// the server's account of all clients, whose bound drops the connection holding the most.
class client_conn final : public reply_port {
 public:
  client_conn(server& srv, uint64_t serial, unique_fd fd, uid_t uid, pid_t pid);
  ~client_conn() override;
  client_conn(const client_conn&) = delete;
  client_conn& operator=(const client_conn&) = delete;
  void send(std::string frame, std::vector<unique_fd> fds = {});
  // What a command's runner sends it (runner_ports.h).
  void reply(std::string frame) override { send(std::move(frame)); }
  void reply_with_fds(std::string frame, std::vector<unique_fd> fds) override {
    send(std::move(frame), std::move(fds));
  }
  void send_error(uint64_t id, std::string_view code, const std::string& message);
  void send_error(uint64_t id, ipc::errc code, const std::string& message) {
    send_error(id, ipc::wire_name(code), message);
  }
  void send_error(uint64_t id, const error& e) { send_error(id, e.code, e.message); }
  [[nodiscard]] size_t queued_bytes() const override { return sock_.queued_bytes(); }
  // Backpressure on the client's input while a command's stdin is buffered (session.cpp).
  void pause_reading(bool p) override {
    stdin_paused_ = p;
    update_reading();
  }
  [[nodiscard]] uint64_t serial() const { return serial_; }
  // Everything held for this client: what its socket holds and its commands in flight.
  [[nodiscard]] size_t footprint() const { return sock_.held() + charged_; }
  // Ends the connection with an error frame saying why (code, message): the client is
  // forgotten now, and the frame left for it to read for a while (uv::farewells).
  void drop(ipc::errc code, const std::string& message);
  // The client read all its replies.
  void drained();

  bool greeted = false;
  pid_t peer_pid = 0;
  // The client process and its parents up to init, and the sessions whose shell or wrapper
  // is one of them, read the first time a command runs while it asks for another
  // (server::check_not_waiting_on_itself). A process that is part of a session's command
  // stays under that session's wrapper, a subreaper, and no other session's can become its
  // parent, so this holds for the connection's life and is not read again per command.
  struct parents {
    std::vector<procs::proc_info> chain;
    std::vector<std::string> sessions;  // in name order
  };
  mutable std::optional<parents> ancestry;

  // The environment an exec sent with keep_env, for the connection's later execs that say
  // same_env (a session they create starts with it). Counted in what the client holds.
  void keep_env(std::vector<std::string> env);
  [[nodiscard]] const std::vector<std::string>* kept_env() const { return kept_env_ ? &*kept_env_ : nullptr; }

  // The client's commands in flight. Each session's runner owns its jobs; this is the index
  // from an exec id to the session it runs in, which routes the client's later requests about
  // it (stdin, cancel, release) and bounds what one client holds (bounds.h). An entry lives
  // from add_job() until the runner is done with the job (job_done) or the client goes.
  //
  // Whether one more command of `text_bytes` fits, under an id not in use: an error the
  // client can act on if not.
  [[nodiscard]] status job_room(uint64_t id, size_t text_bytes) const;
  void add_job(uint64_t id, const std::string& session, size_t text_bytes);
  // The session that command `id` runs in, or nullptr when there is none.
  [[nodiscard]] const std::string* job_session(uint64_t id) const;
  void job_done(uint64_t id) override;
  // Calls f(session) for each of its commands: no allocation, since a drained client (the
  // output path) tells the sessions of all its commands.
  template <typename F>
  void each_job_session(F&& f) const {
    for (const auto& [id, ref] : jobs_) f(ref.session);
  }
  // The client is gone: its commands are no longer its.
  void forget_jobs();

 private:
  // Tells the server's account what its commands in flight hold now.
  void recount_jobs();
  struct job_ref {
    std::string session;
    size_t text_bytes;
  };
  std::unordered_map<uint64_t, job_ref> jobs_;
  size_t text_bytes_ = 0;  // command text held for this connection's jobs
  std::optional<std::vector<std::string>> kept_env_;
  size_t kept_env_bytes_ = 0;
  void update_reading() { sock_.pause_reading(stdin_paused_ || replies_paused_); }
  server& srv_;
  uint64_t serial_;
  uv::framed_socket sock_;
  size_t charged_ = 0;  // what recount_jobs() last counted
  bool stdin_paused_ = false;
  bool replies_paused_ = false;
  uv::handle_ptr<uv::timer> stall_timer_;  // runs while replies_paused_
};

}  // namespace sbsh::daemon
