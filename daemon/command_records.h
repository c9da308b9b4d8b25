// Commands whose output and result sbshd keeps under their id (exec with keep or
// detach_after_ms): what `sbsh wait %N`, `sbsh logs %N` and `sbsh kill %N` reach, and what a
// result cut short for a machine reader (head and tail) points to for the whole output.
//
// A kept command's output is written, as the runner reads it, into capped log files
// STATE/commands/N.out and N.err (capped_log.h: the newest kKeptLogCap/2 to kKeptLogCap bytes
// of each stream). A record lives while its command queues or runs, and after it ends for
// kKeptForMs, within kMaxKeptFinished records and kMaxKeptBytes of logs in all (the oldest
// finished go first). Ids are the runner's job serials. A restart of sbshd forgets every record
// and deletes the files, but the ids go on: sbshd reserves them in blocks in
// STATE/commands/next-id as serials are handed out, kept or not (new_job_serial), and a new
// sbshd starts after the last block reserved, also after a crash, so that an id never names
// two commands and one from before the restart is told apart from one never kept.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/capped_log.h"
#include "daemon/exec_job.h"
#include "daemon/log_replies.h"
#include "daemon/log_stream.h"
#include "daemon/runner_ports.h"
#include "ipc/result.h"
#include "ipc/socket_io.h"
#include "uv/handles.h"

namespace sbsh::daemon {

class service_context;
class client_conn;

inline constexpr uint64_t kKeptLogCap = 64ull << 20;          // per stream
inline constexpr uint64_t kMaxKeptBytes = 1ull << 30;         // all finished commands' logs
inline constexpr size_t kMaxKeptFinished = 256;
inline constexpr uint64_t kKeptForMs = 3600ull * 1000;        // after the command ends
inline constexpr size_t kMaxDetached = 256;                   // detached and not yet ended

class command_records final : public command_recorder {
 public:
  // Keeps its files in `dir` (STATE/commands).
  command_records(service_context& srv, std::string dir);
  ~command_records() override;
  command_records(const command_records&) = delete;
  command_records& operator=(const command_records&) = delete;

  // Deletes what an earlier sbshd kept, and has this one's ids begin after the earlier one's.
  void start();
  // Whether a request to keep a command may be taken (refused past kMaxDetached).
  [[nodiscard]] status admit(const exec_job& job) const;

  // From the runner, for jobs with keep set.
  void queued(const exec_job& job) override;
  void started(const exec_job& job) override;
  void output(uint64_t serial, int stream_no, std::string_view data) override;
  void detached(uint64_t serial) override;
  void finished(const exec_job& job, uint64_t duration_us) override;
  // Command `serial` waits for input (its prompt: the last line it printed), or no longer.
  void waiting(uint64_t serial, std::string_view prompt) override;
  void resumed(uint64_t serial) override;

  void handle_wait(client_conn& c, ipc::envelope& env);
  void handle_logs(client_conn& c, ipc::envelope& env);
  void handle_kill(client_conn& c, ipc::envelope& env);
  void handle_input(client_conn& c, ipc::envelope& env);
  void client_drained(client_conn& c);
  // A cancel for a `logs -f` request: it ends, answered as without follow. False when `req`
  // is no such request.
  bool stop_following(client_conn& c, uint64_t req);

  [[nodiscard]] size_t size() const { return records_.size(); }
  // What `ps` lists: the commands that run (or wait in their queue) detached from any
  // client, and with `all` every command kept, those that have ended too; oldest first.
  [[nodiscard]] std::vector<command_info> list(bool all) const;

 private:
  struct waiter {
    uint64_t serial, req;
    uv::handle_ptr<uv::timer> deadline;
    bool until_input = false;  // answered also once it waits for input
  };
  struct record {
    uint64_t id = 0;
    std::string session, command;
    bool started = false, detached = false, finished = false;
    uint64_t generation = 0;  // of the shell that runs it
    bool waiting = false;     // for input, with its prompt
    std::string prompt;
    int64_t started_at_ms = 0, ended_at_ms = 0;
    uint64_t ended_mono_us = 0;
    uint64_t bytes[2] = {0, 0};  // written to each stream, in all
    capped_log logs[2];          // opened at the first byte of each stream
    command_result result;
    std::vector<waiter> waiters;   // command_wait and command_kill: until it ends
    std::vector<log_follower> followers;
  };

  record* find(uint64_t id, uint64_t req, client_conn& c);
  void forget_gone_waiters(record& r);
  std::string log_path(uint64_t id, int stream_no) const;
  void reply_end(uint64_t serial, uint64_t req, const record& r);
  void logs_sent(const log_replies::finished& f);
  void forget(std::map<uint64_t, std::unique_ptr<record>>::iterator it);
  void expire();
  // Records in STATE/commands/next-id that ids below `end` are taken.
  void reserve_ids(uint64_t end);

  service_context& srv_;
  std::string dir_;
  std::map<uint64_t, std::unique_ptr<record>> records_;
  log_replies replies_;
  uv::handle_ptr<uv::timer> expiry_timer_;
  size_t detached_running_ = 0;
  uint64_t first_id_ = 1;     // ids below it were an earlier sbshd's
  uint64_t reserved_end_ = 0;  // STATE/commands/next-id: no sbshd uses ids below it again
};

}  // namespace sbsh::daemon
