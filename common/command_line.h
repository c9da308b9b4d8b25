// The declaration of a program's command line, written once per command (sbshd's, and
// each of sbsh's subcommands): its options, arguments and help texts. Parsing, `--help` and
// the refusal of bad values all come from it, so no option is spelt out anywhere else in the
// code, and sbsh and sbshd read their options alike (tests/man/options_test.sh and
// man_test.sh hold the manuals and the completions to it).
//
// Each option is declared with the variable it fills and, where the value has a form, the
// check of that form: a wrong value is refused before anything runs, with a message that
// names the option and says what it takes. CLI11 parses (command_line_parse.cpp, the one
// file that sees its large header); command_line_help.cpp writes --help from the
// declarations.
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/result.h"

namespace CLI {
class App;
}

namespace sbsh::cli {

// Checks one value of an option: returns "" when it is good, else the whole message (which
// names `option`, the option's long name, and says what it takes).
using value_check = std::function<std::string(std::string_view option, const std::string& value)>;

// Reads a word that starts with '-' and is no option of the command: returns the word to
// read in its place (kill reads "-9" as "--signal=9"), or the refusal.
using dash_word_reader = std::function<result<std::string>(std::string_view word)>;

// One line of a "Commands:" list in --help.
struct command_summary {
  std::string_view name, summary;
};

// What the shell completions (sbsh completion, cli/completion.cpp) offer for a value of an
// option or an argument.
enum class value_kind : uint8_t {
  text,       // any word: only the words listed, if any
  file,       // a local file or directory (with extensions listed: files that end so)
  directory,  // a local directory
  session,    // a session sbshd holds, asked of it at completion time
  process,    // a background process (its ID or name), asked of sbshd likewise
  command,    // a command to run, then that command's own words
};
struct value_completion {
  value_kind kind = value_kind::text;
  std::vector<std::string_view> words;  // text: the values offered; file: the extensions
};

// The names and texts given to a command_line are kept as views: they must outlive it, as
// the string literals that declarations are made of do.
class command_line {
 public:
  // `path` is the command as typed ("sbsh exec"), `summary` its one line for lists.
  command_line(std::string path, std::string_view summary);
  ~command_line();
  command_line(const command_line&) = delete;
  command_line& operator=(const command_line&) = delete;

  // The paragraph under the usage line in --help, and the text after the options. Both are
  // wrapped to the width of a terminal; "\n" starts a new line, "\n\n" a new paragraph.
  void describe(std::string_view text);
  void footer(std::string_view text);

  // An option with one value, e.g. option("-s,--session", "SESSION", "...", o.session).
  // Given twice, the last one counts. An option declared with no help is left out of
  // --help and the usage line (bounds that only tests lower).
  void option(std::string_view names, std::string_view value_name, std::string_view help, std::string& into,
              value_check check = {});
  // An option that may be given many times, each with one value, kept in order.
  void repeated(std::string_view names, std::string_view value_name, std::string_view help,
                std::vector<std::string>& into, value_check check = {});
  void flag(std::string_view names, std::string_view help, bool& into);
  // An option that takes one of `choices` (refused otherwise, and offered by the completions).
  void choice(std::string_view names, std::string_view value_name, std::string_view help, std::string& into,
              std::vector<std::string_view> choices);
  // A whole number from `min` to `max` (which T holds), in decimal digits only: no sign, no
  // spaces, no suffix. `what` says what it counts, for the refusal ("a number of lines").
  template <std::unsigned_integral T>
  void number(std::string_view names, std::string_view value_name, std::string_view help, T& into,
              std::string_view what, uint64_t min, uint64_t max) {
    declare(names, value_name, help, false, number_check(what, min, max), nullptr,
            [&into](const std::string& v) { into = static_cast<T>(*parse_digits(v)); });
  }
  // An option whose value `read` turns into a T, or refuses with the whole message (which
  // names `option`, as a value_check's does).
  template <class T>
  void converted(std::string_view names, std::string_view value_name, std::string_view help, T& into,
                 std::function<result<T>(std::string_view option, const std::string& value)> read) {
    auto check = [read](std::string_view option, const std::string& v) {
      auto r = read(option, v);
      return r ? std::string() : r.err().message;
    };
    declare(names, value_name, help, false, check, nullptr,
            [read, &into](const std::string& v) { into = *read("", v); });
  }
  // A duration as sbsh::parse_duration reads it (500ms, 30s, 5m, 1h, or seconds); zero is
  // refused with `if_zero` when that is given.
  void duration(std::string_view names, std::string_view value_name, std::string_view help,
                std::chrono::milliseconds& into, std::string_view if_zero = {});

  // One argument after the options (an ID, a NAME). Options may also follow it.
  void argument(std::string_view name, std::string& into);
  // The words of a command to run (`sbsh exec ... COMMAND...`): as with ssh, options are
  // recognised only before the first of them, so a command's own options pass through;
  // "--" ends the options too. `usage` replaces "[--] NAME..." in the usage line.
  void words(std::string_view name, std::vector<std::string>& into, std::string_view usage = {});
  // `offered`: such words for the completions to offer among the options ("-TERM").
  void read_dash_words(dash_word_reader reader, std::vector<std::string_view> offered = {});
  // What the shell completions offer for the value of the option, or for the argument,
  // declared last. Without it, an option's value is offered by its value name (a DIR:
  // directories; a FILE, FILE|-, FILE|DIR or PATH: files; a SESSION: the sessions; any
  // other: nothing), words() offers commands to run, and an argument nothing.
  void complete(value_kind kind, std::vector<std::string_view> words = {});

  // A subcommand of this command (session create); it lives as long as this one.
  command_line& subcommand(std::string_view name, std::string_view summary, std::string_view alias = {});
  // Lists commands in --help that are not subcommands declared here (sbsh's own table).
  void list_commands(std::vector<command_summary> commands);

  enum class outcome { run, help_printed };
  // Parses the words after the command's name. On --help, prints the help of the deepest
  // subcommand given on stdout. Errors are one line, without the program's prefix ("sbsh: ").
  [[nodiscard]] result<outcome> parse(std::vector<std::string> words);

  // After a successful parse: whether this subcommand (or an option by any of its names,
  // "--host") was given on the command line.
  [[nodiscard]] bool given() const;
  [[nodiscard]] bool given(std::string_view option) const;
  // Whether the option was given to this command or to the subcommand chosen (session ls).
  [[nodiscard]] bool given_to_chosen(std::string_view option) const;
  [[nodiscard]] std::string help() const;

  // The declaration, read back for the shell completions (cli/completion.cpp).
  struct option_view {
    std::vector<std::string_view> spellings;  // "-s", "--session"
    std::string_view value_name, help;        // value_name: empty for a flag
    bool many;
    value_completion values;
  };
  struct argument_view {
    std::string_view name;
    bool words;  // the words of a command (declared by words()): the rest of the line
    value_completion values;
  };
  [[nodiscard]] std::vector<option_view> options() const;  // those with help: for users
  [[nodiscard]] std::vector<argument_view> arguments() const;
  [[nodiscard]] std::vector<const command_line*> subcommands() const;
  [[nodiscard]] std::span<const std::string_view> dash_words_offered() const { return dash_words_offered_; }
  [[nodiscard]] std::span<const command_summary> listed_commands() const { return listed_; }
  [[nodiscard]] std::string_view name() const { return std::string_view(path_).substr(path_.rfind(' ') + 1); }
  [[nodiscard]] std::string_view summary() const { return summary_; }
  [[nodiscard]] std::string_view alias() const { return alias_; }

 private:
  // One option as declared. Its CLI11 Option is made only when a parse meets it: CLI11 builds
  // its parser at run time, and sbsh runs once per command, so it builds no more than the
  // words need (measured: every Option costs some 7000 instructions to build).
  struct declared_option {
    std::string_view names;       // as declared: "-s,--session"
    std::string_view value_name;  // empty for a flag
    std::string_view help;
    bool many = false;  // may be given many times, each with one value
    value_check check;
    std::function<void(const std::string&)> store;  // options
    bool* flag = nullptr;                           // flags
    bool used = false;                              // met by prepare()
    value_completion values;
  };
  struct declared_argument {
    std::string_view name;
    std::string* one = nullptr;
    std::vector<std::string>* many = nullptr;
    value_completion values;
  };
  // How a word that starts with '-' reads against the options; see parse.cpp.
  struct option_word;

  static std::vector<std::string_view> spellings(std::string_view names);  // "-s", "--session"
  // Decimal digits only; nullopt when empty, anything else, or more than 2^64-1.
  static std::optional<uint64_t> parse_digits(std::string_view v);
  static value_check number_check(std::string_view what, uint64_t min, uint64_t max);
  void declare(std::string_view names, std::string_view value_name, std::string_view help, bool many, value_check check,
               bool* flag, std::function<void(const std::string&)> store);
  declared_option* find_option(std::string_view spelling);
  option_word read_option_word(const std::string& word);
  [[nodiscard]] result<std::vector<std::string>> prepare(std::vector<std::string> words);
  void build_cli11(CLI::App* parent);
  [[nodiscard]] const command_line* chosen_child() const;
  [[nodiscard]] const command_line& deepest_given() const;
  [[nodiscard]] command_line* child_named(std::string_view name);
  [[nodiscard]] std::string unexpected_word() const;
  [[nodiscard]] std::string unknown_option(std::string_view word) const;
  [[nodiscard]] std::string usage_line(size_t width) const;
  [[nodiscard]] std::string usage_lines(size_t width) const;
  [[nodiscard]] std::string options_help() const;
  [[nodiscard]] std::string commands_help() const;

  // Made by build_cli11(), and only when there are words for CLI11 to parse. The top of a
  // tree owns its App; a subcommand's belongs to its parent's.
  struct app_deleter {
    void operator()(CLI::App* app) const;
  };
  std::unique_ptr<CLI::App, app_deleter> owned_;
  CLI::App* app_ = nullptr;
  std::string path_;
  std::string_view summary_, alias_, description_, footer_;
  std::vector<declared_option> options_;
  std::vector<declared_argument> arguments_;
  bool words_ = false;
  std::string words_usage_;  // "[--] COMMAND..."
  dash_word_reader dash_words_;
  std::vector<std::string_view> dash_words_offered_;
  std::vector<std::unique_ptr<command_line>> children_;
  std::vector<command_summary> listed_;
  bool argument_last_ = false;  // complete() is about arguments_.back(), else options_.back()
};

// Values that options of several commands take.
value_check check_not_empty(std::string_view what);  // "a directory"
value_check check_one_of(std::vector<std::string_view> choices);
std::string list_of_choices(const std::vector<std::string>& names);  // "a, b or c"

}  // namespace sbsh::cli
