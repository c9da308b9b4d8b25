// A session: one wrapper and its bash, the slots through which bash opens each command's
// I/O, and the queue of exec jobs that run there one at a time.
//
// The exec hot path does not go through the wrapper. For each command sbshd writes the
// command text into a memfd, points its "slots" (descriptors at fixed numbers in sbshd) at
// the command's pipes, and writes one short constant line to bash's stdin; bash opens the
// slots through /proc/<sbshd>/fd/N, evaluates the text at its top level with its stdin,
// stdout and stderr redirected to them, and writes the status to the status slot, which
// sbshd polls. The wrapper's control socket carries supervision only.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "daemon/exec_job.h"
#include "daemon/framed_socket.h"
#include "daemon/session_def.h"
#include "daemon/child_process.h"
#include "daemon/shell_protocol.h"
#include "daemon/uv_handles.h"

namespace sbsh::daemon {

class server;

// A started sbsh-wrapper: the process, and sbshd's end of its control socket.
struct wrapper_process {
  child_process* proc = nullptr;
  unique_fd ctl;
};

// A wrapper started ahead of need (wrapper::run_spare) whose bash is already running and
// has sourced its start-up script: the next new session takes it (session::claim_spare).
struct spare_shell {
  wrapper_process wrapper;
  shell_link link;
};

// A background process's pipes, lent to the session's wrapper so that they outlive sbshd:
// the read ends of its stdout ('o'), stderr ('e') and status ('s') pipes, one letter per
// descriptor in `streams` (a stream already at end-of-file is left out). The wrapper never
// reads them; it only keeps them open, so the process neither gets SIGPIPE nor loses a byte
// while no sbshd runs, and hands them to the next sbshd in `adopted`.
struct lent_pipes {
  uint64_t proc = 0;  // its id in the process table
  std::string streams;
  std::vector<unique_fd> fds;
};
inline constexpr std::string_view kLentStreams = "oes";

// A session's wrapper and bash left running by an earlier sbshd, taken over at start-up
// (server::adopt_orphans): what the wrapper said of them in `adopted`.
struct adopted_shell {
  std::string session;  // empty: a spare nobody claimed
  std::string cwd, dir;
  pid_t shell_pid = 0, wrapper_pid = 0;
  int64_t started_at_ms = 0;
  std::set<pid_t> groups;  // background processes' groups, spared when the shell ends
  std::map<pid_t, lent_pipes> pipes;  // by group: the pipes the wrapper held
  unique_fd ctl;           // the connection to the wrapper's adoption socket
  unique_fd script_w, status_r;
};

// starting: a shell is being started (init commands run in this state).
// restarting: waiting out the back-off before the next start.
// exited: the shell ended and the restart policy said not to start another.
// failed: too many starts failed in a row (the start limit); see failure().
enum class session_state { starting, ready, restarting, exited, failed };
std::string_view state_name(session_state s);

class session {
 public:
  session(server& srv, std::string name, session_def def);
  // A session that takes over a shell an earlier sbshd started.
  session(server& srv, std::string name, session_def def, adopted_shell&& shell);
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  [[nodiscard]] const std::string& name() const { return name_; }
  // Takes a parsed job; it runs after the jobs already queued.
  void enqueue(std::unique_ptr<exec_job> job);
  // Queues shell text on sbshd's own behalf; on_done gets the finished job (its outcome
  // and captured output). If the job never runs, on_done still gets it with an error.
  void run_internal(std::string text, std::function<void(exec_job&)> on_done);
  // Tells the wrapper to spare this process group when the shell ends (background
  // processes outlive shell restarts) and lends it the process's pipes (lent_pipes); each
  // later wrapper of the session is lent them again.
  void protect_group(pid_t pgid, lent_pipes pipes);
  void unprotect_group(pid_t pgid);
  // By process group: the pipes lent to the wrapper (an adopted one gave them back).
  [[nodiscard]] const std::map<pid_t, lent_pipes>& lent() const { return protected_; }
  // Signal `sig` to the running command's processes once, or (sig == 0) stop it: SIGTERM,
  // then SIGKILL after the grace period, then a shell restart if a builtin still runs.
  // A queued job is dropped at once. Returns false when no such job is here.
  bool cancel(client_conn* c, uint64_t id, int sig);
  void stdin_data(client_conn* c, uint64_t id, std::string_view data, bool eof);
  void release(client_conn* c, uint64_t id);
  // The client went away: its queued jobs are dropped, its running one is hung up on.
  void client_gone(client_conn* c);
  // The client's output queue drained: resume reading command output for it.
  void client_drained(client_conn* c);
  // Ends the shell and everything it started; the session stays stopped.
  void stop();
  // Lets go of the shell without ending it, for the next sbshd to adopt (shutdown
  // --keep-sessions); the session stays stopped.
  void abandon();
  [[nodiscard]] bool stopped_and_gone() const;
  // Ends the current shell (the running command gets shell_restarted) and starts a new one
  // at once, whatever the policy, clearing a failed or exited state.
  void restart(const std::string& why);

  [[nodiscard]] const session_def& def() const { return def_; }
  [[nodiscard]] pid_t last_wrapper_pid() const { return static_cast<pid_t>(wrapper_pid_); }
  [[nodiscard]] session_state state() const { return state_; }
  // The session as `status` and `session ls` show it; in full, with the definition, the
  // history (sbsh::history_entry, ipc/records.h) and the output of the last start's init
  // commands (`session show`).
  [[nodiscard]] session_status describe() const;
  [[nodiscard]] session_detail describe_full() const;

 private:
  void start_shell();
  void adopt(adopted_shell&& shell);
  // The start of a session whose shell is the spare sbshd had ready.
  void claim_spare(spare_shell&& spare);
  // What every start does first; returns the new generation.
  uint64_t begin_start();
  // What every start does last: listens to the wrapper and the shell, and runs what waits.
  void watch_shell(uint64_t gen, unique_fd ctl, bool run_init = true);
  void on_wrapper_exit(uint64_t gen, int64_t status, int sig);
  void queue_init_jobs();
  void schedule_restart(const std::string& why, bool failed_start, bool forced);
  void health_tick();
  void on_control(uint64_t gen, ipc::envelope&& env);
  void on_status_readable(uint64_t gen);
  void dispatch_statuses();  // acts on the complete status lines read so far
  void on_shell_lost(uint64_t gen, std::optional<int> exit_code, std::optional<int> signal,
                     const std::string& why);
  void detach_generation(bool kill_wrapper);
  void run_next();
  bool start_job(exec_job& job);
  void finish_job(std::unique_ptr<exec_job> job);
  void escalate(exec_job& job);
  void send_signal(exec_job& job, int sig);
  void restart_shell(const std::string& why, bool forced);
  void finish_init_job(exec_job& job);
  void pump_output(exec_job& job, int stream_no, bool drain);
  void pump_stdin(exec_job& job);
  void set_output_paused(exec_job& job, bool paused);
  void keep_draining(unique_fd fd);
  void drain_outputs(exec_job& job);
  status point_slot(const unique_fd& slot, int fd);
  void reset_slots();

  server& srv_;
  std::string name_;
  session_def def_;
  session_state state_ = session_state::starting;
  std::string failure_;
  std::string init_output_;      // what the last start's init commands printed
  bool init_failed_ = false;
  uint64_t gen_user_commands_ = 0;  // user commands started in this generation
  int64_t shell_started_ms_ = 0;
  std::deque<history_entry> history_;
  std::deque<uint64_t> failed_starts_;  // mono_us of recent failed starts (start limit)
  unsigned consecutive_failures_ = 0;   // for the back-off
  timer* restart_timer_ = nullptr;
  timer* health_timer_ = nullptr;
  uint64_t ping_seq_ = 0;
  uint64_t ping_sent_us_ = 0;           // non-zero while a ping awaits its pong

  // Current shell generation: everything below is replaced on each (re)start.
  uint64_t generation_ = 0;
  child_process* wrapper_ = nullptr;
  framed_socket* ctl_ = nullptr;
  fd_watch* status_watch_ = nullptr;
  std::string status_buf_;
  int64_t shell_pid_ = 0;
  int64_t wrapper_pid_ = 0;
  uint64_t started_mono_us_ = 0;

  // The slots bash opens and sbshd's ends of its pipes (the slots stay for the session's
  // life; the pipes are replaced on each start).
  shell_link link_;
  size_t text_slot_size_ = 0;

  std::deque<std::unique_ptr<exec_job>> queue_;
  std::unique_ptr<exec_job> current_;
  std::vector<std::unique_ptr<exec_job>> unreleased_;  // fds mode: done, client still draining
  struct drain_entry {
    unique_fd fd;
    fd_watch* watch;
  };
  std::deque<drain_entry> draining_;
  uint64_t restarts_ = 0;
  uint64_t commands_ = 0;
  uint64_t signal_seq_ = 0;
  timer* kill_timer_ = nullptr;
  bool stopping_ = false;
  bool forcing_restart_ = false;  // set while a restart that ignores the policy runs
  bool awaiting_sync_ = false;  // adopted: statuses until kSyncStatus are of earlier commands
  int64_t adopted_ms_ = 0;
  // The process groups of this session's running background processes, with their pipes.
  std::map<pid_t, lent_pipes> protected_;
  [[nodiscard]] std::set<pid_t> protected_groups() const;
  void send_protect(pid_t pgid, const lent_pipes& pipes);
};

}  // namespace sbsh::daemon
