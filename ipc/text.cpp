// Signal names, JSON escaping, shell quoting and UTF-8.
#include "ipc/text.h"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <cctype>
#include <cstdint>

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

namespace {

// The length of the valid UTF-8 character at s[i], or 0 when the byte there does not start one.
size_t utf8_char_at(std::string_view s, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  unsigned char c = p[i];
  if (c < 0x80) return 1;
  size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  uint32_t cp = len == 2 ? (c & 0x1fu) : len == 3 ? (c & 0x0fu) : (c & 0x07u);
  for (size_t k = 1; k < len; ++k) {
    if ((p[i + k] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (p[i + k] & 0x3fu);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8.
  bool ok = !(len == 2 && cp < 0x80) && !(len == 3 && cp < 0x800) && !(len == 4 && cp < 0x10000) &&
            !(cp >= 0xd800 && cp <= 0xdfff) && cp <= 0x10ffff;
  return ok ? len : 0;
}

// The common case (names, keys, plain commands) ends here.
bool ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

}  // namespace

bool valid_utf8(std::string_view s) {
  if (ascii(s)) return true;
  for (size_t i = 0; i < s.size();) {
    size_t len = utf8_char_at(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string utf8_repair(std::string_view s, bool* was_valid) {
  if (was_valid != nullptr) *was_valid = true;
  if (ascii(s)) return std::string(s);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len = utf8_char_at(s, i);
    if (len == 0) {
      if (was_valid != nullptr) *was_valid = false;
      out += "\xef\xbf\xbd";
      ++i;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

std::string_view utf8_prefix(std::string_view s, size_t n) {
  if (s.size() <= n) return s;
  size_t end = n;
  // Back over continuation bytes to the start of the character that crosses n.
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xc0) == 0x80 && n - end < 3) --end;
  if (end < n && utf8_char_at(s, end) > n - end) return s.substr(0, end);
  return s.substr(0, n);
}

size_t utf8_incomplete_tail(std::string_view s) {
  for (size_t k = 1; k <= 3 && k <= s.size(); ++k) {
    auto lead = static_cast<unsigned char>(s[s.size() - k]);
    if ((lead & 0xc0) == 0x80) continue;  // a continuation byte: look further back
    size_t len = lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
    if (len <= k) return 0;  // complete, or no lead byte at all
    // Completed with the smallest continuation bytes, is it a character? (E0 80 never is.)
    std::string whole(s.substr(s.size() - k));
    if (k == 1) whole += static_cast<char>(lead == 0xe0 ? 0xa0 : lead == 0xf0 ? 0x90 : 0x80);
    whole.append(len - whole.size(), static_cast<char>(0x80));
    return valid_utf8(whole) ? k : 0;
  }
  return 0;
}

std::string printable(std::string_view s, size_t max) {
  std::string out;
  size_t i = 0;
  for (; i < s.size() && out.size() < max;) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t len = utf8_char_at(s, i);
    if (len == 0) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
      continue;
    }
    if (len == 1 && (c < 0x20 || c == 0x7f)) {
      switch (c) {
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        case 0x1b: out += "\\e"; break;
        default: out += fmt::format("\\x{:02x}", c);
      }
      ++i;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  if (i < s.size()) out += fmt::format("... ({} bytes in all)", s.size());
  return out;
}

}  // namespace sbsh::ipc
