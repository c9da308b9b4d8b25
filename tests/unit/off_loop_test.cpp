// daemon/off_loop.cpp: client work on a real libuv loop and its thread pool.
#include <gtest/gtest.h>
#include <uv.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "daemon/off_loop.h"

namespace sbsh::daemon::off_loop_tests {

// Work that waits at a gate until the test lets it through, recording who started, in order,
// and how many ran at once.
class gate {
 public:
  void pass(uint64_t owner) {
    std::unique_lock<std::mutex> lock(mu_);
    starts_.push_back(owner);
    most_ = std::max(most_, ++running_);
    cv_.notify_all();
    cv_.wait(lock, [this] { return passes_ > 0; });
    --passes_;
    --running_;
  }
  void wait_started(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return starts_.size() >= n; });
  }
  void let_through(size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    passes_ += n;
    cv_.notify_all();
  }
  std::vector<uint64_t> starts() {
    std::lock_guard<std::mutex> lock(mu_);
    return starts_;
  }
  size_t running() {
    std::lock_guard<std::mutex> lock(mu_);
    return running_;
  }
  size_t most() {
    std::lock_guard<std::mutex> lock(mu_);
    return most_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  size_t passes_ = 0, running_ = 0, most_ = 0;
  std::vector<uint64_t> starts_;
};

TEST(off_loop, ClientWorkHoldsItsShareOfThePoolAndWaitingOwnersTakeTurns) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  const size_t share = client_lane_threads();
  ASSERT_GE(share, 1u);
  if (const char* pool = std::getenv("UV_THREADPOOL_SIZE"); pool != nullptr && std::atoi(pool) == 1)
    GTEST_SKIP() << "with a pool of one thread, client work may take it all";
  gate g;
  size_t done = 0;
  // Client 1 asks for more than the share, all of it stuck (a file system that hangs) ...
  for (size_t i = 0; i < share + 3; ++i) off_loop_client(&loop, 1, [&g] { g.pass(1); }, [&done] { ++done; });
  // ... then client 2 asks for one.
  off_loop_client(&loop, 2, [&g] { g.pass(2); }, [&done] { ++done; });
  g.wait_started(share);
  // sbshd's own work still finds a thread.
  bool own = false;
  off_loop(&loop, [] {}, [&own] { own = true; });
  while (!own) uv_run(&loop, UV_RUN_ONCE);
  EXPECT_EQ(g.running(), share);  // the rest waits for the share, client 2's too
  EXPECT_EQ(done, 0u);
  // One thread is freed: it goes to client 2, which had none running or, with a share of
  // one, had no turn yet, before client 1's waiting work (the freed one's end hands it on
  // before its own `done`).
  g.let_through(1);
  while (done < 1) uv_run(&loop, UV_RUN_ONCE);
  g.wait_started(share + 1);
  EXPECT_EQ(g.starts().at(share), 2u);
  g.let_through(share + 3);
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(done, share + 4);
  EXPECT_EQ(g.most(), share);
  auto starts = g.starts();
  EXPECT_EQ(starts.size(), share + 4);
  EXPECT_EQ(std::count(starts.begin(), starts.end(), 2u), 1);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

}  // namespace sbsh::daemon::off_loop_tests
