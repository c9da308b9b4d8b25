// The `logs` replies under way for one table (background processes, kept commands): each a
// log_stream paced by its client, pumped again when that client has read what is queued, or on
// the next turn of the loop. When one has sent all that was logged, its owner's `done` says
// what follows, in that same turn: a live follower, or the reply's end.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "daemon/log_stream.h"
#include "uv/handles.h"

namespace sbsh::daemon {

class service_context;
class client_conn;

// A client following a log live (logs -f), once its reply has sent what was logged.
struct log_follower {
  uint64_t serial, req;
  bool out, err;  // the streams it asked for
};
// Sends `data`, just written to stream `stream_no`, to the followers that asked for it; drops
// those whose client has gone, and those that fell more than kMaxFollowerQueue behind (told
// too_slow).
void feed_followers(service_context& srv, std::vector<log_follower>& followers, int stream_no, std::string_view data);

class log_replies {
 public:
  // A reply that has sent all: to client c's request `req`, about `id` of the owner's.
  struct finished {
    client_conn& c;
    uint64_t req, id;
    bool follow, out, err;
  };
  log_replies(service_context& srv, std::function<void(const finished&)> done) : srv_(srv), done_(std::move(done)) {}

  void add(client_conn& c, uint64_t req, uint64_t id, const std::vector<log_stream::source>& sources, uint64_t tail,
           bool follow, bool out, bool err);
  void client_drained(client_conn& c);
  // A cancel of request `req` while it still sends what was logged: dropped, and the id it
  // was about returned (the owner answers with the reply's end); nullopt when it is no such.
  std::optional<uint64_t> cancel(client_conn& c, uint64_t req);

 private:
  struct reply {
    std::unique_ptr<log_stream> stream;
    bool out, err;
    bool again = false;
  };
  void pump(std::list<reply>::iterator it);
  void pump_again_soon();

  service_context& srv_;
  std::function<void(const finished&)> done_;
  std::list<reply> replies_;
  uv::handle_ptr<uv::timer> timer_;
};

}  // namespace sbsh::daemon
