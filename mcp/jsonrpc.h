// JSON-RPC 2.0 as MCP uses it: one message per text (a stdio line or an HTTP body), checked
// for shape before the protocol core sees it, and the error objects sent back.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace sbsh::mcp {

using json = nlohmann::json;

// JSON-RPC's codes, those MCP allocates (-32020 to -32099), and LSP's for a cancel.
enum error_code : int {
  kParseError = -32700,
  kInvalidRequest = -32600,
  kMethodNotFound = -32601,
  kInvalidParams = -32602,
  kInternalError = -32603,
  kHeaderMismatch = -32020,
  // The answer an HTTP request held open gets when its call is cancelled (as LSP's).
  kRequestCancelled = -32800,
  kUnsupportedProtocolVersion = -32022,
};

// The most a client may send in one message (a stdio line, an HTTP body).
inline constexpr size_t kMaxMessage = 4u << 20;

enum class message_kind { request, notification, response };

struct incoming {  // NOLINT(bugprone-exception-escape): moving json does not throw
  message_kind kind = message_kind::request;
  json message;  // the whole object
  json id;       // requests and responses; null for notifications
  std::string method;
  json params;  // an object (empty when absent)
};

json error_response(const json& id, int code, std::string_view message, json data = nullptr);
json result_response(const json& id, json result);
json notification(std::string_view method, json params);

// Parses one message. Without a value: the error response to send (id null when the text
// did not say which request it was), for malformed JSON (-32700), a batch, or an object that
// is no JSON-RPC 2.0 request, notification or response (-32600).
struct parse_outcome {  // NOLINT(bugprone-exception-escape): moving json does not throw
  std::optional<incoming> message;
  json error;
};
parse_outcome parse_message(std::string_view text);

// One line of JSON (no raw newline can appear in a dump).
std::string to_line(const json& j);

}  // namespace sbsh::mcp
