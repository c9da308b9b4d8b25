// Capped log files for background processes.
#include "daemon/capped_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ipc/protocol.h"

namespace sbsh::daemon {

status capped_log::open(std::string path, uint64_t cap) {
  path_ = std::move(path);
  cap_ = cap < 2 ? 2 : cap;
  fd_ = unique_fd(::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!fd_) return make_error(ipc::errc::io, fmt::format("cannot open {}: {}", path_, std::strerror(errno)));
  struct stat st{};
  if (::fstat(fd_.get(), &st) == 0) size_ = static_cast<uint64_t>(st.st_size);
  return ok_status();
}

void capped_log::rotate() {
  std::string old = path_ + ".1";
  if (::rename(path_.c_str(), old.c_str()) != 0) spdlog::warn("cannot rotate {}: {}", path_, std::strerror(errno));
  fd_ = unique_fd(::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600));
  size_ = 0;
}

void capped_log::append(const char* data, size_t n) {
  while (n > 0 && fd_) {
    uint64_t half = cap_ / 2;
    if (size_ >= half) rotate();
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, half - size_));
    ssize_t w = ::write(fd_.get(), data, chunk);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      spdlog::warn("cannot write {}: {}", path_, std::strerror(errno));
      return;
    }
    size_ += static_cast<uint64_t>(w);
    data += w;
    n -= static_cast<size_t>(w);
  }
}

std::vector<std::string> capped_log_files(const std::string& path) { return {path, path + ".1"}; }

namespace {
std::string slurp(const std::string& path) {
  std::string out;
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return out;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd.get(), buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}
}  // namespace

std::string read_capped_log(const std::string& path, uint64_t tail_lines, uint64_t max_bytes) {
  std::string all = slurp(path + ".1") + slurp(path);
  if (tail_lines > 0) {
    size_t pos = all.size();
    if (pos > 0 && all[pos - 1] == '\n') --pos;  // a final newline ends the last line
    uint64_t lines = 0;
    while (pos > 0) {
      if (all[pos - 1] == '\n' && ++lines == tail_lines) break;
      --pos;
    }
    all.erase(0, pos);
  }
  if (all.size() > max_bytes) all.erase(0, all.size() - max_bytes);
  return all;
}

}  // namespace sbsh::daemon
