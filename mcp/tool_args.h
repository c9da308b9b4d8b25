// The MCP tools' arguments, declared once. A tool's arguments are a struct whose static
// arguments() lists its fields, as ipc/messages.h's tables list a record's:
//
//   struct wait_args {
//     std::variant<std::string, int64_t> id;
//     std::optional<double> timeout_seconds;
//     static constexpr auto arguments() {
//       using s = wait_args;
//       return std::tuple{arg("id", &s::id, "the process id or its name").required(),
//                         arg("timeout_seconds", &s::timeout_seconds, "give up after this long").above(0)};
//     }
//   };
//
// A field's JSON type follows from its member's type (a text: string; bool: boolean; an
// integer: integer; a double: number; a list of texts: array; a map of texts: object of
// strings; a variant of a text and an integer: both, in the variant's order; an optional:
// its value's, and absent when not given). From the table follow the input JSON Schema
// tools/list shows (input_schema_of), the check of a call's arguments against it, whose
// messages name the argument and say what it takes (check_arguments_of), and the parse
// into the struct (parse_arguments): a field added to the table needs no other code.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include "mcp/jsonrpc.h"

namespace sbsh::mcp {

enum class arg_type { string, boolean, integer, number, strings, string_map, string_or_integer, integer_or_string };

// One argument: all but where it goes in the struct.
struct arg_spec {
  std::string_view name;
  std::string_view description;
  arg_type type = arg_type::string;
  bool required = false;
  std::optional<double> minimum, maximum, exclusive_minimum;
  std::optional<size_t> min_length, max_length, max_items;
  std::string_view pattern;
  std::span<const std::string_view> one_of;  // enum
  // A list's items.
  std::optional<size_t> item_min_length;
  std::string_view item_pattern, item_description;
  std::span<const std::string_view> item_one_of;
  // An object of strings: the pattern of its keys (propertyNames).
  std::string_view key_pattern;
};

namespace args_detail {

// std::optional<T>: an argument that may be absent, of T's type.
template <typename M>
concept is_optional = requires(M m) {
  m.has_value();
  m.reset();
};

template <typename V>
constexpr arg_type type_of() {
  if constexpr (is_optional<V>) return type_of<typename V::value_type>();
  else if constexpr (std::is_same_v<V, std::string>) return arg_type::string;
  else if constexpr (std::is_same_v<V, bool>) return arg_type::boolean;
  else if constexpr (std::is_integral_v<V>) return arg_type::integer;
  else if constexpr (std::is_floating_point_v<V>) return arg_type::number;
  else if constexpr (std::is_same_v<V, std::vector<std::string>>) return arg_type::strings;
  else if constexpr (std::is_same_v<V, std::map<std::string, std::string>>) return arg_type::string_map;
  else if constexpr (std::is_same_v<V, std::variant<std::string, int64_t>>) return arg_type::string_or_integer;
  else if constexpr (std::is_same_v<V, std::variant<uint64_t, std::string>>) return arg_type::integer_or_string;
  else static_assert(!sizeof(V), "an argument's member is a text, bool, number, list or map of texts, or variant");
}

}  // namespace args_detail

// An argument of struct S at member M, with the constraints its schema states.
template <typename S, typename M>
struct arg_field : arg_spec {
  M S::*member = nullptr;

  constexpr arg_field required() const {
    return with([](arg_field& f) { f.arg_spec::required = true; });
  }
  constexpr arg_field at_least(double v) const {
    return with([v](arg_field& f) { f.minimum = v; });
  }
  constexpr arg_field at_most(double v) const {
    return with([v](arg_field& f) { f.maximum = v; });
  }
  constexpr arg_field above(double v) const {
    return with([v](arg_field& f) { f.exclusive_minimum = v; });
  }
  constexpr arg_field non_empty() const {
    return with([](arg_field& f) { f.min_length = 1; });
  }
  constexpr arg_field longest(size_t n) const {
    return with([n](arg_field& f) { f.max_length = n; });
  }
  constexpr arg_field matching(std::string_view p) const {
    return with([p](arg_field& f) { f.pattern = p; });
  }
  constexpr arg_field among(std::span<const std::string_view> v) const {
    return with([v](arg_field& f) { f.one_of = v; });
  }
  constexpr arg_field most_items(size_t n) const {
    return with([n](arg_field& f) { f.max_items = n; });
  }
  // A list's items: not empty, matching a pattern (described), one of a set.
  constexpr arg_field items_non_empty() const {
    return with([](arg_field& f) { f.item_min_length = 1; });
  }
  constexpr arg_field items_matching(std::string_view p, std::string_view description) const {
    return with([p, description](arg_field& f) {
      f.item_pattern = p;
      f.item_description = description;
    });
  }
  constexpr arg_field items_among(std::span<const std::string_view> v) const {
    return with([v](arg_field& f) { f.item_one_of = v; });
  }
  // A map's keys.
  constexpr arg_field keys_matching(std::string_view p) const {
    return with([p](arg_field& f) { f.key_pattern = p; });
  }

 private:
  template <typename F>
  constexpr arg_field with(F set) const {
    arg_field f = *this;
    set(f);
    return f;
  }
};

template <typename S, typename M>
constexpr arg_field<S, M> arg(std::string_view name, M S::*member, std::string_view description) {
  arg_field<S, M> f;
  f.name = name;
  f.description = description;
  f.type = args_detail::type_of<M>();
  f.member = member;
  return f;
}

// What arguments a struct has: a table of arguments().
template <typename T>
concept tool_arguments = requires {
  T::arguments();
};

// A tool that takes none.
struct no_args {
  static constexpr auto arguments() { return std::tuple{}; }
};

// The JSON Schema of one argument, and of an object of them (additionalProperties: false).
json property_schema(const arg_spec& a);
json object_schema(std::span<const arg_spec> args);
// Checks `value` against `schema` (the subset of JSON Schema object_schema writes): "" when
// it fits, else a message naming the argument ("argument 'env.A' must be a string...").
std::string check_value(const std::string& path, const json& value, const json& schema);

template <tool_arguments T>
constexpr auto arg_specs() {
  return std::apply([](const auto&... f) { return std::array<arg_spec, sizeof...(f)>{f...}; }, T::arguments());
}

// T's input schema, built once.
template <tool_arguments T>
const json& input_schema_of() {
  static const json schema = [] {
    constexpr auto specs = arg_specs<T>();
    return object_schema(specs);
  }();
  return schema;
}

template <tool_arguments T>
std::string check_arguments_of(const json& args) {
  return check_value("", args, input_schema_of<T>());
}

namespace args_detail {

template <typename M>
void read_value(const json& v, M& out) {
  if constexpr (is_optional<M>) {
    typename M::value_type x{};
    read_value(v, x);
    out = std::move(x);
  } else if constexpr (std::is_same_v<M, std::variant<std::string, int64_t>>) {
    if (v.is_string()) out = v.get<std::string>();
    else out = v.get<int64_t>();
  } else if constexpr (std::is_same_v<M, std::variant<uint64_t, std::string>>) {
    if (v.is_string()) out = v.get<std::string>();
    else out = v.get<uint64_t>();
  } else {
    out = v.get<M>();
  }
}

template <typename T, typename F>
void read_field(const json& args, T& t, const F& field) {
  if (auto it = args.find(std::string(field.name)); it != args.end()) read_value(*it, t.*(field.member));
}

}  // namespace args_detail

// The arguments, checked by check_arguments_of<T> first, as T: a field not given keeps its
// member's default.
template <tool_arguments T>
T parse_arguments(const json& args) {
  T t{};
  std::apply([&](const auto&... f) { (args_detail::read_field(args, t, f), ...); }, T::arguments());
  return t;
}

}  // namespace sbsh::mcp
