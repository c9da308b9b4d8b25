// exec -f FILE: a command's text read from a file, or from stdin for "-". A command given as
// words is bound by the kernel's limits on exec arguments (MAX_ARG_STRLEN, 128 KiB per word,
// and ARG_MAX for all of them), which fail before sbsh runs; a file is bound only by what
// sbshd takes in one request, so the text is checked against that here, with a message that
// says what to do, rather than sent to be refused.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "cli/cli.h"
#include "ipc/fd.h"
#include "ipc/protocol.h"

namespace sbsh::cli {

result<std::string> read_script(const std::string& path) {
  bool from_stdin = path == "-";
  std::string name = from_stdin ? "-f - (standard input)" : fmt::format("-f {}", path);
  auto cannot = [&](std::string_view why) {
    return make_error(ipc::errc::usage, fmt::format("{}: cannot read it: {}", name, why));
  };
  unique_fd fd(from_stdin ? ::fcntl(0, F_DUPFD_CLOEXEC, 3) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return cannot(std::strerror(errno));
  struct stat st{};
  if (::fstat(fd.get(), &st) == 0 && S_ISDIR(st.st_mode)) return cannot("it is a directory");
  auto too_big = [&](std::string size) {
    return make_error(ipc::errc::usage,
                      fmt::format("{}: {} is more than the {} MiB that sbshd takes as one command's "
                                  "text; put the script where the session can read it and run '. FILE'",
                                  name, size, ipc::kMaxFrame >> 20));
  };
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > ipc::kMaxFrame)
    return too_big(fmt::format("its {} bytes", st.st_size));
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return cannot(std::strerror(errno));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > ipc::kMaxFrame) return too_big("its text");  // the rest is not read
  }
  if (auto nul = text.find('\0'); nul != std::string::npos)
    return make_error(ipc::errc::usage,
                      fmt::format("{}: holds a NUL byte (at byte {}), which bash cannot run: is it a script?", name,
                                  nul));
  return text;
}

}  // namespace sbsh::cli
