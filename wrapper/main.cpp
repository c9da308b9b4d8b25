// sbsh-wrapper: started by sbshd, one per session. See wrapper.h.
#include <cstdio>
#include <cstring>

#include "wrapper/wrapper.h"

int main(int argc, char** argv) {
  if (argc != 2 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr,
                 "usage: sbsh-wrapper SESSION\n"
                 "sbsh-wrapper is started by sbshd for each session; it is not meant to be run by hand.\n");
    return 2;
  }
  return sbsh::wrapper::run(argv[1]);
}
