// Socket and state paths (DESIGN §4) and the private-directory check.
#include "common/paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "ipc/protocol.h"

namespace sbsh {

namespace {
std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}
}  // namespace

std::string runtime_dir(const std::string& login_base) {
  if (auto v = env_or_empty("XDG_RUNTIME_DIR"); !v.empty()) return v;
  // What a login makes (pam_systemd): ours, and private. A program started with a handful of
  // variables (an MCP host passes HOME, PATH, USER and a few more) finds it all the same.
  std::string dir = fmt::format("{}/{}", login_base, ::getuid());
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 077) != 0)
    return {};
  return dir;
}

std::string resolve_socket_path(const std::string& explicit_path) {
  if (!explicit_path.empty()) return explicit_path;
  if (auto v = env_or_empty("SBSH_SOCKET"); !v.empty()) return v;
  if (auto v = runtime_dir(); !v.empty()) return v + "/sbsh/sbshd.sock";
  return fmt::format("/tmp/sbsh-{}/sbshd.sock", ::getuid());
}

std::string resolve_state_dir(const std::string& explicit_path) {
  if (!explicit_path.empty()) return explicit_path;
  if (auto v = env_or_empty("SBSH_STATE_DIR"); !v.empty()) return v;
  if (auto v = env_or_empty("XDG_STATE_HOME"); !v.empty()) return v + "/sbsh";
  if (auto v = env_or_empty("HOME"); !v.empty()) return v + "/.local/state/sbsh";
  return fmt::format("/tmp/sbsh-{}/state", ::getuid());
}

std::string dirname_of(const std::string& path) {
  auto pos = path.find_last_of('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

std::string beside_self(const std::string& name) {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return {};
  self[n] = '\0';
  std::string beside = dirname_of(self) + "/" + name;
  return ::access(beside.c_str(), X_OK) == 0 ? beside : std::string();
}

status make_dirs(const std::string& dir) {
  if (dir.empty() || dir == "/" || dir == ".") return ok_status();
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) return ok_status();
  if (auto s = make_dirs(dirname_of(dir)); !s) return s;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return make_error(ipc::errc::io, fmt::format("cannot create directory {}: {}", dir, std::strerror(errno)));
  return ok_status();
}

status write_file_atomically(const std::string& path, std::string_view bytes) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return make_error(ipc::errc::io, fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()) && ::fsync(fd) == 0;
  int e = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) e = errno;
    ::unlink(tmp.c_str());
    return make_error(ipc::errc::io, fmt::format("cannot write {}: {}", path, std::strerror(e)));
  }
  int dir = ::open(dirname_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return ok_status();
}

status ensure_private_dir(const std::string& dir, dir_role role) {
  if (auto s = make_dirs(dir); !s) return s;
  bool state = role == dir_role::state;
  // What someone else could do with the directory, and how to choose another.
  std::string_view harm =
      state ? "could plant session definitions that sbshd would run as you" : "could reach your shells through it";
  std::string_view other = state ? "choose another state directory with --state-dir or SBSH_STATE_DIR"
                                 : "choose another socket with --socket";
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0)
    return make_error(ipc::errc::io, fmt::format("cannot inspect {}: {}", dir, std::strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    return make_error(ipc::errc::unsafe_dir, fmt::format("{} is {}, not a directory; remove it or {}", dir,
                                                         S_ISLNK(st.st_mode) ? "a symbolic link" : "a file", other));
  if (st.st_uid != ::getuid())
    return make_error(ipc::errc::unsafe_dir,
                      fmt::format("{} is owned by uid {}, not by you (uid {}); its owner {}: remove "
                                  "it or {}",
                                  dir, st.st_uid, ::getuid(), harm, other));
  // The state directory may be readable by others (its files are 0600), never writable.
  mode_t forbidden = state ? 022 : 077;
  if ((st.st_mode & forbidden) != 0)
    return make_error(ipc::errc::unsafe_dir,
                      fmt::format("{} has mode {:04o}: {}, and another user {}: run 'chmod 700 {}' "
                                  "or {}",
                                  dir, st.st_mode & 07777, state ? "other users can write to it" : "it must be 0700",
                                  harm, dir, other));
  return ok_status();
}

status ensure_socket_dir(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT)
      return make_error(ipc::errc::io, fmt::format("cannot inspect {}: {}", dir, std::strerror(errno)));
    std::string runtime = runtime_dir();
    bool by_default = (!runtime.empty() && dir == runtime + "/sbsh") || dir == fmt::format("/tmp/sbsh-{}", ::getuid());
    if (!by_default)
      return make_error(ipc::errc::bad_socket,
                        fmt::format("the socket's directory {} does not exist; create it (mkdir -m 700 "
                                    "{}) or choose another socket",
                                    dir, dir));
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return make_error(ipc::errc::io,
                        fmt::format("cannot create the socket's directory {}: {}", dir, std::strerror(errno)));
  }
  return ensure_private_dir(dir);
}

status check_socket_path(const std::string& path) {
  if (path.empty()) return make_error(ipc::errc::bad_socket, "the socket path is empty");
  if (path.size() >= sizeof(sockaddr_un{}.sun_path))
    return make_error(ipc::errc::bad_socket, fmt::format("socket path {} is {} bytes long; a unix socket path must be "
                                                         "shorter than {} bytes: choose a shorter --socket",
                                                         path, path.size(), sizeof(sockaddr_un{}.sun_path)));
  return ok_status();
}

}  // namespace sbsh
