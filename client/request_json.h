// The generic call: any request declared in ipc/messages.h that sbshd answers with one
// frame, written as its JSON form {"type": NAME, FIELD: VALUE...} and answered with the
// reply's JSON form (client/json_form.h), as neovim's API is one call plus generated
// bindings. The C ABI's sbsh_request_json and the Python package's generated methods
// (python/gen/py_requests.h) go through it, so that a request added to ipc/messages.h is
// reachable from them with no code of its own.
//
// A request is checked against its declaration before anything is sent: an unknown type, a
// field the request does not have, a value of the wrong type or a required field missing is
// an error (code "usage") that names it. The fields are read by the same decoder sbshd uses
// (ipc/wire.h), so they follow the same rules ("signal": a number or a name, and so on).
//
// Internal to libsbsh: not installed.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "client/json.h"
#include "ipc/messages.h"
#include "sbsh/client.h"

namespace sbsh::client {

// The names of the requests the generic call sends, in the order of their numbers. Those it
// does not send have calls of their own: their answers are more than one frame (exec's
// output, a setup's output, logs, a listing in pieces) or carry descriptors.
std::vector<std::string_view> generic_requests();

// The frame of request `request` under `id`, once checked (see above); nothing is sent.
result<std::string> request_frame(const json_value& request, uint64_t id);

// Sends `request` and returns the JSON form of sbshd's reply: {} for ok, else the reply
// message's fields ({"sessions": [...]} for session_list). A refusal is its error.
result<json_value> request_json(connection& conn, const json_value& request);

// The same from and to JSON text; text that is not JSON is an error saying where.
result<std::string> request_json(connection& conn, std::string_view request_text);

// ---- Over any list of messages (msg::all in the library; a test adds its own) ----------

namespace request_detail {

namespace msg = ipc::msg;

// The requests the generic call does not send: their answers are more than one frame or
// carry descriptors, and each has a call of its own.
using own_call = std::tuple<msg::hello, msg::session_create, msg::exec, msg::stdin_data, msg::stdin_eof, msg::cancel,
                            msg::release, msg::command_logs, msg::command_input, msg::proc_logs, msg::file_read,
                            msg::file_write, msg::file_data, msg::file_close, msg::file_list, msg::lease>;

template <typename M, typename... O>
constexpr bool one_of(std::tuple<O...>* /*list*/) {
  return (std::is_same_v<M, O> || ...);
}

template <typename M>
constexpr bool is_generic() {
  return M::kind.dir == ipc::route::client_to_daemon && M::kind.has_id && !one_of<M>(static_cast<own_call*>(nullptr));
}

// Calls f(M*) for each message of All until one returns true.
template <typename All, typename F>
bool each_message(F&& f) {
  return [&]<typename... M>(std::tuple<M...>*) {
    return (f(static_cast<M*>(nullptr)) || ...);
  }(static_cast<All*>(nullptr));
}

error usage(std::string message);
std::string listed(const std::vector<std::string_view>& names);
// A JSON value as msgpack, as sbshd's decoder reads it.
void pack_json(ipc::wire_packer& pk, const json_value& v);
// The checks that do not depend on the message: `request` is an object with a type.
result<std::string_view> type_of(const json_value& request);

template <typename M>
std::vector<std::string_view> field_names() {
  std::vector<std::string_view> names;
  std::apply([&](const auto&... f) { (names.push_back(f.name), ...); }, ipc::kTable<M>);
  return names;
}

template <typename M>
result<std::string> frame_of(const json_value& request, uint64_t id) {
  auto names = field_names<M>();
  ipc::frame_builder fb(M::kind.type, id);
  for (const auto& [key, value] : request.items()) {
    if (key == "type") continue;
    if (std::find(names.begin(), names.end(), key) == names.end())
      return usage(fmt::format("request '{}' has no field '{}' (its fields: {})", M::kind.name, key, listed(names)));
    pack_json(fb.field(key), value);
  }
  std::string frame = fb.take();
  auto m = ipc::message::parse(frame.data() + 4, frame.size() - 4);
  if (!m) return usage(fmt::format("request '{}': {}", M::kind.name, m.err().message));
  // The decoder sbshd reads it with: a value of the wrong type or a required field missing
  // is an error naming the field. The frame sent is written again from what was read.
  auto req = ipc::decode<M>(*m);
  if (!req) return usage(fmt::format("request '{}': {}", M::kind.name, req.err().message));
  return ipc::encode(*req, id);
}

template <typename All>
std::vector<std::string_view> generic_requests_in() {
  std::vector<std::string_view> names;
  each_message<All>([&]<typename M>(M*) {
    if constexpr (is_generic<M>()) names.push_back(M::kind.name);
    return false;
  });
  return names;
}

template <typename All>
result<std::string> request_frame_in(const json_value& request, uint64_t id) {
  auto type = type_of(request);
  if (!type) return type.err();
  std::optional<result<std::string>> out;
  each_message<All>([&]<typename M>(M*) {
    if (M::kind.name != *type) return false;
    if constexpr (is_generic<M>()) {
      out.emplace(frame_of<M>(request, id));
    } else if constexpr (M::kind.dir == ipc::route::client_to_daemon) {
      out.emplace(
          usage(fmt::format("request '{}' is not sent by the generic call: its answer is more than one "
                            "reply or carries descriptors, and it has a call of its own",
                            *type)));
    } else {
      return false;
    }
    return true;
  });
  if (!out)
    return usage(
        fmt::format("unknown request type '{}' (the requests: {})", *type, listed(generic_requests_in<All>())));
  return std::move(*out);
}

}  // namespace request_detail

}  // namespace sbsh::client
