// Signal names and JSON escaping.
#include "ipc/text.h"

#include <signal.h>
#include <string.h>

#include <cctype>

#include <fmt/format.h>

namespace sbsh::ipc {

std::optional<int> signal_from_name(std::string_view s) {
  if (s.empty()) return std::nullopt;
  if (std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (s.size() > 3) return std::nullopt;
    int v = std::stoi(std::string(s));
    return v > 0 && v < NSIG ? std::optional<int>(v) : std::nullopt;
  }
  std::string n(s);
  for (auto& c : n) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (n.rfind("SIG", 0) == 0) n = n.substr(3);
  for (int i = 1; i < NSIG; ++i)
    if (const char* a = sigabbrev_np(i); a != nullptr && n == a) return i;
  return std::nullopt;
}

std::string signal_name(int sig) {
  const char* a = sigabbrev_np(sig);
  return a != nullptr ? fmt::format("SIG{}", a) : fmt::format("SIG{}", sig);
}

std::string json_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || c == 0x7f) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
  }
  return out;
}

std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  out += '\'';
  return out;
}

}  // namespace sbsh::ipc
