// Logging set-up for sbshd: readable text or one JSON object per line on stderr, or, under
// systemd, entries with fields of their own in the journal, or, when sbshd runs detached, a
// log file that rotates instead of growing forever.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/common.h>

#include "ipc/result.h"

namespace sbsh::daemon {

// What log_options::level and ::format take (sbshd's --log-level and --log-format).
inline constexpr std::string_view kLogLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
inline constexpr std::string_view kLogFormats[] = {"text", "json"};

struct log_options {
  std::string level = "info";   // one of kLogLevels
  std::string format = "text";  // one of kLogFormats
  // Empty: stderr, or the journal when stderr is the journal's stream (stderr_is_journal).
  // Otherwise this file, renamed to NAME.1.log when it would grow past max_bytes, the older
  // ones to NAME.2.log, ... and the oldest of `files` rotated ones deleted. The descriptor of
  // the current file is also made fd 2, so what sbshd's children write to their inherited
  // stderr lands there too.
  std::string file;
  uint64_t max_bytes = 10u << 20;
  uint32_t files = 3;
};

status setup_logging(const log_options& opts);

// Whether `fd` is the stream systemd connected to the journal: JOURNAL_STREAM (given here as
// `journal_stream`, may be null) holds its "DEVICE:INODE", which a descriptor inherited by
// a child or redirected elsewhere does not match (systemd.exec(5)).
[[nodiscard]] bool stderr_is_journal(const char* journal_stream, int fd);

// The journal fields of one message: MESSAGE=, PRIORITY= (syslog's, from the level),
// SYSLOG_IDENTIFIER=sbshd, and SBSH_SESSION= and SBSH_EXEC_ID= where the message names them.
// It names them by sbshd's convention for its messages: one about a session begins
// "session NAME " or "session NAME: ", and one about a command of that session
// "session NAME: exec ID".
[[nodiscard]] std::vector<std::string> journal_fields(spdlog::level::level_enum level, std::string_view message);

}  // namespace sbsh::daemon
