// The MCP protocol core, the same for every transport: it takes one parsed JSON-RPC message
// and a sink for the messages that answer it (the response, and progress notifications of
// that request), negotiates the protocol revision, and runs tool calls on worker threads.
//
// Threads: everything here runs on the transport's loop thread except the tool handlers.
// A worker hands its outcome back through `post` (which the transport implements with
// uv/loop_queue.h: an async handle and a locked queue), and the loop thread sends the
// response and joins it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "mcp/jsonrpc.h"
#include "mcp/tools.h"

namespace sbsh::mcp {

inline constexpr std::string_view kModernVersion = "2026-07-28";
// The newest revision of the initialize handshake: the answer to an initialize that asks for
// one not spoken (2026-07-28 included, which has no handshake).
inline constexpr std::string_view kLegacyVersion = "2025-11-25";
// Revisions of the initialize handshake, oldest first: an initialize asking for one of them
// is answered with it, and what that revision lacks is left out of every answer.
inline constexpr std::string_view kLegacyVersions[] = {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"};
bool is_legacy_version(std::string_view v);
// What a 2026-07-28 request's params._meta lacks (its protocolVersion, its clientCapabilities
// object), as the text of an Invalid params error; empty when it lacks nothing.
std::string modern_meta_problem(const json& params);

// What a revision's answers may carry (revisions are dates, which compare as text).
struct revision {
  std::string_view version;
  // Tool annotations (readOnlyHint...), and progress notifications' message: 2025-03-26.
  [[nodiscard]] bool annotations() const { return version >= "2025-03-26"; }
  // outputSchema and structuredContent, and the title of tools and of serverInfo: 2025-06-18.
  [[nodiscard]] bool structured() const { return version >= "2025-06-18"; }
};

// What a stateful (legacy) client negotiated: per stdio process, or per HTTP session.
// A stateless (2026-07-28 over HTTP) request gets a peer_state of its own that lives only
// while handle() runs; `stateless` says so, and such a peer is never remembered by a call.
struct peer_state {
  std::string version;  // empty until initialize; then the revision negotiated
  bool initialized = false;
  bool stateless = false;
};

// Calls running at once, per server: each holds a thread and a connection to sbshd.
inline constexpr size_t kMaxCalls = 64;

// Receives the messages that answer one incoming message. Called on the loop thread only.
// A null message says that the call was cancelled (the client cancelled it, or its HTTP
// session ended): stdio then sends nothing, as the protocol asks, and an HTTP transport ends
// the request it holds open with a whole response.
using sink = std::function<void(const json&)>;

struct server_options {
  std::function<result<client::connection>()> connect;
  std::string version;  // sbsh's, for serverInfo
};

class server {
 public:
  // post: runs a function on the loop thread soon; safe to call from any thread.
  server(server_options opts, std::function<void(std::function<void()>)> post);
  ~server();  // joins every worker (call cancel_all and wait for idle() first)
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Handles one message from the client `owner` (a stdio process, an HTTP connection).
  // Returns false when it answers nothing at all (notifications and responses).
  bool handle(const incoming& m, peer_state& peer, uint64_t owner, sink out);
  // Every call of `owner` is cancelled and its sink dropped (the client went away).
  void cancel_owner(uint64_t owner);
  // Every call made by `peer` is cancelled (an HTTP session ended).
  void cancel_peer(const peer_state& peer);
  void cancel_all();
  // Whether `owner` has calls running.
  [[nodiscard]] bool busy(uint64_t owner) const;
  [[nodiscard]] bool idle() const { return calls_.empty(); }
  // Called once when the last call has finished (set before cancel_all for a clean exit).
  void when_idle(std::function<void()> f) { on_idle_ = std::move(f); }
  // Sends progress notifications of running calls that asked for them; the transport calls
  // it about every 500 ms (output also sends one, at most every 250 ms).
  void tick();

 private:
  struct call;
  json dispatch(const incoming& m, peer_state& peer, bool modern, uint64_t owner, sink& out, bool& deferred);
  json discover_result(bool modern) const;
  json initialize_result(const incoming& m, peer_state& peer) const;
  static revision revision_of(const peer_state& peer, bool modern);
  void start_call(const tool& t, json args, const incoming& m, const peer_state& peer, bool modern, uint64_t owner,
                  sink out);
  void finish(uint64_t key, tool_outcome outcome);
  static void cancel(call& c);
  static void send_progress(call& c);
  static void cancel_and_end(call& c);  // cancel, then tell the sink the request is over

  server_options opts_;
  std::function<void(std::function<void()>)> post_;
  std::map<uint64_t, std::unique_ptr<call>> calls_;
  uint64_t next_key_ = 1;
  std::function<void()> on_idle_;
};

}  // namespace sbsh::mcp
