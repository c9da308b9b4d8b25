// sbsh run: run a plan (staged commands in one fresh session) and write its report and
// events. The work is libsbsh's run_plan (client/plan_run.cpp); this maps the command line
// to its options, prints progress on stderr, and exits with the run's status.
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "client/cli/cli.h"
#include "ipc/text.h"
#include "sbsh/plan.h"

namespace sbsh::cli {

namespace {

struct run_args {
  std::string plan, report, events;
  bool quiet = false;
  client::run_options opts;
};

// Returns "" when the arguments are good, else what is wrong.
std::string parse_args(const args& a, run_args& r, bool* help) {
  std::string err;
  for (size_t i = 0; i < a.size(); ++i) {
    std::string_view v;
    if (a[i] == "-h" || a[i] == "--help") {
      *help = true;
      return "";
    }
    if (a[i] == "--keep-session") {
      r.opts.keep_session = true;
    } else if (a[i] == "-q" || a[i] == "--quiet") {
      r.quiet = true;
    } else if (take_option(a, i, "", "--report", &v, &err)) {
      r.report = std::string(v);
      if (v.empty() && err.empty()) err = "option --report needs a file, or - for stdout";
    } else if (take_option(a, i, "", "--events", &v, &err)) {
      r.events = std::string(v);
      if (v.empty() && err.empty()) err = "option --events needs a file, or - for stdout";
    } else if (take_option(a, i, "", "--artifacts", &v, &err)) {
      r.opts.artifacts_dir = std::string(v);
      if (v.empty() && err.empty()) err = "option --artifacts needs a directory";
    } else if (take_option(a, i, "-s", "--session", &v, &err)) {
      r.opts.session = std::string(v);
      if (v.empty() && err.empty()) err = "option --session needs a name";
    } else if (take_option(a, i, "", "--output-limit", &v, &err)) {
      std::string s(v);
      char* end = nullptr;
      unsigned long long n = std::strtoull(s.c_str(), &end, 10);
      if (s.empty() || s[0] == '-' || *end != '\0') err = fmt::format("--output-limit takes a number of bytes, not '{}'", v);
      r.opts.output_limit = static_cast<size_t>(n);
    } else if (a[i].size() > 1 && a[i][0] == '-') {
      return fmt::format("unknown option '{}' for run", a[i]);
    } else if (r.plan.empty()) {
      r.plan = std::string(a[i]);
    } else {
      return fmt::format("run takes one plan, not also '{}'", a[i]);
    }
    if (!err.empty()) return err;
  }
  if (r.plan.empty()) return "run needs a plan file, e.g. sbsh run ci.yaml ('-' reads it from stdin)";
  if (r.report == "-" && r.events == "-") return "--report - and --events - would both write to stdout: send one to a file";
  return "";
}

// Progress for a person watching: one line per stage and per finished command, on stderr.
void print_progress(const client::run_event& e) {
  const auto& r = e.report;
  if (e.name == "stage_started") {
    const auto& st = r.stages[static_cast<size_t>(e.stage)];
    std::fprintf(stderr, "sbsh: stage %s%s\n", st.name.c_str(),
                 st.expect == client::expectation::failure ? " (expected to fail)" : "");
  } else if (e.name == "command_finished") {
    const auto& c = r.stages[static_cast<size_t>(e.stage)].commands[static_cast<size_t>(e.command)];
    std::string result(client::name_of(c.status));
    if (c.timed_out) result += ", timed out";
    else if (c.signal) result += ", " + ipc::signal_name(*c.signal);
    else if (c.exit_code && *c.exit_code != 0) result += fmt::format(", exit status {}", *c.exit_code);
    std::string first = c.command.substr(0, c.command.find('\n'));
    std::fprintf(stderr, "sbsh:   %s: %s (%llu ms)\n", first.c_str(), result.c_str(),
                 static_cast<unsigned long long>(c.duration_ms));
  } else if (e.name == "plan_finished") {
    std::string line = fmt::format("sbsh: run {} in {} ms", client::name_of(r.status), r.duration_ms);
    if (r.reason) line += ": " + r.reason->message;
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

}  // namespace

int cmd_run(const global_opts& g, const args& a) {
  run_args r;
  bool help = false;
  if (std::string err = parse_args(a, r, &help); !err.empty()) return fail(err);
  if (help) return print_usage(*find_command("run"));
  auto plan = client::load_plan(r.plan);
  if (!plan) return fail(plan.err().message);
  if (r.events == "-") r.opts.events_fd = 1;
  else r.opts.events_path = r.events;
  if (r.report != "-") r.opts.report_path = r.report;
  // Without a report file, the report goes to stdout, unless the events are there.
  bool report_to_stdout = r.report == "-" || (r.report.empty() && r.events != "-");
  // Ctrl-C, SIGTERM, SIGHUP and SIGQUIT become bytes on this pipe: each cancels the run.
  r.opts.cancel_fd = forward_signals_to_command();

  auto conn = connect(g, true);
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

}  // namespace sbsh::cli
