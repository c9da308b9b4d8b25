// Session requests of libsbsh: create, list, show, remove, restart; and the decoding of the
// session maps that status and these requests return, and of status's counters.
#include <unistd.h>

#include <fmt/format.h>

#include "client/connection_impl.h"

namespace sbsh::client {

using ipc::frame_builder;
using ipc::msg_type;

namespace {

std::string str_of(const msgpack::object& o) {
  return o.type == msgpack::type::STR ? std::string(o.via.str.ptr, o.via.str.size) : std::string();
}
int64_t int_of(const msgpack::object& o) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) return static_cast<int64_t>(o.via.u64);
  if (o.type == msgpack::type::NEGATIVE_INTEGER) return o.via.i64;
  return 0;
}
std::vector<std::string> strs_of(const msgpack::object& o) {
  std::vector<std::string> out;
  if (o.type != msgpack::type::ARRAY) return out;
  for (uint32_t i = 0; i < o.via.array.size; ++i) out.push_back(str_of(o.via.array.ptr[i]));
  return out;
}

// Calls f(key, value) for each string-keyed entry of a map.
template <typename F>
void for_each_field(const msgpack::object& o, F&& f) {
  if (o.type != msgpack::type::MAP) return;
  for (uint32_t k = 0; k < o.via.map.size; ++k) {
    const auto& kv = o.via.map.ptr[k];
    if (kv.key.type == msgpack::type::STR) f(std::string_view(kv.key.via.str.ptr, kv.key.via.str.size), kv.val);
  }
}

}  // namespace

session_status decode_session(const msgpack::object& o) {
  session_status s;
  for_each_field(o, [&](std::string_view key, const msgpack::object& v) {
    if (key == "name") s.name = str_of(v);
    else if (key == "state") s.state = str_of(v);
    else if (key == "wrapper_pid") s.wrapper_pid = int_of(v);
    else if (key == "shell_pid") s.shell_pid = int_of(v);
    else if (key == "restarts") s.restarts = static_cast<uint64_t>(int_of(v));
    else if (key == "queued") s.queued = static_cast<uint64_t>(int_of(v));
    else if (key == "commands") s.commands = static_cast<uint64_t>(int_of(v));
    else if (key == "running") s.running = str_of(v);
    else if (key == "running_ms") s.running_ms = static_cast<uint64_t>(int_of(v));
    else if (key == "cwd") s.cwd = str_of(v);
    else if (key == "error") s.error = str_of(v);
    else if (key == "restart") s.restart = str_of(v);
    else if (key == "uptime_ms") s.uptime_ms = static_cast<uint64_t>(int_of(v));
    else if (key == "started_at_ms") s.started_at_ms = int_of(v);
  });
  return s;
}

daemon_counters decode_counters(const ipc::message& m) {
  daemon_counters n;
  const auto* o = m.find("counters");
  if (o == nullptr) return n;
  for_each_field(*o, [&](std::string_view key, const msgpack::object& v) {
    auto u = static_cast<uint64_t>(int_of(v));
    if (key == "commands") n.commands = u;
    else if (key == "failed") n.failed = u;
    else if (key == "timed_out") n.timed_out = u;
    else if (key == "shell_restarts") n.shell_restarts = u;
    else if (key == "bytes_streamed") n.bytes_streamed = u;
    else if (key == "clients") n.clients = u;
  });
  return n;
}

std::vector<session_status> decode_sessions(const ipc::message& m) {
  std::vector<session_status> out;
  const auto* arr = m.find("sessions");
  if (arr == nullptr || arr->type != msgpack::type::ARRAY) return out;
  for (uint32_t i = 0; i < arr->via.array.size; ++i) out.push_back(decode_session(arr->via.array.ptr[i]));
  return out;
}

sbsh::status connection::create_session(const session_spec& spec) {
  uint64_t id = p_->next_id++;
  frame_builder f(msg_type::session_create, id);
  f.str("name", spec.name);
  // No directory: this process's, on a local connection; a remote session starts in its
  // user's home.
  std::string snapshot = spec.snapshot.empty() ? "" : p_->absolute(spec.snapshot);
  std::string cwd = spec.cwd.empty() && !p_->remote && snapshot.empty() ? p_->absolute(".") : spec.cwd;
  if (snapshot.empty() && !spec.cwd.empty()) cwd = p_->absolute(spec.cwd);
  f.str("cwd", cwd).str_array("env", spec.env).str_array("init", spec.init).str("restart", spec.restart);
  f.str_array("limits", spec.limits);
  if (!snapshot.empty()) f.str("snapshot", snapshot);
  auto r = p_->call(std::move(f), id);
  if (!r) return r.err();
  return ok_status();
}

result<std::vector<session_status>> connection::sessions() {
  uint64_t id = p_->next_id++;
  auto r = p_->call(frame_builder(msg_type::session_list, id), id);
  if (!r) return r.err();
  return decode_sessions(r->msg);
}

result<session_detail> connection::show_session(const std::string& name) {
  uint64_t id = p_->next_id++;
  frame_builder f(msg_type::session_show, id);
  f.str("name", name);
  auto r = p_->call(std::move(f), id);
  if (!r) return r.err();
  const auto* o = r->msg.find("session");
  if (o == nullptr) return make_error("protocol", "sbshd sent no session in its answer");
  session_detail d;
  d.status = decode_session(*o);
  d.definition.name = d.status.name;
  for_each_field(*o, [&](std::string_view key, const msgpack::object& v) {
    if (key == "init_output") {
      d.init_output = str_of(v);
    } else if (key == "definition") {
      for_each_field(v, [&](std::string_view k, const msgpack::object& dv) {
        if (k == "cwd") d.definition.cwd = str_of(dv);
        else if (k == "env") d.definition.env = strs_of(dv);
        else if (k == "init") d.definition.init = strs_of(dv);
        else if (k == "limits") d.definition.limits = strs_of(dv);
        else if (k == "snapshot") d.definition.snapshot = str_of(dv);
        else if (k == "restart") d.definition.restart = str_of(dv);
      });
    } else if (key == "history" && v.type == msgpack::type::ARRAY) {
      for (uint32_t i = 0; i < v.via.array.size; ++i) {
        history_entry h;
        for_each_field(v.via.array.ptr[i], [&](std::string_view k, const msgpack::object& hv) {
          if (k == "command") h.command = str_of(hv);
          else if (k == "exit_code" && hv.type != msgpack::type::NIL) h.exit_code = static_cast<int>(int_of(hv));
          else if (k == "timed_out") h.timed_out = hv.type == msgpack::type::BOOLEAN && hv.via.boolean;
          else if (k == "shell_restarted") h.shell_restarted = hv.type == msgpack::type::BOOLEAN && hv.via.boolean;
          else if (k == "started_at_ms") h.started_at_ms = int_of(hv);
          else if (k == "duration_ms") h.duration_ms = static_cast<uint64_t>(int_of(hv));
        });
        d.history.push_back(std::move(h));
      }
    }
  });
  return d;
}

namespace {
sbsh::status named_call(connection::impl& p, msg_type t, const std::string& name) {
  uint64_t id = p.next_id++;
  frame_builder f(t, id);
  f.str("name", name);
  auto r = p.call(std::move(f), id);
  if (!r) return r.err();
  return ok_status();
}
}  // namespace

sbsh::status connection::remove_session(const std::string& name) {
  return named_call(*p_, msg_type::session_rm, name);
}
sbsh::status connection::restart_session(const std::string& name) {
  return named_call(*p_, msg_type::session_restart, name);
}

}  // namespace sbsh::client
