// Who may use sbshd, and where it keeps its state: a refused connection (another user, or
// one past the connection limit) is told why, and the state directory, whose session
// definitions sbshd runs, must be as private as the socket's.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "fixture.h"

namespace sbsh::test::access_tests {

using access_test = daemon_test;

// sbshd serves only its own user (SO_PEERCRED). Reaching another user's socket takes a
// directory and socket opened up on purpose, as here; the refusal then says what to do.
TEST_F(access_test, AnotherUserIsRefusedWithTheReason) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  for (const std::string& d : {dir, dir + "/run", dir + "/run/sbsh"}) ASSERT_EQ(::chmod(d.c_str(), 0711), 0);
  ASSERT_EQ(::chmod(sock.c_str(), 0666), 0);
  auto r = run({"/usr/bin/setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "--", bin("sbsh"),
                "--socket", sock, "--no-autostart", "status"});
  EXPECT_EQ(r.code, 255) << r.out;
  EXPECT_NE(r.err.find("serves only uid " + std::to_string(::getuid()) + ", and uid 65534 may not use it"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("run sbshd as your own user"), std::string::npos) << r.err;
  EXPECT_EQ(sbsh({"status"}).code, 0);
}

class connection_limit_test : public daemon_test {
 protected:
  // 4096 connections would take long to open: the limit is lowered for the test.
  connection_limit_test() { daemon_args = {"--max-clients", "2"}; }
};

TEST_F(connection_limit_test, AConnectionPastTheLimitIsToldWhy) {
  auto a = conn();
  auto b = conn();
  ASSERT_TRUE(a.status().ok());
  ASSERT_TRUE(b.status().ok());
  auto r = sbsh({"status"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("already serves 2 connections, its limit"), std::string::npos) << r.err;
  client::connect_options o;
  o.socket_path = sock;
  o.autostart = false;
  auto refused = client::connection::connect(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.err().code, "too_many_clients") << refused.err().message;
  // One leaves: the next is served.
  { auto gone = std::move(a); }
  EXPECT_TRUE(wait_until([&] { return sbsh({"status"}).code == 0; }, std::chrono::seconds(10)));
}

class state_dir_test : public daemon_test {
 protected:
  state_dir_test() { start_in_setup = false; }
  // sbshd's start with `state_dir`, which must fail; returns what it said.
  std::string refused_with(const std::string& state_dir) {
    auto r = run({bin("sbshd"), "--socket", sock, "--state-dir", state_dir, "--foreground"});
    EXPECT_EQ(r.code, 1) << state_dir;
    return r.err;
  }
};

TEST_F(state_dir_test, AMissingStateDirectoryIsCreatedPrivate) {
  start_daemon();
  struct stat st{};
  ASSERT_EQ(::stat(state.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, ::getuid());
}

TEST_F(state_dir_test, AnUnsafeStateDirectoryIsRefusedWithTheFix) {
  std::string open = dir + "/open";
  ASSERT_EQ(::mkdir(open.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  auto err = refused_with(open);
  EXPECT_NE(err.find("mode 0777"), std::string::npos) << err;
  EXPECT_NE(err.find("chmod 700 " + open), std::string::npos) << err;
  EXPECT_NE(err.find("--state-dir"), std::string::npos) << err;
  ASSERT_EQ(::chmod(open.c_str(), 0770), 0);  // a group may not write there either
  EXPECT_NE(refused_with(open).find("mode 0770"), std::string::npos);

  std::string link = dir + "/link";
  ASSERT_EQ(::chmod(open.c_str(), 0700), 0);
  ASSERT_EQ(::symlink(open.c_str(), link.c_str()), 0);
  err = refused_with(link);
  EXPECT_NE(err.find("is a symbolic link"), std::string::npos) << err;
  // Readable by others is fine: its files are private (0600).
  ASSERT_EQ(::chmod(open.c_str(), 0755), 0);
  start_daemon();
  stop_daemon();
}

// The attack the check is for: a state directory another user owns and can write, with a
// session definition planted in it, whose init command sbshd would run as its own user.
TEST_F(state_dir_test, AStateDirectoryOfAnotherUserIsRefusedAndNothingInItRuns) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the directory to another user";
  std::string marker = dir + "/planted-ran";
  start_daemon();
  ASSERT_EQ(sbsh({"session", "create", "planted", "--init", "touch " + shell_quote(marker)}).code, 0);
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(marker); }, std::chrono::seconds(20)));
  stop_daemon();
  std::filesystem::remove(marker);
  ASSERT_EQ(::chown(state.c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chmod(state.c_str(), 0777), 0);
  auto err = refused_with(state);
  EXPECT_NE(err.find("owned by uid 65534, not by you"), std::string::npos) << err;
  EXPECT_NE(err.find("session definitions"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(marker));
  ASSERT_EQ(::chown(state.c_str(), ::getuid(), ::getgid()), 0);  // for TearDown
}

}  // namespace sbsh::test::access_tests
