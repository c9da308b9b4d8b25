// The refusals that name the resource that ran out (daemon/capacity.h).
#include "daemon/capacity.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <string>

namespace sbsh::daemon::capacity_tests {

TEST(Capacity, EachResourceThatRunsOutIsNamedWithItsFigure) {
  std::string fds = resource_failure(EMFILE, "create its control socket");
  EXPECT_EQ(fds.rfind("cannot create its control socket: sbshd holds ", 0), 0u) << fds;
  EXPECT_NE(fds.find("RLIMIT_NOFILE"), std::string::npos) << fds;
  EXPECT_NE(fds.find("LimitNOFILE="), std::string::npos) << fds;
  std::string procs = spawn_failure(EAGAIN);
  EXPECT_NE(procs.find("RLIMIT_NPROC"), std::string::npos) << procs;
  EXPECT_NE(procs.find("kernel.pid_max"), std::string::npos) << procs;
  std::string mem = spawn_failure(ENOMEM);
  EXPECT_EQ(mem.rfind("cannot start a process: out of memory: ", 0), 0u) << mem;
  EXPECT_NE(mem.find(" MiB available"), std::string::npos) << mem;
  EXPECT_NE(mem.find("an idle session takes about " + std::to_string(kIdleSessionKb) + " kB"), std::string::npos) << mem;
  EXPECT_NE(mem.find("MemoryMax="), std::string::npos) << mem;
  // Anything else keeps the system's own reason.
  EXPECT_EQ(spawn_failure(ENOENT), "No such file or directory");
}

}  // namespace sbsh::daemon::capacity_tests
