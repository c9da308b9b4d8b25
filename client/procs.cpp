// Background-process requests of libsbsh: start, list, kill, wait, logs.
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "client/connection_impl.h"
#include "common/environ.h"

namespace sbsh::client {

using ipc::msg_type;
namespace msg = ipc::msg;

result<proc_info> connection::start(const start_options& opts) {
  msg::proc_start req;
  req.session = opts.session;
  req.name = opts.name;
  req.command = opts.command;
  req.cwd = opts.cwd;  // as in exec
  std::string base = opts.cwd.empty() || opts.cwd[0] == '/' ? std::string() : p_->local_cwd();
  req.cwd_base = base;
  req.env = opts.env;
  std::string scwd = opts.session_cwd;
  if (scwd.empty() && !p_->remote) {
    char buf[4096];
    if (::getcwd(buf, sizeof buf) != nullptr) scwd = buf;
  }
  req.session_cwd = scwd;
  std::vector<std::string> own_env;
  if (!opts.session_env && !p_->remote) own_env = inherited_environment();
  req.session_env = opts.session_env ? *opts.session_env : own_env;
  return request<msg::proc_info>(*this, req, &msg::proc_info::proc);
}

result<std::vector<proc_info>> connection::processes(bool include_finished) {
  return request<msg::proc_table>(*this, msg::proc_list{include_finished}, &msg::proc_table::procs);
}

result<std::vector<command_info>> connection::commands(bool include_finished) {
  return request<msg::proc_table>(*this, msg::proc_list{include_finished}, &msg::proc_table::commands);
}

result<proc_info> connection::kill(const std::string& proc, int signal) {
  return request<msg::proc_info>(*this, msg::proc_kill{{0, proc}, {signal}}, &msg::proc_info::proc);
}

result<proc_info> connection::wait(const std::string& proc, std::chrono::milliseconds timeout) {
  auto ms = static_cast<uint64_t>(std::max<int64_t>(timeout.count(), 0));
  return request<msg::proc_info>(*this, msg::proc_wait{{0, proc}, ms}, &msg::proc_info::proc);
}

result<proc_info> connection::logs(const std::string& proc, const logs_options& opts,
                                   const std::function<void(stream, std::string_view)>& sink) {
  uint64_t id = p_->next_id++;
  auto env = p_->stream_reply(ipc::encode(msg::proc_logs{{0, proc}, opts.follow, opts.out, opts.err, opts.tail}, id),
                              id, opts.follow, opts.cancel_fd, sink);
  if (!env) return env.err();
  auto end = read_reply<msg::logs_end>(env->msg);
  if (!end) return end.err();
  return std::move(end->proc);
}

result<ipc::envelope> connection::impl::stream_reply(std::string_view frame, uint64_t id, bool follow, int cancel_fd,
                                                     const std::function<void(stream, std::string_view)>& sink) {
  if (auto s = send(frame); !s) return s.err();
  bool cancelled = false;
  for (;;) {
    if (follow && cancel_fd >= 0 && !cancelled && !ch.buffered()) {
      pollfd pf[2] = {{ch.fd(), POLLIN, 0}, {cancel_fd, POLLIN, 0}};
      if (::poll(pf, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return make_error(ipc::errc::io, fmt::format("poll: {}", std::strerror(errno)));
      }
      if (pf[1].revents != 0) {
        unsigned char b;
        (void)!::read(cancel_fd, &b, 1);
        cancelled = true;  // sbshd answers with the reply's end; frames before it still count
        if (auto s = ch.send(ipc::encode(msg::cancel{}, id)); !s) return s.err();
      }
      if (pf[0].revents == 0) continue;
    }
    auto env = ch.recv();
    if (!env) return env.err();
    const auto& m = env->msg;
    if (m.id() != id) continue;
    if (m.type() == msg_type::error) return error_from(m, "sbshd refused");
    if (m.type() == msg_type::output) {
      if (auto c = output_chunk(m)) sink(c->first, c->second);
      continue;
    }
    return env;
  }
}

}  // namespace sbsh::client
