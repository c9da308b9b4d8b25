// sbsh-wrapper: started by sbshd, one per session. See wrapper.h.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "wrapper/tree_copy.h"
#include "wrapper/wrapper.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: sbsh-wrapper [--dir DIR] [--adopt-timeout MS] [--limit NAME=SOFT:HARD]... [--rule rw|rx|ro:PATH]...\n"
               "                    [--ns pid|net|pid,net] [--as UID:GID] [--cgroup DIR] SESSION | --spare PADDING | --setup TEXT\n"
               "sbsh-wrapper is started by sbshd for each session; it is not meant to be run by hand.\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // sbshd also runs the wrapper to copy a snapshot's directory (tree_copy.h).
  if (argc >= 2 && std::strcmp(argv[1], "--copy-tree") == 0) return sbsh::wrapper::copy_tree_main(argc - 2, argv + 2);
  sbsh::wrapper::options o;
  int i = 1;
  for (; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--dir") == 0) {
      o.dir = argv[i + 1];
    } else if (std::strcmp(argv[i], "--limit") == 0) {
      auto l = sbsh::parse_limit(argv[i + 1]);
      if (!l) {
        std::fprintf(stderr, "sbsh-wrapper: %s\n", l.err().message.c_str());
        return 2;
      }
      o.limits.push_back(*l);
    } else if (std::strcmp(argv[i], "--rule") == 0) {
      auto r = sbsh::confine::parse_rule(argv[i + 1]);
      if (!r) {
        std::fprintf(stderr, "sbsh-wrapper: %s\n", r.err().message.c_str());
        return 2;
      }
      o.rules.push_back(*r);
    } else if (std::strcmp(argv[i], "--ns") == 0) {
      std::string_view ns = argv[i + 1];
      o.pid_ns = ns == "pid" || ns == "pid,net";
      o.net_ns = ns == "net" || ns == "pid,net";
      if (!o.pid_ns && !o.net_ns) return usage();
    } else if (std::strcmp(argv[i], "--as") == 0) {
      unsigned long uid = 0, gid = 0;
      char* end = nullptr;
      uid = std::strtoul(argv[i + 1], &end, 10);
      if (end == argv[i + 1] || *end != ':') return usage();
      const char* g = end + 1;
      gid = std::strtoul(g, &end, 10);
      if (end == g || *end != '\0' || uid >= 0xffffffffUL || gid >= 0xffffffffUL) return usage();
      o.confine_uid = static_cast<uid_t>(uid);
      o.confine_gid = static_cast<gid_t>(gid);
    } else if (std::strcmp(argv[i], "--cgroup") == 0) {
      o.cgroup = argv[i + 1];
      if (o.cgroup.empty() || o.cgroup[0] != '/') return usage();
    } else if (std::strcmp(argv[i], "--adopt-timeout") == 0) {
      char* end = nullptr;
      o.adopt_timeout_ms = std::strtoull(argv[i + 1], &end, 10);
      if (end == argv[i + 1] || *end != '\0') return usage();
    } else {
      break;
    }
  }
  if (argc == i + 2 && std::strcmp(argv[i], "--spare") == 0) {
    // The arguments' memory is contiguous: /proc/PID/cmdline, and so ps, show it. It is
    // rewritten to show the session's name once claimed; the padding reserves room for it.
    // Only "--spare PADDING" is rewritten: ps then shows a claimed spare's options and name as
    // it shows those of a wrapper started for its session.
    char* first = argv[i];
    char* last = argv[i + 1] + std::strlen(argv[i + 1]);
    std::memset(argv[i + 1], 0, static_cast<size_t>(last - argv[i + 1]));
    return sbsh::wrapper::run_spare(first, static_cast<size_t>(last - first), o);
  }
  // An environment's setup (daemon/env_store.h), started as a session's shell would be.
  if (argc == i + 2 && std::strcmp(argv[i], "--setup") == 0) return sbsh::wrapper::run_setup(argv[i + 1], o);
  if (argc != i + 1 || std::strcmp(argv[i], "--help") == 0) return usage();
  return sbsh::wrapper::run(argv[i], o);
}
