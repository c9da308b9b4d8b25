// The Streamable HTTP transport: one endpoint, /mcp, on a TCP port or a unix socket, parsed
// by libhttp-parser on a libuv loop. This file listens, accepts, parses and writes, and
// bounds each client; http_requests.cpp checks and answers each request (http_server.h).
//
// Who may use it: whoever runs it. A loopback TCP port is open to every local user, so there
// every request needs the bearer token (--token-file, else the user's own, which cmd_mcp
// makes in the runtime directory, mode 0600); a unix socket is created 0600 and each
// peer's uid is checked (SO_PEERCRED) as sbshd checks its clients.
//
// What a request goes through, in order (each refusal a JSON-RPC error in the body):
//   path /mcp, else 404; exactly one Host header, else 400; unless --allow-remote, a Host
//   that is exactly this server's address (127.0.0.1:PORT, localhost:PORT, [::1]:PORT) and
//   an Origin, when present, that is exactly http://one-of-those, else 403 (DNS rebinding);
//   the bearer token when one is set, else 401 with WWW-Authenticate (these are decided
//   once the headers are in: the body of a request so refused is read and dropped); then
//   POST: one JSON-RPC message of at most kMaxMessage bytes (413), Accept naming JSON or SSE
//     (406). 2026-07-28 requests (the revision in _meta) are stateless: MCP-Protocol-Version,
//     Mcp-Method and, for tools/call, Mcp-Name must match the body (400, -32020), an unknown
//     method is 404. Other requests belong to a session that initialize made (Mcp-Session-Id:
//     missing 400, unknown 404) and MCP-Protocol-Version, when given, must be one spoken.
//     Notifications get 202; a request its answer as application/json, or as an SSE stream
//     when it asked for progress (or accepts nothing else).
//   GET: a session's SSE stream (this server sends nothing on it unasked; it stays open).
//   DELETE: ends a session.
// A connection that closes while it carries a call cancels the call.
//
// No client can lock out another: headers must arrive within kHeaderMs and a body within
// kBodyMs (408), an idle keep-alive connection closes after kIdleMs; at kMaxConnections (or
// kMaxPerAddress from one non-loopback address) a new connection closes the oldest one that
// carries no call and no stream, those that never completed a request first; SSE streams
// are capped apart (kMaxStreams, kMaxStreamsPerSession); and a new session never ends a live
// one: at kMaxSessions only a session idle for kSessionIdleMs makes room, else 503 with
// Retry-After.
#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "mcp/http_server.h"

namespace sbsh::mcp {

namespace http_transport {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

namespace {

// A TCP peer's address, for kMaxPerAddress; empty on loopback and on a unix socket.
std::string peer_address(connection& c) {
  if (c.sock->type() != uv::stream::kind::tcp) return {};
  sockaddr_storage peer{};
  int len = sizeof peer;
  if (uv_tcp_getpeername(c.sock->tcp(), reinterpret_cast<sockaddr*>(&peer), &len) != 0) return {};
  char text[INET6_ADDRSTRLEN] = "";
  if (peer.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&peer);
    if ((ntohl(a->sin_addr.s_addr) >> 24) == 127) return {};
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
  } else if (peer.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&peer);
    if (IN6_IS_ADDR_LOOPBACK(&a->sin6_addr)) return {};
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
  }
  return text;
}

std::string status_text(int status) {
  switch (status) {
    case 200: return "OK";
    case 202: return "Accepted";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

}  // namespace

int http_server::bind_unix(const std::string& where, std::string& url) {
  sockaddr_un sa{};
  if (where.size() >= sizeof sa.sun_path) {
    std::fputs(fmt::format("sbsh: --http {}: a socket path is at most {} bytes\n", where, sizeof sa.sun_path - 1)
                   .c_str(),
               stderr);
    return kRefused;
  }
  listener_ = uv::make_handle<uv::stream>(loop_, uv::stream::kind::unix_socket);  // stop() closes it
  // A socket left by an earlier run is replaced; one that something still answers on is not.
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, where.c_str(), where.size() + 1);
  int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool in_use = probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  if (probe >= 0) ::close(probe);
  if (in_use) {
    std::fputs(fmt::format("sbsh: --http {}: something is listening there already\n", where).c_str(), stderr);
    return kRefused;
  }
  ::unlink(where.c_str());
  // Private from birth: only this user may connect (no thread runs yet to share the umask).
  mode_t old_mask = ::umask(0177);  // srw-------
  int rc = uv_pipe_bind(listener_->pipe(), where.c_str());
  ::umask(old_mask);
  owns_path_ = rc == 0;
  url = fmt::format("unix socket {}, endpoint /mcp", where);
  return rc;
}

int http_server::bind_tcp(const std::string& where, std::string& url) {
  auto colon = where.rfind(':');
  if (colon == std::string::npos || colon + 1 == where.size()) {
    std::fputs(fmt::format("sbsh: --http {}: give HOST:PORT (port 0 picks a free one) or a socket path\n", where)
                   .c_str(),
               stderr);
    return kRefused;
  }
  std::string host = where.substr(0, colon), port = where.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  // Addresses only (and localhost): no name lookup, which a statically linked sbsh could
  // only make with the system's NSS modules at run time.
  if (lower(host) == "localhost") host = "127.0.0.1";
  sockaddr_storage ss{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  char* end = nullptr;
  unsigned long port_number = std::strtoul(port.c_str(), &end, 10);
  bool port_ok = *end == '\0' && port.find_first_not_of("0123456789") == std::string::npos && port_number <= 65535;
  if (port_ok && inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port_number));
  } else if (port_ok && inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port_number));
  } else {
    std::fputs(fmt::format("sbsh: --http {}: give an IP address and a port (127.0.0.1:8808, [::1]:0, "
                           "localhost:8808) or a socket path\n",
                           where)
                   .c_str(),
               stderr);
    return kRefused;
  }
  char text[INET6_ADDRSTRLEN] = "";
  bool loop_addr = false;
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    loop_addr = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    loop_addr = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
  }
  if (!loop_addr && !http_.allow_remote) {
    std::fputs(fmt::format("sbsh: --http {}: not a loopback address; to listen beyond this host give "
                           "--allow-remote with --token-file\n",
                           where)
                   .c_str(),
               stderr);
    return kRefused;
  }
  listener_ = uv::make_handle<uv::stream>(loop_, uv::stream::kind::tcp);
  int rc = uv_tcp_bind(listener_->tcp(), reinterpret_cast<sockaddr*>(&ss), 0);
  if (rc == 0) {
    sockaddr_storage bound{};
    int len = sizeof bound;
    uv_tcp_getsockname(listener_->tcp(), reinterpret_cast<sockaddr*>(&bound), &len);
    int real_port;
    std::string host;
    if (bound.ss_family == AF_INET) {
      auto* a = reinterpret_cast<sockaddr_in*>(&bound);
      inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
      real_port = ntohs(a->sin_port);
      host = text;
    } else {
      auto* a = reinterpret_cast<sockaddr_in6*>(&bound);
      inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
      real_port = ntohs(a->sin6_port);
      host = fmt::format("[{}]", text);
    }
    url = fmt::format("http://{}:{}/mcp", host, real_port);
    allow_authorities(host, real_port);
  }
  return rc;
}

// The names a client may give this server by: its address, and localhost for 127.0.0.1 and
// ::1 (the only addresses localhost names without a lookup).
void http_server::allow_authorities(const std::string& host, int port) {
  std::vector<std::string> names{lower(host)};
  if (host == "127.0.0.1" || host == "[::1]") names.emplace_back("localhost");
  for (const auto& name : names) {
    authorities_.insert(fmt::format("{}:{}", name, port));
    if (port == 80) authorities_.insert(name);
    authority_text_ += (authority_text_.empty() ? "" : " or ") + fmt::format("{}:{}", name, port);
  }
}

int http_server::listen_or_fail() {
  http_parser_settings_init(&settings_);
  settings_.on_message_begin = on_message_begin;
  settings_.on_url = on_url;
  settings_.on_header_field = on_header_field;
  settings_.on_header_value = on_header_value;
  settings_.on_headers_complete = on_headers_complete;
  settings_.on_body = on_body;
  settings_.on_message_complete = on_message_complete;

  const std::string& where = http_.listen;
  std::string url;
  int rc = where.find('/') != std::string::npos ? bind_unix(where, url) : bind_tcp(where, url);
  if (rc == kRefused) return 255;
  if (rc == 0) rc = listener_->listen(128, [this](int status) { on_connection(status); });
  if (rc != 0) {
    std::fputs(fmt::format("sbsh: --http {}: cannot listen: {}\n", where, uv_strerror(rc)).c_str(), stderr);
    return 255;
  }
  // The token's line first: whoever waits for the URL finds it written already.
  if (!http_.token.empty())
    std::fputs(fmt::format("sbsh mcp: every request needs 'Authorization: Bearer TOKEN', TOKEN being the text of "
                           "{}\n",
                           http_.token_file)
                   .c_str(),
               stderr);
  std::fputs(fmt::format("sbsh mcp: listening on {}\n", url).c_str(), stderr);
  std::fflush(stderr);
  ticker_ = uv::make_handle<uv::timer>(loop_);
  ticker_->start(
      500,
      [this] {
        core_.tick();
        sweep();
      },
      500);
  sigint_ = uv::make_handle<uv::signal_watch>(loop_);
  sigint_->start(SIGINT, [this](int) { stop(); });
  sigterm_ = uv::make_handle<uv::signal_watch>(loop_);
  sigterm_->start(SIGTERM, [this](int) { stop(); });
  return 0;
}

// Ends serving: no new connections; every call is cancelled; once the last has finished,
// every handle closes and the loop ends.
void http_server::stop() {
  if (stopping_) return;
  stopping_ = true;
  listener_.reset();
  if (owns_path_) ::unlink(http_.listen.c_str());
  sigint_.reset();
  sigterm_.reset();
  auto finish = [this] {
    ticker_.reset();
    std::vector<connection*> all;
    for (auto& [k, c] : conns_) all.push_back(k);
    for (auto* c : all) close(*c);
    queue_.close();
  };
  core_.when_idle(finish);
  core_.cancel_all();
  if (core_.idle()) finish();
}

void http_server::on_connection(int status) {
  if (status != 0 || stopping_) return;
  auto c = std::make_unique<connection>();
  connection* raw = c.get();
  raw->srv = this;
  raw->id = next_id_++;
  raw->accepted = uv_now(loop_);
  raw->header_deadline = raw->accepted + kHeaderMs;
  raw->sock = uv::make_handle<uv::stream>(loop_, listener_->type());
  conns_.emplace(raw, std::move(c));
  if (listener_->accept(*raw->sock) != 0) {
    close(*raw);
    return;
  }
  http_parser_init(&raw->parser, HTTP_REQUEST);
  raw->parser.data = raw;
  if (!same_user(*raw)) return;
  raw->address = peer_address(*raw);
  if (!make_room(*raw)) {
    raw->close_after = true;
    respond_error(*raw, 503, nullptr, kInternalError,
                  fmt::format("too many connections carrying calls or streams (at most {}); try again later",
                              kMaxConnections),
                  {"Retry-After: 5"});
    return;
  }
  raw->sock->read_start([this, raw](ssize_t n, const char* data) { on_read(*raw, n, data); });
}

// A unix socket serves only the uid that runs sbsh mcp, as sbshd's does: its mode 0600
// keeps others out already, and this holds also when the mode was changed. A TCP peer
// proves itself by the token instead.
bool http_server::same_user(connection& c) {
  if (c.sock->type() != uv::stream::kind::unix_socket) return true;
  int fd = c.sock->fileno();
  ucred cred{};
  socklen_t len = sizeof cred;
  if (fd >= 0 && ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == ::getuid()) return true;
  c.close_after = true;
  respond_error(c, 403, nullptr, kInvalidRequest,
                fmt::format("Forbidden: this socket serves only uid {}, who runs sbsh mcp; connect as that user",
                            ::getuid()));
  return false;
}

// Room for `fresh`: at a cap, the oldest connection that carries no call and no stream is
// closed, one that never completed a request before one idle between requests. So
// connections that send nothing, or send slowly, cannot keep a client that sends a request
// out. False when every other connection carries a call or a stream.
bool http_server::make_room(const connection& fresh) {
  size_t same = 0;
  if (!fresh.address.empty())
    for (const auto& [k, c] : conns_) same += c->address == fresh.address && !c->closing ? 1 : 0;
  size_t open = 0;
  for (const auto& [k, c] : conns_) open += c->closing ? 0 : 1;
  bool per_address = same > kMaxPerAddress;
  if (!per_address && open <= kMaxConnections) return true;
  connection* victim = nullptr;
  auto older = [](const connection& a, const connection& b) {
    if (a.served != b.served) return !a.served;  // never answered goes first
    return (a.served ? a.idle_since : a.accepted) < (b.served ? b.idle_since : b.accepted);
  };
  for (const auto& [k, c] : conns_) {
    if (c.get() == &fresh || !c->idle() || (per_address && c->address != fresh.address)) continue;
    if (victim == nullptr || older(*c, *victim)) victim = c.get();
  }
  if (victim == nullptr) return false;
  close(*victim);
  return true;
}

void http_server::time_out(connection& c, const char* what, uint64_t ms) {
  c.sock->read_stop();
  c.queue.clear();
  c.close_after = true;
  c.busy = true;
  respond_error(c, 408, nullptr, kInvalidRequest,
                fmt::format("Request Timeout: the request's {} did not arrive within {} s", what, ms / 1000));
}

void http_server::sweep() {
  uint64_t now = uv_now(loop_);
  std::vector<connection*> all;
  for (auto& [k, c] : conns_) all.push_back(k);
  for (connection* c : all) {
    if (c->busy || c->closing || !c->get_stream_session.empty()) continue;
    if (c->header_deadline != 0 && now > c->header_deadline) {
      // A connection that sent nothing at all is closed without a word.
      if (!c->in_message) close(*c);
      else time_out(*c, "headers", kHeaderMs);
    } else if (c->body_deadline != 0 && now > c->body_deadline) {
      time_out(*c, "body", kBodyMs);
    } else if (c->served && c->header_deadline == 0 && c->body_deadline == 0 && c->queue.empty() &&
               now > c->idle_since + kIdleMs) {
      close(*c);
    }
  }
}

void http_server::on_read(connection& c, ssize_t n, const char* data) {
  if (n < 0) {
    close(c);  // the client went away: its calls are cancelled there
    return;
  }
  if (c.closing) return;
  size_t used = http_parser_execute(&c.parser, &settings_, data, static_cast<size_t>(n));
  if (c.closing) return;
  auto err = HTTP_PARSER_ERRNO(&c.parser);
  if (err != HPE_OK || used != static_cast<size_t>(n)) {
    c.sock->read_stop();
    c.queue.clear();
    if (c.busy) {
      close(c);
      return;
    }
    c.close_after = true;
    bool big = err == HPE_HEADER_OVERFLOW || c.header_bytes > kMaxHeaderBytes || c.cur.fields.size() >= kMaxHeaders;
    respond_error(c, big ? 431 : 400, nullptr, kInvalidRequest,
                  big ? fmt::format("request headers too large (at most {} headers, {} bytes)", kMaxHeaders,
                                    kMaxHeaderBytes)
                      : fmt::format("malformed HTTP request: {}", http_errno_description(err)));
    return;
  }
  if (c.queue.size() > kMaxQueued) {
    close(c);
    return;
  }
  if (!c.busy) next_request(c);
}

int http_server::on_message_begin(http_parser* p) {
  auto* c = static_cast<connection*>(p->data);
  c->cur = http_request{};
  c->in_field = false;
  c->header_bytes = 0;
  c->header_deadline = uv_now(c->srv->loop_) + kHeaderMs;
  c->in_message = true;
  return 0;
}

int http_server::on_url(http_parser* p, const char* at, size_t len) {
  auto* c = static_cast<connection*>(p->data);
  c->header_bytes += len;
  if (c->header_bytes > kMaxHeaderBytes) return 1;
  c->cur.url.append(at, len);
  return 0;
}

// A header's name may come in pieces, and so may its value: a name after a value (or the
// first one) starts a new field. A field without a value stays, with an empty one, so that
// an empty repeated header is still counted.
int http_server::on_header_field(http_parser* p, const char* at, size_t len) {
  auto* c = static_cast<connection*>(p->data);
  c->header_bytes += len;
  if (c->header_bytes > kMaxHeaderBytes) return 1;
  if (!c->in_field) {
    if (c->cur.fields.size() >= kMaxHeaders) return 1;
    c->cur.fields.emplace_back();
  }
  c->in_field = true;
  c->cur.fields.back().first += lower(std::string(at, len));
  return 0;
}

int http_server::on_header_value(http_parser* p, const char* at, size_t len) {
  auto* c = static_cast<connection*>(p->data);
  c->header_bytes += len;
  if (c->header_bytes > kMaxHeaderBytes) return 1;
  c->in_field = false;
  if (!c->cur.fields.empty()) c->cur.fields.back().second.append(at, len);
  return 0;
}

int http_server::on_headers_complete(http_parser* p) {
  auto* c = static_cast<connection*>(p->data);
  for (auto& [name, value] : c->cur.fields) {
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.pop_back();
    ++c->cur.counts[name];
    auto& v = c->cur.headers[name];
    if (c->cur.counts[name] > 1) v += ", ";  // a repeated header: its values in one list
    v += value;
  }
  c->cur.fields.clear();
  c->cur.refused = c->srv->refuse(c->cur);
  c->header_deadline = 0;
  c->body_deadline = uv_now(c->srv->loop_) + kBodyMs;
  return 0;
}

int http_server::on_body(http_parser* p, const char* at, size_t len) {
  auto* c = static_cast<connection*>(p->data);
  if (c->cur.too_large || c->cur.refused) return 0;
  if (c->cur.body.size() + len > kMaxMessage) {
    // Read on and drop the rest, so that the answer reaches a client still sending.
    c->cur.too_large = true;
    c->cur.body.clear();
    c->cur.body.shrink_to_fit();
    return 0;
  }
  c->cur.body.append(at, len);
  return 0;
}

int http_server::on_message_complete(http_parser* p) {
  auto* c = static_cast<connection*>(p->data);
  c->cur.method = p->method;
  c->cur.keep_alive = http_should_keep_alive(p) != 0;
  c->body_deadline = 0;
  c->in_message = false;
  c->queue.push_back(std::move(c->cur));
  c->cur = http_request{};
  return 0;
}

void http_server::next_request(connection& c) {
  while (!c.busy && !c.closing && !c.queue.empty()) {
    http_request r = std::move(c.queue.front());
    c.queue.pop_front();
    if (!r.keep_alive) c.close_after = true;
    c.busy = true;
    handle(c, r);
  }
}

void http_server::write(connection& c, std::string data) {
  if (c.closing) return;
  if (c.sock->write(std::move(data)) != 0) close(c);
}

void http_server::respond(connection& c, int status, const std::string& body, const std::vector<std::string>& extra) {
  std::string head = fmt::format("HTTP/1.1 {} {}\r\n", status, status_text(status));
  for (const auto& h : extra) head += h + "\r\n";
  if (!body.empty()) head += "Content-Type: application/json\r\n";
  head += fmt::format("Content-Length: {}\r\n", body.size());
  if (c.close_after) head += "Connection: close\r\n";
  head += "\r\n";
  write(c, head + body);
  end_response(c);
}

void http_server::respond_error(connection& c, int status, const json& id, int code, const std::string& message,
                                const std::vector<std::string>& extra) {
  respond(c, status, to_line(error_response(id, code, message)), extra);
}

void http_server::start_sse(connection& c, const std::vector<std::string>& extra) {
  std::string head =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
      "X-Accel-Buffering: no\r\nTransfer-Encoding: chunked\r\n";
  for (const auto& h : extra) head += h + "\r\n";
  if (c.close_after) head += "Connection: close\r\n";
  write(c, head + "\r\n");
  c.sse = true;
}

void http_server::sse_event(connection& c, const json& j) {
  std::string ev = "event: message\ndata: " + to_line(j) + "\n\n";
  write(c, fmt::format("{:x}\r\n{}\r\n", ev.size(), ev));
}

void http_server::end_response(connection& c) {
  if (c.sse) write(c, "0\r\n\r\n");
  c.sse = false;
  c.busy = false;
  c.served = true;
  c.idle_since = uv_now(loop_);
  c.call_session.clear();
  if (c.close_after) {
    // Closing after the writes queued before it: closing at once would drop them, so shut
    // down first. The write above may have closed it already.
    if (c.sock == nullptr) return;
    if (c.sock->shutdown([this, &c] { close(c); }) != 0) {
      close(c);
      return;
    }
    c.closing = true;  // nothing more is read or written
    c.sock->read_stop();
    return;
  }
  next_request(c);
}

void http_server::close(connection& c) {
  if (c.sock == nullptr) return;
  c.closing = true;
  c.sock.reset();
  core_.cancel_owner(c.id);
  if (!c.get_stream_session.empty())
    if (auto s = sessions_.find(c.get_stream_session); s != sessions_.end()) s->second.streams.erase(&c);
  // Callers up the stack may still look at it: it is freed on the loop's next turn.
  auto it = conns_.find(&c);
  if (it == conns_.end()) return;
  closed_.push_back(std::move(it->second));
  conns_.erase(it);
  queue_.post([this] { closed_.clear(); });
}

}  // namespace http_transport

int run_http(const server_options& opts, const http_options& http) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  int rc;
  {
    http_transport::http_server srv(&loop, opts, http);
    rc = srv.listen_or_fail();
    if (rc != 0) srv.stop();
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&loop) != 0) return 1;
  return rc;
}

}  // namespace sbsh::mcp
