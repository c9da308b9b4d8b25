// Where a session's two parts meet: the job runner (job_runner.h) sees the shell only through
// shell_port, and the shell supervisor (shell_supervisor.h) reports to the runner only through
// shell_events. Neither knows the other's class; the session joins them. The runner can then
// be driven by a stand-in shell (tests/unit/job_runner_test.cpp), and a change to how shells
// are started and kept cannot reach into how commands are queued and stopped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/procs.h"
#include "daemon/shell_messages.h"
#include "ipc/result.h"

namespace sbsh::daemon {

// starting: a shell is being started (init commands run in this state).
// restarting: waiting out the back-off before the next start.
// exited: the shell ended and the restart policy said not to start another.
// failed: too many starts failed in a row (the start limit), or a start cannot work; see
// failure().
enum class session_state { starting, ready, restarting, exited, failed };

inline std::string_view state_name(session_state s) {
  switch (s) {
    case session_state::starting: return "starting";
    case session_state::ready: return "ready";
    case session_state::restarting: return "restarting";
    case session_state::exited: return "exited";
    case session_state::failed: return "failed";
  }
  return "unknown";
}

// How a generation ended, for the job runner.
struct shell_loss {
  std::optional<int> exit_code;  // the shell's own status, when it exited
  std::optional<int> signal;     // the signal that killed it
  std::string why;               // for a user: "its shell was killed by signal 9", ...
  bool restarting = false;       // a new shell is being started
  bool never_served = false;     // the shell never ran a command of this generation
};

// What the job runner asks of its session's shell.
class shell_port {
 public:
  virtual ~shell_port() = default;

  [[nodiscard]] virtual session_state state() const = 0;
  // Why the session is failed or exited, for the commands it refuses.
  [[nodiscard]] virtual const std::string& failure() const = 0;
  // The current generation: each start of a shell has a number of its own.
  [[nodiscard]] virtual uint64_t generation() const = 0;
  // The shell takes runs now (ready, and no earlier sbshd's command still runs in it).
  [[nodiscard]] virtual bool serving() const = 0;
  // An adopted shell may still run a command an earlier sbshd started.
  [[nodiscard]] virtual bool adopted_busy() const = 0;
  // The shell's pid as sbshd sees it (0: none yet).
  [[nodiscard]] virtual int64_t shell_pid() const = 0;

  // Numbers the run (m.seq: its status carries it back) and sends it to the shell. The
  // error's code is "gone" when the shell has ended; its loss is then on its way.
  [[nodiscard]] virtual status send_run(run_message& m) = 0;
  // Asks for `sig` to the processes started since `mark` and, with `interrupt`, an interrupt
  // of the shell (which abandons the rest of the command's text). Returns the request's id
  // (its answer comes as shell_events::signal_answered), or 0 when nobody can be asked.
  virtual uint64_t signal_command(const procs::since_mark& mark, int sig, bool interrupt) = 0;
  // Ends the current shell and starts another: a command could only be stopped this way
  // (`forced`, whatever the restart policy), or an init command failed (the start counts as
  // failed).
  virtual void restart_shell(const std::string& why, bool forced) = 0;
  // A failed session tries again once its start limit's window has passed.
  virtual void retry_if_failed() = 0;
  // The shell runs as its session defines (init commands done).
  virtual void initialized() = 0;
  // A command waits while serving() says no: if that is because the shell's channel was put
  // aside while the session was idle (parked), this asks for it back, and shell_ready()
  // follows once it is.
  virtual void want_channel() = 0;

  // Leases (docs/architecture.md, "The direct path"). Whether the shell's builtin takes them
  // (it said so in ready or synced).
  [[nodiscard]] virtual bool serves_leases() const { return false; }
  // Hands the builtin `lease`, the shell's end of a lease socket, and `page`, its record
  // page's memfd (both sent: they stay the caller's), with the lease's flags (SBSH_LEASE_*);
  // sets `seq` to the lease's number, which its answer (shell_events::lease_answered)
  // repeats. The error's code is "gone" when the shell has ended.
  [[nodiscard]] virtual status send_lease(uint64_t& seq, int lease, int page, uint32_t flags) {
    (void)seq;
    (void)lease;
    (void)page;
    (void)flags;
    return make_error(ipc::errc::not_supported, "this shell takes no leases");
  }
  // Asks the builtin to end the lease it holds between two commands.
  virtual void end_lease() {}
  // Tells the builtin that the lease's run `seq` is to stop, ahead of the SIGINT that
  // signal_command() has the wrapper send (the interrupt message).
  virtual void interrupt_leased(uint64_t seq) { (void)seq; }
};

// What the shell supervisor tells the job runner of its shell, and asks of it.
class shell_events {
 public:
  virtual ~shell_events() = default;

  // What a new shell runs before anything else (init commands, a claimed spare's set-up), in
  // this order; `init` marks the session's own init commands, whose failure fails the start.
  virtual void run_first(std::vector<std::string> texts, bool init) = 0;
  // The shell serves (it said so, or an adopted shell's earlier command is over).
  virtual void shell_ready() = 0;
  // The shell's state changed otherwise (a start failed, the session failed or exited, a
  // shell is being watched): run what waits, or refuse it.
  virtual void shell_changed() = 0;
  // The shell's answer to a run (its status, or why it ran nothing).
  virtual void run_answered(const shell_message& m) = 0;
  // The builtin's answer about a lease: leased (held), or lease_ended (refused or over).
  virtual void lease_answered(const shell_message& m) { (void)m; }
  // The builtin says the lease's record page has many records not yet read (records).
  virtual void records_due() {}
  // The wrapper answered a signal_command request.
  virtual void signal_answered() = 0;
  // Generation `gen` ended; the next one, if any, is gen + 1.
  virtual void shell_lost(uint64_t gen, const shell_loss& loss) = 0;
  // A command an earlier sbshd started ended while this one was not yet in charge.
  virtual void earlier_command_ended(int status, int64_t adopted_ms) = 0;
  // Why the session's state was lost since its last command, for the next one's result.
  virtual void note_state_lost(std::string why) = 0;

  // Whether a user command ran in the current generation, and whether its init commands
  // failed: a loss before either counts as a failed start.
  [[nodiscard]] virtual bool ran_user_commands() const = 0;
  [[nodiscard]] virtual bool init_failed() const = 0;
  // No command runs, waits or is being signalled: the shell's channel may be put aside.
  [[nodiscard]] virtual bool idle() const = 0;
};

}  // namespace sbsh::daemon
