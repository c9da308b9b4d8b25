// sbshd's server: the listening socket, client connections, the session table, and the
// table of request handlers (one per message family, see handlers.cpp). The methods of
// `server` are defined by role: its life and shutdown in server.cpp, the listener and clients
// in server_clients.cpp, the session table in server_sessions.cpp, the state files in
// server_state.cpp, wrappers and spare shells in server_spares.cpp, adoption at start in
// server_adopt.cpp, and request routing in handlers.cpp. A client connection is declared in
// client_conn.h; the services that answer requests (files, kept commands, log replies) see
// the server only as a service_context (service_context.h), and the job runner only through
// runner_ports.h.
#pragma once

#include <uv.h>

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/cgroup.h"
#include "daemon/client_conn.h"
#include "daemon/command_records.h"
#include "daemon/counters.h"
#include "daemon/env_store.h"
#include "daemon/files.h"
#include "daemon/fork_server.h"
#include "daemon/idle_upkeep.h"
#include "daemon/session_stopper.h"
#include "daemon/inherited.h"
#include "daemon/options.h"
#include "daemon/proc_table.h"
#include "daemon/runner_ports.h"
#include "daemon/service_context.h"
#include "daemon/session_def.h"
#include "daemon/session_host.h"
#include "daemon/session_store.h"
#include "daemon/snapshots.h"
#include "daemon/wrapper_process.h"
#include "ipc/fd.h"
#include "uv/framed_socket.h"
#include "uv/handles.h"

namespace sbsh::daemon {

class session;

class server final : public proc_host, public session_host, public upkeep_host {
 public:
  explicit server(options opts);
  ~server() override;
  // Binds the socket, or takes `activated`, the one a service manager passed and bound to
  // opts().socket_path; returns an error the user can act on (unsafe directory, a daemon
  // already running, path too long).
  status listen(unique_fd activated = {});
  // Runs the loop until shutdown; returns the process exit code.
  int run(const std::function<void()>& on_ready);
  // What run() does before it runs the loop, for a caller that runs the loop itself (a fuzz
  // target): signal handlers, readiness, spare shells.
  void start(const std::function<void()>& on_ready);

  // For sessions (session_host.h says what each does).
  uv_loop_t* loop() override { return &loop_; }
  daemon::counters& counters() override { return counters_; }
  [[nodiscard]] const runner_context& runner_ctx() const override { return runner_ctx_; }
  [[nodiscard]] const options& opts() const override { return opts_; }
  [[nodiscard]] uint64_t health_interval_ms() const override { return opts_.health_interval_ms; }
  [[nodiscard]] int devnull() const { return devnull_.get(); }
  [[nodiscard]] pid_t pid() const { return pid_; }
  result<wrapper_process> start_wrapper(const std::string& dir, const std::vector<std::string>& args,
                                        std::vector<std::string>& env, const char* cwd,
                                        uv::child_process::exit_callback on_exit) override;
  std::string new_shell_dir() override;
  [[nodiscard]] std::string session_tmp_dir(const std::string& name) const override {
    return opts_.state_dir + "/tmp/" + name;
  }
  std::optional<spare_shell> take_spare() override;
  std::optional<spare_shell> take_confined_spare() override;
  void reap_session_later(pid_t sid, const std::set<pid_t>& spare) override;
  env_store& envs() override { return envs_; }
  uint64_t rebuild_env(const std::string& name, const session_def& def,
                       std::function<void(const status&)> done) override;
  void cancel_rebuild(uint64_t ticket) override;
  void session_activity(const session& s) override;
  [[nodiscard]] bool busy(const session& s) const override;
  void expire(const std::string& name) override;
  uint64_t& channels_held() override { return channels_held_; }

  // For handlers.
  void handle(client_conn& c, ipc::envelope&& env);
  // Whether handle() has a handler for requests of type `t` (handlers.cpp's table).
  static bool handles(ipc::msg_type t);
  session* find_session(const std::string& name) override;
  client_conn* client_by_serial(uint64_t serial) override;
  // For the process table (proc_table.h says what each does), the handlers too.
  result<session*> get_or_create_session(const std::string& name, const std::string& cwd,
                                         const std::function<std::vector<std::string>()>& environment) override;
  status check_not_waiting_on_itself(const client_conn& c, const std::string& target,
                                     std::vector<uint64_t>* inside) override;
  // Creates a session with this definition; an existing one with the same definition is
  // fine, with another it is an error that says what differs.
  // With `adopted`, the session takes over that running shell instead of starting one.
  result<session*> create_session(const std::string& name, session_def def, adopted_shell* adopted = nullptr);
  // create_session for a request from client `serial`: a definition with a snapshot first
  // has its directory copied (snapshots.h), one with a setup then has its environment built
  // or found (env_store.h; `output` gets the setup's output as it comes), and `done` runs
  // when the session exists or could not be made. The copy and the setup are stopped when
  // every client that asked for them has gone.
  using output_fn = env_store::output_fn;
  void define_session(const std::string& name, session_def def, uint64_t serial,
                      std::function<void(result<session*>)> done, output_fn output = nullptr);
  // Ends the session and everything it started; `done` runs once nothing is left, with the
  // path of the snapshot's copy if it was kept (with `keep_copy`, or by the definition's
  // keep_copy_on_failure when the last command failed), else "".
  void remove_session(const std::string& name, bool keep_copy, std::function<void(std::string)> done);
  // Removes every session made implicitly that has been idle for at least `idle_ms`; `done`
  // gets their names once nothing of them is left.
  void prune_sessions(uint64_t idle_ms, std::function<void(std::vector<std::string>)> done);
  // Saves the idle times of the sessions that can expire whose time changed since it was
  // saved (a definition is saved when it is made or changes: session_store.h).
  void save_state();
  // Replaces `path` with `bytes` atomically, on the thread pool, one write per path at a time.
  void write_atomically(const std::string& path, std::string bytes) override;
  proc_table& procs() { return *procs_; }
  command_records& records() override { return *records_; }
  file_service& files() { return *files_; }
  snapshot_store& snapshots() { return snapshots_; }
  cgroup::manager& cgroups() { return cgroups_; }
  // The complete environments, most recently used first, each with the sessions using it
  // (defined with it, or being made with it).
  void list_envs(std::function<void(std::vector<environment_info>)> done);
  // The sessions defined, or being made, with the environment at `path`.
  [[nodiscard]] std::vector<std::string> env_users(const std::string& path) const;
  // Deletes the environments that `pick` chooses from list_envs() (it must choose only those
  // that no session uses: one used by the time it would go is kept); `done` gets those
  // deleted once they are gone.
  using env_picker = std::function<std::vector<environment_info>(std::vector<environment_info>)>;
  void evict_envs(env_picker pick, std::function<void(std::vector<environment_info>)> done);
  // Ends every session and background process, then the loop. With `keep_sessions`, leaves
  // them running instead, for the next sbshd to adopt.
  void begin_shutdown(const std::string& why, bool keep_sessions = false);
  [[nodiscard]] bool shutting_down() const { return shutting_down_; }
  void client_closed(client_conn* c, const std::string& reason);
  void client_drained(client_conn* c);
  [[nodiscard]] const std::map<std::string, std::unique_ptr<session>>& sessions() const override { return sessions_; }
  [[nodiscard]] uint64_t uptime_ms() const;
  [[nodiscard]] size_t client_count() const { return clients_.size(); }
  // The bounds on clients' memory (bounds.h), shared by every client connection.
  uv::memory_account& client_memory() { return client_memory_; }
  uv::farewells& parting() { return farewells_; }
  // Checks every client against its bounds on the next turn of the loop (not from inside a
  // callback of the client that grew): drops those over theirs, then, while all clients
  // together hold more than kMaxClientMemory, the one holding the most.
  void enforce_bounds_soon();

 private:
  status start_listening();
  void on_accept();
  // Out of descriptors: takes one waiting connection with the one kept for this and refuses
  // it, saying which limit; false when even that cannot be done.
  bool refuse_for_descriptors();
  // Refuses a connection just accepted with an error frame that says why.
  void refuse(unique_fd conn, ipc::errc code, const std::string& message);
  void enforce_bounds();
  void close_bound_timers();
  void load_state(std::map<std::string, adopted_shell>& adopted);
  // The shells an earlier sbshd left (their wrappers listen in shells_dir()), by session.
  std::map<std::string, adopted_shell> adopt_orphans();
  // Where each shell's directory lives: its wrapper's adoption socket.
  [[nodiscard]] std::string shells_dir() const { return opts_.socket_path + ".d"; }
  // Kills what is left of a session: the processes of its process session `sid` (but `spare`)
  // and those of its cgroup, which then goes.
  void sweep_session(pid_t sid, std::function<void()> done, std::set<pid_t> spare = {}, std::string cgroup = {});
  void removed(session* s, std::function<void()> done);
  void on_signal(int signum);
  // Once every session has ended (session_stopper), or the bound on it has passed.
  void finish_shutdown();
  void watchdog_tick(uint64_t interval_ms);
  void start_spares();
  void start_spares_in(uint64_t ms);
  void drop_spares();

  options opts_;
  uv_loop_t loop_{};
  pid_t pid_;
  unique_fd listen_fd_;
  unique_fd lock_fd_;
  unique_fd devnull_;
  unique_fd accept_reserve_;  // closed for a moment to refuse a connection when none is left
  unique_fd ns_last_pid_;
  uv::handle_ptr<uv::fd_watch> listen_watch_;
  std::vector<uv::handle_ptr<uv::signal_watch>> signals_;  // SIGTERM, SIGINT and SIGHUP
  uv::handle_ptr<uv::timer> watchdog_timer_;               // pings the service manager's watchdog, when it has one
  std::deque<spare_shell> spares_;
  uv::handle_ptr<uv::timer> spare_timer_;
  // Starts the wrappers (server_spares.cpp), from the first one on.
  std::unique_ptr<fork_server> forks_;
  uv::handle_ptr<uv::timer> activity_save_timer_;  // set while idle times wait to be saved
  session_stopper stopper_{&loop_, opts_.stop_at_once, [this] { finish_shutdown(); }};
  // Confined spares (take_confined_spare), kept once a confined session's shell has started.
  std::deque<spare_shell> confined_spares_;
  bool confined_spares_wanted_ = false;
  // Before the clients, which count themselves in it until they are destroyed.
  uv::memory_account client_memory_{ipc::kMaxClientMemory, [this] { enforce_bounds_soon(); }};
  uv::farewells farewells_{&loop_, &client_memory_};
  uint64_t channels_held_ = 0;  // before the sessions, whose shells count in it
  idle_upkeep upkeep_{*this, opts_.park_after_ms};
  std::map<std::string, std::unique_ptr<session>> sessions_;
  std::unordered_map<client_conn*, std::unique_ptr<client_conn>> clients_;
  std::vector<std::unique_ptr<client_conn>> dead_clients_;
  uv::handle_ptr<uv::timer> bounds_timer_;  // set while enforce_bounds() is due
  uv::handle_ptr<uv::timer> accept_timer_;  // set while accepting waits for a free descriptor
  uv::handle_ptr<uv::timer> trim_timer_;    // set while free memory is due to be given back
  void trim_memory_soon();
  uint64_t next_serial_ = 1;
  uint64_t shell_seq_ = 0;
  uint64_t started_us_ = 0;
  daemon::counters counters_;
  runner_context runner_ctx_;
  bool shutting_down_ = false;
  bool keep_sessions_ = false;  // shutting down for an sbshd that adopts the sessions
  struct pending_write {
    bool busy = false;
    std::optional<std::string> next;
    // Called once the write under way (or the next one, when there is a next) is on disk.
    std::vector<std::function<void()>> current_waiters, next_waiters;
  };
  // Calls `done` once every state written so far is on disk (at once when no write is under
  // way): a client told that a session was made can count on it surviving a crash of sbshd.
  void after_state_written(std::function<void()> done);
  std::map<std::string, pending_write> writes_;
  // The session table on disk, and while load_state() recreates a session read from it,
  // whether its file is there already.
  session_store store_{&loop_, opts_.state_dir};
  bool state_on_disk_ = false;
  // The text the definitions of the sessions in the table hold, but their environments
  // (session_store::environ_bytes counts each of those once): room_for_definition.
  size_t own_text_ = 0;
  std::unique_ptr<proc_table> procs_;
  std::unique_ptr<command_records> records_;
  // Lives as long as the server: work it left on the thread pool reports to it.
  std::unique_ptr<file_service> files_;
  std::unique_ptr<inherited_children> inherited_;  // from start(): what killed wrappers leave
  snapshot_store snapshots_;
  env_store envs_;
  cgroup::manager cgroups_;  // the cgroups of sessions with limits
  // Sessions whose snapshot is being copied or whose environment is being built, with the
  // requests waiting for them.
  struct pending_session {
    session_def def;
    struct waiter {
      uint64_t serial;  // the client's
      std::function<void(result<session*>)> done;
      output_fn output;
    };
    std::vector<waiter> waiters;
    uint64_t env_ticket = 0;  // while its environment's setup runs (env_store::build)
  };
  std::map<std::string, pending_session> pending_;
  // Environments of existing sessions being built again (rebuild_env), by ticket.
  struct env_rebuild {
    uint64_t env_ticket = 0;  // while the setup runs
    std::function<void(const status&)> done;
  };
  std::map<uint64_t, env_rebuild> rebuilds_;
  uint64_t next_rebuild_ = 1;
  void snapshot_copied(const std::string& name, result<uint64_t> copied);
  // The environment of pending session `name`: keyed, then found or built.
  void prepare_env(const std::string& name);
  void env_keyed(const std::string& name, result<std::string> hash);
  // How env_store runs the setup of session `name`.
  env_store::setup_run setup_run_of(const std::string& name, const session_def& def) const;
  // The sbsh-wrapper options that the setup of session `name` (defined by `def`, its
  // environment's directory set) runs with; what it adds to the setup's environment
  // (TMPDIR) goes to `env`.
  std::vector<std::string> setup_wrapper_args(const std::string& name, const session_def& def,
                                              std::vector<std::string>& env) const;
  // Pending session `name` is ready to be made (`outcome` ok) or cannot be: it is made, or
  // what it had is deleted, and its waiters told.
  void pending_done(const std::string& name, const status& outcome);
  // Deletes the least recently used environments that no session uses while all of them hold
  // more than opts_.env_cap bytes.
  void enforce_env_cap();
  // Whether all definitions together stay within ipc::kMaxDefinitionsText with `def` as
  // session `name`'s, each distinct environment counted once; the error says what to do.
  status room_for_definition(const std::string& name, const session_def& def);
  std::vector<std::unique_ptr<session>> removed_;  // ending, freed once their wrappers exit

  bool bound_ = false;
  int exit_code_ = 0;
};

}  // namespace sbsh::daemon
