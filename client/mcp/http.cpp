// The Streamable HTTP transport: one endpoint, /mcp, on a TCP port or a unix socket, parsed
// by libhttp-parser on a libuv loop.
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
#include <http_parser.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "client/mcp/loop_queue.h"
#include "client/mcp/mcp.h"

namespace sbsh::mcp {

namespace {

// Connections that carry no call and no stream are closed to make room, so these caps hold
// the calls (kMaxCalls) and the streams with room to spare for new requests.
constexpr size_t kMaxConnections = 256;
constexpr size_t kMaxPerAddress = 32;  // from one non-loopback address (--allow-remote)
constexpr size_t kMaxStreams = 32;     // GET streams, all sessions together
constexpr size_t kMaxStreamsPerSession = 4;
constexpr size_t kMaxHeaders = 64;
constexpr size_t kMaxHeaderBytes = size_t{64} * 1024;
constexpr size_t kMaxSessions = 256;
constexpr size_t kMaxQueued = 8;  // pipelined requests waiting on one connection
constexpr uint64_t kHeaderMs = 10'000;         // from a request's first byte (or the accept) to its last header
constexpr uint64_t kBodyMs = 30'000;           // from the last header to the body's end
constexpr uint64_t kIdleMs = 60'000;           // a keep-alive connection between requests
constexpr uint64_t kSessionIdleMs = 600'000;   // a session unused this long may make room for a new one

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Why a request is refused before it is handled: its status and what the body says.
struct refusal {
  int status = 0;
  std::string message;
  std::vector<std::string> extra;  // header lines
};

struct http_request {
  unsigned method = 0;
  std::string url;
  std::vector<std::pair<std::string, std::string>> fields;  // as they arrive, names in lower case
  std::map<std::string, std::string> headers;                // once all have: repeated ones joined by ", "
  std::map<std::string, int> counts;                         // how often each name came
  std::string body;
  bool keep_alive = true;
  bool too_large = false;
  // Decided once its headers are complete, so that the body of a request that will be
  // refused (a client without the token) is read and dropped, never kept.
  std::optional<refusal> refused;
  [[nodiscard]] const std::string* header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? nullptr : &it->second;
  }
  [[nodiscard]] int count(const std::string& name) const {
    auto it = counts.find(name);
    return it == counts.end() ? 0 : it->second;
  }
};

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

class http_server;

struct http_session {
  peer_state peer;
  uint64_t last_used = 0;                // uv_now of its last request
  std::set<struct connection*> streams;  // GET streams
};

// One client connection. Owned by http_server::conns_ until its handle's close callback.
struct connection {
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_stream_t stream;
    uv_handle_t handle;
  } h{};
  http_server* srv = nullptr;
  uint64_t id = 0;
  http_parser parser{};
  http_request cur;
  bool in_field = false;  // the last header callback was a name's
  size_t header_bytes = 0;
  std::deque<http_request> queue;
  bool busy = false;  // a response is under way
  bool sse = false;   // the response under way is an SSE stream
  bool closing = false;
  bool close_after = false;        // once the response under way is written
  std::string get_stream_session;  // non-empty: this is a session's GET stream
  std::string call_session;        // the session of the request under way, if any
  std::string address;             // the peer's, for kMaxPerAddress; empty on loopback and unix sockets
  // Deadlines (uv_now, 0: none), checked by the ticker while no response is under way.
  uint64_t header_deadline = 0;  // set at the accept and at a request's first byte
  uint64_t body_deadline = 0;    // set when its headers are complete
  uint64_t idle_since = 0;       // the end of the last response
  uint64_t accepted = 0;
  bool served = false;      // a request has been answered on it
  bool in_message = false;  // a request's first byte has come, its last not yet
  // Whether closing it to make room ends nothing a client waits for.
  [[nodiscard]] bool idle() const { return !busy && !closing && queue.empty() && get_stream_session.empty(); }
};

struct write_req {
  uv_write_t req{};
  std::string data;
};

// A TCP peer's address, for kMaxPerAddress; empty on loopback and on a unix socket.
std::string peer_address(const connection& c) {
  if (c.h.handle.type == UV_NAMED_PIPE) return {};
  sockaddr_storage peer{};
  int len = sizeof peer;
  if (uv_tcp_getpeername(&c.h.tcp, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return {};
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

class http_server {
 public:
  http_server(uv_loop_t* loop, const server_options& opts, http_options http)
      : loop_(loop),
        http_(std::move(http)),
        queue_(loop),
        core_(opts, [this](std::function<void()> f) { queue_.post(std::move(f)); }) {}

  int listen_or_fail();
  // Bind the listener to --http's socket path, or to its HOST:PORT; `url` says where it
  // listens. A libuv status, or kRefused once the reason is printed.
  int bind_unix(const std::string& where, std::string& url);
  int bind_tcp(const std::string& where, std::string& url);
  void allow_authorities(const std::string& host, int port);
  static constexpr int kRefused = 1;
  void stop();

 private:
  static void on_connection(uv_stream_t* s, int status);
  static void on_alloc(uv_handle_t*, size_t suggested, uv_buf_t* buf);
  static void on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf);
  static int on_message_begin(http_parser* p);
  static int on_url(http_parser* p, const char* at, size_t len);
  static int on_header_field(http_parser* p, const char* at, size_t len);
  static int on_header_value(http_parser* p, const char* at, size_t len);
  static int on_headers_complete(http_parser* p);
  static int on_body(http_parser* p, const char* at, size_t len);
  static int on_message_complete(http_parser* p);

  // Accepting: whether the peer may connect at all (a unix socket's uid), and room for it.
  bool same_user(connection& c);
  bool make_room(const connection& fresh);
  void sweep();  // the ticker's: requests too slow, connections idle too long
  void time_out(connection& c, const char* what, uint64_t ms);

  void next_request(connection& c);
  void handle(connection& c, const http_request& r);
  // Host, Origin and the token: why the request is refused, if it is.
  [[nodiscard]] std::optional<refusal> refuse(const http_request& r) const;
  void handle_get(connection& c, const http_request& r);
  void handle_post(connection& c, const http_request& r);
  // initialize's new session, or null once it has answered (503) that there is no room.
  http_session* new_session(connection& c, const json& id, std::string& sid);
  void write(connection& c, std::string data);
  void respond(connection& c, int status, const std::string& body, const std::vector<std::string>& extra = {});
  void respond_error(connection& c, int status, const json& id, int code, const std::string& message,
                     const std::vector<std::string>& extra = {});
  void start_sse(connection& c, const std::vector<std::string>& extra);
  void sse_event(connection& c, const json& j);
  void end_response(connection& c);
  void close(connection& c);
  void end_session(const std::string& sid);

  uv_loop_t* loop_;
  http_options http_;
  loop_queue queue_;
  server core_;
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_stream_t stream;
    uv_handle_t handle;
  } listener_{};
  bool listening_ = false;  // the listener handle exists
  // What Host and Origin must name, "host:port" in lower case (the port left out too when it
  // is 80): this server's own address. Empty on a unix socket.
  std::set<std::string> authorities_;
  std::string authority_text_;  // those, for an error
  bool owns_path_ = false;  // the unix socket at the path is ours, to remove at the end
  uv_timer_t ticker_{};
  uv_signal_t sigint_{}, sigterm_{};
  std::map<connection*, std::unique_ptr<connection>> conns_;
  std::map<std::string, http_session> sessions_;
  uint64_t next_id_ = 1;
  bool stopping_ = false;
  bool started_ = false;  // the ticker and signal handles exist
  http_parser_settings settings_{};
};

int http_server::bind_unix(const std::string& where, std::string& url) {
  sockaddr_un sa{};
  if (where.size() >= sizeof sa.sun_path) {
    std::fputs(fmt::format("sbsh: --http {}: a socket path is at most {} bytes\n", where, sizeof sa.sun_path - 1)
                   .c_str(),
               stderr);
    return kRefused;
  }
  uv_pipe_init(loop_, &listener_.pipe, 0);
  listener_.handle.data = this;
  listening_ = true;  // stop() closes it
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
  int rc = uv_pipe_bind(&listener_.pipe, where.c_str());
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
  uv_tcp_init(loop_, &listener_.tcp);
  listener_.handle.data = this;
  listening_ = true;
  int rc = uv_tcp_bind(&listener_.tcp, reinterpret_cast<sockaddr*>(&ss), 0);
  if (rc == 0) {
    sockaddr_storage bound{};
    int len = sizeof bound;
    uv_tcp_getsockname(&listener_.tcp, reinterpret_cast<sockaddr*>(&bound), &len);
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
  if (rc == 0) rc = uv_listen(&listener_.stream, 128, on_connection);
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
  uv_timer_init(loop_, &ticker_);
  ticker_.data = this;
  uv_timer_start(
      &ticker_,
      [](uv_timer_t* t) {
        auto* self = static_cast<http_server*>(t->data);
        self->core_.tick();
        self->sweep();
      },
      500, 500);
  for (auto* s : {&sigint_, &sigterm_}) {
    uv_signal_init(loop_, s);
    s->data = this;
  }
  auto on_signal = [](uv_signal_t* s, int) { static_cast<http_server*>(s->data)->stop(); };
  uv_signal_start(&sigint_, on_signal, SIGINT);
  uv_signal_start(&sigterm_, on_signal, SIGTERM);
  started_ = true;
  return 0;
}

// Ends serving: no new connections; every call is cancelled; once the last has finished,
// every handle closes and the loop ends.
void http_server::stop() {
  if (stopping_) return;
  stopping_ = true;
  if (listening_) uv_close(&listener_.handle, nullptr);
  if (owns_path_) ::unlink(http_.listen.c_str());
  if (started_)
    for (auto* s : {&sigint_, &sigterm_}) uv_close(reinterpret_cast<uv_handle_t*>(s), nullptr);
  auto finish = [this] {
    if (started_) uv_close(reinterpret_cast<uv_handle_t*>(&ticker_), nullptr);
    std::vector<connection*> all;
    for (auto& [k, c] : conns_) all.push_back(k);
    for (auto* c : all) close(*c);
    queue_.close();
  };
  core_.when_idle(finish);
  core_.cancel_all();
  if (core_.idle()) finish();
}

void http_server::on_connection(uv_stream_t* s, int status) {
  auto* self = static_cast<http_server*>(s->data);
  if (status != 0 || self->stopping_) return;
  auto c = std::make_unique<connection>();
  connection* raw = c.get();
  raw->srv = self;
  raw->id = self->next_id_++;
  raw->accepted = uv_now(self->loop_);
  raw->header_deadline = raw->accepted + kHeaderMs;
  if (s->type == UV_NAMED_PIPE) uv_pipe_init(self->loop_, &raw->h.pipe, 0);
  else uv_tcp_init(self->loop_, &raw->h.tcp);
  raw->h.handle.data = raw;
  self->conns_.emplace(raw, std::move(c));
  if (uv_accept(s, &raw->h.stream) != 0) {
    self->close(*raw);
    return;
  }
  http_parser_init(&raw->parser, HTTP_REQUEST);
  raw->parser.data = raw;
  if (!self->same_user(*raw)) return;
  raw->address = peer_address(*raw);
  if (!self->make_room(*raw)) {
    raw->close_after = true;
    self->respond_error(*raw, 503, nullptr, kInternalError,
                        fmt::format("too many connections carrying calls or streams (at most {}); try again later",
                                    kMaxConnections),
                        {"Retry-After: 5"});
    return;
  }
  uv_read_start(&raw->h.stream, on_alloc, on_read);
}

// A unix socket serves only the uid that runs sbsh mcp, as sbshd's does: its mode 0600
// keeps others out already, and this holds also when the mode was changed. A TCP peer
// proves itself by the token instead.
bool http_server::same_user(connection& c) {
  if (c.h.handle.type != UV_NAMED_PIPE) return true;
  uv_os_fd_t fd = -1;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (uv_fileno(&c.h.handle, &fd) == 0 && ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
      cred.uid == ::getuid())
    return true;
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
  uv_read_stop(&c.h.stream);
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

void http_server::on_alloc(uv_handle_t*, size_t, uv_buf_t* buf) {
  static thread_local char chunk[65536];
  *buf = uv_buf_init(chunk, sizeof chunk);
}

void http_server::on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
  auto* c = static_cast<connection*>(s->data);
  http_server* self = c->srv;
  if (n < 0) {
    self->close(*c);  // the client went away: its calls are cancelled there
    return;
  }
  if (n == 0 || c->closing) return;
  size_t used = http_parser_execute(&c->parser, &self->settings_, buf->base, static_cast<size_t>(n));
  if (c->closing) return;
  auto err = HTTP_PARSER_ERRNO(&c->parser);
  if (err != HPE_OK || used != static_cast<size_t>(n)) {
    uv_read_stop(&c->h.stream);
    c->queue.clear();
    if (c->busy) {
      self->close(*c);
      return;
    }
    c->close_after = true;
    bool big = err == HPE_HEADER_OVERFLOW || c->header_bytes > kMaxHeaderBytes || c->cur.fields.size() >= kMaxHeaders;
    self->respond_error(*c, big ? 431 : 400, nullptr, kInvalidRequest,
                        big ? fmt::format("request headers too large (at most {} headers, {} bytes)", kMaxHeaders,
                                          kMaxHeaderBytes)
                            : fmt::format("malformed HTTP request: {}", http_errno_description(err)));
    return;
  }
  if (c->queue.size() > kMaxQueued) {
    self->close(*c);
    return;
  }
  if (!c->busy) self->next_request(*c);
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
  auto* w = new write_req;
  w->data = std::move(data);
  w->req.data = w;
  uv_buf_t b = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
  int rc =
      uv_write(&w->req, &c.h.stream, &b, 1, [](uv_write_t* req, int) { delete static_cast<write_req*>(req->data); });
  if (rc != 0) {
    delete w;
    close(c);
  }
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
    // Closing after the writes queued before it: uv_close would drop them, so shut down first.
    auto* req = new uv_shutdown_t;
    req->data = &c;
    if (uv_shutdown(req, &c.h.stream, [](uv_shutdown_t* r, int) {
          auto* conn = static_cast<connection*>(r->data);
          delete r;
          conn->srv->close(*conn);
        }) != 0) {
      delete req;
      close(c);
    }
    c.closing = true;  // nothing more is read or written
    uv_read_stop(&c.h.stream);
    return;
  }
  next_request(c);
}

void http_server::close(connection& c) {
  if (uv_is_closing(&c.h.handle)) return;
  c.closing = true;
  core_.cancel_owner(c.id);
  if (!c.get_stream_session.empty())
    if (auto s = sessions_.find(c.get_stream_session); s != sessions_.end()) s->second.streams.erase(&c);
  uv_close(&c.h.handle, [](uv_handle_t* h) {
    auto* conn = static_cast<connection*>(h->data);
    conn->srv->conns_.erase(conn);
  });
}

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
    return refusal{400, fmt::format("Bad Request: give exactly one Host header, not {}{}", r.count("host"),
                                    authority_text_.empty() ? "" : fmt::format(" (Host: {})", authority_text_)), {}};
  if (!http_.allow_remote) {
    // Against DNS rebinding (a web page whose name resolves to this address): the whole Host,
    // and the whole Origin, must name this server.
    if (!authorities_.empty() && !authorities_.contains(lower(*host)))
      return refusal{403, fmt::format("Forbidden: Host '{}' is not this server's address; give Host: {} (DNS "
                                      "rebinding protection)",
                                      clip(*host), authority_text_), {}};
    if (const std::string* origin = r.header("origin"); origin != nullptr) {
      auto authority = r.count("origin") == 1 ? origin_authority(*origin) : std::nullopt;
      bool ok = authority && (authorities_.empty() ? loopback_name(*authority) : authorities_.contains(*authority));
      if (!ok)
        return refusal{403, fmt::format("Forbidden: Origin '{}' may not use this server; only http://{} may (DNS "
                                        "rebinding protection)",
                                        clip(*origin), authorities_.empty() ? "localhost" : authority_text_), {}};
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
  if (r.refused) return respond_error(c, r.refused->status, nullptr, kInvalidRequest, r.refused->message,
                                      r.refused->extra);
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
  auto out = [this, conn, use_sse, extra, modern](const json& j) {
    if (j.is_null()) {
      // Cancelled: no answer is sent, and the response held open ends with the connection.
      if (conn->sse) {
        conn->close_after = true;
        end_response(*conn);
      } else {
        close(*conn);
      }
      return;
    }
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

}  // namespace

int run_http(const server_options& opts, const http_options& http) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  int rc;
  {
    http_server srv(&loop, opts, http);
    rc = srv.listen_or_fail();
    if (rc != 0) srv.stop();
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&loop) != 0) return 1;
  return rc;
}

}  // namespace sbsh::mcp
