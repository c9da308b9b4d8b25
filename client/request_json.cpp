// The generic call (request_json.h): a request's JSON form checked against its declaration,
// sent, and the reply's JSON form.
#include "client/request_json.h"

#include "client/connection_impl.h"
#include "client/json_form.h"

namespace sbsh::client {

// The connection's inside, for the generic call (a friend of connection).
struct generic_request {
  static connection::impl& of(connection& c) { return *c.p_; }
};

namespace request_detail {

error usage(std::string message) { return make_error(ipc::errc::usage, std::move(message)); }

std::string listed(const std::vector<std::string_view>& names) {
  return names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "));
}

void pack_json(ipc::wire_packer& pk, const json_value& v) {
  switch (v.type()) {
    case json_value::value_t::boolean: pk.pack(v.get<bool>()); break;
    case json_value::value_t::number_unsigned: pk.pack_uint64(v.get<uint64_t>()); break;
    case json_value::value_t::number_integer: pk.pack_int64(v.get<int64_t>()); break;
    case json_value::value_t::number_float: pk.pack_double(v.get<double>()); break;
    case json_value::value_t::string: pk.pack_text(v.get_ref<const std::string&>()); break;
    case json_value::value_t::array:
      pk.pack_array(static_cast<uint32_t>(v.size()));
      for (const auto& x : v) pack_json(pk, x);
      break;
    case json_value::value_t::object:
      pk.pack_map(static_cast<uint32_t>(v.size()));
      for (const auto& [key, x] : v.items()) {
        pk.pack_text(key);
        pack_json(pk, x);
      }
      break;
    default: pk.pack_nil(); break;  // null (binary and discarded: the parser makes neither)
  }
}

result<std::string_view> type_of(const json_value& request) {
  if (!request.is_object())
    return usage(R"(a request is a JSON object naming its type: {"type": "session_show", "name": "build"}, say)");
  auto type = request.find("type");
  if (type == request.end() || !type->is_string())
    return usage(R"(a request names its type as a string: {"type": "session_list"}, say)");
  return std::string_view(type->get_ref<const std::string&>());
}

namespace {

// Whether json_form_of() can show a value of type T.
template <typename T>
constexpr bool formable() {
  if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string> || std::is_same_v<T, std::string_view> ||
                std::is_same_v<T, ipc::str_list>) {
    return true;
  } else if constexpr (json_detail::is_optional<T>::value || json_detail::is_vector<T>::value) {
    return formable<typename T::value_type>();
  } else if constexpr (ipc::is_record<T> || ipc::has_member_table<T>) {
    return std::apply(
        [](const auto&... f) {
          auto one = [](const auto& g) {
            using F = std::decay_t<decltype(g)>;
            if constexpr (requires { F::kBytesOf; }) return true;
            else return formable<typename F::type>();
          };
          (void)one;  // a table without fields
          return (true && ... && one(f));
        },
        ipc::kTable<T>);
  } else {
    return false;
  }
}

template <typename M>
result<json_value> form_of_reply(const ipc::message& m) {
  if constexpr (formable<M>()) {
    auto r = read_reply<M>(m);
    if (!r) return r.err();
    return json_form_of(*r);
  } else {
    return make_error(ipc::errc::protocol, fmt::format("sbshd answered {}, which has no JSON form", M::kind.name));
  }
}

result<json_value> reply_json(const ipc::message& m) {
  std::optional<result<json_value>> out;
  each_message<msg::all>([&]<typename M>(M*) {
    if constexpr (M::kind.dir == ipc::route::daemon_to_client) {
      if (M::kind.type != m.type()) return false;
      if constexpr (std::is_same_v<M, msg::error>) out.emplace(error_from(m, "sbshd refused the request"));
      else out.emplace(form_of_reply<M>(m));
      return true;
    }
    return false;
  });
  if (!out)
    return make_error(ipc::errc::protocol, fmt::format("sbshd answered {}, not a reply", ipc::type_name(m.type())));
  return std::move(*out);
}

}  // namespace

}  // namespace request_detail

std::vector<std::string_view> generic_requests() { return request_detail::generic_requests_in<ipc::msg::all>(); }

result<std::string> request_frame(const json_value& request, uint64_t id) {
  return request_detail::request_frame_in<ipc::msg::all>(request, id);
}

result<ipc::envelope> exchange(connection& conn, const std::function<result<std::string>(uint64_t id)>& frame_of) {
  auto& p = generic_request::of(conn);
  uint64_t id = p.next_id;
  auto frame = frame_of(id);
  if (!frame) return frame.err();
  ++p.next_id;
  return p.call(*frame, id);
}

result<json_value> request_json(connection& conn, const json_value& request) {
  auto env = exchange(conn, [&](uint64_t id) { return request_frame(request, id); });
  if (!env) return env.err();
  return request_detail::reply_json(env->msg);
}

result<std::string> request_json(connection& conn, std::string_view request_text) {
  json_value request;
  try {
    request = json_value::parse(request_text);
  } catch (const json_value::parse_error& e) {
    return request_detail::usage(fmt::format("the request is not JSON: {}", e.what()));
  }
  auto r = request_json(conn, request);
  if (!r) return r.err();
  return dump_json(*r);
}

}  // namespace sbsh::client
