// sbsh exec: run one command in a session, streaming its output, and exit with its status.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "client/cli/cli.h"
#include "client/json.h"
#include "ipc/text.h"

namespace sbsh::cli {

namespace {

void print_json(const client::exec_options& o, const client::exec_result& r) {
  client::json_object j;
  j.str("session", o.session.empty() ? "default" : o.session).str("command", o.command);
  j.opt_num("exit_code", r.exit_code);
  j.signal("signal", r.signal).boolean("timed_out", r.timed_out).boolean("shell_restarted", r.shell_restarted).boolean("cancelled", r.cancelled);
  j.boolean("ran", r.ran);
  j.num("generation", static_cast<int64_t>(r.generation)).boolean("state_lost", r.state_lost);
  if (r.state_lost) j.str("state_lost_reason", r.state_lost_reason);
  bool out_ok, err_ok;
  std::string out = client::utf8_repair(r.stdout_data, &out_ok);
  std::string err = client::utf8_repair(r.stderr_data, &err_ok);
  j.str("stdout", out).str("stderr", err);
  if (!out_ok) j.str("stdout_base64", client::base64(r.stdout_data));
  if (!err_ok) j.str("stderr_base64", client::base64(r.stderr_data));
  j.boolean("stdout_truncated", r.stdout_truncated).boolean("stderr_truncated", r.stderr_truncated);
  j.num("duration_ms", static_cast<int64_t>(r.duration_us / 1000));
  if (r.started_at_ms > 0) j.str("started_at", client::rfc3339_ms(r.started_at_ms));
  else j.null("started_at");
  if (!r.error.empty()) j.str("error", r.error);
  std::string s = j.finish() + "\n";
  std::fwrite(s.data(), 1, s.size(), stdout);
}

int exit_status(const client::exec_result& r) {
  if (r.timed_out) return kExitTimeout;
  if (r.exit_code) return *r.exit_code;
  return kExitFailure;
}

}  // namespace

int cmd_exec(const global_opts& g, const args& a) {
  client::exec_options o;
  bool json = false;
  size_t i = 0;
  std::string err;
  for (; i < a.size(); ++i) {
    std::string_view v;
    if (a[i] == "--") {
      ++i;
      break;
    }
    if (a[i] == "-h" || a[i] == "--help") return print_usage(*find_command("exec"));
    if (a[i] == "--json") {
      json = true;
    } else if (take_option(a, i, "-s", "--session", &v, &err)) {
      if (v.empty() && err.empty()) err = "invalid session name '': a name is 1 to 64 characters, letters, digits, '.', '_' or '-', and starts with a letter or digit (^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$)";
      o.session = std::string(v);
    } else if (take_option(a, i, "-C", "--cwd", &v, &err)) {
      o.cwd = std::string(v);
      if (o.cwd.empty()) err = "option -C needs a directory";
    } else if (take_option(a, i, "-e", "--env", &v, &err)) {
      if (v.find('=') == std::string_view::npos || v.front() == '=')
        err = fmt::format("option -e takes NAME=VALUE, not '{}'", v);
      o.env.emplace_back(v);
    } else if (take_option(a, i, "-t", "--timeout", &v, &err)) {
      auto d = client::parse_duration(v);
      if (!d) return fail(d.err().message);
      if (d->count() == 0) return fail("a timeout of zero would stop the command at once; omit -t for none");
      o.timeout = *d;
    } else if (take_option(a, i, "", "--output-limit", &v, &err)) {
      char* end = nullptr;
      std::string s(v);
      unsigned long long n = std::strtoull(s.c_str(), &end, 10);
      if (s.empty() || *end != '\0') err = fmt::format("--output-limit takes a number of bytes, not '{}'", v);
      o.output_limit = static_cast<size_t>(n);
    } else if (!a[i].empty() && a[i][0] == '-' && a[i] != "-") {
      return fail(fmt::format("unknown option '{}' for exec; put '--' before a command that starts with '-'", a[i]));
    } else {
      break;
    }
    if (!err.empty()) return fail(err);
  }
  if (i >= a.size()) return fail("exec needs a command, e.g. sbsh exec -s build 'make test'");
  for (size_t k = i; k < a.size(); ++k) {
    if (k > i) o.command += ' ';
    o.command.append(a[k]);
  }
  // Forward stdin when it is not a terminal, as ssh does; otherwise the command gets /dev/null.
  if (::fcntl(0, F_GETFD) != -1 && ::isatty(0) == 0) o.stdin_fd = 0;
  if (!json) {
    o.stdout_fd = 1;
    o.stderr_fd = 2;
  }
  o.signal_fd = forward_signals_to_command();

  auto conn = connect(g, true);
  if (!conn) return fail(conn.err().message);
  // The library takes a relative directory from this one; on a far host that means nothing.
  if (conn->remote() && !o.cwd.empty() && o.cwd[0] != '/')
    return fail(fmt::format("-C {}: give an absolute path; this directory is on the far host, where this one's "
                            "current directory means nothing",
                            o.cwd));
  auto r = conn->exec(o);
  if (!r) return fail(r.err().message);
  if (r->state_lost)
    std::fprintf(stderr, "sbsh: warning: session '%s' lost its state before this command (%s); it ran in a new shell\n",
                 o.session.empty() ? "default" : o.session.c_str(), r->state_lost_reason.c_str());
  if (json) {
    print_json(o, *r);
  } else {
    std::fflush(stdout);
    if (r->shell_restarted) {
      fail(r->error.empty() ? fmt::format("the shell of session '{}' ended while running the command; the "
                                          "session's state (directory, variables, functions) was lost",
                                          o.session.empty() ? "default" : o.session)
                            : r->error);
    } else if (!r->exit_code && !r->error.empty()) {
      fail(r->error);
    }
    if (r->timed_out) fail(fmt::format("timed out after {} ms; the command was stopped", o.timeout.count()));
  }
  return exit_status(*r);
}

}  // namespace sbsh::cli
