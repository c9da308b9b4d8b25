// sbsh::client::parse_duration: the syntax sbshd's options use too (common/duration.h).
#include "common/duration.h"
#include "sbsh/client.h"

namespace sbsh::client {

result<std::chrono::milliseconds> parse_duration(std::string_view text) { return sbsh::parse_duration(text); }

}  // namespace sbsh::client
