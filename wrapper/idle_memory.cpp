// Idle memory and the descriptor limit of a wrapper; see idle_memory.h.
#include "wrapper/idle_memory.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace sbsh::wrapper {

// Under AddressSanitizer a local may live on its fake stack, not on the thread's: its address
// then says nothing of which stack pages are in use, and none are given back.
#if defined(__SANITIZE_ADDRESS__)
#define SBSH_FAKE_STACKS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SBSH_FAKE_STACKS 1
#endif
#endif

#ifndef SBSH_FAKE_STACKS
namespace {

// The lowest address of the main thread's stack mapping, from /proc/self/maps; 0 when it
// cannot be read. No allocation: the heap has just been trimmed. Its buffer is below the
// caller's frame, among the pages the caller drops next.
[[gnu::noinline]] uintptr_t stack_mapping_start() {
  int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[2048];
  size_t have = 0;
  uintptr_t start = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf + have, sizeof buf - 1 - have);
    if (n <= 0) break;
    have += static_cast<size_t>(n);
    buf[have] = '\0';
    // Whole lines only; a partial one moves to the front for the next read.
    char* line = buf;
    for (char* nl; (nl = std::strchr(line, '\n')) != nullptr; line = nl + 1) {
      *nl = '\0';
      auto len = static_cast<size_t>(nl - line);
      if (len >= 7 && std::strcmp(nl - 7, "[stack]") == 0) {
        start = std::strtoull(line, nullptr, 16);
        break;
      }
    }
    if (start != 0) break;
    have = std::strlen(line);
    std::memmove(buf, line, have);
    if (have == sizeof buf - 1) have = 0;  // a line longer than the buffer: skip it
  }
  ::close(fd);
  return start;
}

}  // namespace
#endif

void keep_heap_small() {
  ::mallopt(M_MMAP_THRESHOLD, 4096);
  ::mallopt(M_TOP_PAD, 0);
  ::mallopt(M_TRIM_THRESHOLD, 4096);
}

void release_idle_memory() {
  ::malloc_trim(0);
#ifndef SBSH_FAKE_STACKS
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  uintptr_t low = stack_mapping_start();
  // The page below this frame's stays: what the calls made from here next need at once.
  volatile char here = 0;
  uintptr_t keep_from = (reinterpret_cast<uintptr_t>(&here) & ~(page - 1)) - page;
  // An address read from /proc/self/maps, not a pointer that could be derived.
  if (low != 0 && low < keep_from)
    ::madvise(reinterpret_cast<void*>(low), keep_from - low, MADV_DONTNEED);  // NOLINT(performance-no-int-to-ptr)
#endif
}

void lower_descriptor_limit(uint64_t soft, uint64_t hard) {
  rlimit rl{};
  if (soft == 0 || ::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (hard != 0 && hard < rl.rlim_max) rl.rlim_max = hard;
  rl.rlim_cur = std::min<rlim_t>({rl.rlim_cur, soft, rl.rlim_max});
  ::setrlimit(RLIMIT_NOFILE, &rl);
}

}  // namespace sbsh::wrapper
