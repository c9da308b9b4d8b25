#include "daemon/beneath.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "ipc/protocol.h"
#include "ipc/text.h"

namespace sbsh::daemon::beneath {

namespace {

constexpr uint64_t kResolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;

int openat2_fd(int dir, const char* path, uint64_t flags, mode_t mode) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.mode = (flags & (O_CREAT | O_TMPFILE)) != 0 ? mode : 0;
  how.resolve = kResolve;
  int fd;
  do fd = static_cast<int>(::syscall(SYS_openat2, dir, path, &how, sizeof how));
  while (fd < 0 && (errno == EINTR || errno == EAGAIN));  // EAGAIN: a rename raced the lookup
  return fd;
}

std::string shown(std::string_view given) { return ipc::printable(given.empty() ? "." : given, 256); }

// The components of `path`, without empty ones and ".", in order ("..": kept).
std::vector<std::string> components(std::string_view path) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t end = std::min(path.find('/', pos), path.size());
    std::string_view c = path.substr(pos, end - pos);
    if (!c.empty() && c != ".") out.emplace_back(c);
    pos = end + 1;
  }
  return out;
}

std::string joined(const std::vector<std::string>& parts, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to; ++i) out += (out.empty() ? "" : "/") + parts[i];
  return out;
}

// The path of what `fd` refers to, as the kernel names it now ("" when it cannot say).
std::string real_path_of(int fd) {
  char buf[PATH_MAX];
  std::string link = fmt::format("/proc/self/fd/{}", fd);
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof buf) return {};
  return {buf, static_cast<size_t>(n)};
}

// An absolute symlink target as a path from the root whose real path is `real_root`, by its
// text (empty components and "." aside; ".." is left for the kernel, which resolves it where
// the lookup has got to); none when the text does not lie beneath the root.
std::optional<std::string> target_beneath(std::string_view target, std::string_view real_root) {
  auto t = components(target);
  auto r = components(real_root);
  if (real_root.empty() || t.size() < r.size() || !std::equal(r.begin(), r.end(), t.begin())) return std::nullopt;
  std::string rel = joined(t, r.size(), t.size());
  return rel.empty() ? std::string(".") : rel;
}

// `rel`, which openat2 refused as leading out (EXDEV), with its symlinks written out one at a
// time from the first: a link to an absolute path beneath the root's real path becomes that
// path from the root, and a relative one takes the link's place. What comes before the
// component looked at is then free of links, so a ".." in a target is the link's own parent,
// as the kernel would take it. Every lookup stays RESOLVE_BENEATH: a link swapped meanwhile
// leads to EXDEV again, never out. An absolute link elsewhere, or ".." above the root, is
// outside_root; a component that cannot be looked up leaves the rest to the caller's open.
result<std::string> expand_links(int root, std::string rel, bool follow_last, std::string_view given) {
  std::string real_root = real_path_of(root);
  bool dir_slash = !rel.empty() && rel.back() == '/';  // "dir/" follows its last link too
  follow_last = follow_last || dir_slash;
  for (int links = 0;;) {
    auto parts = components(rel);
    bool rewritten = false;
    for (size_t i = 0; i < parts.size() && !rewritten; ++i) {
      std::string upto = joined(parts, 0, i + 1);
      unique_fd at(openat2_fd(root, upto.c_str(), O_PATH | O_NOFOLLOW, 0));
      if (!at) {
        if (errno == EXDEV) return error_for(EXDEV, given);
        return rel;  // missing, not a directory, ...: the open says so
      }
      struct stat st {};
      if (::fstat(at.get(), &st) != 0) return error_for(errno, given);
      if (!S_ISLNK(st.st_mode) || (i + 1 == parts.size() && !follow_last)) continue;
      if (++links > 40) return error_for(ELOOP, given);
      char buf[PATH_MAX];
      ssize_t n = ::readlinkat(at.get(), "", buf, sizeof buf);
      if (n <= 0 || static_cast<size_t>(n) >= sizeof buf) return error_for(n < 0 ? errno : ENAMETOOLONG, given);
      std::string_view target(buf, static_cast<size_t>(n));
      std::string base;
      if (target[0] == '/') {
        auto inside = target_beneath(target, real_root);
        if (!inside) return error_for(EXDEV, given);
        base = std::move(*inside);
      } else {
        base = i == 0 ? std::string(target) : joined(parts, 0, i) + "/" + std::string(target);
      }
      std::string rest = joined(parts, i + 1, parts.size());
      rel = rest.empty() ? base : base + "/" + rest;
      if (dir_slash) rel += '/';
      rewritten = true;
    }
    if (!rewritten) return rel;
  }
}

}  // namespace

error error_for(int e, std::string_view given) {
  if (e == EXDEV)
    return make_error(ipc::errc::outside_root, fmt::format("'{}' leads outside the session's root", shown(given)));
  if (e == ENOSYS)
    return make_error(ipc::errc::file_failed, "this kernel has no openat2 (Linux 5.6 or later is needed)");
  return make_error(ipc::errc::file_failed, fmt::format("'{}': {}", shown(given), std::strerror(e)));
}

result<std::string> relative(std::string_view given, std::string_view root) {
  if (given.find('\0') != std::string_view::npos)
    return make_error(ipc::errc::bad_request, "a path contains a NUL byte");
  if (given.size() > PATH_MAX) return make_error(ipc::errc::bad_request, fmt::format("a path is longer than {} bytes", PATH_MAX));
  if (given.empty()) return std::string(".");
  if (given[0] != '/') return std::string(given);
  std::string p = std::filesystem::path(given).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (p == root) return std::string(".");
  if (root == "/") return p.substr(1);
  if (p.size() > root.size() && p.starts_with(root) && p[root.size()] == '/') return p.substr(root.size() + 1);
  return make_error(ipc::errc::outside_root, fmt::format("'{}' leads outside the session's root", shown(given)));
}

result<unique_fd> open_root(const std::string& root) {
  unique_fd fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return make_error(ipc::errc::file_failed, fmt::format("the session's root cannot be opened: {}", std::strerror(errno)));
  return fd;
}

result<unique_fd> open(int root, const std::string& rel, int flags, mode_t mode, std::string_view given) {
  int fd = openat2_fd(root, rel.c_str(), static_cast<uint64_t>(flags), mode);
  if (fd < 0 && errno == EXDEV) {  // ".." above the root, or a symlink: an absolute one may lead back in
    bool follow_last = (flags & O_NOFOLLOW) == 0 && (flags & (O_CREAT | O_EXCL)) != (O_CREAT | O_EXCL);
    auto expanded = expand_links(root, rel, follow_last, given);
    if (!expanded) return expanded.err();
    fd = openat2_fd(root, expanded->c_str(), static_cast<uint64_t>(flags), mode);
  }
  if (fd < 0) return error_for(errno, given);
  return unique_fd(fd);
}

result<parent> open_parent(int root, const std::string& rel, bool make_parents, std::string_view given) {
  // "dir/" names the directory it leads to: that must be one, beneath the root.
  if (rel.size() > 1 && rel.back() == '/' && !make_parents)
    if (auto d = open(root, rel, O_PATH | O_DIRECTORY, 0, given); !d) return d.err();
  std::string p = rel;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.rfind('/');
  std::string dir = slash == std::string::npos ? "." : p.substr(0, slash);
  std::string name = slash == std::string::npos ? p : p.substr(slash + 1);
  if (name.empty() || name == "." || name == "..")
    return make_error(ipc::errc::file_failed,
                      fmt::format("'{}' names a directory by '.' or '..', or the root itself: name what is in it", shown(given)));
  if (make_parents && dir != ".")
    if (auto s = make_dirs(root, dir, true, given); !s) return s.err();
  auto d = open(root, dir, O_PATH | O_DIRECTORY, 0, given);
  if (!d) return d.err();
  return parent{std::move(*d), std::move(name)};
}

status make_dirs(int root, const std::string& rel, bool parents, std::string_view given) {
  if (!parents) {
    auto p = open_parent(root, rel, false, given);
    if (!p) return p.err();
    if (::mkdirat(p->dir.get(), p->name.c_str(), 0755) != 0) return error_for(errno, given);
    return ok_status();
  }
  // Each directory on the way, from the top: made if missing, then checked as a directory
  // beneath the root (a symlink on the way is followed only while it stays beneath).
  size_t pos = 0;
  while (pos <= rel.size()) {
    size_t end = rel.find('/', pos);
    if (end == std::string::npos) end = rel.size();
    std::string upto = rel.substr(0, end);
    std::string_view comp = std::string_view(rel).substr(pos, end - pos);
    pos = end + 1;
    if (comp.empty() || comp == "." || comp == "..") continue;
    auto d = open(root, upto, O_PATH | O_DIRECTORY, 0, given);
    if (d) continue;
    if (!ipc::has_code(d.err(), ipc::errc::file_failed)) return d.err();
    auto p = open_parent(root, upto, false, given);
    if (!p) return p.err();
    if (::mkdirat(p->dir.get(), p->name.c_str(), 0755) != 0 && errno != EEXIST) return error_for(errno, given);
    if (auto again = open(root, upto, O_PATH | O_DIRECTORY, 0, given); !again) return again.err();
  }
  return ok_status();
}

bool names_in(int dir, std::vector<std::string>* names) {
  int fd = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return false;
  }
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") names->emplace_back(n);
    errno = 0;
  }
  int e = errno;
  ::closedir(d);
  errno = e;
  return e == 0;
}

bool remove_contents(int dir) {
  std::vector<std::string> names;
  if (!names_in(dir, &names)) return false;
  int first_errno = 0;
  for (const auto& n : names) {
    struct stat st {};
    if (::fstatat(dir, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
    bool removed;
    if (S_ISDIR(st.st_mode)) {
      unique_fd sub(::openat(dir, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      removed = sub && remove_contents(sub.get()) && ::unlinkat(dir, n.c_str(), AT_REMOVEDIR) == 0;
    } else {
      removed = ::unlinkat(dir, n.c_str(), 0) == 0;
    }
    if (!removed && first_errno == 0) first_errno = errno;
  }
  errno = first_errno;
  return first_errno == 0;
}

}  // namespace sbsh::daemon::beneath
