// A lease's record page as sbshd sees it (ipc/shell_channel.h, struct sbsh_record_page;
// docs/architecture.md, "The direct path"): memory shared with the session's builtin, which
// writes there each run the lease's holder sends it, as it starts and as it ends, so that
// sbshd knows them without a message for each. sbshd makes the page, sends its memfd with the
// lease and keeps only the mapping (no descriptor); it reads the page when it wants to know,
// and checks everything it reads as it checks a message on the channel.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/procs.h"
#include "ipc/result.h"
#include "ipc/fd.h"

struct sbsh_record_page;

namespace sbsh::daemon {

class lease_page {
 public:
  // A new page, and the memfd to hand the builtin (sealed at its size, so that nothing can
  // shrink it under sbshd's mapping; close it once sent).
  static result<std::pair<lease_page, unique_fd>> make();
  // Maps the page of memfd `fd` (as make() and the builtin do; for tests that write it as the
  // builtin would), or null with errno. munmap(2) it.
  static sbsh_record_page* map(int fd);
  lease_page(lease_page&& o) noexcept { *this = std::move(o); }
  lease_page& operator=(lease_page&& o) noexcept;
  lease_page(const lease_page&) = delete;
  lease_page& operator=(const lease_page&) = delete;
  ~lease_page();

  // The run going on, as the builtin last wrote it (seq 0: none).
  struct run {
    uint64_t seq = 0;
    procs::since_mark mark;
    uint64_t started_us = 0;   // CLOCK_MONOTONIC
    uint64_t deadline_us = 0;  // 0: none
    std::string text;          // its start (SBSH_RECORD_TEXT bytes at most)
    uint64_t full_len = 0;     // the whole text's length
  };
  // A run that ended.
  struct record {
    uint64_t seq = 0;
    int exit_value = 0;
    int exit_signal = 0;  // 0: no signal ended it
    uint32_t flags = 0;   // its status's (SBSH_STATUS_*)
    uint64_t started_us = 0;
    uint64_t ended_us = 0;
    std::string text;  // its start
    uint64_t full_len = 0;
    uint64_t failed_total = 0;  // of the lease's runs up to this one, how many exited other than 0
    uint64_t timed_out_total = 0;
  };
  // What the runs that ended since the last reading add up to: all of them, those the builtin
  // wrote over before they were read too (its holder ran more than the ring holds between two
  // readings). Failures and timeouts are counted up to the newest record read; those of the
  // runs after it come with the next.
  struct tally {
    uint64_t ended = 0;
    uint64_t lost = 0;  // of `ended`, not read
    uint64_t failed = 0;
    uint64_t timed_out = 0;
  };
  enum class reading {
    ok,
    unsettled,  // the builtin was writing it each time (a shell stopped mid-write): ask later
    bad,        // something other than the builtin wrote it
  };
  // What runs now, into *out.
  reading running(run* out) const;
  // The runs that ended since the last call, oldest first, appended to *out, and what they
  // all add up to.
  reading take_ended(std::vector<record>* out, tally* sum);
  // Says to the builtin that sbshd stops run `seq`, and why (SBSH_STATUS_TIMED_OUT or
  // SBSH_STATUS_CANCELLED): its status then carries that flag to the holder.
  void stop(uint64_t seq, uint32_t why);

 private:
  explicit lease_page(sbsh_record_page* p) : p_(p) {}
  // Adds record `r`, the lease's `index`th run, to *sum: its totals only grow, and by no more
  // than one a run. False when they do not.
  bool add_totals(const record& r, uint64_t index, tally* sum);
  sbsh_record_page* p_ = nullptr;
  uint64_t last_seq_ = 0;  // of the last record read: each is later
  // The totals of the last record read, and how many runs they cover.
  uint64_t failed_ = 0;
  uint64_t timed_out_ = 0;
  uint64_t counted_ = 0;
};

}  // namespace sbsh::daemon
