// sbsh-wrapper: started by sbshd, one per session. See wrapper.h.
#include <cstdio>
#include <cstring>

#include "wrapper/wrapper.h"

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--spare") == 0) {
    // The arguments' memory is contiguous: /proc/PID/cmdline, and so ps, show it. The
    // padding only reserves room for the session's name: blank it until then.
    size_t pad = std::strlen(argv[2]);
    std::memset(argv[2], 0, pad);
    return sbsh::wrapper::run_spare(argv[1], static_cast<size_t>(argv[2] + pad - argv[1]));
  }
  if (argc != 2 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr,
                 "usage: sbsh-wrapper SESSION | --spare PADDING\n"
                 "sbsh-wrapper is started by sbshd for each session; it is not meant to be run by hand.\n");
    return 2;
  }
  return sbsh::wrapper::run(argv[1]);
}
