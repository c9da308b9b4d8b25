// Snapshot copies of directories for sessions (see snapshots.h).
#include "daemon/snapshots.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/environ.h"
#include "common/paths.h"
#include "daemon/capacity.h"
#include "daemon/off_loop.h"
#include "ipc/protocol.h"

namespace sbsh::daemon {

namespace {

// What the copier printed is kept up to this size, for the error message.
constexpr size_t kMaxMessages = 2048;

bool remove_at(int parent, const char* name) {
  if (::unlinkat(parent, name, 0) == 0 || errno == ENOENT) return true;
  if (errno != EISDIR) return false;
  // Entries of a directory can only be removed when it is writable, and listed when it is
  // readable and searchable.
  (void)::fchmodat(parent, name, S_IRWXU, 0);
  int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return false;
  }
  bool ok = true;
  // Entries are removed while the directory is read: collect each batch of names first.
  for (;;) {
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
      if (names.size() >= 1024) break;
    }
    if (names.empty()) break;
    size_t removed = 0;
    for (const auto& n : names) {
      if (remove_at(fd, n.c_str())) ++removed;
      else ok = false;
    }
    if (removed == 0) break;  // nothing more can go
    ::rewinddir(d);
  }
  ::closedir(d);
  return ::unlinkat(parent, name, AT_REMOVEDIR) == 0 && ok;
}

// `path` without symbolic links, or empty when it does not resolve.
std::string resolved(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) != nullptr ? std::string(buf) : std::string();
}

bool is_within(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         (dir == "/" || path[dir.size()] == '/'));
}

}  // namespace

bool remove_tree(const std::string& path) {
  auto slash = path.rfind('/');
  std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  unique_fd dir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return errno == ENOENT;
  return remove_at(dir.get(), path.c_str() + (slash == std::string::npos ? 0 : slash + 1));
}

snapshot_store::~snapshot_store() {
  // sbshd is ending: stop the copies; their temporary directories go at the next start.
  for (auto& [name, job] : copies_) {
    job.proc->kill(SIGKILL);
    job.proc.reset();
    job.watch.reset();
  }
}

status snapshot_store::check_source(const std::string& source) const {
  auto bad = [&](const std::string& why) { return make_error(ipc::errc::bad_request, why); };
  struct stat st {};  // `source` is absolute: check_def (session_def.cpp) said so
  if (::stat(source.c_str(), &st) != 0)
    return bad(fmt::format("cannot snapshot {}: {}", source, std::strerror(errno)));
  if (!S_ISDIR(st.st_mode)) return bad(fmt::format("cannot snapshot {}: not a directory", source));
  if (::access(source.c_str(), R_OK | X_OK) != 0)
    return bad(fmt::format("cannot snapshot {}: {}", source, std::strerror(errno)));
  std::string src = resolved(source);
  std::string store = resolved(dirname_of(dir_));  // the state directory exists
  if (!src.empty() && !store.empty() && is_within(store, src))
    return bad(fmt::format("cannot snapshot {}: it holds sbshd's state directory {}, and so would hold the copy; "
                           "snapshot a directory that does not contain it",
                           source, store));
  if (!src.empty() && !store.empty() && is_within(src, store))
    return bad(fmt::format("cannot snapshot {}: it is inside sbshd's state directory {}", source, store));
  return ok_status();
}

void snapshot_store::copy(const std::string& name, const std::string& source, const rules& r,
                          std::function<void(result<uint64_t>)> done) {
  auto fail = [&](const std::string& why) { done(make_error(ipc::errc::internal, why)); };
  if (auto made = make_dirs(dir_); !made) return fail(made.err().message);
  std::string target = path_of(name);
  struct stat st {};
  if (::lstat(target.c_str(), &st) == 0)
    return done(make_error(ipc::errc::session_exists,
                           fmt::format("{} already exists, left by a session of that name that sbshd could not "
                                       "recreate; move it away or delete it, then create the session again",
                                       target)));
  copy_job job;
  job.tmp = fmt::format("{}/.copy-{}-{}", dir_, name, ++seq_);
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return fail(fmt::format("cannot copy {}: pipe: {}", source, std::strerror(errno)));
  job.errors = unique_fd(p[0]);
  unique_fd errors_w(p[1]);
  set_nonblocking(p[0]);
  unique_fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null) return fail(fmt::format("cannot open /dev/null: {}", std::strerror(errno)));
  std::vector<std::string> argv_store{"sbsh-wrapper", "--copy-tree", source, job.tmp, r.gitignore ? "1" : "0"};
  argv_store.insert(argv_store.end(), r.ignore.begin(), r.ignore.end());
  std::vector<std::string> env_store = inherited_environment();
  std::vector<char*> argv = c_pointers(argv_store);
  std::vector<char*> envp = c_pointers(env_store);
  const int fds[] = {null.get(), errors_w.get(), errors_w.get()};
  uv::child_process::options o;
  o.file = copier_.c_str();
  o.argv = argv.data();
  o.envp = envp.data();
  o.fds = fds;
  o.explain = spawn_failure;
  auto proc =
      uv::child_process::spawn(loop_, o, [this, name](int64_t status, int sig) { copy_ended(name, status, sig); });
  if (!proc) return fail(fmt::format("cannot start {} to copy {}: {}", copier_, source, proc.err().message));
  job.proc = std::move(*proc);
  job.done = std::move(done);
  auto& j = copies_[name] = std::move(job);
  j.watch = uv::make_handle<uv::fd_watch>(loop_, j.errors.get());
  j.watch->start(UV_READABLE, [this, name](int, int) {
    if (auto it = copies_.find(name); it != copies_.end()) read_errors(it->second);
  });
  spdlog::info("copying {} for session {}", source, name);
}

void snapshot_store::read_errors(copy_job& job) {
  char buf[4096];
  ssize_t n;
  while ((n = ::read(job.errors.get(), buf, sizeof buf)) > 0)
    if (job.messages.size() < kMaxMessages)
      job.messages.append(buf, std::min(static_cast<size_t>(n), kMaxMessages - job.messages.size()));
  if (n == 0 && job.watch) {  // end of file: nothing more to watch
    job.watch.reset();
  }
}

void snapshot_store::copy_ended(const std::string& name, int64_t status, int sig) {
  auto it = copies_.find(name);
  if (it == copies_.end()) return;
  copy_job job = std::move(it->second);
  copies_.erase(it);
  read_errors(job);  // the copier has ended: all it wrote is in the pipe
  job.watch.reset();
  uint64_t special = 0;
  if (status == 0 && sig == 0 && std::sscanf(job.messages.c_str(), "special %" SCNu64, &special) == 1 &&
      ::rename(job.tmp.c_str(), path_of(name).c_str()) == 0) {
    spdlog::info("session {}: copy complete in {} ({} special files skipped)", name, path_of(name), special);
    job.done(special);
    return;
  }
  std::string why;
  if (status == 0 && sig == 0) {
    why = fmt::format("cannot move the copy into place: {}", std::strerror(errno));
  } else if (sig == SIGKILL) {
    why = "the copy was stopped";
  } else {
    while (!job.messages.empty() && job.messages.back() == '\n') job.messages.pop_back();
    why = job.messages.empty() ? (sig != 0 ? fmt::format("the copier was killed by signal {}", sig)
                                           : fmt::format("the copier exited with status {}", status))
                               : job.messages;
  }
  spdlog::warn("session {}: snapshot copy failed: {}", name, why);
  remove_later(job.tmp + ".rules", nullptr);  // the copier's scratch repository, if it was stopped
  remove_later(job.tmp, [done = std::move(job.done), why] {
    done(make_error(ipc::errc::internal, fmt::format("cannot copy the snapshot: {}", why)));
  });
}

void snapshot_store::cancel(const std::string& name) {
  if (auto it = copies_.find(name); it != copies_.end()) it->second.proc->kill(SIGKILL);
}

std::string snapshot_store::set_aside(const std::string& name) {
  std::string aside = fmt::format("{}/.remove-{}-{}", dir_, name, ++seq_);
  if (::rename(path_of(name).c_str(), aside.c_str()) == 0) return aside;
  if (errno != ENOENT) spdlog::error("cannot remove {}: {}", path_of(name), std::strerror(errno));
  return {};
}

void snapshot_store::sweep_leftovers() {
  for (const std::string* dir : {&dir_, &kept_dir_}) {
    DIR* d = ::opendir(dir->c_str());
    if (d == nullptr) continue;
    std::vector<std::string> left;
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] == '.' && std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        left.push_back(*dir + "/" + e->d_name);
    ::closedir(d);
    for (const auto& p : left) remove_later(p, nullptr);
  }
}

std::string snapshot_store::keep(const std::string& name) {
  if (auto made = make_dirs(kept_dir_); !made) {
    spdlog::error("cannot keep the copy of session {}: {}", name, made.err().message);
    return {};
  }
  int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  std::string kept = fmt::format("{}/{}@{}", kept_dir_, name, now);
  struct stat st {};
  for (int i = 1; ::lstat(kept.c_str(), &st) == 0; ++i) kept = fmt::format("{}/{}@{}-{}", kept_dir_, name, now, i);
  if (::rename(path_of(name).c_str(), kept.c_str()) == 0) {
    spdlog::info("session {}: copy kept in {}", name, kept);
    return kept;
  }
  if (errno != ENOENT) spdlog::error("cannot keep {} as {}: {}", path_of(name), kept, std::strerror(errno));
  return {};
}

namespace {

// The bytes of the regular files under directory `fd` (which it closes), links not followed.
uint64_t tree_size(int fd) {
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return 0;
  }
  uint64_t total = 0;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) total += static_cast<uint64_t>(st.st_size);
    if (!S_ISDIR(st.st_mode)) continue;
    int sub = ::openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub >= 0) total += tree_size(sub);
  }
  ::closedir(d);
  return total;
}

}  // namespace

uint64_t tree_bytes(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  return fd < 0 ? 0 : tree_size(fd);
}

namespace {

// The kept copies in `dir` (named SESSION@MS or SESSION@MS-N), oldest first; sizes only
// when `measure`.
std::vector<kept_copy> read_kept(const std::string& dir, bool measure) {
  std::vector<kept_copy> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    auto at = n.rfind('@');
    if (n[0] == '.' || at == std::string::npos || at == 0) continue;
    kept_copy k;
    k.session = n.substr(0, at);
    k.path = dir + "/" + n;
    k.kept_at_ms = std::strtoll(n.c_str() + at + 1, nullptr, 10);
    if (measure) {
      int fd = ::openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd >= 0) k.size_bytes = tree_size(fd);
    }
    out.push_back(std::move(k));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const kept_copy& a, const kept_copy& b) {
    return a.kept_at_ms != b.kept_at_ms ? a.kept_at_ms < b.kept_at_ms : a.path < b.path;
  });
  return out;
}

// Runs `work` on the thread pool, then `done` with its result on the loop.
void on_pool(uv_loop_t* loop, std::function<std::vector<kept_copy>()> work,
             std::function<void(std::vector<kept_copy>)> done) {
  auto out = std::make_shared<std::vector<kept_copy>>();
  off_loop(
      loop, [out, work = std::move(work)] { *out = work(); },
      [out, done = std::move(done)] { done(std::move(*out)); });
}

}  // namespace

void snapshot_store::list_kept(std::function<void(std::vector<kept_copy>)> done) {
  on_pool(loop_, [dir = kept_dir_] { return read_kept(dir, true); }, std::move(done));
}

void snapshot_store::prune_kept(std::function<void(std::vector<kept_copy>)> done) {
  // Each copy is renamed aside on the loop, so that a copy kept meanwhile stays, then deleted.
  std::vector<kept_copy> copies = read_kept(kept_dir_, false);
  std::vector<std::string> aside;
  std::vector<kept_copy> gone;
  for (auto& k : copies) {
    std::string to = fmt::format("{}/.remove-{}", kept_dir_, ++seq_);
    if (::rename(k.path.c_str(), to.c_str()) != 0) {
      spdlog::error("cannot delete {}: {}", k.path, std::strerror(errno));
      continue;
    }
    aside.push_back(std::move(to));
    gone.push_back(std::move(k));
  }
  on_pool(
      loop_,
      [aside = std::move(aside), gone = std::move(gone)]() mutable {
        for (const auto& p : aside)
          if (!remove_tree(p)) spdlog::error("cannot delete all of {}", p);
        return std::move(gone);
      },
      std::move(done));
}

void snapshot_store::remove_later(const std::string& path, std::function<void()> done) {
  auto ok = std::make_shared<bool>(false);
  off_loop(
      loop_, [ok, path] { *ok = remove_tree(path); },
      [ok, path, done = std::move(done)] {
        if (!*ok) spdlog::error("cannot delete all of {}", path);
        if (done) done();
      });
}

}  // namespace sbsh::daemon
