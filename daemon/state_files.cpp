// Reading a state file written as one frame, and setting aside one that cannot be read.
#include "daemon/state_files.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "ipc/bounds.h"
#include "ipc/fd.h"
#include "ipc/frame.h"

namespace sbsh::daemon {

result<ipc::message> read_state_file(const std::string& path, bool* missing) {
  *missing = false;
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    *missing = errno == ENOENT;
    return make_error(ipc::errc::io, fmt::format("cannot open: {}", std::strerror(errno)));
  }
  std::string bytes;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd.get(), buf, sizeof buf)) > 0 && bytes.size() <= ipc::kMaxFrame + 4)
    bytes.append(buf, static_cast<size_t>(n));
  fd.reset();
  ipc::frame_reader reader;
  reader.feed(bytes.data(), bytes.size());
  auto body = reader.next_body();
  if (!body) return body.err();
  if (!body.value()) return make_error(ipc::errc::io, "the file is truncated");
  return ipc::message::parse(body.value()->data(), body.value()->size());
}

void move_aside(const std::string& path, const std::string& why) {
  std::string aside = fmt::format("{}.corrupt-{}", path, wall_ms());
  ::rename(path.c_str(), aside.c_str());
  spdlog::error("state file {} is unreadable ({}); moved it to {} and started without it", path, why, aside);
}

}  // namespace sbsh::daemon
