// JSON inside libsbsh's plan code: the tree the plan parser checks (JSON as it is, YAML
// converted to it) and the writer of the report and the events. Internal: not installed.
//
// nlohmann-json and libyaml stay out of libsbsh.so's interface: the plan sources are built
// with hidden visibility (the top-level CMakeLists.txt), so their instantiations are not exported,
// and only what sbsh/plan.h marks SBSH_API is.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "client/json.h"
#include "sbsh/plan.h"

namespace sbsh::client {

// The client's one JSON value (client/json.h), ordered: fields are written, and a plan's
// problems found, in document order. dump_json writes it.
using plan_json = json_value;

// The event `name` (run_event::name) for the state of `r`: stage and command are indices
// into it (-1 where the event has none), now_ms the event's time.
std::string event_json(std::string_view name, int stage, int command, const run_report& r, int64_t now_ms);

// YAML text as the JSON tree parse_plan checks: every scalar becomes a string (YAML's plain
// scalars have no type of their own until a field gives them one), `~` and empty values
// null. Errors have code "invalid_plan" and say where the YAML is malformed.
result<plan_json> yaml_to_json(std::string_view text);

}  // namespace sbsh::client
