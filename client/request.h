// The typed generic call: a request declared in ipc/messages.h that sbshd answers with one
// frame, sent from its struct, and its reply read as the struct declared for it. The
// library's methods for such requests and the CLI's verbs all go through it, so that a new
// request needs no method of its own: its verb calls request<msg::REPLY>(conn,
// msg::NAME{...}). The generic call from JSON (client/request_json.h) shares its exchange.
//
// Internal to libsbsh: not installed.
#pragma once

#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ipc/messages.h"
#include "ipc/socket_io.h"
#include "sbsh/client.h"

namespace sbsh::client {

// Reads reply `m` as a Reply; a malformed one is a protocol error.
template <typename Reply>
result<Reply> read_reply(const ipc::message& m) {
  auto r = ipc::decode_as<Reply>(m);
  if (!r) return make_error(ipc::errc::protocol, fmt::format("sbshd's answer is wrong: {}", r.err().message));
  return r;
}

// Sends the frame `frame_of` writes for the connection's next request id (nothing when it
// gives an error, which is returned) and returns the reply to it; an error frame is its error.
result<ipc::envelope> exchange(connection& conn, const std::function<result<std::string>(uint64_t id)>& frame_of);

// Sends `req` and gives what `take` makes of its reply, read as Reply, while the reply's
// bytes are alive: a member pointer gives that member (a listing's list), moved out, and a
// function may read the views a reply holds into its frame.
template <typename Reply, typename Request, typename Take>
auto request(connection& conn, const Request& req, Take take)
    -> result<std::remove_cvref_t<std::invoke_result_t<Take, Reply&&>>> {
  static_assert(Request::kind.dir == ipc::route::client_to_daemon && Reply::kind.dir == ipc::route::daemon_to_client);
  auto env = exchange(conn, [&](uint64_t id) -> result<std::string> { return ipc::encode(req, id); });
  if (!env) return env.err();
  auto r = read_reply<Reply>(env->msg);
  if (!r) return r.err();
  return std::invoke(take, std::move(*r));
}

// Sends `req` and returns its reply, read as Reply; Reply must hold no views (they would
// outlive the reply's bytes): its records are owned.
template <typename Reply, typename Request>
result<Reply> request(connection& conn, const Request& req) {
  return request<Reply>(conn, req, [](Reply&& r) { return std::move(r); });
}

// What the library's methods, and the CLI's verbs, make of the replies that are not as they
// are the record a caller gets: sbshd's status, a session's detail (its definition named as
// it), the names a prune read from the reply's frame.
daemon_status daemon_status_of(ipc::msg::status_reply&& r);
session_detail detail_of(ipc::msg::session_detail&& r);
std::vector<std::string> pruned_names(ipc::msg::session_pruned&& r);

// A request answered with ok.
template <typename Request>
sbsh::status request_ok(connection& conn, const Request& req) {
  auto r = request<ipc::msg::ok>(conn, req);
  if (!r) return r.err();
  return ok_status();
}

}  // namespace sbsh::client
