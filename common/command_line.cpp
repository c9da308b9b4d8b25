// command_line: the declarations of command_line.h, kept as records (declared_option) that
// command_line_parse.cpp hands to CLI11 and command_line_help.cpp writes --help from. The
// checks of the values that options take are here too: whole numbers, durations, choices.
#include "common/command_line.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "common/duration.h"

namespace sbsh::cli {

command_line::command_line(std::string path, std::string_view summary) : path_(std::move(path)), summary_(summary) {
  // CLI11's own -h,--help is there already; this entry is for prepare() and the help text.
  declare("-h,--help", "", "print this help and exit", false, {}, nullptr, {});
}

// Each of "-s,--session", in order.
std::vector<std::string_view> command_line::spellings(std::string_view names) {
  std::vector<std::string_view> out;
  for (size_t at = 0; at <= names.size();) {
    size_t comma = std::min(names.find(',', at), names.size());
    out.push_back(names.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

// No sign, space or suffix: strtoull would wrap a sign around or saturate.
std::optional<uint64_t> command_line::parse_digits(std::string_view v) {
  if (v.empty()) return std::nullopt;
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    auto d = static_cast<uint64_t>(c - '0');
    if (n > (std::numeric_limits<uint64_t>::max() - d) / 10) return std::nullopt;
    n = n * 10 + d;
  }
  return n;
}

void command_line::describe(std::string_view text) { description_ = text; }
void command_line::footer(std::string_view text) { footer_ = text; }

void command_line::declare(std::string_view names, std::string_view value_name, std::string_view help, bool many,
                           value_check check,
                           bool* flag,  // NOLINT(readability-non-const-parameter): CLI11 sets it later
                           std::function<void(const std::string&)> store) {
  // The completions offer a value by its name unless complete() says otherwise.
  value_completion values;
  if (value_name == "DIR") values.kind = value_kind::directory;
  else if (value_name == "FILE" || value_name == "FILE|-" || value_name == "FILE|DIR" || value_name == "PATH")
    values.kind = value_kind::file;
  else if (value_name == "SESSION") values.kind = value_kind::session;
  options_.push_back({names, value_name, help, many, std::move(check), std::move(store), flag, false, values});
  argument_last_ = false;
}

void command_line::choice(std::string_view names, std::string_view value_name, std::string_view help, std::string& into,
                          std::vector<std::string_view> choices) {
  option(names, value_name, help, into, check_one_of(choices));
  complete(value_kind::text, std::move(choices));
}

void command_line::complete(value_kind kind, std::vector<std::string_view> words) {
  value_completion& v = argument_last_ ? arguments_.back().values : options_.back().values;
  v = {kind, std::move(words)};
}

std::vector<command_line::option_view> command_line::options() const {
  std::vector<option_view> out;
  for (const auto& o : options_)
    if (!o.help.empty()) out.push_back({spellings(o.names), o.value_name, o.help, o.many, o.values});
  return out;
}

std::vector<command_line::argument_view> command_line::arguments() const {
  std::vector<argument_view> out;
  for (const auto& a : arguments_) out.push_back({a.name, a.many != nullptr, a.values});
  return out;
}

std::vector<const command_line*> command_line::subcommands() const {
  std::vector<const command_line*> out;
  for (const auto& c : children_) out.push_back(c.get());
  return out;
}

void command_line::option(std::string_view names, std::string_view value_name, std::string_view help, std::string& into,
                          value_check check) {
  declare(names, value_name, help, false, std::move(check), nullptr, [&into](const std::string& v) { into = v; });
}

void command_line::repeated(std::string_view names, std::string_view value_name, std::string_view help,
                            std::vector<std::string>& into, value_check check) {
  declare(names, value_name, help, true, std::move(check), nullptr,
          [&into](const std::string& v) { into.push_back(v); });
}

void command_line::flag(std::string_view names, std::string_view help, bool& into) {
  declare(names, "", help, false, {}, &into, {});
}

value_check command_line::number_check(std::string_view what, uint64_t min, uint64_t max) {
  return [what = std::string(what), min, max](std::string_view option, const std::string& v) -> std::string {
    std::string range = max == std::numeric_limits<uint64_t>::max() ? fmt::format("{} or more", min)
                                                                    : fmt::format("{} to {}", min, max);
    std::string refused = fmt::format("{} takes {}, not '{}'", option, what, v);
    bool digits = !v.empty() && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
    auto n = parse_digits(v);
    if (digits && (!n || *n > max)) return fmt::format("{}: that is more than {}", refused, max);
    if (!n || *n < min) return fmt::format("{} ({}, in decimal digits only)", refused, range);
    return "";
  };
}

void command_line::duration(std::string_view names, std::string_view value_name, std::string_view help,
                            std::chrono::milliseconds& into, std::string_view if_zero) {
  auto check = [if_zero = std::string(if_zero)](std::string_view option, const std::string& v) {
    auto d = parse_duration(v);
    if (!d) return fmt::format("{}: {}", option, d.err().message);
    return d->count() == 0 ? if_zero : std::string();
  };
  declare(names, value_name, help, false, check, nullptr, [&into](const std::string& v) { into = *parse_duration(v); });
}

void command_line::argument(std::string_view name, std::string& into) {
  arguments_.push_back({name, &into, nullptr, {}});
  argument_last_ = true;
}

void command_line::words(std::string_view name, std::vector<std::string>& into, std::string_view usage) {
  arguments_.push_back({name, nullptr, &into, {value_kind::command, {}}});
  argument_last_ = true;
  words_ = true;
  words_usage_ = usage.empty() ? fmt::format("[--] {}...", name) : std::string(usage);
}

void command_line::read_dash_words(dash_word_reader reader, std::vector<std::string_view> offered) {
  dash_words_ = std::move(reader);
  dash_words_offered_ = std::move(offered);
}

command_line& command_line::subcommand(std::string_view name, std::string_view summary, std::string_view alias) {
  children_.push_back(std::make_unique<command_line>(fmt::format("{} {}", path_, name), summary));
  children_.back()->alias_ = alias;
  return *children_.back();
}

void command_line::list_commands(std::vector<command_summary> commands) { listed_ = std::move(commands); }

command_line::declared_option* command_line::find_option(std::string_view spelling) {
  for (auto& o : options_)
    for (std::string_view n : spellings(o.names))
      if (n == spelling) return &o;
  return nullptr;
}

const command_line* command_line::chosen_child() const {
  for (const auto& c : children_)
    if (c->given()) return c.get();
  return nullptr;
}

const command_line& command_line::deepest_given() const {
  const command_line* at = this;
  while (const command_line* c = at->chosen_child()) at = c;
  return *at;
}

command_line* command_line::child_named(std::string_view name) {
  for (const auto& c : children_)
    if (c->name() == name || (!c->alias_.empty() && c->alias_ == name)) return c.get();
  return nullptr;
}

std::string list_of_choices(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += fmt::format("{}{}", i == 0 ? "" : i + 1 == names.size() ? " or " : ", ", names[i]);
  return out;
}

value_check check_not_empty(std::string_view what) {
  return [what = std::string(what)](std::string_view option, const std::string& value) {
    return value.empty() ? fmt::format("{} needs {}, not an empty word", option, what) : std::string();
  };
}

value_check check_one_of(std::vector<std::string_view> choices) {
  return [choices = std::move(choices)](std::string_view option, const std::string& value) {
    std::vector<std::string> names;
    for (auto c : choices) {
      if (c == value) return std::string();
      names.emplace_back(c);
    }
    return fmt::format("{} takes {}, not '{}'", option, list_of_choices(names), value);
  };
}

}  // namespace sbsh::cli
