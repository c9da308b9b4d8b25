// The bearer token of `sbsh mcp --http` (see token.h): read, or made once per user.
#include "mcp/token.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "common/paths.h"
#include "ipc/fd.h"
#include "ipc/protocol.h"

namespace sbsh::mcp {

namespace {

constexpr size_t kMinToken = 16;
constexpr size_t kRandomBytes = 32;
constexpr size_t kMaxTokenFile = 4096;

// The token in `text`: one word of at least kMinToken characters, trailing blanks dropped.
std::optional<std::string> token_of(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  if (text.size() < kMinToken || text.find_first_of(" \t\r\n") != std::string::npos) return std::nullopt;
  return text;
}

// At most kMaxTokenFile bytes of `fd`.
result<std::string> read_small(int fd, const std::string& path) {
  std::string text;
  char buf[kMaxTokenFile];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(ipc::errc::io, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxTokenFile)
      return make_error(ipc::errc::usage,
                        fmt::format("{} is larger than a token file ({} bytes at most)", path, kMaxTokenFile));
  }
}

// The token in an existing default file, if it may be trusted: a regular file (not a link),
// ours, mode 0600, holding a token.
std::optional<std::string> reusable_token(const std::string& path) {
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 07777) != 0600)
    return std::nullopt;
  auto text = read_small(fd.get(), path);
  if (!text) return std::nullopt;
  return token_of(*text);
}

result<std::string> random_token() {
  unsigned char bytes[kRandomBytes];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return make_error(ipc::errc::io, fmt::format("cannot make a token: getrandom: {}", std::strerror(errno)));
    got += static_cast<size_t>(n);
  }
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

// Writes `token` to a new file beside `path` (mode 0600, created exclusively) and links it
// into place; EEXIST when another file took `path` first.
int publish(const std::string& path, const std::string& token) {
  std::string tmp = fmt::format("{}.{}.tmp", path, ::getpid());
  ::unlink(tmp.c_str());
  unique_fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return errno;
  // The umask may have taken bits away, never added any; still, say 0600 exactly.
  int e = ::fchmod(fd.get(), 0600) == 0 ? write_all(fd.get(), token + "\n") : errno;
  if (e == 0 && ::fsync(fd.get()) != 0) e = errno;
  if (e == 0 && ::link(tmp.c_str(), path.c_str()) != 0) e = errno;
  ::unlink(tmp.c_str());
  return e;
}

}  // namespace

result<bearer_token> read_token_file(const std::string& path) {
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd)
    return make_error(ipc::errc::usage, fmt::format("--token-file {}: cannot read it: {}", path, std::strerror(errno)));
  auto text = read_small(fd.get(), path);
  if (!text) return make_error(ipc::errc::usage, "--token-file " + text.err().message);
  auto token = token_of(*text);
  if (!token)
    return make_error(ipc::errc::usage,
                      fmt::format("--token-file {}: the token must be one word of at least {} characters", path,
                                  kMinToken));
  return bearer_token{*token, path};
}

std::string default_token_path() {
  // Where the socket's directory is by default, whatever the environment (runtime_dir).
  std::string runtime = runtime_dir();
  std::string dir = !runtime.empty() ? runtime + "/sbsh" : fmt::format("/tmp/sbsh-{}", ::getuid());
  return dir + "/mcp-token";
}

result<bearer_token> default_token() {
  std::string path = default_token_path();
  if (auto s = ensure_socket_dir(dirname_of(path)); !s)
    return make_error(s.err().code,
                      "cannot keep sbsh mcp's token: " + s.err().message + "; or give a token with --token-file FILE");
  // Two servers starting at once: the one whose file is linked first wins, the other reads it.
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (auto token = reusable_token(path)) return bearer_token{*token, path};
    auto fresh = random_token();
    if (!fresh) return fresh.err();
    // Whatever is there is not a token we trust (wrong mode or owner, not a file, empty):
    // a token another user could have read is replaced, never used.
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      return make_error(ipc::errc::io, fmt::format("cannot replace {}: {}; remove it", path, std::strerror(errno)));
    int e = publish(path, *fresh);
    if (e == 0) return bearer_token{*fresh, path};
    if (e != EEXIST)
      return make_error(ipc::errc::io, fmt::format("cannot write sbsh mcp's token to {}: {}", path, std::strerror(e)));
  }
  return make_error(ipc::errc::io,
                    fmt::format("{} keeps changing while sbsh mcp reads it; remove it and try again", path));
}

}  // namespace sbsh::mcp
