// ipc/socket_io.cpp: descriptors travel with their frames.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc/socket_io.h"

namespace sbsh::ipc::socket_io_tests {

TEST(socket_io, DescriptorsArriveWithTheirFrame) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  channel a{unique_fd(sv[0])}, b{unique_fd(sv[1])};
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  frame_builder plain(msg_type::ok, 1);
  ASSERT_TRUE(a.send(plain.finish()).ok());
  frame_builder with(msg_type::exec, 2);
  with.u64("fds", 1);
  int fds[] = {p[1]};
  ASSERT_TRUE(a.send(with.finish(), fds).ok());
  auto first = b.recv();
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->fds.empty());
  auto second = b.recv();
  ASSERT_TRUE(second.ok()) << second.err().message;
  ASSERT_EQ(second->fds.size(), 1u);
  ASSERT_EQ(::write(second->fds[0].get(), "z", 1), 1);  // the received end writes into our pipe
  char c;
  ASSERT_EQ(::read(p[0], &c, 1), 1);
  EXPECT_EQ(c, 'z');
  ::close(p[0]);
  ::close(p[1]);
}

TEST(socket_io, AFrameClaimingMissingDescriptorsIsRefused) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  channel a{unique_fd(sv[0])}, b{unique_fd(sv[1])};
  frame_builder f(msg_type::exec, 1);
  f.u64("fds", 2);
  ASSERT_TRUE(a.send(f.finish()).ok());
  auto r = b.recv();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.err().message.find("declares 2 descriptors"), std::string::npos);
}

}  // namespace sbsh::ipc::socket_io_tests
