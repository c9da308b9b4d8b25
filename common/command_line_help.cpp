// --help, written from the declaration of a command line (command_line.h): a usage line
// made from its options and arguments, its description, its subcommands, one line per
// option with its value and help, and its footer. Nothing here is written per command, so
// what --help says is what the parser takes; tests check the manual and the completions
// against it.
#include <fmt/format.h>

#include <algorithm>

#include "common/command_line.h"

namespace sbsh::cli {

namespace {

constexpr size_t kWidth = 80;
constexpr size_t kMaxOptionColumn = 26;

// Greedy word wrap to `width`, each line starting with `indent` spaces (the first with
// `first` instead); "\n" in `text` starts a new line, and a line's own leading spaces
// indent its continuation lines too.
std::string wrap(std::string_view text, size_t width, size_t first, size_t indent) {
  std::string out;
  size_t pad = first;
  for (size_t at = 0; at <= text.size();) {
    size_t nl = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, nl - at);
    at = nl + 1;
    size_t lead = std::min(line.find_first_not_of(' '), line.size());
    std::string cur(pad + lead, ' ');
    size_t base = cur.size();
    for (size_t w = lead; w < line.size();) {
      size_t end = std::min(line.find(' ', w), line.size());
      std::string_view word = line.substr(w, end - w);
      w = end + 1;
      if (word.empty()) continue;
      if (cur.size() > base && cur.size() + 1 + word.size() > width) {
        out += cur + "\n";
        cur.assign(indent + lead, ' ');
        base = cur.size();
      }
      if (cur.size() > base) cur += ' ';
      cur += word;
    }
    while (!cur.empty() && cur.back() == ' ') cur.pop_back();
    out += cur + "\n";
    pad = indent;
  }
  return out;
}

// `label` in a column of `col` characters after two spaces, then `text` wrapped beside it
// (below it when the label is wider than the column).
std::string hang(const std::string& label, std::string_view text, size_t col) {
  std::string body = wrap(text, kWidth, col + 4, col + 4);
  if (label.size() > col) return "  " + label + "\n" + body;
  return body.replace(0, 2 + label.size(), "  " + label);
}

}  // namespace

// One line with no width (0) for messages, else wrapped under its command, between the
// options and arguments it is made of.
std::string command_line::usage_line(size_t width) const {
  std::vector<std::string> parts;
  for (const auto& o : options_) {
    // Every command has -h; an option without help is not for users (command_line::option).
    if (o.names == "-h,--help" || o.help.empty()) continue;
    // "-s SESSION", "--json", "[-e NAME=VALUE]...": the first short name, else the long one.
    auto names = spellings(o.names);
    auto spelling = std::find_if(names.begin(), names.end(), [](std::string_view n) { return n.size() == 2; });
    if (spelling == names.end()) spelling = names.begin();
    parts.push_back(
        fmt::format("[{}{}{}]{}", *spelling, o.value_name.empty() ? "" : " ", o.value_name, o.many ? "..." : ""));
  }
  for (const auto& a : arguments_) parts.emplace_back(a.many != nullptr ? std::string_view(words_usage_) : a.name);
  std::string out = path_;
  size_t indent = 7 + path_.size() + 1, at = 7 + path_.size();  // 7: "usage: " or as many spaces
  for (const auto& p : parts) {
    if (width > 0 && at + 1 + p.size() > width) {
      out += "\n" + std::string(indent - 1, ' ');
      at = indent - 1;
    }
    out += " " + p;
    at += 1 + p.size();
  }
  return width > 0 ? out + "\n" : out;
}

std::string command_line::usage_lines(size_t width) const {
  if (children_.empty()) return "usage: " + usage_line(width);
  std::string out;
  for (const auto& c : children_) out += (out.empty() ? "usage: " : "       ") + c->usage_line(width);
  return out;
}

std::string command_line::commands_help() const {
  std::vector<command_summary> list = listed_;
  for (const auto& c : children_) list.push_back({c->name(), c->summary_});
  if (list.empty()) return "";
  size_t col = 0;
  for (const auto& c : list) col = std::max(col, c.name.size());
  std::string out = "\nCommands:\n";
  for (const auto& c : list) out += hang(std::string(c.name), c.summary, col);
  return out;
}

std::string command_line::options_help() const {
  // "-s, --session SESSION": short names first, and the help option (declared first) last.
  std::vector<std::pair<std::string, std::string>> rows;
  auto add_row = [&rows](const declared_option& o) {
    if (o.help.empty()) return;  // not for users (command_line::option)
    std::string shorts, longs;
    for (auto n : spellings(o.names)) (n.size() == 2 ? shorts : longs) += fmt::format(", {}", n);
    std::string spelling = shorts.empty() ? "    " + longs.substr(2) : (shorts + longs).substr(2);
    if (!o.value_name.empty()) spelling += fmt::format(" {}", o.value_name);
    rows.emplace_back(spelling, std::string(o.help));
  };
  std::for_each(options_.begin() + 1, options_.end(), add_row);
  add_row(options_.front());
  size_t col = 0;
  for (const auto& r : rows)
    if (r.first.size() <= kMaxOptionColumn) col = std::max(col, r.first.size());
  std::string out = "\nOptions:\n";
  for (const auto& [spelling, text] : rows) out += hang(spelling, text, col);
  return out;
}

std::string command_line::help() const {
  std::string out = usage_lines(kWidth);
  std::string_view description = description_.empty() ? summary_ : description_;
  if (!description.empty()) out += "\n" + wrap(description, kWidth, 0, 0);
  out += commands_help();
  out += options_help();
  std::string footer(footer_);
  if (footer.empty() && !children_.empty())
    footer = fmt::format("Run '{} COMMAND --help' for a command's options.", path_);
  if (!footer.empty()) out += "\n" + wrap(footer, kWidth, 0, 0);
  return out;
}

}  // namespace sbsh::cli
