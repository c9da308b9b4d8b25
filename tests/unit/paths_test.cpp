// common/paths.cpp: where the socket and state go, and the private-directory check.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "common/paths.h"

namespace sbsh::ipc::paths_tests {

TEST(paths, SocketResolutionOrder) {
  ::setenv("SBSH_SOCKET", "/a/s.sock", 1);
  ::setenv("XDG_RUNTIME_DIR", "/run/user/9", 1);
  EXPECT_EQ(resolve_socket_path("/explicit"), "/explicit");
  EXPECT_EQ(resolve_socket_path(""), "/a/s.sock");
  ::unsetenv("SBSH_SOCKET");
  EXPECT_EQ(resolve_socket_path(""), "/run/user/9/sbsh/sbshd.sock");
  ::unsetenv("XDG_RUNTIME_DIR");
  // /run/user/UID when a login made it, else /tmp.
  std::string login = runtime_dir();
  EXPECT_EQ(resolve_socket_path(""),
            login.empty() ? "/tmp/sbsh-" + std::to_string(::getuid()) + "/sbshd.sock" : login + "/sbsh/sbshd.sock");
}

// Without XDG_RUNTIME_DIR (as an MCP host starts sbsh mcp), the login's runtime directory
// (/run/user/UID) is found, when it is ours and private.
TEST(paths, RuntimeDirectoryWithoutXdgRuntimeDir) {
  char tmpl[] = "/tmp/sbsh-login.XXXXXX";
  std::string base = ::mkdtemp(tmpl);
  std::string mine = base + "/" + std::to_string(::getuid());
  ::setenv("XDG_RUNTIME_DIR", "/run/user/9", 1);
  EXPECT_EQ(runtime_dir(base), "/run/user/9");
  ::unsetenv("XDG_RUNTIME_DIR");
  EXPECT_EQ(runtime_dir(base), "");  // none made
  ASSERT_EQ(::mkdir(mine.c_str(), 0700), 0);
  EXPECT_EQ(runtime_dir(base), mine);
  ASSERT_EQ(::chmod(mine.c_str(), 0755), 0);
  EXPECT_EQ(runtime_dir(base), "");  // not private: not a login's
  ::rmdir(mine.c_str());
  ::rmdir(base.c_str());
}

TEST(paths, StateResolutionOrder) {
  ::setenv("SBSH_STATE_DIR", "/st", 1);
  EXPECT_EQ(resolve_state_dir(""), "/st");
  ::unsetenv("SBSH_STATE_DIR");
  ::setenv("XDG_STATE_HOME", "/xs", 1);
  EXPECT_EQ(resolve_state_dir(""), "/xs/sbsh");
  ::unsetenv("XDG_STATE_HOME");
  ::setenv("HOME", "/h", 1);
  EXPECT_EQ(resolve_state_dir(""), "/h/.local/state/sbsh");
}

TEST(paths, PrivateDirectoryIsCreatedOrRefused) {
  char tmpl[] = "/tmp/sbsh-paths.XXXXXX";
  std::string base = ::mkdtemp(tmpl);
  std::string fresh = base + "/a/b";
  ASSERT_TRUE(ensure_private_dir(fresh).ok());
  struct stat st {};
  ASSERT_EQ(::stat(fresh.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  std::string open = base + "/open";
  ::mkdir(open.c_str(), 0755);
  ::chmod(open.c_str(), 0755);
  auto s = ensure_private_dir(open);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.err().message.find("chmod 700"), std::string::npos);
  std::string link = base + "/link";
  ASSERT_EQ(::symlink(fresh.c_str(), link.c_str()), 0);
  EXPECT_FALSE(ensure_private_dir(link).ok());
  EXPECT_FALSE(check_socket_path(std::string(200, 'x')).ok());
  EXPECT_TRUE(check_socket_path("/tmp/x.sock").ok());
  (void)std::system(("rm -rf " + base).c_str());
}

}  // namespace sbsh::ipc::paths_tests
