// What an idle wrapper gives back, and the descriptor limit it sets for itself and its shell.
//
// One wrapper runs per session, and most sit idle: at ten thousand sessions each kilobyte a
// wrapper keeps is ten megabytes. Its static data is fixed; what it touched while busy
// (free heap pages, the stack below its loop) is not needed while it waits.
#pragma once

#include <cstdint>

namespace sbsh::wrapper {

// Keeps the heap small: blocks of a page or more in mappings of their own, given back when
// freed, and no padding when the heap grows. Called first thing in main.
void keep_heap_small();

// Gives the free pages of the heap back (malloc_trim) and drops the stack's pages below the
// caller's frame, which deeper calls used (starting the shell, formatting messages): they
// are zero pages again when next touched. The process must be single-threaded.
void release_idle_memory();

// Lowers RLIMIT_NOFILE to `soft` and `hard` (--nofile SOFT:HARD; 0: as it is), never raising
// either: sbshd may have raised its own far above what its shells had (daemon/capacity.h).
void lower_descriptor_limit(uint64_t soft, uint64_t hard);

}  // namespace sbsh::wrapper
