// daemon/session_def.cpp: the checks of what a request names within a session.
#include <gtest/gtest.h>

#include "daemon/session_def.h"

namespace sbsh::daemon::session_def_tests {

TEST(session_def, SessionNames) {
  EXPECT_TRUE(valid_session_name("a"));
  EXPECT_TRUE(valid_session_name(std::string(64, 'z')));
  EXPECT_TRUE(valid_session_name("A1.b_c-d"));
  for (const std::string& bad : std::vector<std::string>{"", "-a", ".a", "a b", "a/b", std::string(65, 'a'), "é"})
    EXPECT_FALSE(valid_session_name(bad)) << bad;
  auto s = check_session_name("a b");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.err().code, "invalid_session_name");
}

TEST(session_def, EnvironmentEntries) {
  EXPECT_TRUE(check_env_entry("A_1=x").ok());
  EXPECT_TRUE(check_env_entry("_=").ok());
  for (std::string_view bad : {"A", "1A=x", "=x", "A-B=x"}) EXPECT_FALSE(check_env_entry(bad).ok()) << bad;
  EXPECT_FALSE(check_env_entry(std::string_view("A=\0", 3)).ok());
}

TEST(session_def, StartDirectories) {
  EXPECT_TRUE(check_dir_fields("src", "/w").ok());
  EXPECT_FALSE(check_dir_fields("src", "w").ok());  // the client's directory is absolute
  EXPECT_FALSE(check_dir_fields(std::string_view("a\0b", 3), "").ok());
  // Without a root, a relative directory is taken from the client's, and needs one.
  EXPECT_EQ(*settle_cwd("src", "/w", session_def{}), "/w/src");
  EXPECT_EQ(*settle_cwd(".", "/w", session_def{}), "/w");
  auto no_base = settle_cwd("src", "", session_def{});
  ASSERT_FALSE(no_base.ok());
  EXPECT_NE(no_base.err().message.find("give an absolute path"), std::string::npos);
}

}  // namespace sbsh::daemon::session_def_tests
