// A session's commands, one at a time; see job_runner.h.
#include "daemon/job_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>


#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ranges>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/cgroup.h"
#include "daemon/input_wait.h"
#include "daemon/terminal_screen.h"
#include "ipc/messages.h"
#include "ipc/text.h"

namespace sbsh::daemon {

namespace {

// After SIGKILL, how long the shell may take to answer before sbshd decides that it does not
// respond (it ignores SIGINT, or is stopped) and restarts it: the last resort.
constexpr uint64_t kSettleMs = 1000;
// How often sbshd reads a lease's record page while the lease lasts (lease_page.h): a leased
// command's timeout is late by at most this.
constexpr uint64_t kLeaseLookMs = 10;
// Output frames queued to one client before we stop reading that command's pipes.
constexpr size_t kMaxClientQueue = 1u << 20;
// stdin bytes buffered for one command before we stop reading its client.
constexpr size_t kMaxStdinBuffer = 1u << 20;
// Background output pipes kept open (and discarded) per session after their commands ended.
constexpr size_t kMaxDraining = 64;
// Kept per session for `session show`.
constexpr size_t kHistory = 20;
constexpr size_t kMaxInitOutput = 64u << 10;
// How much of an init command an error quotes.
constexpr size_t kQuotedCommand = 256;
// What `session ls` and `session show` call a command an earlier sbshd started.
constexpr std::string_view kEarlierCommand = "(started before sbshd restarted)";
// Waiting for input: how long a command must have printed nothing before the kernel is asked
// (a prompt is printed, then read), how often it is asked at first, and at most; each
// answer of no doubles the wait until output comes.
constexpr uint64_t kInputSettleMs = 100;
constexpr uint64_t kFirstProbeMs = 50;
constexpr uint64_t kMaxProbeMs = 1000;
// The end of a command's output kept as its prompt.
constexpr size_t kMaxPrompt = 256;

// Whether anything may still write into a pipe whose read end is `out` or `err` (-1: none):
// with no writer left a read end reports a hang-up (data may still be buffered: the client
// reads it). One poll for both: this runs at the end of every command.
bool has_writers(int out, int err) {
  pollfd p[2] = {{out, POLLIN, 0}, {err, POLLIN, 0}};  // poll skips a negative fd
  if (::poll(p, 2, 0) < 0) return false;
  return (out >= 0 && (p[0].revents & POLLHUP) == 0) || (err >= 0 && (p[1].revents & POLLHUP) == 0);
}

// exec --tty: a pseudo-terminal of the job's size. Its master is what sbshd reads (out_r) and
// writes the command's input to (in_w); its other end (out_w) is the command's stdin, stdout
// and stderr, which the shell makes its controlling terminal. The terminal starts as a new
// one does: canonical input, echo, output post-processing (a line ends in CR LF). `ptmx` is
// the multiplexer of the devpts the shell sees: a confined shell has an instance of its own,
// where the terminal must be for its name (/dev/pts/N, what `tty` prints) to lead to it.
status open_terminal(exec_job& job, const std::string& ptmx) {
  unique_fd master(::open(ptmx.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master || ::unlockpt(master.get()) != 0)
    return make_error(ipc::errc::internal,
                      fmt::format("cannot open a pseudo-terminal ({}): {}", ptmx, std::strerror(errno)));
  // Its other end by the master itself, never by a name, which sbshd's own /dev/pts may give
  // to another terminal.
  unique_fd other(::ioctl(master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!other)
    return make_error(ipc::errc::internal,
                      fmt::format("cannot open a pseudo-terminal's other end: {}", std::strerror(errno)));
  winsize size{};
  size.ws_col = job.cols;
  size.ws_row = job.rows;
  ::ioctl(master.get(), TIOCSWINSZ, &size);
  unique_fd input(::fcntl(master.get(), F_DUPFD_CLOEXEC, 0));
  if (!input) return make_error(ipc::errc::internal, fmt::format("cannot copy a descriptor: {}", std::strerror(errno)));
  set_nonblocking(master.get());  // and `input`, which shares its open file
  job.out_r = std::move(master);
  job.out_w = std::move(other);
  job.in_w = std::move(input);
  job.screen = std::make_shared<terminal_screen>(job.cols, job.rows);
  job.has_stdin = true;
  return ok_status();
}

}  // namespace

job_runner::job_runner(const runner_context& ctx, const std::string& name, const session_def& def, shell_port& shell,
                       std::function<void()> activity)
    : ctx_(ctx), name_(name), def_(def), shell_(shell), activity_(std::move(activity)) {}

job_runner::~job_runner() = default;

bool job_runner::blocked() const {
  const shell_port& sh = shell_;
  if (current_ != nullptr || signals_in_flight_ > 0) return true;
  if (sh.state() == session_state::failed || sh.state() == session_state::exited) return false;  // refuses them
  return sh.state() == session_state::restarting || sh.adopted_busy() || init_failed_;
}

void job_runner::enqueue(std::unique_ptr<exec_job> job) {
  shell_.retry_if_failed();
  job->generation = shell_.generation();
  job->arrived_mono_us = mono_us();
  if (job->timeout_ms > 0) {
    // The timeout is the caller's deadline from the moment the request arrived: a command
    // still queued when it passes never runs.
    exec_job* jp = job.get();
    job->deadline = uv::make_handle<uv::timer>(ctx_.loop);
    job->deadline->start(job->timeout_ms, [this, jp] {
      jp->outcome.timed_out = true;
      if (current_.get() == jp) {
        if (jp->kill_stage == kill_stage::none) escalate(*jp);
        return;
      }
      auto it = std::find_if(queue_.begin(), queue_.end(), [jp](const auto& j) { return j.get() == jp; });
      if (it == queue_.end()) return;
      auto j = std::move(*it);
      queue_.erase(it);
      j->outcome.error_code = std::string(ipc::wire_name(ipc::errc::timeout));
      j->outcome.error = fmt::format("not run: its timeout ({} ms) passed while it waited for the commands before it",
                                     j->timeout_ms);
      finish_job(std::move(j));
    });
  }
  if (job->keep) ctx_.records->queued(*job);
  if (job->detach_after_ms > 0 && job->client != nullptr) {
    exec_job* jp = job.get();
    job->detach_timer = uv::make_handle<uv::timer>(ctx_.loop);
    job->detach_timer->start(job->detach_after_ms, [this, jp] { detach(*jp); });
  }
  queue_.push_back(std::move(job));
  // A lease lasts while nothing else waits for the shell.
  if (current_ && current_->lease)
    end_lease(*current_, fmt::format("another request was queued on session '{}'", name_));
  run_next();
}

void job_runner::detach(exec_job& job) {
  // The command goes on at the session's top level, queued or running, as if typed at a
  // prompt nobody watches: its output goes only to its kept log, and its client, told so,
  // may leave without stopping it. Input from that client ends here.
  reply_port* c = job.client;
  if (c == nullptr || job.kill_stage != kill_stage::none) return;
  job.client = nullptr;
  job.detached = true;
  ctx_.records->detached(job.serial);
  // A terminal's or an interactive command's input stays open, for what is typed later.
  if (!job.tty && !job.interactive) close_stdin(job);
  if (job.stdin_pending.size() > kMaxStdinBuffer) c->pause_reading(false);
  job.stdin_pending.clear();
  ipc::msg::exec_detached d;
  d.command_id = job.serial;
  d.waiting_for_input = job.waiting_input;
  d.prompt = job.last_line;
  c->reply(ipc::encode(d, job.id));
  c->job_done(job.id);
  if (current_.get() == &job && !job.io_fds) {
    set_output_paused(job, false);  // it may have waited for that client to read
    pump_output(job, ipc::kStdout, false);
    pump_output(job, ipc::kStderr, false);
  }
  spdlog::debug("session {}: exec {} detached as command {}", name_, job.id, job.serial);
}

void job_runner::close_stdin(exec_job& job) {
  job.stdin_eof = true;
  job.in_watch.reset();
  job.in_w.reset();
}

void job_runner::run_internal(std::string text, std::function<void(exec_job&)> on_done, std::string check_cwd,
                              std::vector<unique_fd> lent) {
  auto job = std::make_unique<exec_job>();
  job->internal = true;
  job->lent = std::move(lent);
  job->check_cwd = std::move(check_cwd);
  job->session = name_;
  job->command = shown_command(text);
  job->text = std::move(text);
  job->on_done = std::move(on_done);
  enqueue(std::move(job));
}

void job_runner::run_first(std::vector<std::string> texts, bool init) {
  init_failed_ = false;
  gen_user_commands_ = 0;
  if (init) init_output_.clear();
  init_pending_ += texts.size();
  // Pushed to the front in reverse, so that they run in their order.
  for (auto it = texts.rbegin(); it != texts.rend(); ++it) {  // NOLINT(modernize-loop-convert): clang 14 cannot build libstdc++ 12's reverse_view
    auto& text = *it;
    auto job = std::make_unique<exec_job>();
    job->internal = true;
    job->init = true;
    job->session = name_;
    job->command = shown_command(text);
    job->text = std::move(text);
    job->generation = shell_.generation();
    job->arrived_mono_us = mono_us();
    job->on_done = [this](exec_job& j) { finish_init_job(j); };
    queue_.push_front(std::move(job));
  }
}

void job_runner::shell_ready() {
  if (init_pending_ == 0) shell_.initialized();
  run_next();
}

void job_runner::run_next() {
  while (!blocked() && !queue_.empty()) {
    const shell_port& sh = shell_;
    auto job = std::move(queue_.front());
    queue_.pop_front();
    if (sh.state() == session_state::failed || sh.state() == session_state::exited) {
      job->outcome.error_code = std::string(ipc::wire_name(ipc::errc::session_failed));
      job->outcome.error = fmt::format("session '{}' is {}: {}; run 'sbsh session restart {}' to start a new shell",
                                       name_, state_name(sh.state()), sh.failure(), name_);
      finish_job(std::move(job));
      continue;
    }
    if (job->generation != sh.generation()) {
      job->outcome.error_code = std::string(ipc::wire_name(ipc::errc::shell_restarted));
      job->outcome.shell_restarted = true;
      job->outcome.error = "not run: the session's shell restarted while this command was queued, "
                           "so the state it expected was lost";
      job->state_lost = true;
      job->state_lost_why = state_lost_why_.empty() ? "the session's shell was replaced" : state_lost_why_;
      if (!job->internal) loss_reported_gen_ = last_user_generation_;
      finish_job(std::move(job));
      continue;
    }
    if (!sh.serving()) {  // starting, or parked: it goes when the shell says it serves
      queue_.push_front(std::move(job));
      shell_.want_channel();
      return;
    }
    if (!start_job(*job)) {
      finish_job(std::move(job));
      continue;
    }
    current_ = std::move(job);
  }
  // A failed or exited session answers what waits at once.
  const shell_port& sh = shell_;
  if (!current_ && (sh.state() == session_state::failed || sh.state() == session_state::exited)) {
    while (!queue_.empty()) {
      auto job = std::move(queue_.front());
      queue_.pop_front();
      job->outcome.error_code = std::string(ipc::wire_name(ipc::errc::session_failed));
      job->outcome.error = fmt::format("session '{}' is {}: {}; run 'sbsh session restart {}' to start a new shell",
                                       name_, state_name(sh.state()), sh.failure(), name_);
      finish_job(std::move(job));
    }
  }
}

bool job_runner::start_lease(exec_job& job) {
  shell_port& sh = shell_;
  if (!sh.serves_leases()) {
    job.outcome.error_code = std::string(ipc::wire_name(ipc::errc::not_supported));
    job.outcome.error = fmt::format(
        "session '{}''s shell takes no leases: its builtin is from an earlier sbsh (an adopted shell); run 'sbsh "
        "session restart {}' for a shell that does, or run commands with exec",
        name_, name_);
    return false;
  }
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    job.outcome.error_code = std::string(ipc::wire_name(ipc::errc::internal));
    job.outcome.error = fmt::format("cannot make a lease's socket: {}", std::strerror(errno));
    return false;
  }
  unique_fd holders(sv[0]), shells(sv[1]);
  // The holder checks who sent each status (the shell), as sbshd does on the channel.
  int on = 1;
  ::setsockopt(holders.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
  auto page = lease_page::make();
  if (!page) {
    job.outcome.error_code = std::string(ipc::wire_name(ipc::errc::internal));
    job.outcome.error = page.err().message;
    return false;
  }
  // In a PID namespace of its own (a confined session) the shell's pids are not the ones the
  // wrapper signals by: its marks then go by the clock alone.
  uint32_t flags = def_.confine ? 0 : SBSH_LEASE_MARK_PIDS;
  uint64_t seq = 0;
  if (auto sent = sh.send_lease(seq, shells.get(), page->second.get(), flags); !sent) {
    job.outcome.error_code = std::string(ipc::wire_name(ipc::errc::shell_restarted));
    job.outcome.error = fmt::format("session '{}''s shell ended before it could take the lease ({}); ask again", name_,
                                    sent.err().message);
    return false;
  }
  // sbshd keeps no copy of the holder's end once it is sent (lease_answered): the holder's
  // death closes the lease at once.
  job.seq = seq;
  job.started = true;
  job.lease_client = std::move(holders);
  job.page.emplace(std::move(page->first));
  job.mark = procs::mark_now(ctx_.ns_last_pid_fd);
  job.started_at_ms = wall_ms();
  job.started_mono_us = mono_us();
  return true;
}

void job_runner::end_lease(exec_job& job, std::string why) {
  if (!job.lease || job.lease_ending) return;
  if (job.lease_why.empty()) job.lease_why = std::move(why);
  if (!job.lease_held) return;  // ended as soon as the builtin has taken it
  job.lease_ending = true;
  shell_.end_lease();
}

void job_runner::lease_answered(const shell_message& m) {
  if (!current_ || !current_->lease || m.seq != current_->seq) return;
  exec_job& job = *current_;
  if (m.type == SBSH_MSG_LEASED && !job.lease_held) {
    job.lease_held = true;
    job.lease_look = uv::make_handle<uv::timer>(ctx_.loop);
    job.lease_look->start(kLeaseLookMs, [this] { read_lease(); }, kLeaseLookMs);
    const shell_port& sh = shell_;
    // Whatever the holder runs changes the shell: it counts as the session's use.
    ++sent_;
    ++gen_user_commands_;
    job.generation = sh.generation();
    last_user_generation_ = job.generation;
    if (job.client != nullptr) {
      ipc::msg::lease_granted g;
      g.shell_pid = sh.shell_pid();
      g.generation = sh.generation();
      std::vector<unique_fd> fds;
      fds.push_back(std::move(job.lease_client));
      job.client->reply_with_fds(ipc::encode(g, job.id), std::move(fds));
    }
    job.lease_client.reset();
    if (job.client == nullptr || !queue_.empty() || !job.lease_why.empty()) {
      std::string why = job.lease_why.empty() ? fmt::format("another request was queued on session '{}'", name_)
                                              : std::exchange(job.lease_why, {});
      end_lease(job, std::move(why));
    }
    return;
  }
  if (m.type != SBSH_MSG_LEASE_ENDED) return;
  read_lease();  // the runs that ended since the last reading
  if (!current_ || current_.get() != &job) return;
  auto j = std::move(current_);
  if (!j->lease_held) {
    j->outcome.error_code = std::string(ipc::wire_name(ipc::errc::internal));
    j->outcome.error = fmt::format(
        "session '{}''s shell could not take the lease (it may not have descriptor {}: a --limit nofile below it)",
        name_, SBSH_LEASE_FD);
  }
  finish_job(std::move(j));
  run_next();
}

void job_runner::finish_lease(std::unique_ptr<exec_job> job) {
  reply_port* c = job->client;
  if (c == nullptr) return;
  if (job->lease_held) {
    ipc::msg::lease_ended e;
    std::string why = !job->outcome.error.empty() ? job->outcome.error
                      : !job->lease_why.empty()   ? job->lease_why
                                                  : std::string(
                                                        "the shell ended it: its holder closed its end, or "
                                                          "a command closed the lease's descriptor");
    e.reason = why;
    c->reply(ipc::encode(e, job->id));
  } else {
    std::string code =
        job->outcome.error_code.empty() ? std::string(ipc::wire_name(ipc::errc::cancelled)) : job->outcome.error_code;
    std::string why = job->outcome.error.empty() ? "the lease ended before it was granted" : job->outcome.error;
    ipc::msg::error e{code, why};
    c->reply(ipc::encode(e, job->id));
  }
  c->job_done(job->id);
}

void job_runner::read_lease() {
  if (!current_ || !current_->lease || !current_->page) return;
  exec_job& job = *current_;
  std::vector<lease_page::record> ended;
  lease_page::tally sum;
  auto took = job.page->take_ended(&ended, &sum);
  lease_page::run now;
  auto saw = took == lease_page::reading::bad ? took : job.page->running(&now);
  if (took == lease_page::reading::bad || saw == lease_page::reading::bad) {
    // Only the builtin writes the page, and it writes it right: something else did.
    std::string why = "the lease's record page was written by something other than the shell; the shell is replaced";
    spdlog::warn("session {}: {}", name_, why);
    job.page.reset();
    restart_later(why, /*forced=*/true);
    return;
  }
  for (const auto& r : ended) leased_run_ended(r);
  ctx_.counters->commands_ended(sum.ended, sum.failed, sum.timed_out);
  if (sum.lost > 0) {
    // Its holder ran them faster than sbshd read: counted, not in the history.
    commands_ += sum.lost;
    sent_ += sum.lost;
    spdlog::info("session {}: {} commands run on a lease ended unseen (the record ring was full)", name_, sum.lost);
  }
  if (sum.ended > 0) activity_();
  if (saw == lease_page::reading::unsettled || now.seq == job.leased.seq) return;
  // Another run, or none: what sbshd did to stop the last one is over.
  job.leased = std::move(now);
  job.leased_stop = 0;
  job.kill_stage = kill_stage::none;
  job.first_signal = SIGTERM;
  kill_timer_.reset();
  job.deadline.reset();
  if (job.leased.seq == 0) return;
  job.mark = job.leased.mark;  // what its processes are told from
  uint64_t deadline = job.leased.deadline_us;
  if (deadline == 0 && def_.timeout_ms > 0) deadline = job.leased.started_us + def_.timeout_ms * 1000;
  if (deadline == 0) return;
  uint64_t now_us = mono_us();
  uint64_t seq = job.leased.seq;
  job.deadline = uv::make_handle<uv::timer>(ctx_.loop);
  job.deadline->start(deadline > now_us ? (deadline - now_us + 999) / 1000 : 0, [this, seq] {
    read_lease();
    if (current_ && current_->lease && current_->leased.seq == seq)
      stop_leased(*current_, SBSH_STATUS_TIMED_OUT, SIGTERM);
  });
}

void job_runner::leased_run_ended(const lease_page::record& r) {
  ++commands_;
  ++sent_;  // (sbshd's counters take the page's totals: read_lease)
  uint64_t now = mono_us();
  uint64_t started = r.started_us != 0 && r.started_us <= now ? r.started_us : now;
  uint64_t took = r.ended_us >= started ? r.ended_us - started : 0;
  history_.push_back({shown_command(r.text, r.full_len), r.exit_value, (r.flags & SBSH_STATUS_TIMED_OUT) != 0, false,
                      wall_ms() - static_cast<int64_t>((now - started) / 1000), took / 1000});
  if (history_.size() > kHistory) history_.pop_front();
}

void job_runner::stop_leased(exec_job& job, uint32_t why, int sig) {
  if (!job.page || job.leased.seq == 0 || job.leased_stop != 0) return;
  job.leased_stop = why;
  job.page->stop(job.leased.seq, why);
  job.first_signal = sig;
  escalate(job);
}

void job_runner::restart_later(const std::string& why, bool forced) {
  // Deferred: the caller may be inside a callback of this very shell.
  auto t = std::make_shared<uv::handle_ptr<uv::timer>>(uv::make_handle<uv::timer>(ctx_.loop));
  uint64_t gen = shell_.generation();
  (*t)->start(0, [this, t, gen, why, forced] {
    t->reset();
    if (gen == shell_.generation()) shell_.restart_shell(why, forced);
  });
}

bool job_runner::start_job(exec_job& job) {
  if (job.lease) return start_lease(job);
  auto fail = [&](const std::string& what) {
    job.outcome.error_code = std::string(ipc::wire_name(ipc::errc::internal));
    job.outcome.error = what;
    return false;
  };
  unique_fd keep_out, keep_err;  // frames mode: the shell holds copies of our read ends
  if (job.tty) {
    const shell_port& sh = shell_;
    std::string ptmx = def_.confine && sh.shell_pid() > 0 ? fmt::format("/proc/{}/root/dev/pts/ptmx", sh.shell_pid())
                                                          : std::string("/dev/ptmx");
    if (auto s = open_terminal(job, ptmx); !s) return fail(s.err().message);
  } else if (!job.io_fds) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return fail("cannot create a pipe");
    job.out_r = unique_fd(out[0]);
    job.out_w = unique_fd(out[1]);
    if (::pipe2(err, O_CLOEXEC) != 0) return fail("cannot create a pipe");
    job.err_r = unique_fd(err[0]);
    job.err_w = unique_fd(err[1]);
    set_nonblocking(job.out_r.get());
    set_nonblocking(job.err_r.get());
    if (job.has_stdin) {
      int in[2];
      if (::pipe2(in, O_CLOEXEC) != 0) return fail("cannot create a pipe");
      job.in_r = unique_fd(in[0]);
      job.in_w = unique_fd(in[1]);
      set_nonblocking(job.in_w.get());
    }
  }
  // The client's own pipes too, when it handed them over (io_fds).
  give_to_confined_shell(def_, ctx_.confine_uid, ctx_.confine_gid,
                         {job.in_r.get(), job.out_w.get(), job.err_w.get()});
  shell_port& sh = shell_;
  job.mark = procs::mark_now(ctx_.ns_last_pid_fd);
  job.started_at_ms = wall_ms();
  job.started_mono_us = mono_us();
  if (def_.memory_max != 0) job.oom_kills_before = cgroup::oom_kills(def_.cgroup);
  run_message m;
  m.text = job.text;
  m.check_cwd = job.check_cwd;
  m.in = job.tty ? job.out_w.get() : job.in_r.get();
  m.out = job.out_w.get();
  m.err = job.tty ? job.out_w.get() : job.err_w.get();
  m.tty = job.tty;
  struct stat input{};
  if (job.tty && ::fstat(job.out_w.get(), &input) == 0) job.input_rdev = input.st_rdev;
  if (job.interactive && !job.tty && ::fstat(job.in_r.get(), &input) == 0) job.input_ino = input.st_ino;
  // While the command runs the shell holds read ends of its output pipes, so that nothing it
  // writes meets a pipe without a reader should sbshd and the client go away (the wrapper
  // then drains them).
  m.keep_out = job.out_r.get();
  m.keep_err = job.err_r.get();
  // A terminal's master, held so: were every copy closed, the kernel would hang the terminal
  // up, and its SIGHUP would end the shell that leads its session.
  if (job.tty) m.keep_err = job.out_r.get();
  int lent[3];
  if (job.lent.size() == 3) {
    for (int i = 0; i < 3; ++i) lent[i] = job.lent[static_cast<size_t>(i)].get();
    m.lent = lent;
  }
  job.started = true;
  // Before the shell has the command, so that the client reads this before any output: in
  // the socket ahead of the pipes, or ahead of the output frames.
  if (job.keep) ctx_.records->started(job);
  if (job.notify_started && job.client != nullptr) {
    ipc::msg::exec_started st;
    st.command_id = job.serial;
    st.generation = sh.generation();
    st.started_at_ms = job.started_at_ms;
    job.client->reply(ipc::encode(st, job.id));
  }
  auto sent = sh.send_run(m);
  job.seq = m.seq;  // its status says it is this run's
  if (!sent) {
    if (!ipc::has_code(sent.err(), ipc::errc::gone)) return fail(sent.err().message);
    // The shell has ended, or could not start, and its loss is on its way (shell_lost). The
    // command stays in flight until then, with its descriptors: it never ran, and may run in
    // the next shell.
    job.undelivered = true;
    spdlog::debug("session {}: the shell was gone before command {} reached it", name_, job.id);
    return true;
  }
  job.out_w.reset();
  job.err_w.reset();
  job.in_r.reset();
  std::string().swap(job.text);  // the shell has it: a large text is not held while it runs
  ++sent_;
  if (!job.internal) {
    ++commands_;
    ++gen_user_commands_;
    // Every result says which shell ran it, and whether that is not the shell that ran the
    // session's command before it (its state was lost in between).
    job.generation = sh.generation();
    // A loss that an earlier result reported already (its command met the dying shell, or
    // did not run because of it) is not reported again.
    if (last_user_generation_ != 0 && last_user_generation_ != job.generation &&
        loss_reported_gen_ != last_user_generation_) {
      job.state_lost = true;
      job.state_lost_why = state_lost_why_.empty() ? "the session's shell was replaced" : state_lost_why_;
    }
    last_user_generation_ = job.generation;
    state_lost_why_.clear();
  }
  if (!job.io_fds) {
    exec_job* jp = &job;
    job.out_watch = uv::make_handle<uv::fd_watch>(ctx_.loop, job.out_r.get());
    job.out_watch->start(UV_READABLE, [this, jp](int, int) { pump_output(*jp, ipc::kStdout, false); });
    if (job.err_r) {
      job.err_watch = uv::make_handle<uv::fd_watch>(ctx_.loop, job.err_r.get());
      job.err_watch->start(UV_READABLE, [this, jp](int, int) { pump_output(*jp, ipc::kStderr, false); });
    }
    if (job.in_w) pump_stdin(job);
  }
  if ((job.tty || job.interactive) && !job.internal) probe_input(job, kFirstProbeMs);
  return true;
}

void job_runner::probe_input(exec_job& job, uint64_t after_ms) {
  job.probe_ms = after_ms;
  if (!job.input_probe) job.input_probe = uv::make_handle<uv::timer>(ctx_.loop);
  exec_job* jp = &job;
  job.input_probe->start(after_ms, [this, jp] {
    exec_job& j = *jp;
    uint64_t quiet_ms = (mono_us() - std::max(j.last_output_us, j.started_mono_us)) / 1000;
    if (quiet_ms < kInputSettleMs) return probe_input(j, kInputSettleMs - quiet_ms);
    const shell_port& sh = shell_;
    input_source src;
    src.shell = static_cast<pid_t>(sh.shell_pid());
    src.tty_rdev = j.input_rdev;
    src.pipe_ino = j.input_ino;
    if (j.tty && j.out_r) {
      pid_t fg = 0;
      if (::ioctl(j.out_r.get(), TIOCGPGRP, &fg) == 0) src.foreground = fg;
    }
    bool waiting = waits_for_input(src);
    if (waiting && !j.waiting_input) {
      j.waiting_input = true;
      spdlog::debug("session {}: command {} waits for input", name_, j.serial);
      if (j.keep) ctx_.records->waiting(j.serial, j.last_line);
      if (j.client != nullptr && j.detach_after_ms > 0 && !j.detached) detach(j);
    }
    probe_input(j, waiting ? kFirstProbeMs : std::min(j.probe_ms * 2, kMaxProbeMs));
  });
}

void job_runner::heard_from(exec_job& job, std::string_view data) {
  job.last_output_us = mono_us();
  if (job.waiting_input && job.keep) ctx_.records->resumed(job.serial);
  job.waiting_input = false;
  auto nl = data.find_last_of("\r\n");
  if (nl != std::string_view::npos) {
    job.last_line.clear();
    data.remove_prefix(nl + 1);
  }
  job.last_line.append(data.substr(data.size() > kMaxPrompt ? data.size() - kMaxPrompt : 0));
  if (job.last_line.size() > kMaxPrompt) job.last_line.erase(0, job.last_line.size() - kMaxPrompt);
  if (job.input_probe && job.probe_ms > kFirstProbeMs) probe_input(job, kInputSettleMs);
}

void job_runner::run_answered(const shell_message& m) {
  // Not ours (a stale answer), or a lease's: its holder's runs are answered on the lease.
  if (!current_ || !current_->started || current_->lease || m.seq != current_->seq) return;
  auto job = std::move(current_);
  if (m.not_run) {
    job->not_run = true;
    if (job->tty && job->check_cwd.empty()) {
      job->outcome.error_code = std::string(ipc::wire_name(ipc::errc::internal));
      job->outcome.error = fmt::format("not run: the command's terminal could not be made its controlling terminal: {}",
                                       not_run_reason(m.err));
    } else {
      job->outcome.error_code = std::string(ipc::wire_name(ipc::errc::bad_directory));
      job->outcome.error = fmt::format("not run: cannot run in {}: {}", ipc::printable(job->check_cwd, 256),
                                       not_run_reason(m.err));
    }
  } else {
    job->outcome.exit_code = m.exit_value;
    job->outcome.signal = m.signal;
    // To stop a text (timeout, cancel, a client gone), sbshd interrupts the shell with SIGINT
    // as well as signalling the command's processes: that SIGINT is sbshd's means, not what
    // the command received, and bash's 130 for it names no signal. A SIGINT the command was
    // sent (Ctrl-C forwarded, a cancel with SIGINT) is reported.
    if (m.interrupted && m.signal == SIGINT && job->kill_stage != kill_stage::none && job->first_signal != SIGINT &&
        !job->sent_sigint)
      job->outcome.signal.reset();
  }
  finish_job(std::move(job));
  run_next();
}

void job_runner::finish_job(std::unique_ptr<exec_job> job) {
  uint64_t dur = job->started ? mono_us() - job->started_mono_us : 0;
  // The kernel says how many processes it killed for memory, not which: one killed while
  // this command ran is put down to it.
  if (job->started && def_.memory_max != 0)
    job->outcome.oom_killed = cgroup::oom_kills(def_.cgroup) > job->oom_kills_before;
  job->deadline.reset();
  job->detach_timer.reset();
  activity_();  // the session's idle time counts from its last command's end
  if (job->lease) return finish_lease(std::move(job));
  // Input the command did not take is dropped with it; if there was too much of it, its
  // client's socket was paused (stdin_data) and must now serve the client's next requests.
  if (job->client != nullptr && job->stdin_pending.size() > kMaxStdinBuffer) job->client->pause_reading(false);
  job->stdin_pending.clear();
  if (job->started && !job->io_fds && (job->client != nullptr || job->internal || job->keep)) {
    // Everything the command wrote before it ended is in the pipes now: forward it.
    pump_output(*job, ipc::kStdout, true);
    pump_output(*job, ipc::kStderr, true);
  }
  if (current_ == nullptr) kill_timer_.reset();
  spdlog::debug("session {}: exec {} done: exit {} signal {} timed_out {}", name_, job->id,
                job->outcome.exit_code.value_or(-1), job->outcome.signal.value_or(0), job->outcome.timed_out);
  if (job->internal) {
    drain_outputs(*job);
    if (job->on_done) job->on_done(*job);
    return;
  }
  record(*job, dur);
  ctx_.counters->command_ended(job->outcome);
  if (job->keep) ctx_.records->finished(*job, dur);
  reply_port* c = job->client;
  // Output pipes may still be held by background jobs the command started: keep reading
  // (and discarding) so they do not die of SIGPIPE, but never into a later result, and only
  // once the client has read what is its own (release). With no writer left, nothing more
  // can come: no release is needed, and the result says so.
  bool writers = has_writers(job->out_r ? job->out_r.get() : -1, job->err_r ? job->err_r.get() : -1);
  job->wants_release = job->io_fds && c != nullptr && writers;
  if (c != nullptr) c->reply(done_frame(*job, dur));
  if (job->wants_release && !job->released) {
    unreleased_.push_back(std::move(job));
    return;
  }
  if (writers) drain_outputs(*job);
  if (c != nullptr) c->job_done(job->id);
}

void job_runner::record(const exec_job& job, uint64_t duration_us) {
  if (!job.started) return;
  history_.push_back({job.command, job.outcome.exit_code, job.outcome.timed_out,
                      job.outcome.shell_restarted, job.started_at_ms, duration_us / 1000});
  if (history_.size() > kHistory) history_.pop_front();
}

void job_runner::earlier_command_ended(int status, int64_t adopted_ms) {
  history_.push_back({std::string(kEarlierCommand), status, false, false, adopted_ms,
                      static_cast<uint64_t>(std::max<int64_t>(0, wall_ms() - adopted_ms))});
  if (history_.size() > kHistory) history_.pop_front();
}

void job_runner::finish_init_job(exec_job& job) {
  for (const auto* part : {&job.captured_out, &job.captured_err}) {
    size_t room = kMaxInitOutput > init_output_.size() ? kMaxInitOutput - init_output_.size() : 0;
    init_output_.append(part->substr(0, room));
  }
  const auto& o = job.outcome;
  if (job.generation != shell_.generation()) return;  // a shell that has gone
  if (init_pending_ > 0) --init_pending_;
  if (o.exit_code == 0 && init_pending_ == 0 && !init_failed_) shell_.initialized();
  if (o.exit_code == 0 || !job.started || init_failed_) return;
  // A failing init command fails this start: the session's commands must not run in a
  // shell that was not set up as defined. Nothing more runs in it (blocked()).
  init_failed_ = true;
  // Quoted short: this text is kept as the session's failure and shown with it everywhere.
  std::string cmd = ipc::printable(job.command, kQuotedCommand);
  std::string why = o.exit_code ? fmt::format("init command '{}' exited with status {}", cmd, *o.exit_code)
                                : fmt::format("init command '{}' did not finish: {}", cmd, o.error);
  init_output_ += fmt::format("[{}]\n", why);
  restart_later(why, /*forced=*/false);
}

void job_runner::escalate(exec_job& job) {
  switch (job.kill_stage) {
    case kill_stage::none:
      job.kill_stage = kill_stage::first_signal;
      send_signal(job, job.first_signal, /*interrupt=*/true);
      arm_kill_timer(job.grace_ms);
      break;
    case kill_stage::first_signal:
      job.kill_stage = kill_stage::sigkill;
      send_signal(job, SIGKILL, /*interrupt=*/true);
      arm_kill_timer(kSettleMs);
      break;
    case kill_stage::sigkill:
      // Everything the command started is dead and the shell was interrupted twice, yet it
      // has not answered: it ignores SIGINT or is itself stuck. Only a new shell helps.
      job.kill_stage = kill_stage::restart;
      shell_.restart_shell(
          "the shell did not stop the command when interrupted, so it was restarted to stop it", /*forced=*/true);
      break;
    case kill_stage::restart:
      break;
  }
}

void job_runner::arm_kill_timer(uint64_t ms) {
  kill_timer_ = uv::make_handle<uv::timer>(ctx_.loop);
  kill_timer_->start(ms, [this] {
    read_lease();  // a leased run that has ended is not stopped further
    if (current_ && current_->kill_stage != kill_stage::none) escalate(*current_);
  });
}

void job_runner::send_signal(exec_job& job, int sig, bool interrupt) {
  // Never ends the job from here: a wrapper that is gone is reported on its own way
  // (shell_lost), which answers the job.
  if (interrupt && job.lease) shell_.interrupt_leased(job.leased.seq);
  if (shell_.signal_command(job.mark, sig, interrupt) != 0) ++signals_in_flight_;
}

void job_runner::signal_answered() {
  if (signals_in_flight_ > 0) --signals_in_flight_;
  run_next();
}

bool job_runner::cancel(reply_port* c, uint64_t id, int sig, bool stop) {
  return cancel_where([c, id](const exec_job& j) { return j.client == c && j.id == id; }, sig, stop,
                      "cancelled before it started");
}

status job_runner::input(uint64_t serial, std::string_view data, bool typed, bool eof) {
  exec_job* job = current_ && current_->serial == serial ? current_.get() : nullptr;
  for (auto& j : queue_)
    if (j->serial == serial) job = j.get();
  if (job == nullptr) return make_error(ipc::errc::no_input, fmt::format("command %{} is not in its session's queue", serial));
  if (!job->detached)
    return make_error(ipc::errc::no_input,
                      fmt::format("command %{} still has its client, whose input it reads; send input once it has "
                                  "detached (exec --detach-after)",
                                  serial));
  if ((!job->tty && !job->interactive) || job->io_fds)
    return make_error(ipc::errc::no_input, fmt::format("command %{} takes no input: its stdin is /dev/null; start "
                                                       "it with --interactive (a pipe) or --tty (a terminal)",
                                                       serial));
  if (job->stdin_eof || (job->started && !job->in_w))
    return make_error(ipc::errc::no_input, fmt::format("command %{}'s input has ended", serial));
  if (job->stdin_pending.size() + data.size() > kMaxStdinBuffer)
    return make_error(ipc::errc::input_full,
                      fmt::format("command %{} has not read the {} bytes of input it was sent yet; send the rest "
                                  "once it has",
                                  serial, job->stdin_pending.size()));
  size_t from = job->stdin_pending.size();
  job->stdin_pending.append(data);
  if (typed && !job->tty) std::replace(job->stdin_pending.begin() + static_cast<ptrdiff_t>(from), job->stdin_pending.end(), '\r', '\n');
  if (eof) job->stdin_eof = true;
  // It waits for input no longer: the probe says again once it does, and its prompt then is
  // what it printed after this input.
  if (job->waiting_input) ctx_.records->resumed(serial);
  job->waiting_input = false;
  job->last_line.clear();
  if (job->started && job->in_w) pump_stdin(*job);
  if (job->input_probe) probe_input(*job, kInputSettleMs);
  return ok_status();
}

std::string job_runner::screen_of(uint64_t serial) const {
  return current_ && current_->serial == serial && current_->screen ? current_->screen->text() : std::string();
}

bool job_runner::stop(uint64_t serial, int sig) {
  return cancel_where([serial](const exec_job& j) { return j.serial == serial; }, sig, true,
                      "killed before it started");
}

bool job_runner::cancel_where(const std::function<bool(const exec_job&)>& match, int sig, bool stop,
                              const char* queued_why) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (match(**it)) {
      auto job = std::move(*it);
      queue_.erase(it);
      job->outcome.cancelled = true;
      job->outcome.error_code = std::string(ipc::wire_name(ipc::errc::cancelled));
      job->outcome.error = queued_why;
      finish_job(std::move(job));
      return true;
    }
  }
  if (!current_ || !match(*current_)) return false;
  if (current_->lease) {  // the lease ends, and the run its holder has going is stopped
    exec_job& job = *current_;
    read_lease();
    if (stop) stop_leased(job, SBSH_STATUS_CANCELLED, sig != 0 ? sig : SIGTERM);
    else if (job.leased.seq != 0) send_signal(job, sig, /*interrupt=*/false);
    if (stop) end_lease(job, "it was cancelled");
    return true;
  }
  if (!stop) {
    // A signal forwarded to the command (Ctrl-C): to its processes; SIGINT also to the shell
    // when the command has none of its own (a loop of builtins), as a terminal would.
    if (sig == SIGINT) current_->sent_sigint = true;
    send_signal(*current_, sig, /*interrupt=*/false);
    return true;
  }
  current_->outcome.cancelled = true;
  if (sig != 0) current_->first_signal = sig;
  if (current_->kill_stage == kill_stage::none) escalate(*current_);
  return true;
}

void job_runner::client_gone(reply_port* c) {
  // Its queued commands never run; a kept one says so to whoever waits for it.
  std::deque<std::unique_ptr<exec_job>> waiting;
  std::swap(waiting, queue_);
  for (auto& j : waiting) {
    if (j->client != c) {
      queue_.push_back(std::move(j));
    } else if (j->keep) {
      j->client = nullptr;
      j->outcome.cancelled = true;
      j->outcome.error_code = std::string(ipc::wire_name(ipc::errc::cancelled));
      j->outcome.error = "not run: its client went away before it started";
      finish_job(std::move(j));
    }
  }
  std::erase_if(unreleased_, [this, c](auto& j) {
    if (j->client != c) return false;
    drain_outputs(*j);
    return true;
  });
  if (!current_ || current_->client != c) return;
  if (current_->lease) {
    // Its holder's connection closed: so does the lease (the builtin also sees the socket's
    // hang-up when the holder's process has gone).
    // A run it has going is hung up on, as any command whose client left.
    exec_job& job = *current_;
    job.client = nullptr;
    read_lease();
    stop_leased(job, SBSH_STATUS_CANCELLED, SIGHUP);
    end_lease(job, "its holder's connection closed");
    return;
  }
  // As a terminal hang-up would: SIGHUP to the command, then SIGKILL after the grace. The
  // job stays current until the shell answers (or is lost), whatever happens meanwhile.
  exec_job& job = *current_;
  job.client = nullptr;
  // Stopped for want of a client: a result kept for `wait %N` says so, whatever status the
  // command then exits with (one that traps SIGHUP may exit 0).
  job.outcome.cancelled = true;
  job.first_signal = SIGHUP;
  close_stdin(job);
  if (job.kill_stage == kill_stage::none) escalate(job);
}

void job_runner::release(reply_port* c, uint64_t id, std::vector<unique_fd> drain) {
  if (current_ && current_->lease && current_->client == c && current_->id == id)
    for (auto& fd : drain) keep_draining(std::move(fd));
  for (auto it = unreleased_.begin(); it != unreleased_.end(); ++it) {
    if ((*it)->client == c && (*it)->id == id) {
      auto job = std::move(*it);
      unreleased_.erase(it);
      drain_outputs(*job);
      c->job_done(id);
      return;
    }
  }
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if ((*it)->client != c || (*it)->id != id) continue;
    if ((*it)->lease) {  // released before its turn
      auto job = std::move(*it);
      queue_.erase(it);
      job->outcome.error_code = std::string(ipc::wire_name(ipc::errc::cancelled));
      job->outcome.error = "the lease was released before it was granted";
      finish_job(std::move(job));
      return;
    }
    (*it)->released = true;
  }
  if (current_ && current_->client == c && current_->id == id) {
    if (current_->lease) end_lease(*current_, "its holder released it");
    else current_->released = true;
  }
}

void job_runner::shell_lost(uint64_t gen, const shell_loss& loss) {
  read_lease();            // the runs of a lease that ended before the shell did
  signals_in_flight_ = 0;  // their answers went with the wrapper
  init_pending_ = 0;       // the next start queues its own
  kill_timer_.reset();
  note_state_lost(loss.why);
  std::string next = loss.restarting ? "a new shell is being started" : "no new shell starts";
  if (loss.restarting && gen_user_commands_ == 0) {
    // No command of the session ran in that shell, so the next one has the same state to
    // offer: what waited for it, and a command that never reached it, wait for the next.
    if (current_ && current_->undelivered && current_->outcome.cancelled) {
      // Stopped before any shell had it: it never runs (cancelled, not run again later).
      auto job = std::move(current_);
      job->started = false;
      job->outcome.error_code = std::string(ipc::wire_name(ipc::errc::cancelled));
      job->outcome.error = "cancelled before it started";
      finish_job(std::move(job));
    } else if (current_ && current_->undelivered) {
      current_->started = current_->undelivered = false;
      current_->kill_stage = kill_stage::none;
      queue_.push_front(std::move(current_));
    }
    for (auto& j : queue_)
      if (j->generation == gen) j->generation = gen + 1;
  } else if (loss.never_served) {
    // What waited for a shell that never served did not run, and says why now rather than as
    // a command queued across a restart.
    std::deque<std::unique_ptr<exec_job>> waiting;
    std::swap(waiting, queue_);
    for (auto& j : waiting) {
      if (j->generation != gen) {
        queue_.push_back(std::move(j));
        continue;
      }
      j->outcome.error_code = std::string(ipc::wire_name(ipc::errc::shell_restarted));
      j->outcome.error = fmt::format("the command did not run ({}); {}", loss.why, next);
      j->state_lost = true;
      j->state_lost_why = loss.why;
      if (!j->internal) loss_reported_gen_ = last_user_generation_;
      finish_job(std::move(j));
    }
  }
  if (!current_) return;
  auto job = std::move(current_);
  auto& o = job->outcome;
  o.shell_restarted = true;
  if (job->kill_stage != kill_stage::restart && !job->undelivered && !loss.never_served) {
    if (loss.signal) {
      o.exit_code = 128 + *loss.signal;
      o.signal = loss.signal;
    } else if (loss.exit_code) {
      o.exit_code = loss.exit_code;
    }
  }
  o.error_code = std::string(ipc::wire_name(ipc::errc::shell_restarted));
  if (job->undelivered || loss.never_served) {
    job->undelivered = true;
    o.error = fmt::format("the command did not run ({}); {}", loss.why, next);
  } else if (job->kill_stage == kill_stage::restart) {
    o.error = "the shell did not stop the command when interrupted, so it was restarted to stop it; the "
              "session's state was lost";
  } else {
    o.error = fmt::format("the session's shell ended while running the command ({}); the session's state was "
                          "lost and {}",
                          loss.why, next);
  }
  if (!job->internal) {
    // The loss is reported on this command (shell_restarted, and state_lost when it did not
    // run): the next one, in the next shell, does not report it again.
    if (job->undelivered) {
      job->state_lost = true;
      job->state_lost_why = loss.why;
    }
    loss_reported_gen_ = last_user_generation_;
    state_lost_why_.clear();
  }
  finish_job(std::move(job));
}

void job_runner::refuse_all(std::string_view code, const std::string& queued_why, const std::string& running_why) {
  while (!queue_.empty()) {
    auto j = std::move(queue_.front());
    queue_.pop_front();
    j->outcome.error_code = std::string(code);
    j->outcome.error = queued_why;
    finish_job(std::move(j));
  }
  if (current_) {
    auto j = std::move(current_);
    j->outcome.error_code = std::string(code);
    j->outcome.error = running_why;
    finish_job(std::move(j));
  }
  kill_timer_.reset();
}

void job_runner::drain_outputs(exec_job& job) {
  // A descriptor can be watched by one handle only: stop the job's own watches first.
  job.out_watch.reset();
  job.err_watch.reset();
  if (job.out_r) keep_draining(std::move(job.out_r));
  if (job.err_r) keep_draining(std::move(job.err_r));
}

void job_runner::keep_draining(unique_fd fd) {
  if (draining_.size() >= kMaxDraining) draining_.pop_front();
  set_nonblocking(fd.get());
  // Usually nobody else holds the pipe and it is at end-of-file already: no need to watch.
  char buf[16384];
  ssize_t n;
  while ((n = ::read(fd.get(), buf, sizeof buf)) > 0) {
  }
  if (n == 0 || errno != EAGAIN) return;
  int raw = fd.get();
  auto w = uv::make_handle<uv::fd_watch>(ctx_.loop, raw);
  w->start(UV_READABLE | UV_DISCONNECT, [this, raw](int, int) {
    char buf[16384];
    ssize_t n;
    while ((n = ::read(raw, buf, sizeof buf)) > 0) {
    }
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
      std::erase_if(draining_, [raw](const drain_entry& d) { return d.fd.get() == raw; });
  });
  draining_.push_back({std::move(fd), std::move(w)});
}

void job_runner::pump_output(exec_job& job, int stream_no, bool drain) {
  unique_fd& fd = stream_no == ipc::kStdout ? job.out_r : job.err_r;
  if (!fd) return;
  char buf[64 * 1024];
  for (int rounds = 0; drain || rounds < 4; ++rounds) {
    if (job.client != nullptr && !drain && job.client->queued_bytes() > kMaxClientQueue) {
      set_output_paused(job, true);  // backpressure: the pipe fills and the command waits
      return;
    }
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n <= 0) {
      // Every writer is gone: end of file, or EIO from a terminal's master once its other end
      // is closed everywhere.
      if (n == 0 || errno == EIO) (stream_no == ipc::kStdout ? job.out_watch : job.err_watch).reset();
      return;
    }
    if (job.internal) {
      std::string& keep = stream_no == ipc::kStdout ? job.captured_out : job.captured_err;
      size_t room = kMaxInitOutput > keep.size() ? kMaxInitOutput - keep.size() : 0;
      keep.append(buf, std::min(room, static_cast<size_t>(n)));
      continue;
    }
    if (job.input_probe) heard_from(job, std::string_view(buf, static_cast<size_t>(n)));
    // A query of its terminal's (the cursor's position...) is answered as a terminal would,
    // through the master (open for writing too), also once the input has ended.
    if (job.screen)
      if (std::string answer = job.screen->feed({buf, static_cast<size_t>(n)}); !answer.empty())
        (void)!::write(fd.get(), answer.data(), answer.size());
    if (job.keep) ctx_.records->output(job.serial, stream_no, std::string_view(buf, static_cast<size_t>(n)));
    if (job.client == nullptr) continue;  // nobody to deliver to: kept, or discarded
    ipc::msg::output out{static_cast<uint64_t>(stream_no), {std::string_view(buf, static_cast<size_t>(n))}};
    job.client->reply(ipc::encode(out, job.id));
    ctx_.counters->streamed(static_cast<size_t>(n));
  }
}

void job_runner::set_output_paused(exec_job& job, bool paused) {
  int ev = paused ? 0 : UV_READABLE;
  if (job.out_watch) job.out_watch->set_events(ev);
  if (job.err_watch) job.err_watch->set_events(ev);
}

void job_runner::client_drained(reply_port* c) {
  if (current_ && current_->client == c && !current_->io_fds) {
    set_output_paused(*current_, false);
    pump_output(*current_, ipc::kStdout, false);
    if (current_) pump_output(*current_, ipc::kStderr, false);
  }
}

void job_runner::stdin_data(reply_port* c, uint64_t id, std::string_view data, bool eof) {
  exec_job* job = nullptr;
  if (current_ && current_->client == c && current_->id == id) job = current_.get();
  for (auto& j : queue_)
    if (j->client == c && j->id == id) job = j.get();
  if (job == nullptr || job->io_fds || !job->has_stdin || job->stdin_eof) return;
  job->stdin_pending.append(data);
  if (eof) job->stdin_eof = true;
  if (job->stdin_pending.size() > kMaxStdinBuffer) c->pause_reading(true);
  if (job->started && job->in_w) pump_stdin(*job);
}

void job_runner::pump_stdin(exec_job& job) {
  while (!job.stdin_pending.empty()) {
    ssize_t n = ::write(job.in_w.get(), job.stdin_pending.data(), job.stdin_pending.size());
    if (n < 0) {
      if (errno == EAGAIN) break;
      job.stdin_pending.clear();  // the command closed its stdin: the rest is not wanted
      job.in_w.reset();
      break;
    }
    job.stdin_pending.erase(0, static_cast<size_t>(n));
  }
  if (job.client != nullptr && job.stdin_pending.size() <= kMaxStdinBuffer) job.client->pause_reading(false);
  bool waiting = !job.stdin_pending.empty() && job.in_w;
  if (waiting && !job.in_watch) {
    exec_job* jp = &job;
    job.in_watch = uv::make_handle<uv::fd_watch>(ctx_.loop, job.in_w.get());
    job.in_watch->start(UV_WRITABLE, [this, jp](int, int) { pump_stdin(*jp); });
  } else if (!waiting) {
    job.in_watch.reset();
  }
  if (job.stdin_pending.empty() && job.stdin_eof && job.in_w) {
    // A terminal's end of input is its EOF character (Ctrl-D), as one typed at a terminal.
    if (job.tty) (void)!::write(job.in_w.get(), "\x04", 1);
    job.in_w.reset();
  }
}

}  // namespace sbsh::daemon
