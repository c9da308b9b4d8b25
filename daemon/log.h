// Logging set-up for sbshd: readable text on stderr by default, or one JSON object per line.
#pragma once

#include <string>

#include "ipc/result.h"

namespace sbsh::daemon {

// level: trace, debug, info, warn, error, critical, off. format: text or json.
status setup_logging(const std::string& level, const std::string& format);

}  // namespace sbsh::daemon
