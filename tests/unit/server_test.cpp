// daemon/server.cpp on a real loop, without sessions (options::no_sessions): request
// sequences the request fuzzer (tests/fuzz/requests_fuzz.cpp) found to break sbshd, each
// fed as a client sends it, with the loop run until sbshd has answered and closed.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "daemon/server.h"
#include "ipc/frame.h"
#include "ipc/socket_io.h"
#include "tests/sessionless_server.h"

namespace sbsh::daemon::server_tests {

class server_test : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sbsh-server.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::mkdir((dir_ + "/run").c_str(), 0700);
    srv_ = std::make_unique<server>(test::sessionless_options(dir_));
    ASSERT_TRUE(srv_->listen().ok());
    srv_->start(nullptr);
  }
  void TearDown() override {
    srv_.reset();
    (void)std::system(("rm -rf '" + dir_ + "'").c_str());
  }

  // Sends hello then `frames`, shuts the client's side, and runs the loop until sbshd has
  // closed the connection or its loop has ended. Returns the bytes sbshd sent.
  std::string exchange(const std::string& frames) {
    auto fd = ipc::connect_in(dir_ + "/run", "sbshd.sock");
    EXPECT_TRUE(fd.ok());
    if (!fd) return {};
    ipc::frame_builder hello(ipc::msg_type::hello, 1);
    hello.u64("version", ipc::kProtocolVersion);
    std::string out = hello.take() + frames;
    EXPECT_EQ(::write(fd->get(), out.data(), out.size()), static_cast<ssize_t>(out.size()));
    ::shutdown(fd->get(), SHUT_WR);
    ::fcntl(fd->get(), F_SETFL, O_NONBLOCK);
    std::string got;
    for (;;) {
      bool alive = uv_run(srv_->loop(), UV_RUN_ONCE) != 0;
      char buf[4096];
      ssize_t n;
      while ((n = ::read(fd->get(), buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
      if (n == 0 || !alive) return got;
    }
  }

  std::string dir_;
  std::unique_ptr<server> srv_;
};

// A shutdown with no session to wait for ends sbshd, and frees its clients, from inside the
// handler of the request: the connection's callback used the freed client afterwards.
TEST_F(server_test, AShutdownRequestFreesItsOwnConnectionSafely) {
  ipc::frame_builder shutdown(ipc::msg_type::shutdown, 2);
  shutdown.boolean("keep_sessions", false);
  std::string got = exchange(shutdown.take());
  EXPECT_NE(got.find("\xa2id\x02"), std::string::npos) << "no ok for the shutdown";
  EXPECT_EQ(uv_loop_alive(srv_->loop()), 0);
}

}  // namespace sbsh::daemon::server_tests
