// Work that may block (the file system) run on libuv's thread pool, and its result handed
// back on the loop.
#pragma once

#include <uv.h>

#include <functional>

namespace sbsh::daemon {

// Runs `work` on the thread pool, then `done`, if any, on the loop's thread. `work` must
// touch nothing the loop owns; what it finds goes to `done` through what both capture.
void off_loop(uv_loop_t* loop, std::function<void()> work, std::function<void()> done = {});

}  // namespace sbsh::daemon
