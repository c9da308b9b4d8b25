// Background-process requests of libsbsh: start, list, kill, wait, logs.
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "client/connection_impl.h"

namespace sbsh::client {

using ipc::frame_builder;
using ipc::msg_type;

namespace {

proc_info decode_proc(const msgpack::object& o) {
  proc_info p;
  if (o.type != msgpack::type::MAP) return p;
  for (uint32_t k = 0; k < o.via.map.size; ++k) {
    const auto& kv = o.via.map.ptr[k];
    if (kv.key.type != msgpack::type::STR) continue;
    std::string_view key(kv.key.via.str.ptr, kv.key.via.str.size);
    const auto& v = kv.val;
    auto s = [&] { return v.type == msgpack::type::STR ? std::string(v.via.str.ptr, v.via.str.size) : std::string(); };
    auto n = [&]() -> std::optional<int64_t> {
      if (v.type == msgpack::type::POSITIVE_INTEGER) return static_cast<int64_t>(v.via.u64);
      if (v.type == msgpack::type::NEGATIVE_INTEGER) return v.via.i64;
      return std::nullopt;
    };
    if (key == "id") p.id = static_cast<uint64_t>(n().value_or(0));
    else if (key == "name") p.name = s();
    else if (key == "session") p.session = s();
    else if (key == "command") p.command = s();
    else if (key == "state") p.state = s();
    else if (key == "pid") p.pid = n().value_or(0);
    else if (key == "exit_code" && n()) p.exit_code = static_cast<int>(*n());
    else if (key == "signal" && n()) p.signal = static_cast<int>(*n());
    else if (key == "started_at_ms") p.started_at_ms = n().value_or(0);
    else if (key == "ended_at_ms") p.ended_at_ms = n().value_or(0);
    else if (key == "error") p.error = s();
    else if (key == "log") p.log_path = s();
  }
  return p;
}

result<proc_info> proc_reply(result<ipc::envelope> r) {
  if (!r) return r.err();
  const auto* o = r->msg.find("proc");
  if (o == nullptr) return make_error("protocol", "sbshd sent no process in its answer");
  return decode_proc(*o);
}

}  // namespace

result<proc_info> connection::start(const start_options& opts) {
  uint64_t id = p_->next_id++;
  frame_builder f(msg_type::proc_start, id);
  if (!opts.session.empty()) f.str("session", opts.session);
  if (!opts.name.empty()) f.str("name", opts.name);
  f.str("command", opts.command);
  if (!opts.cwd.empty()) f.str("cwd", p_->absolute(opts.cwd));
  if (!opts.env.empty()) f.str_array("env", opts.env);
  std::string scwd = opts.session_cwd;
  if (scwd.empty() && !p_->remote) {
    char buf[4096];
    if (::getcwd(buf, sizeof buf) != nullptr) scwd = buf;
  }
  f.str("session_cwd", scwd);
  return proc_reply(p_->call(std::move(f), id));
}

result<std::vector<proc_info>> connection::processes(bool include_finished) {
  uint64_t id = p_->next_id++;
  frame_builder f(msg_type::proc_list, id);
  f.boolean("all", include_finished);
  auto r = p_->call(std::move(f), id);
  if (!r) return r.err();
  std::vector<proc_info> out;
  const auto* arr = r->msg.find("procs");
  if (arr != nullptr && arr->type == msgpack::type::ARRAY)
    for (uint32_t i = 0; i < arr->via.array.size; ++i) out.push_back(decode_proc(arr->via.array.ptr[i]));
  return out;
}

result<proc_info> connection::kill(const std::string& proc, int signal) {
  uint64_t id = p_->next_id++;
  frame_builder f(msg_type::proc_kill, id);
  f.str("proc", proc).i64("signal", signal);
  return proc_reply(p_->call(std::move(f), id));
}

result<proc_info> connection::wait(const std::string& proc, std::chrono::milliseconds timeout) {
  uint64_t id = p_->next_id++;
  frame_builder f(msg_type::proc_wait, id);
  f.str("proc", proc);
  if (timeout.count() > 0) f.u64("timeout_ms", static_cast<uint64_t>(timeout.count()));
  return proc_reply(p_->call(std::move(f), id));
}

result<proc_info> connection::logs(const std::string& proc, const logs_options& opts,
                                   const std::function<void(stream, std::string_view)>& sink) {
  uint64_t id = p_->next_id++;
  frame_builder f(msg_type::proc_logs, id);
  f.str("proc", proc).boolean("follow", opts.follow).boolean("stdout", opts.out).boolean("stderr", opts.err);
  if (opts.tail > 0) f.u64("tail", opts.tail);
  if (auto s = p_->send(f.finish()); !s) return s.err();
  bool cancelled = false;
  for (;;) {
    if (opts.follow && opts.cancel_fd >= 0 && !cancelled && !p_->ch.buffered()) {
      pollfd pf[2] = {{p_->ch.fd(), POLLIN, 0}, {opts.cancel_fd, POLLIN, 0}};
      if (::poll(pf, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return make_error("io", fmt::format("poll: {}", std::strerror(errno)));
      }
      if (pf[1].revents != 0) {
        unsigned char b;
        (void)!::read(opts.cancel_fd, &b, 1);
        cancelled = true;  // sbshd answers with logs_end; frames before it still count
        if (auto s = p_->ch.send(frame_builder(msg_type::cancel, id).finish()); !s) return s.err();
      }
      if (pf[0].revents == 0) continue;
    }
    auto env = p_->ch.recv();
    if (!env) return env.err();
    const auto& m = env->msg;
    if (m.id() != id) continue;
    if (m.type() == msg_type::error) return error_from(m, "sbshd refused");
    if (m.type() == msg_type::output) {
      if (auto c = output_chunk(m)) sink(c->first, c->second);
      continue;
    }
    if (m.type() == msg_type::logs_end) {
      const auto* o = m.find("proc");
      return o != nullptr ? decode_proc(*o) : proc_info{};
    }
  }
}

}  // namespace sbsh::client
