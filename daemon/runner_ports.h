// What a session's job runner (job_runner.h) needs of sbshd beyond its shell, as shell_port.h
// is what it needs of the shell: the client a command is for (reply_port), the record of a
// kept command (command_recorder), and the loop, counters and bounds every runner shares
// (runner_context). The runner knows nothing of the server or of client connections, so a
// test drives it with a stand-in client and no server (tests/unit/job_runner_test.cpp), and
// the server's shape cannot reach into how commands are queued and answered.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/counters.h"
#include "daemon/exec_job.h"
#include "ipc/fd.h"

namespace sbsh::daemon {

// The client a command was sent by, as the runner answers it (client_conn is one).
class reply_port {
 public:
  virtual ~reply_port() = default;
  // A frame for the client: a reply to one of its requests, or an event of its command.
  virtual void reply(std::string frame) = 0;
  // The same with descriptors (SCM_RIGHTS), which go with the frame: a lease's socket.
  virtual void reply_with_fds(std::string frame, std::vector<unique_fd> fds) {
    fds.clear();  // a stand-in client drops them
    reply(std::move(frame));
  }
  // The bytes of frames the client has not read yet: the runner stops reading a command's
  // output while too many wait.
  [[nodiscard]] virtual size_t queued_bytes() const = 0;
  // Backpressure on the client's input while a command's stdin is buffered.
  virtual void pause_reading(bool p) = 0;
  // The runner is done with the client's command `id` (answered, and its pipes released).
  virtual void job_done(uint64_t id) = 0;
};

// Where a command kept under its serial (exec with keep or detach_after_ms) is recorded as it
// runs (command_records.h is the one sbshd has).
class command_recorder {
 public:
  virtual ~command_recorder() = default;
  virtual void queued(const exec_job& job) = 0;
  virtual void started(const exec_job& job) = 0;
  virtual void output(uint64_t serial, int stream_no, std::string_view data) = 0;
  virtual void detached(uint64_t serial) = 0;
  virtual void finished(const exec_job& job, uint64_t duration_us) = 0;
  // It waits for input (its prompt: the last line it printed), or no longer.
  virtual void waiting(uint64_t serial, std::string_view prompt) = 0;
  virtual void resumed(uint64_t serial) = 0;
};

// What every runner shares: sbshd's loop, its counters, its command records, and what a
// command's pipes and process marks are made with. It outlives every runner.
struct runner_context {
  uv_loop_t* loop = nullptr;
  daemon::counters* counters = nullptr;
  command_recorder* records = nullptr;
  // Who a confined session's shell is outside its user namespace (sbshd --confine-user).
  uid_t confine_uid = 65534;
  gid_t confine_gid = 65534;
  // /proc/sys/kernel/ns_last_pid, read to mark where a command's processes begin; -1: none.
  int ns_last_pid_fd = -1;
};

}  // namespace sbsh::daemon
