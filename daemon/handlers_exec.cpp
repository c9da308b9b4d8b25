// Exec requests (the 300 group): run a command in a session (made implicitly when it does not
// exist), its input, cancelling it and releasing it, and the kept commands' wait, logs and
// kill; and the check that refuses a request which would wait for the very command that sent
// it.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/procs.h"
#include "daemon/handlers.h"
#include "daemon/session.h"
#include "ipc/messages.h"

namespace sbsh::daemon {

using ipc::errc;
using ipc::msg_type;
namespace msg = ipc::msg;

namespace {

session* job_session(server& srv, const client_conn& c, uint64_t id) {
  const std::string* name = c.job_session(id);
  return name == nullptr ? nullptr : srv.find_session(*name);
}

}  // namespace

void on_exec(server& srv, client_conn& c, ipc::envelope& env) {
  auto job = parse_exec(env);
  if (!job) return c.send_error(env.msg.id(), job.err());
  auto& j = *job.value();
  if (j.keep_env) c.keep_env(std::move(j.session_env));  // the connection's from now on
  if (j.same_env && c.kept_env() == nullptr)
    return c.send_error(j.id, ipc::errc::bad_request,
                        "field 'same_env' names the environment this connection kept, and it kept none: send it "
                        "in 'session_env' with 'keep_env' first");
  if (auto room = c.job_room(j.id, j.text.size()); !room) return c.send_error(j.id, room.err());
  if (auto ok = srv.check_not_waiting_on_itself(c, j.session, &j.inside); !ok) return c.send_error(j.id, ok.err());
  if (auto ok = srv.records().admit(j); !ok) return c.send_error(j.id, ok.err());
  auto s = srv.get_or_create_session(j.session, j.session_cwd, [&c, &j] {
    return j.same_env || j.keep_env ? *c.kept_env() : j.session_env;  // only when a session is made
  });
  if (!s) return c.send_error(j.id, s.err());
  if (auto d = settle_dir(j, (*s)->def()); !d) return c.send_error(j.id, d.err());
  // A command that gives no timeout has its session's default (session create --timeout),
  // counted, as its own would be, from now.
  if (j.timeout_ms == 0) j.timeout_ms = (*s)->def().timeout_ms;
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
  c.add_job(j.id, j.session, j.text.size());
  (*s)->enqueue(std::move(job.value()));
}

// A lease of a session's shell (docs/architecture.md, "The direct path"): a job in the
// session's queue like an exec, answered at its turn by the runner (lease_granted with the
// lease's socket, or an error) and ended by a release with the same id, the connection's end,
// or any other request queued behind it.
void on_lease(server& srv, client_conn& c, ipc::envelope& env) {
  uint64_t id = env.msg.id();
  auto req = ipc::decode<msg::lease>(env.msg);
  if (!req) return c.send_error(id, req.err());
  std::string name(req->session);
  if (auto ok = check_session_name(name); !ok) return c.send_error(id, ok.err());
  // The shells end a bounded number at a time: none may be lent meanwhile.
  if (srv.shutting_down()) return c.send_error(id, errc::shutting_down, "sbshd is shutting down");
  session* s = srv.find_session(name);
  if (s == nullptr)
    return c.send_error(id, errc::no_such_session,
                        fmt::format("no session '{}' to lease: create it first ('sbsh session create {}'), or run a "
                                    "command in it",
                                    name, name));
  // The holder makes each command's pipes, which sbshd would otherwise hand to a confined
  // shell's own user (give_to_confined_shell): without that its commands could not reopen
  // them (/dev/stdout).
  if (s->def().confine && ::geteuid() == 0)
    return c.send_error(id, errc::not_supported,
                        fmt::format("session '{}' is confined and sbshd runs as root: its shell runs as another user, "
                                    "who could not reopen the pipes a lease's holder makes; run commands with exec",
                                    name));
  if (auto room = c.job_room(id, 0); !room) return c.send_error(id, room.err());
  auto job = std::make_unique<exec_job>();
  if (auto ok = srv.check_not_waiting_on_itself(c, name, &job->inside); !ok) return c.send_error(id, ok.err());
  job->id = id;
  job->lease = true;
  job->session = name;
  // What `sbsh ps` shows while its holder runs nothing (a command it runs shows as itself).
  job->command = fmt::format("(leased by pid {})", c.peer_pid);
  job->client = &c;
  c.add_job(id, name, 0);
  s->enqueue(std::move(job));
}

void on_stdin(server& srv, client_conn& c, ipc::envelope& env) {
  auto* s = job_session(srv, c, env.msg.id());
  if (s == nullptr) return;  // the command already ended: its input is not wanted
  bool eof = env.msg.type() == msg_type::stdin_eof;
  std::string_view data;
  if (!eof) {
    auto d = ipc::decode<msg::stdin_data>(env.msg);
    if (!d) return c.send_error(env.msg.id(), d.err());
    data = d->data.bytes;
  }
  srv.counters().streamed(data.size());
  s->stdin_data(&c, env.msg.id(), data, eof);
}

void on_cancel(server& srv, client_conn& c, ipc::envelope& env) {
  auto req = ipc::decode<msg::cancel>(env.msg);
  if (!req) return c.send_error(env.msg.id(), req.err());
  if (srv.procs().stop_following(c, env.msg.id())) return;  // `logs --follow` ends here
  if (srv.records().stop_following(c, env.msg.id())) return;
  auto* s = job_session(srv, c, env.msg.id());
  // No signal: stop it (SIGTERM first). A signal with "stop": stop it, that signal first.
  // A signal alone: deliver it once.
  int sig = req->signal.number;
  if (s != nullptr) s->cancel(&c, env.msg.id(), sig, req->stop.value_or(sig == 0));
}

void on_release(server& srv, client_conn& c, ipc::envelope& env) {
  if (auto* s = job_session(srv, c, env.msg.id())) s->release(&c, env.msg.id(), std::move(env.fds));
}

// A process is part of a session's running command when, following its parents up, it comes
// to the session's shell (or to its wrapper, which adopts what a command left: a setsid, a
// double fork) through a process started after the command began: neither a background job
// of an earlier command nor the shell itself. Remote clients are no different: the peer is
// the `sbsh dial-stdio` that relays them, itself a process of the command when a command
// runs it.
status server::check_not_waiting_on_itself(const client_conn& c, const std::string& target,
                                            std::vector<uint64_t>* inside) {
  inside->clear();
  if (c.peer_pid <= 1) return ok_status();
  if (!c.ancestry) {
    bool any = false;
    for (const auto& [name, s] : sessions_) {
      const exec_job* cur = s->jobs().current();
      any = any || (cur != nullptr && cur->started);
    }
    if (!any) return ok_status();  // the common case: nothing to wait for
    auto& a = c.ancestry.emplace();
    for (pid_t pid = c.peer_pid; pid > 1 && a.chain.size() < 4096;) {
      procs::proc_info p;
      if (!procs::read_stat(pid, &p)) break;
      a.chain.push_back(p);
      pid = p.ppid;
    }
    // The sessions the client is under: no other can come to be one of its parents.
    for (const auto& [name, s] : sessions_) {
      auto shell = static_cast<pid_t>(s->shell().shell_pid());
      auto wrapper = static_cast<pid_t>(s->shell().wrapper_pid());
      if (std::any_of(a.chain.begin() + (a.chain.empty() ? 0 : 1), a.chain.end(),
                      [&](const procs::proc_info& p) { return p.pid == shell || p.pid == wrapper; }))
        a.sessions.push_back(name);
    }
  }
  const auto& up = c.ancestry->chain;
  std::string through;  // the first session whose command the client is part of
  for (const auto& name : c.ancestry->sessions) {
    session* s = find_session(name);
    const exec_job* cur = s != nullptr ? s->jobs().current() : nullptr;
    if (cur == nullptr || !cur->started) continue;
    auto shell = static_cast<pid_t>(s->shell().shell_pid());
    auto wrapper = static_cast<pid_t>(s->shell().wrapper_pid());
    for (size_t i = 1; i < up.size(); ++i) {
      if (up[i].pid != shell && up[i].pid != wrapper) continue;
      if (procs::started_after(up[i - 1], cur->mark)) {
        inside->push_back(cur->serial);
        inside->insert(inside->end(), cur->inside.begin(), cur->inside.end());
        if (through.empty()) through = name;
      }
      break;
    }
  }
  session* t = find_session(target);
  const exec_job* running = t != nullptr ? t->jobs().current() : nullptr;
  if (running == nullptr || std::find(inside->begin(), inside->end(), running->serial) == inside->end())
    return ok_status();
  std::string how = through == target ? std::string("is part of the command it is running")
                                      : fmt::format("is part of the command session '{}' is running, which waits for "
                                                    "that one",
                                                    through);
  return make_error(errc::would_deadlock,
                    fmt::format("refused: session '{}' runs one command at a time, and the process that asked (pid {}) "
                                "{}: the request would wait for itself forever; run it in another session, or in the "
                                "background after the command ends",
                                target, c.peer_pid, how));
}

// Kept commands (`sbsh wait/logs/kill %ID`): command_records.h answers them.
void on_command_wait(server& srv, client_conn& c, ipc::envelope& env) { srv.records().handle_wait(c, env); }
void on_command_logs(server& srv, client_conn& c, ipc::envelope& env) { srv.records().handle_logs(c, env); }
void on_command_kill(server& srv, client_conn& c, ipc::envelope& env) { srv.records().handle_kill(c, env); }
void on_command_input(server& srv, client_conn& c, ipc::envelope& env) { srv.records().handle_input(c, env); }

}  // namespace sbsh::daemon
