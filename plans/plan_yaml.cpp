// YAML plans, read with yaml-cpp and converted to the JSON tree that parse_plan checks, so
// that a YAML plan and a JSON plan go through the same checks and give the same plan.
#include <yaml-cpp/yaml.h>

#include <string>

#include <fmt/format.h>

#include "plans/plan_json.h"
#include "ipc/protocol.h"

namespace sbsh::client {

namespace {

// Aliases let a few lines of YAML stand for an exponentially large tree ("billion laughs"):
// a plan has nowhere near this many values, so a tree past it is refused, not built.
constexpr size_t kMaxValues = 100'000;

error yaml_error(const YAML::Mark& at, std::string_view what) {
  if (at.is_null()) return make_error(ipc::errc::invalid_plan, fmt::format("invalid YAML: {}", what));
  return make_error(ipc::errc::invalid_plan,
                    fmt::format("invalid YAML at line {}, column {}: {}", at.line + 1, at.column + 1, what));
}

// Recursion is bounded: yaml-cpp refuses documents nested deeper than 2000 levels.
result<plan_json> convert(const YAML::Node& n, size_t& budget) {
  if (budget == 0)
    return make_error(ipc::errc::invalid_plan,
                      fmt::format("the plan has more than {} values (do YAML aliases expand it?)", kMaxValues));
  --budget;
  switch (n.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null: return plan_json(nullptr);
    case YAML::NodeType::Scalar: return plan_json(n.Scalar());
    case YAML::NodeType::Sequence: {
      plan_json a = plan_json::array();
      for (const auto& e : n) {
        auto v = convert(e, budget);
        if (!v) return v;
        a.push_back(std::move(*v));
      }
      return a;
    }
    case YAML::NodeType::Map: {
      plan_json o = plan_json::object();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar()) return yaml_error(kv.first.Mark(), "a key must be a name, not a list or a mapping");
        const std::string& key = kv.first.Scalar();
        if (o.contains(key)) return yaml_error(kv.first.Mark(), fmt::format("\"{}\" is given twice", key));
        auto v = convert(kv.second, budget);
        if (!v) return v;
        o[key] = std::move(*v);
      }
      return o;
    }
  }
  return plan_json(nullptr);
}

}  // namespace

result<plan_json> yaml_to_json(std::string_view text) {
  try {
    YAML::Node root = YAML::Load(std::string(text));
    size_t budget = kMaxValues;
    return convert(root, budget);
  } catch (const YAML::Exception& e) {
    return yaml_error(e.mark, e.msg);
  } catch (const std::exception& e) {
    return make_error(ipc::errc::invalid_plan, fmt::format("invalid YAML: {}", e.what()));
  }
}

}  // namespace sbsh::client
