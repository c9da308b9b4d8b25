// uv/framed_socket.cpp: frames over a real socketpair on a real libuv loop.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "ipc/frame.h"
#include "ipc/protocol.h"
#include "uv/framed_socket.h"

namespace sbsh::daemon::framed_socket_tests {

// A socketpair whose far end has sent a shell_exited frame with `exit_code` and closed,
// after `unread` was sent to it from our end (and never read). Returns our end.
int peer_that_left(int exit_code, const std::string& unread) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) return -1;
  if (!unread.empty()) (void)!::write(sv[0], unread.data(), unread.size());
  ipc::frame_builder last(ipc::msg_type::shell_exited);
  last.i64("exit_code", exit_code);
  std::string bytes(last.finish());
  (void)!::write(sv[1], bytes.data(), bytes.size());
  ::close(sv[1]);
  return sv[0];
}

// A peer that sent a last frame and went away: a write to it fails, and the frame is still
// delivered, before the close, which the loop reports. (A wrapper reports how its shell ended and exits; sbshd may
// be writing to it just then, and the report is what says the command never ran.)
TEST(framed_socket, APeersLastFrameComesBeforeTheCloseAWriteFoundFirst) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  int fd = peer_that_left(7, "");
  ASSERT_GE(fd, 0);

  std::vector<std::string> events;
  auto* s = new uv::framed_socket(&loop, unique_fd(fd),
                                  {[&](ipc::envelope&& e) {
                                     auto code = e.msg.get_i64("exit_code");
                                     events.push_back(fmt::format("message {} {}", static_cast<int>(e.msg.type()),
                                                                  code && code.value() ? *code.value() : -1));
                                   },
                                   [&](const std::string&) { events.emplace_back("closed"); }});
  s->send(ipc::frame_builder(ipc::msg_type::ping, 1).take());  // the peer is gone: EPIPE
  // Nothing is reported from inside send: its caller may be halfway through changing its own
  // state. The loop reports it, on its next turn.
  EXPECT_TRUE(events.empty());
  for (int turns = 0; events.size() < 2 && turns < 100; ++turns) uv_run(&loop, UV_RUN_ONCE);
  EXPECT_EQ(events, (std::vector<std::string>{
                        fmt::format("message {} 7", static_cast<int>(ipc::msg_type::shell_exited)), "closed"}));
  delete s;
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

// The same when the loop finds it first: a peer that closes without reading what it was
// sent leaves a socket error (ECONNRESET), which libuv reports as a poll failure.
TEST(framed_socket, APeersLastFrameComesBeforeTheCloseThePollFoundFirst) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  int fd = peer_that_left(9, ipc::frame_builder(ipc::msg_type::ping, 1).take());
  ASSERT_GE(fd, 0);

  std::vector<std::string> events;
  uv::framed_socket* s = nullptr;
  s = new uv::framed_socket(&loop, unique_fd(fd),
                            {[&](ipc::envelope&& e) {
                               auto code = e.msg.get_i64("exit_code");
                               events.push_back(fmt::format("message {}", code && code.value() ? *code.value() : -1));
                             },
                             [&](const std::string&) {
                               events.emplace_back("closed");
                               delete s;
                             }});
  for (int i = 0; i < 10 && events.size() < 2; ++i) uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_EQ(events, (std::vector<std::string>{"message 9", "closed"}));
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

}  // namespace sbsh::daemon::framed_socket_tests
