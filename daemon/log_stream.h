// A `sbsh logs` reply, read from a background process's capped log files (capped_log.h) at
// the pace its client takes it: no more than kLogAhead bytes are queued to the client at a
// time, and no more than kLogBurst read in one turn of the loop, so a log of any size costs
// sbshd a bounded amount of memory and never holds up the loop for long.
//
// Without follow, the reply is the logs as they were when it was asked for. With follow, the
// newest file of each stream is read to its end as it grows (and again after a rotation), and
// the stream is done only once every stream is read to its end in one turn: the caller then
// adds a live follower in the same turn, so no byte written in between is lost. (A reader so
// slow that the log rotates twice under it misses what the cap dropped, as a later reader
// would.)
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ipc/fd.h"

namespace sbsh::daemon {

class log_stream {
 public:
  struct source {
    std::string path;  // the capped log: PATH.1 holds the older half
    uint32_t stream_no;
    uint64_t skip = 0;  // bytes of what the files keep to leave out, from the oldest
  };
  // The reply to request `req` of client `serial` about process `proc`: the last
  // `tail_lines` lines (0: all) of each source, in order.
  log_stream(uint64_t serial, uint64_t req, uint64_t proc, const std::vector<source>& sources, uint64_t tail_lines,
             bool follow);

  enum class progress {
    wait_for_drain,  // pump again once the client has read what is queued
    more,            // pump again on the next turn of the loop
    done,
  };
  // Where the frames go: a client connection (or a test's stand-in).
  struct client {
    std::function<size_t()> queued_bytes;
    std::function<void(std::string frame)> send;
  };
  // Sends output frames to the client while it has room.
  progress pump(const client& c);

  [[nodiscard]] uint64_t serial() const { return serial_; }
  [[nodiscard]] uint64_t req() const { return req_; }
  [[nodiscard]] uint64_t proc() const { return proc_; }
  [[nodiscard]] bool follow() const { return follow_; }

 private:
  struct part {
    unique_fd fd;
    uint32_t stream_no;
    uint64_t pos, end;  // what to send: [pos, end), or to the end of the file when growing
    bool growing;       // follow: the newest file, read as it grows
    std::string path;   // of the newest file, to notice its rotation
  };
  // A growing part that has more to read now: its file grew, or was rotated (then it is
  // reopened: the file held is the older half now, read to its end already).
  static bool has_more(part& p);
  uint64_t serial_, req_, proc_;
  bool follow_;
  std::vector<part> parts_;
  size_t next_ = 0;
};

}  // namespace sbsh::daemon
