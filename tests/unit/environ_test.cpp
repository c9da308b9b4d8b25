// common/environ: what sbsh passes on to the processes it starts.
#include "common/environ.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

namespace sbsh::ipc::environ_tests {

TEST(environ, ServiceManagerVariablesAreRecognisedByExactName) {
  for (const char* e : {"NOTIFY_SOCKET=/run/x", "WATCHDOG_PID=1", "WATCHDOG_USEC=5", "LISTEN_PID=2",
                        "LISTEN_FDS=1", "LISTEN_FDNAMES=a:b", "NOTIFY_SOCKET="})
    EXPECT_TRUE(is_service_manager_variable(e)) << e;
  for (const char* e : {"NOTIFY_SOCKETS=x", "MY_NOTIFY_SOCKET=x", "LISTEN_FDS", "WATCHDOG=1", "PATH=/bin", ""})
    EXPECT_FALSE(is_service_manager_variable(e)) << e;
}

TEST(environ, InheritedEnvironmentDropsTheManagersVariablesAndTheNamedOne) {
  ::setenv("NOTIFY_SOCKET", "/run/notify", 1);
  ::setenv("LISTEN_FDS", "1", 1);
  ::setenv("SBSH_SESSION", "old", 1);
  ::setenv("SBSH_SESSION_X", "kept", 1);
  ::setenv("SBSH_ENVIRON_TEST", "a=b", 1);
  auto env = inherited_environment("SBSH_SESSION");
  auto has = [&](const std::string& e) { return std::find(env.begin(), env.end(), e) != env.end(); };
  EXPECT_FALSE(has("NOTIFY_SOCKET=/run/notify"));
  EXPECT_FALSE(has("LISTEN_FDS=1"));
  EXPECT_FALSE(has("SBSH_SESSION=old"));
  EXPECT_TRUE(has("SBSH_SESSION_X=kept"));
  EXPECT_TRUE(has("SBSH_ENVIRON_TEST=a=b"));
  EXPECT_EQ(inherited_environment().size(), env.size() + 1);  // only SBSH_SESSION was dropped by name
  for (const char* v : {"NOTIFY_SOCKET", "LISTEN_FDS", "SBSH_SESSION", "SBSH_SESSION_X", "SBSH_ENVIRON_TEST"})
    ::unsetenv(v);
}

TEST(environ, EnvpPointsIntoTheEntriesAndEndsWithNull) {
  std::vector<std::string> entries{"A=1", "B=2"};
  auto envp = c_pointers(entries);
  ASSERT_EQ(envp.size(), 3u);
  EXPECT_EQ(envp[0], entries[0].data());
  EXPECT_STREQ(envp[1], "B=2");
  EXPECT_EQ(envp[2], nullptr);
}

}  // namespace sbsh::ipc::environ_tests
