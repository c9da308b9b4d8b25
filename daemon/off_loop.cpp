#include "daemon/off_loop.h"

#include <memory>

namespace sbsh::daemon {

namespace {

struct pool_job {
  std::function<void()> work, done;
  uv_work_t req{};
};

}  // namespace

void off_loop(uv_loop_t* loop, std::function<void()> work, std::function<void()> done) {
  auto job = std::make_unique<pool_job>();
  job->work = std::move(work);
  job->done = std::move(done);
  job->req.data = job.get();
  // Owned by the request until its after-callback runs (a loop closed first runs it too,
  // with UV_ECANCELED, for work that never started).
  pool_job* j = job.release();
  uv_queue_work(
      loop, &j->req, [](uv_work_t* r) { static_cast<pool_job*>(r->data)->work(); },
      [](uv_work_t* r, int) {
        std::unique_ptr<pool_job> me(static_cast<pool_job*>(r->data));
        if (me->done) me->done();
      });
}

}  // namespace sbsh::daemon
