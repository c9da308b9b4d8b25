// YAML plans, read with libyaml and converted to the JSON tree that parse_plan checks, so that
// a YAML plan and a JSON plan go through the same checks and give the same plan. libyaml is
// C with an ABI stable for many years: libsbsh.so links it without tying its users to a C++
// library's versions.
#include <yaml.h>

#include <memory>
#include <string>

#include <fmt/format.h>

#include "ipc/protocol.h"
#include "plans/plan_json.h"

namespace sbsh::client {

namespace {

// Aliases let a few lines of YAML stand for an exponentially large tree ("billion laughs"),
// or, anchored on a list that holds them, an endless one: a plan has nowhere near this many
// values nor this many levels, so a tree past either is refused, not built.
constexpr size_t kMaxValues = 100'000;
constexpr int kMaxDepth = 1000;

error yaml_error(const yaml_mark_t* at, std::string_view what) {
  if (at == nullptr) return make_error(ipc::errc::invalid_plan, fmt::format("invalid YAML: {}", what));
  return make_error(ipc::errc::invalid_plan,
                    fmt::format("invalid YAML at line {}, column {}: {}", at->line + 1, at->column + 1, what));
}

// A plain scalar that YAML reads as null, as `key:` with nothing after it does.
bool is_null(const yaml_node_t& n) {
  if (n.data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return false;
  std::string_view v(reinterpret_cast<const char*>(n.data.scalar.value), n.data.scalar.length);
  return v.empty() || v == "~" || v == "null" || v == "Null" || v == "NULL";
}

struct converter {
  yaml_document_t* doc;
  size_t budget = kMaxValues;

  result<plan_json> convert(yaml_node_t* n, int depth) {  // NOLINT(misc-no-recursion): bounded by kMaxDepth
    if (n == nullptr) return plan_json(nullptr);
    if (budget == 0)
      return make_error(ipc::errc::invalid_plan,
                        fmt::format("the plan has more than {} values (do YAML aliases expand it?)", kMaxValues));
    if (depth > kMaxDepth)
      return yaml_error(&n->start_mark,
                        fmt::format("nested more than {} levels deep (is an alias inside what it names?)", kMaxDepth));
    --budget;
    switch (n->type) {
      case YAML_SCALAR_NODE:
        if (is_null(*n)) return plan_json(nullptr);
        return plan_json(std::string(reinterpret_cast<const char*>(n->data.scalar.value), n->data.scalar.length));
      case YAML_SEQUENCE_NODE: {
        plan_json a = plan_json::array();
        for (auto* i = n->data.sequence.items.start; i < n->data.sequence.items.top; ++i) {
          auto v = convert(yaml_document_get_node(doc, *i), depth + 1);
          if (!v) return v;
          a.push_back(std::move(*v));
        }
        return a;
      }
      case YAML_MAPPING_NODE: {
        plan_json o = plan_json::object();
        for (auto* p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; ++p) {
          yaml_node_t* k = yaml_document_get_node(doc, p->key);
          if (k == nullptr || k->type != YAML_SCALAR_NODE)
            return yaml_error(k != nullptr ? &k->start_mark : nullptr, "a key must be a name, not a list or a mapping");
          std::string key(reinterpret_cast<const char*>(k->data.scalar.value), k->data.scalar.length);
          if (o.contains(key)) return yaml_error(&k->start_mark, fmt::format("\"{}\" is given twice", key));
          auto v = convert(yaml_document_get_node(doc, p->value), depth + 1);
          if (!v) return v;
          o[key] = std::move(*v);
        }
        return o;
      }
      case YAML_NO_NODE: break;
    }
    return plan_json(nullptr);
  }
};

}  // namespace

result<plan_json> yaml_to_json(std::string_view text) {
  yaml_parser_t parser;
  if (yaml_parser_initialize(&parser) == 0) return make_error(ipc::errc::invalid_plan, "invalid YAML: out of memory");
  std::unique_ptr<yaml_parser_t, void (*)(yaml_parser_t*)> parser_owner(&parser, yaml_parser_delete);
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  // The first document, as a plan file holds one.
  yaml_document_t doc;
  if (yaml_parser_load(&parser, &doc) == 0) {
    std::string what = parser.problem != nullptr ? parser.problem : "it cannot be read";
    if (parser.context != nullptr) what = fmt::format("{} ({})", what, parser.context);
    return yaml_error(&parser.problem_mark, what);
  }
  std::unique_ptr<yaml_document_t, void (*)(yaml_document_t*)> doc_owner(&doc, yaml_document_delete);
  converter c{&doc};
  return c.convert(yaml_document_get_root_node(&doc), 0);
}

}  // namespace sbsh::client
