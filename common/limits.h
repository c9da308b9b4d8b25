// Resource limits of a session's shell (`session create --limit NAME=VALUE`), applied with
// setrlimit() to its bash, so that every command of the session inherits them.
//
// NAME is one of as, core, cpu, data, fsize, memlock, nofile, nproc, stack (the names of
// prlimit(1) and systemd's Limit*= settings, lower case). VALUE is SOFT:HARD or one number for
// both; a number is a count (nofile, nproc), seconds (cpu: also 90s, 5m, 2h) or bytes
// (the others: also 512K, 64M, 2G, 1T, powers of 1024), or "infinity".
#pragma once

#include <sys/resource.h>

#include <string>
#include <string_view>

#include "ipc/result.h"

namespace sbsh {

struct rlimit_spec {
  int resource = 0;
  rlimit value{};
};

// Parses NAME=VALUE; the error says what was wrong and what is allowed.
result<rlimit_spec> parse_limit(std::string_view spec);
// The canonical form, NAME=SOFT:HARD with plain numbers or "infinity": what sbshd stores,
// compares and passes to the wrapper, and what parse_limit reads back to the same limit.
std::string format_limit(const rlimit_spec& l);

}  // namespace sbsh
