// JSON-RPC 2.0 framing rules: what makes a request, a notification or a response.
#include "mcp/jsonrpc.h"

namespace sbsh::mcp {

json error_response(const json& id, int code, std::string_view message, json data) {
  json err = {{"code", code}, {"message", std::string(message)}};
  if (!data.is_null()) err["data"] = std::move(data);
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(err)}};
}

json result_response(const json& id, json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

json notification(std::string_view method, json params) {
  return {{"jsonrpc", "2.0"}, {"method", std::string(method)}, {"params", std::move(params)}};
}

std::string to_line(const json& j) {
  // Invalid UTF-8 (which nlohmann would refuse to dump) becomes U+FFFD.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

parse_outcome parse_message(std::string_view text) {
  parse_outcome out;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    out.error = error_response(nullptr, kParseError, "Parse error: the message is not valid JSON");
    return out;
  }
  auto invalid = [&](std::string_view why, const json& id = nullptr) {
    out.error = error_response(id, kInvalidRequest, std::string("Invalid Request: ") + std::string(why));
    return out;
  };
  if (j.is_array()) return invalid("batches are not part of MCP; send one message at a time");
  if (!j.is_object()) return invalid("a message is a JSON object");
  json id = nullptr;
  bool has_id = j.contains("id");
  if (has_id) {
    const json& v = j["id"];
    if (!v.is_string() && !v.is_number_integer()) return invalid("\"id\" must be a string or an integer");
    id = v;
  }
  auto version = j.find("jsonrpc");
  if (version == j.end() || *version != "2.0") return invalid(R"("jsonrpc" must be "2.0")", id);
  incoming m;
  auto method = j.find("method");
  if (method == j.end()) {
    if (!has_id || (!j.contains("result") && !j.contains("error")))
      return invalid(R"(a message needs "method" (a request or notification) or "result"/"error" (a response))", id);
    m.kind = message_kind::response;
  } else {
    if (!method->is_string()) return invalid("\"method\" must be a string", id);
    m.method = method->get<std::string>();
    m.kind = has_id ? message_kind::request : message_kind::notification;
    if (j.contains("params")) {
      if (!j["params"].is_object()) return invalid("\"params\" must be an object", id);
      m.params = j["params"];
    } else {
      m.params = json::object();
    }
  }
  m.id = id;
  m.message = std::move(j);
  out.message = std::move(m);
  return out;
}

}  // namespace sbsh::mcp
