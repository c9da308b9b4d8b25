// JSON for --json and the C ABI: the writer and the helpers of the JSON forms (json_form.cpp).
#include "client/json.h"

#include <algorithm>
#include <ctime>

#include <fmt/format.h>

#include "ipc/text.h"

namespace sbsh::client {

std::string utf8_repair(std::string_view s, bool* was_valid) { return ipc::utf8_repair(s, was_valid); }

std::string base64(std::string_view s) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((s.size() + 2) / 3 * 4);
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  for (; i + 2 < s.size(); i += 3) {
    uint32_t v = (uint32_t{p[i]} << 16) | (uint32_t{p[i + 1]} << 8) | p[i + 2];
    for (int k = 18; k >= 0; k -= 6) out += kAlphabet[(v >> k) & 63];
  }
  if (i < s.size()) {
    uint32_t v = uint32_t{p[i]} << 16;
    if (i + 1 < s.size()) v |= uint32_t{p[i + 1]} << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < s.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> unbase64(std::string_view s) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  while (!s.empty() && s.back() == '=') s.remove_suffix(1);
  if (s.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(s.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    int v = value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

std::string rfc3339_ms(int64_t unix_ms) {
  auto secs = static_cast<time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, unix_ms % 1000);
}

std::string dump_json(const json_value& j) { return j.dump(-1, ' ', false, json_value::error_handler_t::replace); }

json_value signal_json(const std::optional<int>& sig) {
  return sig ? json_value(std::string(ipc::signal_name(*sig))) : json_value(nullptr);
}

json_value text_or_null(std::string_view s) { return s.empty() ? json_value(nullptr) : json_value(s); }

json_value time_or_null(int64_t unix_ms) { return unix_ms > 0 ? json_value(rfc3339_ms(unix_ms)) : json_value(nullptr); }

std::string command_ref(uint64_t id) { return "%" + std::to_string(id); }

std::optional<uint64_t> parse_command_ref(std::string_view s) {
  if (s.size() < 2 || s.size() > 21 || s[0] != '%') return std::nullopt;
  uint64_t v = 0;
  for (char c : s.substr(1)) {
    if (c < '0' || c > '9' || v > (UINT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v == 0) return std::nullopt;
  return v;
}

json_value json_of(const std::vector<std::string>& names) { return names; }

}  // namespace sbsh::client
