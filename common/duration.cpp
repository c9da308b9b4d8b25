// Durations on the command line: "500ms", "30s", "5m", "1h", or a bare number of seconds.
#include "common/duration.h"
#include "ipc/protocol.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

namespace sbsh {

result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  auto bad = [&] {
    return make_error(ipc::errc::usage, fmt::format("invalid duration '{}': use a number of seconds or a number "
                                                    "with ms, s, m or h (500ms, 30s, 5m, 1h)",
                                                    text));
  };
  if (text.empty()) return bad();
  size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  if (i == 0) return bad();
  std::string num(text.substr(0, i));
  if (num.find('.') != num.rfind('.')) return bad();
  std::string_view unit = text.substr(i);
  double scale;
  if (unit.empty() || unit == "s") scale = 1000;
  else if (unit == "ms") scale = 1;
  else if (unit == "m") scale = 60'000;
  else if (unit == "h") scale = 3'600'000;
  else return bad();
  char* end = nullptr;
  double v = std::strtod(num.c_str(), &end);
  if (end == nullptr || *end != '\0' || !std::isfinite(v) || v < 0 || v * scale > 1e13) return bad();
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(v * scale)));
}

}  // namespace sbsh
