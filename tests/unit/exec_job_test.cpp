// daemon/exec_job.cpp: request validation.
#include <gtest/gtest.h>

#include "daemon/exec_job.h"
#include "daemon/session_def.h"

namespace sbsh::daemon::exec_job_tests {

TEST(exec_job, ParseChecksFields) {
  ipc::frame_builder f(ipc::msg_type::exec, 3);
  f.str("command", "echo hi").str("cwd", "/tmp").str_array("env", {"A=1"});
  auto bytes = f.take();
  auto m = ipc::message::parse(bytes.data() + 4, bytes.size() - 4);
  ASSERT_TRUE(m.ok());
  auto j = parse_exec(ipc::envelope{*m, {}});
  ASSERT_TRUE(j.ok()) << j.err().message;
  EXPECT_EQ((*j)->session, "default");
  EXPECT_EQ((*j)->text, "echo hi");  // its directory is placed in its session first
  ASSERT_TRUE(settle_dir(**j, session_def{}).ok());
  EXPECT_NE((*j)->text.find("cd -- '/tmp'"), std::string::npos);
  EXPECT_NE((*j)->text.find("export 'A=1'"), std::string::npos);
  EXPECT_EQ((*j)->check_cwd, "/tmp");
  ipc::frame_builder g(ipc::msg_type::exec, 3);
  g.str("command", "x").str_array("env", {"1BAD=x"});
  bytes = g.take();
  m = ipc::message::parse(bytes.data() + 4, bytes.size() - 4);
  EXPECT_FALSE(parse_exec(ipc::envelope{*m, {}}).ok());
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
}

}  // namespace sbsh::daemon::exec_job_tests
