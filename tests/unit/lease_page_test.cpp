// sbshd's reading of a lease's record page (daemon/lease_page.h): what the builtin writes is
// read as written, and a page written by anything else (a length beyond the page, totals that
// shrink, numbers that go back) is reported bad, which has sbshd replace the shell. The page
// is written here as the builtin writes it (shell/sbsh_builtin.c, record_start/record_end),
// through a mapping of the memfd sbshd hands the builtin.
#include "daemon/lease_page.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ipc/shell_channel.h"

namespace sbsh::daemon::lease_page_tests {

// The builtin's record_start: run `seq` of `text` starts.
void start(sbsh_record_page& p, uint64_t seq, const std::string& text, uint64_t deadline_us = 0) {
  p.changes += 1;
  p.run_seq = seq;
  p.since_pid = 100;
  p.since_ticks = 5;
  p.started_us = 1000;
  p.deadline_us = deadline_us;
  p.full_len = text.size();
  p.text_len = static_cast<uint32_t>(std::min<size_t>(text.size(), SBSH_RECORD_TEXT));
  std::memcpy(p.text, text.data(), p.text_len);
  p.changes += 1;
}

// The builtin's record_end: run `seq` ends with `value`.
void end(sbsh_record_page& p, uint64_t seq, int value, uint32_t flags = 0) {
  uint64_t n = p.ended;
  sbsh_record& e = p.ring[n % SBSH_RECORD_RING];
  const sbsh_record* before = n > 0 ? &p.ring[(n - 1) % SBSH_RECORD_RING] : nullptr;
  e.seq = 0;
  e.exit_value = value;
  e.exit_signal = 0;
  e.flags = flags;
  e.failed_total = (before != nullptr ? before->failed_total : 0) + (value != 0 ? 1 : 0);
  e.timed_out_total = (before != nullptr ? before->timed_out_total : 0) + ((flags & SBSH_STATUS_TIMED_OUT) != 0 ? 1 : 0);
  e.started_us = p.run_seq == seq ? p.started_us : 0;
  e.ended_us = 2000;
  e.full_len = p.run_seq == seq ? p.full_len : 0;
  e.text_len = p.run_seq == seq ? p.text_len : 0;
  std::memcpy(e.text, p.text, e.text_len);
  e.seq = seq;
  p.ended = n + 1;
  p.changes += 1;
  p.run_seq = 0;
  p.changes += 1;
}

void run(sbsh_record_page& p, uint64_t seq, const std::string& text, int value, uint32_t flags = 0) {
  start(p, seq, text);
  end(p, seq, value, flags);
}

// A new page as sbshd reads it, and as the builtin maps it to write it.
struct shared_page {
  shared_page(lease_page r, sbsh_record_page* p) : reader(std::move(r)), page(p) {}
  shared_page(const shared_page&) = delete;
  shared_page& operator=(const shared_page&) = delete;
  lease_page reader;
  sbsh_record_page* page = nullptr;
  static std::unique_ptr<shared_page> make() {
    auto made = lease_page::make();
    if (!made) return nullptr;
    auto* p = lease_page::map(made->second.get());
    if (p == nullptr) return nullptr;
    return std::make_unique<shared_page>(std::move(made->first), p);
  }
  ~shared_page() { ::munmap(page, sizeof *page); }
};

class lease_page_test : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(shared_) << "cannot make a record page"; }
  lease_page::reading take(std::vector<lease_page::record>* out, lease_page::tally* sum) {
    return shared_->reader.take_ended(out, sum);
  }
  std::unique_ptr<shared_page> shared_ = shared_page::make();
  lease_page& reader_ = shared_->reader;
  sbsh_record_page& page_ = *shared_->page;
};

TEST_F(lease_page_test, RunsAreReadAsTheBuiltinWroteThem) {
  lease_page::run now;
  ASSERT_EQ(reader_.running(&now), lease_page::reading::ok);
  EXPECT_EQ(now.seq, 0u);
  start(page_, 1, "sleep 5", 9000);
  ASSERT_EQ(reader_.running(&now), lease_page::reading::ok);
  EXPECT_EQ(now.seq, 1u);
  EXPECT_EQ(now.text, "sleep 5");
  EXPECT_EQ(now.deadline_us, 9000u);
  EXPECT_EQ(now.mark.last_pid, 100);
  end(page_, 1, 0);
  run(page_, 2, "false", 1);
  run(page_, 3, "sleep 9", 143, SBSH_STATUS_TIMED_OUT);
  std::vector<lease_page::record> out;
  lease_page::tally sum;
  ASSERT_EQ(take(&out, &sum), lease_page::reading::ok);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].text, "sleep 5");
  EXPECT_EQ(out[1].exit_value, 1);
  EXPECT_EQ(out[2].flags, SBSH_STATUS_TIMED_OUT);
  EXPECT_EQ(sum.ended, 3u);
  EXPECT_EQ(sum.lost, 0u);
  EXPECT_EQ(sum.failed, 2u);
  EXPECT_EQ(sum.timed_out, 1u);
  EXPECT_EQ(page_.read, 3u);
  // Nothing new: nothing more.
  out.clear();
  ASSERT_EQ(take(&out, &sum), lease_page::reading::ok);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(sum.ended, 0u);
  EXPECT_EQ(reader_.running(&now), lease_page::reading::ok);
  EXPECT_EQ(now.seq, 0u);
}

// More runs than the ring holds between two readings: the oldest are lost to the history,
// but not to the counts, which come from the totals each record carries.
TEST_F(lease_page_test, RunsWrittenOverAreCountedWithTheirFailures) {
  constexpr uint64_t kRuns = SBSH_RECORD_RING + 36;
  for (uint64_t seq = 1; seq <= kRuns; ++seq) run(page_, seq, "r", seq % 3 == 0 ? 2 : 0);
  std::vector<lease_page::record> out;
  lease_page::tally sum;
  ASSERT_EQ(take(&out, &sum), lease_page::reading::ok);
  EXPECT_EQ(out.size(), SBSH_RECORD_RING);
  EXPECT_EQ(out.front().seq, kRuns - SBSH_RECORD_RING + 1);
  EXPECT_EQ(sum.ended, kRuns);
  EXPECT_EQ(sum.lost, kRuns - SBSH_RECORD_RING);
  EXPECT_EQ(sum.failed, kRuns / 3);
  // The next reading counts from there.
  run(page_, kRuns + 1, "false", 1);
  out.clear();
  ASSERT_EQ(take(&out, &sum), lease_page::reading::ok);
  EXPECT_EQ(sum.ended, 1u);
  EXPECT_EQ(sum.failed, 1u);
}

// A run the builtin is writing (its sequence count odd) is asked for again later.
TEST_F(lease_page_test, ARunBeingWrittenIsUnsettled) {
  start(page_, 1, "true");
  page_.changes += 1;
  lease_page::run now;
  EXPECT_EQ(reader_.running(&now), lease_page::reading::unsettled);
  page_.changes += 1;
  EXPECT_EQ(reader_.running(&now), lease_page::reading::ok);
  EXPECT_EQ(now.seq, 1u);
}

TEST_F(lease_page_test, ARunningRunThatTheBuiltinCouldNotHaveWrittenIsBad) {
  lease_page::run now;
  start(page_, 1, "true");
  page_.text_len = SBSH_RECORD_TEXT + 1;  // beyond the page
  EXPECT_EQ(reader_.running(&now), lease_page::reading::bad);
  start(page_, 1, "true");
  page_.text_len = 3;  // more than the whole text
  page_.full_len = 2;
  EXPECT_EQ(reader_.running(&now), lease_page::reading::bad);
  start(page_, 1, "true", /*deadline_us=*/10);  // before its start
  EXPECT_EQ(reader_.running(&now), lease_page::reading::bad);
  start(page_, 1, "true");
  page_.since_pid = -5;
  EXPECT_EQ(reader_.running(&now), lease_page::reading::bad);
}

TEST_F(lease_page_test, ARecordThatTheBuiltinCouldNotHaveWrittenIsBad) {
  struct forgery {
    const char* what;
    void (*forge)(sbsh_record_page& p);
  };
  const forgery forgeries[] = {
      {"a text beyond the page", [](sbsh_record_page& p) { p.ring[1].text_len = SBSH_RECORD_TEXT + 1; }},
      {"a signal beyond the last", [](sbsh_record_page& p) { p.ring[1].exit_signal = 99; }},
      {"a run's number that goes back", [](sbsh_record_page& p) { p.ring[1].seq = 1; }},
      {"a total that shrinks", [](sbsh_record_page& p) { p.ring[1].failed_total = 0; }},
      {"a total that grows by more than one a run", [](sbsh_record_page& p) { p.ring[1].timed_out_total = 5; }},
      {"more failures than runs", [](sbsh_record_page& p) { p.ring[0].failed_total = 2; }},
      {"fewer ended than read", [](sbsh_record_page& p) { p.read = 3; }},
  };
  for (const auto& f : forgeries) {
    auto fresh = shared_page::make();
    ASSERT_TRUE(fresh);
    run(*fresh->page, 1, "false", 1);
    run(*fresh->page, 2, "sleep 9", 143, SBSH_STATUS_TIMED_OUT);
    f.forge(*fresh->page);
    std::vector<lease_page::record> out;
    lease_page::tally sum;
    EXPECT_EQ(fresh->reader.take_ended(&out, &sum), lease_page::reading::bad) << f.what;
  }
}

}  // namespace sbsh::daemon::lease_page_tests
