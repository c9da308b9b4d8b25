// A session's shell: its wrapper and bash, from start to end, across restarts and sbshd
// restarts. It owns what a generation is made of (the wrapper process, its control socket,
// sbshd's end of the shell channel) and the policy around it: the restart policy with its
// back-off and start limit, health pings, adoption of a shell an earlier sbshd left, the
// background processes' groups the wrapper must spare. It knows nothing of commands: it is
// the job runner's shell_port, and hands what the shell says on its channel, and the end of
// each generation, to the runner through shell_events (shell_port.h).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/procs.h"
#include "daemon/session_def.h"
#include "daemon/shell_messages.h"
#include "daemon/shell_port.h"
#include "daemon/wrapper_process.h"
#include "uv/child_process.h"
#include "uv/framed_socket.h"
#include "uv/handles.h"

namespace sbsh::daemon {

class session_host;

// Whether a spare shell (started ahead, with an empty environment and no limits) can become
// this session's shell exactly: its variables can all be exported after bash started.
bool spare_can_serve(const session_def& def);

// sbshd's end of a shell channel, counted in session_host::channels_held while it is held.
class held_channel {
 public:
  explicit held_channel(uint64_t& count) : count_(count) {}
  ~held_channel() { reset(); }
  held_channel(const held_channel&) = delete;
  held_channel& operator=(const held_channel&) = delete;
  held_channel& operator=(unique_fd fd) {
    reset();
    if (fd) ++count_;
    fd_ = std::move(fd);
    return *this;
  }
  void reset() {
    if (fd_) --count_;
    fd_.reset();
  }
  [[nodiscard]] int get() const { return fd_.get(); }
  explicit operator bool() const { return static_cast<bool>(fd_); }

 private:
  uint64_t& count_;
  unique_fd fd_;
};

class shell_supervisor final : public shell_port {
 public:
  // The shell of the session named `name`, defined by `def` (both outlive it).
  shell_supervisor(session_host& srv, const std::string& name, const session_def& def);
  ~shell_supervisor() override;
  shell_supervisor(const shell_supervisor&) = delete;
  shell_supervisor& operator=(const shell_supervisor&) = delete;

  // Whom it reports to (the session's job runner); set before the first generation starts.
  void report_to(shell_events& events) { events_ = &events; }
  // How the first generation starts: a new shell, the spare, or one an earlier sbshd left.
  void start();
  void claim(spare_shell&& spare);
  // A confined spare becomes this session's shell: its wrapper gets the options `args` and
  // environment `env` one started for the session would have had.
  void claim_confined(uint64_t gen, spare_shell&& spare, const std::vector<std::string>& args,
                      const std::vector<std::string>& env);
  void adopt(adopted_shell&& shell);

  // Ends the current shell (its command is lost) and starts a new one at once, whatever the
  // policy, clearing a failed or exited state.
  void restart(const std::string& why);
  // Like restart, from the job runner (shell_port).
  void restart_shell(const std::string& why, bool forced) override;
  void retry_if_failed() override;
  // Ends the shell and everything it started; no new one starts.
  void stop();
  // Lets go of the shell without ending it, for the next sbshd to adopt.
  void abandon();
  [[nodiscard]] bool stopped_and_gone() const;
  // Calls `gone` once, when the wrapper has ended (from the loop, never from inside this call;
  // at once if it has already ended). Replaces an earlier one.
  void when_gone(std::function<void()> gone);

  // The shell runs as its session defines (init commands done): the wrapper may now offer it
  // to a later sbshd.
  void initialized() override;
  // Asks the wrapper to send `sig` to the processes started since `mark` and, with
  // `interrupt`, to interrupt the shell (which abandons the rest of the command's text).
  uint64_t signal_command(const procs::since_mark& mark, int sig, bool interrupt) override;
  [[nodiscard]] status send_run(run_message& m) override;
  // Leases (shell_port.h). Once one ends, sbshd syncs with the builtin before its next run: a
  // status the builtin could not send on the lease comes on the channel after lease_ended, and
  // is the holder's, not sbshd's (its seq is the holder's choice).
  [[nodiscard]] bool serves_leases() const override { return leases_; }
  [[nodiscard]] status send_lease(uint64_t& seq, int lease, int page, uint32_t flags) override;
  void end_lease() override;
  void interrupt_leased(uint64_t seq) override;

  // Parking: an idle session's shell channel is closed in sbshd (one descriptor fewer) and
  // asked back from the wrapper, which holds a copy, when a command comes (want_channel).
  // Whether it may be now: the shell serves, nothing runs, waits or is unread on it.
  [[nodiscard]] bool parkable() const;
  void park();
  void want_channel() override;
  [[nodiscard]] bool parked() const { return parked_; }
  // When the channel was last used (the loop's clock, ms).
  [[nodiscard]] uint64_t last_active_ms() const { return last_active_ms_; }

  // Background processes' groups, spared when the shell ends, with the pipes lent for them.
  void protect_group(pid_t pgid, lent_pipes pipes);
  void unprotect_group(pid_t pgid);
  [[nodiscard]] const std::map<pid_t, lent_pipes>& lent() const { return protected_; }

  [[nodiscard]] session_state state() const override { return state_; }
  [[nodiscard]] bool serving() const override { return state_ == session_state::ready && !awaiting_sync_ && !parked_; }
  [[nodiscard]] uint64_t generation() const override { return generation_; }
  [[nodiscard]] const std::string& failure() const override { return failure_; }
  [[nodiscard]] int64_t shell_pid() const override { return shell_pid_; }
  [[nodiscard]] int64_t wrapper_pid() const { return wrapper_pid_; }
  [[nodiscard]] int64_t started_at_ms() const { return shell_started_ms_; }
  [[nodiscard]] uint64_t uptime_ms() const;
  // The shell's $PWD as it last said (empty until it has): what sbshd shows when it may not
  // read /proc/PID/cwd of the shell, which is undumpable.
  [[nodiscard]] const std::string& said_cwd() const { return said_cwd_; }
  [[nodiscard]] uint64_t restarts() const { return restarts_; }
  [[nodiscard]] bool adopted_busy() const override { return awaiting_sync_ && !lease_sync_; }
  [[nodiscard]] int64_t adopted_ms() const { return adopted_ms_; }

 private:
  void notify_if_gone();
  void start_shell();
  // Builds the session's deleted environment again, then starts its shell (start `gen`).
  void rebuild_env(uint64_t gen);
  uint64_t begin_start();
  void fail_start(std::string why);
  // What every start does last: listens to the wrapper and the shell.
  void watch(uint64_t gen, unique_fd ctl, bool run_init);
  void on_wrapper_exit(uint64_t gen, int64_t status, int sig);
  void on_control(uint64_t gen, ipc::envelope&& env);
  void on_channel(uint64_t gen);
  // The wrapper gave back the parked channel (`fds`: it, or nothing when it had none).
  void unparked(uint64_t gen, std::vector<unique_fd> fds);
  void shell_lost(uint64_t gen, std::optional<int> exit_code, std::optional<int> signal, const std::string& why);
  void schedule_restart(const std::string& why, bool failed_start, bool forced);
  void detach(bool kill_wrapper);
  void health_tick();
  void send_protect(pid_t pgid, const lent_pipes& pipes);
  [[nodiscard]] std::set<pid_t> protected_groups() const;

  session_host& srv_;
  const std::string& name_;
  const session_def& def_;
  shell_events* events_ = nullptr;
  session_state state_ = session_state::starting;
  std::string failure_;
  std::deque<uint64_t> failed_starts_;  // mono_us of recent failed starts (start limit)
  unsigned consecutive_failures_ = 0;   // for the back-off
  uv::handle_ptr<uv::timer> restart_timer_;
  uv::handle_ptr<uv::timer> health_timer_;
  uint64_t ping_seq_ = 0;
  uint64_t ping_sent_us_ = 0;  // non-zero while a ping awaits its pong
  uint64_t signal_seq_ = 0;
  uint64_t restarts_ = 0;
  bool stopping_ = false;
  uint64_t rebuild_ticket_ = 0;   // while its environment is built again (server::rebuild_env)
  bool forcing_restart_ = false;  // set while a restart that ignores the policy runs
  bool wrapper_hung_ = false;     // set while a restart for an unanswered health check runs

  // The current generation: everything below is replaced on each (re)start.
  uint64_t generation_ = 1;
  std::function<void()> on_gone_;  // see when_gone
  uv::handle_ptr<uv::timer> gone_timer_;
  uv::child_ptr wrapper_;
  std::unique_ptr<uv::framed_socket> ctl_;
  held_channel channel_;
  uv::handle_ptr<uv::fd_watch> channel_watch_;
  bool parked_ = false;   // channel_ closed while idle; the wrapper holds it
  bool lending_ = false;  // lend_channel sent, channel_lent not yet come
  uint64_t lend_seq_ = 0;
  uint64_t last_active_ms_ = 0;
  text_memfd big_text_;  // for runs too long for one message
  std::string dir_;  // the shell's directory (its wrapper's adoption socket)
  // Why `msg` cannot be the builtin's (another process sent it, or it answers what sbshd did
  // not ask), or nullopt when it is.
  [[nodiscard]] std::optional<std::string> untrusted(const shell_message& msg) const;

  uint64_t seq_ = 0;
  uint64_t run_out_ = 0;     // the run the shell has and has not answered; 0: none
  uint64_t run_nonce_ = 0;   // that run's nonce, which its status must repeat
  std::string said_cwd_;
  bool interrupts_ = false;  // the builtin reads interrupt messages (ready, synced)
  bool leases_ = false;      // the builtin takes leases (ready, synced)
  uint64_t lease_out_ = 0;   // the lease sent and not yet ended; 0: none
  uint64_t lease_nonce_ = 0;
  bool lease_sync_ = false;  // awaiting_sync_ after a lease: statuses meanwhile are its holder's
  int64_t shell_pid_ = 0;
  int64_t wrapper_pid_ = 0;
  uint64_t started_mono_us_ = 0;
  int64_t shell_started_ms_ = 0;
  bool served_ = false;        // the builtin said it serves (ready)
  bool initialized_ = false;   // the wrapper was told it may be adopted
  bool start_failed_ = false;  // the wrapper says its shell ended before it served
  bool awaiting_sync_ = false;  // adopted: statuses until the sync's answer are earlier commands'
  uint64_t sync_seq_ = 0;
  uint64_t sync_nonce_ = 0;
  int64_t adopted_ms_ = 0;
  std::map<pid_t, lent_pipes> protected_;
};

}  // namespace sbsh::daemon
