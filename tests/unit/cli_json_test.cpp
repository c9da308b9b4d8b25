// client/cli/json.cpp and client/duration.cpp: what the CLI prints and parses.
#include <gtest/gtest.h>

#include "client/cli/json.h"
#include "sbsh/client.h"

namespace sbsh::cli {
namespace {

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
  EXPECT_EQ(json_string(std::string("q\"\\\n\x01", 5)), "\"q\\\"\\\\\\n\\u0001\"");
  EXPECT_EQ(rfc3339_ms(1795000000123), "2026-11-18T11:06:40.123Z");
}

TEST(cli_json, Durations) {
  EXPECT_EQ(client::parse_duration("500ms")->count(), 500);
  EXPECT_EQ(client::parse_duration("30s")->count(), 30000);
  EXPECT_EQ(client::parse_duration("5m")->count(), 300000);
  EXPECT_EQ(client::parse_duration("1h")->count(), 3600000);
  EXPECT_EQ(client::parse_duration("1.5")->count(), 1500);
  for (const char* bad : {"", "s", "5x", "-1", "1.2.3", "1e9999"}) EXPECT_FALSE(client::parse_duration(bad).ok()) << bad;
}

}  // namespace
}  // namespace sbsh::cli
