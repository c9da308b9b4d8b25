// Environments built once and shared by content (see env_store.h).
#include "daemon/env_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sha2.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "common/environ.h"
#include "common/ignored.h"
#include "common/paths.h"
#include "common/procs.h"
#include "daemon/capacity.h"
#include "daemon/off_loop.h"
#include "daemon/snapshots.h"
#include "ipc/fd.h"
#include "ipc/protocol.h"
#include "ipc/text.h"
#include "uv/child_process.h"
#include "uv/handles.h"

namespace sbsh::daemon {

namespace {

constexpr size_t kTailBytes = 16u << 10;  // of a failed setup's output, in its error

class sha256 {
 public:
  sha256() { SHA256Init(&ctx_); }
  void add(std::string_view bytes) { SHA256Update(&ctx_, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()); }
  // A field whose end is unambiguous: its length, then its bytes.
  void field(std::string_view bytes) {
    uint64_t n = bytes.size();
    SHA256Update(&ctx_, reinterpret_cast<const uint8_t*>(&n), sizeof n);
    add(bytes);
  }
  // The bytes of the regular file open on `fd`, then their count; errno on failure.
  int file(int fd) {
    char buf[1 << 16];
    uint64_t total = 0;
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n == 0) break;
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno;
      }
      add(std::string_view(buf, static_cast<size_t>(n)));
      total += static_cast<uint64_t>(n);
    }
    SHA256Update(&ctx_, reinterpret_cast<const uint8_t*>(&total), sizeof total);
    return 0;
  }
  // The first `bytes` of the digest, in hex.
  std::string hex(size_t bytes) {
    uint8_t d[SHA256_DIGEST_LENGTH];
    SHA256Final(d, &ctx_);
    std::string out;
    for (size_t i = 0; i < bytes && i < sizeof d; ++i) out += fmt::format("{:02x}", d[i]);
    return out;
  }

 private:
  SHA2_CTX ctx_;
};

// What a file that is not a regular file is, in words; nullptr for a regular file.
const char* not_regular(mode_t m) {
  if (S_ISREG(m)) return nullptr;
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISDIR(m)) return "a directory";
  return "not a regular file";
}

// Opens the regular file at `path` for reading without ever waiting: what it is is looked at
// before it is opened (opening a FIFO waits for a writer, opening a device may act on it),
// the open does not wait (O_NONBLOCK), and the descriptor is looked at again (the path may
// have been replaced in between). Fails with errno, or with `*what` saying what it is
// instead of a regular file. Links are followed (no O_NOFOLLOW): a key named through a link
// is the file it names, and only its bytes are hashed, never shown.
unique_fd open_regular(const std::string& path, const char** what) {
  *what = nullptr;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  if ((*what = not_regular(st.st_mode)) != nullptr) return {};
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!fd) return {};
  if (::fstat(fd.get(), &st) != 0) return {};
  if ((*what = not_regular(st.st_mode)) != nullptr) return {};
  return fd;
}

constexpr uint64_t kDirKeyMaxEntries = 100'000;  // files, links and directories in a directory key
constexpr uint64_t kDirKeyMaxBytes = 4ull << 30;    // the bytes of its files

// The walk of a directory key: each entry that the ignore rules keep, in sorted order, as its
// kind, its path relative to the key and what it holds (a file's executable bit and bytes, a
// link's target text, never followed), so that the same tree anywhere hashes the same.
struct dir_key_walk {
  sha256& h;
  std::string root;  // as given, for messages
  ignored::listing ignored;
  uint64_t entries = 0, bytes = 0;

  [[nodiscard]] status refuse(const std::string& why) const {
    return make_error(ipc::errc::bad_request, fmt::format("the setup key directory {} {}", ipc::printable(root, 256), why));
  }
  [[nodiscard]] status cannot(const std::string& rel, int err) const {
    return refuse(fmt::format("cannot be read at {}: {}; give a directory sbshd can read", ipc::printable(rel, 256),
                              std::strerror(err)));
  }

  status walk(int dirfd, const std::string& rel) {
    std::vector<std::string> names;
    int copy = ::dup(dirfd);
    DIR* d = copy >= 0 ? ::fdopendir(copy) : nullptr;
    if (d == nullptr) {
      int e = errno;
      if (copy >= 0) ::close(copy);
      return cannot(rel.empty() ? "." : rel, e);
    }
    while (dirent* e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto& name : names)
      if (auto s = entry(dirfd, name, rel.empty() ? name : rel + "/" + name); !s) return s;
    return ok_status();
  }

  status entry(int dirfd, const std::string& name, const std::string& rel) {
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return cannot(rel, errno);
    bool dir = S_ISDIR(st.st_mode);
    if ((dir && ignored.skip_dot_git && name == ".git") || ignored.has(dir ? rel + "/" : rel)) return ok_status();
    if (++entries > kDirKeyMaxEntries)
      return refuse(fmt::format("holds more than {} entries (not counting what the ignore rules leave out): key on "
                                "the files the setup reads, or on a smaller directory",
                                kDirKeyMaxEntries));
    if (dir) {
      unique_fd sub(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) return cannot(rel, errno);
      h.field("dir");
      h.field(rel);
      return walk(sub.get(), rel);
    }
    if (S_ISLNK(st.st_mode)) {
      std::string target(PATH_MAX, '\0');
      ssize_t n = ::readlinkat(dirfd, name.c_str(), target.data(), target.size());
      if (n < 0) return cannot(rel, errno);
      target.resize(static_cast<size_t>(n));
      h.field("link");
      h.field(rel);
      h.field(target);
      return ok_status();
    }
    if (const char* what = not_regular(st.st_mode))
      return refuse(fmt::format("holds {}, which is {}: a key's contents are hashed, and sbsh reads no pipe, device "
                                "or socket for that; move it out of the directory, or key on the files beside it",
                                ipc::printable(rel, 256), what));
    return file(dirfd, name, rel);
  }

  status file(int dirfd, const std::string& name, const std::string& rel) {
    // Opened without waiting and looked at again: it may have been replaced since fstatat.
    unique_fd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0) return cannot(rel, errno);
    if (const char* what = not_regular(st.st_mode))
      return refuse(fmt::format("holds {}, which is {}: move it out of the directory", ipc::printable(rel, 256), what));
    bytes += static_cast<uint64_t>(st.st_size);
    if (bytes > kDirKeyMaxBytes)
      return refuse(fmt::format("holds more than {} GiB of files (not counting what the ignore rules leave out): "
                                "key on the files the setup reads, or on a smaller directory",
                                kDirKeyMaxBytes >> 30));
    // Of the mode, only whether it runs: a checkout's other bits follow its umask.
    h.field((st.st_mode & S_IXUSR) != 0 ? "exec" : "file");
    h.field(rel);
    if (int e = h.file(fd.get()); e != 0) return cannot(rel, e);
    return ok_status();
  }
};

// Adds the directory key open on `fd` (named `path`) to `h`, leaving out what `rules` do.
status hash_dir_key(sha256& h, const std::string& path, int fd, const snapshot_store::rules& rules) {
  dir_key_walk w{h, path, {}};
  if (!rules.ignore.empty() || rules.gitignore) {
    // git's scratch repository: a directory of our own, never inside the key.
    const char* tmp = std::getenv("TMPDIR");
    std::string scratch = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/sbsh-key-XXXXXX";
    if (::mkdtemp(scratch.data()) == nullptr)
      return make_error(ipc::errc::internal, fmt::format("cannot create {} to apply the ignore rules to the setup key "
                                                         "directory: {}; make TMPDIR (or /tmp) writable",
                                                         scratch, std::strerror(errno)));
    std::string error = ignored::list(path, scratch + "/git", rules.ignore, rules.gitignore, w.ignored,
                                      "key on the files the setup reads instead of on the directory");
    (void)::rmdir(scratch.c_str());
    if (!error.empty())
      return make_error(ipc::errc::bad_request,
                        fmt::format("the setup key directory {}: {}", ipc::printable(path, 256), error));
  }
  h.field("sbsh key directory 1");
  if (auto s = w.walk(fd, ""); !s) return s;
  h.field(std::to_string(w.entries));
  return ok_status();
}

// Adds the key at `path` to `h`: a regular file's bytes, or a directory's tree as `rules`
// leave it; the error says what is wrong with it and what to give.
status hash_key(sha256& h, const std::string& path, const snapshot_store::rules& rules) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    unique_fd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir)
      return make_error(ipc::errc::bad_request,
                        fmt::format("cannot read the setup key directory {}: {}", ipc::printable(path, 256),
                                    std::strerror(errno)));
    return hash_dir_key(h, path, dir.get(), rules);
  }
  const char* what = nullptr;
  unique_fd fd = open_regular(path, &what);
  int e = fd ? h.file(fd.get()) : errno;
  if (what != nullptr)
    return make_error(ipc::errc::bad_request,
                      fmt::format("the setup key {} is {}, not a regular file or a directory: a key's contents are "
                                  "hashed, and sbsh reads no pipe, device or socket for that; give the file the "
                                  "setup reads (requirements.txt, package-lock.json)",
                                  ipc::printable(path, 256), what));
  if (!fd || e != 0)
    return make_error(ipc::errc::bad_request,
                      fmt::format("cannot read the setup key {}: {}; a setup key names a file or directory whose "
                                  "contents the environment depends on (requirements.txt, wheels/)",
                                  ipc::printable(path, 256), std::strerror(e)));
  return ok_status();
}

// The digest of the bash at `path`, remembered while the file stays the same one (an
// upgrade replaces it: another inode, size or time).
result<std::string> bash_digest(const std::string& path) {
  struct identity {
    dev_t dev;
    ino_t ino;
    off_t size;
    int64_t mtime_ns;
    bool operator==(const identity&) const = default;
  };
  static std::mutex mu;
  static std::map<std::string, std::pair<identity, std::string>> known;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return make_error(ipc::errc::internal, fmt::format("cannot read the bash that runs setups, {}: {}", path, std::strerror(errno)));
  identity id{st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec * 1'000'000'000 + st.st_mtim.tv_nsec};
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = known.find(path); it != known.end() && it->second.first == id) return it->second.second;
  }
  sha256 h;
  const char* what = nullptr;
  unique_fd fd = open_regular(path, &what);
  int e = fd ? h.file(fd.get()) : what != nullptr ? EINVAL : errno;
  if (e != 0)
    return make_error(ipc::errc::internal, fmt::format("cannot read the bash that runs setups, {}: {}", path,
                                                       what != nullptr ? what : std::strerror(e)));
  std::string digest = h.hex(SHA256_DIGEST_LENGTH);
  std::lock_guard<std::mutex> lock(mu);
  known[path] = {id, digest};
  return digest;
}

// Kills what a setup that an earlier sbshd ran may have left: the processes of its process
// session `sid` that still carry its SBSH_ENV (a pid that was reused since carries another).
void end_leftovers(pid_t sid, const std::string& path) {
  if (sid <= 1) return;
  std::string mark = "SBSH_ENV=" + path;
  for (const auto& p : procs::list()) {
    if (p.sid != sid) continue;
    std::ifstream f("/proc/" + std::to_string(p.pid) + "/environ", std::ios::binary);
    std::stringstream env;
    env << f.rdbuf();
    // Each entry between NULs, the first one included.
    std::string all = std::string(1, '\0') + env.str() + std::string(1, '\0');
    if (all.find(std::string(1, '\0') + mark + std::string(1, '\0')) != std::string::npos) ::kill(p.pid, SIGKILL);
  }
}

// end_leftovers for the setup that the record at `record` (HASH.building) names, if any.
void end_recorded(const std::string& record, const std::string& path) {
  std::ifstream f(record);
  pid_t sid = 0;
  if (f >> sid) end_leftovers(sid, path);
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr std::string_view kReady = ".ready";

// The complete environments in `dir`, from their markers; sizes only when `measure`.
std::vector<environment_info> read_envs(const std::string& dir, bool measure) {
  std::vector<environment_info> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n.size() <= kReady.size() || n[0] == '.' || !n.ends_with(kReady)) continue;
    environment_info env;
    env.hash = std::string(n.substr(0, n.size() - kReady.size()));
    env.path = dir + "/" + env.hash;
    std::string marker = env.path + std::string(kReady);
    struct stat st {};
    if (::stat(marker.c_str(), &st) != 0) continue;
    env.last_used_ms = st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1'000'000;
    std::ifstream f(marker);
    auto meta = nlohmann::json::parse(f, nullptr, false);
    if (meta.is_object()) {
      env.setup = meta.value("setup", std::string());
      if (auto k = meta.find("keys"); k != meta.end() && k->is_array())
        for (const auto& key : *k)
          if (key.is_string()) env.keys.push_back(key.get<std::string>());
      env.created_at_ms = meta.value("created_at_ms", int64_t{0});
    }
    if (measure) env.size_bytes = tree_bytes(env.path);
    out.push_back(std::move(env));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.last_used_ms > b.last_used_ms; });
  return out;
}

// A failed setup's output as its error shows it: line by line, each line with its control
// characters escaped (ipc::printable), so that it reads as it was printed and still cannot
// drive a terminal.
std::string printable_lines(std::string_view s) {
  std::string out;
  for (size_t pos = 0; pos <= s.size();) {
    size_t end = std::min(s.find('\n', pos), s.size());
    if (pos != 0) out += '\n';
    out += ipc::printable(s.substr(pos, end - pos), kTailBytes);
    pos = end + 1;
  }
  return out;
}

}  // namespace

struct env_store::build_job {
  struct waiter {
    output_fn out;
    std::function<void(status)> done;
  };
  std::map<uint64_t, waiter> waiters;  // by ticket
  setup_run how;
  uv::child_ptr proc;
  pid_t sid = 0;
  unique_fd pipes[2];  // its stdout and stderr
  uv::handle_ptr<uv::fd_watch> watches[2];
  std::string tail;  // the end of its output, both streams as they came
};

env_store::env_store(uv_loop_t* loop, std::string dir, std::string bash, std::string wrapper)
    : loop_(loop), dir_(std::move(dir)), bash_(std::move(bash)), wrapper_(std::move(wrapper)) {}

env_store::~env_store() {
  // sbshd is ending: the setups under way stop, and what they built is rebuilt next time
  // (their .building records say so).
  for (auto& [hash, job] : builds_) {
    if (job->proc == nullptr) continue;
    procs::signal_session(job->sid, 0, SIGKILL);
    job->proc.reset();
    for (auto& w : job->watches) w.reset();
  }
}

void env_store::key(std::string setup, std::vector<std::string> keys, snapshot_store::rules rules,
                    std::string confinement, uint64_t owner, std::function<void(result<std::string>)> done) {
  auto out = std::make_shared<result<std::string>>(std::string());
  off_loop_client(
      loop_, owner,
      [out, setup = std::move(setup), keys = std::move(keys), rules = std::move(rules), confinement = std::move(confinement),
       bash = bash_] {
        auto digest = bash_digest(bash);
        if (!digest) {
          *out = digest.err();
          return;
        }
        sha256 h;
        h.field("sbsh environment 1");
        h.field(setup);
        h.field(bash);
        h.field(*digest);
        h.field(std::to_string(keys.size()));
        for (const auto& k : keys)
          if (auto hashed = hash_key(h, k, rules); !hashed) {
            *out = hashed.err();
            return;
          }
        // After the keys, and only when there is one: the hashes of unconfined setups stay
        // what they were.
        if (!confinement.empty()) h.field(confinement);
        *out = h.hex(16);
      },
      [out, done = std::move(done)] { done(std::move(*out)); });
}

bool env_store::use_if_ready(const std::string& hash) const {
  std::string ready = path_of(hash) + ".ready";
  struct stat st {};
  if (::stat(ready.c_str(), &st) != 0 || ::stat(path_of(hash).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  (void)::utimensat(AT_FDCWD, ready.c_str(), nullptr, 0);  // last used: now
  return true;
}

uint64_t env_store::build(const std::string& hash, const setup_run& how, output_fn out, std::function<void(status)> done) {
  uint64_t ticket = next_ticket_++;
  auto& job = builds_[hash];
  bool fresh = job == nullptr;
  if (fresh) {
    job = std::make_unique<build_job>();
    job->how = how;
  }
  job->waiters.emplace(ticket, build_job::waiter{std::move(out), std::move(done)});
  if (fresh) start(hash, how);
  return ticket;
}

void env_store::leave(uint64_t ticket) {
  for (auto& [hash, job] : builds_) {
    if (job->waiters.erase(ticket) == 0) continue;
    if (job->waiters.empty() && job->proc != nullptr) {
      spdlog::info("environment {}: nobody waits for its setup any more; stopping it", hash);
      // The wrapper kills bash and ends once bash's PID namespace is empty; setup_ended then
      // deletes what it made.
      job->proc->kill(SIGTERM);
    }
    return;
  }
}

void env_store::when_idle(std::function<void()> idle) {
  idle_ = std::move(idle);
  if (std::none_of(builds_.begin(), builds_.end(), [](const auto& b) { return b.second->proc != nullptr; }))
    std::exchange(idle_, nullptr)();
}

void env_store::list(std::function<void(std::vector<environment_info>)> done) {
  auto out = std::make_shared<std::vector<environment_info>>();
  off_loop(
      loop_, [out, dir = dir_] { *out = read_envs(dir, true); }, [out, done = std::move(done)] { done(std::move(*out)); });
}

status env_store::remove(const std::string& hash, std::function<void()> done) {
  std::string path = path_of(hash);
  if (hash.empty() || hash.find('/') != std::string::npos || hash[0] == '.' || builds_.contains(hash) ||
      ::unlink((path + std::string(kReady)).c_str()) != 0)
    return make_error(ipc::errc::no_such_env,
                      fmt::format("no environment {}; 'sbsh env ls' lists them", ipc::printable(hash, 80)));
  // Renamed aside, so that a new build of the same hash starts from nothing.
  std::string aside = fmt::format("{}/.remove-{}-{}", dir_, hash, ++seq_);
  if (::rename(path.c_str(), aside.c_str()) != 0) aside = path;
  off_loop(
      loop_,
      [aside] {
        if (!remove_tree(aside)) spdlog::error("cannot delete all of {}", aside);
      },
      std::move(done));
  return ok_status();
}

void env_store::sweep_incomplete() {
  std::vector<std::string> left;
  if (DIR* d = ::opendir(dir_.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      struct stat st {};
      bool leftover = n[0] == '.' && n.starts_with(".remove-");  // a removal sbshd did not finish
      if (!leftover && n.find('.') == std::string::npos && !builds_.contains(n))
        leftover = ::stat((path_of(n) + std::string(kReady)).c_str(), &st) != 0;  // a setup cut short
      if (leftover) left.push_back(n);
    }
    ::closedir(d);
  }
  for (const auto& n : left) {
    // Renamed aside on the loop, so that a build of the same hash starting later starts from
    // nothing; what the cut-short setup still runs is ended by its record.
    std::string path = path_of(n);
    std::string aside = n[0] == '.' ? path : fmt::format("{}/.remove-{}-{}", dir_, n, ++seq_);
    if (aside != path && ::rename(path.c_str(), aside.c_str()) != 0) continue;
    std::string record = n[0] == '.' ? std::string() : path + ".building";
    std::string moved_record = record.empty() ? record : aside + ".building";
    if (!record.empty()) (void)::rename(record.c_str(), moved_record.c_str());
    off_loop(
        loop_,
        [path, aside, moved_record] {
          if (!moved_record.empty()) end_recorded(moved_record, path);
          remove_tree(aside);
          if (!moved_record.empty()) ::unlink(moved_record.c_str());
        },
        [] {});
  }
}

void env_store::start(const std::string& hash, const setup_run& how) {
  // Off the loop: end and delete what an interrupted build left, then make the directory.
  std::string path = path_of(hash);
  auto err = std::make_shared<std::string>();
  off_loop(
      loop_,
      [err, path, dir = dir_] {
        end_recorded(path + ".building", path);
        ::unlink((path + ".ready").c_str());
        if (!remove_tree(path)) {
          *err = fmt::format("cannot delete the incomplete environment {}", path);
          return;
        }
        if (auto made = make_dirs(dir); !made) {
          *err = made.err().message;
          return;
        }
        if (::mkdir(path.c_str(), 0755) != 0) *err = fmt::format("cannot create {}: {}", path, std::strerror(errno));
      },
      [this, err, hash, how] {
        auto it = builds_.find(hash);
        if (it == builds_.end()) return;
        build_job& job = *it->second;
        if (!err->empty()) return finish(hash, make_error(ipc::errc::internal, *err));
        if (job.waiters.empty()) return setup_ended(hash, -1, SIGKILL);  // nobody waits: deletes the directory
        int p[2][2];
        unique_fd write_ends[2];
        for (int i = 0; i < 2; ++i) {
          if (::pipe2(p[i], O_CLOEXEC) != 0)
            return finish(hash, make_error(ipc::errc::internal, fmt::format("pipe: {}", std::strerror(errno))));
          job.pipes[i] = unique_fd(p[i][0]);
          write_ends[i] = unique_fd(p[i][1]);
          set_nonblocking(p[i][0]);
        }
        unique_fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        std::string path = path_of(hash);
        std::vector<std::string> env_store = how.env;
        env_store.push_back("SBSH_ENV=" + path);
        env_store.push_back("SBSH_BASH=" + bash_);  // the wrapper takes it out before bash starts
        // sbsh-wrapper [OPTIONS] --setup TEXT: bash -c TEXT started as the session's shell is.
        std::vector<std::string> argv_store{wrapper_};
        argv_store.insert(argv_store.end(), how.wrapper_args.begin(), how.wrapper_args.end());
        argv_store.emplace_back("--setup");
        argv_store.push_back(how.setup);
        auto argv = c_pointers(argv_store);
        auto envp = c_pointers(env_store);
        const int fds[] = {null.get(), write_ends[0].get(), write_ends[1].get()};
        uv::child_process::options o;
        o.file = wrapper_.c_str();
        o.argv = argv.data();
        o.envp = envp.data();
        o.cwd = how.cwd.c_str();
        o.fds = fds;
        o.new_session = true;
        o.explain = spawn_failure;
        auto proc = uv::child_process::spawn(loop_, o,
                                             [this, hash](int64_t status, int sig) { setup_ended(hash, status, sig); });
        if (!proc) {
          job.tail = fmt::format("cannot start {}: {}", wrapper_, proc.err().message);
          return setup_ended(hash, 127, 0);
        }
        job.proc = std::move(*proc);
        job.sid = job.proc->pid();
        if (std::ofstream f(path + ".building"); f) f << job.sid << "\n";
        for (int i = 0; i < 2; ++i) {
          job.watches[i] = uv::make_handle<uv::fd_watch>(loop_, job.pipes[i].get());
          job.watches[i]->start(UV_READABLE, [this, hash, i](int, int) {
            if (auto it = builds_.find(hash); it != builds_.end()) read_output(*it->second, i);
          });
        }
        spdlog::info("environment {}: running its setup in {} (pid {})", hash, how.cwd, job.sid);
      });
}

void env_store::read_output(build_job& job, int which) {
  char buf[1 << 16];
  ssize_t n;
  while (job.pipes[which] && (n = ::read(job.pipes[which].get(), buf, sizeof buf)) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // EAGAIN: more later
    }
    std::string_view data(buf, static_cast<size_t>(n));
    // A copy: a waiter's client may go (and leave) while it is told.
    std::vector<output_fn> outs;
    for (auto& [ticket, w] : job.waiters)
      if (w.out) outs.push_back(w.out);
    for (auto& out : outs) out(which == 0 ? ipc::kStdout : ipc::kStderr, data);
    job.tail.append(data);
    if (job.tail.size() > 2 * kTailBytes) job.tail.erase(0, job.tail.size() - kTailBytes);
  }
  job.watches[which].reset();  // end of file
  job.pipes[which].reset();
}

void env_store::setup_ended(const std::string& hash, int64_t status, int sig) {
  auto it = builds_.find(hash);
  if (it == builds_.end()) return;
  build_job& job = *it->second;
  for (int i = 0; i < 2; ++i)
    if (job.pipes[i]) read_output(job, i);  // all it wrote is in the pipes now
  for (auto& w : job.watches) w.reset();
  job.proc.reset();
  if (idle_ && std::none_of(builds_.begin(), builds_.end(), [](const auto& b) { return b.second->proc != nullptr; }))
    std::exchange(idle_, nullptr)();
  bool ok = status == 0 && sig == 0 && !job.waiters.empty();
  std::string path = path_of(hash);
  std::string why;
  if (!ok && !job.waiters.empty()) {
    why = sig != 0 ? fmt::format("the setup was killed by signal {}", sig)
                   : fmt::format("the setup exited with status {}", status);
    std::string tail = job.tail.size() > kTailBytes ? job.tail.substr(job.tail.size() - kTailBytes) : job.tail;
    while (!tail.empty() && tail.back() == '\n') tail.pop_back();
    why += "; nothing of it was kept: the next session created with this setup runs it again";
    why += tail.empty() ? "; it wrote nothing" : std::string(ipc::kSetupOutputFollows) + printable_lines(tail);
  }
  nlohmann::json meta = {{"setup", job.how.setup},
                         {"keys", job.how.keys},
                         {"bash", bash_},
                         {"created_at_ms", now_ms()}};
  std::string record = meta.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  auto err = std::make_shared<std::string>();
  // Off the loop: end what the setup left running, then mark the environment complete or
  // delete it.
  off_loop(
      loop_,
      [ok, err, path, record, sid = job.sid] {
        if (sid > 1) procs::signal_session(sid, 0, SIGKILL);
        if (ok) {
          if (auto w = write_file_atomically(path + ".ready", record); !w) *err = w.err().message;
        }
        if (!ok || !err->empty()) remove_tree(path);
        ::unlink((path + ".building").c_str());
      },
      [this, hash, ok, err, why] {
        if (!err->empty()) return finish(hash, make_error(ipc::errc::internal, *err));
        if (ok) spdlog::info("environment {} is ready", hash);
        else if (!why.empty()) spdlog::warn("environment {}: {}", hash, why.substr(0, why.find('\n')));
        finish(hash, ok ? ok_status() : make_error(ipc::errc::setup_failed, why.empty() ? "the setup was stopped" : why));
      });
}

void env_store::finish(const std::string& hash, const status& outcome) {
  auto it = builds_.find(hash);
  if (it == builds_.end()) return;
  auto job = std::move(it->second);
  builds_.erase(it);
  for (auto& [ticket, w] : job->waiters) w.done(outcome);
}

}  // namespace sbsh::daemon
