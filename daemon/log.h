// Logging set-up for sbshd: readable text on stderr by default, or one JSON object per line.
#pragma once

#include <string>

#include "ipc/result.h"

namespace sbsh::daemon {

// level: trace, debug, info, warn, error, critical, off. format: text or json.
status setup_logging(const std::string& level, const std::string& format);

// JSON string escaping (without the surrounding quotes).
std::string json_escape(std::string_view s);

}  // namespace sbsh::daemon
