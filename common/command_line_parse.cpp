// command_line::parse, in three steps. prepare() walks the words as CLI11 will and settles
// what CLI11 would read otherwise than sbsh always has, noting the options the words use;
// build_cli11() makes CLI11's parser of just those options and the arguments (see
// declared_option for why); CLI11 parses, calling each option's check and store. A value's
// refusal is thrown from inside CLI11 as usage_error, and parse() turns every refusal into
// one line.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "common/command_line.h"
#include "ipc/protocol.h"

namespace sbsh::cli {

namespace {

// A refusal of a value, thrown from an option's callback inside CLI11's parse.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The name a message shows for an option: its first long name, else its first short one.
std::string shown_name(const std::vector<std::string_view>& spellings) {
  for (auto s : spellings)
    if (s.substr(0, 2) == "--") return std::string(s);
  return std::string(spellings.front());
}

}  // namespace

// Here, where CLI::App is complete.
command_line::~command_line() = default;
void command_line::app_deleter::operator()(CLI::App* app) const { delete app; }

bool command_line::given() const { return app_ != nullptr && app_->parsed(); }

bool command_line::given(std::string_view option) const {
  const CLI::Option* o = app_ == nullptr ? nullptr : app_->get_option_no_throw(std::string(option));
  return o != nullptr && o->count() > 0;
}

bool command_line::given_to_chosen(std::string_view option) const {
  for (const command_line* at = this; at != nullptr; at = at->chosen_child())
    if (at->given(option)) return true;
  return false;
}

// How a word that starts with '-' reads, the way CLI11 will read it: "--name",
// "--name=VALUE", "-x", "-xVALUE" or flags run together ("-fa").
struct command_line::option_word {
  bool known = false;        // it is made of declared options
  bool needs_next = false;   // its last option takes the next word as its value
  bool empty_value = false;  // "--name=": an empty value (CLI11 would take the next word)
  std::string error;         // a flag given a value
  std::string name, value_name;
};

command_line::option_word command_line::read_option_word(const std::string& w) {
  option_word r;
  if (w.compare(0, 2, "--") == 0) {
    size_t eq = w.find('=');
    r.name = w.substr(0, eq);
    declared_option* o = find_option(r.name);
    if (o == nullptr) return r;
    r.known = o->used = true;
    r.value_name = std::string(o->value_name);
    if (o->value_name.empty()) {
      if (eq != std::string::npos) r.error = fmt::format("option {} takes no value; give it alone", r.name);
    } else if (eq == std::string::npos) {
      r.needs_next = true;
    } else {
      r.empty_value = eq + 1 == w.size();
    }
    return r;
  }
  for (size_t k = 1; k < w.size(); ++k) {
    r.name = fmt::format("-{}", w[k]);
    declared_option* o = find_option(r.name);
    if (o == nullptr) return r;
    o->used = true;
    if (!o->value_name.empty()) {
      r.value_name = std::string(o->value_name);
      r.needs_next = k + 1 == w.size();
      break;
    }
  }
  r.known = true;
  return r;
}

// CLI11 reads a few words otherwise than sbsh always has, so they are settled here first,
// walking the words as CLI11 will (the same options, subcommands and "--"):
//  - an unknown option is refused here, naming it, instead of being kept as an extra word;
//  - "--name=" is an empty value, where CLI11 would take the next word as the value;
//  - an option that needs a value and ends the line is refused by name;
//  - a command's own dash words (kill -9) go to its dash_word_reader.
// It stops at "--" and at the first of a command's words, after which nothing is an option:
// those words it keeps itself, and CLI11 gets the options before them.
result<std::vector<std::string>> command_line::prepare(std::vector<std::string> words) {
  command_line* at = this;
  std::vector<std::string> out;
  out.reserve(words.size() + 1);
  size_t i = 0;
  for (; i < words.size(); ++i) {
    std::string& w = words[i];
    if (w == "--") break;
    if (w.size() < 2 || w[0] != '-') {
      if (command_line* child = at->child_named(w)) at = child;
      else if (at->words_) break;
      out.push_back(std::move(w));
      continue;
    }
    option_word o = at->read_option_word(w);
    if (!o.known && at->dash_words_) {
      auto instead = at->dash_words_(w);
      if (!instead) return instead.err();
      w = std::move(*instead);
      o = at->read_option_word(w);
    }
    if (!o.known) return make_error(ipc::errc::usage, at->unknown_option(w));
    if (!o.error.empty()) return make_error(ipc::errc::usage, o.error);
    if (o.empty_value) {
      out.push_back(o.name);
      out.emplace_back();
      continue;
    }
    out.push_back(std::move(w));
    if (o.needs_next) {
      if (i + 1 == words.size())
        return make_error(ipc::errc::usage, fmt::format("option {} needs a value ({})", o.name, o.value_name));
      out.push_back(std::move(words[++i]));
    }
  }
  if (at->words_) {
    if (i < words.size() && words[i] == "--") ++i;
    std::vector<std::string>& into = *at->arguments_.back().many;
    into.assign(std::make_move_iterator(words.begin() + static_cast<std::ptrdiff_t>(i)),
                std::make_move_iterator(words.end()));
    return out;
  }
  for (; i < words.size(); ++i) out.push_back(std::move(words[i]));
  return out;
}

// Makes the CLI11 App, here and in every subcommand, with the options prepare() met and the
// arguments. Every App is set up alike: a word no argument takes is kept for a message of
// ours (allow_extras) rather than thrown as CLI11's, a single-valued option given twice
// keeps the last value, and a flag takes no "=value".
void command_line::build_cli11(CLI::App* parent) {
  if (parent == nullptr) {
    owned_.reset(new CLI::App("", path_));
    app_ = owned_.get();
  } else {
    app_ = parent->add_subcommand(std::string(name()));
    if (!alias_.empty()) app_->alias(std::string(alias_));
    parent->require_subcommand(0, 1);
  }
  app_->allow_extras();
  app_->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->disable_flag_override();
  for (auto& o : options_) {
    if (!o.used || o.names == "-h,--help") continue;  // CLI11 has its own
    if (o.flag != nullptr) {
      app_->add_flag(std::string(o.names), *o.flag);
      continue;
    }
    CLI::callback_t callback = [option = shown_name(spellings(o.names)), &o](const CLI::results_t& res) {
      for (const auto& v : res) {
        if (o.check) {
          if (std::string why = o.check(option, v); !why.empty()) throw usage_error(why);
        }
        o.store(v);
      }
      return true;
    };
    auto* added = app_->add_option(std::string(o.names), callback)->type_name(std::string(o.value_name));
    if (o.many) added->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }
  for (const auto& a : arguments_)
    if (a.one != nullptr) app_->add_option(std::string(a.name), *a.one);
  for (auto& c : children_) c->build_cli11(app_);
}

result<command_line::outcome> command_line::parse(std::vector<std::string> words) {
  auto prepared = prepare(std::move(words));
  if (!prepared) return prepared.err();
  std::vector<std::string>& args = *prepared;
  if (args.empty()) return outcome::run;   // no option and no argument: nothing to build a parser for
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  build_cli11(nullptr);
  auto print_help = [this] {
    std::string h = deepest_given().help();
    std::fwrite(h.data(), 1, h.size(), stdout);
    return outcome::help_printed;
  };
  try {
    app_->parse(args);
  } catch (const CLI::CallForHelp&) {
    return print_help();
  } catch (const CLI::ParseError& e) {
    return make_error(ipc::errc::usage, fmt::format("{}: {}; see '{} --help'", path_, e.what(), path_));
  } catch (const usage_error& e) {
    // CLI11 checks values before it looks at --help: asking for help still gets it.
    for (const command_line* at = this; at != nullptr; at = at->chosen_child())
      if (at->app_->get_help_ptr()->count() > 0) return print_help();
    return make_error(ipc::errc::usage, e.what());
  }
  if (std::string why = unexpected_word(); !why.empty()) return make_error(ipc::errc::usage, why);
  return outcome::run;
}

// A word left over: CLI11 keeps what no argument took (allow_extras), and it is refused here
// with what the command does take.
std::string command_line::unexpected_word() const {
  for (const command_line* at = this; at != nullptr; at = at->chosen_child()) {
    if (at->app_->remaining_size() == 0) continue;
    std::string word;
    for (const auto& w : at->app_->remaining())
      if (w != "--") {
        word = w;
        break;
      }
    if (!at->children_.empty() && at->chosen_child() == nullptr) {
      std::vector<std::string> names;
      for (const auto& c : at->children_) names.emplace_back(c->name());
      return fmt::format("unknown {} command '{}': use {}", at->path_, word, list_of_choices(names));
    }
    return fmt::format("unexpected argument '{}'; usage: {}", word, at->usage_line(0));
  }
  return "";
}

std::string command_line::unknown_option(std::string_view word) const {
  if (words_ && listed_.empty())
    return fmt::format("unknown option '{}' for {}; put '--' before a command that starts with '-'", word, path_);
  return fmt::format("unknown option '{}' for {}; see '{} --help' for its options", word, path_, path_);
}

}  // namespace sbsh::cli
