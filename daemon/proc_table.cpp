// Background processes: start, output to capped logs, kill, wait, logs, persistence.
// The mechanism is described in proc_table.h.
#include "daemon/proc_table.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/paths.h"
#include "common/procs.h"
#include "daemon/client_conn.h"
#include "daemon/exec_job.h"
#include "daemon/command_records.h"
#include "daemon/off_loop.h"
#include "daemon/session.h"
#include "daemon/state_files.h"
#include "ipc/fd.h"
#include "ipc/messages.h"
#include "ipc/shell_channel.h"
#include "ipc/text.h"

namespace sbsh::daemon {

using ipc::errc;
using ipc::msg_type;
namespace msg = ipc::msg;

namespace {

constexpr uint64_t kKillGraceMs = 2000;
// What the table keeps of a command's text or an error (a bound on every record: the table is
// saved and listed within the frame cap). The log directory keeps a longer command whole.
constexpr size_t kKeptText = 4096;
// How long `kill` with a signal other than TERM or KILL waits for the command to end of it
// before it answers that the process still runs.
constexpr uint64_t kSignalSettleMs = 1000;
// How often SIGKILL is sent again while a killed tree is not gone yet.
constexpr uint64_t kKillAgainMs = 200;

// At most kKeptText bytes of a text, cut at a character's start, with a marker saying how
// long the whole was.
std::string kept_text(std::string_view s, size_t limit = kKeptText) {
  if (s.size() <= limit) return std::string(s);
  size_t cut = limit - 64;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return fmt::format("{}…[{} bytes in all]", s.substr(0, cut), s.size());
}

// A name as an error message may quote it: bytes other than printable ASCII as \xNN.
std::string shown(std::string_view s) {
  std::string out;
  for (char ch : s.substr(0, 80)) {
    auto u = static_cast<unsigned char>(ch);
    if (u >= 0x20 && u < 0x7f) out += ch;
    else out += fmt::format("\\x{:02x}", u);
  }
  return out;
}

// Every signal the keeper can catch whose default action is not to ignore it, as numbers
// for `trap`: those that would end or stop it.
std::string keeper_signals() {
  std::string out;
  for (int sig = 1; sig <= SIGRTMAX; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP || sig == SIGCHLD || sig == SIGCONT || sig == SIGURG || sig == SIGWINCH)
      continue;
    if (sig >= 32 && sig < SIGRTMIN) continue;  // the C library's own
    out += fmt::format("{}{}", out.empty() ? "" : " ", sig);
  }
  return out;
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
    case proc_state::not_started: return "not_started";
  }
  return "unknown";
}

proc_table::proc_table(proc_host& srv)
    : srv_(srv), replies_(srv, [this](const log_replies::finished& f) { logs_sent(f); }) {}
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

status proc_table::check_name(const std::string& name) const {
  if (name.empty()) return ok_status();
  bool ok = name.size() <= 64, digits = true;
  for (char ch : name) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) != 0 || std::string_view("._-+@:").find(ch) != std::string_view::npos);
    digits = digits && ch >= '0' && ch <= '9';
  }
  if (!ok)
    return make_error(errc::bad_request, fmt::format("invalid process name '{}': a name is 1 to 64 letters, digits, "
                                                     "'.', '_', '-', '+', '@' or ':'",
                                                     shown(name)));
  if (digits)
    return make_error(errc::bad_request, fmt::format("invalid process name '{}': a name of digits only would read as "
                                                     "a process id; add a letter",
                                                     name));
  for (const auto& [id, p] : procs_)
    if (p->name == name && !p->finished())
      return make_error(errc::bad_request, fmt::format("a process named '{}' is running (id {}); choose another name, "
                                                       "or end it first ('sbsh kill {}')",
                                                       name, id, name));
  return ok_status();
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
  if (auto n = check_name(pname); !n) return fail(n.err());
  for (auto e : start->env)
    if (auto s = check_env_entry(e); !s) return fail(s.err());
  std::string text_cmd(start->command);
  if (text_cmd.find('\0') != std::string::npos) return fail(make_error(errc::bad_request, "the command contains a NUL byte"));
  if (auto d = check_dir_fields(start->cwd, start->cwd_base); !d) return fail(d.err());
  // Its start runs in the session's shell, after the running command.
  std::vector<uint64_t> inside;
  if (auto ok = srv_.check_not_waiting_on_itself(c, sname, &inside); !ok) return fail(ok.err());
  auto s = srv_.get_or_create_session(sname, std::string(start->session_cwd),
                                      [&start] { return start->session_env.to_vector(); });
  if (!s) return fail(s.err());
  // Where it starts, decided now: in a session with a root, beneath it (start_dir).
  auto settled = settle_cwd(start->cwd, start->cwd_base, (*s)->def());
  if (!settled) return fail(settled.err());
  std::string cwd = std::move(*settled);

  auto p = std::make_unique<bg_proc>();
  p->id = next_id_++;
  p->name = pname;
  p->session = sname;
  p->command = kept_text(text_cmd);
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
  for (int fd : {out[0], err[0], st[0]}) set_nonblocking(fd);
  give_to_confined_shell((*s)->def(), srv_.opts().confine_uid, srv_.opts().confine_gid, {out[1], err[1]});
  if (auto l = open_logs(*p); !l) return fail(l.err());
  if (text_cmd.size() > kKeptText)  // the table keeps its start; the log directory all of it
    off_loop(srv_.loop(), [path = log_path(p->id, "cmd"), text = text_cmd] {
      unique_fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
      if (!fd) return;
      for (size_t at = 0; at < text.size();) {
        ssize_t n = ::write(fd.get(), text.data() + at, text.size() - at);
        if (n <= 0 && errno != EINTR) break;
        if (n > 0) at += static_cast<size_t>(n);
      }
    });

  // The outer subshell, the keeper, becomes a child subreaper, survives every signal it can
  // catch (kill signals the whole group; its caught traps are reset to their defaults in the
  // command's subshell), leaves at once when nobody reads its status any more ("keep" answers
  // SBSH_KEEPER_UNREAD: sbshd gave the start up, or went), reports "+" once its redirections
  // are open (then sbshd drops its own copies of the write ends) and the command's status
  // when it ends; then it lets go of the logs and waits for every process the command left
  // (proc_table.h). The command runs in an inner subshell without the status descriptor, so
  // nothing it starts can hold it, and `exit` or `set -e` inside it end only the inner one.
  // '__sbsh serve' is sbsh's builtin (shell/sbsh_builtin.c); a shell with an older one
  // refuses "keep" and "reap" quietly.
  // The pipes reach the keeper as descriptors lent to the text (SBSH_RUN_LENT), not as paths
  // into sbshd's /proc: a confined shell sees a /proc of its own.
  std::vector<unique_fd> lent;
  for (int fd : {p->out_w.get(), p->err_w.get(), p->status_w.get()}) {
    lent.emplace_back(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
    if (!lent.back()) return fail(make_error(errc::internal, fmt::format("cannot lend a pipe: {}", std::strerror(errno))));
  }
  std::string text = fmt::format(
      "(__sbsh_o=$-\n\\builtin set +e\n'__sbsh serve' keep 2>/dev/null\n[[ $? != {} ]] || \\builtin exit\n"
      "\\builtin trap : {}\n"
      "\\builtin echo + >&3\n([[ $__sbsh_o == *e* ]] && \\builtin set -e\n",
      SBSH_KEEPER_UNREAD, keeper_signals());
  if (!cwd.empty()) text += fmt::format("\\builtin cd -- {} || \\builtin exit 1\n", shell_quote(cwd));
  for (auto e : start->env) text += fmt::format("\\builtin export {}\n", shell_quote(e));
  text += fmt::format(
      "\\builtin eval {}\n) 3>&-\n\\builtin echo $? >&3\n\\builtin exec </dev/null >/dev/null 2>&1\n"
      "'__sbsh serve' reap\n) </dev/null >&$__sbsh_lent_out 2>&$__sbsh_lent_err 3>&$__sbsh_lent_status &\n"
      "\\builtin echo $!\n",
      shell_quote(text_cmd));

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
      if (job.not_run) {  // refused before anything ran (exec -C's check): it never existed
        std::vector<std::string> logs{log_path(id, "cmd")};
        for (const char* ext : {"out", "err"})
          for (auto& f : capped_log_files(log_path(id, ext))) logs.push_back(std::move(f));
        procs_.erase(it);
        remove_logs_later(std::move(logs));
        save();
      }
      return;
    }
    reply_info(serial, req, p);
  }, cwd, std::move(lent));
  save();
}

status proc_table::open_logs(bg_proc& p) {
  if (auto d = make_dirs(srv_.opts().state_dir + "/procs"); !d) return d;
  if (auto l = p.out_log.open(log_path(p.id, "out"), srv_.opts().log_cap); !l) return l;
  return p.err_log.open(log_path(p.id, "err"), srv_.opts().log_cap);
}

void proc_table::watch(bg_proc& p) {
  bg_proc* raw = &p;
  for (auto [fd, w, stream_no] : {std::tuple{&p.out_r, &p.out_watch, ipc::kStdout},
                                  std::tuple{&p.err_r, &p.err_watch, ipc::kStderr}}) {
    if (!*fd) continue;
    *w = uv::make_handle<uv::fd_watch>(srv_.loop(), fd->get());
    (*w)->start(UV_READABLE, [this, raw, n = stream_no](int, int) { on_output(*raw, n); });
  }
  p.status_watch = uv::make_handle<uv::fd_watch>(srv_.loop(), p.status_r.get());
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
    set_nonblocking(mine.get());
  }
  if (auto l = open_logs(p); !l) spdlog::warn("process {}: {}", p.id, l.err().message);
  p.pid = pgid;
  if (!p.finished()) p.state = proc_state::running;
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
    p.error = kept_text(fmt::format("could not start: {}", why.empty() ? "the session's shell did not run it" : why));
    if (job.not_run) p.error = kept_text(fmt::format("nothing was started: {}", job.outcome.error));
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
  uv::handle_ptr<uv::fd_watch>& w = stream_no == ipc::kStdout ? p.out_watch : p.err_watch;
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
    feed_followers(srv_, p.followers, stream_no, std::string_view(buf, static_cast<size_t>(n)));
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
  bool started = p.status_buf.rfind("+\n", 0) == 0;
  if (started && p.status_w) {
    // The subshell has its own copies now: drop ours so that end-of-file can come.
    p.out_w.reset();
    p.err_w.reset();
    p.status_w.reset();
  }
  // The number after "+" is the command's status, written when it ended.
  size_t pos = started ? 2 : 0;
  if (!p.finished() && p.status_buf.find('\n', pos) != std::string::npos) {
    std::optional<int> code;
    char* end = nullptr;
    long v = std::strtol(p.status_buf.c_str() + pos, &end, 10);
    if (end != p.status_buf.c_str() + pos && *end == '\n' && v >= 0 && v <= 255) code = static_cast<int>(v);
    if (code) end_command(p, code, "");
  }
  if (eof) finish(p, "");
}

void proc_table::finish(bg_proc& p, const std::string& why) {
  if (!p.finished() || p.ended_at_ms == 0) end_command(p, std::nullopt, why);
  tree_gone(p);
}

void proc_table::end_command(bg_proc& p, std::optional<int> code, const std::string& why) {
  if (p.finished() && p.ended_at_ms != 0) return;
  p.ended_at_ms = wall_ms();
  bool by_signal = code && *code > 128 && *code < 128 + 65;
  if (p.state == proc_state::failed) {
    // could not start: nothing more to record
  } else if (code) {
    // What the command's real end says: a signal that sbsh sent and that ended it is a kill;
    // a command that caught the signal and exited on its own has exited.
    p.state = by_signal && p.kill_sent != 0 ? proc_state::killed : proc_state::exited;
    p.exit_code = code;
    if (by_signal) p.signal = *code - 128;
  } else {
    // The keeper itself was killed (from outside sbsh, or with its session): no status.
    p.state = proc_state::killed;
    if (p.kill_sent == SIGKILL) p.signal = SIGKILL;
    else p.error = why.empty() ? "it ended without reporting a status (killed from outside sbsh)" : why;
  }
  if (auto* s = srv_.find_session(p.session)) {
    s->touch(wall_ms());  // its idle time counts from the end of its last process
    srv_.session_activity(*s);
  }
  // What the process wrote before it ended is in the pipes: log it before telling anyone.
  if (p.out_r) on_output(p, ipc::kStdout);
  if (p.err_r) on_output(p, ipc::kStderr);
  for (auto& w : p.waiters) reply_info(w.serial, w.req, p);
  p.waiters.clear();  // and their deadlines
  end_followers(p);
  spdlog::info("process {} {} (exit {}, signal {})", p.id, proc_state_name(p.state), p.exit_code.value_or(-1),
               p.signal.value_or(0));
  save();
}

void proc_table::tree_gone(bg_proc& p) {
  p.status_watch.reset();
  p.status_r.reset();
  p.kill_timer.reset();
  if (p.pid > 0)
    if (auto* s = srv_.find_session(p.session)) s->unprotect_group(static_cast<pid_t>(p.pid));
  for (auto& w : p.kill_waiters) reply_info(w.serial, w.req, p);
  p.kill_waiters.clear();
  // Keep the table bounded: forget the oldest finished processes, and their logs.
  size_t finished = 0;
  for (auto& [id, q] : procs_) finished += q->finished() ? 1 : 0;
  std::vector<std::string> logs;
  for (auto it = procs_.begin(); finished > srv_.opts().keep_finished && it != procs_.end();) {
    const bg_proc& q = *it->second;
    if (q.finished() && &q != &p && !q.out_r && !q.err_r && !q.tree_alive() && q.kill_waiters.empty()) {
      for (const char* ext : {"out", "err"})
        for (auto& f : capped_log_files(log_path(it->first, ext))) logs.push_back(std::move(f));
      logs.push_back(log_path(it->first, "cmd"));
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
  off_loop(srv_.loop(), [pgid = static_cast<pid_t>(p.pid), sig] { procs::signal_kept_tree(pgid, pgid, sig); });
}

void proc_table::kill_until_gone(uint64_t id, uint64_t delay_ms) {
  auto it = procs_.find(id);
  if (it == procs_.end() || !it->second->tree_alive()) return;
  bg_proc& p = *it->second;
  if (p.kill_timer == nullptr) p.kill_timer = uv::make_handle<uv::timer>(srv_.loop());
  p.kill_timer->start(delay_ms, [this, id] {
    auto it = procs_.find(id);
    if (it == procs_.end() || !it->second->tree_alive()) return;
    if (!it->second->finished()) it->second->kill_sent = SIGKILL;
    signal_tree(*it->second, SIGKILL);
    kill_until_gone(id, kKillAgainMs);
  });
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
    bool log = ext == ".out" || ext == ".err" || ext == ".out.1" || ext == ".err.1" || ext == ".cmd";
    if (end != e->d_name && log && !procs_.contains(id)) stray.push_back(dir + "/" + e->d_name);
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
  if (p->state == proc_state::starting && p->pid <= 0)
    return c.send_error(env.msg.id(), errc::not_started, "the process has not started yet; try again in a moment");
  // Nothing of it is left: the answer is how it ended.
  if (!p->tree_alive() || p->pid <= 1) return reply_info(c.serial(), env.msg.id(), *p);
  if (!p->finished()) p->kill_sent = sig;
  signal_tree(*p, sig);
  if (sig == SIGTERM || sig == SIGKILL) {
    // Answered once every process of it is gone; TERM turns into KILL after the grace period.
    p->kill_waiters.push_back({c.serial(), env.msg.id(), nullptr});
    if (p->kill_timer == nullptr || sig == SIGKILL) kill_until_gone(p->id, sig == SIGKILL ? kKillAgainMs : kKillGraceMs);
    return;
  }
  // Another signal may end the command or not: answered when it ends, or after a moment with
  // the process still running.
  if (p->finished()) return reply_info(c.serial(), env.msg.id(), *p);
  bg_proc::waiter w{c.serial(), env.msg.id(), uv::make_handle<uv::timer>(srv_.loop())};
  uint64_t id = p->id, serial = c.serial(), rq = env.msg.id();
  w.deadline->start(kSignalSettleMs, [this, id, serial, rq] {
    auto it = procs_.find(id);
    if (it == procs_.end()) return;
    auto& ws = it->second->waiters;
    std::erase_if(ws, [&](const bg_proc::waiter& x) { return x.serial == serial && x.req == rq; });
    reply_info(serial, rq, *it->second);
  });
  p->waiters.push_back(std::move(w));
}

void proc_table::handle_wait(client_conn& c, ipc::envelope& env) {
  auto wait = ipc::decode<msg::proc_wait>(env.msg);
  if (!wait) return c.send_error(env.msg.id(), wait.err());
  bg_proc* p = find(wait->proc, env.msg.id(), c);
  if (p == nullptr) return;
  // Answered once its command has ended and its keeper has reaped every process it left
  // (end-of-file on the status pipe): nothing of it runs, and no zombie of it is left.
  if (p->finished() && !p->tree_alive()) return reply_info(c.serial(), env.msg.id(), *p);
  bg_proc::waiter w{c.serial(), env.msg.id(), nullptr};
  if (wait->timeout_ms > 0) {
    w.deadline = uv::make_handle<uv::timer>(srv_.loop());
    uint64_t id = p->id, serial = c.serial(), req = env.msg.id();
    w.deadline->start(wait->timeout_ms, [this, id, serial, req] {
      auto it = procs_.find(id);
      if (it == procs_.end()) return;
      const bg_proc& q = *it->second;
      auto& ws = it->second->kill_waiters;
      std::erase_if(ws, [&](const bg_proc::waiter& x) { return x.serial == serial && x.req == req; });
      if (auto* cc = srv_.client_by_serial(serial))
        cc->send_error(req, errc::timeout,
                       q.finished() ? fmt::format("the process's command has ended, but processes it started still "
                                                  "run; 'sbsh kill {}' ends them",
                                                  id)
                                    : std::string("the process is still running"));
    });
  }
  p->kill_waiters.push_back(std::move(w));
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
  replies_.add(c, m.id(), p->id, sources, req->tail, req->follow && !p->finished(), out, err);
}

void proc_table::logs_sent(const log_replies::finished& f) {
  auto p = procs_.find(f.id);
  if (p == procs_.end())
    return f.c.send_error(f.req, errc::no_such_process, "the process left the table while its logs were read");
  if (f.follow && !p->second->finished()) {
    p->second->followers.push_back({f.c.serial(), f.req, f.out, f.err});
    return;
  }
  reply_info(f.c.serial(), f.req, *p->second, msg_type::logs_end);
}

void proc_table::client_drained(client_conn& c) { replies_.client_drained(c); }

bool proc_table::stop_following(client_conn& c, uint64_t req) {
  if (auto id = replies_.cancel(c, req)) {  // still sending what was logged before
    if (auto p = procs_.find(*id); p != procs_.end()) reply_info(c.serial(), req, *p->second, msg_type::logs_end);
    return true;
  }
  for (auto& [id, p] : procs_) {
    auto it = std::find_if(p->followers.begin(), p->followers.end(),
                           [&](const log_follower& f) { return f.serial == c.serial() && f.req == req; });
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
  // The reply fits one frame whatever the table holds: past a budget, the texts are
  // shortened further, then the oldest finished processes are left out (the newest are kept).
  constexpr size_t kBudget = ipc::kMaxFrame / 2;
  auto size_of = [dir = srv_.opts().state_dir.size()](const bg_proc& p, size_t text_cap) {
    return 512 + dir + p.name.size() + p.session.size() + std::min(p.command.size(), text_cap) +
           std::min(p.error.size(), text_cap);
  };
  std::vector<const bg_proc*> listed;
  size_t total = 0;
  for (const auto& [id, p] : procs_)
    if (req->all || !p->finished()) {
      listed.push_back(p.get());
      total += size_of(*p, kKeptText);
    }
  size_t cap = kKeptText;
  if (total > kBudget) {
    cap = 256;
    total = 0;
    for (const auto* p : listed) total += size_of(*p, cap);
  }
  size_t skip = 0;  // the oldest finished ones, when even that is too much
  for (size_t i = 0; total > kBudget && i < listed.size(); ++i)
    if (listed[i]->finished()) {
      total -= size_of(*listed[i], cap);
      listed[i] = nullptr;
      ++skip;
    }
  if (skip > 0) spdlog::warn("ps: {} finished processes left out of a reply that would not fit a frame", skip);
  msg::proc_table reply;
  // The commands sbshd keeps, detached from their clients, are listed too: bounded in number
  // (kMaxDetached running, kMaxKeptFinished ended) and each text (kShownCommand).
  reply.commands = srv_.records().list(req->all);
  for (const auto* p : listed) {
    if (p == nullptr) continue;
    reply.procs.push_back(record_of(*p));
    if (cap < kKeptText) {
      reply.procs.back().command = kept_text(reply.procs.back().command, cap);
      reply.procs.back().error = kept_text(reply.procs.back().error, cap);
    }
  }
  c.send(ipc::encode(reply, env.msg.id()));
}

void proc_table::kill_all(const std::string& session) {
  for (auto& [id, p] : procs_) {
    if (!p->tree_alive() || (!session.empty() && p->session != session)) continue;
    if (!p->finished()) p->kill_sent = SIGKILL;
    if (p->pid <= 1) continue;
    // The tree first, while its keeper still holds every orphan, then the keeper.
    procs::signal_kept_tree(static_cast<pid_t>(p->pid), static_cast<pid_t>(p->pid), SIGKILL);
    procs::signal_tree(static_cast<pid_t>(p->pid), SIGKILL);
  }
}

bool proc_table::any_running(const std::string& session) const {
  for (const auto& [id, p] : procs_)
    if ((!p->finished() || p->tree_alive()) && (session.empty() || p->session == session)) return true;
  return false;
}

// STATE/procs.msgpack is a sequence of frames: the first holds next_id, each of the others one
// process's record (a procs_file whose array holds it). Every record is bounded (kKeptText),
// so no frame can outgrow the frame cap, and a damaged file loses only the frames that are
// damaged. A file of one frame with every record, as earlier versions wrote, reads the same.
void proc_table::save() {
  ipc::procs_file head;
  head.version = 2;
  head.next_id = next_id_;
  std::string bytes = ipc::encode(head);
  for (const auto& [id, p] : procs_) {
    ipc::procs_file one;
    one.version = 2;
    one.procs.push_back(record_of(*p));
    std::string frame = ipc::encode(one);
    if (frame.size() > ipc::kMaxFrame) {  // bounded records make this impossible; never write one
      spdlog::error("process {}: its record is too large to keep ({} bytes); it is left out", id, frame.size());
      continue;
    }
    bytes += frame;
  }
  srv_.write_atomically(srv_.opts().state_dir + "/procs.msgpack", std::move(bytes));
}

void proc_table::load() {
  load_saved();
  adopt_unlisted();
  if (!procs_.empty()) save();
  remove_stray_logs();
}

void proc_table::load_saved() {
  std::string path = srv_.opts().state_dir + "/procs.msgpack";
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno != ENOENT) move_aside(path, fmt::format("cannot open: {}", std::strerror(errno)));
    return;
  }
  std::string bytes;
  char buf[65536];
  ssize_t n;
  constexpr size_t kMaxFile = 1u << 30;
  while ((n = ::read(fd.get(), buf, sizeof buf)) > 0 && bytes.size() <= kMaxFile)
    bytes.append(buf, static_cast<size_t>(n));
  // Frame by frame: a damaged frame is skipped; a damaged length ends the reading, keeping
  // every record before it.
  ipc::frame_reader reader;
  reader.feed(bytes.data(), bytes.size());
  std::string damage;
  size_t records = 0, bad = 0;
  for (;;) {
    auto body = reader.next_body();
    if (!body) {
      damage = body.err().message;
      break;
    }
    if (!body.value()) {
      if (reader.buffered() > 0) damage = fmt::format("the last {} bytes are a truncated record", reader.buffered());
      break;
    }
    auto m = ipc::message::parse(body.value()->data(), body.value()->size());
    auto file = m ? ipc::decode<ipc::procs_file>(*m) : result<ipc::procs_file>(m.err());
    if (!file) {
      ++bad;
      if (damage.empty()) damage = file.err().message;
      continue;
    }
    next_id_ = std::max(next_id_, file->next_id);
    for (auto& r : file->procs) records += add_loaded(r) ? 1 : 0;
  }
  if (!damage.empty()) {
    spdlog::error("state file {} is damaged ({}; {} unreadable records); kept the {} records that could be read", path,
                  damage, bad, records);
    move_aside(path, damage);
  }
}

bool proc_table::add_loaded(proc_info& r) {
  if (r.id == 0 || procs_.contains(r.id)) return false;
  auto p = std::make_unique<bg_proc>();
  p->id = r.id;
  p->name = std::move(r.name);
  p->session = std::move(r.session);
  p->command = kept_text(r.command);
  p->pid = r.pid;
  p->exit_code = r.exit_code;
  p->signal = r.signal;
  p->started_at_ms = r.started_at_ms;
  p->ended_at_ms = r.ended_at_ms;
  p->error = kept_text(r.error);
  const std::string& state = r.state;
  if (state == "starting" || state == "running") {
    // Its session's wrapper kept its pipes (it was adopted): it is ours again. Otherwise its
    // exit was never seen: never report it as a success.
    if (!reattach(*p)) {
      p->out_r.reset();
      p->err_r.reset();
      p->status_r.reset();
      // Still waiting for its turn in the session (no pid yet): the start went with sbshd.
      bool never = state == "starting" && p->pid <= 0;
      p->state = never ? proc_state::not_started : proc_state::lost;
      p->error = never ? "sbshd stopped while its start waited for the session's shell; start it again"
                       : "sbshd stopped while it was running; its exit status is unknown";
    }
  } else {
    p->state = state == "exited"        ? proc_state::exited
               : state == "killed"      ? proc_state::killed
               : state == "failed"      ? proc_state::failed
               : state == "not_started" ? proc_state::not_started
                                        : proc_state::lost;
    // Its command ended, but processes it left may still run: kill can still reach them.
    if (p->state != proc_state::failed && p->state != proc_state::not_started) reattach(*p);
  }
  next_id_ = std::max(next_id_, p->id + 1);
  procs_.emplace(p->id, std::move(p));
  return true;
}

void proc_table::adopt_unlisted() {
  // The table is written off the loop: a process started just before sbshd stopped may be
  // missing from it. Its session's wrapper knew it.
  for (const auto& [name, s] : srv_.sessions())
    for (const auto& [pgid, pipes] : s->lent()) {
      if (pipes.fds.empty() || procs_.contains(pipes.proc)) continue;
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
