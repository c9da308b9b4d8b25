// The protocol core: revision negotiation, the methods, and tool calls on worker threads.
//
// Two revisions are spoken, chosen by what each request carries:
// - 2026-07-28 (modern): stateless. Every request names its revision in
//   params._meta["io.modelcontextprotocol/protocolVersion"]; every result has resultType;
//   server/discover says what is supported; a revision not spoken gets -32022 with data
//   {requested, supported}.
// - 2025-11-25, 2025-06-18, 2025-03-26 and 2024-11-05 (legacy): an initialize handshake per
//   stdio process or HTTP session. An initialize asking for one of them is answered with it,
//   and every answer then carries only what that revision defines (struct revision): no
//   outputSchema, structuredContent or titles before 2025-06-18, no tool annotations or
//   progress message before 2025-03-26. One asking for another is answered with 2025-11-25,
//   as the negotiation rules say (the client then decides whether it speaks it).
#include "mcp/server.h"

#include <sys/socket.h>

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

namespace sbsh::mcp {

namespace {

constexpr std::string_view kMetaVersion = "io.modelcontextprotocol/protocolVersion";
constexpr int64_t kToolsTtlMs = 3600000;  // the tool table changes only with the binary

json supported_versions() {
  json v = json::array({kModernVersion});
  for (auto it = std::rbegin(kLegacyVersions); it != std::rend(kLegacyVersions); ++it) v.push_back(*it);
  return v;
}

json server_info(const std::string& version, revision rev) {
  json info = {{"name", "sbsh"}, {"version", version}};
  if (rev.structured()) info["title"] = "sbsh persistent shells";
  return info;
}

// The tools/list entries as `rev` defines them, built once per revision.
const json& tools_for(revision rev) {
  static std::map<std::string, json, std::less<>> built;  // the loop thread's only
  auto it = built.find(rev.version);
  if (it != built.end()) return it->second;
  json list = tool_list();
  for (auto& t : list) {
    if (!rev.annotations()) {
      t.erase("annotations");
    } else if (!rev.structured() && t.contains("annotations") && t.contains("title")) {
      // 2025-03-26 has a tool's title only among its annotations.
      t["annotations"]["title"] = t["title"];
    }
    if (!rev.structured()) {
      t.erase("outputSchema");
      t.erase("title");
    }
  }
  return built.emplace(std::string(rev.version), std::move(list)).first->second;
}

constexpr std::string_view kInstructions =
    "sbsh runs shell commands in persistent bash sessions: cd, exported variables and functions carry over from "
    "one run_command to the next in the same session. Exit codes, stdout and stderr are exact; timeouts stop the "
    "whole process tree and keep the shell. Use start_process for servers and watchers that must keep running.";

}  // namespace

bool is_legacy_version(std::string_view v) {
  return std::find(std::begin(kLegacyVersions), std::end(kLegacyVersions), v) != std::end(kLegacyVersions);
}

std::string modern_meta_problem(const json& params) {
  auto meta = params.find("_meta");
  const char* missing = nullptr;
  if (meta == params.end() || !meta->is_object()) missing = "params._meta";
  else if (auto v = meta->find(kMetaVersion); v == meta->end() || !v->is_string())
    missing = "params._meta[\"io.modelcontextprotocol/protocolVersion\"]";
  else if (auto c = meta->find("io.modelcontextprotocol/clientCapabilities"); c == meta->end() || !c->is_object())
    missing = "params._meta[\"io.modelcontextprotocol/clientCapabilities\"] (an object)";
  if (missing == nullptr) return {};
  return fmt::format("Invalid params: a {} request carries {}", kModernVersion, missing);
}

struct server::call {
  json id;
  uint64_t owner = 0;
  const peer_state* peer = nullptr;  // null for a stateless request
  sink out;
  bool modern = false;
  std::string version;  // the revision the answer is made for
  std::optional<json> progress_token;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  double last_progress = 0;
  client::canceller canceller;
  std::atomic<uint64_t> output_bytes{0};
  // The connection a handler blocks on without a cancel descriptor (wait), guarded so that a
  // cancel never shuts down a descriptor number the worker has since closed and reused.
  std::mutex fd_lock;
  int blocking_fd = -1;
  bool cancelled = false;  // written by the loop thread under fd_lock
  std::thread worker;
};

server::server(server_options opts, std::function<void(std::function<void()>)> post)
    : opts_(std::move(opts)), post_(std::move(post)) {}

server::~server() {
  for (auto& [key, c] : calls_) {
    cancel(*c);
    if (c->worker.joinable()) c->worker.join();
  }
}

bool server::handle(const incoming& m, peer_state& peer, uint64_t owner, sink out) {
  if (m.kind == message_kind::response) return false;  // this server sends no requests
  if (m.kind == message_kind::notification) {
    if (m.method == "notifications/initialized") peer.initialized = true;
    if (m.method == "notifications/cancelled") {
      // The call is stopped as a cancel stops it (the shell keeps its state), and nothing
      // more is sent for it, its response included. Request ids are the client's: over
      // stdio or in an HTTP session, those of the same peer; else of the same connection.
      auto rid = m.params.find("requestId");
      if (rid != m.params.end())
        for (auto& [key, c] : calls_)
          if (c->id == *rid && (peer.stateless ? c->owner == owner && c->peer == nullptr : c->peer == &peer))
            cancel_and_end(*c);
    }
    return false;
  }
  // A request: which revision?
  bool modern = false;
  auto meta = m.params.find("_meta");
  if (meta != m.params.end() && meta->is_object()) {
    if (auto v = meta->find(kMetaVersion); v != meta->end()) {
      std::string requested = v->is_string() ? v->get<std::string>() : std::string();
      if (requested == kModernVersion) {
        modern = true;
        if (std::string problem = modern_meta_problem(m.params); !problem.empty()) {
          out(error_response(m.id, kInvalidParams, problem));
          return true;
        }
      } else if (!v->is_string() || !is_legacy_version(requested)) {
        // Only a string is sent back: a client's nested value is never echoed.
        out(error_response(m.id, kUnsupportedProtocolVersion, "Unsupported protocol version",
                           {{"requested", v->is_string() ? json(requested) : json(nullptr)},
                            {"supported", supported_versions()}}));
        return true;
      }
    }
  }
  bool deferred = false;
  json answer;
  try {
    answer = dispatch(m, peer, modern, owner, out, deferred);
  } catch (const std::exception& e) {  // a broken invariant: an answer, never a crash of the loop
    deferred = false;
    answer = error_response(m.id, kInternalError, fmt::format("Internal error: {}", e.what()));
  }
  if (!deferred) out(answer);
  return true;
}

json server::dispatch(const incoming& m, peer_state& peer, bool modern, uint64_t owner, sink& out, bool& deferred) {
  auto ok = [&](json r) {
    if (modern) r["resultType"] = "complete";
    return result_response(m.id, std::move(r));
  };
  // 2026-07-28 has no handshake and no ping: a request that names it gets neither.
  if (modern && (m.method == "initialize" || m.method == "ping"))
    return error_response(m.id, kMethodNotFound,
                          fmt::format("Method not found: {} is not part of {} (server/discover says what is)",
                                      m.method, kModernVersion));
  if (m.method == "initialize") return result_response(m.id, initialize_result(m, peer));
  if (m.method == "ping") return ok(json::object());
  if (m.method == "server/discover") return ok(discover_result(modern));
  if (m.method == "tools/list") {
    json r = {{"tools", tools_for(revision_of(peer, modern))}};
    if (modern) {
      r["ttlMs"] = kToolsTtlMs;
      r["cacheScope"] = "public";
    }
    return ok(std::move(r));
  }
  if (m.method == "tools/call") {
    auto name = m.params.find("name");
    if (name == m.params.end() || !name->is_string())
      return error_response(m.id, kInvalidParams, "Invalid params: \"name\" (the tool's) must be a string");
    const tool* t = find_tool(name->get<std::string>());
    if (t == nullptr)
      return error_response(m.id, kInvalidParams, fmt::format("Unknown tool: {}", name->get<std::string>()));
    json args = m.params.value("arguments", json::object());
    if (!args.is_object())
      return error_response(m.id, kInvalidParams, "Invalid params: \"arguments\" must be an object");
    // A wrong argument is the model's to correct: a tool result with isError (as 2025-11-25
    // classes input validation), which hosts show the model, where an error response would
    // end in an exception before it.
    if (std::string e = check_arguments(*t, args); !e.empty())
      return ok({{"content", json::array({{{"type", "text"},
                                           {"text", fmt::format("Invalid arguments for {}: {}; nothing was run. Call "
                                                                "{} again with the argument corrected.",
                                                                t->name, e, t->name)}}})},
                 {"isError", true}});
    if (calls_.size() >= kMaxCalls)
      return error_response(m.id, kInternalError,
                            fmt::format("too many tool calls running (at most {}); wait for one to finish", kMaxCalls));
    start_call(*t, std::move(args), m, peer, modern, owner, out);
    deferred = true;
    return nullptr;
  }
  return error_response(m.id, kMethodNotFound, fmt::format("Method not found: {}", m.method));
}

json server::initialize_result(const incoming& m, peer_state& peer) const {
  // The client's revision when it is one of the handshake's; else the newest, and a client
  // that does not speak it disconnects, as the negotiation rules say.
  auto asked = m.params.find("protocolVersion");
  bool known = asked != m.params.end() && asked->is_string() && is_legacy_version(asked->get<std::string>());
  peer.version = known ? asked->get<std::string>() : std::string(kLegacyVersion);
  return {{"protocolVersion", peer.version},
          {"capabilities", {{"tools", {{"listChanged", false}}}}},
          {"serverInfo", server_info(opts_.version, revision{peer.version})},
          {"instructions", kInstructions}};
}

revision server::revision_of(const peer_state& peer, bool modern) {
  if (modern || peer.version.empty()) return revision{modern ? kModernVersion : kLegacyVersion};
  return revision{peer.version};
}

json server::discover_result(bool modern) const {
  json r = {{"supportedVersions", supported_versions()},
            {"capabilities", {{"tools", json::object()}}},
            {"_meta", {{"io.modelcontextprotocol/serverInfo", server_info(opts_.version, revision{kModernVersion})}}},
            {"instructions", kInstructions},
            {"ttlMs", kToolsTtlMs},
            {"cacheScope", "public"}};
  (void)modern;
  return r;
}

void server::start_call(const tool& t, json args, const incoming& m, const peer_state& peer, bool modern,
                        uint64_t owner, sink out) {
  uint64_t key = next_key_++;
  auto c = std::make_unique<call>();
  c->id = m.id;
  c->owner = owner;
  c->peer = peer.stateless ? nullptr : &peer;
  c->out = std::move(out);
  c->modern = modern;
  c->version = std::string(revision_of(peer, modern).version);
  if (auto meta = m.params.find("_meta"); meta != m.params.end() && meta->is_object())
    if (auto tok = meta->find("progressToken"); tok != meta->end() && (tok->is_string() || tok->is_number_integer()))
      c->progress_token = *tok;
  call* raw = c.get();
  c->worker = std::thread([this, raw, key, &t, args = std::move(args)] {
    tool_context ctx;
    ctx.connect = opts_.connect;
    ctx.cancel_fd = raw->canceller.fd();
    ctx.has_progress = raw->progress_token.has_value();
    if (raw->progress_token)
      ctx.output_seen = [this, raw, key, last = std::chrono::steady_clock::time_point()](size_t n) mutable {
        raw->output_bytes.fetch_add(n);
        auto now = std::chrono::steady_clock::now();
        if (now - last < std::chrono::milliseconds(250)) return;
        last = now;
        // The loop finds the call by its key: it may have finished by the time this runs.
        post_([this, key] {
          if (auto it = calls_.find(key); it != calls_.end()) send_progress(*it->second);
        });
      };
    ctx.blocking_on = [raw](int fd) {
      std::lock_guard lock(raw->fd_lock);
      raw->blocking_fd = fd;
      if (fd >= 0 && raw->cancelled) ::shutdown(fd, SHUT_RDWR);
    };
    tool_outcome o;
    try {
      o = t.run(args, ctx);
    } catch (const std::exception& e) {  // a broken invariant in a handler: an internal error
      o = {nullptr, true, fmt::format("sbsh: internal error: {}", e.what()), {}};
    }
    post_([this, key, o = std::move(o)]() mutable { finish(key, std::move(o)); });
  });
  calls_.emplace(key, std::move(c));
}

void server::finish(uint64_t key, tool_outcome outcome) {
  auto it = calls_.find(key);
  if (it == calls_.end()) return;
  call& c = *it->second;
  if (c.worker.joinable()) c.worker.join();
  if (c.out && !c.cancelled) {
    std::string text = outcome.structured.is_null() ? outcome.message
                       : outcome.text.empty()       ? to_line(outcome.structured)
                                                    : std::move(outcome.text);
    json r = {{"content", json::array({{{"type", "text"}, {"text", text}}})}, {"isError", outcome.is_error}};
    // Before 2025-06-18 a result is its content alone.
    if (!outcome.structured.is_null() && revision{c.version}.structured())
      r["structuredContent"] = std::move(outcome.structured);
    if (c.modern) r["resultType"] = "complete";
    c.out(result_response(c.id, std::move(r)));
  }
  calls_.erase(it);
  if (calls_.empty() && on_idle_) on_idle_();
}

void server::cancel(call& c) {
  if (c.cancelled) return;
  c.out = nullptr;
  c.canceller.cancel();
  // Under the lock: the worker reads `cancelled` there when it starts blocking on a socket.
  std::lock_guard lock(c.fd_lock);
  c.cancelled = true;
  if (c.blocking_fd >= 0) ::shutdown(c.blocking_fd, SHUT_RDWR);
}

void server::cancel_owner(uint64_t owner) {
  for (auto& [key, c] : calls_)
    if (c->owner == owner) cancel(*c);
}

void server::cancel_peer(const peer_state& peer) {
  for (auto& [key, c] : calls_)
    if (c->peer == &peer) cancel_and_end(*c);
}

void server::cancel_and_end(call& c) {
  sink out = c.out;
  bool was_cancelled = c.cancelled;
  cancel(c);
  if (out && !was_cancelled) out(nullptr);
}

void server::cancel_all() {
  for (auto& [key, c] : calls_) cancel(*c);
}

bool server::busy(uint64_t owner) const {
  for (const auto& [key, c] : calls_)
    if (c->owner == owner && !c->cancelled) return true;
  return false;
}

void server::tick() {
  for (auto& [key, c] : calls_) send_progress(*c);
}

void server::send_progress(call& c) {
  if (!c.progress_token || !c.out || c.cancelled) return;
  // Seconds elapsed: increases strictly from one notification to the next.
  double p = std::chrono::duration<double>(std::chrono::steady_clock::now() - c.started).count();
  p = std::floor(p * 1000) / 1000;
  if (p <= c.last_progress) return;
  c.last_progress = p;
  uint64_t bytes = c.output_bytes.load();
  json params = {{"progressToken", *c.progress_token}, {"progress", p}};
  if (revision{c.version}.annotations())  // a message came with 2025-03-26
    params["message"] = fmt::format("running for {:.1f} s, {} bytes of output so far", p, bytes);
  c.out(notification("notifications/progress", std::move(params)));
}

}  // namespace sbsh::mcp
