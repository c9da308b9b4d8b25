// How a request reaches its handler: server::handle checks the handshake, then routes each
// message type through the table below, made from the list of requests in handlers.h (each
// one's handler is on_NAME, a free function in the file of its protocol group), and checked
// against msg::all when this file compiles.
#include <algorithm>
#include <iterator>
#include <tuple>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "daemon/handlers.h"
#include "ipc/messages.h"

namespace sbsh::daemon {

namespace {

using ipc::errc;
using ipc::msg_type;

using handler_fn = void (*)(server&, client_conn&, ipc::envelope&);
struct handler_entry {
  msg_type type;
  handler_fn fn;
};
constexpr handler_entry kHandlers[] = {
#define SBSH_HANDLER_ROW(name) {msg_type::name, on_##name},
    SBSH_REQUEST_HANDLERS(SBSH_HANDLER_ROW)
#undef SBSH_HANDLER_ROW
};

constexpr bool has_row(msg_type t) {
  return std::any_of(std::begin(kHandlers), std::end(kHandlers), [t](const handler_entry& h) { return h.type == t; });
}

// A request without a row, or a row for what no client sends, stops the build here, naming
// the message (in the instantiation of request_has_a_handler<M>).
template <typename M>
constexpr bool request_has_a_handler() {
  constexpr bool request = M::kind.dir == ipc::route::client_to_daemon;
  static_assert(has_row(M::kind.type) == request,
                "each request of msg::all needs X(name) in SBSH_REQUEST_HANDLERS (daemon/handlers.h), "
                "and only requests have one");
  return true;
}
template <typename... M>
constexpr bool every_request_has_a_handler(std::tuple<M...>*) {
  return (request_has_a_handler<M>() && ...);
}
static_assert(every_request_has_a_handler(static_cast<ipc::msg::all*>(nullptr)));

}  // namespace

// Both messages of exec's stdin go to its one handler.
void on_stdin_data(server& srv, client_conn& c, ipc::envelope& env) { on_stdin(srv, c, env); }
void on_stdin_eof(server& srv, client_conn& c, ipc::envelope& env) { on_stdin(srv, c, env); }

bool server::handles(msg_type t) {
  return std::any_of(std::begin(kHandlers), std::end(kHandlers), [t](const handler_entry& h) { return h.type == t; });
}

void server::handle(client_conn& c, ipc::envelope&& env) {
  msg_type t = env.msg.type();
  if (!c.greeted && t != msg_type::hello) {
    c.send_error(env.msg.id(), errc::handshake_required, "the first message on a connection must be hello");
    return;
  }
  for (const auto& h : kHandlers) {
    if (h.type == t) {
      h.fn(*this, c, env);
      return;
    }
  }
  c.send_error(env.msg.id(), errc::unknown_request,
               fmt::format("message type {} is not a request this sbshd knows", static_cast<uint32_t>(t)));
}

}  // namespace sbsh::daemon
