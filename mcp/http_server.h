// The Streamable HTTP transport's server, shared by its two files: http.cpp (listening,
// connections, parsing, writing, and the bounds on each client) and http_requests.cpp (what
// a request must carry to be served, and the MCP endpoint's methods and sessions). Private
// to mcp.
#pragma once

#include <http_parser.h>
#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "mcp/mcp.h"
#include "uv/handles.h"
#include "uv/loop_queue.h"

namespace sbsh::mcp::http_transport {

// Connections that carry no call and no stream are closed to make room, so these caps hold
// the calls (kMaxCalls) and the streams with room to spare for new requests.
constexpr size_t kMaxConnections = 256;
constexpr size_t kMaxPerAddress = 32;  // from one non-loopback address (--allow-remote)
constexpr size_t kMaxStreams = 32;     // GET streams, all sessions together
constexpr size_t kMaxStreamsPerSession = 4;
constexpr size_t kMaxHeaders = 64;
constexpr size_t kMaxHeaderBytes = size_t{64} * 1024;
constexpr size_t kMaxSessions = 256;
constexpr size_t kMaxQueued = 8;              // pipelined requests waiting on one connection
constexpr uint64_t kHeaderMs = 10'000;        // from a request's first byte (or the accept) to its last header
constexpr uint64_t kBodyMs = 30'000;          // from the last header to the body's end
constexpr uint64_t kIdleMs = 60'000;          // a keep-alive connection between requests
constexpr uint64_t kSessionIdleMs = 600'000;  // a session unused this long may make room for a new one

std::string lower(std::string s);

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
  std::map<std::string, std::string> headers;               // once all have: repeated ones joined by ", "
  std::map<std::string, int> counts;                        // how often each name came
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

class http_server;

struct http_session {
  peer_state peer;
  uint64_t last_used = 0;                // uv_now of its last request
  std::set<struct connection*> streams;  // GET streams
};

// One client connection, owned by http_server::conns_; it owns its socket. Once closed it
// waits in http_server::closed_ until the loop's next turn, so that a caller up the stack
// may still look at it.
struct connection {
  uv::handle_ptr<uv::stream> sock;
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
  void on_connection(int status);
  void on_read(connection& c, ssize_t n, const char* data);
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
  uv::loop_queue queue_;
  server core_;
  uv::handle_ptr<uv::stream> listener_;
  // What Host and Origin must name, "host:port" in lower case (the port left out too when it
  // is 80): this server's own address. Empty on a unix socket.
  std::set<std::string> authorities_;
  std::string authority_text_;  // those, for an error
  bool owns_path_ = false;      // the unix socket at the path is ours, to remove at the end
  uv::handle_ptr<uv::timer> ticker_;
  uv::handle_ptr<uv::signal_watch> sigint_, sigterm_;
  std::map<connection*, std::unique_ptr<connection>> conns_;
  std::vector<std::unique_ptr<connection>> closed_;  // freed on the loop's next turn
  std::map<std::string, http_session> sessions_;
  uint64_t next_id_ = 1;
  bool stopping_ = false;
  http_parser_settings settings_{};
};

}  // namespace sbsh::mcp::http_transport
