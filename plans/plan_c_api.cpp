// The C ABI's plan entry points (sbsh.h: sbsh_plan_check, sbsh_run_plan, sbsh_run_plan_file):
// a plan's text or file, parsed and run by the C++ API of sbsh/plan.h.
#include <cstring>
#include <functional>
#include <string>
#include <string_view>

#include "client/c_api.h"
#include "ipc/protocol.h"
#include "sbsh/plan.h"
#include "sbsh/sbsh.h"

using namespace sbsh::c_abi;

namespace {

// What makes a plan, its files or the arguments unusable is the caller's to fix: SBSH_ERR_INVALID.
int plan_failure(sbsh_conn* conn, const sbsh::error& e) {
  using sbsh::ipc::errc;
  auto known = sbsh::ipc::errc_from_name(e.code);
  if (known == errc::invalid_plan || known == errc::file || known == errc::usage || known == errc::invalid_argument)
    return record(conn, SBSH_ERR_INVALID, e.code, e.message);
  return fail(conn, e);
}

// The plan in the len bytes at text; format NULL (detect), "json" or "yaml".
sbsh::result<sbsh::client::plan> plan_from_text(const char* text, size_t len, const char* format, const char* fn) {
  std::string_view f = format != nullptr ? format : "";
  sbsh::client::plan_format pf = sbsh::client::plan_format::detect;
  if (f == "json") pf = sbsh::client::plan_format::json;
  else if (f == "yaml") pf = sbsh::client::plan_format::yaml;
  else if (!f.empty())
    return sbsh::ipc::make_error(sbsh::ipc::errc::invalid_argument,
                                 std::string(fn) + R"(: format must be NULL, "json" or "yaml")");
  if (text == nullptr && len > 0)
    return sbsh::ipc::make_error(sbsh::ipc::errc::invalid_argument,
                                 std::string(fn) + ": the plan is NULL but its length is not 0");
  return sbsh::client::parse_plan(std::string_view(text != nullptr ? text : "", len), pf);
}

int run_parsed(sbsh_conn* conn, sbsh::result<sbsh::client::plan> plan, const sbsh_run_opts* opts,
               char** report_json, int* exit_status) {
  if (!plan) return plan_failure(conn, plan.err());
  sbsh::client::run_options o;
  o.session = str_or_empty(opts->session);
  o.keep_session = opts->keep_session != 0;
  if (opts->output_limit > 0) o.output_limit = opts->output_limit;
  o.artifacts_dir = str_or_empty(opts->artifacts_dir);
  o.report_path = str_or_empty(opts->report_path);
  o.events_path = str_or_empty(opts->events_path);
  o.events_fd = opts->events_fd < 0 ? -1 : opts->events_fd;
  o.cancel_fd = opts->cancel_fd < 0 ? -1 : opts->cancel_fd;
  std::function<void(const sbsh::client::run_event&)> cb;
  if (opts->on_event != nullptr)
    cb = [fn = opts->on_event, user = opts->user](const sbsh::client::run_event& e) { fn(user, e.json.data(), e.json.size()); };
  auto r = sbsh::client::run_plan(conn->c, *plan, o, cb);
  if (!r) return plan_failure(conn, r.err());
  // A run that lost its connection leaves it out of step, as a failed request would.
  if (r->error && breaks_connection(r->error->code))
    conn->broken = "this connection failed earlier (" + r->error->message + "); close it and connect again";
  if (report_json != nullptr) *report_json = malloc_copy(sbsh::client::report_json(*r));
  if (exit_status != nullptr) *exit_status = sbsh::client::exit_status(*r);
  return SBSH_OK;
}

int check_run_opts(sbsh_conn* conn, const sbsh_run_opts* opts, const char* fn) {
  if (opts == nullptr) return invalid(conn, std::string(fn) + ": opts is NULL");
  if (opts->version != SBSH_RUN_OPTS_VERSION)
    return invalid(conn, std::string(fn) + ": opts.version is " + std::to_string(opts->version) +
                             "; initialize the options with sbsh_run_opts_init()");
  return SBSH_OK;
}

}  // namespace

extern "C" {

void sbsh_run_opts_init(sbsh_run_opts* opts) {
  if (opts == nullptr) return;
  std::memset(opts, 0, sizeof *opts);
  opts->version = SBSH_RUN_OPTS_VERSION;
  opts->events_fd = -1;
  opts->cancel_fd = -1;
}

int sbsh_plan_check(const char* plan, size_t plan_len, const char* format) {
  return guarded_no_conn([&]() -> int {
    auto p = plan_from_text(plan, plan_len, format, "sbsh_plan_check");
    return p ? SBSH_OK : plan_failure(nullptr, p.err());
  });
}

int sbsh_run_plan(sbsh_conn* conn, const char* plan, size_t plan_len, const char* format, const sbsh_run_opts* opts,
                  char** report_json, int* exit_status) {
  return guarded(conn, [&]() -> int {
    if (int s = check_run_opts(conn, opts, "sbsh_run_plan"); s != SBSH_OK) return s;
    return run_parsed(conn, plan_from_text(plan, plan_len, format, "sbsh_run_plan"), opts, report_json, exit_status);
  });
}

int sbsh_run_plan_file(sbsh_conn* conn, const char* path, const sbsh_run_opts* opts, char** report_json,
                       int* exit_status) {
  return guarded(conn, [&]() -> int {
    if (int s = check_run_opts(conn, opts, "sbsh_run_plan_file"); s != SBSH_OK) return s;
    if (path == nullptr) return invalid(conn, "sbsh_run_plan_file: path is NULL");
    return run_parsed(conn, sbsh::client::load_plan(path), opts, report_json, exit_status);
  });
}

}  // extern "C"
