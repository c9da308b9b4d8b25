// run_plan: the engine of `sbsh run`. It creates the run's session, runs each command with
// connection::exec, collects the output (a capped part for the report, the whole to the
// artifact files as it arrives, so that memory stays bounded whatever a command prints),
// decides each stage against its expectation, writes every event as it happens, and
// removes the session at the end. The rules it applies are set out in sbsh/plan.h.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "plans/plan_json.h"
#include "client/sigpipe_guard.h"
#include "ipc/fd.h"
#include "ipc/protocol.h"
#include "ipc/text.h"

namespace sbsh::client {

namespace {

int64_t unix_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

std::string absolute_path(const std::string& p) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(p, ec);
  return ec ? p : abs.lexically_normal().string();
}

result<unique_fd> create_file(const std::string& path, std::string_view what) {
  unique_fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd)
    return make_error(ipc::errc::file, fmt::format("cannot write the {} {}: {}", what, path, std::strerror(errno)));
  return fd;
}

// Watches run_options::cancel_fd while the run lasts. exec can watch one descriptor for
// signals, but it reads the byte it sees, and a cancel that arrives as a command ends would
// then be lost; so a thread of the run's own watches the caller's descriptor without reading
// it, notes the cancel, and stops the running command through a canceller of its own.
class cancel_watch {
 public:
  explicit cancel_watch(int fd) : fd_(fd) {
    int p[2];
    if (fd < 0 || ::pipe2(p, O_CLOEXEC) != 0) return;
    quit_r_.reset(p[0]);
    quit_w_.reset(p[1]);
    try {
      thread_ = std::thread([this] { watch(); });
    } catch (const std::system_error&) {
      // No thread: a cancel is still seen between commands, by cancelled().
    }
  }
  ~cancel_watch() {
    if (!thread_.joinable()) return;
    char b = 1;
    (void)write_all(quit_w_.get(), std::string_view(&b, 1));
    thread_.join();
  }
  cancel_watch(const cancel_watch&) = delete;
  cancel_watch& operator=(const cancel_watch&) = delete;

  // Whether the run is cancelled (a byte is, or was, readable on the caller's descriptor).
  bool cancelled() {
    if (fd_ < 0 || flag_.load()) return flag_.load();
    pollfd pf{fd_, POLLIN, 0};
    if (::poll(&pf, 1, 0) == 1 && (pf.revents & POLLIN) != 0) flag_.store(true);
    return flag_.load();
  }
  [[nodiscard]] int signal_fd() const { return fd_ >= 0 ? relay_.fd() : -1; }

 private:
  void watch() {
    for (;;) {
      pollfd pf[2] = {{fd_, POLLIN, 0}, {quit_r_.get(), POLLIN, 0}};
      if (::poll(pf, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (pf[1].revents != 0) return;
      if ((pf[0].revents & POLLIN) != 0) {
        flag_.store(true);
        relay_.cancel();
        return;
      }
      if (pf[0].revents != 0) return;  // closed or invalid: nothing can cancel the run now
    }
  }

  int fd_;
  canceller relay_;
  unique_fd quit_r_, quit_w_;
  std::atomic<bool> flag_{false};
  std::thread thread_;
};

// One output stream of the running command: the report keeps up to `limit` bytes, the
// artifact file (if any) gets every byte.
struct output_sink {
  std::string& keep;
  bool& truncated;
  uint64_t& bytes;
  size_t limit;
  unique_fd file;
  std::string path;
  std::string write_error;

  void take(std::string_view d) {
    bytes += d.size();
    size_t room = limit > keep.size() ? limit - keep.size() : 0;
    if (d.size() > room) truncated = true;
    keep.append(d.substr(0, room));
    if (int e = file ? write_all(file.get(), d) : 0; e != 0) {
      write_error = fmt::format("cannot write the artifact {}: {}", path, std::strerror(e));
      file.reset();
    }
  }
};

// The command as a message shows it: its first line, shortened.
std::string short_command(const std::string& c) {
  std::string s = c.substr(0, c.find('\n'));
  bool more = s.size() < c.size();
  if (s.size() > 60) {
    s.resize(57);
    more = true;
  }
  return more ? s + "..." : s;
}

// Why a command that did not succeed did not, in words.
std::string what_happened(const command_report& c) {
  if (c.status == command_status::not_run) return c.error.empty() ? "did not run" : "did not run: " + c.error;
  if (c.timed_out) return fmt::format("timed out after {} ms and was stopped", c.timeout.count());
  if (c.shell_restarted)
    return c.exit_code ? fmt::format("ended its shell with status {} (the session's state was lost)", *c.exit_code)
                       : "ended its shell (the session's state was lost)";
  if (c.signal) return fmt::format("was killed by {}", ipc::signal_name(*c.signal));
  if (c.exit_code) return fmt::format("exited with status {}", *c.exit_code);
  return c.error.empty() ? "failed" : c.error;
}

class plan_runner {
 public:
  plan_runner(connection& c, const plan& p, const run_options& o, const std::function<void(const run_event&)>& cb)
      : conn_(c), plan_(p), opts_(o), on_event_(cb), watch_(o.cancel_fd) {}

  sbsh::status prepare();
  run_report run();

 private:
  sbsh::status open_outputs();
  sbsh::status pick_session();
  void emit(std::string_view name, int stage = -1, int command = -1);
  bool start_session();
  bool run_stage(int i);
  void run_command(int i, int j);
  void decide_stage(int i, int last);
  void stop(run_status s, int stage, int command, std::string message);
  void sbsh_failed(const error& e, int stage, int command, const std::string& message);
  void finish();

  connection& conn_;
  const plan& plan_;
  const run_options& opts_;
  const std::function<void(const run_event&)>& on_event_;
  run_report report_;
  unique_fd report_fd_, events_fd_;
  std::string artifacts_;
  bool events_failed_ = false;
  bool fatal_ = false;  // report_.error ended the run
  bool session_made_ = false;
  std::string session_dir_;  // where the session's shells start: relative cwds are taken from it
  bool stopped_ = false;
  std::chrono::steady_clock::time_point t0_;
  cancel_watch watch_;
};

sbsh::status plan_runner::prepare() {
  if (auto s = pick_session(); !s) return s;
  return open_outputs();
}

sbsh::status plan_runner::open_outputs() {
  if (!opts_.artifacts_dir.empty()) {
    artifacts_ = absolute_path(opts_.artifacts_dir);
    std::error_code ec;
    std::filesystem::create_directories(artifacts_, ec);
    if (ec)
      return make_error(ipc::errc::file,
                        fmt::format("cannot make the artifacts directory {}: {}", artifacts_, ec.message()));
  }
  if (!opts_.report_path.empty()) {
    auto fd = create_file(opts_.report_path, "report");
    if (!fd) return fd.err();
    report_fd_ = std::move(*fd);
  }
  if (!opts_.events_path.empty()) {
    auto fd = create_file(opts_.events_path, "event log");
    if (!fd) return fd.err();
    events_fd_ = std::move(*fd);
  }
  return ok_status();
}

// A run starts from a fresh shell, so the session must be new: a name that is taken (by
// an earlier run of a process with the same pid that kept its session, say) is skipped.
sbsh::status plan_runner::pick_session() {
  static std::atomic<unsigned> counter{0};
  for (int tries = 0; tries < 100; ++tries) {
    std::string name = !opts_.session.empty() ? opts_.session : fmt::format("run-{}-{}", ::getpid(), ++counter);
    auto d = conn_.show_session(name);
    if (!d && !ipc::has_code(d.err(), ipc::errc::no_such_session)) return d.err();
    if (!d) {
      report_.session = name;
      return ok_status();
    }
    if (!opts_.session.empty())
      return ipc::make_error(ipc::errc::session_exists,
                             fmt::format("a session named '{}' exists; a run needs a fresh one: choose another "
                                         "name, or remove it (sbsh session rm {})",
                                         name, name));
  }
  return ipc::make_error(ipc::errc::session_exists, "found no free session name of the form run-PID-N");
}

run_report plan_runner::run() {
  sigpipe_guard no_sigpipe(true);  // the event log may be a pipe whose reader goes away
  t0_ = std::chrono::steady_clock::now();
  report_.started_at_ms = unix_ms();
  for (const auto& s : plan_.stages) {
    stage_report st{s.name, s.expect, stage_status::skipped, {}};
    for (const auto& c : s.commands) {
      command_report cr;
      cr.command = c.run;
      cr.cwd = c.cwd;
      cr.env = c.env;
      cr.timeout = c.timeout.value_or(plan_.timeout);
      // None given: the session's default applies (sbshd's, for an exec with no timeout).
      if (cr.timeout.count() == 0) cr.timeout = std::chrono::milliseconds(plan_.session.timeout_ms);
      st.commands.push_back(std::move(cr));
    }
    report_.stages.push_back(std::move(st));
  }
  emit("plan_started");
  if (start_session()) {
    for (int i = 0; i < static_cast<int>(report_.stages.size()) && !stopped_; ++i) run_stage(i);
  }
  finish();
  return std::move(report_);
}

void plan_runner::emit(std::string_view name, int stage, int command) {
  std::string line = event_json(name, stage, command, report_, unix_ms());
  if (!events_failed_) {
    std::string out = line + "\n";
    for (int fd : {events_fd_.get(), opts_.events_fd}) {
      int e = fd < 0 ? 0 : write_all(fd, out);
      if (e == 0) continue;
      // The run goes on without its event log; the report says it was not complete.
      events_failed_ = true;
      if (!report_.error)
        report_.error =
            make_error(ipc::errc::file, fmt::format("the event log stopped at {}: {}", name, std::strerror(e)));
      break;
    }
  }
  if (on_event_) on_event_(run_event{name, stage, command, report_, line});
}

bool plan_runner::start_session() {
  if (watch_.cancelled()) {
    stop(run_status::cancelled, -1, -1, "cancelled before the session was made");
    return false;
  }
  session_spec s = plan_.session;
  s.name = report_.session;
  auto r = conn_.create_session(s);
  if (!r) {
    sbsh_failed(r.err(), -1, -1, "could not create the session: " + r.err().message);
    return false;
  }
  session_made_ = true;
  // The session's directory as sbshd keeps it (a snapshot's copy, say), for the commands
  // whose cwd is relative.
  if (auto d = conn_.show_session(s.name); d) session_dir_ = d->definition.cwd;
  return true;
}

bool plan_runner::run_stage(int i) {
  auto& st = report_.stages[static_cast<size_t>(i)];
  if (watch_.cancelled()) {
    stop(run_status::cancelled, i, -1, fmt::format("cancelled before stage {}", st.name));
    return false;
  }
  if (!artifacts_.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(artifacts_ + "/" + st.name, ec);
    if (ec) {
      error e = make_error(ipc::errc::file, fmt::format("cannot make the artifacts directory {}/{}: {}", artifacts_,
                                                        st.name, ec.message()));
      sbsh_failed(e, i, -1, e.message);
      return false;
    }
  }
  emit("stage_started", i);
  int last = 0;
  for (; last < static_cast<int>(st.commands.size()); ++last) {
    if (last > 0 && watch_.cancelled()) break;
    run_command(i, last);
    if (stopped_ || st.commands[static_cast<size_t>(last)].status != command_status::succeeded) break;
  }
  decide_stage(i, last);
  emit("stage_finished", i);
  return !stopped_;
}

// The stage's status once it ended at command `last` (its size when all succeeded).
void plan_runner::decide_stage(int i, int last) {
  auto& st = report_.stages[static_cast<size_t>(i)];
  std::string where = fmt::format("stage {}", st.name);
  if (stopped_) {  // sbsh itself failed during the stage
    st.status = stage_status::failed;
    return;
  }
  if (last < static_cast<int>(st.commands.size())) {
    const auto& c = st.commands[static_cast<size_t>(last)];
    std::string which = fmt::format("{}, command {} ({})", where, last, short_command(c.command));
    if (c.status == command_status::skipped || c.status == command_status::cancelled || watch_.cancelled()) {
      st.status = stage_status::cancelled;
      stop(run_status::cancelled, i, last,
           c.status == command_status::skipped ? fmt::format("cancelled before {}", which) : fmt::format("cancelled during {}", which));
    } else if (c.status == command_status::failed && st.expect == expectation::failure) {
      st.status = stage_status::passed;  // the failure it expected
    } else {
      st.status = stage_status::failed;
      stop(run_status::failed, i, last, fmt::format("{} {}", which, what_happened(c)));
    }
  } else if (st.expect == expectation::failure) {
    st.status = stage_status::failed;
    stop(run_status::failed, i, -1,
         fmt::format("{} was expected to fail, but all its {} commands succeeded", where, st.commands.size()));
  } else {
    st.status = stage_status::passed;
  }
}

void plan_runner::run_command(int i, int j) {
  auto& c = report_.stages[static_cast<size_t>(i)].commands[static_cast<size_t>(j)];
  const auto& pc = plan_.stages[static_cast<size_t>(i)].commands[static_cast<size_t>(j)];
  output_sink sinks[2] = {{c.stdout_data, c.stdout_truncated, c.stdout_bytes, opts_.output_limit, {}, {}, {}},
                          {c.stderr_data, c.stderr_truncated, c.stderr_bytes, opts_.output_limit, {}, {}, {}}};
  if (!artifacts_.empty()) {
    std::string base = fmt::format("{}/{}/{}", artifacts_, report_.stages[static_cast<size_t>(i)].name, j);
    for (auto* s : {&sinks[0], &sinks[1]}) {
      s->path = base + (s == &sinks[0] ? ".stdout" : ".stderr");
      auto fd = create_file(s->path, "artifact");
      if (!fd) {
        c.status = command_status::not_run;
        c.error = fd.err().message;
        sbsh_failed(fd.err(), i, j, fd.err().message);
        return;
      }
      s->file = std::move(*fd);
    }
    c.stdout_file = sinks[0].path;
    c.stderr_file = sinks[1].path;
  }
  exec_options eo;
  eo.session = report_.session;
  eo.command = pc.run;
  eo.cwd = pc.cwd.empty() || pc.cwd.front() == '/' || session_dir_.empty() ? pc.cwd : session_dir_ + "/" + pc.cwd;
  eo.env = pc.env;
  eo.timeout = c.timeout;
  eo.tty = pc.tty;
  std::string typed;
  for (const auto& line : pc.input) typed += line + "\n";
  if (!pc.input.empty()) eo.stdin_data = std::move(typed);
  eo.signal_fd = watch_.signal_fd();
  eo.on_output = [&sinks](stream s, std::string_view d) { sinks[s == stream::err ? 1 : 0].take(d); };
  emit("command_started", i, j);
  auto r = conn_.exec(eo);
  if (!r) {
    c.status = command_status::not_run;
    c.error = r.err().message;
  } else {
    c.exit_code = r->exit_code;
    c.signal = r->signal;
    c.timed_out = r->timed_out;
    c.shell_restarted = r->shell_restarted;
    c.duration_ms = r->duration_us / 1000;
    c.started_at_ms = r->started_at_ms;
    c.error = r->error;
    bool clean = r->exit_code == 0 && !r->signal && !r->timed_out && !r->shell_restarted;
    // A cancel that reached the command stopped the rest of its text, even when the process
    // it stopped had just exited 0 by itself (`touch x; sleep 60` stopped as touch ends).
    if (r->cancelled || (!clean && watch_.cancelled())) c.status = command_status::cancelled;
    else if (clean) c.status = command_status::succeeded;
    else if (!r->ran) c.status = command_status::not_run;
    else c.status = command_status::failed;
  }
  for (const auto& s : sinks)
    if (!s.write_error.empty() && c.error.empty()) c.error = s.write_error;
  emit("command_finished", i, j);
  if (!r) sbsh_failed(r.err(), i, j, fmt::format("stage {}, command {}: {}", report_.stages[static_cast<size_t>(i)].name, j, r.err().message));
  for (const auto& s : sinks)
    if (!s.write_error.empty()) sbsh_failed(make_error(ipc::errc::file, s.write_error), i, j, s.write_error);
}

void plan_runner::stop(run_status s, int stage, int command, std::string message) {
  if (stopped_) return;
  stopped_ = true;
  report_.status = s;
  report_.reason = run_reason{stage, command, std::move(message)};
}

// sbsh's own failure: the run ends, failed, and exit_status says 255.
void plan_runner::sbsh_failed(const error& e, int stage, int command, const std::string& message) {
  // It outranks a failure of the event log, after which the run went on.
  if (!report_.error || !fatal_) report_.error = e;
  fatal_ = true;
  stop(run_status::failed, stage, command, message);
}

void plan_runner::finish() {
  if (session_made_ && !opts_.keep_session) {
    auto r = conn_.remove_session(report_.session);
    if (!r && !report_.error) report_.error = make_error(r.err().code, "could not remove the session: " + r.err().message);
  }
  report_.session_kept = session_made_ && opts_.keep_session;
  report_.duration_ms =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0_).count());
  emit("plan_finished");
  int e = report_fd_ ? write_all(report_fd_.get(), report_json(report_) + "\n") : 0;
  if (e != 0 && !report_.error)
    report_.error =
        make_error(ipc::errc::file, fmt::format("cannot write the report {}: {}", opts_.report_path, std::strerror(e)));
}

}  // namespace

result<run_report> run_plan(connection& conn, const plan& p, const run_options& opts,
                            const std::function<void(const run_event&)>& on_event) {
  if (auto v = validate_plan(p); !v) return v.err();
  plan_runner runner(conn, p, opts, on_event);
  if (auto s = runner.prepare(); !s) return s.err();
  return runner.run();
}

}  // namespace sbsh::client
