// The bash and zsh completions of sbsh, written from the declarations of its commands and
// options (command_line.h), as cobra and clap write theirs: a new command, option or choice
// is offered with no edit here. The build runs `sbsh completion bash|zsh` and installs what
// it prints; completion_test.sh checks what the scripts offer.
//
// Both scripts are tables of what each command declares plus a few fixed functions: the
// sessions and background processes are asked of sbshd (sbsh session ls, sbsh ps) as the
// words are completed, since no declaration can know them.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace sbsh::cli {

namespace {

// A command as the scripts see it: its words after "sbsh" ("" for sbsh itself, "session
// create"), the names it is called by (its alias after its name), and what it declares.
struct node {
  std::string path;
  std::vector<std::string_view> names;
  std::string_view summary;
  std::vector<command_line::option_view> options;
  std::vector<command_line::argument_view> arguments;
  std::vector<std::string_view> dash_words;  // offered among the options: kill's -TERM
  std::vector<node> commands;
  // Its last argument is a command to run: the words from it on are that command's own.
  [[nodiscard]] bool runs() const {
    return commands.empty() && !arguments.empty() && arguments.back().words &&
           arguments.back().values.kind == value_kind::command;
  }
};

node node_of(const command_line& cl, const std::string& parent) {
  node n;
  n.path = parent.empty() ? std::string(cl.name()) : fmt::format("{} {}", parent, cl.name());
  n.names.push_back(cl.name());
  if (!cl.alias().empty()) n.names.push_back(cl.alias());
  n.summary = cl.summary();
  n.options = cl.options();
  n.arguments = cl.arguments();
  n.dash_words.assign(cl.dash_words_offered().begin(), cl.dash_words_offered().end());
  for (const command_line* c : cl.subcommands()) n.commands.push_back(node_of(*c, n.path));
  return n;
}

constexpr command_summary kHelp{"help", "print the help of a command"};

// sbsh itself: its options, and as its commands the table's (each declared as sbsh would
// run it) and `help`, which main.cpp reads before any of them and which takes a command.
struct declared_tree {
  root_args args;
  std::vector<std::unique_ptr<command_line>> lines;
  std::vector<runner> runners;  // hold what the declarations fill
  std::vector<std::string_view> command_names;
  node root;

  declared_tree() {
    lines.push_back(std::make_unique<command_line>("sbsh", ""));
    declare_root(*lines.front(), args);
    root = node_of(*lines.front(), "");
    root.path.clear();
    root.arguments.clear();  // COMMAND [ARGS...]: the commands below
    for (const auto& c : commands()) {
      lines.push_back(std::make_unique<command_line>(fmt::format("sbsh {}", c.name), c.summary));
      runners.push_back(c.declare(*lines.back()));
      root.commands.push_back(node_of(*lines.back(), ""));
      command_names.push_back(c.name);
    }
    node help{std::string(kHelp.name), {kHelp.name}, kHelp.summary, {}, {}, {}, {}};
    help.arguments.push_back({"COMMAND", false, {value_kind::text, command_names}});
    root.commands.push_back(std::move(help));
  }
};

std::string joined(const std::vector<std::string_view>& words, std::string_view sep = " ") {
  std::string out;
  for (auto w : words) out += fmt::format("{}{}", out.empty() ? "" : sep, w);
  return out;
}

// ---- bash ----

// The function call that offers a value of this kind, or "" for none.
std::string bash_offer(const value_completion& v) {
  switch (v.kind) {
    case value_kind::text: return v.words.empty() ? "" : fmt::format("_sbsh_offer '{}'", joined(v.words));
    case value_kind::file: return v.words.empty() ? "_sbsh_files" : fmt::format("_sbsh_files {}", joined(v.words));
    case value_kind::directory: return "_sbsh_dirs";
    case value_kind::session: return "_sbsh_offer \"$(_sbsh_sessions)\"";
    case value_kind::process: return "_sbsh_offer \"$(_sbsh_procs)\"";
    case value_kind::command: return "_sbsh_offer \"$(compgen -c)\"";
  }
  return "";
}

void each_node(const node& n, const std::function<void(const node&)>& f) {
  f(n);
  for (const auto& c : n.commands) each_node(c, f);
}

std::string bash_declared(const node& root) {
  std::string out =
      "# What the command PATH declares (\"\" is sbsh itself, \"session create\" a subcommand): its\n"
      "# commands, its options, those of them that take a value, and whether its last argument\n"
      "# is a command to run, whose own options then pass through.\n"
      "_sbsh_declared() {\n"
      "  commands='' options='' valued='' runs=''\n"
      "  case $1 in\n";
  each_node(root, [&out](const node& n) {
    std::vector<std::string_view> commands, options, valued;
    for (const auto& c : n.commands) commands.push_back(c.names.front());
    for (const auto& o : n.options)
      for (auto s : o.spellings) {
        options.push_back(s);
        if (!o.value_name.empty()) valued.push_back(s);
      }
    options.insert(options.end(), n.dash_words.begin(), n.dash_words.end());
    if (n.runs()) options.emplace_back("--");
    out += fmt::format("    \"{}\")", n.path);
    if (!commands.empty()) out += fmt::format("\n      commands='{}'", joined(commands));
    out += fmt::format("\n      options='{}'", joined(options));
    if (!valued.empty()) out += fmt::format("\n      valued='{}'", joined(valued));
    if (n.runs()) out += "\n      runs=1";
    out += " ;;\n";
  });
  return out + "  esac\n}\n";
}

std::string bash_subcommand(const node& root) {
  std::string out =
      "# The command that WORD chooses after PATH, or failure: _sbsh_subcommand PATH WORD.\n"
      "_sbsh_subcommand() {\n"
      "  case $1/$2 in\n";
  each_node(root, [&out](const node& n) {
    for (const auto& c : n.commands) {
      std::vector<std::string> patterns;
      for (auto name : c.names) patterns.push_back(fmt::format("\"{}/{}\"", n.path, name));
      out += fmt::format("    {}) echo \"{}\" ;;\n", fmt::join(patterns, "|"), c.path);
    }
  });
  return out + "    *) return 1 ;;\n  esac\n}\n";
}

std::string bash_values(const node& root) {
  std::string out =
      "# Offers the value of an option: _sbsh_value PATH OPTION.\n"
      "_sbsh_value() {\n"
      "  case $1/$2 in\n";
  each_node(root, [&out](const node& n) {
    for (const auto& o : n.options) {
      std::string offer = o.value_name.empty() ? "" : bash_offer(o.values);
      if (offer.empty()) continue;
      std::vector<std::string> patterns;
      for (auto s : o.spellings) patterns.push_back(fmt::format("\"{}/{}\"", n.path, s));
      out += fmt::format("    {}) {} ;;\n", fmt::join(patterns, "|"), offer);
    }
  });
  out +=
      "  esac\n}\n"
      "# Offers argument N (from 0) of a command: _sbsh_argument PATH N.\n"
      "_sbsh_argument() {\n"
      "  case $1/$2 in\n";
  each_node(root, [&out](const node& n) {
    if (n.runs()) return;  // _sbsh completes the command to run
    for (size_t i = 0; i < n.arguments.size(); ++i) {
      const auto& a = n.arguments[i];
      std::string offer = bash_offer(a.values);
      // Words after single arguments are left alone: a pattern for them would take those too.
      if (offer.empty() || (a.words && i > 0)) continue;
      out += fmt::format("    \"{}/{}\") {} ;;\n", n.path, a.words ? "*" : std::to_string(i), offer);
    }
  });
  return out + "  esac\n}\n";
}

constexpr std::string_view kBashHead =
    R"sh(# bash completion for sbsh, written by 'sbsh completion bash' from sbsh's declarations of its
# commands and options: regenerate it, do not edit it. To load it by hand:
#   source <(sbsh completion bash)

# The sessions and background processes sbshd holds, asked of it as the words are completed.
_sbsh_sessions() { sbsh session ls --json 2>/dev/null | grep -o '"name":"[^"]*"' | cut -d'"' -f4; }
_sbsh_procs() {
  sbsh ps -a --json 2>/dev/null | grep -o '"id":[0-9]*,"name":"[^"]*"' |
    sed -E 's/"id":([0-9]+),"name":"([^"]*)"/\1 \2/' | tr ' ' '\n' | grep -v '^$'
}

# COMPREPLY: the words of $1 that start as the word being completed ($cur); no space after
# one that asks for more (NAME=, ssh://).
_sbsh_offer() {
  local w list
  COMPREPLY=()
  IFS=$' \t\n' read -d '' -ra list <<<"$1"  # words, none taken as a pattern of file names
  for w in "${list[@]}"; do [[ $w == "$cur"* ]] && COMPREPLY+=("$w"); done
  [[ ${COMPREPLY[*]} == *[=/] ]] && compopt -o nospace 2>/dev/null
  return 0
}
# Local files (with EXTENSIONS given, those that end so, and directories), or directories.
_sbsh_files() {
  local f e
  compopt -o filenames 2>/dev/null
  if (($# == 0)); then mapfile -t COMPREPLY < <(compgen -f -- "$cur"); return; fi
  mapfile -t COMPREPLY < <(compgen -d -- "$cur")
  while IFS= read -r f; do
    for e; do [[ $f == *."$e" ]] && COMPREPLY+=("$f"); done
  done < <(compgen -f -- "$cur")
}
_sbsh_dirs() {
  compopt -o filenames 2>/dev/null
  mapfile -t COMPREPLY < <(compgen -d -- "$cur")
}

)sh";

constexpr std::string_view kBashMain = R"sh(
_sbsh() {
  local cur prev words cword
  if declare -F _init_completion >/dev/null; then
    _init_completion -n = || return
  else
    cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]} words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
  fi
  # --name=VALUE: VALUE is completed as the value of --name (without bash-completion, "="
  # is a word of its own).
  if [[ $cur == --*=* ]]; then
    prev=${cur%%=*} cur=${cur#*=}
  elif [[ $cur == = ]]; then
    cur=''
  elif [[ $prev == = ]]; then
    prev=${words[cword - 2]}
  fi
  # The words before the cursor: the commands they choose, options with their values, the
  # arguments (n of them), "--", and the command to run, if one has begun (at start).
  local path='' commands options valued runs n=0 ended='' start=0 i w next
  _sbsh_declared ''
  for ((i = 1; i < cword; i++)); do
    w=${words[i]}
    if [[ -z $ended && $w == -- ]]; then
      ended=1
    elif [[ -z $ended && $w == -?* ]]; then
      if [[ $w != *=* && " $valued " == *" $w "* ]]; then
        i=$((i + 1))
        [[ ${words[i]} == = ]] && i=$((i + 1))
      fi
    elif ((n == 0)) && next=$(_sbsh_subcommand "$path" "$w"); then
      path=$next
      _sbsh_declared "$path"
    elif [[ $runs ]]; then
      start=$i
      break
    else
      n=$((n + 1))
    fi
  done
  if ((start)); then
    # The command's own words: its completion, when bash-completion is there to give it.
    if declare -F _command_offset >/dev/null; then _command_offset "$start"; else _sbsh_files; fi
    return
  fi
  if [[ -z $ended && " $valued " == *" $prev "* && $prev == -* ]]; then
    _sbsh_value "$path" "$prev"
  elif [[ -z $ended && $cur == -* ]]; then
    _sbsh_offer "$options"
  elif ((n == 0)) && [[ $commands ]]; then
    _sbsh_offer "$commands"
  elif [[ $runs ]]; then
    _sbsh_offer "$(compgen -c -- "$cur")"
  else
    _sbsh_argument "$path" "$n"
  fi
  return 0
}
complete -F _sbsh sbsh
)sh";

std::string bash_script(const node& root) {
  return fmt::format("{}{}\n{}\n{}{}", kBashHead, bash_declared(root), bash_subcommand(root), bash_values(root),
                     kBashMain);
}

// ---- zsh ----

// Text inside single quotes, as a zsh word: ' closes, is escaped, and opens again.
std::string zsh_quoted(std::string_view s) {
  std::string out;
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out;
}

// An _arguments description or message: ':', '[', ']' and '\' would end or start a field.
std::string field(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == ':' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return zsh_quoted(out);
}

// The first clause of an option's help, up to a parenthesis, a colon or a semicolon, in
// at most about a line: what zsh shows beside the option.
std::string short_help(std::string_view help) {
  for (std::string_view end : {" (", ": ", "; "}) help = help.substr(0, help.find(end));
  constexpr size_t kMax = 72;
  if (help.size() <= kMax) return std::string(help);
  size_t cut = help.rfind(' ', kMax);
  return fmt::format("{}...", help.substr(0, cut == std::string_view::npos ? kMax : cut));
}

std::string zsh_action(const value_completion& v) {
  switch (v.kind) {
    case value_kind::text: {
      if (v.words.empty()) return "";
      bool more = std::any_of(v.words.begin(), v.words.end(),
                              [](std::string_view w) { return w.ends_with('=') || w.ends_with('/'); });
      // Words that ask for more (NAME=, ssh://) are offered with no space after them; a
      // colon would end the action.
      std::string words = joined(v.words);
      for (size_t at = words.find(':'); at != std::string::npos; at = words.find(':', at + 2)) words.insert(at, "\\");
      return more ? fmt::format("{{compadd -S \"\" -- {}}}", words) : fmt::format("({})", words);
    }
    case value_kind::file:
      return v.words.empty() ? "_files" : fmt::format("_files -g \"*.({})\"", joined(v.words, "|"));
    case value_kind::directory: return "_files -/";
    case value_kind::session: return "_sbsh_sessions";
    case value_kind::process: return "_sbsh_procs";
    case value_kind::command: return "_command_names -e";
  }
  return "";
}

// One option as _arguments takes it: '(-s --session)'{-s,--session=}'[help]:SESSION:action'.
std::string zsh_option(const command_line::option_view& o) {
  bool value = !o.value_name.empty();
  std::vector<std::string> names;
  for (auto s : o.spellings) names.push_back(fmt::format("{}{}", s, value && s.starts_with("--") ? "=" : ""));
  std::string spec = o.many ? "'*'" : fmt::format("'({})'", fmt::join(o.spellings.begin(), o.spellings.end(), " "));
  spec += names.size() == 1 ? names.front() : fmt::format("{{{}}}", fmt::join(names, ","));
  spec += fmt::format("'[{}]", field(short_help(o.help)));
  if (value) spec += fmt::format(":{}:{}", field(o.value_name), zsh_quoted(zsh_action(o.values)));
  return spec + "'";
}

std::string zsh_arguments(const node& n) {
  std::vector<std::string> specs;
  for (const auto& o : n.options) specs.push_back(zsh_option(o));
  for (auto w : n.dash_words) specs.push_back(fmt::format("'{}'", w));
  for (size_t i = 0; i < n.arguments.size(); ++i) {
    const auto& a = n.arguments[i];
    std::string action = zsh_quoted(zsh_action(a.values));
    if (n.runs() && i + 1 == n.arguments.size()) {
      specs.push_back(fmt::format("'(-):{}:{}'", field(a.name), action));
      specs.emplace_back("'*::arguments:_normal'");
    } else {
      specs.push_back(fmt::format("'{}:{}:{}'", a.words ? "*" : std::to_string(i + 1), field(a.name), action));
    }
  }
  if (!n.commands.empty()) {
    specs.emplace_back("'1:command:->command'");
    specs.emplace_back("'*::argument:->argument'");
  }
  std::string out = n.commands.empty() ? "  _arguments -S" : "  _arguments -C -S";
  for (const auto& s : specs) out += fmt::format(" \\\n    {}", s);
  return out + "\n";
}

// _sbsh, _sbsh_exec, _sbsh_session_create, _sbsh_dial_stdio.
std::string zsh_function_name(const node& n) {
  std::string name = n.path.empty() ? "_sbsh" : "_sbsh_" + n.path;
  std::replace_if(
      name.begin(), name.end(), [](char c) { return c == ' ' || c == '-'; }, '_');
  return name;
}

// A command's function: _arguments with its options and arguments, and for one with
// commands, their list and a call of the one chosen.
std::string zsh_function(const node& n) {
  std::string out = fmt::format("{}() {{\n", zsh_function_name(n));
  if (n.commands.empty()) return out + zsh_arguments(n) + "}\n";
  out += "  local curcontext=$curcontext state state_descr line\n  typeset -A opt_args\n  local -a commands=(\n";
  for (const auto& c : n.commands) out += fmt::format("    '{}:{}'\n", c.names.front(), zsh_quoted(c.summary));
  out += "  )\n" + zsh_arguments(n);
  out += fmt::format(
      "  case $state in\n"
      "    command) _describe -t commands '{} command' commands ;;\n"
      "    argument)\n"
      "      curcontext=${{curcontext%:*:*}}:sbsh-$words[1]:\n"
      "      case $words[1] in\n",
      n.path.empty() ? "sbsh" : zsh_quoted("sbsh " + n.path));
  for (const auto& c : n.commands)
    out += fmt::format("        {}) {} ;;\n", joined(c.names, "|"), zsh_function_name(c));
  return out + "      esac ;;\n  esac\n}\n";
}

constexpr std::string_view kZshHead = R"sh(#compdef sbsh
# zsh completion for sbsh, written by 'sbsh completion zsh' from sbsh's declarations of its
# commands and options: regenerate it, do not edit it. Each command has its function,
# _sbsh_COMMAND (_sbsh_session_create for session create). To load it by hand, write it to a
# file named _sbsh in a directory of $fpath.

# The sessions and background processes sbshd holds, asked of it as the words are completed.
_sbsh_sessions() {
  local -a names
  names=(${(f)"$(sbsh session ls --json 2>/dev/null | grep -o '"name":"[^"]*"' | cut -d'"' -f4)"})
  _describe 'session' names
}
_sbsh_procs() {
  local -a ids
  ids=(${(f)"$(sbsh ps -a --json 2>/dev/null | grep -o '"id":[0-9]*' | cut -d: -f2)"})
  _describe 'process' ids
}
)sh";

std::string zsh_script(const node& root) {
  std::string out(kZshHead);
  std::vector<const node*> all;
  each_node(root, [&all](const node& n) { all.push_back(&n); });
  // The commands before sbsh's own function, which the file calls last.
  std::rotate(all.begin(), all.begin() + 1, all.end());
  for (const node* n : all) out += "\n" + zsh_function(*n);
  return out + "\n_sbsh \"$@\"\n";
}

}  // namespace

std::string completion_script(std::string_view shell) {
  declared_tree tree;
  return shell == "zsh" ? zsh_script(tree.root) : bash_script(tree.root);
}

}  // namespace sbsh::cli
