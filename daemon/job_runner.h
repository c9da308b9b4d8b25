// A session's commands: the queue, the one that runs, and how each ends. Commands run one at
// a time in arrival order. Each is one run message on the shell channel (ipc/shell_channel.h; sbshd's end: shell_messages.h):
// the builtin in the session's bash puts the command's descriptors on 0, 1 and 2, evaluates
// its text at the shell's top level and answers with its status. The runner stops commands
// (timeouts, cancels, a client that left: the command's processes are signalled and the
// shell interrupted, which abandons the rest of the text), forwards output and input for a
// client that cannot pass descriptors, keeps late background output out of later results,
// and says in every result which shell ran it and whether the session's state was lost
// before it started. It sees the shell only through shell_port, and hears from it through
// shell_events (shell_port.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "daemon/exec_job.h"
#include "daemon/runner_ports.h"
#include "daemon/session_def.h"
#include "daemon/shell_messages.h"
#include "daemon/shell_port.h"
#include "ipc/records.h"  // history_entry
#include "uv/handles.h"

namespace sbsh::daemon {

class job_runner final : public shell_events {
 public:
  // The runner of the session named `name`, defined by `def` (both outlive it), whose shell
  // is `shell`, with what every runner shares in `ctx` (runner_ports.h). `activity` runs
  // whenever a command ends: the session's idle time counts from there.
  job_runner(const runner_context& ctx, const std::string& name, const session_def& def, shell_port& shell,
             std::function<void()> activity);
  ~job_runner() override;
  job_runner(const job_runner&) = delete;
  job_runner& operator=(const job_runner&) = delete;

  // Takes a parsed job; it runs after the jobs already queued. Its timeout counts from now.
  void enqueue(std::unique_ptr<exec_job> job);
  // Queues shell text on sbshd's own behalf; on_done gets the finished job (its outcome and
  // captured output), also when it never runs.
  // `check_cwd`, when not empty, is a directory that must exist for the text to run (as exec -C).
  // `lent`: none, or three descriptors the text finds at SBSH_LENT_FD .. +2 while it runs.
  void run_internal(std::string text, std::function<void(exec_job&)> on_done, std::string check_cwd = {},
                    std::vector<unique_fd> lent = {});
  // Signal `sig` to the running command's processes once or, with `stop`, stop it: `sig`
  // (SIGTERM when 0), then SIGKILL after the grace period, the shell interrupted all along (the
  // rest of the text is abandoned; the shell keeps its state); a shell restart only when the
  // shell itself does not answer. A queued job is dropped at once. Returns false when no such
  // job is here.
  bool cancel(reply_port* c, uint64_t id, int sig, bool stop);
  // Stops the job with this serial as a timeout does (`sig` first, SIGTERM when 0): `sbsh
  // kill %N`. False when no such job is queued or running.
  bool stop(uint64_t serial, int sig);
  // command_input: `data` into the input of the detached command `serial` (running or
  // queued), as it reads it; `typed`: keys, each CR an LF on a pipe; `eof` then ends it.
  status input(uint64_t serial, std::string_view data, bool typed, bool eof);
  // What the terminal of command `serial` (exec --tty, running) shows now; empty otherwise.
  [[nodiscard]] std::string screen_of(uint64_t serial) const;
  void stdin_data(reply_port* c, uint64_t id, std::string_view data, bool eof);
  // The client has read its pipes (an exec's), or lets go of its lease; `drain`: with a
  // lease, pipes its runs' background jobs still hold, read into nothing from now on.
  void release(reply_port* c, uint64_t id, std::vector<unique_fd> drain = {});
  // The client went away: its queued jobs are dropped, its running one is hung up on.
  void client_gone(reply_port* c);
  // The client's output queue drained: resume reading command output for it.
  void client_drained(reply_port* c);

  // From the shell (shell_events, shell_port.h).
  void run_first(std::vector<std::string> texts, bool init) override;
  void shell_ready() override;
  void shell_changed() override { run_next(); }
  void run_answered(const shell_message& m) override;
  void signal_answered() override;
  void lease_answered(const shell_message& m) override;
  void records_due() override { read_lease(); }
  void shell_lost(uint64_t gen, const shell_loss& loss) override;
  void earlier_command_ended(int status, int64_t adopted_ms) override;
  // Why the session's state was lost since its last command, for the next one's result.
  void note_state_lost(std::string why) override { state_lost_why_ = std::move(why); }
  [[nodiscard]] bool ran_user_commands() const override { return gen_user_commands_ > 0; }
  [[nodiscard]] bool init_failed() const override { return init_failed_; }
  [[nodiscard]] bool idle() const override { return !current_ && queue_.empty() && signals_in_flight_ == 0; }

  // Every job is answered with `code` and `message` (sbshd stops or lets go of the session).
  void refuse_all(std::string_view code, const std::string& queued_why, const std::string& running_why);

  // Reads the record page of the lease that is current, if any: the history, the counters,
  // the running command and its deadline then include what its holder ran
  // (docs/architecture.md, "The direct path"). sbshd does so every few milliseconds, and
  // before it answers with any of those.
  void read_lease();

  [[nodiscard]] const exec_job* current() const { return current_.get(); }
  [[nodiscard]] size_t queued() const { return queue_.size(); }
  [[nodiscard]] uint64_t commands() const { return commands_; }
  // How many jobs the shells have been given, sbshd's own too: while it stays the same and
  // none runs, nothing has run in the shell (its directory, say, is what it was).
  [[nodiscard]] uint64_t sent() const { return sent_; }
  // Whether any client's command has been run or waits here (sbshd's own jobs aside).
  [[nodiscard]] bool used() const {
    auto theirs = [](const auto& j) { return !j->internal; };
    return commands_ > 0 || (current_ && theirs(current_)) || std::any_of(queue_.begin(), queue_.end(), theirs);
  }
  [[nodiscard]] const std::deque<history_entry>& history() const { return history_; }
  [[nodiscard]] const std::string& init_output() const { return init_output_; }

  // The session had a shell before this sbshd (recreated from the state file): its first
  // command says that state was lost.
  void assume_earlier_shell(std::string why) {
    if (last_user_generation_ == 0) last_user_generation_ = UINT64_MAX;
    note_state_lost(std::move(why));
  }

 private:
  void run_next();
  bool start_job(exec_job& job);
  bool start_lease(exec_job& job);
  // Asks the builtin to end the lease `job` holds (once), saying `why` to its holder after.
  void end_lease(exec_job& job, std::string why);
  static void finish_lease(std::unique_ptr<exec_job> job);
  // A run on the lease ended: the history and the counters have it.
  void leased_run_ended(const lease_page::record& r);
  // Stops the run the lease's holder has going, as a timeout stops a command (`sig` first):
  // `why` (SBSH_STATUS_TIMED_OUT or _CANCELLED) goes to its status through the page.
  void stop_leased(exec_job& job, uint32_t why, int sig);
  // Restarts the shell from the loop's next turn, unless it has been replaced by then.
  void restart_later(const std::string& why, bool forced);
  void finish_job(std::unique_ptr<exec_job> job);
  void finish_init_job(exec_job& job);
  // cancel() and stop(): the first queued or running job that matches.
  bool cancel_where(const std::function<bool(const exec_job&)>& match, int sig, bool stop, const char* queued_why);
  void escalate(exec_job& job);
  void detach(exec_job& job);
  // Asks the kernel, after `after_ms` and then again, whether `job` waits for input, once it
  // has printed nothing for a moment; detaches it then when it was to detach (input_wait.h).
  void probe_input(exec_job& job, uint64_t after_ms);
  // Output of a job that is probed: its prompt so far, and no longer waiting.
  void heard_from(exec_job& job, std::string_view data);
  static void close_stdin(exec_job& job);
  void send_signal(exec_job& job, int sig, bool interrupt);
  void arm_kill_timer(uint64_t ms);
  void pump_output(exec_job& job, int stream_no, bool drain);
  void pump_stdin(exec_job& job);
  static void set_output_paused(exec_job& job, bool paused);
  void keep_draining(unique_fd fd);
  void drain_outputs(exec_job& job);
  void record(const exec_job& job, uint64_t duration_us);
  [[nodiscard]] bool blocked() const;

  const runner_context& ctx_;
  const std::string& name_;
  const session_def& def_;
  shell_port& shell_;
  std::function<void()> activity_;
  std::deque<std::unique_ptr<exec_job>> queue_;
  std::unique_ptr<exec_job> current_;
  std::vector<std::unique_ptr<exec_job>> unreleased_;  // fds mode: done, client still draining
  struct drain_entry {
    unique_fd fd;
    uv::handle_ptr<uv::fd_watch> watch;
  };
  std::deque<drain_entry> draining_;
  std::deque<history_entry> history_;
  uv::handle_ptr<uv::timer> kill_timer_;
  std::string init_output_;  // what the last start's init commands printed
  bool init_failed_ = false;
  size_t init_pending_ = 0;  // run_first jobs not yet done
  uint64_t gen_user_commands_ = 0;  // user commands started in this generation
  uint64_t commands_ = 0;
  uint64_t sent_ = 0;
  // Signal requests whose answers have not come: the next command waits for them, so that an
  // interrupt meant for one command never reaches the next.
  size_t signals_in_flight_ = 0;
  uint64_t last_user_generation_ = 0;  // the shell that ran the last user command
  uint64_t loss_reported_gen_ = 0;    // a result already reported the loss of this shell
  std::string state_lost_why_;
};

}  // namespace sbsh::daemon
