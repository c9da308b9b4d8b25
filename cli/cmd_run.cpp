// sbsh run: run a plan (staged commands in one fresh session) and write its report and
// events. The work is libsbsh's run_plan (plans/plan_run.cpp); this maps the command line
// to its options, prints progress on stderr, and exits with the run's status.
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "cli/cli.h"
#include "ipc/text.h"
#include "sbsh/plan.h"

namespace sbsh::cli {

namespace {

struct run_args {
  std::string plan, report, events;
  bool quiet = false;
  uint64_t output_limit = client::run_options{}.output_limit;
  client::run_options opts;
};

// Progress for a person watching: one line per stage and per finished command, on stderr.
void print_progress(const client::run_event& e) {
  const auto& r = e.report;
  if (e.name == "stage_started") {
    const auto& st = r.stages[static_cast<size_t>(e.stage)];
    std::fprintf(stderr, "sbsh: stage %s%s\n", displayable(st.name, false).c_str(),
                 st.expect == client::expectation::failure ? " (expected to fail)" : "");
  } else if (e.name == "command_finished") {
    const auto& c = r.stages[static_cast<size_t>(e.stage)].commands[static_cast<size_t>(e.command)];
    std::string result(client::name_of(c.status));
    if (c.timed_out) result += ", timed out";
    else if (c.signal) result += ", " + ipc::signal_name(*c.signal);
    else if (c.exit_code && *c.exit_code != 0) result += fmt::format(", exit status {}", *c.exit_code);
    std::string first = displayable(c.command.substr(0, c.command.find('\n')), false);
    std::fprintf(stderr, "sbsh:   %s: %s (%llu ms)\n", first.c_str(), result.c_str(),
                 static_cast<unsigned long long>(c.duration_ms));
  } else if (e.name == "plan_finished") {
    std::string line = fmt::format("sbsh: run {} in {} ms", client::name_of(r.status), r.duration_ms);
    if (r.reason) line += ": " + r.reason->message;
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

int run_run(const global_opts& g, run_args& r) {
  if (r.plan.empty()) return fail("run needs a plan file, e.g. sbsh run ci.yaml ('-' reads it from stdin)");
  if (r.report == "-" && r.events == "-")
    return fail("--report - and --events - would both write to stdout: send one to a file");
  r.opts.output_limit = static_cast<size_t>(r.output_limit);
  auto plan = client::load_plan(r.plan);
  if (!plan) return fail(plan.err().message);
  if (r.events == "-") r.opts.events_fd = 1;
  else r.opts.events_path = r.events;
  if (r.report != "-") r.opts.report_path = r.report;
  // Without a report file, the report goes to stdout, unless the events are there.
  bool report_to_stdout = r.report == "-" || (r.report.empty() && r.events != "-");
  // Ctrl-C, SIGTERM, SIGHUP and SIGQUIT become bytes on this pipe: each cancels the run.
  r.opts.cancel_fd = forward_signals_to_command();

  auto conn = connect(g);
  if (!conn) return fail(conn.err().message);
  auto progress = r.quiet ? std::function<void(const client::run_event&)>() : print_progress;
  auto rep = client::run_plan(*conn, *plan, r.opts, progress);
  if (!rep) return fail(rep.err().message);
  if (report_to_stdout) {
    std::string doc = client::report_json(*rep) + "\n";
    std::fwrite(doc.data(), 1, doc.size(), stdout);
    std::fflush(stdout);
  }
  if (rep->session_kept)
    std::fprintf(stderr, "sbsh: kept session %s ('sbsh session rm %s' removes it)\n", rep->session.c_str(),
                 rep->session.c_str());
  if (rep->error) fail(rep->error->message);
  return client::exit_status(*rep);
}

}  // namespace

runner declare_run(command_line& cl) {
  auto r = std::make_shared<run_args>();
  cl.describe(
      "Runs the stages of PLAN (a JSON or YAML file; - reads stdin) in order in one new session, so state "
      "carries from command to command, and stops at the first stage that does not meet its expectation "
      "(expect: success, the default, or failure); later stages are skipped. The session is removed at the "
      "end. Ctrl-C or SIGTERM stops the running command and cancels the run; the report is still written. "
      "Progress goes to stderr. See sbsh(1), PLANS.");
  cl.option("--report", "FILE|-",
            "write the report (JSON) there when the run ends; default: stdout, unless the "
            "events go there",
            r->report, check_not_empty("a file, or - for stdout"));
  cl.option("--events", "FILE|-", "write the events there as they happen, one JSON object per line", r->events,
            check_not_empty("a file, or - for stdout"));
  cl.option("--artifacts", "DIR",
            "write each command's whole stdout and stderr to DIR/STAGE/N.stdout and .stderr "
            "(N from 0)",
            r->opts.artifacts_dir, check_not_empty("a directory"));
  cl.number("--output-limit", "N", "keep at most N bytes of each stream in the report (default 1048576)",
            r->output_limit, "a number of bytes", 0, std::numeric_limits<size_t>::max());
  cl.flag("--keep-session", "leave the session for inspection; its name is printed on stderr", r->opts.keep_session);
  cl.option("-s,--session", "NAME", "name the session (it must not exist; default run-PID-N)", r->opts.session,
            check_session_name);
  cl.flag("-q,--quiet", "no progress on stderr", r->quiet);
  cl.argument("PLAN", r->plan);
  cl.complete(value_kind::file, {"json", "yaml", "yml"});
  cl.footer(
      "Exit status: 0 when every stage met its expectation, 1 when one did not, 130 when cancelled, 255 for an "
      "invalid plan or a failure of sbsh itself.");
  return [r](const global_opts& g) { return run_run(g, *r); };
}

}  // namespace sbsh::cli
