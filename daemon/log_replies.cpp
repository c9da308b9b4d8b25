#include "daemon/log_replies.h"

#include <algorithm>

#include "daemon/client_conn.h"
#include "daemon/service_context.h"
#include "ipc/bounds.h"
#include "ipc/messages.h"

namespace sbsh::daemon {

void feed_followers(service_context& srv, std::vector<log_follower>& followers, int stream_no, std::string_view data) {
  std::erase_if(followers, [&](const log_follower& f) {
    if ((stream_no == ipc::kStdout && !f.out) || (stream_no == ipc::kStderr && !f.err)) return false;
    auto* c = srv.client_by_serial(f.serial);
    if (c == nullptr) return true;
    if (c->queued_bytes() > ipc::kMaxFollowerQueue) {
      c->send_error(f.req, ipc::errc::too_slow, "the log reader fell more than 16 MiB behind; run 'sbsh logs' again");
      return true;
    }
    c->send(ipc::encode(ipc::msg::output{static_cast<uint64_t>(stream_no), {data}}, f.req));
    return false;
  });
}

void log_replies::add(client_conn& c, uint64_t req, uint64_t id, const std::vector<log_stream::source>& sources,
                      uint64_t tail, bool follow, bool out, bool err) {
  replies_.push_back({std::make_unique<log_stream>(c.serial(), req, id, sources, tail, follow), out, err});
  pump(std::prev(replies_.end()));
}

void log_replies::pump(std::list<reply>::iterator it) {
  log_stream& s = *it->stream;
  auto* c = srv_.client_by_serial(s.serial());
  if (c == nullptr) {
    replies_.erase(it);
    return;
  }
  auto progress = s.pump({[c] { return c->queued_bytes(); }, [c](std::string f) { c->send(std::move(f)); }});
  it->again = progress == log_stream::progress::more;
  if (it->again) pump_again_soon();
  if (progress != log_stream::progress::done) return;
  // Everything up to now is sent: a follower takes it from here, in this same turn of the
  // loop, so that nothing written in between is missed.
  finished f{*c, s.req(), s.proc(), s.follow(), it->out, it->err};
  replies_.erase(it);
  done_(f);
}

void log_replies::pump_again_soon() {
  if (timer_ == nullptr) timer_ = uv::make_handle<uv::timer>(srv_.loop());
  timer_->start(0, [this] {
    std::vector<std::list<reply>::iterator> due;
    for (auto it = replies_.begin(); it != replies_.end(); ++it)
      if (it->again) due.push_back(it);
    for (auto it : due) pump(it);  // each erases only itself
  });
}

void log_replies::client_drained(client_conn& c) {
  std::vector<std::list<reply>::iterator> due;
  for (auto it = replies_.begin(); it != replies_.end(); ++it)
    if (it->stream->serial() == c.serial() && !it->again) due.push_back(it);
  for (auto it : due) pump(it);
}

std::optional<uint64_t> log_replies::cancel(client_conn& c, uint64_t req) {
  auto it = std::find_if(replies_.begin(), replies_.end(),
                         [&](const reply& r) { return r.stream->serial() == c.serial() && r.stream->req() == req; });
  if (it == replies_.end()) return std::nullopt;
  uint64_t id = it->stream->proc();
  replies_.erase(it);
  return id;
}

}  // namespace sbsh::daemon
