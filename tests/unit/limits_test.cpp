// Parsing and canonical form of session resource limits (common/limits.h).
#include "common/limits.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "common/cgroup.h"

#include <gtest/gtest.h>

namespace sbsh::ipc::limits_tests {

std::string canonical(std::string_view spec) {
  auto l = parse_limit(spec);
  return l ? format_limit(*l) : "error: " + l.err().message;
}

TEST(limits, OneValueSetsBothAndUnitsScale) {
  EXPECT_EQ(canonical("nofile=256"), "nofile=256:256");
  EXPECT_EQ(canonical("as=2G"), "as=2147483648:2147483648");
  EXPECT_EQ(canonical("fsize=512k"), "fsize=524288:524288");
  EXPECT_EQ(canonical("stack=8M:infinity"), "stack=8388608:infinity");
  EXPECT_EQ(canonical("cpu=90s:2m"), "cpu=90:120");
  EXPECT_EQ(canonical("core=0"), "core=0:0");
  EXPECT_EQ(canonical("nproc=unlimited"), "nproc=infinity:infinity");
  auto l = parse_limit("memlock=1T:infinity");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->resource, RLIMIT_MEMLOCK);
  EXPECT_EQ(l->value.rlim_cur, rlim_t{1} << 40);
  EXPECT_EQ(l->value.rlim_max, RLIM_INFINITY);
}

TEST(limits, TheCanonicalFormReadsBackToTheSameLimit) {
  for (const char* s : {"as=1:2", "data=infinity:infinity", "cpu=3600:3600", "nofile=1048576:1048576"})
    EXPECT_EQ(canonical(canonical(s)), s);
}

TEST(limits, BadSpecsSayWhatIsAllowed) {
  EXPECT_NE(canonical("rss=1").find("is not a limit: use NAME=VALUE with NAME one of as, core"), std::string::npos);
  EXPECT_NE(canonical("nofile").find("is not a limit"), std::string::npos);
  EXPECT_NE(canonical("nofile=").find("'' is not SOFT:HARD or one value (a number, or infinity)"), std::string::npos);
  EXPECT_NE(canonical("nofile=1K").find("a number"), std::string::npos);  // counts take no suffix
  EXPECT_NE(canonical("as=1X").find("bytes, or with K, M, G or T"), std::string::npos);
  EXPECT_NE(canonical("cpu=1d").find("seconds, or with s, m or h"), std::string::npos);
  EXPECT_NE(canonical("as=-1").find("is not SOFT:HARD"), std::string::npos);
  EXPECT_NE(canonical("as=1:2:3").find("is not SOFT:HARD"), std::string::npos);
  EXPECT_NE(canonical("as=99999999999999999999").find("is not SOFT:HARD"), std::string::npos);
  EXPECT_NE(canonical("as=20000000T").find("is not SOFT:HARD"), std::string::npos);  // overflows
  EXPECT_EQ(canonical("nofile=10:5"), "error: limit nofile: the soft limit 10 is above the hard limit 5");
  EXPECT_EQ(canonical("nofile=infinity:5"), "error: limit nofile: the soft limit infinity is above the hard limit 5");
}


// A cgroup's memory.events, read without a stream: the count of its OOM kills.
TEST(limits, TheOomKillsOfACgroupAreReadFromItsEvents) {
  char tmpl[] = "/tmp/sbsh-cgroup-test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  EXPECT_EQ(cgroup::oom_kills(dir), 0u);  // no file: none
  std::ofstream(dir + "/memory.events") << "low 0\nhigh 0\nmax 12\noom 3\noom_kill 5\noom_group_kill 1\n";
  EXPECT_EQ(cgroup::oom_kills(dir), 5u);
  std::ofstream(dir + "/memory.events") << "oom_kill 7";  // no newline at the end
  EXPECT_EQ(cgroup::oom_kills(dir), 7u);
  ::unlink((dir + "/memory.events").c_str());
  ::rmdir(dir.c_str());
}

}  // namespace sbsh::ipc::limits_tests
