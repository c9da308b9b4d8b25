// What a request to /mcp must carry to be served (one Host, this server's own; an Origin,
// if any, of this server; the token) and how the endpoint answers it: POST (stateless
// 2026-07-28 requests, or a session's), GET (a session's SSE stream) and DELETE, and the
// sessions that initialize makes. The order of the checks is in http.cpp's opening comment.
#include <sys/random.h>

#include <algorithm>
#include <cstdint>
#include <string_view>

#include <fmt/format.h>

#include "mcp/http_server.h"

namespace sbsh::mcp::http_transport {

namespace {

// An Origin as this server matches it: "http://HOST[:PORT]" and nothing more (no userinfo,
// path, query or fragment), as "host:port" in lower case with the port made explicit
// (http's 80 when absent); nullopt for anything else, such as "null" or another scheme.
std::optional<std::string> origin_authority(const std::string& origin) {
  std::string o = lower(origin);
  constexpr std::string_view scheme = "http://";
  if (!o.starts_with(scheme)) return std::nullopt;
  std::string rest = o.substr(scheme.size());
  if (rest.empty() || rest.find_first_of("@/?#\\ %") != std::string::npos) return std::nullopt;
  std::string host = rest, port = "80";
  if (rest[0] == '[') {
    auto close = rest.find(']');
    if (close == std::string::npos) return std::nullopt;
    host = rest.substr(0, close + 1);
    std::string after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return std::nullopt;
      port = after.substr(1);
    }
  } else if (auto colon = rest.find(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty() || port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return host + ":" + std::to_string(std::stoul(port));
}

// Hosts a browser may name a page on this machine by, for a server on a unix socket (which
// has no port of its own to match).
bool loopback_name(const std::string& authority) {
  std::string host = authority.substr(0, authority.rfind(':'));
  return host == "localhost" || host == "127.0.0.1" || host == "[::1]";
}

// Client text quoted in an error: at most 200 bytes (the JSON writer escapes it).
std::string clip(const std::string& s) { return s.size() <= 200 ? s : s.substr(0, 200) + "..."; }

bool equal_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

std::string random_id() {
  unsigned char b[16];
  if (::getrandom(b, sizeof b, 0) != static_cast<ssize_t>(sizeof b)) return {};
  std::string s;
  for (unsigned char c : b) s += fmt::format("{:02x}", c);
  return s;
}

// Mcp-Name may carry its value as =?base64?...?= (2026-07-28, Value Encoding).
std::optional<std::string> header_value(const std::string& v) {
  if (!(v.starts_with("=?base64?") && v.ends_with("?=") && v.size() >= 11)) return v;
  std::string_view in = std::string_view(v).substr(9, v.size() - 11);
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int x;
    if (c >= 'A' && c <= 'Z') x = c - 'A';
    else if (c >= 'a' && c <= 'z') x = c - 'a' + 26;
    else if (c >= '0' && c <= '9') x = c - '0' + 52;
    else if (c == '+') x = 62;
    else if (c == '/') x = 63;
    else if (c == '=') break;
    else return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(x);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

}  // namespace

void http_server::end_session(const std::string& sid) {
  auto s = sessions_.find(sid);
  if (s == sessions_.end()) return;
  for (connection* stream : std::set<connection*>(s->second.streams)) {
    stream->get_stream_session.clear();
    stream->close_after = true;
    end_response(*stream);
  }
  core_.cancel_peer(s->second.peer);
  sessions_.erase(s);
}

std::optional<refusal> http_server::refuse(const http_request& r) const {
  const std::string* host = r.header("host");
  if (r.count("host") != 1 || host->empty())
    return refusal{400,
                   fmt::format("Bad Request: give exactly one Host header, not {}{}", r.count("host"),
                               authority_text_.empty() ? "" : fmt::format(" (Host: {})", authority_text_)),
                   {}};
  if (!http_.allow_remote) {
    // Against DNS rebinding (a web page whose name resolves to this address): the whole Host,
    // and the whole Origin, must name this server.
    if (!authorities_.empty() && !authorities_.contains(lower(*host)))
      return refusal{403,
                     fmt::format("Forbidden: Host '{}' is not this server's address; give Host: {} (DNS "
                                 "rebinding protection)",
                                 clip(*host), authority_text_),
                     {}};
    if (const std::string* origin = r.header("origin"); origin != nullptr) {
      auto authority = r.count("origin") == 1 ? origin_authority(*origin) : std::nullopt;
      bool ok = authority && (authorities_.empty() ? loopback_name(*authority) : authorities_.contains(*authority));
      if (!ok)
        return refusal{403,
                       fmt::format("Forbidden: Origin '{}' may not use this server; only http://{} may (DNS "
                                   "rebinding protection)",
                                   clip(*origin), authorities_.empty() ? "localhost" : authority_text_),
                       {}};
    }
  }
  if (!http_.token.empty()) {
    const std::string* auth = r.header("authorization");
    bool ok = auth != nullptr && r.count("authorization") == 1 && auth->size() > 7 &&
              lower(auth->substr(0, 7)) == "bearer " && equal_constant_time(auth->substr(7), http_.token);
    if (!ok)
      return refusal{401,
                     fmt::format("Unauthorized: send 'Authorization: Bearer TOKEN', TOKEN being the text of {} (only "
                                 "the user who runs sbsh mcp can read it)",
                                 http_.token_file),
                     {"WWW-Authenticate: Bearer realm=\"sbsh\""}};
  }
  return std::nullopt;
}

void http_server::handle(connection& c, const http_request& r) {
  std::string path = r.url.substr(0, r.url.find('?'));
  if (path != "/mcp") return respond_error(c, 404, nullptr, kInvalidRequest, "Not Found: the MCP endpoint is /mcp");
  if (r.refused)
    return respond_error(c, r.refused->status, nullptr, kInvalidRequest, r.refused->message, r.refused->extra);
  const std::string* sid = r.header("mcp-session-id");
  if (r.method == HTTP_POST) return handle_post(c, r);
  if (r.method == HTTP_GET) return handle_get(c, r);
  if (r.method == HTTP_DELETE) {
    if (sid == nullptr)
      return respond_error(c, 405, nullptr, kInvalidRequest, "Method Not Allowed: DELETE needs Mcp-Session-Id",
                           {"Allow: POST"});
    if (!sessions_.contains(*sid)) return respond_error(c, 404, nullptr, kInvalidRequest, "Not Found: no such session");
    end_session(*sid);
    return respond(c, 200, "");
  }
  respond_error(c, 405, nullptr, kInvalidRequest, "Method Not Allowed: use POST, GET or DELETE",
                {"Allow: POST, GET, DELETE"});
}

// A session's SSE stream. Streams are capped apart from connections: a session's new one
// closes its oldest (a client reconnecting), and at kMaxStreams in all a new one is refused.
void http_server::handle_get(connection& c, const http_request& r) {
  const std::string* sid = r.header("mcp-session-id");
  const std::string* accept = r.header("accept");
  if (accept == nullptr || accept->find("text/event-stream") == std::string::npos)
    return respond_error(c, 406, nullptr, kInvalidRequest,
                         "Not Acceptable: GET /mcp is an SSE stream; accept text/event-stream");
  if (sid == nullptr)
    return respond_error(c, 405, nullptr, kInvalidRequest,
                         "Method Not Allowed: GET /mcp opens a session's stream; give Mcp-Session-Id",
                         {"Allow: POST, DELETE"});
  auto s = sessions_.find(*sid);
  if (s == sessions_.end()) return respond_error(c, 404, nullptr, kInvalidRequest, "Not Found: no such session");
  s->second.last_used = uv_now(loop_);
  if (s->second.streams.size() >= kMaxStreamsPerSession) {
    connection* oldest = *std::min_element(s->second.streams.begin(), s->second.streams.end(),
                                           [](const connection* a, const connection* b) { return a->id < b->id; });
    s->second.streams.erase(oldest);
    oldest->get_stream_session.clear();
    oldest->close_after = true;
    end_response(*oldest);
  }
  size_t streams = 0;
  for (const auto& [id, session] : sessions_) streams += session.streams.size();
  if (streams >= kMaxStreams)
    return respond_error(c, 503, nullptr, kInternalError,
                         fmt::format("Service Unavailable: {} SSE streams are open, the most this server keeps; close "
                                     "one or try again later",
                                     kMaxStreams),
                         {"Retry-After: 5"});
  c.get_stream_session = *sid;
  s->second.streams.insert(&c);
  start_sse(c, {});
  write(c, fmt::format("{:x}\r\n{}\r\n", 3, ":\n\n"));  // a comment, so the client sees the stream open
}

void http_server::handle_post(connection& c, const http_request& r) {
  if (r.too_large)
    return respond_error(c, 413, nullptr, kInvalidRequest,
                         fmt::format("Content Too Large: a message is at most {} bytes", kMaxMessage));
  const std::string* accept = r.header("accept");
  std::string acc = accept == nullptr ? "" : lower(*accept);
  bool any = acc.find("*/*") != std::string::npos;
  bool json_ok = any || acc.find("application/json") != std::string::npos;
  bool sse_ok = any || acc.find("text/event-stream") != std::string::npos;
  if (!json_ok && !sse_ok)
    return respond_error(c, 406, nullptr, kInvalidRequest,
                         "Not Acceptable: accept application/json and text/event-stream");
  const std::string* ctype = r.header("content-type");
  if (ctype == nullptr || lower(*ctype).find("application/json") == std::string::npos)
    return respond_error(c, 415, nullptr, kInvalidRequest, "Unsupported Media Type: send application/json");
  auto parsed = parse_message(r.body);
  if (!parsed.message) return respond(c, 400, to_line(parsed.error));
  const incoming& m = *parsed.message;
  const std::string* version_header = r.header("mcp-protocol-version");
  const std::string* sid = r.header("mcp-session-id");
  std::optional<std::string> meta_version;
  if (auto meta = m.params.find("_meta"); meta != m.params.end() && meta->is_object())
    if (auto v = meta->find("io.modelcontextprotocol/protocolVersion"); v != meta->end() && v->is_string())
      meta_version = v->get<std::string>();

  peer_state stateless;
  stateless.stateless = true;
  peer_state* peer = &stateless;
  std::vector<std::string> extra;
  bool modern = meta_version.has_value() && !is_legacy_version(*meta_version);
  if (modern) {
    // Stateless: the headers must say what the body says.
    auto mismatch = [&](const std::string& what) {
      respond_error(c, 400, m.id, kHeaderMismatch, "Header mismatch: " + what);
    };
    if (version_header == nullptr || *version_header != *meta_version)
      return mismatch(fmt::format("MCP-Protocol-Version must be '{}', as in _meta", *meta_version));
    if (std::string problem = modern_meta_problem(m.params); m.kind == message_kind::request && !problem.empty())
      return respond_error(c, 400, m.id, kInvalidParams, problem);
    if (m.kind == message_kind::request) {
      const std::string* method = r.header("mcp-method");
      if (method == nullptr || *method != m.method) return mismatch(fmt::format("Mcp-Method must be '{}'", m.method));
      if (m.method == "tools/call") {
        const std::string* name = r.header("mcp-name");
        auto decoded = name == nullptr ? std::nullopt : header_value(*name);
        auto body_name = m.params.find("name");
        if (!decoded || body_name == m.params.end() || !body_name->is_string() || *decoded != *body_name)
          return mismatch("Mcp-Name must be the tool's name, as in params.name");
      }
    }
  } else if (m.kind == message_kind::request && m.method == "initialize") {
    std::string id;
    http_session* session = new_session(c, m.id, id);
    if (session == nullptr) return;
    peer = &session->peer;
    c.call_session = id;
    extra.push_back("Mcp-Session-Id: " + id);
  } else {
    // A request in the 2026-07-28 header whose body lacks what that revision's carry.
    if (version_header != nullptr && *version_header == kModernVersion && m.kind == message_kind::request &&
        !meta_version)
      return respond_error(c, 400, m.id, kInvalidParams, modern_meta_problem(m.params));
    if (version_header != nullptr && !is_legacy_version(*version_header) && *version_header != kModernVersion)
      return respond_error(c, 400, m.id, kInvalidRequest,
                           fmt::format("Bad Request: MCP-Protocol-Version '{}' is not one this server speaks",
                                       clip(*version_header)));
    if (sid == nullptr)
      return respond_error(c, 400, m.id, kInvalidRequest,
                           "Bad Request: no Mcp-Session-Id; start with initialize, or send 2026-07-28 requests");
    auto s = sessions_.find(*sid);
    if (s == sessions_.end())
      return respond_error(c, 404, m.id, kInvalidRequest, "Not Found: no such session; initialize again");
    peer = &s->second.peer;
    s->second.last_used = uv_now(loop_);
    c.call_session = *sid;
  }

  if (m.kind != message_kind::request) {
    core_.handle(m, *peer, c.id, [](const json&) {});
    return respond(c, 202, "", extra);
  }
  // Progress goes only to a stream; a request that asks for it (or accepts nothing else)
  // gets its answer as SSE.
  bool wants_progress = false;
  if (auto meta = m.params.find("_meta"); meta != m.params.end() && meta->is_object())
    wants_progress = meta->contains("progressToken");
  bool use_sse = sse_ok && (wants_progress || !json_ok);
  connection* conn = &c;
  auto out = [this, conn, use_sse, extra, modern, id = m.id](const json& in) {
    // Cancelled (notifications/cancelled, or a DELETE of its session): the call is stopped,
    // and the HTTP request held open still gets a whole response, an error for its id,
    // which a client that cancelled drops. A connection closed without one would break
    // clients that read on (an HTTP client's protocol error).
    const json j = in.is_null() ? error_response(id, kRequestCancelled,
                                                 "Request cancelled: the call was stopped, as notifications/cancelled "
                                                 "or the end of its session asked; the session's shell keeps its state")
                                : in;
    bool final = j.contains("id") && (j.contains("result") || j.contains("error"));
    if (use_sse) {
      if (!conn->sse) start_sse(*conn, extra);
      sse_event(*conn, j);
      if (final) end_response(*conn);
    } else if (final) {
      int status = 200;
      if (modern && j.contains("error")) {
        int code = j["error"].value("code", 0);
        status = code == kMethodNotFound ? 404 : code == kUnsupportedProtocolVersion ? 400 : 200;
      }
      respond(*conn, status, to_line(j), extra);
    }
  };
  // The stateless peer is only used while handle() runs; a call keeps none of it.
  core_.handle(m, *peer, c.id, out);
}

// Sessions that clients forgot to DELETE must not pile up, and no client may end another's:
// at the cap, the least recently used session ends only when it has been idle (no request,
// no stream, no call) for kSessionIdleMs; otherwise the new one is refused with 503.
http_session* http_server::new_session(connection& c, const json& id, std::string& sid) {
  if (sessions_.size() >= kMaxSessions) {
    uint64_t now = uv_now(loop_);
    std::set<std::string> calling;
    for (const auto& [k, conn] : conns_)
      if (conn->busy && conn.get() != &c && !conn->call_session.empty()) calling.insert(conn->call_session);
    auto idle = [&](const auto& entry) { return entry.second.streams.empty() && !calling.contains(entry.first); };
    auto oldest = sessions_.end();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
      if (idle(*it) && (oldest == sessions_.end() || it->second.last_used < oldest->second.last_used)) oldest = it;
    if (oldest == sessions_.end() || now < oldest->second.last_used + kSessionIdleMs) {
      uint64_t wait_ms = oldest == sessions_.end() ? kSessionIdleMs : oldest->second.last_used + kSessionIdleMs - now;
      respond_error(c, 503, id, kInternalError,
                    fmt::format("Service Unavailable: {} sessions are open, the most this server keeps, and none has "
                                "been idle for {} s; end one (DELETE /mcp), send 2026-07-28 requests, which need no "
                                "session, or try again later",
                                kMaxSessions, kSessionIdleMs / 1000),
                    {fmt::format("Retry-After: {}", wait_ms / 1000 + 1)});
      return nullptr;
    }
    end_session(oldest->first);
  }
  sid = random_id();
  if (sid.empty()) {
    respond_error(c, 503, id, kInternalError, "cannot read random bytes for a session id (getrandom failed)");
    return nullptr;
  }
  http_session& session = sessions_[sid];
  session.last_used = uv_now(loop_);
  return &session;
}

}  // namespace sbsh::mcp::http_transport
