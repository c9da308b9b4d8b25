// sbsh-wrapper: started by sbshd, one per session. See wrapper.h.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "ipc/fork_server.h"
#include "wrapper/fork_server.h"
#include "wrapper/idle_memory.h"
#include "wrapper/tree_copy.h"
#include "wrapper/wrapper.h"

namespace {

int usage() {
  std::fprintf(
      stderr,
      "usage: sbsh-wrapper [--dir DIR] [--adopt-timeout MS] [--limit NAME=SOFT:HARD]... [--rule rw|rx|ro:PATH]...\n"
      "                    [--ns pid|net|pid,net] [--as UID:GID] [--cgroup DIR] [--nofile SOFT[:HARD]]\n"
      "                    SESSION | --spare PADDING\n"
      "                    | --spare-confined PADDING | --setup TEXT\n"
      "sbsh-wrapper is started by sbshd for each session; it is not meant to be run by hand.\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // sbshd also runs the wrapper to copy a snapshot's directory (tree_copy.h).
  if (argc >= 2 && std::strcmp(argv[1], "--copy-tree") == 0) return sbsh::wrapper::copy_tree_main(argc - 2, argv + 2);
  sbsh::wrapper::keep_heap_small();
  // The fork server (fork_server.h) returns here in each wrapper it starts, with its arguments.
  if (argc == 2 && std::strcmp(argv[1], sbsh::wrapper::kForkServerArg) == 0) {
    auto started = sbsh::wrapper::serve_forks();
    argc = started.argc;
    argv = started.argv;
  }
  sbsh::wrapper::options o;
  int i = 1;
  for (; i + 1 < argc; i += 2) {
    std::string error;
    int taken = sbsh::wrapper::set_option(argv[i], argv[i + 1], o, error);
    if (taken == 0) break;
    if (taken < 0) {
      if (error.empty()) return usage();
      std::fprintf(stderr, "sbsh-wrapper: %s\n", error.c_str());
      return 2;
    }
  }
  sbsh::wrapper::lower_descriptor_limit(o.nofile_soft, o.nofile_hard);
  bool confined_spare = argc == i + 2 && std::strcmp(argv[i], "--spare-confined") == 0;
  if (argc == i + 2 && (std::strcmp(argv[i], "--spare") == 0 || confined_spare)) {
    // The arguments' memory is contiguous: /proc/PID/cmdline, and so ps, show it. It is
    // rewritten to show the session's name once claimed; the padding reserves room for it.
    // Only "--spare PADDING" is rewritten: ps then shows a claimed spare's options and name as
    // it shows those of a wrapper started for its session.
    char* first = argv[i];
    char* last = argv[i + 1] + std::strlen(argv[i + 1]);
    std::memset(argv[i + 1], 0, static_cast<size_t>(last - argv[i + 1]));
    return sbsh::wrapper::run_spare(first, static_cast<size_t>(last - first), o, confined_spare);
  }
  // An environment's setup (daemon/env_store.h), started as a session's shell would be.
  if (argc == i + 2 && std::strcmp(argv[i], "--setup") == 0) return sbsh::wrapper::run_setup(argv[i + 1], o);
  if (argc != i + 1 || std::strcmp(argv[i], "--help") == 0) return usage();
  return sbsh::wrapper::run(argv[i], o);
}
