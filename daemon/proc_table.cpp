// Background processes: start, output to capped logs, kill, wait, logs, persistence.
// The mechanism is described in proc_table.h.
#include "daemon/proc_table.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/procs.h"
#include "daemon/exec_job.h"
#include "daemon/server.h"
#include "ipc/messages.h"
#include "ipc/paths.h"
#include "ipc/text.h"

namespace sbsh::daemon {

using ipc::errc;
using ipc::msg_type;
namespace msg = ipc::msg;

namespace {

constexpr uint64_t kKillGraceMs = 2000;

void set_nonblock(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

bool terminating(int sig) {
  return sig == SIGTERM || sig == SIGKILL || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT || sig == SIGABRT;
}

}  // namespace

std::string_view proc_state_name(proc_state s) {
  switch (s) {
    case proc_state::starting: return "starting";
    case proc_state::running: return "running";
    case proc_state::exited: return "exited";
    case proc_state::killed: return "killed";
    case proc_state::failed: return "failed";
    case proc_state::lost: return "lost";
  }
  return "unknown";
}

proc_table::proc_table(server& srv) : srv_(srv) {}
proc_table::~proc_table() = default;

std::string proc_table::log_path(uint64_t id, const char* ext) const {
  return fmt::format("{}/procs/{}.{}", srv_.opts().state_dir, id, ext);
}

proc_info proc_table::record_of(const bg_proc& p) const {
  proc_info r;
  r.id = p.id;
  r.name = p.name;
  r.session = p.session;
  r.command = p.command;
  r.state = proc_state_name(p.state);
  r.pid = std::max<int64_t>(p.pid, 0);
  r.exit_code = p.exit_code;
  r.signal = p.signal;
  r.started_at_ms = p.started_at_ms;
  r.ended_at_ms = std::max<int64_t>(p.ended_at_ms, 0);
  r.error = p.error;
  r.log_path = log_path(p.id, "out");
  return r;
}

void proc_table::reply_info(uint64_t serial, uint64_t req, const bg_proc& p, msg_type t) {
  auto* c = srv_.client_by_serial(serial);
  if (c == nullptr) return;
  if (t == msg_type::logs_end) c->send(ipc::encode(msg::logs_end{record_of(p)}, req));
  else c->send(ipc::encode(msg::proc_info{record_of(p)}, req));
}

bg_proc* proc_table::find(const ipc::proc_ref& ref, uint64_t req, client_conn& c) {
  bg_proc* best = nullptr;
  if (ref.name.empty()) {
    auto it = procs_.find(ref.id);
    if (it != procs_.end()) best = it->second.get();
  } else {
    // By name: the newest process of that name (names need not be unique over time).
    for (auto& [pid, p] : procs_)
      if (p->name == ref.name || std::to_string(p->id) == ref.name) best = p.get();
  }
  if (best == nullptr)
    c.send_error(req, errc::no_such_process, "no background process with that id or name; 'sbsh ps -a' lists them");
  return best;
}

void proc_table::handle_start(client_conn& c, ipc::envelope& env) {
  const auto& m = env.msg;
  auto fail = [&](const error& e) { c.send_error(m.id(), e); };
  auto start = ipc::decode<msg::proc_start>(m);
  if (!start) return fail(start.err());
  if (start->command.empty()) return fail(make_error(errc::bad_request, "proc_start needs a non-empty 'command'"));
  std::string sname(start->session);
  if (auto s = check_session_name(sname); !s) return fail(s.err());
  std::string pname(start->name);
  if (pname.size() > 64 || pname.find_first_of(std::string_view("\0\n/", 3)) != std::string::npos)
    return fail(make_error(errc::bad_request, "a process name is at most 64 characters without '/' or newlines"));
  for (auto e : start->env)
    if (auto s = check_env_entry(e); !s) return fail(s.err());
  std::string text_cmd(start->command);
  if (text_cmd.find('\0') != std::string::npos) return fail(make_error(errc::bad_request, "the command contains a NUL byte"));
  auto s = srv_.get_or_create_session(sname, std::string(start->session_cwd),
                                      [&start] { return start->session_env.to_vector(); });
  if (!s) return fail(s.err());

  auto p = std::make_unique<bg_proc>();
  p->id = next_id_++;
  p->name = pname;
  p->session = sname;
  p->command = text_cmd;
  p->started_at_ms = wall_ms();
  int out[2], err[2], st[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(st, O_CLOEXEC) != 0)
    return fail(make_error(errc::internal, fmt::format("cannot create pipes: {}", std::strerror(errno))));
  p->out_r = unique_fd(out[0]);
  p->out_w = unique_fd(out[1]);
  p->err_r = unique_fd(err[0]);
  p->err_w = unique_fd(err[1]);
  p->status_r = unique_fd(st[0]);
  p->status_w = unique_fd(st[1]);
  for (int fd : {out[0], err[0], st[0]}) set_nonblock(fd);
  if (auto l = open_logs(*p); !l) return fail(l.err());

  // The outer subshell reports "+" once its redirections are open (then sbshd drops its own
  // copies of the write ends) and the command's status when it ends. The command runs in an
  // inner subshell without the status descriptor, so nothing it starts can hold it, and
  // `exit` or `set -e` inside it end only the inner one.
  std::string dir = fmt::format("/proc/{}/fd/", srv_.pid());
  std::string text =
      "(\\builtin echo + >&3\n__sbsh_o=$-\n\\builtin set +e\n"
      "([[ $__sbsh_o == *e* ]] && \\builtin set -e\n";
  if (!start->cwd.empty()) text += fmt::format("\\builtin cd -- {} || \\builtin exit 1\n", shell_quote(start->cwd));
  for (auto e : start->env) text += fmt::format("\\builtin export {}\n", shell_quote(e));
  text += fmt::format(
      "\\builtin eval {}\n) 3>&-\n\\builtin echo $? >&3\n) </dev/null >{}{} 2>{}{} 3>{}{} &\n\\builtin echo $!\n",
      shell_quote(text_cmd), dir, p->out_w.get(), dir, p->err_w.get(), dir, p->status_w.get());

  watch(*p);
  uint64_t id = p->id, serial = c.serial(), req = m.id();
  procs_.emplace(id, std::move(p));
  spdlog::info("process {} starting in session {}: {}", id, sname, text_cmd.substr(0, 200));
  (*s)->run_internal(std::move(text), [this, id, serial, req](exec_job& job) {
    on_started(id, job);
    auto it = procs_.find(id);
    if (it == procs_.end()) return;
    bg_proc& p = *it->second;
    if (p.state == proc_state::failed) {
      if (auto* c = srv_.client_by_serial(serial)) c->send_error(req, errc::start_failed, p.error);
      return;
    }
    reply_info(serial, req, p);
  });
  save();
}

status proc_table::open_logs(bg_proc& p) {
  if (auto d = ipc::make_dirs(srv_.opts().state_dir + "/procs"); !d) return d;
  if (auto l = p.out_log.open(log_path(p.id, "out"), srv_.opts().log_cap); !l) return l;
  return p.err_log.open(log_path(p.id, "err"), srv_.opts().log_cap);
}

void proc_table::watch(bg_proc& p) {
  bg_proc* raw = &p;
  for (auto [fd, w, stream_no] : {std::tuple{&p.out_r, &p.out_watch, ipc::kStdout},
                                  std::tuple{&p.err_r, &p.err_watch, ipc::kStderr}}) {
    if (!*fd) continue;
    *w = make_handle<fd_watch>(srv_.loop(), fd->get());
    (*w)->start(UV_READABLE, [this, raw, n = stream_no](int, int) { on_output(*raw, n); });
  }
  p.status_watch = make_handle<fd_watch>(srv_.loop(), p.status_r.get());
  p.status_watch->start(UV_READABLE, [this, raw](int, int) { on_status(*raw); });
}

lent_pipes proc_table::lend(const bg_proc& p) {
  lent_pipes l;
  l.proc = p.id;
  for (auto [fd, letter] : {std::pair{&p.out_r, 'o'}, std::pair{&p.err_r, 'e'}, std::pair{&p.status_r, 's'}}) {
    if (!*fd) continue;  // at end-of-file already
    unique_fd d(::fcntl(fd->get(), F_DUPFD_CLOEXEC, 0));
    if (!d) continue;
    l.fds.push_back(std::move(d));
    l.streams += letter;
  }
  return l;
}

bool proc_table::reattach(bg_proc& p) {
  auto* s = srv_.find_session(p.session);
  if (s == nullptr) return false;
  auto lent = std::find_if(s->lent().begin(), s->lent().end(), [&](const auto& g) { return g.second.proc == p.id; });
  if (lent == s->lent().end()) return false;
  auto& [pgid, pipes] = *lent;
  if (pipes.streams.find('s') == std::string::npos) return false;
  for (size_t i = 0; i < pipes.fds.size(); ++i) {
    unique_fd& mine = pipes.streams[i] == 'o' ? p.out_r : pipes.streams[i] == 'e' ? p.err_r : p.status_r;
    mine = unique_fd(::fcntl(pipes.fds[i].get(), F_DUPFD_CLOEXEC, 0));
    if (!mine) return false;
    set_nonblock(mine.get());
  }
  if (auto l = open_logs(p); !l) spdlog::warn("process {}: {}", p.id, l.err().message);
  p.pid = pgid;
  p.state = proc_state::running;
  watch(p);
  spdlog::info("process {} (pid {}) still runs in session {}: its output is logged again", p.id, p.pid, p.session);
  return true;
}

void proc_table::on_started(uint64_t id, exec_job& job) {
  auto it = procs_.find(id);
  if (it == procs_.end()) return;
  bg_proc& p = *it->second;
  char* end = nullptr;
  long pid = std::strtol(job.captured_out.c_str(), &end, 10);
  bool ok = job.outcome.exit_code == 0 && pid > 1 && end != nullptr && (*end == '\n' || *end == '\0');
  if (!ok) {
    std::string why = !job.captured_err.empty() ? job.captured_err : job.outcome.error;
    while (!why.empty() && why.back() == '\n') why.pop_back();
    p.error = fmt::format("could not start: {}", why.empty() ? "the session's shell did not run it" : why);
    p.state = proc_state::failed;
    p.out_w.reset();
    p.err_w.reset();
    p.status_w.reset();
    finish(p, p.error);
    return;
  }
  p.pid = pid;
  if (p.state == proc_state::starting) p.state = proc_state::running;
  if (!p.finished())
    if (auto* s = srv_.find_session(p.session)) s->protect_group(static_cast<pid_t>(pid), lend(p));
  save();
}

void proc_table::on_output(bg_proc& p, int stream_no) {
  unique_fd& fd = stream_no == ipc::kStdout ? p.out_r : p.err_r;
  handle_ptr<fd_watch>& w = stream_no == ipc::kStdout ? p.out_watch : p.err_watch;
  char buf[64 * 1024];
  for (int round = 0; round < 16 && fd; ++round) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {  // every writer is gone: so is the log file's
      w.reset();
      fd.reset();
      (stream_no == ipc::kStdout ? p.out_log : p.err_log).close();
      return;
    }
    (stream_no == ipc::kStdout ? p.out_log : p.err_log).append(buf, static_cast<size_t>(n));
    std::erase_if(p.followers, [&](const bg_proc::follower& f) {
      if ((stream_no == ipc::kStdout && !f.out) || (stream_no == ipc::kStderr && !f.err)) return false;
      auto* c = srv_.client_by_serial(f.serial);
      if (c == nullptr) return true;
      if (c->queued_bytes() > ipc::kMaxFollowerQueue) {
        c->send_error(f.req, errc::too_slow, "the log reader fell more than 16 MiB behind; run 'sbsh logs' again");
        return true;
      }
      c->send(ipc::encode(msg::output{static_cast<uint64_t>(stream_no), {std::string_view(buf, static_cast<size_t>(n))}},
                          f.req));
      return false;
    });
  }
}

void proc_table::on_status(bg_proc& p) {
  char buf[256];
  bool eof = false;
  for (;;) {
    ssize_t n = ::read(p.status_r.get(), buf, sizeof buf);
    if (n > 0) {
      if (p.status_buf.size() < 4096) p.status_buf.append(buf, static_cast<size_t>(n));
      continue;
    }
    eof = n == 0 || (errno != EAGAIN && errno != EINTR);
    break;
  }
  if (p.status_buf.rfind("+\n", 0) == 0 && p.status_w) {
    // The subshell has its own copies now: drop ours so that end-of-file can come.
    p.out_w.reset();
    p.err_w.reset();
    p.status_w.reset();
  }
  if (eof) finish(p, "");
}

void proc_table::finish(bg_proc& p, const std::string& why) {
  p.status_watch.reset();
  p.status_r.reset();
  if (p.finished() && p.ended_at_ms != 0) return;
  p.ended_at_ms = wall_ms();
  // The number after "+" is the command's status.
  std::optional<int> code;
  size_t pos = p.status_buf.rfind("+\n", 0) == 0 ? 2 : 0;
  if (pos < p.status_buf.size()) {
    char* end = nullptr;
    long v = std::strtol(p.status_buf.c_str() + pos, &end, 10);
    if (end != p.status_buf.c_str() + pos && v >= 0 && v <= 255) code = static_cast<int>(v);
  }
  if (p.state == proc_state::failed) {
    // could not start: nothing more to record
  } else if (p.kill_sent != 0) {
    p.state = proc_state::killed;
    p.signal = p.kill_sent;
    p.exit_code = code;
  } else if (code) {
    p.state = proc_state::exited;
    p.exit_code = code;
    if (*code > 128 && *code < 128 + 65) p.signal = *code - 128;
  } else {
    p.state = proc_state::killed;
    p.error = why.empty() ? "it ended without reporting a status (killed from outside sbsh)" : why;
  }
  p.kill_timer.reset();
  if (auto* s = srv_.find_session(p.session)) {
    if (p.pid > 0) s->unprotect_group(static_cast<pid_t>(p.pid));
    s->touch(wall_ms());  // its idle time counts from the end of its last process
    srv_.session_activity();
  }
  // What the process wrote before it ended is in the pipes: log it before telling anyone.
  if (p.out_r) on_output(p, ipc::kStdout);
  if (p.err_r) on_output(p, ipc::kStderr);
  for (auto& w : p.waiters) reply_info(w.serial, w.req, p);
  p.waiters.clear();  // and their deadlines
  end_followers(p);
  spdlog::info("process {} {} (exit {}, signal {})", p.id, proc_state_name(p.state), p.exit_code.value_or(-1),
               p.signal.value_or(0));
  // Keep the table bounded: forget the oldest finished processes, and their logs.
  size_t finished = 0;
  for (auto& [id, q] : procs_) finished += q->finished() ? 1 : 0;
  std::vector<std::string> logs;
  for (auto it = procs_.begin(); finished > srv_.opts().keep_finished && it != procs_.end();) {
    if (it->second->finished() && it->second.get() != &p && !it->second->out_r && !it->second->err_r) {
      for (const char* ext : {"out", "err"})
        for (auto& f : capped_log_files(log_path(it->first, ext))) logs.push_back(std::move(f));
      it = procs_.erase(it);
      --finished;
    } else {
      ++it;
    }
  }
  if (!logs.empty()) remove_logs_later(std::move(logs));
  save();
}

void proc_table::end_followers(bg_proc& p) {
  for (auto& f : p.followers) reply_info(f.serial, f.req, p, msg_type::logs_end);
  p.followers.clear();
}

void proc_table::signal_tree(bg_proc& p, int sig) {
  if (p.pid <= 1) return;
  off_loop(srv_.loop(), [pgid = static_cast<pid_t>(p.pid), sig] { procs::signal_tree(pgid, sig); });
}

void proc_table::remove_logs_later(std::vector<std::string> paths) {
  off_loop(srv_.loop(), [paths = std::move(paths)] {
    for (const auto& f : paths) ::unlink(f.c_str());
  });
}

// Log files whose process is not in the table: left by an sbshd that forgot processes
// without deleting their logs, or whose table was unreadable. A later process given the same
// id would append to them. At start, before any request, so no process is being started.
void proc_table::remove_stray_logs() {
  std::string dir = srv_.opts().state_dir + "/procs";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> stray;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    uint64_t id = std::strtoull(e->d_name, &end, 10);
    std::string_view ext(end);
    bool log = ext == ".out" || ext == ".err" || ext == ".out.1" || ext == ".err.1";
    if (end != e->d_name && log && procs_.count(id) == 0) stray.push_back(dir + "/" + e->d_name);
  }
  ::closedir(d);
  if (!stray.empty()) spdlog::info("deleting {} log files of processes no longer listed", stray.size());
  for (const auto& f : stray) ::unlink(f.c_str());  // now: a new process may take one's id
}

void proc_table::handle_kill(client_conn& c, ipc::envelope& env) {
  auto req = ipc::decode<msg::proc_kill>(env.msg);
  if (!req) return c.send_error(env.msg.id(), req.err());
  int sig = req->signal.number;
  bg_proc* p = find(req->proc, env.msg.id(), c);
  if (p == nullptr) return;
  if (p->finished() || p->pid <= 0) {
    if (p->state == proc_state::starting) {
      return c.send_error(env.msg.id(), errc::not_started, "the process has not started yet; try again in a moment");
    }
    return reply_info(c.serial(), env.msg.id(), *p);
  }
  signal_tree(*p, sig);
  if (!terminating(sig)) return reply_info(c.serial(), env.msg.id(), *p);
  p->kill_sent = sig;
  p->waiters.push_back({c.serial(), env.msg.id(), nullptr});
  if (sig != SIGKILL && p->kill_timer == nullptr) {
    p->kill_timer = make_handle<timer>(srv_.loop());
    uint64_t id = p->id;
    p->kill_timer->start(kKillGraceMs, [this, id] {
      auto it = procs_.find(id);
      if (it == procs_.end() || it->second->finished()) return;
      it->second->kill_sent = SIGKILL;
      signal_tree(*it->second, SIGKILL);
    });
  }
}

void proc_table::handle_wait(client_conn& c, ipc::envelope& env) {
  auto wait = ipc::decode<msg::proc_wait>(env.msg);
  if (!wait) return c.send_error(env.msg.id(), wait.err());
  bg_proc* p = find(wait->proc, env.msg.id(), c);
  if (p == nullptr) return;
  if (p->finished()) return reply_info(c.serial(), env.msg.id(), *p);
  bg_proc::waiter w{c.serial(), env.msg.id(), nullptr};
  if (wait->timeout_ms > 0) {
    w.deadline = make_handle<timer>(srv_.loop());
    uint64_t id = p->id, serial = c.serial(), req = env.msg.id();
    w.deadline->start(wait->timeout_ms, [this, id, serial, req] {
      auto it = procs_.find(id);
      if (it == procs_.end()) return;
      auto& ws = it->second->waiters;
      std::erase_if(ws, [&](const bg_proc::waiter& x) { return x.serial == serial && x.req == req; });
      if (auto* cc = srv_.client_by_serial(serial))
        cc->send_error(req, errc::timeout, "the process is still running");
    });
  }
  p->waiters.push_back(std::move(w));
}

void proc_table::handle_logs(client_conn& c, ipc::envelope& env) {
  const auto& m = env.msg;
  auto req = ipc::decode<msg::proc_logs>(m);
  if (!req) return c.send_error(m.id(), req.err());
  bg_proc* p = find(req->proc, m.id(), c);
  if (p == nullptr) return;
  bool out = req->out, err = req->err;
  std::vector<log_stream::source> sources;
  if (out) sources.push_back({log_path(p->id, "out"), ipc::kStdout});
  if (err) sources.push_back({log_path(p->id, "err"), ipc::kStderr});
  bool follow_it = req->follow && !p->finished();
  replies_.push_back({std::make_unique<log_stream>(c.serial(), m.id(), p->id, sources, req->tail,
                                                   follow_it),
                      out, err});
  pump(std::prev(replies_.end()));
}

void proc_table::pump(std::list<log_reply>::iterator it) {
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
  uint64_t serial = s.serial(), req = s.req(), id = s.proc();
  bool follow_it = s.follow(), out = it->out, err = it->err;
  replies_.erase(it);
  auto p = procs_.find(id);
  if (p == procs_.end())
    return c->send_error(req, errc::no_such_process, "the process left the table while its logs were read");
  if (follow_it && !p->second->finished()) {
    p->second->followers.push_back({serial, req, out, err});
    return;
  }
  reply_info(serial, req, *p->second, msg_type::logs_end);
}

void proc_table::pump_again_soon() {
  if (replies_timer_ == nullptr) replies_timer_ = make_handle<timer>(srv_.loop());
  replies_timer_->start(0, [this] {
    std::vector<std::list<log_reply>::iterator> due;
    for (auto it = replies_.begin(); it != replies_.end(); ++it)
      if (it->again) due.push_back(it);
    for (auto it : due) pump(it);  // each erases only itself
  });
}

void proc_table::client_drained(client_conn& c) {
  std::vector<std::list<log_reply>::iterator> due;
  for (auto it = replies_.begin(); it != replies_.end(); ++it)
    if (it->stream->serial() == c.serial() && !it->again) due.push_back(it);
  for (auto it : due) pump(it);
}

bool proc_table::stop_following(client_conn& c, uint64_t req) {
  auto reply = std::find_if(replies_.begin(), replies_.end(), [&](const log_reply& r) {
    return r.stream->serial() == c.serial() && r.stream->req() == req;
  });
  if (reply != replies_.end()) {  // still sending what was logged before
    uint64_t id = reply->stream->proc();
    replies_.erase(reply);
    if (auto p = procs_.find(id); p != procs_.end()) reply_info(c.serial(), req, *p->second, msg_type::logs_end);
    return true;
  }
  for (auto& [id, p] : procs_) {
    auto it = std::find_if(p->followers.begin(), p->followers.end(),
                           [&](const bg_proc::follower& f) { return f.serial == c.serial() && f.req == req; });
    if (it == p->followers.end()) continue;
    p->followers.erase(it);
    reply_info(c.serial(), req, *p, msg_type::logs_end);
    return true;
  }
  return false;
}

void proc_table::handle_list(client_conn& c, ipc::envelope& env) {
  auto req = ipc::decode<msg::proc_list>(env.msg);
  if (!req) return c.send_error(env.msg.id(), req.err());
  msg::proc_table reply;
  for (const auto& [id, p] : procs_)
    if (req->all || !p->finished()) reply.procs.push_back(record_of(*p));
  c.send(ipc::encode(reply, env.msg.id()));
}

void proc_table::kill_all(const std::string& session) {
  for (auto& [id, p] : procs_) {
    if (p->finished() || (!session.empty() && p->session != session)) continue;
    p->kill_sent = SIGKILL;
    if (p->pid > 1) procs::signal_tree(static_cast<pid_t>(p->pid), SIGKILL);
  }
}

bool proc_table::any_running(const std::string& session) const {
  for (const auto& [id, p] : procs_)
    if (!p->finished() && (session.empty() || p->session == session)) return true;
  return false;
}

void proc_table::save() {
  ipc::procs_file f;
  f.next_id = next_id_;
  f.procs.reserve(procs_.size());
  for (const auto& [id, p] : procs_) f.procs.push_back(record_of(*p));
  srv_.write_atomically(srv_.opts().state_dir + "/procs.msgpack", ipc::encode(f));
}

void proc_table::load() {
  load_saved();
  adopt_unlisted();
  if (!procs_.empty()) save();
  remove_stray_logs();
}

void proc_table::load_saved() {
  std::string path = srv_.opts().state_dir + "/procs.msgpack";
  bool missing;
  auto m = srv_.read_state_file(path, &missing);
  if (!m) {
    if (!missing) srv_.move_aside(path, m.err().message);
    return;
  }
  auto file = ipc::decode<ipc::procs_file>(*m);
  if (!file) return srv_.move_aside(path, file.err().message);
  next_id_ = std::max(next_id_, file->next_id);
  for (auto& r : file->procs) {
    auto p = std::make_unique<bg_proc>();
    p->id = r.id;
    p->name = std::move(r.name);
    p->session = std::move(r.session);
    p->command = std::move(r.command);
    p->pid = r.pid;
    p->exit_code = r.exit_code;
    p->signal = r.signal;
    p->started_at_ms = r.started_at_ms;
    p->ended_at_ms = r.ended_at_ms;
    p->error = std::move(r.error);
    const std::string& state = r.state;
    if (p->id == 0) continue;
    if (state == "starting" || state == "running") {
      // Its session's wrapper kept its pipes (it was adopted): it is ours again. Otherwise its
      // exit was never seen: never report it as a success.
      if (!reattach(*p)) {
        p->out_r.reset();
        p->err_r.reset();
        p->status_r.reset();
        p->state = proc_state::lost;
        p->error = "sbshd stopped while it was running; its exit status is unknown";
      }
    } else {
      p->state = state == "exited" ? proc_state::exited
                 : state == "killed" ? proc_state::killed
                 : state == "failed" ? proc_state::failed
                                     : proc_state::lost;
    }
    next_id_ = std::max(next_id_, p->id + 1);
    procs_.emplace(p->id, std::move(p));
  }
}

void proc_table::adopt_unlisted() {
  // The table is written off the loop: a process started just before sbshd stopped may be
  // missing from it. Its session's wrapper knew it.
  for (const auto& [name, s] : srv_.sessions())
    for (const auto& [pgid, pipes] : s->lent()) {
      if (pipes.fds.empty() || procs_.count(pipes.proc) != 0) continue;
      auto p = std::make_unique<bg_proc>();
      p->id = pipes.proc;
      p->session = name;
      p->command = "(started just before sbshd restarted)";
      p->started_at_ms = wall_ms();
      if (!reattach(*p)) continue;
      next_id_ = std::max(next_id_, p->id + 1);
      procs_.emplace(p->id, std::move(p));
    }
}

}  // namespace sbsh::daemon
