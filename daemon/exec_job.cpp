// Parsing and validating exec requests, and the shape of their results.
#include "daemon/exec_job.h"

#include <signal.h>
#include <string.h>
#include <time.h>

#include <fmt/format.h>

#include "daemon/uv_handles.h"
#include "ipc/shell_channel.h"
#include "ipc/text.h"

namespace sbsh::daemon {

using ipc::err::bad_request;

bool valid_session_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(name[0])) return false;
  for (char c : name.substr(1))
    if (!alnum(c) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

status check_session_name(std::string_view name) {
  if (valid_session_name(name)) return ok_status();
  return make_error(ipc::err::invalid_session,
                    fmt::format("invalid session name '{}': a name is 1 to 64 characters, letters, "
                                "digits, '.', '_' or '-', and starts with a letter or digit "
                                "(^[A-Za-z0-9][A-Za-z0-9._-]{{0,63}}$)",
                                name));
}


namespace {

bool valid_env_name(std::string_view n) {
  if (n.empty()) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    char c = n[i];
    bool ok = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// -C and -e run the command in a subshell of the session: it inherits every kind of state,
// and its own changes (including the cd) do not persist. eval keeps the user's text intact.
std::string subshell_text(std::string_view command, std::string_view cwd,
                          const std::vector<std::string>& env) {
  std::string t = "(";
  if (!cwd.empty()) t += fmt::format("\\builtin cd -- {} || \\builtin exit 1\n", shell_quote(cwd));
  for (const auto& e : env) t += fmt::format("\\builtin export {}\n", shell_quote(e));
  t += fmt::format("\\builtin eval {}\n)", shell_quote(command));
  return t;
}

}  // namespace

int parse_signal_field(const ipc::message& m, int absent, std::string* err) {
  const auto* o = m.find("signal");
  if (o == nullptr || o->type == msgpack::type::NIL) return absent;
  if (auto n = m.get_i64("signal"); n && n.value()) {
    if (*n.value() <= 0 || *n.value() >= NSIG) *err = fmt::format("signal {} is out of range", *n.value());
    return static_cast<int>(*n.value());
  }
  auto name = m.get_str("signal");
  if (!name || !name.value()) {
    *err = "field 'signal' must be a signal number or name";
    return absent;
  }
  auto sig = ipc::signal_from_name(*name.value());
  if (!sig) *err = fmt::format("unknown signal '{}': use a name such as TERM, KILL, INT or a number", *name.value());
  return sig.value_or(absent);
}

status check_env_entry(std::string_view e) {
  auto eq = e.find('=');
  if (eq == std::string_view::npos || !valid_env_name(e.substr(0, eq)))
    return make_error(bad_request, fmt::format("environment entry '{}' must be NAME=VALUE with a NAME of "
                                               "letters, digits and '_' not starting with a digit",
                                               e));
  if (e.find('\0') != std::string_view::npos)
    return make_error(bad_request, "an environment entry contains a NUL byte");
  return ok_status();
}

result<std::unique_ptr<exec_job>> parse_exec(const ipc::envelope& env) {
  const auto& m = env.msg;
  auto job = std::make_unique<exec_job>();
  job->id = m.id();
  if (job->id == 0) return make_error(bad_request, "exec needs a non-zero 'id'");

  auto session = m.get_str("session");
  if (!session) return session.err();
  job->session = std::string(session.value().value_or("default"));
  if (auto s = check_session_name(job->session); !s) return s.err();

  auto command = m.get_str("command");
  if (!command) return command.err();
  if (!command.value()) return make_error(bad_request, "exec needs a 'command' string");
  job->command = std::string(*command.value());
  if (job->command.find('\0') != std::string::npos)
    return make_error(bad_request, "field 'command' contains a NUL byte, which bash cannot run");

  auto cwd = m.get_str("cwd");
  if (!cwd) return cwd.err();
  auto envs = m.get_str_array("env");
  if (!envs) return envs.err();
  std::vector<std::string> env_list;
  for (auto e : envs.value().value_or(std::vector<std::string_view>{})) {
    if (auto s = check_env_entry(e); !s) return s.err();
    env_list.emplace_back(e);
  }
  std::string_view cwd_v = cwd.value().value_or("");
  if (cwd_v.find('\0') != std::string_view::npos)
    return make_error(bad_request, "field 'cwd' contains a NUL byte");
  job->text = (cwd_v.empty() && env_list.empty()) ? job->command
                                                  : subshell_text(job->command, cwd_v, env_list);
  if (!cwd_v.empty() && cwd_v[0] != '/')
    return make_error(bad_request, fmt::format("field 'cwd' must be an absolute directory, not '{}'", cwd_v));
  if (cwd_v.size() > SBSH_CHANNEL_MAX_CWD)
    return make_error(bad_request, fmt::format("field 'cwd' is longer than {} bytes", SBSH_CHANNEL_MAX_CWD));
  job->check_cwd = std::string(cwd_v);

  auto scwd = m.get_str("session_cwd");
  if (!scwd) return scwd.err();
  job->session_cwd = std::string(scwd.value().value_or(""));

  auto timeout = m.get_u64("timeout_ms");
  if (!timeout) return timeout.err();
  job->timeout_ms = timeout.value().value_or(0);
  auto grace = m.get_u64("grace_ms");
  if (!grace) return grace.err();
  if (grace.value() && *grace.value() > 0) job->grace_ms = *grace.value();
  if (job->timeout_ms > 100ull * 365 * 24 * 3600 * 1000 || job->grace_ms > 24ull * 3600 * 1000)
    return make_error(bad_request, "field 'timeout_ms' or 'grace_ms' is unreasonably large");

  auto io = m.get_str("io");
  if (!io) return io.err();
  std::string_view io_v = io.value().value_or("frames");
  if (io_v != "frames" && io_v != "fds")
    return make_error(bad_request, fmt::format("field 'io' must be \"frames\" or \"fds\", not \"{}\"", io_v));
  job->io_fds = io_v == "fds";
  auto has_stdin = m.get_bool("stdin");
  if (!has_stdin) return has_stdin.err();
  job->has_stdin = has_stdin.value().value_or(false);

  if (job->io_fds) {
    auto drain = m.get_bool("drain");
    if (!drain) return drain.err();
    bool want_drain = drain.value().value_or(false);
    size_t need = 2 + (job->has_stdin ? 1 : 0) + (want_drain ? 2 : 0);
    if (env.fds.size() != need)
      return make_error(bad_request, fmt::format("io \"fds\" with these options needs {} descriptors "
                                                 "(stdout, stderr write ends{}{}), {} arrived",
                                                 need, job->has_stdin ? ", stdin read end" : "",
                                                 want_drain ? ", stdout and stderr read ends" : "",
                                                 env.fds.size()));
  } else if (!env.fds.empty()) {
    return make_error(bad_request, "descriptors were sent with an exec whose io is \"frames\"");
  }
  return job;
}

std::string done_frame(const exec_job& job, uint64_t duration_us) {
  const auto& o = job.outcome;
  ipc::frame_builder f(ipc::msg_type::exec_done, job.id);
  if (o.exit_code) f.i64("exit_code", *o.exit_code);
  else f.nil("exit_code");
  if (o.signal) {
    f.i64("signal", *o.signal);
    f.str("signal_name", ipc::signal_name(*o.signal));
  } else {
    f.nil("signal");
  }
  f.boolean("timed_out", o.timed_out)
      .boolean("cancelled", o.cancelled)
      .boolean("shell_restarted", o.shell_restarted)
      .boolean("ran", job.ran())
      .u64("duration_us", duration_us)
      .u64("generation", job.generation)
      .boolean("state_lost", job.state_lost)
      .boolean("release", job.wants_release);
  if (job.started) f.i64("started_at_ms", job.started_at_ms);
  else f.nil("started_at_ms");
  if (job.state_lost) f.str("state_lost_reason", job.state_lost_why);
  if (!o.error.empty()) f.str("error_code", o.error_code).str("error", o.error);
  return f.take();
}

}  // namespace sbsh::daemon
