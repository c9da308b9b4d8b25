// The MCP tools' arguments: the JSON Schema of a declaration (tool_args.h), and the check
// of a call's arguments against it.
#include "mcp/tool_args.h"

#include <algorithm>
#include <cmath>
#include <regex>

#include <fmt/format.h>

namespace sbsh::mcp {

namespace {

// A bound as JSON Schema gives it: a whole number as an integer (604800, not 604800.0).
json number(double d) {
  constexpr double kWhole = 9.0e18;
  if (std::floor(d) == d && std::fabs(d) < kWhole) return static_cast<int64_t>(d);
  return d;
}

json names(std::span<const std::string_view> v) {
  json a = json::array();
  for (auto s : v) a.push_back(s);
  return a;
}

std::string type_name(const json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  return "null";
}

bool has_type(const json& v, std::string_view t) {
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_boolean();
  if (t == "integer")
    return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (t == "number") return v.is_number();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "null") return v.is_null();
  return false;
}

}  // namespace

json property_schema(const arg_spec& a) {
  json p;
  switch (a.type) {
    case arg_type::string: p["type"] = "string"; break;
    case arg_type::boolean: p["type"] = "boolean"; break;
    case arg_type::integer: p["type"] = "integer"; break;
    case arg_type::number: p["type"] = "number"; break;
    case arg_type::strings: {
      json items = {{"type", "string"}};
      if (a.item_min_length) items["minLength"] = *a.item_min_length;
      if (!a.item_pattern.empty()) items["pattern"] = a.item_pattern;
      if (!a.item_one_of.empty()) items["enum"] = names(a.item_one_of);
      if (!a.item_description.empty()) items["description"] = a.item_description;
      p["type"] = "array";
      p["items"] = std::move(items);
      if (a.max_items) p["maxItems"] = *a.max_items;
      break;
    }
    case arg_type::string_map:
      p["type"] = "object";
      p["additionalProperties"] = {{"type", "string"}};
      if (!a.key_pattern.empty()) p["propertyNames"] = {{"pattern", a.key_pattern}};
      break;
    case arg_type::string_or_integer: p["type"] = {"string", "integer"}; break;
    case arg_type::integer_or_string: p["type"] = {"integer", "string"}; break;
  }
  if (a.min_length) p["minLength"] = *a.min_length;
  if (a.max_length) p["maxLength"] = *a.max_length;
  if (!a.pattern.empty()) p["pattern"] = a.pattern;
  if (!a.one_of.empty()) p["enum"] = names(a.one_of);
  if (a.minimum) p["minimum"] = number(*a.minimum);
  if (a.maximum) p["maximum"] = number(*a.maximum);
  if (a.exclusive_minimum) p["exclusiveMinimum"] = number(*a.exclusive_minimum);
  if (!a.description.empty()) p["description"] = a.description;
  return p;
}

json object_schema(std::span<const arg_spec> args) {
  json properties = json::object(), required = json::array();
  for (const auto& a : args) {
    properties[std::string(a.name)] = property_schema(a);
    if (a.required) required.push_back(a.name);
  }
  json s = {{"type", "object"}, {"additionalProperties", false}};
  if (!required.empty()) s["required"] = std::move(required);
  s["properties"] = std::move(properties);
  return s;
}

std::string check_value(const std::string& path, const json& v, const json& schema) {
  if (auto t = schema.find("type"); t != schema.end()) {
    bool fits = false;
    std::string wanted;
    for (const auto& one : t->is_array() ? *t : json::array({*t})) {
      fits = fits || has_type(v, one.get<std::string>());
      wanted += (wanted.empty() ? "" : " or ") + one.get<std::string>();
    }
    if (!fits)
      return fmt::format("argument '{}' must be {} {}, not {}", path, wanted[0] == 'i' ? "an" : "a", wanted,
                         type_name(v));
  }
  if (auto e = schema.find("enum"); e != schema.end() && std::find(e->begin(), e->end(), v) == e->end()) {
    std::vector<std::string> names;
    for (const auto& x : *e) names.push_back(x.get<std::string>());
    std::string list;
    for (size_t i = 0; i < names.size(); ++i) list += (i ? ", " : "") + names[i];
    return fmt::format("argument '{}' must be one of {}", path, list);
  }
  if (v.is_string()) {
    auto s = v.get<std::string>();
    if (schema.value("minLength", 0) > 0 && s.empty()) return fmt::format("argument '{}' must not be empty", path);
    if (auto m = schema.find("maxLength"); m != schema.end() && s.size() > m->get<size_t>())
      return fmt::format("argument '{}' must be at most {} characters", path, m->get<size_t>());
    // libstdc++'s regex recurses per character: a long text is refused before it meets one.
    constexpr size_t kMaxMatched = 1024;
    if (auto p = schema.find("pattern"); p != schema.end()) {
      if (s.size() > kMaxMatched) return fmt::format("argument '{}' must be at most {} bytes", path, kMaxMatched);
      if (!std::regex_search(s, std::regex(p->get<std::string>())))
        return fmt::format("argument '{}' must match {}", path, p->get<std::string>());
    }
  }
  if (v.is_number()) {
    double d = v.get<double>();
    if (auto m = schema.find("exclusiveMinimum"); m != schema.end() && !(d > m->get<double>()))
      return fmt::format("argument '{}' must be more than {}", path, m->dump());
    if (auto m = schema.find("minimum"); m != schema.end() && d < m->get<double>())
      return fmt::format("argument '{}' must be at least {}", path, m->dump());
    if (auto m = schema.find("maximum"); m != schema.end() && d > m->get<double>())
      return fmt::format("argument '{}' must be at most {}", path, m->dump());
  }
  if (v.is_array()) {
    if (auto items = schema.find("items"); items != schema.end())
      for (size_t i = 0; i < v.size(); ++i)
        if (auto e = check_value(fmt::format("{}[{}]", path, i), v[i], *items); !e.empty()) return e;
  }
  if (v.is_object()) {
    const json props = schema.value("properties", json::object());
    for (const auto& req : schema.value("required", json::array()))
      if (!v.contains(req.get<std::string>()))
        return fmt::format("argument '{}' is missing",
                           path.empty() ? req.get<std::string>() : path + "." + req.get<std::string>());
    for (const auto& [key, x] : v.items()) {
      const std::string& k = key;
      // Names quoted in a message are the client's text: a long one is cut.
      std::string shown = k.size() <= 64 ? k : k.substr(0, 64) + "...";
      std::string sub = path.empty() ? shown : path + "." + shown;
      if (auto p = props.find(k); p != props.end()) {
        if (auto e = check_value(sub, x, *p); !e.empty()) return e;
        continue;
      }
      auto extra = schema.find("additionalProperties");
      if (extra == schema.end()) continue;
      if (extra->is_boolean()) {
        if (!extra->get<bool>()) {
          std::string known;
          for (const auto& [name, p] : props.items()) known += (known.empty() ? "" : ", ") + name;
          return known.empty() ? fmt::format("unknown argument '{}': it takes none", sub)
                               : fmt::format("unknown argument '{}': it takes {}", sub, known);
        }
        continue;
      }
      if (auto names = schema.find("propertyNames"); names != schema.end())
        if (auto e = check_value(sub, k, *names); !e.empty())
          return k.size() > 1024 ? fmt::format("argument '{}' has a key of more than 1024 bytes", path)
                                 : fmt::format("argument '{}' has a key '{}' that must match {}", path, shown,
                                               names->value("pattern", std::string()));
      if (auto e = check_value(sub, x, *extra); !e.empty()) return e;
    }
  }
  return "";
}

}  // namespace sbsh::mcp
