// The JSON form of a record, derived from its field table (ipc/messages.h): what `--json`,
// the C ABI's *_json functions and MCP's structuredContent give for a session, a process, a
// file entry... json_form_of(r) walks the table in its order and writes each field by rules
// that follow from its type and flags, so that a field added to a record's table appears in
// its JSON form with no other edit:
//
//   - a time (an int64_t named NAME_ms) is NAME, in RFC 3339 ("2026-11-22T13:58:50.123Z");
//   - a text with a bytes_of sibling is there with U+FFFD for the bytes that are not UTF-8,
//     and its exact bytes in base64 beside it at NAME_base64 when there were some (a list of
//     texts: a list of those, null for each that is UTF-8); the bytes_of field itself is not;
//   - a field the wire leaves out when empty (kOmitEmpty, not a bool or a list), sends as nil
//     when 0 (kNilIfZero) or sends only sometimes (only_if) is null when it has no value;
//   - an optional is its value or null; a nested record is its own JSON form, and a record
//     embedded in the map (embed()) is an object under the embedded record's name;
//   - a derived field is its computed value.
//
// Where the JSON form deliberately differs from the wire (a field left out or renamed, a
// signal shown by name, an order kept from earlier releases, a computed member), a record has
// a json_form<T> override below: a few rules by field name, an order of keys, and a finish()
// for computed members. That is the only per-record code.
//
// Internal to libsbsh: not installed.
#pragma once

#include <algorithm>
#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "client/json.h"
#include "ipc/messages.h"

// The client's own records, which no message carries as they are, declared here for their
// JSON form as ipc/messages.h declares the others.
namespace sbsh::ipc {

template <>
struct schema_of<client::daemon_status> {
  static constexpr std::string_view name = "daemon status";
  static constexpr auto fields() {
    using s = client::daemon_status;
    return std::tuple{field("pid", &s::pid),
                      field("version", &s::version),
                      field("uptime_ms", &s::uptime_ms),
                      field("socket", &s::socket_path),
                      field("counters", &s::counters),
                      field("descriptor_limit", &s::descriptor_limit),
                      field("sessions_supported", &s::sessions_supported),
                      field("sessions", &s::sessions)};
  }
};

template <>
struct schema_of<client::file_match> {
  static constexpr std::string_view name = "match";
  static constexpr auto fields() {
    using s = client::file_match;
    return std::tuple{field("path", &s::path), bytes_of("path_bytes", &s::path, "its exact bytes"),
                      field("line", &s::line), field("text", &s::text),
                      bytes_of("text_bytes", &s::text, "its exact bytes")};
  }
};

template <>
struct schema_of<client::file_search_result> {
  static constexpr std::string_view name = "search result";
  static constexpr auto fields() {
    using s = client::file_search_result;
    return std::tuple{field("matches", &s::matches),
                      field("files_searched", &s::files_searched),
                      field("files_skipped", &s::files_skipped),
                      field("truncated", &s::truncated),
                      field("dir", &s::dir),
                      bytes_of("dir_bytes", &s::dir, "its exact bytes")};
  }
};

template <>
struct schema_of<client::file_edit_result> {
  static constexpr std::string_view name = "edit result";
  static constexpr auto fields() {
    using s = client::file_edit_result;
    return std::tuple{field("replacements", &s::replacements), field("bytes", &s::bytes),
                      field("first_line", &s::first_line)};
  }
};

// A command's result as `sbsh exec --json` gives it after its session and command
// (client::add_exec_result), and MCP's run_command returns it with its output cut to the
// budget: every key always there, null when it has no value, so that a reader need not ask.
template <>
struct schema_of<client::exec_result> {
  static constexpr std::string_view name = "exec result";
  using s = client::exec_result;
  static bool running(const s& r) { return r.running; }
  static bool state_lost(const s& r) { return r.state_lost; }
  static std::string next_offset(const s& r);
  static std::string stdout_text(const s& r);
  static std::string stderr_text(const s& r);
  static std::optional<std::string> stdout_base64(const s& r);
  static std::optional<std::string> stderr_base64(const s& r);
  static uint64_t duration_ms(const s& r) { return r.duration_us / 1000; }
  static constexpr auto fields() {
    return std::tuple{field("id", &s::command_id, kNilIfZero),
                      field("running", &s::running),
                      field("waiting_for_input", &s::waiting_for_input),
                      field("prompt", &s::prompt).only_if(running, "while it runs"),
                      field("screen", &s::screen),
                      derived("next_offset", next_offset),
                      field("exit_code", &s::exit_code),
                      field("signal", &s::signal),
                      field("timed_out", &s::timed_out),
                      field("shell_restarted", &s::shell_restarted),
                      field("cancelled", &s::cancelled),
                      field("ran", &s::ran),
                      field("generation", &s::generation),
                      field("state_lost", &s::state_lost),
                      field("state_lost_reason", &s::state_lost_reason).only_if(state_lost, "with state_lost"),
                      field("oom_killed", &s::oom_killed),
                      derived("stdout", stdout_text),
                      derived("stderr", stderr_text),
                      derived("stdout_base64", stdout_base64),
                      derived("stderr_base64", stderr_base64),
                      field("stdout_truncated", &s::stdout_truncated),
                      field("stderr_truncated", &s::stderr_truncated),
                      field("stdout_omitted_bytes", &s::stdout_omitted_bytes),
                      field("stderr_omitted_bytes", &s::stderr_omitted_bytes),
                      derived("duration_ms", duration_ms),
                      field("started_at_ms", &s::started_at_ms),
                      field("error", &s::error)};
  }
};

// What a file read by lines gives after its path (json_of(path, l)): the bytes' count, the
// bytes as text or base64 (encoding says which), and where they lie in the file.
template <>
struct schema_of<client::file_lines> {
  static constexpr std::string_view name = "lines";
  using s = client::file_lines;
  static uint64_t bytes(const s& l) { return l.content.size(); }
  static std::string content(const s& l);
  static std::string encoding(const s& l);
  static constexpr auto fields() {
    return std::tuple{derived("bytes", bytes),
                      derived("content", content),
                      derived("encoding", encoding),
                      field("truncated", &s::truncated),
                      field("start_line", &s::start_line),
                      field("end_line", &s::end_line),
                      field("total_lines", &s::total_lines)};
  }
};

template <>
struct schema_of<client::file_written> {
  static constexpr std::string_view name = "write result";
  static constexpr auto fields() { return std::tuple{field("bytes", &client::file_written::bytes)}; }
};

}  // namespace sbsh::ipc

namespace sbsh::client {

// How one field's JSON differs from the rules above.
enum class json_as {
  omit,            // not in the JSON form
  as_is,           // its value, even where the wire would leave it out
  null_if_empty,   // null when "", 0 (a time: 0 is "not known") or []
  plain_text,      // its text alone, without NAME_base64
  signal_name,     // a signal number as its name ("SIGKILL"), null when none
  command_ref,     // a kept command's id as "%17"
  octal,           // a number as four octal digits ("0644")
  absent_if_none,  // an optional: left out when it has none (not null), its value's form when it has
};
struct json_rule {
  std::string_view field;  // the field's name in the table
  json_as as;
};

// A record's override: any of
//   static constexpr json_rule rules[] = {...};             by field name
//   static constexpr std::string_view order[] = {...};      these JSON keys first, in this
//                                                           order; the others after, in the table's
//   static void finish(json_value& o, const T& r);          computed members, conditions
template <typename T>
struct json_form {};

namespace json_detail {

template <typename T>
struct is_optional : std::false_type {};
template <typename T>
struct is_optional<std::optional<T>> : std::true_type {};
template <typename T>
struct is_vector : std::false_type {};
template <typename T>
struct is_vector<std::vector<T>> : std::true_type {};
template <typename T>
struct is_record_list : std::false_type {};
template <ipc::is_record T>
struct is_record_list<std::vector<T>> : std::true_type {};

template <typename T>
constexpr std::optional<json_as> rule_of(std::string_view field) {
  if constexpr (requires { json_form<T>::rules; }) {
    for (const auto& r : json_form<T>::rules)
      if (r.field == field) return r.as;
  }
  return std::nullopt;
}

// "started_at_ms", of an int64_t: a time, shown as "started_at" ("uptime_ms", a uint64_t, is
// a duration and stays as it is).
constexpr bool is_time(std::string_view name) { return name.size() > 3 && name.ends_with("_ms"); }

template <typename M>
bool is_empty(const M& v) {
  if constexpr (std::is_same_v<M, bool>) return !v;
  else if constexpr (std::is_arithmetic_v<M>) return v == 0;
  else if constexpr (requires { v.empty(); }) return v.empty();
  else if constexpr (is_optional<M>::value) return !v.has_value();
  else return false;
}

// Whether `table` holds a bytes_of field for member `m`: then the text has exact bytes.
template <typename Table, typename P>
constexpr bool has_bytes_of(const Table& table, P m) {
  return std::apply(
      [&](const auto&... g) {
        auto one = [&](const auto& f) {
          using F = std::decay_t<decltype(f)>;
          if constexpr (requires { F::kBytesOf; }) {
            if constexpr (std::is_same_v<decltype(f.member), P>) return f.member == m;
          }
          return false;
        };
        return (false || ... || one(g));
      },
      table);
}

void put_name(json_value& o, const std::string& key, std::string_view name);
void put_names(json_value& o, const std::string& key, const std::vector<std::string>& names);
// Moves `order`'s keys (each with its KEY_base64) to the front, in that order.
json_value reorder(json_value o, std::span<const std::string_view> order);

}  // namespace json_detail

template <typename T>
json_value json_form_of(const T& r);

namespace json_detail {

// A value's JSON: a record's form, a list of them, an optional, or the value itself.
template <typename M>
json_value value_json(const M& v) {
  if constexpr (ipc::is_record<M>) {
    return json_form_of(v);
  } else if constexpr (is_optional<M>::value) {
    return v ? value_json(*v) : json_value(nullptr);
  } else if constexpr (is_record_list<M>::value) {
    json_value a = json_value::array();
    for (const auto& x : v) a.push_back(json_form_of(x));
    return a;
  } else if constexpr (std::is_same_v<M, ipc::str_list>) {
    return json_value(v.to_vector());
  } else {
    return json_value(v);
  }
}

template <typename T, typename F>
void put_member(json_value& o, const F& f, const T& r) {
  using M = typename F::type;
  constexpr auto& table = ipc::kTable<T>;
  std::optional<json_as> rule = rule_of<T>(f.name);
  const M& v = f.get(r);
  if constexpr (is_optional<M>::value) {
    if (rule == json_as::absent_if_none && !v) return;
  }
  bool no_value = false;
  if (rule == json_as::null_if_empty) no_value = is_empty(v);
  else if (rule != json_as::as_is) {
    no_value = !f.condition(r);
    if constexpr (std::is_arithmetic_v<M>) no_value = no_value || ((f.flags & ipc::kNilIfZero) != 0 && v == 0);
    if constexpr (!std::is_same_v<M, bool> && !is_vector<M>::value)
      no_value = no_value || ((f.flags & ipc::kOmitEmpty) != 0 && is_empty(v));
  }
  std::string key(f.name);
  if constexpr (std::is_same_v<M, int64_t>) {
    if (is_time(f.name)) {
      key.resize(key.size() - 3);
      bool nullable = rule == json_as::null_if_empty || (f.flags & (ipc::kNilIfZero | ipc::kOmitEmpty)) != 0;
      o[key] = !f.condition(r) ? json_value(nullptr) : nullable ? time_or_null(v) : json_value(rfc3339_ms(v));
      return;
    }
  }
  if (no_value) {
    o[key] = nullptr;
  } else if (rule == json_as::signal_name) {
    if constexpr (std::is_same_v<M, std::optional<int>>) o[key] = signal_json(v);
  } else if (rule == json_as::command_ref || rule == json_as::octal) {
    if constexpr (std::is_integral_v<M>)
      o[key] = rule == json_as::octal ? fmt::format("{:04o}", v) : command_ref(static_cast<uint64_t>(v));
  } else if constexpr (std::is_same_v<M, std::string> || std::is_same_v<M, std::vector<std::string>>) {
    if (rule != json_as::plain_text && has_bytes_of(table, f.member)) {
      if constexpr (std::is_same_v<M, std::string>) put_name(o, key, v);
      else put_names(o, key, v);
    } else {
      o[key] = v;
    }
  } else {
    o[key] = value_json(v);
  }
}

template <typename T, typename F>
void put_field(json_value& o, const F& f, const T& r) {
  if constexpr (requires { F::kBytesOf; }) {
    return;  // the exact bytes go with their text, as NAME_base64
  } else {
    if (rule_of<T>(f.name) == json_as::omit) return;
    if constexpr (requires { f.value; }) {
      o[std::string(f.name)] = value_json(f.value(r));
    } else if constexpr (requires { f.outer; }) {
      // A record embedded in T's map is an object of its own, under its name.
      using I = std::remove_cvref_t<decltype(r.*(f.outer))>;
      std::string key(ipc::schema_of<I>::name);
      if (!o.contains(key)) o[key] = json_form_of(r.*(f.outer));
    } else {
      put_member(o, f, r);
    }
  }
}

}  // namespace json_detail

template <typename T>
json_value json_form_of(const T& r) {
  json_value o = json_value::object();
  std::apply([&](const auto&... f) { (json_detail::put_field(o, f, r), ...); }, ipc::kTable<T>);
  if constexpr (requires { json_form<T>::finish(o, r); }) json_form<T>::finish(o, r);
  if constexpr (requires { json_form<T>::order; }) o = json_detail::reorder(std::move(o), json_form<T>::order);
  return o;
}

// ---- The JSON Schema of that form ----------------------------------------------------------
// json_schema_of<T>() describes json_form_of(T) by the same rules: each key's type, "null"
// among its types where the form may give null, NAME_base64 beside a text with exact bytes,
// and every key required that is always there (not those a finish() may leave out, which
// the override names in `sometimes`). Descriptions are prose, given by key by the caller.
struct json_doc {
  std::string_view key;
  std::string_view text;
};

template <typename T>
json_value json_schema_of(std::span<const json_doc> docs = {});

namespace json_detail {

inline json_value or_null(json_value s) {
  s["type"] = json_value::array({s["type"], "null"});
  return s;
}

template <typename M>
json_value type_schema() {
  if constexpr (std::is_same_v<M, bool>) return {{"type", "boolean"}};
  else if constexpr (std::is_integral_v<M>) return {{"type", "integer"}};
  else if constexpr (std::is_floating_point_v<M>) return {{"type", "number"}};
  else if constexpr (std::is_convertible_v<M, std::string_view>) return {{"type", "string"}};
  else if constexpr (is_optional<M>::value) return or_null(type_schema<typename M::value_type>());
  else if constexpr (ipc::is_record<M>) return json_schema_of<M>();
  else if constexpr (is_vector<M>::value) return {{"type", "array"}, {"items", type_schema<typename M::value_type>()}};
  else return json_value::object();
}

// Whether put_member() may give null for field f: the same conditions, known in advance.
template <typename M, typename F>
bool may_be_null(const F& f, std::optional<json_as> rule) {
  if (rule == json_as::null_if_empty || rule == json_as::signal_name) return true;
  if (rule == json_as::as_is || rule == json_as::absent_if_none) return false;
  bool can = f.when != nullptr;
  if constexpr (std::is_arithmetic_v<M>) can = can || (f.flags & ipc::kNilIfZero) != 0;
  if constexpr (!std::is_same_v<M, bool> && !is_vector<M>::value) can = can || (f.flags & ipc::kOmitEmpty) != 0;
  return can;
}

template <typename T, typename F>
void put_member_schema(json_value& props, const F& f) {
  using M = typename F::type;
  std::optional<json_as> rule = rule_of<T>(f.name);
  std::string key(f.name);
  json_value s;
  if (std::is_same_v<M, int64_t> && is_time(f.name)) {
    key.resize(key.size() - 3);
    s = {{"type", "string"}};
  } else if (rule == json_as::signal_name || rule == json_as::command_ref || rule == json_as::octal) {
    s = {{"type", "string"}};
  } else if constexpr (is_optional<M>::value) {
    s = rule == json_as::absent_if_none ? type_schema<typename M::value_type>() : type_schema<M>();
  } else {
    s = type_schema<M>();
  }
  if (may_be_null<M>(f, rule) && !s["type"].is_array()) s = or_null(std::move(s));
  props[key] = std::move(s);
  if constexpr (std::is_same_v<M, std::string> || std::is_same_v<M, std::vector<std::string>>) {
    if (rule != json_as::plain_text && has_bytes_of(ipc::kTable<T>, f.member)) {
      json_value b = std::is_same_v<M, std::string>
                         ? json_value{{"type", "string"}}
                         : json_value{{"type", "array"}, {"items", {{"type", json_value::array({"string", "null"})}}}};
      b["description"] = fmt::format(
          "only when {} is not valid UTF-8 (it then has U+FFFD in place of those bytes): its exact bytes, in base64",
          key);
      props[key + "_base64"] = std::move(b);
    }
  }
}

template <typename T, typename F>
void put_field_schema(json_value& props, const F& f) {
  if constexpr (requires { F::kBytesOf; }) {
    return;
  } else {
    if (rule_of<T>(f.name) == json_as::omit) return;
    if constexpr (requires { f.value; }) {
      props[std::string(f.name)] = type_schema<typename F::type>();
    } else if constexpr (requires { f.outer; }) {
      using I = std::remove_cvref_t<decltype(std::declval<const T&>().*(f.outer))>;
      props[std::string(ipc::schema_of<I>::name)] = json_schema_of<I>();
    } else {
      put_member_schema<T>(props, f);
    }
  }
}

}  // namespace json_detail

namespace json_detail {

// The schema of a text put by put_name() at `key` (and KEY_base64 beside it).
void put_name_schema(json_value& props, const std::string& key);
// Gives each key of an object schema's properties its description from `docs`, where one
// names it; "matches.path" names the key path of the objects in the array (or object) at
// "matches". A description goes after the key's type, before its items.
void describe(json_value& schema, std::span<const json_doc> docs, std::string_view prefix = {});

template <typename T>
json_value object_schema(json_value props, std::span<const json_doc> docs) {
  if constexpr (requires { json_form<T>::order; }) props = reorder(std::move(props), json_form<T>::order);
  if constexpr (requires { json_form<T>::finish_schema(props); }) json_form<T>::finish_schema(props);
  json_value required = json_value::array();
  for (auto& [key, value] : props.items()) {
    bool sometimes = key.ends_with("_base64") || rule_of<T>(key) == json_as::absent_if_none;
    if constexpr (requires { json_form<T>::sometimes; })
      for (auto k : json_form<T>::sometimes) sometimes = sometimes || key == k;
    if (!sometimes) required.push_back(key);
  }
  json_value schema{{"type", "object"}, {"required", std::move(required)}, {"properties", std::move(props)}};
  describe(schema, docs);
  return schema;
}

}  // namespace json_detail

template <typename T>
json_value json_schema_of(std::span<const json_doc> docs) {
  json_value props = json_value::object();
  std::apply([&](const auto&... f) { (json_detail::put_field_schema<T>(props, f), ...); }, ipc::kTable<T>);
  return json_detail::object_schema<T>(std::move(props), docs);
}

// The schema of json_of(path, r) (a file operation's result: the path, then r's form).
template <typename T>
json_value json_schema_at_path(std::span<const json_doc> docs) {
  json_value props = json_value::object();
  json_detail::put_name_schema(props, "path");
  std::apply([&](const auto&... f) { (json_detail::put_field_schema<T>(props, f), ...); }, ipc::kTable<T>);
  return json_detail::object_schema<T>(std::move(props), docs);
}

// The schema of add_exec_result's fields: the session and the command, then the result's form.
json_value exec_result_schema(std::span<const json_doc> docs);

// ---- The overrides ----------------------------------------------------------------------

template <>
struct json_form<session_status> {
  static constexpr json_rule rules[] = {{"started_at_ms", json_as::null_if_empty}, {"error", json_as::null_if_empty}};
  static constexpr std::string_view order[] = {"name",       "state",    "shell_pid",  "wrapper_pid", "restarts",
                                               "queued",     "commands", "cwd",        "restart",     "uptime_ms",
                                               "started_at", "running",  "running_ms", "error"};
};

// A definition as `session show` prints it: what was asked for, the snapshot's settings only
// for a snapshot, the setup's only with a setup, and what confines it as one "confinement"
// object, only when something does. The environment it starts from is left out (it may
// hold secrets), and so are the settings that only sbshd uses.
template <>
struct json_form<session_spec> {
  static constexpr json_rule rules[] = {{"environment", json_as::omit},    {"implicit", json_as::omit},
                                        {"idle_expiry_ms", json_as::omit}, {"confine", json_as::omit},
                                        {"allow_write", json_as::omit},    {"allow_read", json_as::omit},
                                        {"read_only", json_as::omit},      {"no_network", json_as::omit},
                                        {"landlock_abi", json_as::omit},   {"memory_max", json_as::omit},
                                        {"pids_max", json_as::omit},       {"cpu_millis", json_as::omit},
                                        {"cgroup", json_as::omit},         {"special_skipped", json_as::as_is},
                                        {"sbsh_env", json_as::as_is}};
  // clang-format off
  static constexpr std::string_view order[] = {
      "cwd", "env", "init", "restart", "limits", "root",
      "snapshot", "ignore", "no_default_ignores", "gitignore", "ignore_rules", "keep_copy_on_failure", "special_skipped",
      "timeout_ms", "setup", "setup_keys", "sbsh_env", "confinement"};
  // clang-format on
  static constexpr std::string_view sometimes[] = {"snapshot",        "ignore",       "no_default_ignores",
                                                   "gitignore",       "ignore_rules", "keep_copy_on_failure",
                                                   "special_skipped", "setup",        "setup_keys",
                                                   "sbsh_env",        "confinement"};
  static void finish(json_value& o, const session_spec& def);
  static void finish_schema(json_value& props);  // ignore_rules and confinement, as finish() writes them
};

template <>
struct json_form<history_entry> {
  static constexpr json_rule rules[] = {{"command", json_as::plain_text}};
};

template <>
struct json_form<sbsh::session_detail> {
  static constexpr std::string_view order[] = {"session", "definition", "history", "init_output"};
};

template <>
struct json_form<proc_info> {
  static constexpr json_rule rules[] = {{"signal", json_as::signal_name},
                                        {"signal_name", json_as::omit},
                                        {"error", json_as::null_if_empty}};
  static constexpr std::string_view order[] = {"id", "name", "session", "command", "state"};
};

template <>
struct json_form<command_info> {
  static constexpr json_rule rules[] = {{"id", json_as::command_ref},
                                        {"signal", json_as::signal_name},
                                        {"signal_name", json_as::omit}};
};

template <>
struct json_form<exec_result> {
  static constexpr json_rule rules[] = {{"id", json_as::command_ref},
                                        {"screen", json_as::null_if_empty},
                                        {"signal", json_as::signal_name},
                                        {"started_at_ms", json_as::null_if_empty},
                                        {"error", json_as::null_if_empty}};
};

// MCP's read_file by bytes gives the same form without the line numbers.
template <>
struct json_form<file_lines> {
  static constexpr std::string_view sometimes[] = {"start_line", "end_line", "total_lines"};
  static void finish_schema(json_value& props);
};

// A symlink's target only for a symlink.
template <>
struct json_form<file_entry> {
  static constexpr json_rule rules[] = {{"mode", json_as::octal}};
  static constexpr std::string_view sometimes[] = {"target"};
  static void finish(json_value& o, const file_entry& e);
};

}  // namespace sbsh::client
