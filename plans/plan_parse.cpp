// Plans from JSON or YAML text (parse_plan, load_plan) and the checks of their values
// (validate_plan). Every message names the field, as a path into the document
// (`stages[1].commands[0].timeout`), and says what was expected there.
//
// Both formats become one JSON tree first (YAML through plan_yaml.cpp), so they are checked
// by the same code and a plan means the same thing in either.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "plans/plan_json.h"
#include "client/resources.h"
#include "common/limits.h"
#include "ipc/fd.h"
#include "ipc/protocol.h"

namespace sbsh::client {

namespace {

// A plan is a page of text; this bound keeps a wrong file (a log, an image) from being read
// into memory whole.
constexpr size_t kMaxPlanBytes = 4u << 20;

error invalid(const std::string& path, std::string_view what) {
  return make_error(ipc::errc::invalid_plan, fmt::format("{}: {}", path, what));
}

std::string child(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}
std::string item(const std::string& path, size_t i) { return fmt::format("{}[{}]", path, i); }

// How a value is shown in a message: text quoted, anything else by its kind.
std::string shown(const plan_json& v) {
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return fmt::format("\"{}\"", s);
  }
  if (v.is_array()) return "a list";
  if (v.is_object()) return "a mapping";
  if (v.is_null()) return "nothing";
  return dump_json(v);
}

// Text where the plan wants text: a string, or (for values such as environment variables
// and limits, which YAML writes unquoted) a number or a boolean written as text.
result<std::string> text_of(const plan_json& v, const std::string& path, bool scalars_too) {
  std::string s;
  if (v.is_string()) s = v.get<std::string>();
  else if (scalars_too && (v.is_number() || v.is_boolean())) s = dump_json(v);
  else return invalid(path, fmt::format("expected {}, not {}", scalars_too ? "a value" : "text", shown(v)));
  if (s.find('\0') != std::string::npos) return invalid(path, "contains a NUL byte");
  return s;
}

result<std::chrono::milliseconds> duration_of(const plan_json& v, const std::string& path) {
  if (v.is_number()) {
    double secs = v.get<double>();
    if (!std::isfinite(secs) || secs < 0 || secs > 1e10)
      return invalid(path, fmt::format("{} is not a duration: give a number of seconds from 0", dump_json(v)));
    return std::chrono::milliseconds(std::llround(secs * 1000));
  }
  if (!v.is_string()) return invalid(path, fmt::format("expected a duration such as \"30s\", not {}", shown(v)));
  auto d = parse_duration(v.get<std::string>());
  if (!d) return invalid(path, fmt::format("{} is not a duration (500ms, 30s, 5m, 1h, or a number of seconds)", shown(v)));
  return *d;
}

// NAME=VALUE entries from a mapping of names to values, or from a list of "NAME=VALUE".
result<std::vector<std::string>> pairs_of(const plan_json& v, const std::string& path) {
  std::vector<std::string> out;
  if (v.is_object()) {
    for (const auto& [k, val] : v.items()) {
      auto t = text_of(val, child(path, k), true);
      if (!t) return t.err();
      out.push_back(k + "=" + *t);
    }
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      auto t = text_of(v[i], item(path, i), false);
      if (!t) return t.err();
      if (t->find('=') == std::string::npos) return invalid(item(path, i), fmt::format("expected NAME=VALUE, not {}", shown(v[i])));
      out.push_back(std::move(*t));
    }
  } else {
    return invalid(path, fmt::format("expected a mapping of names to values, not {}", shown(v)));
  }
  return out;
}

// A list of texts, or one text standing for a list of one.
result<std::vector<std::string>> texts_of(const plan_json& v, const std::string& path) {
  std::vector<std::string> out;
  if (!v.is_array()) {
    auto t = text_of(v, path, false);
    if (!t) return invalid(path, fmt::format("expected a list of commands, not {}", shown(v)));
    out.push_back(std::move(*t));
    return out;
  }
  for (size_t i = 0; i < v.size(); ++i) {
    auto t = text_of(v[i], item(path, i), false);
    if (!t) return t.err();
    out.push_back(std::move(*t));
  }
  return out;
}

// Refuses a key the object may not have: a misspelt field must not be ignored.
sbsh::status known_keys(const plan_json& o, const std::string& path, std::initializer_list<std::string_view> allowed) {
  for (const auto& [k, v] : o.items()) {
    bool ok = false;
    for (auto a : allowed) ok = ok || a == k;
    if (ok) continue;
    std::string list;
    size_t i = 0;
    for (auto a : allowed) list += fmt::format("{}{}", i++ == 0 ? "" : i == allowed.size() ? " or " : ", ", a);
    return invalid(child(path, k), fmt::format("unknown field (expected {})", list));
  }
  return ok_status();
}

// Reads `key` of `o` when it is present and not null: f(value, path) -> status.
template <typename F>
sbsh::status optional_field(const plan_json& o, const std::string& path, std::string_view key, F&& f) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return ok_status();
  return f(*it, child(path, key));
}

// Readers of one field's value into its place, for optional_field.
auto text_into(std::string& out) {
  return [&out](const plan_json& v, const std::string& path) -> sbsh::status {
    auto t = text_of(v, path, false);
    if (!t) return t.err();
    out = std::move(*t);
    return ok_status();
  };
}
auto list_into(std::vector<std::string>& out, bool pairs) {
  return [&out, pairs](const plan_json& v, const std::string& path) -> sbsh::status {
    auto l = pairs ? pairs_of(v, path) : texts_of(v, path);
    if (!l) return l.err();
    out = std::move(*l);
    return ok_status();
  };
}
auto bool_into(bool& out) {
  return [&out](const plan_json& v, const std::string& path) -> sbsh::status {
    // YAML's scalars arrive as text.
    if (v.is_string() && (v.get<std::string>() == "true" || v.get<std::string>() == "false")) {
      out = v.get<std::string>() == "true";
      return ok_status();
    }
    if (!v.is_boolean()) return invalid(path, fmt::format("expected true or false, not {}", shown(v)));
    out = v.get<bool>();
    return ok_status();
  };
}
template <typename T>  // std::chrono::milliseconds, or an optional one
auto duration_into(T& out) {
  return [&out](const plan_json& v, const std::string& path) -> sbsh::status {
    auto d = duration_of(v, path);
    if (!d) return d.err();
    out = *d;
    return ok_status();
  };
}

// A cgroup limit (memory, cpu, pids): a number, or text as YAML gives every scalar, read by
// `parse` (client/resources.h).
auto amount_into(uint64_t& out, result<uint64_t> (*parse)(std::string_view)) {
  return [&out, parse](const plan_json& v, const std::string& path) -> sbsh::status {
    if (!v.is_string() && !v.is_number()) return invalid(path, fmt::format("expected a number, not {}", shown(v)));
    auto n = parse(v.is_string() ? v.get<std::string>() : dump_json(v));
    if (!n) return invalid(path, n.err().message);
    out = *n;
    return ok_status();
  };
}

sbsh::status read_session(const plan_json& v, const std::string& path, session_spec& s) {
  if (!v.is_object())
    return invalid(path, fmt::format("expected a mapping (cwd, root, snapshot, env, init, limits, restart, timeout, ignore, "
                                     "no_default_ignores, gitignore, keep_copy_on_failure, setup, setup_keys, confine, "
                                     "allow_write, allow_read, read_only, no_network, memory, pids, cpu), not {}",
                                     shown(v)));
  sbsh::status st = known_keys(v, path, {"cwd", "root", "snapshot", "env", "init", "limits", "restart", "timeout", "ignore",
                                         "no_default_ignores", "gitignore", "keep_copy_on_failure", "setup",
                                         "setup_keys", "confine", "allow_write", "allow_read", "read_only",
                                         "no_network", "memory", "pids", "cpu"});
  if (st) st = optional_field(v, path, "cwd", text_into(s.cwd));
  if (st) st = optional_field(v, path, "root", text_into(s.root));
  if (st) st = optional_field(v, path, "snapshot", text_into(s.snapshot));
  if (st) st = optional_field(v, path, "env", list_into(s.env, true));
  if (st) st = optional_field(v, path, "init", list_into(s.init, false));
  if (st) st = optional_field(v, path, "limits", list_into(s.limits, true));
  if (st) st = optional_field(v, path, "restart", text_into(s.restart));
  if (st) st = optional_field(v, path, "ignore", list_into(s.ignore, false));
  if (st) st = optional_field(v, path, "no_default_ignores", bool_into(s.no_default_ignores));
  if (st) st = optional_field(v, path, "gitignore", bool_into(s.gitignore));
  if (st) st = optional_field(v, path, "keep_copy_on_failure", bool_into(s.keep_copy_on_failure));
  if (st) st = optional_field(v, path, "setup", text_into(s.setup));
  if (st) st = optional_field(v, path, "setup_keys", list_into(s.setup_keys, false));
  if (st) st = optional_field(v, path, "confine", bool_into(s.confine));
  if (st) st = optional_field(v, path, "allow_write", list_into(s.allow_write, false));
  if (st) st = optional_field(v, path, "allow_read", list_into(s.allow_read, false));
  if (st) st = optional_field(v, path, "read_only", list_into(s.read_only, false));
  if (st) st = optional_field(v, path, "no_network", bool_into(s.no_network));
  if (st) st = optional_field(v, path, "memory", amount_into(s.memory_max, parse_memory));
  if (st) st = optional_field(v, path, "pids", amount_into(s.pids_max, parse_pids));
  if (st) st = optional_field(v, path, "cpu", amount_into(s.cpu_millis, parse_cpu_millis));
  std::chrono::milliseconds timeout{0};  // of a command that gives none; duration_of refuses a negative one
  if (st) st = optional_field(v, path, "timeout", duration_into(timeout));
  s.timeout_ms = static_cast<uint64_t>(timeout.count());
  return st;
}

result<plan_command> read_command(const plan_json& v, const std::string& path) {
  plan_command c;
  if (v.is_string()) {
    c.run = v.get<std::string>();
    return c;
  }
  if (!v.is_object()) return invalid(path, fmt::format("expected a command: text, or a mapping with run, not {}", shown(v)));
  if (auto k = known_keys(v, path, {"run", "timeout", "cwd", "env", "input", "tty"}); !k) return k.err();
  auto run = v.find("run");
  if (run == v.end() || run->is_null()) return invalid(child(path, "run"), "missing: the shell text to run");
  sbsh::status st = text_into(c.run)(*run, child(path, "run"));
  if (st) st = optional_field(v, path, "timeout", duration_into(c.timeout));
  if (st) st = optional_field(v, path, "cwd", text_into(c.cwd));
  if (st) st = optional_field(v, path, "env", list_into(c.env, true));
  if (st) st = optional_field(v, path, "input", list_into(c.input, false));
  if (st) st = optional_field(v, path, "tty", bool_into(c.tty));
  if (!st) return st.err();
  return c;
}

result<plan_stage> read_stage(const plan_json& v, const std::string& path) {
  plan_stage st;
  if (!v.is_object()) return invalid(path, fmt::format("expected a stage: a mapping with name and commands, not {}", shown(v)));
  if (auto k = known_keys(v, path, {"name", "commands", "expect"}); !k) return k.err();
  auto name = v.find("name");
  if (name == v.end() || name->is_null()) return invalid(child(path, "name"), "missing: every stage needs a name");
  auto n = text_of(*name, child(path, "name"), true);
  if (!n) return n.err();
  st.name = std::move(*n);
  auto ex = v.find("expect");
  if (ex != v.end() && !ex->is_null()) {
    if (*ex == "success") st.expect = expectation::success;
    else if (*ex == "failure") st.expect = expectation::failure;
    else return invalid(child(path, "expect"), fmt::format("{} is not an expectation (success or failure)", shown(*ex)));
  }
  auto cmds = v.find("commands");
  if (cmds == v.end() || cmds->is_null()) return invalid(child(path, "commands"), "missing: a list of commands to run");
  std::string cpath = child(path, "commands");
  if (cmds->is_string()) {  // one command stands for a list of one
    st.commands.push_back(plan_command{cmds->get<std::string>(), std::nullopt, {}, {}, {}, false});
    return st;
  }
  if (!cmds->is_array()) return invalid(cpath, fmt::format("expected a list of commands, not {}", shown(*cmds)));
  for (size_t i = 0; i < cmds->size(); ++i) {
    auto c = read_command((*cmds)[i], item(cpath, i));
    if (!c) return c.err();
    st.commands.push_back(std::move(*c));
  }
  return st;
}

result<plan> read_plan(const plan_json& root) {
  if (!root.is_object())
    return make_error(ipc::errc::invalid_plan,
                      fmt::format("the plan must be a mapping with stages (and optionally session and "
                                  "timeout), not {}",
                                  root.is_null() ? "an empty document" : shown(root)));
  if (auto k = known_keys(root, "", {"session", "timeout", "stages"}); !k) return k.err();
  plan p;
  sbsh::status st = optional_field(root, "", "session", [&](const plan_json& f, const std::string& path) {
    return read_session(f, path, p.session);
  });
  if (st) st = optional_field(root, "", "timeout", duration_into(p.timeout));
  if (!st) return st.err();
  auto stages = root.find("stages");
  if (stages == root.end() || stages->is_null()) return invalid("stages", "missing: a list of stages to run");
  if (!stages->is_array()) return invalid("stages", fmt::format("expected a list of stages, not {}", shown(*stages)));
  for (size_t i = 0; i < stages->size(); ++i) {
    auto st = read_stage((*stages)[i], item("stages", i));
    if (!st) return st.err();
    p.stages.push_back(std::move(*st));
  }
  if (auto v = validate_plan(p); !v) return v.err();
  return p;
}

bool valid_stage_name(std::string_view n) {
  auto word = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  if (n.empty() || n.size() > 64 || !word(n[0])) return false;
  return std::ranges::all_of(n, [&](char c) { return word(c) || c == '.' || c == '_' || c == '-'; });
}

sbsh::status check_env(const std::vector<std::string>& env, const std::string& path) {
  for (const auto& e : env) {
    std::string_view name = std::string_view(e).substr(0, e.find('='));
    bool ok = e.find('=') != std::string::npos && !name.empty() && !(name[0] >= '0' && name[0] <= '9');
    for (char c : name) ok = ok && (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'));
    if (!ok)
      return invalid(path, fmt::format("\"{}\" is not a variable name (letters, digits and _, not starting with a "
                                       "digit), in \"{}\"", name, e));
    if (e.find('\0') != std::string::npos) return invalid(path, fmt::format("the value of {} contains a NUL byte", name));
  }
  return ok_status();
}

sbsh::status check_session(const session_spec& s) {
  if (!s.cwd.empty() && !s.snapshot.empty())
    return invalid("session", "cwd and snapshot both say where the session starts: give one (a snapshot session starts in its copy)");
  if (!s.root.empty() && !s.snapshot.empty())
    return invalid("session", "root and snapshot do not go together: a snapshot session's root is its copy");
  if (s.restart != "always" && s.restart != "on-failure" && s.restart != "never")
    return invalid("session.restart", fmt::format("\"{}\" is not a restart policy (always, on-failure or never)", s.restart));
  if (auto e = check_env(s.env, "session.env"); !e) return e;
  for (const auto& l : s.limits)
    if (auto r = parse_limit(l); !r) return invalid("session.limits", fmt::format("\"{}\": {}", l, r.err().message));
  if (s.confine && s.root.empty() && s.snapshot.empty())
    return invalid("session.confine", "confines the session to its root: give root or snapshot too");
  for (auto [key, list] : {std::pair{"allow_write", &s.allow_write}, std::pair{"allow_read", &s.allow_read},
                           std::pair{"read_only", &s.read_only}}) {
    if (!list->empty() && !s.confine)
      return invalid(child("session", key), "adds to a confined session's rules: give confine: true too");
    for (size_t i = 0; i < list->size(); ++i)
      if ((*list)[i].empty() || (*list)[i][0] != '/')
        return invalid(item(child("session", key), i),
                       fmt::format("\"{}\" is not an absolute path: a confined session's paths are the kernel's, "
                                   "taken from no directory",
                                   (*list)[i]));
  }
  return ok_status();
}

// The text of the plan at `path`, open as `fd`; more than kMaxPlanBytes is not a plan.
result<std::string> read_plan_text(int fd, const std::string& path) {
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(ipc::errc::file, fmt::format("cannot read the plan {}: {}", path, std::strerror(errno)));
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxPlanBytes)
      return make_error(ipc::errc::invalid_plan,
                        fmt::format("{}: larger than {} bytes: is it a plan?", path, kMaxPlanBytes));
  }
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

}  // namespace

result<plan> parse_plan(std::string_view text, plan_format format) {
  if (format == plan_format::detect) {
    size_t i = text.find_first_not_of(" \t\r\n");
    format = i != std::string_view::npos && text[i] == '{' ? plan_format::json : plan_format::yaml;
  }
  if (format == plan_format::yaml) {
    auto tree = yaml_to_json(text);
    if (!tree) return tree.err();
    return read_plan(*tree);
  }
  plan_json tree;
  try {
    tree = plan_json::parse(text);
  } catch (const plan_json::exception& e) {
    // what() is "[json.exception.parse_error.101] parse error at line 1, column 2: ...", or
    // out_of_range's for a number past a double's range ("number overflow parsing '1E400'").
    std::string_view what = e.what();
    if (auto p = what.find("] "); p != std::string_view::npos) what.remove_prefix(p + 2);
    return make_error(ipc::errc::invalid_plan, fmt::format("invalid JSON: {}", what));
  }
  return read_plan(tree);
}

result<plan> load_plan(const std::string& path) {
  unique_fd fd(path == "-" ? ::fcntl(0, F_DUPFD_CLOEXEC, 0) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return make_error(ipc::errc::file, fmt::format("cannot read the plan {}: {}", path, std::strerror(errno)));
  struct stat st{};
  if (::fstat(fd.get(), &st) == 0 && S_ISDIR(st.st_mode))
    return make_error(ipc::errc::file, fmt::format("cannot read the plan {}: it is a directory", path));
  auto text = read_plan_text(fd.get(), path);
  if (!text) return text.err();
  plan_format f = ends_with(path, ".json") ? plan_format::json
                  : ends_with(path, ".yaml") || ends_with(path, ".yml") ? plan_format::yaml
                                                                        : plan_format::detect;
  auto p = parse_plan(*text, f);
  if (!p) return make_error(p.err().code, fmt::format("{}: {}", path, p.err().message));
  return p;
}

sbsh::status validate_plan(const plan& p) {
  if (p.timeout.count() < 0) return invalid("timeout", "a duration cannot be negative");
  if (auto s = check_session(p.session); !s) return s;
  if (p.stages.empty()) return invalid("stages", "the list is empty: give at least one stage");
  std::set<std::string> names;
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const auto& st = p.stages[i];
    std::string path = item("stages", i);
    if (!valid_stage_name(st.name))
      return invalid(path + ".name", fmt::format("\"{}\" is not a stage name: 1 to 64 letters, digits, '.', '_' or '-', "
                                                 "starting with a letter or digit (it names a directory of artifacts)",
                                                 st.name));
    if (!names.insert(st.name).second)
      return invalid(path + ".name", fmt::format("\"{}\" names an earlier stage too; stage names must be unique", st.name));
    if (st.commands.empty()) return invalid(path + ".commands", "the list is empty: give at least one command");
    for (size_t j = 0; j < st.commands.size(); ++j) {
      const auto& c = st.commands[j];
      std::string cpath = item(path + ".commands", j);
      if (c.run.empty()) return invalid(cpath, "an empty command: give the shell text to run");
      if (c.run.find('\0') != std::string::npos) return invalid(cpath, "the command contains a NUL byte");
      if (c.timeout && c.timeout->count() < 0) return invalid(cpath + ".timeout", "a duration cannot be negative");
      if (c.cwd.find('\0') != std::string::npos) return invalid(cpath + ".cwd", "contains a NUL byte");
      if (auto e = check_env(c.env, cpath + ".env"); !e) return e;
    }
  }
  return ok_status();
}

}  // namespace sbsh::client
