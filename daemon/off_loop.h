// Work that may block (the file system) run on libuv's thread pool, and its result handed
// back on the loop.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <functional>

namespace sbsh::daemon {

// Runs `work` on the thread pool, then `done`, if any, on the loop's thread. `work` must
// touch nothing the loop owns; what it finds goes to `done` through what both capture.
void off_loop(uv_loop_t* loop, std::function<void()> work, std::function<void()> done = {});

// off_loop for work on paths a client chose (a setup's key files, a file request beneath a
// session's root), whose time sbshd does not control: a FIFO or a device is refused without
// a blocking open, but a read can still wait on a file system that hangs (NFS, FUSE). So at
// most client_lane_threads() of these hold pool threads at once, and sbshd's own work (state
// files, /proc scans, deletions) always finds one free. Work waiting for a thread is taken
// by `owner` (a client's serial) in turn: the owner with the fewest running first, then the
// one served longest ago, so that one client's slow requests do not hold back another's.
// Called on the loop's thread only. With a pool of one thread (UV_THREADPOOL_SIZE=1) that
// thread is the share.
void off_loop_client(uv_loop_t* loop, uint64_t owner, std::function<void()> work, std::function<void()> done = {});

// How many pool threads client work may hold at once: half of libuv's pool
// (UV_THREADPOOL_SIZE, 4 by default), at least one.
size_t client_lane_threads();

}  // namespace sbsh::daemon
