// Request handlers, one per message family, and the table that routes messages to them.
//   hello              handshake and version check
//   exec family        exec, stdin_data, stdin_eof, cancel, release
//   session family     handlers_session.cpp
//   process family     proc_table.cpp (start, list, kill, wait, logs)
//   status, shutdown   the daemon itself
#include <signal.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "daemon/handlers.h"

namespace sbsh::daemon {

namespace {

using ipc::frame_builder;
using ipc::msg_type;

// Bounds on what one connection may have in flight (bounds.h).
using ipc::kMaxJobsPerClient;
using ipc::kMaxTextPerClient;

void on_hello(server&, client_conn& c, ipc::envelope& env) {
  auto v = env.msg.get_u64("version");
  if (!v || !v.value()) {
    c.send_error(env.msg.id(), ipc::err::bad_request, "hello needs a 'version' integer");
    return;
  }
  if (*v.value() != ipc::kProtocolVersion) {
    c.send_error(env.msg.id(), ipc::err::version_mismatch,
                 fmt::format("this sbshd speaks protocol version {}, the client speaks {}; use an sbsh "
                             "client from the same release as sbshd ({})",
                             ipc::kProtocolVersion, *v.value(), SBSH_VERSION));
    return;
  }
  c.greeted = true;
  frame_builder f(msg_type::welcome, env.msg.id());
  f.u64("version", ipc::kProtocolVersion).str("server", "sbshd " SBSH_VERSION).i64("pid", ::getpid());
  c.send(f.take());
}

void on_exec(server& srv, client_conn& c, ipc::envelope& env) {
  auto job = parse_exec(env);
  if (!job) {
    c.send_error(env.msg.id(), job.err().code, job.err().message);
    return;
  }
  auto& j = *job.value();
  if (c.jobs.count(j.id) != 0) {
    c.send_error(j.id, ipc::err::bad_request, fmt::format("request id {} is already in use on this connection", j.id));
    return;
  }
  if (c.jobs.size() >= kMaxJobsPerClient) {
    c.send_error(j.id, ipc::err::bad_request,
                 fmt::format("this connection already has {} commands in flight; wait for some to finish",
                             kMaxJobsPerClient));
    return;
  }
  if (c.text_bytes + j.text.size() > kMaxTextPerClient) {
    c.send_error(j.id, ipc::err::bad_request,
                 fmt::format("this connection already has {} MiB of command text queued; wait for some "
                             "commands to finish",
                             c.text_bytes >> 20));
    return;
  }
  auto s = srv.get_or_create_session(j.session, j.session_cwd);
  if (!s) {
    c.send_error(j.id, s.err().code, s.err().message);
    return;
  }
  if (j.io_fds) {
    auto& fds = env.fds;
    size_t i = 0;
    j.out_w = std::move(fds[i++]);
    j.err_w = std::move(fds[i++]);
    if (j.has_stdin) j.in_r = std::move(fds[i++]);
    if (i < fds.size()) {
      j.out_r = std::move(fds[i++]);
      j.err_r = std::move(fds[i++]);
    }
  }
  j.client = &c;
  c.jobs.emplace(j.id, client_conn::job_ref{j.session, j.text.size()});
  c.text_bytes += j.text.size();
  c.recount_jobs();
  (*s)->enqueue(std::move(job.value()));
}

session* job_session(server& srv, client_conn& c, uint64_t id) {
  auto it = c.jobs.find(id);
  return it == c.jobs.end() ? nullptr : srv.find_session(it->second.session);
}

void on_stdin(server& srv, client_conn& c, ipc::envelope& env) {
  auto* s = job_session(srv, c, env.msg.id());
  if (s == nullptr) return;  // the command already ended: its input is not wanted
  bool eof = env.msg.type() == msg_type::stdin_eof;
  std::string_view data;
  if (!eof) {
    auto d = env.msg.get_bin("data");
    if (!d) {
      c.send_error(env.msg.id(), d.err().code, d.err().message);
      return;
    }
    data = d.value().value_or("");
  }
  srv.counters().streamed(data.size());
  s->stdin_data(&c, env.msg.id(), data, eof);
}

int parse_signal(const ipc::message& m, std::string* err) {
  return parse_signal_field(m, 0, err);
}

void on_cancel(server& srv, client_conn& c, ipc::envelope& env) {
  std::string err;
  int sig = parse_signal(env.msg, &err);
  if (!err.empty()) {
    c.send_error(env.msg.id(), ipc::err::bad_request, err);
    return;
  }
  auto stop = env.msg.get_bool("stop");
  if (!stop) {
    c.send_error(env.msg.id(), ipc::err::bad_request, stop.err().message);
    return;
  }
  if (srv.procs().stop_following(c, env.msg.id())) return;  // `logs --follow` ends here
  auto* s = job_session(srv, c, env.msg.id());
  // No signal: stop it (SIGTERM first). A signal with "stop": stop it, that signal first.
  // A signal alone: deliver it once.
  if (s != nullptr) s->cancel(&c, env.msg.id(), sig, stop.value().value_or(sig == 0));
}

void on_release(server& srv, client_conn& c, ipc::envelope& env) {
  if (auto* s = job_session(srv, c, env.msg.id())) s->release(&c, env.msg.id());
}

void on_status(server& srv, client_conn& c, ipc::envelope& env) {
  frame_builder f(msg_type::status_reply, env.msg.id());
  f.i64("pid", ::getpid())
      .str("version", SBSH_VERSION)
      .u64("uptime_ms", srv.uptime_ms())
      .str("socket", srv.opts().socket_path)
      .str("state_dir", srv.opts().state_dir);
  const auto& n = srv.counters();
  auto& counts = f.field("counters");
  counts.pack_map(6);
  for (auto [k, v] : {std::pair<const char*, uint64_t>{"commands", n.commands}, {"failed", n.failed},
                      {"timed_out", n.timed_out}, {"shell_restarts", n.shell_restarts},
                      {"bytes_streamed", n.bytes_streamed}, {"clients", srv.client_count()}}) {
    counts.pack(k);
    counts.pack(v);
  }
  auto& pk = f.field("sessions");
  pk.pack_array(static_cast<uint32_t>(srv.sessions().size()));
  for (const auto& [name, s] : srv.sessions()) s->describe(pk);
  c.send(f.take());
}

void on_shutdown(server& srv, client_conn& c, ipc::envelope& env) {
  auto keep = env.msg.get_bool("keep_sessions");
  if (!keep) return c.send_error(env.msg.id(), ipc::err::bad_request, keep.err().message);
  c.send(frame_builder(msg_type::ok, env.msg.id()).take());
  srv.begin_shutdown(fmt::format("requested by client pid {}", c.peer_pid), keep.value().value_or(false));
}

using handler_fn = void (*)(server&, client_conn&, ipc::envelope&);
struct handler_entry {
  msg_type type;
  handler_fn fn;
};
constexpr handler_entry kHandlers[] = {
    {msg_type::hello, on_hello},       {msg_type::exec, on_exec},
    {msg_type::stdin_data, on_stdin},  {msg_type::stdin_eof, on_stdin},
    {msg_type::cancel, on_cancel},     {msg_type::release, on_release},
    {msg_type::status, on_status},     {msg_type::shutdown, on_shutdown},
    {msg_type::session_create, on_session_create}, {msg_type::session_list, on_session_list},
    {msg_type::session_show, on_session_show},     {msg_type::session_rm, on_session_rm},
    {msg_type::session_restart, on_session_restart},
    {msg_type::proc_start, [](server& s, client_conn& c, ipc::envelope& e) { s.procs().handle_start(c, e); }},
    {msg_type::proc_list, [](server& s, client_conn& c, ipc::envelope& e) { s.procs().handle_list(c, e); }},
    {msg_type::proc_kill, [](server& s, client_conn& c, ipc::envelope& e) { s.procs().handle_kill(c, e); }},
    {msg_type::proc_wait, [](server& s, client_conn& c, ipc::envelope& e) { s.procs().handle_wait(c, e); }},
    {msg_type::proc_logs, [](server& s, client_conn& c, ipc::envelope& e) { s.procs().handle_logs(c, e); }},
};

}  // namespace

void server::handle(client_conn& c, ipc::envelope&& env) {
  msg_type t = env.msg.type();
  if (!c.greeted && t != msg_type::hello) {
    c.send_error(env.msg.id(), ipc::err::not_ready, "the first message on a connection must be hello");
    return;
  }
  for (const auto& h : kHandlers) {
    if (h.type == t) {
      h.fn(*this, c, env);
      return;
    }
  }
  c.send_error(env.msg.id(), ipc::err::unknown_request,
               fmt::format("message type {} is not a request this sbshd knows", static_cast<uint32_t>(t)));
}

}  // namespace sbsh::daemon
