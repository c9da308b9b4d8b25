// The two clocks sbsh reads: a monotonic one for intervals and the wall clock for times shown
// to users. Shared by sbshd and the wrapper.
#pragma once

#include <time.h>

#include <cstdint>

namespace sbsh {

inline uint64_t mono_us() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

inline int64_t wall_ms() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace sbsh
