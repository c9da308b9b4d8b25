// Output within a budget, markers at its cuts, and the plain text of results (render.h).
#include "mcp/render.h"

#include <algorithm>

#include <fmt/format.h>

namespace sbsh::mcp {

namespace {

bool continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// `s` ended at a line end in its second half, else before a UTF-8 character.
void end_at_line(std::string& s, size_t budget) {
  if (s.size() > budget) s.resize(budget);
  if (s.empty()) return;
  size_t nl = s.rfind('\n');
  if (nl != std::string::npos && nl + 1 >= s.size() / 2) {
    s.resize(nl + 1);
    return;
  }
  // Not within a character: back off to the start of one the cut split.
  size_t lead = s.size() - 1;
  while (lead > 0 && s.size() - lead < 4 && continuation(s[lead])) --lead;
  auto c = static_cast<unsigned char>(s[lead]);
  size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  if (s.size() - lead < len) s.resize(lead);
}

// `s` started after a line end in its first half, else at a UTF-8 character.
void start_at_line(std::string& s) {
  size_t nl = s.find('\n');
  if (nl != std::string::npos && nl + 1 <= s.size() / 2) {
    s.erase(0, nl + 1);
    return;
  }
  size_t i = 0;
  while (i < s.size() && i < 3 && continuation(s[i])) ++i;
  s.erase(0, i);
}

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

uint64_t count(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned()  ? it->get<uint64_t>()
         : it != j.end() && it->is_number_integer() ? static_cast<uint64_t>(std::max<int64_t>(it->get<int64_t>(), 0))
                                                    : 0;
}

bool flag(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

// "--- stdout ---" and the text (ending in a newline), when there is any.
void add_stream(std::string& out, const json& j, const char* name) {
  std::string text = str(j, name);
  if (text.empty()) return;
  uint64_t from = count(j, fmt::format("{}_offset", name).c_str());
  out += from > 0 ? fmt::format("--- {} (from byte {}) ---\n", name, from) : fmt::format("--- {} ---\n", name);
  out += text;
  if (out.back() != '\n') out += "\n[no newline at the end]\n";
}

std::string duration(uint64_t ms) {
  return ms < 1000 ? fmt::format("{} ms", ms) : fmt::format("{:.1f} s", static_cast<double>(ms) / 1000);
}

}  // namespace

void kept_stream::add(std::string_view d) {
  uint64_t before = seen_;
  seen_ += d.size();
  if (seen_ <= skip_) return;
  if (before < skip_) d.remove_prefix(static_cast<size_t>(skip_ - before));
  if (head_.size() < cap_) {
    size_t n = std::min(cap_ - head_.size(), d.size());
    head_.append(d.substr(0, n));
    d.remove_prefix(n);
  }
  if (d.empty()) return;
  tail_.append(d);
  if (tail_.size() > 2 * cap_) tail_.erase(0, tail_.size() - cap_);
}

kept_stream::piece kept_stream::cut(size_t budget, keep how) const {
  budget = std::min(budget, cap_);
  piece p;
  uint64_t n = size();
  if (n <= budget) {
    p.bytes = head_ + tail_;
    p.head = p.bytes.size();
    return p;
  }
  // The last `want` bytes of the stream (n > budget, so they never overlap the head kept).
  auto last = [&](size_t want) {
    if (tail_.size() >= want) return tail_.substr(tail_.size() - want);
    size_t from_head = std::min(want - tail_.size(), head_.size());
    return head_.substr(head_.size() - from_head) + tail_;
  };
  std::string head, tail;
  if (how == keep::head) {
    head = head_.substr(0, budget);
    end_at_line(head, budget);
  } else if (how == keep::tail) {
    tail = last(budget);
    start_at_line(tail);
  } else {
    size_t half = budget / 2;
    head = head_.substr(0, half);
    end_at_line(head, half);
    tail = last(budget - half);
    start_at_line(tail);
  }
  p.head = head.size();
  p.omitted = n - head.size() - tail.size();
  p.omitted_from = skip_ + head.size();
  p.bytes = std::move(head) + tail;
  return p;
}

std::pair<size_t, size_t> share_budget(size_t budget, uint64_t a, uint64_t b) {
  if (a + b <= budget) return {static_cast<size_t>(a), static_cast<size_t>(b)};
  size_t half = budget / 2;
  if (a < half) return {static_cast<size_t>(a), budget - static_cast<size_t>(a)};
  if (b < budget - half) return {budget - static_cast<size_t>(b), static_cast<size_t>(b)};
  return {half, budget - half};
}

std::string cut_marker(std::string_view stream, const kept_stream::piece& p, const json& id, uint64_t stream_end) {
  json call = {{"id", id}, {"stream", stream}, {fmt::format("{}_offset", stream), p.omitted_from}};
  return fmt::format("[sbsh: {} bytes of {} left out here (bytes {} to {} of {}); read them with process_logs {}]",
                     p.omitted, stream, p.omitted_from, p.omitted_from + p.omitted, stream_end, call.dump());
}

std::string with_marker(const kept_stream::piece& p, const std::string& marker) {
  if (p.omitted == 0) return p.bytes;
  std::string out = p.bytes.substr(0, p.head);
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += marker;
  out += '\n';
  out.append(p.bytes, p.head);
  return out;
}

std::string short_command(std::string_view command) {
  constexpr size_t kShown = 200, kStart = 80;
  if (command.size() <= kShown) return std::string(command);
  std::string start(command.substr(0, std::min(command.find('\n'), kStart)));
  end_at_line(start, kStart);
  return fmt::format("{}... ({} bytes in all, not repeated)", start, command.size());
}

std::string render_command(const json& j) {
  std::string id = str(j, "id");
  std::vector<std::string> status;
  if (flag(j, "running")) {
    status.push_back(fmt::format("still running as {} after {}", id, duration(count(j, "duration_ms"))));
  } else {
    auto code = j.find("exit_code");
    status.push_back(code != j.end() && code->is_number() ? fmt::format("exit code {}", code->get<int64_t>())
                                                          : std::string("no exit code"));
    if (std::string sig = str(j, "signal"); !sig.empty()) status.push_back("killed by signal " + sig);
    if (flag(j, "timed_out")) status.emplace_back("timed out");
    if (flag(j, "cancelled")) status.emplace_back("cancelled");
    if (flag(j, "shell_restarted"))
      status.emplace_back(
          "shell replaced: the session's shell ended (exit, exec or a crash) and a new one took its place");
    status.push_back(duration(count(j, "duration_ms")));
  }
  std::string out;
  for (size_t i = 0; i < status.size(); ++i) out += (i ? ", " : "") + status[i];
  out += '\n';
  size_t before = out.size();
  add_stream(out, j, "stdout");
  add_stream(out, j, "stderr");
  if (out.size() == before) out += flag(j, "running") ? "(no output yet)\n" : "(no output)\n";
  std::vector<std::string> notes;
  if (j.contains("ran") && !flag(j, "ran"))
    notes.emplace_back("it did not run (no shell took it); it is safe to send again");
  if (flag(j, "state_lost"))
    notes.push_back(
        fmt::format("it ran in a new shell: the session's earlier state (directory, variables, "
                    "functions) was lost{}",
                    str(j, "state_lost_reason").empty() ? "" : " (" + str(j, "state_lost_reason") + ")"));
  if (flag(j, "oom_killed")) notes.emplace_back("the kernel killed a process of the session's for memory");
  for (const char* s : {"stdout", "stderr"})
    if (auto b = j.find(fmt::format("{}_base64", s)); b != j.end() && b->is_string())
      notes.push_back(fmt::format("{} is not UTF-8: {}_base64 in the structured result has its exact bytes", s, s));
  if (std::string e = str(j, "error"); !e.empty()) notes.push_back(e);
  if (flag(j, "running"))
    notes.push_back(
        fmt::format("it goes on in session {}: await_command {} returns what it writes from here on and its end; "
                    "cancel_command {} stops it",
                    str(j, "session"),
                    json{{"id", id},
                         {"stdout_offset", count(j, "stdout_bytes")},
                         {"stderr_offset", count(j, "stderr_bytes")}}
                        .dump(),
                    json{{"id", id}}.dump()));
  for (const auto& n : notes) out += "note: " + n + "\n";
  return out;
}

std::string render_logs(const json& j) {
  std::string out;
  if (auto p = j.find("process"); p != j.end() && p->is_object()) {
    std::string state = str(*p, "state");
    out += fmt::format("process {}{}: {}", p->value("id", json()).dump(),
                       str(*p, "name").empty() ? "" : " (" + str(*p, "name") + ")", state);
    if (auto code = p->find("exit_code"); code != p->end() && code->is_number())
      out += fmt::format(", exit code {}", code->get<int64_t>());
    if (std::string sig = str(*p, "signal"); !sig.empty()) out += ", killed by signal " + sig;
    out += '\n';
  } else if (auto c = j.find("command"); c != j.end() && c->is_object()) {
    out += fmt::format("command {}: ", str(*c, "id"));
    if (flag(*c, "running")) {
      out += "running";
    } else {
      auto code = c->find("exit_code");
      out += code != c->end() && code->is_number() ? fmt::format("exit code {}", code->get<int64_t>())
                                                   : std::string("ended, no exit code");
      if (std::string sig = str(*c, "signal"); !sig.empty()) out += ", killed by signal " + sig;
    }
    out += '\n';
  }
  size_t before = out.size();
  add_stream(out, j, "stdout");
  add_stream(out, j, "stderr");
  if (out.size() == before) out += "(no output in this range)\n";
  out += fmt::format(
      "note: stdout has {} bytes and stderr {} so far; stdout_offset and stderr_offset read on from there\n",
      count(j, "stdout_bytes"), count(j, "stderr_bytes"));
  return out;
}

}  // namespace sbsh::mcp
