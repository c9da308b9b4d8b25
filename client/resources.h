// A session's cgroup limits as people write them, where they arrive as text (a plan's YAML,
// an MCP tool's arguments): memory as a size, CPU as a number of CPUs. The wire has bytes and
// thousandths of a CPU (session_spec::memory_max, cpu_millis).
#pragma once

#include <cstdint>
#include <string_view>

#include "ipc/result.h"

namespace sbsh::client {

// "512M", "2G", "1.5G", "64K", "1T" (powers of 1024), or a whole number of bytes. Not 0.
result<uint64_t> parse_memory(std::string_view text);
// "0.5", "2", "1.25": CPUs, to thousandths of one; at least 0.001.
result<uint64_t> parse_cpu_millis(std::string_view text);
// A whole number of processes, at least 1.
result<uint64_t> parse_pids(std::string_view text);

}  // namespace sbsh::client
