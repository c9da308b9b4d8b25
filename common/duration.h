// Durations as users write them on a command line: "500ms", "30s", "5m", "1h", or a bare
// number of seconds ("1.5"). sbshd's options and the client's (exec --timeout, wait -t)
// take the same syntax; libsbsh offers it as sbsh::client::parse_duration.
#pragma once

#include <chrono>
#include <string_view>

#include "ipc/result.h"

namespace sbsh {

result<std::chrono::milliseconds> parse_duration(std::string_view text);

}  // namespace sbsh
