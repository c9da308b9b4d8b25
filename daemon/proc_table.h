// Background processes (`sbsh start`) and the process table.
//
// A background process is a subshell of its session's shell, started as an internal job of
// the session (so it sees the session's directory, variables and functions as they are when
// its turn comes), in a process group of its own, with stdin /dev/null. Its stdout and
// stderr are pipes that sbshd copies into capped log files; a third pipe, held only by the
// outer subshell (the keeper), carries "+" when it has started and the command's exit status
// when it ends, and reaches end-of-file when every process of it is gone: the keeper is a
// child subreaper, so whatever the command starts (setsid included) stays in its tree, and it
// waits for all of it before it exits. The process has ended when its command has; `kill`
// returns when the whole tree has. The wrapper is told to spare its group, so it
// outlives restarts of the shell; `session rm` and shutdown kill it. The wrapper also holds
// the read ends of the three pipes (lent_pipes), so that the process and its status outlive
// sbshd too: a later sbshd that adopts the session goes on logging and watching it.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/capped_log.h"
#include "daemon/log_replies.h"
#include "daemon/log_stream.h"
#include "daemon/options.h"
#include "daemon/service_context.h"
#include "daemon/wrapper_process.h"
#include "ipc/messages.h"
#include "ipc/socket_io.h"
#include "uv/handles.h"

namespace sbsh::daemon {

class client_conn;
class command_records;
class session;
struct exec_job;

// What the process table needs of sbshd beyond a service's context (service_context.h): the
// server is its host, seen only through this.
class proc_host : public service_context {
 public:
  [[nodiscard]] virtual const options& opts() const = 0;
  [[nodiscard]] virtual const std::map<std::string, std::unique_ptr<session>>& sessions() const = 0;
  // The session `name`, made implicitly if there is none: in `cwd`, with the environment
  // `environment()` returns (called only then: the client's, sent with every request that
  // may create a session).
  virtual result<session*> get_or_create_session(const std::string& name, const std::string& cwd,
                                                 const std::function<std::vector<std::string>()>& environment) = 0;
  // A request of `c` for session `target` that would wait for itself is refused
  // (would_deadlock): `c` is a process of the command `target` is running, or of a command
  // that waits for that one through other sessions. Otherwise *inside gets the running
  // commands `c` is part of, for the job to carry.
  virtual status check_not_waiting_on_itself(const client_conn& c, const std::string& target,
                                             std::vector<uint64_t>* inside) = 0;
  // A session's activity changed (a process started or ended): its idle time counts from now.
  virtual void session_activity(const session& s) = 0;
  // Replaces `path` with `bytes` atomically, on the thread pool, one write per path at a time.
  virtual void write_atomically(const std::string& path, std::string bytes) = 0;
  // The commands kept under their id, which `ps` lists with the processes.
  virtual command_records& records() = 0;
};

// not_started: sbshd stopped while its start waited in the session's queue (or before the
// shell said its pid): it never ran, or its keeper, finding no reader, ended it at once.
// lost: it ran, and sbshd stopped meanwhile without a wrapper keeping its pipes: its end is
// unknown.
enum class proc_state { starting, running, exited, killed, failed, lost, not_started };
std::string_view proc_state_name(proc_state s);

struct bg_proc {
  uint64_t id = 0;
  std::string name, session, command;
  int64_t pid = 0;  // also its process group
  proc_state state = proc_state::starting;
  std::optional<int> exit_code, signal;
  int64_t started_at_ms = 0, ended_at_ms = 0;
  std::string error;

  // While it runs.
  unique_fd out_r, err_r, status_r, out_w, err_w, status_w;
  uv::handle_ptr<uv::fd_watch> out_watch, err_watch, status_watch;
  std::string status_buf;
  capped_log out_log, err_log;
  int kill_sent = 0;  // the last signal `kill` sent while the command ran
  uv::handle_ptr<uv::timer> kill_timer;
  struct waiter {
    uint64_t serial, req;
    uv::handle_ptr<uv::timer> deadline;
  };
  std::vector<waiter> waiters;  // until the command ends (kill with other signals)
  // Until every process is gone, its keeper having reaped what the command left: wait, and
  // kill with TERM or KILL.
  std::vector<waiter> kill_waiters;
  std::vector<log_follower> followers;

  [[nodiscard]] bool finished() const {
    return state != proc_state::starting && state != proc_state::running;
  }
  // Some process of its tree may still run: its keeper still holds the status pipe.
  [[nodiscard]] bool tree_alive() const { return static_cast<bool>(status_r); }
};

class proc_table {
 public:
  explicit proc_table(proc_host& srv);
  ~proc_table();

  void handle_start(client_conn& c, ipc::envelope& env);
  void handle_list(client_conn& c, ipc::envelope& env);
  void handle_kill(client_conn& c, ipc::envelope& env);
  void handle_wait(client_conn& c, ipc::envelope& env);
  void handle_logs(client_conn& c, ipc::envelope& env);
  // Ends the followed log stream `req` of client `c` with its logs_end; false when there is
  // none (the id is not a followed stream of this client).
  bool stop_following(client_conn& c, uint64_t req);
  // The client read all it was sent: its logs replies go on.
  void client_drained(client_conn& c);
  // Kills every running process of `session` (all when empty) with SIGKILL, tree and all.
  void kill_all(const std::string& session);
  [[nodiscard]] bool any_running(const std::string& session) const;
  // Reads the table an earlier sbshd saved. A process that was running goes on where its
  // session was adopted with its pipes (session::lent); otherwise it is marked lost.
  void load();
  // The process as clients see it (and as the state file keeps it).
  [[nodiscard]] proc_info record_of(const bg_proc& p) const;

 private:
  // A name `start` may give: a few kinds of characters, not an id's shape, not the name of a
  // process that runs. An ended process's name may be taken again: it then means the newest.
  [[nodiscard]] status check_name(const std::string& name) const;
  // The process `ref` names, or null after sending request `req` an error.
  bg_proc* find(const ipc::proc_ref& ref, uint64_t req, client_conn& c);
  void on_started(uint64_t id, exec_job& job);
  status open_logs(bg_proc& p);
  void watch(bg_proc& p);  // reads its open pipes
  static lent_pipes lend(const bg_proc& p);
  bool reattach(bg_proc& p);
  void load_saved();
  // Adds a record read from the state file; false when it is unusable or a duplicate.
  bool add_loaded(proc_info& r);
  void adopt_unlisted();
  void on_output(bg_proc& p, int stream_no);
  void on_status(bg_proc& p);
  // The command ended (with the status it reported, if any): waiters learn it.
  void end_command(bg_proc& p, std::optional<int> code, const std::string& why);
  // Every process of it is gone: kill's waiters learn it, the table may forget it.
  void tree_gone(bg_proc& p);
  void finish(bg_proc& p, const std::string& why);
  void signal_tree(bg_proc& p, int sig);
  // SIGKILL to the tree now and again until it is gone (a process may fork as it dies).
  void kill_until_gone(uint64_t id, uint64_t delay_ms);
  void reply_info(uint64_t serial, uint64_t req, const bg_proc& p, ipc::msg_type t = ipc::msg_type::proc_info);
  void end_followers(bg_proc& p);
  void save();
  [[nodiscard]] std::string log_path(uint64_t id, const char* ext) const;
  // Deletes log files (on the thread pool).
  void remove_logs_later(std::vector<std::string> paths);
  // Deletes the log files of processes not in the table.
  void remove_stray_logs();

  // A logs reply has sent what was logged: a follower, or its end.
  void logs_sent(const log_replies::finished& f);

  proc_host& srv_;
  std::map<uint64_t, std::unique_ptr<bg_proc>> procs_;
  uint64_t next_id_ = 1;
  log_replies replies_;
};

}  // namespace sbsh::daemon
