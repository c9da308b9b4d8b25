// spdlog configuration: which sink (stderr, the journal, a rotating file) and which format.
// The JSON form escapes the message with a custom pattern flag; the journal gets each
// message with fields of its own through sd_journal_sendv.
#include "daemon/log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-journal.h>

#include "daemon/session_def.h"
#include "ipc/protocol.h"
#include "ipc/text.h"

namespace sbsh::daemon {

namespace {

class json_message_flag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    // A message may quote text that is not UTF-8 (a shell's own words): the line stays JSON.
    auto esc = ipc::json_escape(ipc::utf8_repair(std::string_view(msg.payload.data(), msg.payload.size())));
    dest.append(esc.data(), esc.data() + esc.size());
  }
  [[nodiscard]] std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<json_message_flag>();
  }
};

int syslog_priority(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug: return LOG_DEBUG;
    case spdlog::level::info: return LOG_INFO;
    case spdlog::level::warn: return LOG_WARNING;
    case spdlog::level::err: return LOG_ERR;
    case spdlog::level::critical: return LOG_CRIT;
    default: return LOG_NOTICE;
  }
}

// Each message as one journal entry. Should the journal refuse it (journald stopped, its
// socket gone), the message goes to stderr as text instead of being lost.
class journal_sink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    auto fields = journal_fields(msg.level, std::string_view(msg.payload.data(), msg.payload.size()));
    std::vector<iovec> iov;
    iov.reserve(fields.size());
    for (auto& f : fields) iov.push_back({f.data(), f.size()});
    if (sd_journal_sendv(iov.data(), static_cast<int>(iov.size())) >= 0) return;
    spdlog::memory_buf_t text;
    formatter_->format(msg, text);
    std::fwrite(text.data(), 1, text.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }
};

// spdlog opens the rotating file with fopen: create it first, so that it is the user's
// alone (the log names commands) as sbshd's other files are.
void before_log_file_open(const spdlog::filename_t& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);
}

// The descriptor spdlog opened: close-on-exec (spdlog's own flag for that is off in
// Debian's build), and dup'ed onto fd 2, so that sbshd's children, started with fd 2 as
// their stdout and stderr, write into the current file too.
void after_log_file_open(const spdlog::filename_t&, std::FILE* f) {
  int fd = ::fileno(f);
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  ::dup2(fd, STDERR_FILENO);
}

result<spdlog::sink_ptr> make_sink(const log_options& o) {
  if (o.file.empty()) {
    if (stderr_is_journal(std::getenv("JOURNAL_STREAM"), STDERR_FILENO))
      return spdlog::sink_ptr(std::make_shared<journal_sink>());
    return spdlog::sink_ptr(std::make_shared<spdlog::sinks::stderr_sink_mt>());
  }
  spdlog::file_event_handlers events;
  events.before_open = before_log_file_open;
  events.after_open = after_log_file_open;
  try {
    return spdlog::sink_ptr(std::make_shared<spdlog::sinks::rotating_file_sink_mt>(
        o.file, static_cast<size_t>(o.max_bytes), static_cast<size_t>(o.files), false, events));
  } catch (const spdlog::spdlog_ex& e) {
    return make_error(ipc::errc::log_file, fmt::format("cannot open the log file {}: {}", o.file, e.what()));
  }
}

}  // namespace

bool stderr_is_journal(const char* journal_stream, int fd) {
  if (journal_stream == nullptr) return false;
  uintmax_t dev = 0, ino = 0;
  int used = 0;
  if (std::sscanf(journal_stream, "%ju:%ju%n", &dev, &ino, &used) != 2 || journal_stream[used] != '\0') return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return false;
  return static_cast<uintmax_t>(st.st_dev) == dev && static_cast<uintmax_t>(st.st_ino) == ino;
}

std::vector<std::string> journal_fields(spdlog::level::level_enum level, std::string_view message) {
  std::vector<std::string> out{"MESSAGE=" + std::string(message), fmt::format("PRIORITY={}", syslog_priority(level)),
                               "SYSLOG_IDENTIFIER=sbshd"};
  constexpr std::string_view kSession = "session ", kExec = "exec ";
  if (!message.starts_with(kSession)) return out;
  auto rest = message.substr(kSession.size());
  auto end = rest.find_first_of(": ");
  if (end == std::string_view::npos || !valid_session_name(rest.substr(0, end))) return out;
  out.push_back("SBSH_SESSION=" + std::string(rest.substr(0, end)));
  if (!rest.substr(end).starts_with(": ")) return out;
  rest = rest.substr(end + 2);
  if (!rest.starts_with(kExec)) return out;
  rest = rest.substr(kExec.size());
  size_t digits = 0;
  while (digits < rest.size() && digits < 20 && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
  bool ends = digits == rest.size() || rest[digits] == ' ' || rest[digits] == ':' || rest[digits] == ',';
  if (digits > 0 && ends) out.push_back("SBSH_EXEC_ID=" + std::string(rest.substr(0, digits)));
  return out;
}

status setup_logging(const log_options& o) {
  // sbshd's options refuse any other value first (daemon/main.cpp); this guards other callers.
  if (std::find(std::begin(kLogLevels), std::end(kLogLevels), o.level) == std::end(kLogLevels))
    return make_error(ipc::errc::usage, fmt::format("unknown log level '{}'", o.level));
  if (std::find(std::begin(kLogFormats), std::end(kLogFormats), o.format) == std::end(kLogFormats))
    return make_error(ipc::errc::usage, fmt::format("unknown log format '{}'", o.format));
  auto lvl = spdlog::level::from_str(o.level);
  auto sink = make_sink(o);
  if (!sink) return sink.err();
  auto logger = std::make_shared<spdlog::logger>("sbshd", *sink);
  if (o.format == "json") {
    auto f = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    f->add_flag<json_message_flag>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","pid":%P,"msg":"%*"})");
    logger->set_formatter(std::move(f));
  } else {
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e sbshd[%P] %l: %v");
  }
  logger->set_level(lvl);
  // Every message is written at once, as it was to an unbuffered stderr: a log read with
  // tail -f, or left by a crash, is complete.
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  return ok_status();
}

}  // namespace sbsh::daemon
