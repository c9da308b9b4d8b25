// A session: a name, a definition, and two parts with one role each: the shell supervisor
// (shell_supervisor.h: the wrapper and bash of each generation, restarts, health, adoption)
// and the job runner (job_runner.h: the queue of commands, how each runs and ends). The two
// know each other only through the interfaces in shell_port.h, which this class joins. It is
// what the server and the request handlers see; it routes to the two parts and describes the
// session for `status`, `session ls` and `session show`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "daemon/exec_job.h"
#include "daemon/job_runner.h"
#include "daemon/session_def.h"
#include "daemon/shell_supervisor.h"

namespace sbsh::daemon {

class session_host;

class session {
 public:
  session(session_host& srv, std::string name, session_def def);
  // A session that takes over a shell an earlier sbshd started.
  session(session_host& srv, std::string name, session_def def, adopted_shell&& shell);
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  [[nodiscard]] const std::string& name() const { return name_; }

  // Commands (job_runner.h).
  void enqueue(std::unique_ptr<exec_job> job);
  void run_internal(std::string text, std::function<void(exec_job&)> on_done, std::string check_cwd = {},
                    std::vector<unique_fd> lent = {}) {
    jobs_.run_internal(std::move(text), std::move(on_done), std::move(check_cwd), std::move(lent));
  }
  bool cancel(reply_port* c, uint64_t id, int sig, bool stop) { return jobs_.cancel(c, id, sig, stop); }
  void stdin_data(reply_port* c, uint64_t id, std::string_view data, bool eof) { jobs_.stdin_data(c, id, data, eof); }
  void release(reply_port* c, uint64_t id, std::vector<unique_fd> drain = {}) {
    jobs_.release(c, id, std::move(drain));
  }
  void client_gone(reply_port* c) { jobs_.client_gone(c); }
  void client_drained(reply_port* c) { jobs_.client_drained(c); }

  // The shell (shell_supervisor.h).
  void protect_group(pid_t pgid, lent_pipes pipes) { shell_.protect_group(pgid, std::move(pipes)); }
  void unprotect_group(pid_t pgid) { shell_.unprotect_group(pgid); }
  [[nodiscard]] const std::map<pid_t, lent_pipes>& lent() const { return shell_.lent(); }
  // Ends the shell and everything it started; the session stays stopped. Commands in flight
  // are told that the session was removed, or (`removed` false) that sbshd is shutting down.
  void stop(bool removed = false);
  // stop()'s first half: every command queued or running is answered that it was refused or
  // stopped (a shutdown then ends the shells a bounded number at a time).
  void refuse_jobs(bool removed = false);
  // Lets go of the shell without ending it, for the next sbshd to adopt (shutdown
  // --keep-sessions); the session stays stopped.
  void abandon();
  [[nodiscard]] bool stopped_and_gone() const { return shell_.stopped_and_gone(); }
  void when_gone(std::function<void()> gone) { shell_.when_gone(std::move(gone)); }
  // Ends the current shell (the running command gets shell_restarted) and starts a new one
  // at once, whatever the policy, clearing a failed or exited state.
  void restart(const std::string& why) { shell_.restart(why); }
  [[nodiscard]] pid_t last_wrapper_pid() const { return static_cast<pid_t>(shell_.wrapper_pid()); }
  [[nodiscard]] session_state state() const { return shell_.state(); }

  [[nodiscard]] const session_def& def() const { return def_; }
  // `session create` of a session made implicitly, with the same shells: it becomes explicit,
  // with the expiry and default timeout asked for.
  void make_explicit(uint64_t idle_expiry_ms, uint64_t timeout_ms) {
    def_.implicit = false;
    def_.idle_expiry_ms = idle_expiry_ms;
    def_.timeout_ms = timeout_ms;
  }
  // When the session last had something to do (a command or background process started or
  // ended; its creation): its idle time counts from there.
  [[nodiscard]] int64_t last_active_ms() const { return last_active_ms_; }
  void touch(int64_t at_ms) { last_active_ms_ = at_ms; }
  // The session as `status` and `session ls` show it; in full, with the definition, the
  // history (sbsh::history_entry, ipc/records.h) and the output of the last start's init
  // commands (`session show`).
  [[nodiscard]] session_status describe() const;
  [[nodiscard]] session_detail describe_full() const;

  // The two parts.
  shell_supervisor& shell() { return shell_; }
  job_runner& jobs() { return jobs_; }
  [[nodiscard]] const job_runner& jobs_const() const { return jobs_; }

 private:
  void activity();

  session_host& srv_;
  std::string name_;
  session_def def_;
  int64_t last_active_ms_;
  // The idle shell's directory as describe() last read it from /proc, and for which shell
  // and job count (job_runner::sent): `session ls` of 10,000 sessions must not walk
  // 10,000 /proc paths when nothing has run since.
  mutable std::string cwd_seen_;
  mutable std::pair<long, uint64_t> cwd_seen_for_{0, 0};
  // Declared in this order: the runner is destroyed first, while the shell it talks to
  // still exists.
  shell_supervisor shell_;
  job_runner jobs_;
};

}  // namespace sbsh::daemon
