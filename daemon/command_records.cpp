// Kept commands: their records, log files and the requests that read them.
#include "daemon/command_records.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/paths.h"
#include "daemon/client_conn.h"
#include "daemon/service_context.h"
#include "daemon/session.h"
#include "ipc/bounds.h"
#include "ipc/messages.h"

namespace sbsh::daemon {

using ipc::errc;
using ipc::msg_type;
namespace msg = ipc::msg;

command_records::command_records(service_context& srv, std::string dir)
    : srv_(srv),
      dir_(std::move(dir)),
      replies_(srv, [this](const log_replies::finished& f) { logs_sent(f); }) {}

command_records::~command_records() { reserve_job_serials(0, nullptr, nullptr); }

namespace {
constexpr const char* kNextIdFile = "next-id";
constexpr uint64_t kIdBlock = 1000;  // ids reserved at a time: a write per thousand kept commands
}  // namespace

void command_records::start() {
  DIR* d = ::opendir(dir_.c_str());
  std::vector<std::string> files;
  while (auto* e = d != nullptr ? ::readdir(d) : nullptr)
    if (e->d_name[0] != '.' && std::strcmp(e->d_name, kNextIdFile) != 0) files.push_back(dir_ + "/" + e->d_name);
  if (d != nullptr) ::closedir(d);
  for (const auto& f : files) ::unlink(f.c_str());
  // Before any request is served: a few bytes, read and written once.
  std::ifstream in(dir_ + "/" + kNextIdFile);
  uint64_t next = 0;
  if (!(in >> next) || next == 0) next = 1;
  first_id_ = next;
  continue_job_serials(next - 1);
  reserve_ids(next + kIdBlock);
  // Every serial, kept or not (exec_started shows it too), is below the block reserved: the
  // next block is taken half a block ahead of need.
  reserve_job_serials(
      next + kIdBlock / 2,
      [](void* self, uint64_t serial) {
        auto* me = static_cast<command_records*>(self);
        me->reserve_ids(serial + kIdBlock);
        return serial + kIdBlock / 2;
      },
      this);
}

void command_records::reserve_ids(uint64_t end) {
  reserved_end_ = end;
  // Written in place of the old one (rename): a crash leaves the old number or the new one.
  // Without fsync: what must survive is a crash of sbshd, which leaves the page cache.
  if (auto made = make_dirs(dir_); !made) {
    spdlog::warn("cannot keep the next command id: {}", made.err().message);
    return;
  }
  std::string path = dir_ + "/" + kNextIdFile, tmp = path + ".tmp";
  std::string text = std::to_string(end) + "\n";
  unique_fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  int e = !fd ? errno : write_all(fd.get(), text);
  if (e == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) e = errno;
  if (e != 0) spdlog::warn("cannot keep the next command id in {}: {}", path, std::strerror(e));
}

status command_records::admit(const exec_job& job) const {
  if (job.detach_after_ms == 0 || detached_running_ < kMaxDetached) return ok_status();
  return make_error(errc::bad_request,
                    fmt::format("{} detached commands are still running, as many as sbshd keeps; wait for some "
                                "('sbsh wait %ID') or stop them ('sbsh kill %ID') first",
                                detached_running_));
}

std::string command_records::log_path(uint64_t id, int stream_no) const {
  return fmt::format("{}/{}.{}", dir_, id, stream_no == ipc::kStdout ? "out" : "err");
}

void command_records::queued(const exec_job& job) {
  auto r = std::make_unique<record>();
  r->id = job.serial;
  r->session = job.session;
  r->command = job.command;
  records_[job.serial] = std::move(r);
  expire();
}

void command_records::started(const exec_job& job) {
  auto it = records_.find(job.serial);
  if (it == records_.end()) return;
  it->second->started = true;
  it->second->started_at_ms = job.started_at_ms;
  it->second->generation = job.generation;
}

void command_records::output(uint64_t serial, int stream_no, std::string_view data) {
  auto it = records_.find(serial);
  if (it == records_.end() || data.empty()) return;
  record& r = *it->second;
  int i = stream_no == ipc::kStdout ? 0 : 1;
  if (r.bytes[i] == 0) {
    status opened = make_dirs(dir_);
    if (opened) opened = r.logs[i].open(log_path(r.id, stream_no), kKeptLogCap);
    if (!opened) spdlog::warn("command {}: its output is not kept: {}", r.id, opened.err().message);
  }
  r.bytes[i] += data.size();
  r.logs[i].append(data.data(), data.size());
  feed_followers(srv_, r.followers, stream_no, data);
}

void command_records::detached(uint64_t serial) {
  auto it = records_.find(serial);
  if (it == records_.end() || it->second->detached) return;
  it->second->detached = true;
  ++detached_running_;
}

void command_records::finished(const exec_job& job, uint64_t duration_us) {
  auto it = records_.find(job.serial);
  if (it == records_.end()) return;
  record& r = *it->second;
  r.finished = true;
  r.ended_mono_us = mono_us();
  r.ended_at_ms = wall_ms();
  r.result = result_of(job, duration_us);
  r.result.session = r.session;
  r.result.command = r.command;
  if (r.detached && detached_running_ > 0) --detached_running_;
  for (auto& l : r.logs) l.close();
  for (auto& w : r.waiters) reply_end(w.serial, w.req, r);
  r.waiters.clear();
  for (auto& f : r.followers) reply_end(f.serial, f.req, r);
  r.followers.clear();
  // Log replies still reading the files end once they have (pump).
  expire();
}

std::vector<command_info> command_records::list(bool all) const {
  std::vector<command_info> out;
  for (const auto& [id, rp] : records_) {
    const record& r = *rp;
    if (r.finished ? !all : !r.detached) continue;  // one with its client is that client's
    command_info c;
    c.id = r.id;
    c.session = r.session;
    c.command = r.command;
    c.state = r.finished ? "finished" : r.started ? "running" : "queued";
    c.detached = r.detached;
    c.started_at_ms = r.started ? r.started_at_ms : 0;
    if (r.finished) {
      const exec_outcome& o = r.result.outcome;
      c.exit_code = o.exit_code;
      c.signal = o.signal;
      c.timed_out = o.timed_out;
      c.cancelled = o.cancelled;
      c.ended_at_ms = r.ended_at_ms;
      if (!r.result.ran) c.started_at_ms = 0;
    } else if (r.started) {
      // It runs at the top level of its session's shell: that is its process.
      if (session* s = srv_.find_session(r.session)) c.pid = s->shell().shell_pid();
    }
    out.push_back(std::move(c));
  }
  return out;
}

void command_records::reply_end(uint64_t serial, uint64_t req, const record& r) {
  auto* c = srv_.client_by_serial(serial);
  if (c == nullptr) return;
  if (r.finished) {
    command_result res = r.result;
    std::copy(std::begin(r.bytes), std::end(r.bytes), std::begin(res.bytes));
    return c->send(done_frame(res, /*release=*/false, req));
  }
  msg::command_running m;
  m.command_id = r.id;
  m.session = r.session;
  m.command = r.command;
  m.started = r.started;
  m.started_at_ms = r.started_at_ms;
  m.stdout_bytes = r.bytes[0];
  m.stderr_bytes = r.bytes[1];
  m.generation = r.generation;
  m.waiting_for_input = r.waiting;
  if (r.waiting) m.prompt = r.prompt;
  std::string screen;
  if (session* s = srv_.find_session(r.session)) screen = s->jobs().screen_of(r.id);
  m.screen = screen;
  c->send(ipc::encode(m, req));
}

command_records::record* command_records::find(uint64_t id, uint64_t req, client_conn& c) {
  auto it = records_.find(id);
  if (it != records_.end()) return it->second.get();
  if (id < first_id_) {
    c.send_error(req, errc::no_such_command,
                 fmt::format("command %{} was kept by an earlier sbshd, which has stopped: kept commands, their "
                             "output and their results do not outlive sbshd; run the command again",
                             id));
    return nullptr;
  }
  c.send_error(req, errc::no_such_command,
               fmt::format("no kept command %{}: commands are kept for {} minutes after they end, and forgotten "
                           "when sbshd restarts",
                           id, kKeptForMs / 60000));
  return nullptr;
}

void command_records::forget_gone_waiters(record& r) {
  // Waiters of clients that left go now, not when the command ends: a command that runs for
  // days, waited for by clients that come and go, holds only the ones still there.
  std::erase_if(r.waiters, [this](const waiter& w) { return srv_.client_by_serial(w.serial) == nullptr; });
}

void command_records::handle_wait(client_conn& c, ipc::envelope& env) {
  auto req = ipc::decode<msg::command_wait>(env.msg);
  if (!req) return c.send_error(env.msg.id(), req.err());
  record* r = find(req->command_id, env.msg.id(), c);
  if (r == nullptr) return;
  if (r->finished || (req->until_input && r->waiting)) return reply_end(c.serial(), env.msg.id(), *r);
  forget_gone_waiters(*r);
  waiter w{c.serial(), env.msg.id(), nullptr, req->until_input};
  if (req->timeout_ms > 0) {
    w.deadline = uv::make_handle<uv::timer>(srv_.loop());
    uint64_t id = r->id, serial = c.serial(), rq = env.msg.id();
    w.deadline->start(req->timeout_ms, [this, id, serial, rq] {
      auto it = records_.find(id);
      if (it == records_.end()) return;
      // Erasing the waiter frees this very timer: copy out what is still needed first.
      std::erase_if(it->second->waiters, [&](const waiter& x) { return x.serial == serial && x.req == rq; });
      if (auto* cc = srv_.client_by_serial(serial))
        cc->send_error(rq, errc::timeout, fmt::format("command %{} is still running", id));
    });
  }
  r->waiters.push_back(std::move(w));
}

void command_records::handle_input(client_conn& c, ipc::envelope& env) {
  auto req = ipc::decode<msg::command_input>(env.msg);
  if (!req) return c.send_error(env.msg.id(), req.err());
  record* r = find(req->command_id, env.msg.id(), c);
  if (r == nullptr) return;
  if (r->finished)
    return c.send_error(env.msg.id(), errc::no_input,
                        fmt::format("command %{} has ended: 'sbsh wait %{}' gives its result", r->id, r->id));
  session* s = srv_.find_session(r->session);
  if (s == nullptr)
    return c.send_error(env.msg.id(), errc::no_input, fmt::format("command %{}'s session is gone", r->id));
  // The answer says where its output stood before the input: what follows is its answer.
  msg::command_running before;
  before.stdout_bytes = r->bytes[0];
  before.stderr_bytes = r->bytes[1];
  auto done = s->jobs().input(r->id, req->data.bytes, req->typed, req->eof);
  if (!done) return c.send_error(env.msg.id(), done.err());
  before.command_id = r->id;
  before.session = r->session;
  before.command = r->command;
  before.started = r->started;
  before.started_at_ms = r->started_at_ms;
  c.send(ipc::encode(before, env.msg.id()));
}

void command_records::waiting(uint64_t serial, std::string_view prompt) {
  auto it = records_.find(serial);
  if (it == records_.end()) return;
  record& r = *it->second;
  r.waiting = true;
  r.prompt = prompt;
  std::vector<waiter> answered;
  for (auto w = r.waiters.begin(); w != r.waiters.end();) {
    if (!w->until_input) {
      ++w;
      continue;
    }
    answered.push_back(std::move(*w));
    w = r.waiters.erase(w);
  }
  for (const auto& w : answered) reply_end(w.serial, w.req, r);
}

void command_records::resumed(uint64_t serial) {
  if (auto it = records_.find(serial); it != records_.end()) it->second->waiting = false;
}

void command_records::handle_kill(client_conn& c, ipc::envelope& env) {
  auto req = ipc::decode<msg::command_kill>(env.msg);
  if (!req) return c.send_error(env.msg.id(), req.err());
  record* r = find(req->command_id, env.msg.id(), c);
  if (r == nullptr) return;
  if (r->finished) return reply_end(c.serial(), env.msg.id(), *r);
  // Answered as it ends, like a wait: also when stop() ends a queued command at once, before
  // the record can be forgotten (finished() answers its waiters first).
  forget_gone_waiters(*r);
  r->waiters.push_back({c.serial(), env.msg.id(), nullptr});
  uint64_t id = r->id;
  session* s = srv_.find_session(r->session);
  if (s != nullptr && s->jobs().stop(id, req->signal.number)) return;
  if (auto it = records_.find(id); it != records_.end())
    std::erase_if(it->second->waiters,
                  [&](const waiter& w) { return w.serial == c.serial() && w.req == env.msg.id(); });
  c.send_error(env.msg.id(), errc::internal, fmt::format("command %{} is not in its session's queue", id));
}

void command_records::handle_logs(client_conn& c, ipc::envelope& env) {
  const auto& m = env.msg;
  auto req = ipc::decode<msg::command_logs>(m);
  if (!req) return c.send_error(m.id(), req.err());
  record* r = find(req->command_id, m.id(), c);
  if (r == nullptr) return;
  std::vector<log_stream::source> sources;
  for (int i = 0; i < 2; ++i) {
    uint64_t offset = i == 0 ? req->stdout_offset : req->stderr_offset;
    if (!(i == 0 ? req->out : req->err) || r->bytes[i] <= offset) continue;
    std::string path = log_path(r->id, i == 0 ? ipc::kStdout : ipc::kStderr);
    // The files keep the newest bytes: the first of them is at bytes - kept.
    uint64_t kept = 0;
    for (const auto& f : capped_log_files(path)) {
      struct stat st {};
      if (::stat(f.c_str(), &st) == 0) kept += static_cast<uint64_t>(st.st_size);
    }
    uint64_t first = r->bytes[i] > kept ? r->bytes[i] - kept : 0;
    sources.push_back({std::move(path), i == 0 ? ipc::kStdout : ipc::kStderr, offset > first ? offset - first : 0});
  }
  replies_.add(c, m.id(), r->id, sources, 0, req->follow && !r->finished, req->out, req->err);
}

void command_records::logs_sent(const log_replies::finished& f) {
  auto r = records_.find(f.id);
  if (r == records_.end())
    return f.c.send_error(f.req, errc::no_such_command,
                          fmt::format("command %{} was forgotten while its output was read", f.id));
  if (f.follow && !r->second->finished) {
    r->second->followers.push_back({f.c.serial(), f.req, f.out, f.err});
    return;
  }
  reply_end(f.c.serial(), f.req, *r->second);
}

void command_records::client_drained(client_conn& c) { replies_.client_drained(c); }

bool command_records::stop_following(client_conn& c, uint64_t req) {
  if (auto id = replies_.cancel(c, req)) {  // still sending what was logged before
    if (auto r = records_.find(*id); r != records_.end()) reply_end(c.serial(), req, *r->second);
    return true;
  }
  for (auto& [id, r] : records_) {
    auto it = std::find_if(r->followers.begin(), r->followers.end(),
                           [&](const log_follower& f) { return f.serial == c.serial() && f.req == req; });
    if (it == r->followers.end()) continue;
    r->followers.erase(it);
    reply_end(c.serial(), req, *r);
    return true;
  }
  return false;
}

void command_records::forget(std::map<uint64_t, std::unique_ptr<record>>::iterator it) {
  uint64_t id = it->first;
  // A log reply still reading its files keeps them open: unlinking is safe meanwhile.
  for (int stream_no : {ipc::kStdout, ipc::kStderr})
    for (const auto& f : capped_log_files(log_path(id, stream_no))) ::unlink(f.c_str());
  records_.erase(it);
}

void command_records::expire() {
  uint64_t now = mono_us();
  size_t finished = 0;
  uint64_t bytes = 0;
  for (const auto& [id, r] : records_) {
    if (!r->finished) continue;
    ++finished;
    for (auto b : r->bytes) bytes += std::min(b, kKeptLogCap);
  }
  // Oldest first (ids grow with arrival): past the time, the count or the bytes, they go.
  for (auto it = records_.begin(); it != records_.end();) {
    record& r = *it->second;
    bool old = r.finished && now - r.ended_mono_us > kKeptForMs * 1000;
    if (!r.finished || !r.waiters.empty() || !r.followers.empty() ||
        (!old && finished <= kMaxKeptFinished && bytes <= kMaxKeptBytes)) {
      ++it;
      continue;
    }
    --finished;
    for (auto b : r.bytes) bytes -= std::min(b, kKeptLogCap);
    forget(it++);
  }
  // Come back when the oldest finished record's time is up.
  uint64_t next = 0;
  for (const auto& [id, r] : records_)
    if (r->finished) {
      uint64_t age_ms = (now - r->ended_mono_us) / 1000;
      next = age_ms >= kKeptForMs ? 1 : kKeptForMs - age_ms;
      break;
    }
  if (next == 0) {
    expiry_timer_.reset();
    return;
  }
  // A new timer each time: this may run inside the old one's callback.
  expiry_timer_ = uv::make_handle<uv::timer>(srv_.loop());
  expiry_timer_->start(next + 1000, [this] { expire(); });
}

}  // namespace sbsh::daemon
