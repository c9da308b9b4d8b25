// The tables that status, ps and session ls print (sessions, then background processes),
// and how any text from sbshd is shown on a terminal.
//
// A cell can hold anything a command's text or a directory's name holds, and a viewer's
// terminal obeys the escape sequences it is sent: `: $'\e[2J'` would clear the screen of
// whoever lists the sessions. So every text is shown escaped, as ps and systemctl do
// (--json keeps the exact text), and columns are as wide as their widest cell, so that a
// long name does not push the rest of its row out of line.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/cli.h"
#include "client/json.h"
#include "ipc/text.h"

namespace sbsh::cli {

namespace {

constexpr std::string_view kEllipsis = "\xe2\x80\xa6";  // U+2026

// The length of the valid UTF-8 sequence at p[0..n), or 0 when it is not one (overlong
// forms, surrogates and values past U+10FFFF included); *cp gets its code point.
size_t utf8_at(const unsigned char* p, size_t n, uint32_t* cp) {
  unsigned char c = p[0];
  size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (len == 0 || len > n) return 0;
  uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1fu) : len == 3 ? (c & 0x0fu) : (c & 0x07u);
  for (size_t k = 1; k < len; ++k) {
    if ((p[k] & 0xc0) != 0x80) return 0;
    v = (v << 6) | (p[k] & 0x3fu);
  }
  if ((len == 2 && v < 0x80) || (len == 3 && v < 0x800) || (len == 4 && v < 0x10000) ||
      (v >= 0xd800 && v <= 0xdfff) || v > 0x10ffff)
    return 0;
  *cp = v;
  return len;
}

// Code points, which is what a terminal advances by for all but wide characters.
size_t width(std::string_view s) {
  size_t w = 0;
  for (unsigned char c : s) w += (c & 0xc0) != 0x80;
  return w;
}

// The first `n` code points of s.
std::string_view first_points(std::string_view s, size_t n) {
  size_t i = 0;
  for (; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xc0) != 0x80 && n-- == 0) break;
  return s.substr(0, i);
}

// The last `n` code points of s.
std::string_view last_points(std::string_view s, size_t n) {
  size_t i = s.size();
  while (i > 0 && n > 0) {
    --i;
    if ((static_cast<unsigned char>(s[i]) & 0xc0) != 0x80) --n;
  }
  return s.substr(i);
}

// Columns of text, each as wide as its widest cell; the last column is not padded.
class table {
 public:
  explicit table(std::vector<std::string> header, std::vector<bool> right) : right_(std::move(right)) {
    rows_.push_back(std::move(header));
  }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print() const {
    std::vector<size_t> w(rows_[0].size(), 0);
    for (const auto& r : rows_)
      for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], width(r[i]));
    for (const auto& r : rows_) {
      std::string line;
      for (size_t i = 0; i < r.size(); ++i) {
        bool last = i + 1 == r.size();
        std::string pad(w[i] - width(r[i]), ' ');
        if (right_[i]) line += pad + r[i];
        else line += last ? r[i] : r[i] + pad;
        if (!last) line += "  ";
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      line += '\n';
      std::fwrite(line.data(), 1, line.size(), stdout);
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

}  // namespace

// 1.5M, 320K, 12B: a size for a table.
std::string human_bytes(uint64_t n) {
  const char* units = "BKMGT";
  auto v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{}B", n) : fmt::format("{:.1f}{}", v, units[u]);
}

std::string human_duration(uint64_t ms) {
  uint64_t s = ms / 1000;
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{}m", s / 3600, (s % 3600) / 60);
  return fmt::format("{}d{}h", s / 86400, (s % 86400) / 3600);
}

std::string displayable(std::string_view s, bool keep_lines) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    size_t len = utf8_at(p + i, s.size() - i, &cp);
    if (len == 0) {  // not UTF-8: the byte, escaped
      out += fmt::format("\\x{:02x}", p[i]);
      ++i;
      continue;
    }
    if (keep_lines && (cp == '\n' || cp == '\t')) out += static_cast<char>(cp);
    else if (cp == '\n') out += "\\n";
    else if (cp == '\t') out += "\\t";
    else if (cp == '\r') out += "\\r";
    else if (cp == 0x1b) out += "\\e";
    else if (cp < 0x20 || cp == 0x7f) out += fmt::format("\\x{:02x}", cp);
    // C1 controls (a terminal may take U+009B as CSI) and the marks that reorder text
    // (bidirectional embeddings, overrides and isolates), which can make a command read as
    // another.
    else if ((cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069))
      out += fmt::format("\\u{:04x}", cp);
    else out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

std::string one_line(std::string_view s, size_t max) {
  std::string d = displayable(s, false);
  if (width(d) <= max) return d;
  return std::string(first_points(d, max - 1)) + std::string(kEllipsis);
}

std::string tail_of(std::string_view s, size_t max) {
  std::string d = displayable(s, false);
  if (width(d) <= max) return d;
  return std::string(kEllipsis) + std::string(last_points(d, max - 1));
}

std::string plural(uint64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

void print_session_table(const std::vector<client::session_status>& v) {
  if (v.empty()) {
    std::puts("no sessions");
    return;
  }
  table t({"SESSION", "STATE", "WRAPPER", "SHELL", "RESTARTS", "UPTIME", "QUEUE", "CWD", "RUNNING"},
          {false, false, true, true, true, true, true, false, false});
  for (const auto& s : v) {
    std::string running =
        s.running.empty() ? "" : fmt::format("{} ({})", one_line(s.running, 40), human_duration(s.running_ms));
    if (!s.error.empty() && s.running.empty()) running = one_line(s.error, 60);
    t.add({one_line(s.name, 64), one_line(s.state, 16), std::to_string(s.wrapper_pid), std::to_string(s.shell_pid),
           std::to_string(s.restarts), human_duration(s.uptime_ms), std::to_string(s.queued), tail_of(s.cwd, 32),
           running});
  }
  t.print();
}

void print_proc_table(const std::vector<client::proc_info>& v) {
  if (v.empty()) return;
  table t({"ID", "NAME", "SESSION", "PID", "STATE", "RESULT", "STARTED", "COMMAND"},
          {true, false, false, true, false, false, false, false});
  for (const auto& p : v) {
    std::string result = p.state == "exited" && p.exit_code ? fmt::format("exit {}", *p.exit_code)
                         : p.signal                         ? ipc::signal_name(*p.signal)
                                                            : "";
    t.add({std::to_string(p.id), one_line(p.name, 64), one_line(p.session, 64), std::to_string(p.pid),
           p.state == "not_started" ? "not started" : one_line(p.state, 16), result,
           client::rfc3339_ms(p.started_at_ms).substr(0, 19), one_line(p.command, 50)});
  }
  std::fputs("\n", stdout);
  t.print();
}

void print_command_table(const std::vector<client::command_info>& v) {
  if (v.empty()) return;
  table t({"ID", "SESSION", "PID", "STATE", "RESULT", "STARTED", "COMMAND"},
          {false, false, true, false, false, false, false});
  for (const auto& c : v) {
    std::string result = c.timed_out   ? "timed out"
                         : c.signal    ? ipc::signal_name(*c.signal)
                         : c.exit_code ? fmt::format("exit {}", *c.exit_code)
                                       : "";
    if (c.cancelled) result = result.empty() ? "cancelled" : result + ", cancelled";
    t.add({client::command_ref(c.id), one_line(c.session, 64), c.pid > 0 ? std::to_string(c.pid) : "",
           one_line(c.state, 16), result, c.started_at_ms > 0 ? client::rfc3339_ms(c.started_at_ms).substr(0, 19) : "",
           one_line(c.command, 50)});
  }
  std::fputs("\n", stdout);
  t.print();
}

}  // namespace sbsh::cli
