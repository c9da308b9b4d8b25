// client/json_form.h: a record's JSON form follows from its field table alone. The records
// here are declared only in this test, as ipc/messages.h declares the protocol's, and get
// their JSON form with no other code; an override changes only what it names.
#include <algorithm>

#include <gtest/gtest.h>

#include "client/json_form.h"

namespace sbsh::client::json_form_tests {

struct probe_part {
  std::string label;
  uint64_t count = 0;
};

struct probe_record {
  std::string name;
  std::string path;  // bytes_of: exact bytes beside it
  std::vector<std::string> keys;
  int64_t seen_at_ms = 0;     // a time
  int64_t ended_at_ms = 0;    // a time, nil when 0
  uint64_t uptime_ms = 0;     // a duration: not a time
  uint64_t limit = 0;         // omitted when 0 on the wire: null here
  int64_t pid = 0;            // nil when 0
  bool quiet = false;         // omitted when false on the wire, false here
  std::optional<int> exit_code;
  std::string note;           // sent only with a pid
  probe_part part;
  std::vector<probe_part> parts;
};

inline uint64_t twice_of(const probe_record& r) { return r.limit * 2; }
inline bool has_pid(const probe_record& r) { return r.pid != 0; }

}  // namespace sbsh::client::json_form_tests

namespace sbsh::ipc {

template <>
struct schema_of<client::json_form_tests::probe_part> {
  static constexpr std::string_view name = "probe part";
  static constexpr auto fields() {
    using s = client::json_form_tests::probe_part;
    return std::tuple{field("label", &s::label), field("count", &s::count)};
  }
};

template <>
struct schema_of<client::json_form_tests::probe_record> {
  static constexpr std::string_view name = "probe";
  static constexpr auto fields() {
    using s = client::json_form_tests::probe_record;
    return std::tuple{field("name", &s::name),
                      field("path", &s::path),
                      bytes_of("path_bytes", &s::path, "its exact bytes"),
                      field("keys", &s::keys),
                      bytes_of("keys_bytes", &s::keys, "their exact bytes"),
                      field("seen_at_ms", &s::seen_at_ms),
                      field("ended_at_ms", &s::ended_at_ms, kNilIfZero),
                      field("uptime_ms", &s::uptime_ms),
                      field("limit", &s::limit, kOmitEmpty),
                      derived("twice", client::json_form_tests::twice_of),
                      field("pid", &s::pid, kNilIfZero),
                      field("quiet", &s::quiet, kOmitEmpty),
                      field("exit_code", &s::exit_code),
                      field("note", &s::note).only_if(client::json_form_tests::has_pid, "with a pid"),
                      field("part", &s::part),
                      field("parts", &s::parts)};
  }
};

}  // namespace sbsh::ipc

namespace sbsh::client::json_form_tests {

// A record embedded in another's map (embed()) is an object of its own, under its name.
struct probe_outer {
  probe_part part;
  std::string extra;
};

}  // namespace sbsh::client::json_form_tests

namespace sbsh::ipc {

template <>
struct schema_of<client::json_form_tests::probe_outer> {
  static constexpr std::string_view name = "probe outer";
  static constexpr auto fields() {
    using s = client::json_form_tests::probe_outer;
    return std::tuple_cat(embed(&s::part), std::tuple{field("extra", &s::extra)});
  }
};

}  // namespace sbsh::ipc

namespace sbsh::client::json_form_tests {

struct probe_tagged {
  std::string label;
  uint64_t count = 0;
  int64_t at_ms = 0;
};

}  // namespace sbsh::client::json_form_tests

template <>
struct sbsh::ipc::schema_of<sbsh::client::json_form_tests::probe_tagged> {
  static constexpr std::string_view name = "probe tagged";
  static constexpr auto fields() {
    using s = client::json_form_tests::probe_tagged;
    return std::tuple{field("label", &s::label), field("count", &s::count), field("at_ms", &s::at_ms)};
  }
};

// An override: rules by field name, an order, a finish().
template <>
struct sbsh::client::json_form<sbsh::client::json_form_tests::probe_tagged> {
  static constexpr json_rule rules[] = {{"count", json_as::octal}, {"at_ms", json_as::null_if_empty}};
  static constexpr std::string_view order[] = {"count"};
  static void finish(json_value& o, const json_form_tests::probe_tagged& p) { o["size"] = p.label.size(); }
};

namespace sbsh::client::json_form_tests {

TEST(json_form, EveryFieldFollowsFromTheTable) {
  probe_record r;
  r.name = "n";
  r.path = "/p";
  r.keys = {"k"};
  r.seen_at_ms = 1795000000123;
  r.uptime_ms = 5;
  r.part = {"a", 1};
  r.parts = {{"b", 2}, {"c", 3}};
  EXPECT_EQ(dump_json(json_form_of(r)),
            R"({"name":"n","path":"/p","keys":["k"],"seen_at":"2026-11-18T11:06:40.123Z","ended_at":null,)"
            R"("uptime_ms":5,"limit":null,"twice":0,"pid":null,"quiet":false,"exit_code":null,"note":null,)"
            R"("part":{"label":"a","count":1},"parts":[{"label":"b","count":2},{"label":"c","count":3}]})");
  r.path = "/\xff";
  r.keys = {"ok", "\xfe"};
  r.ended_at_ms = 1795000001000;
  r.limit = 4;
  r.pid = 9;
  r.quiet = true;
  r.exit_code = 3;
  r.note = "x";
  EXPECT_EQ(dump_json(json_form_of(r)),
            R"({"name":"n","path":"/)"
            "\xef\xbf\xbd"
            R"(","path_base64":"L/8=","keys":["ok",")"
            "\xef\xbf\xbd"
            R"("],"keys_base64":[null,"/g=="],"seen_at":"2026-11-18T11:06:40.123Z",)"
            R"("ended_at":"2026-11-18T11:06:41.000Z","uptime_ms":5,"limit":4,"twice":8,"pid":9,"quiet":true,)"
            R"("exit_code":3,"note":"x","part":{"label":"a","count":1},)"
            R"("parts":[{"label":"b","count":2},{"label":"c","count":3}]})");
}

TEST(json_form, AnEmbeddedRecordIsAnObjectUnderItsName) {
  probe_outer o{{"a", 1}, "e"};
  EXPECT_EQ(dump_json(json_form_of(o)), R"({"probe part":{"label":"a","count":1},"extra":"e"})");
}

TEST(json_form, AnOverrideChangesOnlyWhatItNames) {
  EXPECT_EQ(dump_json(json_form_of(probe_tagged{"ab", 8, 1795000000123})),
            R"({"count":"0010","label":"ab","at":"2026-11-18T11:06:40.123Z","size":2})");
  EXPECT_EQ(dump_json(json_form_of(probe_tagged{"", 0, 0})), R"({"count":"0000","label":"","at":null,"size":0})");
}

}  // namespace sbsh::client::json_form_tests

namespace sbsh::client::json_form_tests {

TEST(json_form, TheSchemaFollowsFromTheTableToo) {
  static constexpr json_doc docs[] = {{"name", "its name"}};
  json_value s = json_schema_of<probe_record>(docs);
  EXPECT_EQ(dump_json(s["required"]),
            R"(["name","path","keys","seen_at","ended_at","uptime_ms","limit","twice","pid","quiet","exit_code",)"
            R"("note","part","parts"])");
  const json_value& p = s["properties"];
  EXPECT_EQ(dump_json(p["name"]), R"({"type":"string","description":"its name"})");
  EXPECT_EQ(p["path_base64"]["type"], "string");
  EXPECT_EQ(dump_json(p["keys_base64"]["items"]), R"({"type":["string","null"]})");
  EXPECT_EQ(dump_json(p["seen_at"]), R"({"type":"string"})");
  EXPECT_EQ(dump_json(p["ended_at"]), R"({"type":["string","null"]})");
  EXPECT_EQ(dump_json(p["uptime_ms"]), R"({"type":"integer"})");
  EXPECT_EQ(dump_json(p["limit"]), R"({"type":["integer","null"]})");
  EXPECT_EQ(dump_json(p["pid"]), R"({"type":["integer","null"]})");
  EXPECT_EQ(dump_json(p["quiet"]), R"({"type":"boolean"})");
  EXPECT_EQ(dump_json(p["exit_code"]), R"({"type":["integer","null"]})");
  EXPECT_EQ(dump_json(p["note"]), R"({"type":["string","null"]})");
  EXPECT_EQ(p["part"]["properties"]["count"]["type"], "integer");
  EXPECT_EQ(p["parts"]["items"]["properties"]["label"]["type"], "string");
  json_value t = json_schema_of<probe_tagged>();
  EXPECT_EQ(dump_json(t["required"]), R"(["count","label","at"])");
  EXPECT_EQ(dump_json(t["properties"]["count"]), R"({"type":"string"})");
}

// Whether `v` has one of the schema's types.
bool fits(const json_value& v, const json_value& schema) {
  auto one = [&](const std::string& t) {
    return (t == "null" && v.is_null()) || (t == "string" && v.is_string()) ||
           (t == "integer" && v.is_number_integer()) || (t == "boolean" && v.is_boolean()) ||
           (t == "array" && v.is_array()) || (t == "object" && v.is_object()) || (t == "number" && v.is_number());
  };
  const json_value& t = schema["type"];
  if (t.is_string()) return one(t.get<std::string>());
  return std::ranges::any_of(t, [&](const json_value& x) { return one(x.get<std::string>()); });
}

// Every key of a record's form is in its schema, with a type the schema allows, and every
// key the schema requires is there: the MCP tools' output schemas cannot drift from what they return.
void expect_fits(const json_value& form, const json_value& schema) {
  for (const auto& [key, value] : form.items()) {
    ASSERT_TRUE(schema["properties"].contains(key)) << key;
    EXPECT_TRUE(fits(value, schema["properties"][key])) << key << ": " << dump_json(value);
  }
  for (const auto& key : schema["required"]) EXPECT_TRUE(form.contains(key.get<std::string>())) << key;
}
template <typename T>
void expect_form_fits_schema(const T& r) {
  expect_fits(json_form_of(r), json_schema_of<T>());
}

TEST(json_form, EveryRecordsFormFitsItsSchema) {
  session_status s;
  s.name = "\xff";
  expect_form_fits_schema(s);
  s.running = "sleep 1";
  s.error = "e";
  s.started_at_ms = 1;
  s.timeout_ms = 5;
  expect_form_fits_schema(s);
  proc_info p;
  p.log_path = "/l\xfe";
  expect_form_fits_schema(p);
  p.pid = 4;
  p.signal = 9;
  p.exit_code = 1;
  p.ended_at_ms = 2;
  expect_form_fits_schema(p);
  command_info c;
  expect_form_fits_schema(c);
  c.signal = 15;
  c.started_at_ms = 3;
  expect_form_fits_schema(c);
  file_entry e;
  e.type = "symlink";
  e.target = "t\xff";
  expect_form_fits_schema(e);
  e.type = "file";
  expect_form_fits_schema(e);
  environment_info env;
  env.path = "\xff";
  expect_form_fits_schema(env);
  kept_copy k;
  expect_form_fits_schema(k);
}

// A command's result (exec --json, MCP's run_command) and the file operations' results,
// whose tables are the client's own: the form of each, as written, fits the schema the
// MCP tools give, with and without the values that make a key null or add its _base64.
TEST(json_form, TheExecAndFileResultsFitTheirSchemas) {
  exec_result r;
  json_value j;
  add_exec_result(j, "", "true", r);
  expect_fits(j, exec_result_schema({}));
  EXPECT_EQ(j["session"], "default");
  EXPECT_TRUE(j["id"].is_null() && j["prompt"].is_null() && j["started_at"].is_null() && j["error"].is_null());
  r.command_id = 17;
  r.running = true;
  r.prompt = "Name? ";
  r.exit_code = 137;
  r.signal = 9;
  r.state_lost = true;
  r.state_lost_reason = "restarted";
  r.stdout_data = "a\xff";
  r.stdout_bytes = 2;
  r.duration_us = 1500;
  r.started_at_ms = 1;
  r.error = "e";
  j = json_value();
  add_exec_result(j, "s", "c", r);
  expect_fits(j, exec_result_schema({}));
  EXPECT_EQ(j["id"], "%17");
  EXPECT_EQ(j["signal"], "SIGKILL");
  EXPECT_EQ(j["stdout_base64"], base64("a\xff"));
  EXPECT_EQ(j["next_offset"], "2:0");
  EXPECT_EQ(j["duration_ms"], 1);
  file_lines l;
  l.content = "x\n";
  expect_fits(json_of("p", l), json_schema_at_path<file_lines>({}));
  l.content = "\xff";
  json_value lines = json_of("p\xfe", l);
  expect_fits(lines, json_schema_at_path<file_lines>({}));
  EXPECT_EQ(lines["encoding"], "base64");
  EXPECT_TRUE(lines.contains("path_base64"));
  expect_fits(json_of("p", file_edit_result{}), json_schema_at_path<file_edit_result>({}));
  expect_fits(json_of("p", file_written{3}), json_schema_at_path<file_written>({}));
  file_search_result sr;
  sr.matches.push_back({"a\xff", 1, "t\xfe"});
  expect_form_fits_schema(sr);
  expect_fits(json_form_of(sr)["matches"][0], json_schema_of<file_search_result>()["properties"]["matches"]["items"]);
}

}  // namespace sbsh::client::json_form_tests
