// client/json.cpp and client/duration.cpp: the JSON the CLI and the C ABI print, and durations.
#include <gtest/gtest.h>

#include "client/json.h"
#include "sbsh/client.h"

namespace sbsh::client::cli_json_tests {

TEST(cli_json, Utf8RepairAndBase64) {
  bool ok;
  EXPECT_EQ(utf8_repair("plain ✓", &ok), "plain ✓");
  EXPECT_TRUE(ok);
  EXPECT_EQ(utf8_repair("a\xff" "b", &ok), "a\xef\xbf\xbd" "b");
  EXPECT_FALSE(ok);
  EXPECT_EQ(utf8_repair("\xc0\xaf", &ok), "\xef\xbf\xbd\xef\xbf\xbd");  // overlong
  EXPECT_EQ(utf8_repair("\xed\xa0\x80", &ok).find('\xed'), std::string::npos);  // surrogate
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("fo"), "Zm8=");
  EXPECT_EQ(base64("foo"), "Zm9v");
  EXPECT_EQ(dump_json(std::string("q\"\\\n\x01", 5)), "\"q\\\"\\\\\\n\\u0001\"");
  EXPECT_EQ(rfc3339_ms(1795000000123), "2026-11-18T11:06:40.123Z");
}

TEST(cli_json, InvalidUtf8NeverBreaksTheDocument) {
  EXPECT_EQ(dump_json("ok \xff"), "\"ok \xef\xbf\xbd\"");
  json_value o;
  o["a"] = "\xc3";
  o["b"] = text_or_null("");
  o["c"] = signal_json(9);
  o["d"] = signal_json(std::nullopt);
  o["e"] = std::vector<std::string>{"x", "y\""};
  o["f"] = opt_json(std::optional<int>());
  EXPECT_EQ(dump_json(o),
            "{\"a\":\"\xef\xbf\xbd\",\"b\":null,\"c\":\"SIGKILL\",\"d\":null,\"e\":[\"x\",\"y\\\"\"],\"f\":null}");
}

TEST(cli_json, ListingsHaveOneForm) {
  proc_info p;
  p.id = 7;
  p.name = "job";
  p.session = "s";
  p.command = "sleep 9";
  p.state = "killed";
  p.pid = 1234;
  p.signal = 15;
  p.started_at_ms = 1795000000123;
  p.ended_at_ms = 1795000001000;
  p.log_path = "/l/7.out";
  EXPECT_EQ(to_json(p),
            "{\"id\":7,\"name\":\"job\",\"session\":\"s\",\"command\":\"sleep 9\",\"state\":\"killed\","
            "\"pid\":1234,\"pgid\":1234,\"exit_code\":null,\"signal\":\"SIGTERM\","
            "\"started_at\":\"2026-11-18T11:06:40.123Z\",\"ended_at\":\"2026-11-18T11:06:41.000Z\","
            "\"error\":null,\"log\":\"/l/7.out\"}");
  session_status s;
  s.name = "b";
  s.state = "ready";
  s.restart = "always";
  EXPECT_EQ(to_json(std::vector<session_status>{s, s}).find("[{\"name\":\"b\",\"state\":\"ready\""), 0u);
  daemon_status st;
  st.sessions = {s};
  EXPECT_NE(to_json(st).find("\"sessions\":[{\"name\":\"b\""), std::string::npos);
  session_detail d;
  d.status = s;
  d.definition.env = {"A=1"};
  d.history.push_back({"false", 1, false, false, 1795000000123, 5});
  auto dj = to_json(d);
  EXPECT_NE(dj.find("\"definition\":{\"cwd\":\"\",\"env\":[\"A=1\"],\"init\":[],"), std::string::npos) << dj;
  EXPECT_NE(dj.find("\"history\":[{\"command\":\"false\",\"exit_code\":1,"), std::string::npos) << dj;
}

TEST(cli_json, Durations) {
  EXPECT_EQ(parse_duration("500ms")->count(), 500);
  EXPECT_EQ(parse_duration("30s")->count(), 30000);
  EXPECT_EQ(parse_duration("5m")->count(), 300000);
  EXPECT_EQ(parse_duration("1h")->count(), 3600000);
  EXPECT_EQ(parse_duration("1.5")->count(), 1500);
  for (const char* bad : {"", "s", "5x", "-1", "1.2.3", "1e9999"}) EXPECT_FALSE(parse_duration(bad).ok()) << bad;
}

}  // namespace sbsh::client::cli_json_tests
