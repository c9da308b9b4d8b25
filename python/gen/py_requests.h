// The Python methods of the requests that are no more than a request and its reply: sbsh-pygen
// writes them into sbsh/_requests.py, as the mixins _Requests (of Client) and _AsyncRequests
// (of AsyncClient), from the requests' declarations in ipc/messages.h. Each method sends its
// request through the C ABI's generic call (sbsh_request_json, client/request_json.h) and
// converts the reply with the generated record converters (sbsh/_records.py).
//
// Every request the generic call sends has its methods generated, but those in hand_written
// below. A request without an entry here still gets a method: named as the request, taking its
// fields as keyword arguments (those sbshd requires first, without defaults) and returning
// the reply's JSON form as a dict. An entry (py_request<M>) gives it
//   static constexpr std::string_view method = "sessions";  its name
//   static constexpr std::string_view doc = "...";          its docstring
//   using reply = ipc::msg::session_info;                   the reply whose record, or list
//                                                           of records, it returns (the
//                                                           reply's one field); ok: None
//
// The methods that do more than send and convert stay in sbsh/client.py and aio.py: exec and
// the kept commands (streams, the C ABI's result handles), create_session (its structure,
// checks and setup output), remove_session (ok or session_removed), the prunes (seconds
// into milliseconds), the background processes (process handles), the files (buffers and
// descriptors) and status (the socket's path is the library's).
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "client/request_json.h"
#include "python/gen/py_records.h"  // the records' Python names

namespace sbsh::client::py {

template <typename M>
struct py_request {};

namespace msg = ipc::msg;

template <>
struct py_request<msg::session_list> {
  static constexpr std::string_view method = "sessions";
  static constexpr std::string_view doc = "The sessions, as `sbsh session ls --json` lists them.";
  using reply = msg::session_info;
};

template <>
struct py_request<msg::session_show> {
  static constexpr std::string_view method = "session_details";
  static constexpr std::string_view doc =
      R"(One session in detail: its state, definition, last commands and init output.
SessionNotFound when there is none of that name.)";
  using reply = msg::session_detail;
};

template <>
struct py_request<msg::session_restart> {
  static constexpr std::string_view method = "restart_session";
  static constexpr std::string_view doc = "Replaces the session's shell (its state is lost; the definition is kept).";
  using reply = msg::ok;
};

template <>
struct py_request<msg::kept_list> {
  static constexpr std::string_view method = "kept_copies";
  static constexpr std::string_view doc = "The snapshot copies kept after their sessions, oldest first.";
  using reply = msg::kept_info;
};

template <>
struct py_request<msg::kept_prune> {
  static constexpr std::string_view method = "prune_kept_copies";
  static constexpr std::string_view doc =
      "Deletes every kept copy; returns those deleted (without sizes) once they are gone.";
  using reply = msg::kept_info;
};

template <>
struct py_request<msg::env_list> {
  static constexpr std::string_view method = "environments";
  static constexpr std::string_view doc =
      "The environments setups built (create_session's setup), most recently used first.";
  using reply = msg::env_info;
};

template <>
struct py_request<msg::env_remove> {
  static constexpr std::string_view method = "remove_environment";
  static constexpr std::string_view doc = R"(Deletes an environment. While a session is defined with it, Refused (code
"env_in_use") unless force.)";
  using reply = msg::ok;
};

// The requests the generic call sends whose methods are written by hand in client.py and
// aio.py, since they do more than send and convert (see the top). Every other request the
// generic call sends gets its methods generated.
using hand_written = std::tuple<msg::session_rm, msg::session_prune, msg::command_wait, msg::command_kill, msg::status,
                                msg::shutdown, msg::proc_start, msg::proc_list, msg::proc_kill, msg::proc_wait,
                                msg::file_stat, msg::file_remove, msg::file_mkdir, msg::file_move, msg::env_prune>;

template <typename M>
constexpr bool generated() {
  return request_detail::is_generic<M>() && !request_detail::one_of<M>(static_cast<hand_written*>(nullptr));
}

namespace detail {

// A parameter: the field it sends, its annotation and, unless sbshd requires it, its
// default (as Python).
struct py_param {
  std::string field, type, default_value, name;
};

inline std::string py_literal(bool v) { return v ? "True" : "False"; }

// A field's name as a parameter: a Python keyword gets a trailing underscore ("from_").
inline std::string py_name(std::string_view name) {
  constexpr std::string_view kKeywords[] = {"and",      "as",       "assert", "async", "await",  "break",  "class",
                                            "continue", "def",      "del",    "elif",  "else",   "except", "finally",
                                            "for",      "from",     "global", "if",    "import", "in",     "is",
                                            "lambda",   "nonlocal", "not",    "or",    "pass",   "raise",  "return",
                                            "try",      "while",    "with",   "yield", "None",   "True",   "False"};
  for (auto k : kKeywords)
    if (k == name) return fmt::format("{}_", name);
  return std::string(name);
}

template <typename M, typename V>
py_param param_of(std::string_view name, const V& dflt, bool required) {
  py_param p{std::string(name), "Any", "None", py_name(name)};
  if constexpr (std::is_same_v<V, bool>) {
    p.type = "bool";
    p.default_value = py_literal(dflt);
  } else if constexpr (std::is_integral_v<V>) {
    p.type = "int";
    p.default_value = fmt::format("{}", dflt);
  } else if constexpr (std::is_convertible_v<V, std::string_view>) {
    p.type = "str";
    p.default_value = py_str(std::string_view(dflt));
  } else if constexpr (std::is_same_v<V, ipc::str_list> || std::is_same_v<V, std::vector<std::string>>) {
    p.type = "Sequence[str]";
    p.default_value = "()";
  } else if constexpr (json_detail::is_optional<V>::value) {
    p.type = fmt::format("Optional[{}]", param_of<M>(name, typename V::value_type{}, true).type);
  } else if constexpr (std::is_same_v<V, ipc::signal_spec> || std::is_same_v<V, ipc::proc_ref>) {
    p.type = "Union[int, str]";
    p.default_value = "0";
  }
  if (required) p.default_value.clear();
  return p;
}

template <typename M>
std::vector<py_param> params_of() {
  std::vector<py_param> out;
  M dflt{};
  std::apply(
      [&](const auto&... f) {
        auto one = [&](const auto& g) {
          using F = std::decay_t<decltype(g)>;
          if constexpr (
              !requires { F::kBytesOf; } && !requires { g.value; }) {
            out.push_back(param_of<M>(g.name, g.get(dflt), (g.flags & ipc::kRequired) != 0));
          }
        };
        (void)one;  // a request without fields
        (one(f), ...);
      },
      ipc::kTable<M>);
  // Those without a default first, as Python requires.
  std::stable_partition(out.begin(), out.end(), [](const py_param& p) { return p.default_value.empty(); });
  return out;
}

// The return annotation and the conversion of `r`, the reply's JSON form.
struct py_return {
  std::string type, expr;
};

template <typename R>
py_return return_of() {
  if constexpr (std::is_same_v<R, msg::ok>) {
    return {"None", ""};
  } else {
    static_assert(std::tuple_size_v<std::decay_t<decltype(ipc::kTable<R>)>> == 1, "a reply of one field");
    const auto& f = std::get<0>(ipc::kTable<R>);
    using V = typename std::decay_t<decltype(f)>::type;
    std::string get = fmt::format("r.get({})", py_str(f.name));
    if constexpr (json_detail::is_record_list<V>::value) {
      using E = typename V::value_type;
      return {fmt::format("List[{}]", class_name<E>()),
              fmt::format("[{}(d) for d in sequence_of({})]", converter_name<E>(), get)};
    } else if constexpr (ipc::is_record<V>) {
      return {class_name<V>(), fmt::format("{}({} or {{}})", converter_name<V>(), get)};
    } else {
      return {"Any", get};
    }
  }
}

template <typename M>
py_return reply_of() {
  if constexpr (requires { typename py_request<M>::reply; }) return return_of<typename py_request<M>::reply>();
  else return {"Dict[str, Any]", "r"};
}

template <typename M>
std::string method_name() {
  if constexpr (requires { py_request<M>::method; }) return std::string(py_request<M>::method);
  else return std::string(M::kind.name);
}

template <typename M>
std::string doc_of() {
  if constexpr (requires { py_request<M>::doc; }) return std::string(py_request<M>::doc);
  else return fmt::format("Sends the request {} (sbsh-protocol(7)) and returns its reply's JSON form.", M::kind.name);
}

inline std::string signature(const std::vector<py_param>& params) {
  std::string out = "self";
  for (const auto& p : params)
    out += p.default_value.empty() ? fmt::format(", {}: {}", p.name, p.type)
                                   : fmt::format(", {}: {} = {}", p.name, p.type, p.default_value);
  return out;
}

}  // namespace detail

// The method of request M in the class _Requests.
template <typename M>
std::string python_method() {
  auto params = detail::params_of<M>();
  auto ret = detail::reply_of<M>();
  std::string out = fmt::format("    def {}({}) -> {}:\n{}", detail::method_name<M>(), detail::signature(params),
                                ret.type, detail::docstring(detail::doc_of<M>(), "        "));
  std::string fields;
  for (const auto& p : params) fields += fmt::format(", {}: {}", detail::py_str(p.field), p.name);
  std::string request = fmt::format("{{\"type\": {}{}}}", detail::py_str(M::kind.name), fields);
  if (ret.expr.empty()) return out + fmt::format("        self._request({})\n", request);
  return out + fmt::format("        r = self._request({})\n        return {}\n", request, ret.expr);
}

// The same in _AsyncRequests: the sync method, run as AsyncClient runs a call.
template <typename M>
std::string python_async_method() {
  auto params = detail::params_of<M>();
  auto ret = detail::reply_of<M>();
  std::string args;
  for (const auto& p : params) args += (args.empty() ? "" : ", ") + p.name;
  std::string out = fmt::format("    async def {}({}) -> {}:\n{}", detail::method_name<M>(), detail::signature(params),
                                ret.type, detail::docstring(detail::doc_of<M>(), "        "));
  return out + fmt::format("        return await self._run(lambda c, k: c.{}({}), stoppable=False)\n",
                           detail::method_name<M>(), args);
}

// The methods of every request of All that has them generated, in All's order.
template <typename All>
std::string python_methods() {
  return [&]<typename... M>(std::tuple<M...>*) {
    std::string out;
    auto one = [&]<typename X>(X*) {
      if constexpr (generated<X>()) out += "\n" + python_method<X>();
    };
    (one(static_cast<M*>(nullptr)), ...);
    return out;
  }(static_cast<All*>(nullptr));
}
template <typename All>
std::string python_async_methods() {
  return [&]<typename... M>(std::tuple<M...>*) {
    std::string out;
    auto one = [&]<typename X>(X*) {
      if constexpr (generated<X>()) out += "\n" + python_async_method<X>();
    };
    (one(static_cast<M*>(nullptr)), ...);
    return out;
  }(static_cast<All*>(nullptr));
}

}  // namespace sbsh::client::py
