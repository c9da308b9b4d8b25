// Session requests of libsbsh: create, list, show, remove, restart.
#include <unistd.h>

#include <algorithm>

#include "client/connection_impl.h"
#include "common/environ.h"

namespace sbsh::client {

namespace msg = ipc::msg;

session_detail detail_of(msg::session_detail&& r) {
  session_detail d = std::move(r.session);
  d.definition.name = d.status.name;
  return d;
}

std::vector<std::string> pruned_names(msg::session_pruned&& r) { return r.names.to_vector(); }

sbsh::status connection::create_session(const session_spec& spec) {
  return create_session(spec, [](stream, std::string_view) {});
}

sbsh::status connection::create_session(const session_spec& spec,
                                        const std::function<void(stream, std::string_view)>& on_output) {
  msg::session_create req{spec.name, spec};
  // No directory: this process's, on a local connection; a remote session starts in its
  // user's home.
  auto& def = req.definition;
  if (!def.snapshot.empty()) def.snapshot = p_->absolute(def.snapshot);
  else if (!def.root.empty()) def.root = p_->absolute(def.root);  // a relative cwd is taken from the root
  else def.cwd = def.cwd.empty() && p_->remote ? std::string() : p_->absolute(def.cwd.empty() ? "." : def.cwd);
  // No environment: this process's, on a local connection (sbshd never gives a session its own).
  if (def.environment.empty() && !p_->remote) def.environment = inherited_environment();
  // An environment's setup speaks as it runs: output frames, then the reply.
  uint64_t id = p_->next_id++;
  auto env = p_->stream_reply(ipc::encode(req, id), id, false, -1, on_output);
  if (!env) return env.err();
  auto r = read_reply<msg::ok>(env->msg);
  if (!r) return r.err();
  return ok_status();
}

result<std::vector<session_status>> connection::sessions() {
  return request<msg::session_info>(*this, msg::session_list{}, &msg::session_info::sessions);
}

result<session_detail> connection::show_session(const std::string& name) {
  return request<msg::session_detail>(*this, msg::session_show{name}, detail_of);
}

sbsh::status connection::remove_session(const std::string& name) {
  auto r = remove_session(name, false);
  if (!r) return r.err();
  return ok_status();
}

result<std::string> connection::remove_session(const std::string& name, bool keep_copy) {
  uint64_t id = p_->next_id++;
  auto env = p_->call(ipc::encode(msg::session_rm{name, keep_copy}, id), id);
  if (!env) return env.err();
  // ok, or session_removed when the snapshot's copy was kept (asked for, or by the
  // definition's keep_copy_on_failure).
  if (env->msg.type() == msg::session_removed::kind.type) {
    auto r = read_reply<msg::session_removed>(env->msg);
    if (!r) return r.err();
    return std::move(r->kept);
  }
  auto r = read_reply<msg::ok>(env->msg);
  if (!r) return r.err();
  return std::string();
}

result<std::vector<kept_copy>> connection::kept_copies() {
  return request<msg::kept_info>(*this, msg::kept_list{}, &msg::kept_info::copies);
}

result<std::vector<kept_copy>> connection::prune_kept_copies() {
  return request<msg::kept_info>(*this, msg::kept_prune{}, &msg::kept_info::copies);
}

result<std::vector<environment_info>> connection::environments() {
  return request<msg::env_info>(*this, msg::env_list{}, &msg::env_info::envs);
}

sbsh::status connection::remove_environment(const std::string& hash, bool force) {
  return request_ok(*this, msg::env_remove{hash, force});
}

result<std::vector<environment_info>> connection::prune_environments(std::optional<uint64_t> keep,
                                                                     std::chrono::milliseconds older_than) {
  msg::env_prune req;
  req.keep = keep;
  req.older_than_ms = static_cast<uint64_t>(std::max<int64_t>(older_than.count(), 0));
  return request<msg::env_info>(*this, req, &msg::env_info::envs);
}

result<std::vector<std::string>> connection::prune_sessions(std::chrono::milliseconds idle) {
  auto ms = static_cast<uint64_t>(std::max<int64_t>(idle.count(), 0));
  return request<msg::session_pruned>(*this, msg::session_prune{ms}, pruned_names);
}

sbsh::status connection::restart_session(const std::string& name) {
  return request_ok(*this, msg::session_restart{name});
}

}  // namespace sbsh::client
