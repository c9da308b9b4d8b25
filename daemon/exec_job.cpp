// Parsing and validating exec requests, and the shape of their results.
#include "daemon/exec_job.h"

#include <signal.h>
#include <string.h>
#include <time.h>

#include <algorithm>

#include <fmt/format.h>

#include "daemon/session_def.h"
#include "daemon/terminal_screen.h"
#include "ipc/messages.h"
#include "ipc/text.h"
#include "uv/handles.h"

namespace sbsh::daemon {

namespace {
// sbshd's loop is their only user.
uint64_t last_job_serial = 0;
uint64_t reserve_mark = UINT64_MAX;  // the serial at which `reserver` runs
serial_reserver reserver = nullptr;
void* reserver_ctx = nullptr;

[[gnu::noinline]] void reserve_more(uint64_t serial) {
  reserve_mark = reserver != nullptr ? reserver(reserver_ctx, serial) : UINT64_MAX;
}
}  // namespace

uint64_t new_job_serial() {
  uint64_t serial = ++last_job_serial;
  if (serial >= reserve_mark) [[unlikely]]
    reserve_more(serial);
  return serial;
}

void reserve_job_serials(uint64_t mark, serial_reserver reserve, void* ctx) {
  reserver = reserve;
  reserver_ctx = ctx;
  reserve_mark = reserve != nullptr ? mark : UINT64_MAX;
}

void continue_job_serials(uint64_t after) { last_job_serial = std::max(last_job_serial, after); }

using ipc::errc::bad_request;

namespace {

// -C and -e run the command in a subshell of the session: it inherits every kind of state,
// and its own changes (including the cd) do not persist. eval keeps the user's text intact.
std::string subshell_text(std::string_view command, std::string_view cwd, const ipc::str_list& env) {
  std::string t = "(";
  if (!cwd.empty()) t += fmt::format("\\builtin cd -- {} || \\builtin exit 1\n", shell_quote(cwd));
  for (const auto& e : env) t += fmt::format("\\builtin export {}\n", shell_quote(e));
  t += fmt::format("\\builtin eval {}\n)", shell_quote(command));
  return t;
}

constexpr uint64_t kMaxTerminalSide = 10000;

// exec --tty: a terminal of the size asked for, read by sbshd.
status settle_terminal(exec_job& job, const ipc::msg::exec& r) {
  if (!r.tty) {
    if (r.cols != 0 || r.rows != 0) return make_error(bad_request, "fields 'cols' and 'rows' need 'tty'");
    return ok_status();
  }
  if (r.io != "frames")
    return make_error(bad_request, "field 'tty' needs io \"frames\": the terminal is sbshd's, which reads it");
  if (r.cols > kMaxTerminalSide || r.rows > kMaxTerminalSide)
    return make_error(bad_request, fmt::format("fields 'cols' and 'rows' must be between 1 and {} (0: 80 by 24)",
                                               kMaxTerminalSide));
  job.tty = true;
  if (r.cols != 0) job.cols = static_cast<uint16_t>(r.cols);
  if (r.rows != 0) job.rows = static_cast<uint16_t>(r.rows);
  return ok_status();
}

}  // namespace

status settle_dir(exec_job& job, const session_def& def) {
  if (job.cwd_given.empty()) return ok_status();
  auto dir = settle_cwd(job.cwd_given, job.cwd_base, def);
  if (!dir) return dir.err();
  job.text = subshell_text(job.text, *dir, job.env_given);
  job.check_cwd = std::move(*dir);
  job.cwd_given.clear();
  job.cwd_base.clear();
  job.env_given.clear();
  return ok_status();
}

std::string shown_command(std::string_view text) { return shown_command(text, text.size()); }

std::string shown_command(std::string_view start, uint64_t size) {
  if (size <= kShownCommand && start.size() == size) return std::string(start);
  return fmt::format("{} [... {} bytes in all]", ipc::utf8_prefix(start, kShownCommand), size);
}

result<std::unique_ptr<exec_job>> parse_exec(const ipc::envelope& env) {
  auto req = ipc::decode<ipc::msg::exec>(env.msg);
  if (!req) return req.err();
  const auto& r = *req;
  auto job = std::make_unique<exec_job>();
  job->id = env.msg.id();
  if (job->id == 0) return make_error(bad_request, "exec needs a non-zero 'id'");
  job->session = std::string(r.session);
  if (auto s = check_session_name(job->session); !s) return s.err();
  if (r.command.find('\0') != std::string_view::npos)
    return make_error(bad_request, "field 'command' contains a NUL byte, which bash cannot run");
  job->command = shown_command(r.command);
  for (auto e : r.env)
    if (auto s = check_env_entry(e); !s) return s.err();
  if (auto s = check_dir_fields(r.cwd, r.cwd_base); !s) return s.err();
  if (!r.cwd.empty()) {  // where it runs depends on its session (settle_dir)
    job->text = std::string(r.command);
    job->cwd_given = std::string(r.cwd);
    job->cwd_base = std::string(r.cwd_base);
    job->env_given = r.env.to_vector();
  } else {
    job->text = r.env.empty() ? std::string(r.command) : subshell_text(r.command, {}, r.env);
  }
  job->session_cwd = std::string(r.session_cwd);
  if (r.same_env && !r.session_env.empty())
    return make_error(bad_request, "fields 'same_env' and 'session_env' exclude each other: send one");
  if (r.keep_env && r.session_env.empty())
    return make_error(bad_request, "field 'keep_env' needs the environment to keep in 'session_env'");
  // Only when given: most requests name a session that exists, and an environment is large.
  if (!r.session_env.empty()) job->session_env = r.session_env.to_vector();
  job->keep_env = r.keep_env;
  job->same_env = r.same_env;
  job->timeout_ms = r.timeout_ms;
  if (r.grace_ms > 0) job->grace_ms = r.grace_ms;
  if (job->timeout_ms > kMaxTimeoutMs || job->grace_ms > 24ull * 3600 * 1000)
    return make_error(bad_request, "field 'timeout_ms' or 'grace_ms' is unreasonably large");
  if (r.io != "frames" && r.io != "fds")
    return make_error(bad_request, fmt::format(R"(field 'io' must be "frames" or "fds", not "{}")", ipc::printable(r.io, 32)));
  job->io_fds = r.io == "fds";
  job->has_stdin = r.has_stdin || r.interactive;
  job->interactive = r.interactive;
  if (r.interactive && job->io_fds)
    return make_error(bad_request, "field 'interactive' needs io \"frames\": sbshd holds the input pipe");
  if (auto s = settle_terminal(*job, r); !s) return s.err();
  job->notify_started = r.notify_started;
  job->detach_after_ms = r.detach_after_ms;
  job->keep = r.keep || r.detach_after_ms > 0;
  if (job->keep && job->io_fds)
    return make_error(bad_request, "fields 'keep' and 'detach_after_ms' need io \"frames\": sbshd keeps only output "
                                   "it reads itself");
  if (job->detach_after_ms > kMaxTimeoutMs) return make_error(bad_request, "field 'detach_after_ms' is unreasonably large");
  if (job->io_fds) {
    size_t need = 2 + (job->has_stdin ? 1 : 0) + (r.drain ? 2 : 0);
    if (env.fds.size() != need)
      return make_error(bad_request, fmt::format("io \"fds\" with these options needs {} descriptors "
                                                 "(stdout, stderr write ends{}{}), {} arrived",
                                                 need, job->has_stdin ? ", stdin read end" : "",
                                                 r.drain ? ", stdout and stderr read ends" : "", env.fds.size()));
  } else if (!env.fds.empty()) {
    return make_error(bad_request, "descriptors were sent with an exec whose io is \"frames\"");
  }
  return job;
}

command_result result_of(const exec_job& job, uint64_t duration_us) {
  command_result r;
  r.outcome = job.outcome;
  r.ran = job.ran();
  r.duration_us = duration_us;
  r.generation = job.generation;
  r.state_lost = job.state_lost;
  r.state_lost_why = job.state_lost_why;
  r.started_at_ms = job.started_at_ms;
  if (job.screen) r.screen = job.screen->text();
  return r;
}

std::string done_frame(const command_result& r, bool release, uint64_t id) {
  const auto& o = r.outcome;
  ipc::msg::exec_done d;
  d.exit_code = o.exit_code;
  d.signal = o.signal;
  d.timed_out = o.timed_out;
  d.cancelled = o.cancelled;
  d.shell_restarted = o.shell_restarted;
  d.ran = r.ran;
  d.duration_us = r.duration_us;
  d.generation = r.generation;
  d.state_lost = r.state_lost;
  d.oom_killed = o.oom_killed;
  d.release = release;
  if (r.ran) d.started_at_ms = r.started_at_ms;  // null for a command that never started
  d.state_lost_reason = r.state_lost_why;
  d.error_code = o.error_code;
  d.error = o.error;
  d.session = r.session;
  d.command = r.command;
  d.screen = r.screen;
  d.stdout_bytes = r.bytes[0];
  d.stderr_bytes = r.bytes[1];
  return ipc::encode(d, id);
}

std::string done_frame(const exec_job& job, uint64_t duration_us) {
  return done_frame(result_of(job, duration_us), job.wants_release, job.id);
}

}  // namespace sbsh::daemon
