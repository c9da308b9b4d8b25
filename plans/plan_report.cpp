// The two JSON documents of a run: the report (report_json) and the events of the event log
// (event_json). Their fields are documented in sbsh(1), REPORT and EVENTS, and stay stable:
// fields may be added, none changes its meaning. Every field is always present (null when it
// does not apply), so that a consumer never has to ask whether a key exists.
#include <string>

#include "client/json.h"
#include "plans/plan_json.h"
#include "ipc/text.h"

namespace sbsh::client {

namespace {

// The version of the report's format, bumped only if a field had to change its meaning.
constexpr int kReportVersion = 1;

plan_json env_object(const std::vector<std::string>& env) {
  plan_json o = plan_json::object();
  for (const auto& e : env) {
    auto eq = e.find('=');
    o[e.substr(0, eq)] = eq == std::string::npos ? std::string() : e.substr(eq + 1);
  }
  return o;
}

// Output as text, and its exact bytes in base64 when it is not valid UTF-8 (as exec --json).
void output_fields(plan_json& o, std::string_view key, const std::string& data) {
  bool valid = true;
  o[key] = utf8_repair(data, &valid);
  o[std::string(key) + "_base64"] = valid ? plan_json(nullptr) : plan_json(base64(data));
}

// What a command was asked to do: the fields of command_started, and the start of each
// command in the report and in command_finished.
void command_request(plan_json& o, const command_report& c) {
  o["command"] = c.command;
  o["cwd"] = text_or_null(c.cwd);
  o["env"] = env_object(c.env);
  o["timeout_ms"] = c.timeout.count() > 0 ? plan_json(c.timeout.count()) : plan_json(nullptr);
}

void command_result(plan_json& o, const command_report& c, bool with_output) {
  bool started = c.started_at_ms > 0;
  o["status"] = name_of(c.status);
  o["exit_code"] = c.exit_code ? plan_json(*c.exit_code) : plan_json(nullptr);
  o["signal"] = c.signal ? plan_json(ipc::signal_name(*c.signal)) : plan_json(nullptr);
  o["timed_out"] = c.timed_out;
  o["shell_restarted"] = c.shell_restarted;
  if (with_output) {
    output_fields(o, "stdout", c.stdout_data);
    output_fields(o, "stderr", c.stderr_data);
  }
  o["stdout_truncated"] = c.stdout_truncated;
  o["stderr_truncated"] = c.stderr_truncated;
  o["stdout_bytes"] = c.stdout_bytes;
  o["stderr_bytes"] = c.stderr_bytes;
  o["stdout_file"] = text_or_null(c.stdout_file);
  o["stderr_file"] = text_or_null(c.stderr_file);
  o["duration_ms"] = started ? plan_json(c.duration_ms) : plan_json(nullptr);
  o["started_at"] = time_or_null(c.started_at_ms);
  o["error"] = text_or_null(c.error);
}

plan_json reason_json(const run_report& r) {
  if (!r.reason) return nullptr;
  const auto& why = *r.reason;
  bool has_stage = why.stage >= 0 && static_cast<size_t>(why.stage) < r.stages.size();
  plan_json o = plan_json::object();
  o["stage"] = has_stage ? plan_json(r.stages[static_cast<size_t>(why.stage)].name) : plan_json(nullptr);
  o["command"] = has_stage && why.command >= 0 ? plan_json(why.command) : plan_json(nullptr);
  o["message"] = why.message;
  return o;
}

plan_json error_json(const run_report& r) { return r.error ? plan_json(r.error->message) : plan_json(nullptr); }

// The fields that open every event.
plan_json event_head(std::string_view name, int64_t now_ms) {
  plan_json o = plan_json::object();
  o["event"] = name;
  o["time"] = rfc3339_ms(now_ms);
  return o;
}

void stage_fields(plan_json& o, const run_report& r, int stage) {
  o["stage"] = r.stages[static_cast<size_t>(stage)].name;
  o["stage_index"] = stage;
}

}  // namespace

std::string_view name_of(expectation e) { return e == expectation::success ? "success" : "failure"; }

std::string_view name_of(run_status s) {
  switch (s) {
    case run_status::passed: return "passed";
    case run_status::failed: return "failed";
    case run_status::cancelled: return "cancelled";
  }
  return "failed";
}

std::string_view name_of(stage_status s) {
  switch (s) {
    case stage_status::passed: return "passed";
    case stage_status::failed: return "failed";
    case stage_status::skipped: return "skipped";
    case stage_status::cancelled: return "cancelled";
  }
  return "failed";
}

std::string_view name_of(command_status s) {
  switch (s) {
    case command_status::succeeded: return "succeeded";
    case command_status::failed: return "failed";
    case command_status::cancelled: return "cancelled";
    case command_status::not_run: return "not_run";
    case command_status::skipped: return "skipped";
  }
  return "failed";
}

std::string report_json(const run_report& r) {
  plan_json o = plan_json::object();
  o["version"] = kReportVersion;
  o["status"] = name_of(r.status);
  o["reason"] = reason_json(r);
  o["error"] = error_json(r);
  o["session"] = r.session;
  o["session_kept"] = r.session_kept;
  o["started_at"] = time_or_null(r.started_at_ms);
  o["duration_ms"] = r.duration_ms;
  plan_json stages = plan_json::array();
  for (const auto& s : r.stages) {
    plan_json st = plan_json::object();
    st["name"] = s.name;
    st["expect"] = name_of(s.expect);
    st["status"] = name_of(s.status);
    plan_json cmds = plan_json::array();
    for (const auto& c : s.commands) {
      plan_json co = plan_json::object();
      command_request(co, c);
      command_result(co, c, true);
      cmds.push_back(std::move(co));
    }
    st["commands"] = std::move(cmds);
    stages.push_back(std::move(st));
  }
  o["stages"] = std::move(stages);
  return dump_json(o);
}

int exit_status(const run_report& r) {
  // A cancel wins: Ctrl-C at a terminal also ends a reader of the event log (`sbsh run
  // --events - | jq`), and the run is no less cancelled for the failed write that follows.
  if (r.status == run_status::cancelled) return 130;
  if (r.error) return 255;
  return r.status == run_status::passed ? 0 : 1;
}

std::string event_json(std::string_view name, int stage, int command, const run_report& r, int64_t now_ms) {
  plan_json o = event_head(name, now_ms);
  if (name == "plan_started") {
    o["session"] = r.session;
    plan_json stages = plan_json::array();
    for (const auto& s : r.stages)
      stages.push_back({{"name", s.name}, {"expect", name_of(s.expect)}, {"commands", s.commands.size()}});
    o["stages"] = std::move(stages);
  } else if (name == "stage_started" || name == "stage_finished") {
    stage_fields(o, r, stage);
    const auto& s = r.stages[static_cast<size_t>(stage)];
    if (name == "stage_started") o["expect"] = name_of(s.expect);
    else o["status"] = name_of(s.status);
  } else if (name == "command_started" || name == "command_finished") {
    stage_fields(o, r, stage);
    o["index"] = command;
    const auto& c = r.stages[static_cast<size_t>(stage)].commands[static_cast<size_t>(command)];
    command_request(o, c);
    if (name == "command_finished") command_result(o, c, false);
  } else if (name == "plan_finished") {
    o["status"] = name_of(r.status);
    o["reason"] = reason_json(r);
    o["error"] = error_json(r);
    o["session"] = r.session;
    o["session_kept"] = r.session_kept;
    o["duration_ms"] = r.duration_ms;
    plan_json stages = plan_json::array();
    for (const auto& s : r.stages) stages.push_back({{"name", s.name}, {"status", name_of(s.status)}});
    o["stages"] = std::move(stages);
  }
  return dump_json(o);
}

}  // namespace sbsh::client
