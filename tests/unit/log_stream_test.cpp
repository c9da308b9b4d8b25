// daemon/capped_log.cpp and daemon/log_stream.cpp: logs kept within their cap, and logs
// replies sent from the files at the pace of their reader.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/capped_log.h"
#include "daemon/log_stream.h"
#include "ipc/bounds.h"
#include "ipc/frame.h"

namespace sbsh::daemon::log_stream_tests {

// A client that keeps every frame it is sent and reads none until told to.
struct fake_client {
  std::string out, err;
  size_t queued = 0;
  log_stream::client as_client() {
    return {[this] { return queued; },
            [this](std::string frame) {
              queued += frame.size();
              auto m = ipc::message::parse(frame.data() + 4, frame.size() - 4);
              ASSERT_TRUE(m.ok());
              (*m->get_u64("stream").value() == ipc::kStdout ? out : err) += *m->get_bin("data").value();
            }};
  }
  // Pumps until done, reading everything whenever asked to wait.
  void read_all(log_stream& s) {
    for (;;) {
      auto p = s.pump(as_client());
      if (p == log_stream::progress::done) return;
      queued = 0;
    }
  }
};

class log_test : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sbsh-log.XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  void TearDown() override { (void)std::system(("rm -rf " + dir).c_str()); }
  std::string dir;
};

void write_lines(capped_log& log, int from, int to) {
  for (int i = from; i < to; ++i) {
    std::string line = "line " + std::to_string(i) + "\n";
    log.append(line.data(), line.size());
  }
}

TEST_F(log_test, KeepsTheNewestPartWithinTheCap) {
  capped_log log;
  ASSERT_TRUE(log.open(dir + "/p.out", 1000).ok());
  write_lines(log, 0, 1000);
  fake_client all;
  log_stream everything(1, 1, 1, {{dir + "/p.out", ipc::kStdout}}, 0, false);
  all.read_all(everything);
  EXPECT_LE(all.out.size(), 1000u);
  EXPECT_GE(all.out.size(), 500u);
  EXPECT_TRUE(all.out.ends_with("line 999\n"));
  fake_client tail;
  log_stream last(1, 1, 1, {{dir + "/p.out", ipc::kStdout}}, 2, false);
  tail.read_all(last);
  EXPECT_EQ(tail.out, "line 998\nline 999\n");
  // More lines than there are: all of them; the two streams apart.
  capped_log err;
  ASSERT_TRUE(err.open(dir + "/p.err", 1000).ok());
  err.append("e1\ne2", 5);
  fake_client both;
  log_stream two(1, 1, 1, {{dir + "/p.out", ipc::kStdout}, {dir + "/p.err", ipc::kStderr}}, 50, false);
  both.read_all(two);
  EXPECT_EQ(both.err, "e1\ne2");
  EXPECT_TRUE(both.out.starts_with("line 9"));
}

// Only kLogAhead is queued to a client that does not read, however long the log.
TEST_F(log_test, SendsNoFasterThanItsClientReads) {
  capped_log log;
  ASSERT_TRUE(log.open(dir + "/p.out", 64u << 20).ok());
  std::string block(1 << 20, 'x');
  for (int i = 0; i < 20; ++i) log.append(block.data(), block.size());
  log_stream s(1, 1, 1, {{dir + "/p.out", ipc::kStdout}}, 0, false);
  fake_client c;
  EXPECT_EQ(s.pump(c.as_client()), log_stream::progress::wait_for_drain);
  EXPECT_LE(c.queued, ipc::kLogAhead + ipc::kMaxChunk + 64);
  // Reading it all takes many turns, none queueing more than that.
  size_t turns = 0;
  for (;;) {
    c.queued = 0;
    ++turns;
    auto p = s.pump(c.as_client());
    EXPECT_LE(c.queued, ipc::kLogAhead + ipc::kMaxChunk + 64);
    if (p == log_stream::progress::done) break;
  }
  EXPECT_EQ(c.out.size(), 20u << 20);
  EXPECT_GE(turns, 19u);
}

// Without follow, what was logged when the request came; with follow, also what is logged
// while it is read, across a rotation of the file.
TEST_F(log_test, FollowReadsWhatGrowsAndRotates) {
  capped_log log;
  ASSERT_TRUE(log.open(dir + "/p.out", 400).ok());
  write_lines(log, 0, 5);  // 35 bytes
  log_stream fixed(1, 1, 1, {{dir + "/p.out", ipc::kStdout}}, 0, false);
  log_stream growing(1, 1, 1, {{dir + "/p.out", ipc::kStdout}}, 0, true);
  write_lines(log, 5, 30);  // past half the cap: the file rotates
  fake_client a, b;
  a.read_all(fixed);
  b.read_all(growing);
  EXPECT_EQ(a.out, "line 0\nline 1\nline 2\nline 3\nline 4\n");
  EXPECT_TRUE(b.out.starts_with("line 0\n")) << b.out;
  EXPECT_TRUE(b.out.ends_with("line 29\n")) << b.out;
  // Done means read to the end now: a follower takes it from here.
  EXPECT_EQ(growing.pump(b.as_client()), log_stream::progress::done);
}

// A source's skip leaves out that many bytes of what the files keep, from the oldest file on
// (an offset into a kept command's output, less what the cap dropped).
TEST_F(log_test, ASkipLeavesOutTheFirstBytesKept) {
  std::string path = dir + "/c.out";
  {
    std::ofstream older(path + ".1");
    older << "abcdef";
    std::ofstream newer(path);
    newer << "ghij";
  }
  for (const auto& [skip, want] : std::vector<std::pair<uint64_t, std::string>>{
           {0, "abcdefghij"}, {3, "defghij"}, {6, "ghij"}, {8, "ij"}, {10, ""}, {99, ""}}) {
    fake_client c;
    log_stream s(1, 1, 1, {{path, ipc::kStdout, skip}}, 0, false);
    c.read_all(s);
    EXPECT_EQ(c.out, want) << "skip " << skip;
  }
}

}  // namespace sbsh::daemon::log_stream_tests
