// spdlog configuration; the JSON form escapes the message with a custom pattern flag.
#include "daemon/log.h"

#include "ipc/text.h"

#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace sbsh::daemon {

namespace {

class json_message_flag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    auto esc = ipc::json_escape(std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(esc.data(), esc.data() + esc.size());
  }
  [[nodiscard]] std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<json_message_flag>();
  }
};

}  // namespace

status setup_logging(const std::string& level, const std::string& format) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off")
    return make_error("usage", fmt::format("unknown log level '{}': use trace, debug, info, warn, error, "
                                           "critical or off",
                                           level));
  auto logger = std::make_shared<spdlog::logger>("sbshd", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (format == "json") {
    auto f = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    f->add_flag<json_message_flag>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","pid":%P,"msg":"%*"})");
    logger->set_formatter(std::move(f));
  } else if (format == "text") {
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e sbshd[%P] %l: %v");
  } else {
    return make_error("usage", fmt::format("unknown log format '{}': use text or json", format));
  }
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return ok_status();
}

}  // namespace sbsh::daemon
