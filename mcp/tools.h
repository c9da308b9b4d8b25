// The MCP tools: their names, descriptions, input and output JSON Schemas, and what runs
// them. Each runs on a worker thread of its own with its own connection to sbshd, and
// returns the record the CLI's --json prints (client/json.h), as structuredContent.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "mcp/jsonrpc.h"
#include "sbsh/client.h"

namespace sbsh::mcp {

// What a tool gets besides its arguments.
struct tool_context {
  // A connection to sbshd, made as the CLI's global options say (auto-start, -S, -H, --dial).
  std::function<result<client::connection>()> connect;
  // Readable when the call is cancelled: exec's signal_fd (a canceller's), logs' cancel_fd.
  int cancel_fd = -1;
  // Told the descriptor of the connection while a call that has no cancel descriptor of its
  // own (wait) blocks on it, and -1 after; a cancel shuts it down.
  std::function<void(int)> blocking_on;
  // Called as a running command produces output (on the worker thread): counts it for
  // progress notifications and may send one (at most every 250 ms).
  std::function<void(size_t)> output_seen;
  // The call carries a progress token: it may wait longer than a host's minute, since
  // progress notifications keep it alive.
  bool has_progress = false;
};

// A tool's answer. structured empty: sbsh refused or failed (message says why), sent as an
// error result with text only, since it has not the shape of the output schema. text: the
// result's plain rendering for a model, when the tool makes one (else the JSON is the text).
struct tool_outcome {  // NOLINT(bugprone-exception-escape): moving json does not throw
  json structured;
  bool is_error = false;
  std::string message;
  std::string text;
};

struct tool {
  std::string_view name;
  std::string_view description;
  const json& (*input)();  // the input schema, derived from the arguments' struct
  // Parses the arguments, which check_arguments has let through, and runs the tool.
  tool_outcome (*run)(const json& args, tool_context& ctx);
  json (*output)();  // the output schema, derived from the record returned (mcp/results.h)
};

// Every tool, in the order tools/list gives them.
std::span<const tool> tools();
const tool* find_tool(std::string_view name);
// The tools/list entry of each, built once.
const json& tool_list();

// How long run_command and await_command wait before answering (wait_seconds, default 30 s):
// a host gives up on a call that stays silent for about a minute (and its cancel then stops
// the command), so at most kMaxSilentWait unless the call has a progress token, whose
// notifications keep it alive.
inline constexpr std::chrono::milliseconds kMaxSilentWait{50000};
std::chrono::milliseconds wait_limit(const std::optional<double>& wait_seconds, bool has_progress);

// Checks arguments against the tool's input schema: "" when they fit, else a message that
// names the argument and says what it takes.
std::string check_arguments(const tool& t, const json& args);

}  // namespace sbsh::mcp
