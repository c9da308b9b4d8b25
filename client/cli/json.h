// Just enough JSON for the CLI's --json output: an object writer, UTF-8 repair, base64.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sbsh::cli {

// Replaces each invalid UTF-8 sequence with U+FFFD; *was_valid says whether any was.
std::string utf8_repair(std::string_view s, bool* was_valid);
std::string base64(std::string_view s);
std::string json_string(std::string_view utf8);  // quoted and escaped
std::string rfc3339_ms(int64_t unix_ms);          // 2026-11-22T13:58:50.123Z

// Builds one JSON object, fields in insertion order.
class json_object {
 public:
  json_object& str(std::string_view k, std::string_view v);
  json_object& num(std::string_view k, int64_t v);
  json_object& boolean(std::string_view k, bool v);
  json_object& null(std::string_view k);
  json_object& raw(std::string_view k, std::string_view json);
  template <typename T>
  json_object& opt_num(std::string_view k, const std::optional<T>& v) {
    return v ? num(k, static_cast<int64_t>(*v)) : null(k);
  }
  [[nodiscard]] std::string finish() const { return body_ + "}"; }

 private:
  void key(std::string_view k);
  std::string body_ = "{";
};

}  // namespace sbsh::cli
