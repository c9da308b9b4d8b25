// Background processes leave nothing behind once they are forgotten: no descriptor in sbshd
// (it closes a log file when the last writer of its pipe is gone) and no log file (it
// deletes those of processes dropped from the table, and at start those of processes the
// table does not list).
#include <filesystem>
#include <fstream>

#include "fixture.h"

namespace sbsh::test::leak_tests {

size_t count_entries(const std::string& path) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator(path, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    ++n;
  return n;
}

class leak_test : public daemon_test {
 protected:
  // The table keeps 1000 finished processes: fewer here, to get past it quickly.
  leak_test() { daemon_args = {"--keep-finished", "20"}; }
  size_t fds() { return open_fds(daemon_pid); }
  void start_and_finish(int n) {
    auto c = conn();
    for (int i = 0; i < n; ++i) {
      client::start_options o;
      o.session = "bg";
      o.command = "echo out; echo err >&2";
      auto p = c.start(o);
      ASSERT_TRUE(p.ok()) << p.err().message;
      ASSERT_TRUE(c.wait(std::to_string(p->id), std::chrono::seconds(20)).ok());
    }
  }
};

TEST_F(leak_test, FinishedProcessesLeaveNoDescriptorsOrLogs) {
  start_and_finish(3);  // the session and its shell exist from here on
  size_t before = fds();
  start_and_finish(60);
  // Each finished process used to keep its two log files open, and every log stayed. The
  // last one's pipes may still be draining when its wait returns: they close soon after.
  EXPECT_TRUE(wait_until([&] { return fds() <= before + 2; }, std::chrono::seconds(10)))
      << fds() << " descriptors, " << before << " before: sbshd holds those of finished processes";
  // They are deleted off the loop, just after the processes are dropped.
  EXPECT_TRUE(wait_until([&] { return count_entries(state + "/procs") <= size_t{2} * 20; }, std::chrono::seconds(10)))
      << count_entries(state + "/procs") << " logs: those of processes no longer listed were kept";
  auto c = conn();
  auto all = c.processes(true);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 20u);
  for (const auto& p : *all) EXPECT_TRUE(std::filesystem::exists(p.log_path)) << p.log_path;
}

TEST_F(leak_test, LogsOfProcessesTheTableDoesNotListAreDeletedAtStart) {
  start_and_finish(2);
  stop_daemon();
  // A table lost (or written by an sbshd that kept every log): its logs are strays.
  std::filesystem::remove(state + "/procs.msgpack");
  for (const char* f : {"/procs/77.out", "/procs/77.err.1"}) std::ofstream(state + f) << "stale\n";
  start_daemon();
  EXPECT_EQ(count_entries(state + "/procs"), 0u);
  // A new process with a stray's id starts a log of its own.
  start_and_finish(1);
  auto c = conn();
  std::string out;
  ASSERT_TRUE(c.logs("1", {}, [&](client::stream s, std::string_view d) {
                 if (s == client::stream::out) out += d;
               }).ok());
  EXPECT_EQ(out, "out\n");
}

}  // namespace sbsh::test::leak_tests
