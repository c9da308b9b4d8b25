// JSON output helpers for the CLI.
#include "client/cli/json.h"

#include "ipc/text.h"

#include <ctime>

#include <fmt/format.h>

namespace sbsh::cli {

std::string utf8_repair(std::string_view s, bool* was_valid) {
  std::string out;
  out.reserve(s.size());
  *was_valid = true;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned char c = p[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) ok = (p[i + k] & 0xc0) == 0x80;
    if (ok && len > 1) {
      uint32_t cp = len == 2 ? (c & 0x1fu) : len == 3 ? (c & 0x0fu) : (c & 0x07u);
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (p[i + k] & 0x3fu);
      // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8.
      ok = !(len == 2 && cp < 0x80) && !(len == 3 && cp < 0x800) && !(len == 4 && cp < 0x10000) &&
           !(cp >= 0xd800 && cp <= 0xdfff) && cp <= 0x10ffff;
    }
    if (!ok) {
      *was_valid = false;
      out += "\xef\xbf\xbd";
      ++i;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

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

std::string json_string(std::string_view s) { return "\"" + ipc::json_escape(s) + "\""; }

std::string rfc3339_ms(int64_t unix_ms) {
  time_t secs = static_cast<time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, unix_ms % 1000);
}

void json_object::key(std::string_view k) {
  if (body_.size() > 1) body_ += ',';
  body_ += json_string(k);
  body_ += ':';
}
json_object& json_object::str(std::string_view k, std::string_view v) {
  key(k);
  body_ += json_string(v);
  return *this;
}
json_object& json_object::num(std::string_view k, int64_t v) {
  key(k);
  body_ += std::to_string(v);
  return *this;
}
json_object& json_object::boolean(std::string_view k, bool v) {
  key(k);
  body_ += v ? "true" : "false";
  return *this;
}
json_object& json_object::null(std::string_view k) {
  key(k);
  body_ += "null";
  return *this;
}
json_object& json_object::raw(std::string_view k, std::string_view json) {
  key(k);
  body_ += json;
  return *this;
}

}  // namespace sbsh::cli
