// Session requests of libsbsh: create, list, show, remove, restart.
#include <unistd.h>

#include <algorithm>

#include "client/connection_impl.h"
#include "common/environ.h"

namespace sbsh::client {

namespace msg = ipc::msg;

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
  auto r = p_->ask<msg::session_info>(msg::session_list{});
  if (!r) return r.err();
  return std::move(r->sessions);
}

result<session_detail> connection::show_session(const std::string& name) {
  auto r = p_->ask<msg::session_detail>(msg::session_show{name});
  if (!r) return r.err();
  session_detail d = std::move(r->session);
  d.definition.name = d.status.name;
  return d;
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
  auto r = p_->ask<msg::kept_info>(msg::kept_list{});
  if (!r) return r.err();
  return std::move(r->copies);
}

result<std::vector<kept_copy>> connection::prune_kept_copies() {
  auto r = p_->ask<msg::kept_info>(msg::kept_prune{});
  if (!r) return r.err();
  return std::move(r->copies);
}

result<std::vector<environment_info>> connection::environments() {
  auto r = p_->ask<msg::env_info>(msg::env_list{});
  if (!r) return r.err();
  return std::move(r->envs);
}

sbsh::status connection::remove_environment(const std::string& hash, bool force) {
  auto r = p_->ask<msg::ok>(msg::env_remove{hash, force});
  if (!r) return r.err();
  return ok_status();
}

result<std::vector<environment_info>> connection::prune_environments(std::optional<uint64_t> keep,
                                                                     std::chrono::milliseconds older_than) {
  msg::env_prune req;
  req.keep = keep;
  req.older_than_ms = static_cast<uint64_t>(std::max<int64_t>(older_than.count(), 0));
  auto r = p_->ask<msg::env_info>(req);
  if (!r) return r.err();
  return std::move(r->envs);
}

result<std::vector<std::string>> connection::prune_sessions(std::chrono::milliseconds idle) {
  // The reply's names are views into its frame: read while the frame is alive (not ask()).
  uint64_t id = p_->next_id++;
  auto env = p_->call(ipc::encode(msg::session_prune{static_cast<uint64_t>(std::max<int64_t>(idle.count(), 0))}, id), id);
  if (!env) return env.err();
  auto r = read_reply<msg::session_pruned>(env->msg);
  if (!r) return r.err();
  return r->names.to_vector();
}

sbsh::status connection::restart_session(const std::string& name) {
  auto r = p_->ask<msg::ok>(msg::session_restart{name});
  if (!r) return r.err();
  return ok_status();
}

}  // namespace sbsh::client
