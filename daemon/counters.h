// Daemon-wide counters for `sbsh status`: what this sbshd has done since it started. The
// code that does a thing counts it with one call here; all of it runs on the loop thread,
// so plain integers do. Sessions that are gone still count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "daemon/exec_job.h"
#include "ipc/records.h"

namespace sbsh::daemon {

// The record `status` reports (ipc/records.h), kept up to date here; `clients` is filled in
// when it is asked for. Output a command writes straight into a client's pipes (io "fds",
// what local clients use) never passes through sbshd and is not in bytes_streamed.
struct counters : daemon_counters {
  void command_ended(const exec_outcome& o) {
    ++commands;
    if (!o.exit_code || *o.exit_code != 0) ++failed;
    if (o.timed_out) ++timed_out;
  }
  // `n` commands ended, `failed_n` of them other than with 0 and `timed_out_n` stopped for
  // their timeout (those run on a lease, counted from its record page).
  void commands_ended(uint64_t n, uint64_t failed_n, uint64_t timed_out_n) {
    commands += n;
    failed += failed_n;
    timed_out += timed_out_n;
  }
  void shell_restarted() { ++shell_restarts; }
  void streamed(size_t bytes) { bytes_streamed += bytes; }
};

}  // namespace sbsh::daemon
