#include "daemon/lease_page.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "ipc/protocol.h"
#include "ipc/shell_channel.h"

#if defined(__SANITIZE_ADDRESS__)
#define SBSH_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SBSH_ASAN 1
#endif
#endif
#ifdef SBSH_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace sbsh::daemon {

namespace {

// Reads of what the builtin writes, as it writes them (a field of the shared page).
template <typename T>
T load(const T& field, std::memory_order order = std::memory_order_relaxed) {
  return std::atomic_ref<T>(const_cast<T&>(field)).load(order);
}

// A text's start as the builtin wrote it (the running run's or a record's), and whether it
// says no more than the page holds and the whole text had.
struct text_start {
  char bytes[SBSH_RECORD_TEXT];
  uint32_t len = 0;
  uint64_t full = 0;
  [[nodiscard]] bool fits() const { return len <= SBSH_RECORD_TEXT && len <= full; }
};
template <typename From>
text_start copy_text(const From& from) {
  text_start t;
  t.len = load(from.text_len);
  t.full = load(from.full_len);
  std::memcpy(t.bytes, from.text, sizeof t.bytes);
  return t;
}

// How often a reading tries again while the builtin writes the running run (a few
// instructions each time): beyond, it was stopped mid-write.
constexpr int kTries = 64;

}  // namespace

result<std::pair<lease_page, unique_fd>> lease_page::make() {
  unique_fd fd(::memfd_create("sbsh-lease-records", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd || ::ftruncate(fd.get(), sizeof(sbsh_record_page)) != 0 ||
      ::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return make_error(ipc::errc::internal, fmt::format("cannot make a lease's record page: {}", std::strerror(errno)));
  auto* p = map(fd.get());
  if (p == nullptr)
    return make_error(ipc::errc::internal, fmt::format("cannot map a lease's record page: {}", std::strerror(errno)));
  p->magic = SBSH_RECORD_MAGIC;
  p->version = SBSH_CHANNEL_VERSION;
  return std::pair<lease_page, unique_fd>(lease_page(p), std::move(fd));
}

sbsh_record_page* lease_page::map(int fd) {
  void* m = ::mmap(nullptr, sizeof(sbsh_record_page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return nullptr;
#ifdef SBSH_ASAN
  // AddressSanitizer does not clear the shadow of an address range mapped anew: a fake stack
  // it unmapped there leaves its poison behind, and the page's reads would be reported.
  ASAN_UNPOISON_MEMORY_REGION(m, sizeof(sbsh_record_page));
#endif
  return static_cast<sbsh_record_page*>(m);
}

lease_page& lease_page::operator=(lease_page&& o) noexcept {
  if (this != &o) {
    if (p_ != nullptr) ::munmap(p_, sizeof *p_);
    p_ = std::exchange(o.p_, nullptr);
    last_seq_ = o.last_seq_;
    failed_ = o.failed_;
    timed_out_ = o.timed_out_;
    counted_ = o.counted_;
  }
  return *this;
}

lease_page::~lease_page() {
  if (p_ != nullptr) ::munmap(p_, sizeof *p_);
}

lease_page::reading lease_page::running(run* out) const {
  const sbsh_record_page& p = *p_;
  for (int i = 0; i < kTries; ++i) {
    uint64_t before = load(p.changes, std::memory_order_acquire);
    if ((before & 1) != 0) continue;
    run r;
    r.seq = load(p.run_seq);
    r.mark.last_pid = static_cast<pid_t>(load(p.since_pid));
    r.mark.start_ticks = load(p.since_ticks);
    r.started_us = load(p.started_us);
    r.deadline_us = load(p.deadline_us);
    text_start text = copy_text(p);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (load(p.changes) != before) continue;
    // A run whose record was read already has ended (the builtin clears run_seq just after).
    if (r.seq == 0 || r.seq == last_seq_) {
      *out = {};
      return reading::ok;
    }
    int64_t pid = load(p.since_pid);
    if (!text.fits() || pid < 0 || pid > INT32_MAX || r.seq < last_seq_ ||
        (r.deadline_us != 0 && r.deadline_us < r.started_us))
      return reading::bad;
    r.text.assign(text.bytes, text.len);
    r.full_len = text.full;
    *out = std::move(r);
    return reading::ok;
  }
  return reading::unsettled;
}

lease_page::reading lease_page::take_ended(std::vector<record>* out, tally* sum) {
  sbsh_record_page& p = *p_;
  *sum = {};
  uint64_t read = load(p.read);
  uint64_t ended = load(p.ended, std::memory_order_acquire);
  if (ended < read) return reading::bad;
  sum->ended = ended - read;
  if (ended - read > SBSH_RECORD_RING) {
    sum->lost = ended - read - SBSH_RECORD_RING;
    read = ended - SBSH_RECORD_RING;
  }
  size_t first = out->size();
  std::vector<bool> torn;
  for (uint64_t i = read; i < ended; ++i) {
    const sbsh_record& e = p.ring[i % SBSH_RECORD_RING];
    record r;
    // The builtin clears a slot's seq while it writes the slot: a seq that is 0 or changed
    // while the record was copied means it was being written over.
    uint64_t seq = load(e.seq, std::memory_order_acquire);
    r.seq = seq;
    r.exit_value = load(e.exit_value);
    r.exit_signal = load(e.exit_signal);
    r.flags = load(e.flags);
    r.started_us = load(e.started_us);
    r.ended_us = load(e.ended_us);
    r.failed_total = load(e.failed_total);
    r.timed_out_total = load(e.timed_out_total);
    text_start text = copy_text(e);
    std::atomic_thread_fence(std::memory_order_acquire);
    bool over = seq == 0 || load(e.seq) != seq;
    if (!over && (!text.fits() || r.exit_signal < 0 || r.exit_signal > 64)) return reading::bad;
    r.text.assign(text.bytes, over ? 0 : text.len);
    r.full_len = text.full;
    out->push_back(std::move(r));
    torn.push_back(over);
  }
  // Record i was written over whole once record i + RING was (then `ended` passed it).
  uint64_t now = load(p.ended, std::memory_order_acquire);
  if (now < ended) return reading::bad;
  size_t kept = first;
  for (uint64_t i = read; i < ended; ++i) {
    size_t at = first + static_cast<size_t>(i - read);
    if (torn[static_cast<size_t>(i - read)] || now > i + SBSH_RECORD_RING) {
      ++sum->lost;
      continue;
    }
    // Each run's number is its holder's, and grows: one that does not was not written by the
    // builtin.
    if ((*out)[at].seq <= last_seq_ || !add_totals((*out)[at], i, sum)) return reading::bad;
    last_seq_ = (*out)[at].seq;
    if (kept != at) (*out)[kept] = std::move((*out)[at]);
    ++kept;
  }
  out->resize(kept);
  std::atomic_ref<uint64_t>(p.read).store(ended, std::memory_order_release);
  return reading::ok;
}

bool lease_page::add_totals(const record& r, uint64_t index, tally* sum) {
  uint64_t runs = index + 1 - counted_;  // since the last record whose totals were taken
  if (index < counted_ || r.failed_total < failed_ || r.failed_total - failed_ > runs ||
      r.timed_out_total < timed_out_ || r.timed_out_total - timed_out_ > runs)
    return false;
  sum->failed += r.failed_total - failed_;
  sum->timed_out += r.timed_out_total - timed_out_;
  failed_ = r.failed_total;
  timed_out_ = r.timed_out_total;
  counted_ = index + 1;
  return true;
}

void lease_page::stop(uint64_t seq, uint32_t why) {
  std::atomic_ref<uint32_t>(p_->stop_flags).store(why, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(p_->stop_seq).store(seq, std::memory_order_release);
}

}  // namespace sbsh::daemon
