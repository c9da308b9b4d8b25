// uv/handles.h and uv/loop_queue.h: the handle owners sbsh mcp holds its loop with, on a real
// libuv loop. Each test ends with uv_loop_close succeeding: every handle closed.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <uv.h>

#include <string>
#include <thread>
#include <vector>

#include "uv/handles.h"
#include "uv/loop_queue.h"

namespace sbsh::uv::handles_tests {

// Functions posted from another thread all run, in order, on the loop's thread; close()
// drops later ones, and the loop ends once the queue and its async handle are closed.
TEST(uv_handles, loop_queue_runs_posts_from_another_thread_in_order_then_closes) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  std::vector<int> seen;
  std::thread::id loop_thread = std::this_thread::get_id();
  bool all_on_loop = true;
  {
    loop_queue q(&loop);
    constexpr int kPosts = 1000;
    std::thread poster([&] {
      for (int i = 0; i < kPosts; ++i)
        q.post([&, i] {
          all_on_loop = all_on_loop && std::this_thread::get_id() == loop_thread;
          seen.push_back(i);
          if (i == kPosts - 1) q.close();
        });
    });
    uv_run(&loop, UV_RUN_DEFAULT);  // ends when close() has closed the async handle
    poster.join();
    q.post([&] { seen.push_back(-1); });  // after close(): dropped
    uv_run(&loop, UV_RUN_DEFAULT);
    ASSERT_EQ(seen.size(), static_cast<size_t>(kPosts));
    for (int i = 0; i < kPosts; ++i) EXPECT_EQ(seen[i], i);
  }
  EXPECT_TRUE(all_on_loop);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

// A stream writes what it is given, in order, the peer reads it, a shutdown after the
// writes delivers them all and then the end; resetting the owners closes both handles.
TEST(uv_handles, stream_writes_in_order_and_shuts_down_after_its_writes) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  std::string got;
  bool ended = false, shut = false;
  {
    auto a = make_handle<stream>(&loop, stream::kind::unix_socket);
    auto b = make_handle<stream>(&loop, stream::kind::unix_socket);
    ASSERT_EQ(uv_pipe_open(a->pipe(), sv[0]), 0);
    ASSERT_EQ(uv_pipe_open(b->pipe(), sv[1]), 0);
    EXPECT_EQ(b->type(), stream::kind::unix_socket);
    EXPECT_EQ(b->fileno(), sv[1]);
    std::string big(size_t{1} << 20, 'x');  // more than a socket buffer: queued, not written at once
    ASSERT_EQ(a->write("first "), 0);
    ASSERT_EQ(a->write(big), 0);
    ASSERT_EQ(a->write(" last"), 0);
    ASSERT_EQ(a->shutdown([&] { shut = true; }), 0);
    ASSERT_EQ(b->read_start([&](ssize_t n, const char* data) {
      if (n < 0) {
        ended = true;
        b.reset();  // a callback may close its own stream
        return;
      }
      got.append(data, static_cast<size_t>(n));
    }),
              0);
    while (!ended) uv_run(&loop, UV_RUN_ONCE);
    EXPECT_TRUE(shut);
    EXPECT_EQ(got, "first " + big + " last");
    EXPECT_TRUE(b == nullptr);
  }
  uv_run(&loop, UV_RUN_DEFAULT);  // the close callbacks free the owners
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

// A repeating timer calls back until it is closed from its own callback, and a stream closed
// with a shutdown still pending never calls back into what owned it.
TEST(uv_handles, a_repeating_timer_and_a_pending_shutdown_end_cleanly_when_closed) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  int ticks = 0;
  auto t = make_handle<timer>(&loop);
  t->start(
      1,
      [&] {
        if (++ticks == 3) t.reset();
      },
      1);
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(ticks, 3);

  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  bool called = false;
  {
    auto s = make_handle<stream>(&loop, stream::kind::unix_socket);
    ASSERT_EQ(uv_pipe_open(s->pipe(), sv[0]), 0);
    ASSERT_EQ(s->write(std::string(size_t{4} << 20, 'y')), 0);  // never read: the shutdown waits
    ASSERT_EQ(s->shutdown([&] { called = true; }), 0);
  }  // closed here, the shutdown still pending
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_FALSE(called);
  ::close(sv[1]);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

}  // namespace sbsh::uv::handles_tests
