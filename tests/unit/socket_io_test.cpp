// ipc/socket_io.cpp: descriptors travel with their frames.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

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

// The one sendmsg()/recvmsg() pair every message with descriptors goes through: parts
// gathered and scattered, descriptors in order, and those beyond the receiver's room closed
// and said to be cut (as an over-long datagram is).
TEST(socket_io, PartsAndDescriptorsTravelTogetherAndThoseBeyondTheRoomAreClosed) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  unique_fd a(sv[0]), b(sv[1]);
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  unique_fd r(p[0]), w(p[1]);
  char head[] = "ab", tail[] = "cd";
  iovec out[] = {{head, 2}, {tail, 2}};
  int three[] = {w.get(), w.get(), r.get()};
  ASSERT_EQ(send_parts_with_fds(a.get(), out, three), 4);
  char x[1] = {}, y[3] = {};
  iovec in[] = {{x, 1}, {y, 3}};
  int room[2] = {-1, -1};
  received got = recv_parts_with_fds(b.get(), in, room);
  EXPECT_EQ(got.bytes, 4);
  EXPECT_EQ(std::string(x, 1) + std::string(y, 3), "abcd");
  ASSERT_EQ(got.fds, 2u);
  EXPECT_TRUE(got.fds_cut);  // the third was closed
  EXPECT_FALSE(got.data_cut);
  ASSERT_EQ(::write(room[1], "z", 1), 1);  // the second is a duplicate of the pipe's write end
  char c = 0;
  ASSERT_EQ(::read(r.get(), &c, 1), 1);
  EXPECT_EQ(c, 'z');
  EXPECT_NE(::fcntl(room[0], F_GETFD) & FD_CLOEXEC, 0);  // received close-on-exec
  ::close(room[0]);
  ::close(room[1]);
  // A message longer than the room: cut, and said so.
  ASSERT_EQ(send_parts_with_fds(a.get(), out, {}), 4);
  got = recv_parts_with_fds(b.get(), {in, 1}, {});
  EXPECT_EQ(got.bytes, 1);
  EXPECT_TRUE(got.data_cut);
  EXPECT_EQ(got.fds, 0u);
  // More descriptors than one message may carry: refused before anything is sent.
  std::vector<int> many(kMaxPassedFds + 1, w.get());
  EXPECT_EQ(send_parts_with_fds(a.get(), out, many), -1);
  EXPECT_EQ(errno, EINVAL);
}

}  // namespace sbsh::ipc::socket_io_tests
