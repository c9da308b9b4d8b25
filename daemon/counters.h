// Daemon-wide counters for `sbsh status`: what this sbshd has done since it started. The
// code that does a thing counts it with one call here; all of it runs on the loop thread,
// so plain integers do. Sessions that are gone still count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "daemon/exec_job.h"

namespace sbsh::daemon {

struct counters {
  uint64_t commands = 0;        // commands from clients that ended, whether or not a shell ran them
  uint64_t failed = 0;          // of those, ended with no exit status or a non-zero one
  uint64_t timed_out = 0;       // of those, stopped by their timeout
  uint64_t shell_restarts = 0;  // shells started for a session in place of one it had
  // Bytes that passed through sbshd: commands' output sent to clients in frames, and input
  // received for them. Output a command writes straight into a client's pipes (io "fds",
  // what local clients use) never passes through sbshd and is not counted.
  uint64_t bytes_streamed = 0;

  void command_ended(const exec_outcome& o) {
    ++commands;
    if (!o.exit_code || *o.exit_code != 0) ++failed;
    if (o.timed_out) ++timed_out;
  }
  void shell_restarted() { ++shell_restarts; }
  void streamed(size_t bytes) { bytes_streamed += bytes; }
};

}  // namespace sbsh::daemon
