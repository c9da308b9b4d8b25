// daemon/service_manager: the test plays systemd's side of sd_listen_fds(3) and sd_notify(3)
// in this process.
#include "daemon/service_manager.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace sbsh::daemon::service_manager::service_manager_tests {

class service_manager_unit : public ::testing::Test {
 protected:
  // Descriptor 3 is where systemd passes the first socket: whatever this process has there is
  // kept aside and put back.
  void SetUp() override {
    char tmpl[] = "/tmp/sbsh-sm.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    saved3_ = ::fcntl(3, F_DUPFD_CLOEXEC, 10);
  }
  void TearDown() override {
    for (const char* v : {"LISTEN_PID", "LISTEN_FDS", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"}) ::unsetenv(v);
    std::string rm = "rm -rf '" + dir_ + "'";
    (void)std::system(rm.c_str());
    if (saved3_ >= 0) {
      ::dup3(saved3_, 3, O_CLOEXEC);
      ::close(saved3_);
    } else {
      ::close(3);
    }
  }
  // A unix socket of `type` bound to `path`, moved to descriptor 3 as systemd passes it.
  static int passed_socket(int type, const std::string& path) {
    int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    if (type == SOCK_STREAM) {
      EXPECT_EQ(::listen(fd, 4), 0);
    }
    if (fd != 3) {
      EXPECT_EQ(::dup2(fd, 3), 3);
      ::close(fd);
    }
    ::setenv("LISTEN_PID", std::to_string(::getpid()).c_str(), 1);
    ::setenv("LISTEN_FDS", "1", 1);
    return 3;
  }
  std::string dir_;
  int saved3_ = -1;
};

TEST_F(service_manager_unit, NothingPassedIsNoSocketAndNoError) {
  auto s = take_listen_socket();
  ASSERT_TRUE(s.ok()) << s.err().message;
  EXPECT_FALSE(s->valid());
  EXPECT_FALSE(notify("READY=1"));
  EXPECT_EQ(watchdog_interval_ms(), 0u);
}

TEST_F(service_manager_unit, TakesAListeningStreamSocketAndItsPath) {
  std::string path = dir_ + "/s.sock";
  passed_socket(SOCK_STREAM, path);
  auto s = take_listen_socket();
  ASSERT_TRUE(s.ok()) << s.err().message;
  ASSERT_EQ(s->get(), 3);
  EXPECT_EQ(std::getenv("LISTEN_FDS"), nullptr);  // not passed on to what sbshd starts
  auto p = bound_path(s->get());
  ASSERT_TRUE(p.ok()) << p.err().message;
  EXPECT_EQ(*p, path);
}

TEST_F(service_manager_unit, RefusesADatagramSocket) {
  passed_socket(SOCK_DGRAM, dir_ + "/d.sock");
  auto s = take_listen_socket();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.err().message.find("not a listening unix stream socket"), std::string::npos) << s.err().message;
  EXPECT_EQ(::fcntl(3, F_GETFD), -1);  // and closed it
}

TEST_F(service_manager_unit, SocketsMeantForAnotherPidAreLeftAlone) {
  passed_socket(SOCK_STREAM, dir_ + "/o.sock");
  ::setenv("LISTEN_PID", "1", 1);
  auto s = take_listen_socket();
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->valid());
}

TEST_F(service_manager_unit, NotifiesAndReportsTheWatchdogInterval) {
  std::string path = dir_ + "/notify";
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  ::setenv("WATCHDOG_USEC", "250000", 1);
  EXPECT_TRUE(notify("READY=1\nSTATUS=here"));
  char buf[256];
  ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)), "READY=1\nSTATUS=here");
  EXPECT_EQ(watchdog_interval_ms(), 250u);
  ::setenv("WATCHDOG_PID", "1", 1);  // another process is watched
  EXPECT_EQ(watchdog_interval_ms(), 0u);
  ::close(fd);
}

}  // namespace sbsh::daemon::service_manager::service_manager_tests
