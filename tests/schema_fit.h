// Whether a JSON value fits a JSON Schema of the kind the MCP tools give (type, a list of
// types, properties, required, items, enum): "" when it does, else where and how it does not.
// Stricter than JSON Schema in one way: every key of an object must be among its schema's
// properties, so that a result cannot carry a key its schema does not describe.
#pragma once

#include <algorithm>
#include <string>

namespace sbsh::tests {

template <typename J>
std::string schema_misfit(const J& v, const J& schema, const std::string& at = "$") {
  auto is = [&](const std::string& t) {
    return (t == "null" && v.is_null()) || (t == "string" && v.is_string()) ||
           (t == "integer" && v.is_number_integer()) || (t == "boolean" && v.is_boolean()) ||
           (t == "array" && v.is_array()) || (t == "object" && v.is_object()) || (t == "number" && v.is_number());
  };
  if (schema.contains("type")) {
    const J& t = schema["type"];
    bool ok = t.is_string() ? is(t.template get<std::string>())
                            : std::ranges::any_of(t, [&](const J& x) { return is(x.template get<std::string>()); });
    if (!ok) return at + ": " + v.dump() + " is not of type " + t.dump();
  }
  if (schema.contains("enum") && !v.is_null() && std::ranges::find(schema["enum"], v) == schema["enum"].end())
    return at + ": " + v.dump() + " is not one of " + schema["enum"].dump();
  if (v.is_object() && schema.contains("properties")) {
    const J& props = schema["properties"];
    for (const auto& [key, value] : v.items()) {
      if (!props.contains(key)) return at + "." + key + ": not in the schema";
      std::string m = schema_misfit(value, props[key], at + "." + key);
      if (!m.empty()) return m;
    }
    if (schema.contains("required"))
      for (const auto& key : schema["required"])
        if (!v.contains(key.template get<std::string>()))
          return at + "." + key.template get<std::string>() + ": missing";
  }
  if (v.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < v.size(); ++i) {
      std::string m = schema_misfit(v[i], schema["items"], at + "[" + std::to_string(i) + "]");
      if (!m.empty()) return m;
    }
  }
  return {};
}

}  // namespace sbsh::tests
