// The Python form of a record: the frozen, slotted dataclass the package sbsh returns for it
// and the converter from its JSON form (client/json_form.h) to that dataclass, both derived
// from the record's field table (ipc/messages.h) by the same walk that makes the JSON form.
// sbsh-pygen (sbsh_pygen.cpp) writes them for every record the package shows into the
// built package's sbsh/_records.py; nothing of it is written by hand.
//
// A field's Python type and its converter follow from its C++ type and its JSON form:
//
//   - a time (an int64_t named NAME_ms) is NAME, Optional[float], Unix time in seconds;
//   - a text with exact bytes (a bytes_of sibling) is str, os.fsdecode of those bytes when
//     they are not UTF-8 (so it names the file again); a list of them, Tuple[str, ...];
//   - a signal shown by name is its number, a kept command's "%17" is 17, an octal mode an int;
//   - a record is its dataclass, a list of records a tuple of them;
//   - a field whose JSON form may be null is Optional[...] (json_schema_of's rule).
//
// The Python form follows the JSON form's order of keys. What Python shows differently on
// purpose is a py_form<T> override beside the record's list in py_records.h: a few rules by
// field name (left out, renamed, a time that is 0.0 rather than None...), an order, how many
// fields come before the first with a default, fields the JSON form has beside the table,
// and a hand-written base class for behaviour (properties). A field added to a record's
// table appears in its dataclass, with a default, with no other edit.
//
// Internal: a build tool and its test include it, nothing installed.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "client/json_form.h"

namespace sbsh::client::py {

// How one field's Python form differs from the rules above.
enum class py_as {
  omit,         // not in the dataclass
  rename,       // named `text` in Python
  seconds,      // a time that is 0.0, not None, when not known: float
  not_null,     // a value the JSON form may give as null: its empty value then ("", 0)
  plain_text,   // a text as the JSON form gives it, not from its exact bytes
  exact_bytes,  // a bytes_of field: the exact bytes of its text (bytes), named `text`
  from_helper,  // not in the JSON form: the record's `helper` gives it (see below)
  note,         // `text` as a comment beside the field
};
struct py_rule {
  std::string_view field;  // the field's name in the table
  py_as as;
  std::string_view text = {};
};
// A field the JSON form has beside the table (a member a to_json() adds).
struct py_extra {
  std::string_view name;
  std::string_view type;        // its annotation
  std::string_view conversion;  // a Python expression of d, the JSON object
};

// A record's override: any of
//   static constexpr std::string_view cls = "ProcessInfo";      the class (default: from its
//                                                               schema_of name); its converter
//                                                               is process_info
//   static constexpr std::string_view doc = "...";              the docstring
//   static constexpr std::string_view base = "_ProcessBase";    a hand-written base class
//   static constexpr py_rule rules[] = {...};                   by field name
//   static constexpr std::string_view order[] = {...};          these Python names first
//   static constexpr size_t positional = 6;                     the fields after these get defaults
//   static constexpr py_extra extra[] = {...};
//   static constexpr std::string_view helper = "...";           an expression of d: a mapping of
//                                                               the from_helper fields' values
template <typename T>
struct py_form {};

// One field of a dataclass.
struct py_field {
  std::string name;        // in Python
  std::string type;        // its annotation
  std::string conversion;  // from d, the record's JSON object; empty: from the helper
  std::string note;
};

namespace detail {

template <typename T>
std::vector<py_rule> rules_of(std::string_view field) {
  std::vector<py_rule> out;
  if constexpr (requires { py_form<T>::rules; }) {
    for (const auto& r : py_form<T>::rules)
      if (r.field == field) out.push_back(r);
  }
  return out;
}
inline const py_rule* find(const std::vector<py_rule>& rules, py_as as) {
  for (const auto& r : rules)
    if (r.as == as) return &r;
  return nullptr;
}

// "kept copy" -> "KeptCopy".
inline std::string camel(std::string_view name) {
  std::string out;
  bool up = true;
  for (char c : name) {
    if (c == ' ' || c == '_') {
      up = true;
    } else {
      out += up ? static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c) : c;
      up = false;
    }
  }
  return out;
}
// "KeptCopy" -> "kept_copy".
inline std::string snake(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c >= 'A' && c <= 'Z') {
      if (!out.empty()) out += '_';
      c = static_cast<char>(c - 'A' + 'a');
    }
    out += c;
  }
  return out;
}

inline std::string py_str(std::string_view s) { return fmt::format("\"{}\"", s); }

}  // namespace detail

template <ipc::is_record T>
std::string class_name() {
  if constexpr (requires { py_form<T>::cls; }) return std::string(py_form<T>::cls);
  else return detail::camel(ipc::schema_of<T>::name);
}
// The converter is the class's name in snake case: ProcessInfo, process_info.
template <ipc::is_record T>
std::string converter_name() {
  return detail::snake(class_name<T>());
}

namespace detail {

using json_detail::is_optional;
using json_detail::is_vector;

// The type and conversion of a value of C++ type M under JSON key `key`: a record, a list,
// a number, a text.
template <typename M>
py_field value_form(const std::string& key, bool nullable) {
  std::string get = fmt::format("d.get({})", py_str(key));
  if constexpr (is_optional<M>::value) {
    return value_form<typename M::value_type>(key, true);
  } else if constexpr (ipc::is_record<M>) {
    std::string conv = fmt::format("{}({} or {{}})", converter_name<M>(), get);
    if (nullable)
      return {{},
              fmt::format("Optional[{}]", class_name<M>()),
              fmt::format("None if {} is None else {}", get, conv),
              {}};
    return {{}, class_name<M>(), conv, {}};
  } else if constexpr (json_detail::is_record_list<M>::value) {
    using R = typename M::value_type;
    return {{},
            fmt::format("Tuple[{}, ...]", class_name<R>()),
            fmt::format("tuple({}(x) for x in sequence_of({}))", converter_name<R>(), get),
            {}};
  } else if constexpr (std::is_same_v<M, std::vector<std::string>>) {
    return {{}, "Tuple[str, ...]", fmt::format("_strs({})", get), {}};
  } else if constexpr (std::is_same_v<M, bool>) {
    if (nullable) return {{}, "Optional[bool]", fmt::format("_opt_bool({})", get), {}};
    return {{}, "bool", fmt::format("bool({})", get), {}};
  } else if constexpr (std::is_integral_v<M>) {
    if (nullable) return {{}, "Optional[int]", fmt::format("_opt_int({})", get), {}};
    return {{}, "int", fmt::format("int({} or 0)", get), {}};
  } else if constexpr (std::is_floating_point_v<M>) {
    if (nullable) return {{}, "Optional[float]", fmt::format("_opt_float({})", get), {}};
    return {{}, "float", fmt::format("float({} or 0)", get), {}};
  } else {
    static_assert(std::is_convertible_v<M, std::string_view>, "a field of a type Python has no form for");
    if (nullable) return {{}, "Optional[str]", fmt::format("_opt_str({})", get), {}};
    return {{}, "str", fmt::format("str({} or \"\")", get), {}};
  }
}

template <typename T, typename F>
std::optional<py_field> member_form(const F& f) {
  using M = typename F::type;
  std::vector<py_rule> rules = rules_of<T>(f.name);
  std::optional<json_as> rule = json_detail::rule_of<T>(f.name);
  bool helper = find(rules, py_as::from_helper) != nullptr;
  if (find(rules, py_as::omit) != nullptr || (rule == json_as::omit && !helper)) return std::nullopt;
  std::string key(f.name);
  bool time = std::is_same_v<M, int64_t> && json_detail::is_time(f.name);
  if (time) key.resize(key.size() - 3);
  bool nullable = json_detail::may_be_null<M>(f, rule);
  if constexpr (requires { json_form<T>::sometimes; }) {
    for (auto k : json_form<T>::sometimes) nullable = nullable || k == key;
  }
  if (find(rules, py_as::not_null) != nullptr) nullable = false;
  std::string get = fmt::format("d.get({})", py_str(key));
  py_field out;
  if (time) {
    out = find(rules, py_as::seconds) != nullptr
              ? py_field{{}, "float", fmt::format("unix_time({}) or 0.0", get), {}}
              : py_field{{}, "Optional[float]", fmt::format("unix_time({})", get), {}};
  } else if (rule == json_as::signal_name) {
    out = {{}, "Optional[int]", fmt::format("signal_number({})", get), {}};
  } else if (rule == json_as::command_ref) {
    out = {{}, "int", fmt::format("_command_ref({})", get), {}};
  } else if (rule == json_as::octal) {
    out = {{}, "int", fmt::format("_octal({})", get), {}};
  } else if constexpr (std::is_same_v<M, std::string> || std::is_same_v<M, std::vector<std::string>>) {
    if (rule != json_as::plain_text && find(rules, py_as::plain_text) == nullptr &&
        json_detail::has_bytes_of(ipc::kTable<T>, f.member)) {
      if constexpr (std::is_same_v<M, std::string>)
        out = nullable ? py_field{{}, "Optional[str]", fmt::format("_name(d, {})", py_str(key)), {}}
                       : py_field{{}, "str", fmt::format("_name(d, {}) or \"\"", py_str(key)), {}};
      else out = {{}, "Tuple[str, ...]", fmt::format("_names(d, {})", py_str(key)), {}};
    } else {
      out = value_form<M>(key, nullable);
    }
  } else {
    out = value_form<M>(key, nullable);
  }
  const py_rule* renamed = find(rules, py_as::rename);
  out.name = renamed != nullptr ? std::string(renamed->text) : key;
  if (helper) out.conversion.clear();
  if (const py_rule* n = find(rules, py_as::note)) out.note = n->text;
  return out;
}

// The exact bytes of a text (a bytes_of field the override names): "text_bytes" is beside
// "text" in the JSON form as text_base64.
template <typename T, typename F>
std::optional<py_field> bytes_form(const F& f) {
  std::vector<py_rule> rules = rules_of<T>(f.name);
  const py_rule* exact = find(rules, py_as::exact_bytes);
  if (exact == nullptr || !f.name.ends_with("_bytes")) return std::nullopt;
  std::string key(f.name.substr(0, f.name.size() - 6));
  return py_field{std::string(exact->text), "bytes", fmt::format("_exact(d, {})", py_str(key)), {}};
}

template <typename T, typename F>
void add_field(std::vector<py_field>& out, const F& f) {
  std::optional<py_field> p;
  if constexpr (requires { F::kBytesOf; }) {
    p = bytes_form<T>(f);
  } else if constexpr (requires { f.value; }) {
    if (find(rules_of<T>(f.name), py_as::omit) == nullptr && json_detail::rule_of<T>(f.name) != json_as::omit) {
      std::string key(f.name);
      p = value_form<typename F::type>(key, false);
      p->name = key;
    }
  } else if constexpr (requires { f.outer; }) {
    // A record embedded in T's map: its JSON form is an object under the record's name.
    using I = std::remove_cvref_t<decltype(std::declval<const T&>().*(f.outer))>;
    std::string key(ipc::schema_of<I>::name);
    for (const auto& x : out)
      if (x.name == key) return;
    p = value_form<I>(key, false);
    p->name = key;
  } else {
    p = member_form<T>(f);
  }
  if (p) out.push_back(std::move(*p));
}

}  // namespace detail

// T's dataclass fields, in the order of its Python form.
template <ipc::is_record T>
std::vector<py_field> python_fields() {
  std::vector<py_field> fields;
  std::apply([&](const auto&... f) { (detail::add_field<T>(fields, f), ...); }, ipc::kTable<T>);
  if constexpr (requires { py_form<T>::extra; }) {
    for (const auto& e : py_form<T>::extra)
      fields.push_back({std::string(e.name), std::string(e.type), std::string(e.conversion), {}});
  }
  std::vector<std::string_view> order;
  if constexpr (requires { py_form<T>::order; })
    order.assign(std::begin(py_form<T>::order), std::end(py_form<T>::order));
  else if constexpr (requires { json_form<T>::order; })
    order.assign(std::begin(json_form<T>::order), std::end(json_form<T>::order));
  std::vector<py_field> out;
  for (auto name : order) {
    for (auto it = fields.begin(); it != fields.end(); ++it) {
      if (it->name == name) {
        out.push_back(std::move(*it));
        fields.erase(it);
        break;
      }
    }
  }
  for (auto& f : fields) out.push_back(std::move(f));
  return out;
}

namespace detail {

// The default of a field after the positional ones: its type's empty value.
inline std::string default_of(const py_field& f) {
  if (f.type.starts_with("Optional[")) return "None";
  if (f.type == "int") return "0";
  if (f.type == "float") return "0.0";
  if (f.type == "bool") return "False";
  if (f.type == "str") return "\"\"";
  if (f.type == "bytes") return "b\"\"";
  if (f.type.starts_with("Tuple[")) return "()";
  return {};
}

// A docstring, indented by `indent`, its lines as given.
inline std::string docstring(std::string_view doc, std::string_view indent) {
  constexpr std::string_view kQuotes = R"(""")";
  std::string out = fmt::format("{}{}", indent, kQuotes);
  bool first = true;
  size_t at = 0;
  while (at <= doc.size()) {
    size_t nl = doc.find('\n', at);
    std::string_view line = doc.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
    out += first ? std::string(line) : fmt::format("\n{}{}", line.empty() ? "" : indent, line);
    first = false;
    if (nl == std::string_view::npos) break;
    at = nl + 1;
  }
  return fmt::format("{}{}\n", out, kQuotes);
}

}  // namespace detail

// T's dataclass, as Python source.
template <ipc::is_record T>
std::string python_dataclass() {
  std::vector<py_field> fields = python_fields<T>();
  std::string base;
  if constexpr (requires { py_form<T>::base; }) base = fmt::format("({})", py_form<T>::base);
  std::string out = fmt::format("@dataclass(frozen=True, slots=True)\nclass {}{}:\n", class_name<T>(), base);
  if constexpr (requires { py_form<T>::doc; }) out += detail::docstring(py_form<T>::doc, "    ");
  size_t positional = fields.size();
  if constexpr (requires { py_form<T>::positional; }) positional = py_form<T>::positional;
  for (size_t i = 0; i < fields.size(); ++i) {
    const py_field& f = fields[i];
    std::string line = fmt::format("    {}: {}", f.name, f.type);
    if (i >= positional) line += " = " + detail::default_of(f);
    if (!f.note.empty()) line += "  # " + f.note;
    out += line + "\n";
  }
  return out;
}

// T's converter from its JSON form, as Python source.
template <ipc::is_record T>
std::string python_converter() {
  std::vector<py_field> fields = python_fields<T>();
  std::string cls = class_name<T>();
  std::string out = fmt::format("def {}(d: Mapping[str, Any]) -> {}:\n    return {}(\n", converter_name<T>(), cls, cls);
  bool helper = false;
  for (const auto& f : fields) {
    if (f.conversion.empty()) helper = true;
    else out += fmt::format("        {}={},\n", f.name, f.conversion);
  }
  if constexpr (requires { py_form<T>::helper; }) {
    if (helper) out += fmt::format("        **{},\n", py_form<T>::helper);
  }
  return out + "    )\n";
}

}  // namespace sbsh::client::py
