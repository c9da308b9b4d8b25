// Streaming a logs reply from the files; see log_stream.h.
#include "daemon/log_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "ipc/bounds.h"
#include "ipc/frame.h"
#include "ipc/messages.h"

namespace sbsh::daemon {

namespace {

uint64_t size_of(int fd) {
  struct stat st{};
  return ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// Where the last `lines` lines of the files start: the index of the file and the offset in
// it. A final newline ends the last line rather than starting an empty one.
std::pair<size_t, uint64_t> tail_start(const std::vector<std::pair<int, uint64_t>>& files, uint64_t lines) {
  std::vector<char> buf(size_t{64} * 1024);
  uint64_t seen = 0;
  bool last_byte = true;
  for (size_t f = files.size(); f-- > 0;) {
    uint64_t pos = files[f].second;
    while (pos > 0) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), pos));
      if (::pread(files[f].first, buf.data(), n, static_cast<off_t>(pos - n)) != static_cast<ssize_t>(n))
        return {f, pos};
      for (size_t i = n; i-- > 0;) {
        bool newline = buf[i] == '\n';
        if (newline && !last_byte && ++seen == lines) return {f, pos - n + i + 1};
        last_byte = false;
      }
      pos -= n;
    }
  }
  return {0, 0};
}

}  // namespace

log_stream::log_stream(uint64_t serial, uint64_t req, uint64_t proc, const std::vector<source>& sources,
                       uint64_t tail_lines, bool follow)
    : serial_(serial), req_(req), proc_(proc), follow_(follow) {
  for (const auto& src : sources) {
    std::vector<part> files;
    for (bool newest : {false, true}) {
      std::string path = newest ? src.path : src.path + ".1";
      unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd && !(newest && follow)) continue;
      uint64_t size = fd ? size_of(fd.get()) : 0;
      files.push_back(part{std::move(fd), src.stream_no, 0, size, newest && follow, src.path});
    }
    for (uint64_t left = src.skip; left > 0 && !files.empty();) {
      part& f = files.front();
      if (left >= f.end && !f.growing) {
        left -= f.end;
        files.erase(files.begin());
        continue;
      }
      f.pos = std::min(left, f.end);
      break;
    }
    if (tail_lines > 0) {
      std::vector<std::pair<int, uint64_t>> spans;
      spans.reserve(files.size());
      for (auto& f : files) spans.emplace_back(f.fd.get(), f.end);
      auto [first, off] = tail_start(spans, tail_lines);
      files.erase(files.begin(), files.begin() + static_cast<ptrdiff_t>(first));
      if (!files.empty()) files.front().pos = off;
    }
    for (auto& f : files) parts_.push_back(std::move(f));
  }
}

bool log_stream::has_more(part& p) {
  if (!p.growing) return p.pos < p.end;
  if (p.fd && size_of(p.fd.get()) > p.pos) return true;
  struct stat now{}, held{};
  if (::stat(p.path.c_str(), &now) != 0) return false;
  if (p.fd && ::fstat(p.fd.get(), &held) == 0 && held.st_ino == now.st_ino && held.st_dev == now.st_dev) return false;
  p.fd = unique_fd(::open(p.path.c_str(), O_RDONLY | O_CLOEXEC));
  p.pos = 0;
  return p.fd.valid();
}

log_stream::progress log_stream::pump(const client& c) {
  auto buf = std::make_unique_for_overwrite<char[]>(ipc::kMaxChunk);
  size_t burst = 0;
  for (;;) {
    while (next_ < parts_.size() && !has_more(parts_[next_])) ++next_;
    if (next_ == parts_.size()) {
      // Growing files may have grown while others were read: done only when none has.
      auto again = std::find_if(parts_.begin(), parts_.end(), [](part& p) { return p.growing && has_more(p); });
      if (again == parts_.end()) return progress::done;
      next_ = static_cast<size_t>(again - parts_.begin());
    }
    if (c.queued_bytes() >= ipc::kLogAhead) return progress::wait_for_drain;
    if (burst >= ipc::kLogBurst) return progress::more;
    part& p = parts_[next_];
    size_t want = ipc::kMaxChunk;
    if (!p.growing) want = static_cast<size_t>(std::min<uint64_t>(want, p.end - p.pos));
    ssize_t n = ::pread(p.fd.get(), buf.get(), want, static_cast<off_t>(p.pos));
    if (n <= 0) {  // unreadable, or shorter than it was: nothing more to send from it
      p.growing = false;
      p.end = p.pos;
      continue;
    }
    p.pos += static_cast<uint64_t>(n);
    burst += static_cast<size_t>(n);
    c.send(ipc::encode(ipc::msg::output{p.stream_no, {std::string_view(buf.get(), static_cast<size_t>(n))}}, req_));
  }
}

}  // namespace sbsh::daemon
