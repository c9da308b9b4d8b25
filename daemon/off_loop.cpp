#include "daemon/off_loop.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>

namespace sbsh::daemon {

namespace {

struct pool_job {
  std::function<void()> work, done;
  uv_work_t req{};
};

// The client work of one loop: what runs, by owner, and what waits for a thread.
struct client_lane {
  size_t running = 0;
  uint64_t turns = 0;                                 // threads handed out so far
  std::map<uint64_t, uint64_t> last_turn;            // owner: when it last got one
  std::map<uint64_t, size_t> running_by;              // owner: how many of its jobs run
  std::map<uint64_t, std::deque<pool_job*>> waiting;  // owner: its jobs in order
};

// One per loop (sbshd has one; tests may make more), touched on the loop's thread only.
std::map<uv_loop_t*, client_lane>& lanes() {
  static std::map<uv_loop_t*, client_lane> all;
  return all;
}

void queue(uv_loop_t* loop, pool_job* j) {
  uv_queue_work(
      loop, &j->req, [](uv_work_t* r) { static_cast<pool_job*>(r->data)->work(); },
      [](uv_work_t* r, int) {
        std::unique_ptr<pool_job> me(static_cast<pool_job*>(r->data));
        if (me->done) me->done();
      });
}

void start_waiting(uv_loop_t* loop);

// Queues client job `j` of `owner`; its end gives the thread to the next one waiting.
void run_client_job(uv_loop_t* loop, uint64_t owner, pool_job* j) {
  client_lane& lane = lanes()[loop];
  ++lane.running;
  ++lane.running_by[owner];
  lane.last_turn[owner] = ++lane.turns;
  j->done = [loop, owner, done = std::move(j->done)] {
    client_lane& l = lanes()[loop];
    --l.running;
    if (auto it = l.running_by.find(owner); it != l.running_by.end() && --it->second == 0) {
      l.running_by.erase(it);
      if (!l.waiting.contains(owner)) l.last_turn.erase(owner);  // nothing of it left
    }
    start_waiting(loop);
    if (done) done();
  };
  queue(loop, j);
}

// Starts waiting jobs while the lane has room: first those of the owner with the fewest
// jobs running, and of those the one whose last turn is the oldest.
void start_waiting(uv_loop_t* loop) {
  client_lane& lane = lanes()[loop];
  while (lane.running < client_lane_threads() && !lane.waiting.empty()) {
    auto next = lane.waiting.begin();
    std::pair<size_t, uint64_t> best{SIZE_MAX, UINT64_MAX};
    for (auto it = lane.waiting.begin(); it != lane.waiting.end(); ++it) {
      auto r = lane.running_by.find(it->first);
      auto t = lane.last_turn.find(it->first);
      std::pair<size_t, uint64_t> rank{r == lane.running_by.end() ? 0 : r->second,
                                       t == lane.last_turn.end() ? 0 : t->second};
      if (rank < best) {
        best = rank;
        next = it;
      }
    }
    uint64_t owner = next->first;
    pool_job* j = next->second.front();
    next->second.pop_front();
    if (next->second.empty()) lane.waiting.erase(next);
    run_client_job(loop, owner, j);
  }
}

pool_job* make_job(std::function<void()> work, std::function<void()> done) {
  auto job = std::make_unique<pool_job>();
  job->work = std::move(work);
  job->done = std::move(done);
  job->req.data = job.get();
  return job.release();
}

}  // namespace

void off_loop(uv_loop_t* loop, std::function<void()> work, std::function<void()> done) {
  // Owned by the request until its after-callback runs (a loop closed first runs it too,
  // with UV_ECANCELED, for work that never started).
  queue(loop, make_job(std::move(work), std::move(done)));
}

void off_loop_client(uv_loop_t* loop, uint64_t owner, std::function<void()> work, std::function<void()> done) {
  pool_job* j = make_job(std::move(work), std::move(done));
  client_lane& lane = lanes()[loop];
  if (lane.running < client_lane_threads() && lane.waiting.empty()) return run_client_job(loop, owner, j);
  lane.waiting[owner].push_back(j);
}

size_t client_lane_threads() {
  // As libuv reads it (src/threadpool.c): at least 1, at most 1024.
  static const size_t threads = [] {
    size_t pool = 4;
    if (const char* v = std::getenv("UV_THREADPOOL_SIZE"); v != nullptr && *v != '\0') {
      long n = std::atol(v);
      pool = n < 1 ? 1 : n > 1024 ? 1024 : static_cast<size_t>(n);
    }
    return std::max<size_t>(pool / 2, 1);
  }();
  return threads;
}

}  // namespace sbsh::daemon
