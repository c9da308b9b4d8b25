// The copy of a directory for a snapshot session (see tree_copy.h).
#include "wrapper/tree_copy.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/ignored.h"
#include "ipc/fd.h"

namespace sbsh::wrapper {

namespace {

// The bytes of the files are copied by a few threads while the tree is walked: the walk
// creates each file (so directories get their entries, and then their times, in order), and
// a worker copies its bytes and sets its attributes. The queue is short: each job holds two
// descriptors.
struct copier;
struct file_job {
  int in, out;
  std::string rel;
  struct stat st;
};

struct copier {
  std::string root;               // the source, for messages
  ignored::listing ignored;  // what the rules leave out
  bool as_root = ::geteuid() == 0;
  std::atomic<bool> try_clone{true};
  unsigned long long special = 0;
  std::mutex mu;  // guards error and the queue
  std::string error;
  std::atomic<bool> failed{false};
  std::deque<file_job> queue;
  bool walk_done = false;
  std::condition_variable work_ready, room_ready;
  static constexpr size_t kQueueMax = 64;

  [[nodiscard]] std::string at(const std::string& rel) const { return rel.empty() ? root : root + "/" + rel; }

  bool fail(const std::string& what, int err) {
    std::lock_guard<std::mutex> lock(mu);
    if (error.empty()) error = what + ": " + std::strerror(err);
    failed = true;
    return false;
  }

  void enqueue(file_job job) {
    std::unique_lock<std::mutex> lock(mu);
    room_ready.wait(lock, [this] { return queue.size() < kQueueMax; });
    queue.push_back(std::move(job));
    work_ready.notify_one();
  }

  void worker() {
    std::vector<char> buf;  // for filesystems without copy_file_range
    for (;;) {
      file_job job;
      {
        std::unique_lock<std::mutex> lock(mu);
        work_ready.wait(lock, [this] { return !queue.empty() || walk_done; });
        if (queue.empty()) return;
        job = std::move(queue.front());
        queue.pop_front();
        room_ready.notify_one();
      }
      bool ok = !failed && copy_bytes(job.in, job.out, job.rel, job.st.st_size, buf);
      if (ok) keep_attributes(job.out, job.st);
      ::close(job.in);
      if (::close(job.out) != 0 && ok) fail("cannot write the copy of " + at(job.rel), errno);
    }
  }

  // Runs the walk `walk` with `threads` workers copying bytes; false when anything failed.
  template <typename Walk>
  bool with_workers(unsigned threads, Walk&& walk) {
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < threads; ++i) pool.emplace_back([this] { worker(); });
    bool ok = walk();
    {
      std::lock_guard<std::mutex> lock(mu);
      walk_done = true;
    }
    work_ready.notify_all();
    for (auto& t : pool) t.join();
    return ok && !failed;
  }

  void keep_attributes(int fd, const struct stat& st) const {
    if (as_root) (void)::fchown(fd, st.st_uid, st.st_gid);
    (void)::fchmod(fd, st.st_mode & 07777);
    const struct timespec times[2] = {st.st_atim, st.st_mtim};
    (void)::futimens(fd, times);
  }

  // Copies `size` bytes (fewer if the file shrank meanwhile). A filesystem that cannot clone
  // says so for every file: after the first refusal, cloning is not tried again.
  bool copy_bytes(int in, int out, const std::string& rel, off_t size, std::vector<char>& buf) {
    if (size > 0 && try_clone) {
      if (::ioctl(out, FICLONE, in) == 0) return true;
      try_clone = false;
    }
    // A size of 0 may be a file that does not know its size (procfs): it is read to its end.
    bool by_hand = size == 0;
    for (off_t done = 0; !by_hand && done < size;) {
      ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, static_cast<size_t>(size - done), 0);
      if (n > 0) done += n;
      else if (n == 0) break;
      else if (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) by_hand = true;
      else if (errno != EINTR) return fail("cannot copy " + at(rel), errno);
    }
    if (!by_hand) return true;
    // Where copy_file_range cannot: from where it left off (the offsets are the files').
    buf.resize(1u << 17);
    for (;;) {
      ssize_t n = ::read(in, buf.data(), buf.size());
      if (n == 0) return true;
      if (n < 0) {
        if (errno == EINTR) continue;
        return fail("cannot read " + at(rel), errno);
      }
      if (int e = write_all(out, std::string_view(buf.data(), static_cast<size_t>(n))); e != 0)
        return fail("cannot write the copy of " + at(rel), e);
    }
  }

  bool copy_file(int from, int to, const char* name, const std::string& rel, const struct stat& st) {
    // It was a regular file when listed; opened without waiting and looked at again, since it
    // may have been replaced by a FIFO (whose open would wait for a writer) or a device.
    int in = ::openat(from, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (in < 0) return fail("cannot read " + at(rel), errno);
    struct stat now {};
    if (::fstat(in, &now) != 0 || !S_ISREG(now.st_mode)) {
      ::close(in);
      ++special;
      return true;
    }
    int out = ::openat(to, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (out < 0) {
      int e = errno;
      ::close(in);
      return fail("cannot create the copy of " + at(rel), e);
    }
    enqueue(file_job{in, out, rel, st});
    return !failed;
  }

  bool copy_link(int from, int to, const char* name, const std::string& rel, const struct stat& st) {
    // st_size is the target's length, except on a few filesystems that say 0.
    std::string target(std::max<size_t>(static_cast<size_t>(st.st_size), PATH_MAX) + 1, '\0');
    ssize_t n = ::readlinkat(from, name, target.data(), target.size());
    if (n < 0) return fail("cannot read the link " + at(rel), errno);
    target.resize(static_cast<size_t>(n));
    if (::symlinkat(target.c_str(), to, name) != 0) return fail("cannot create the link " + at(rel), errno);
    if (as_root) (void)::fchownat(to, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW);
    const struct timespec times[2] = {st.st_atim, st.st_mtim};
    (void)::utimensat(to, name, times, AT_SYMLINK_NOFOLLOW);
    return true;
  }

  // Copies the entries of directory `from` into `to`; `rel` is its path in the tree, "" or
  // ending in '/'.
  bool copy_dir(int from, int to, const std::string& rel) {
    int fd = ::dup(from);
    if (fd < 0) return fail("cannot read " + at(rel), errno);
    DIR* d = ::fdopendir(fd);
    if (d == nullptr) {
      ::close(fd);
      return fail("cannot read " + at(rel), errno);
    }
    bool ok = true;
    errno = 0;
    while (dirent* e = ::readdir(d)) {
      const char* name = e->d_name;
      if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
      if (!(ok = copy_entry(from, to, name, rel))) break;
      errno = 0;
    }
    if (ok && errno != 0) ok = fail("cannot read " + at(rel), errno);
    ::closedir(d);
    return ok;
  }

  bool copy_entry(int from, int to, const char* name, const std::string& dir_rel) {
    struct stat st {};
    std::string rel = dir_rel + name;
    if (::fstatat(from, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return true;  // gone while the tree was read
      return fail("cannot read " + at(rel), errno);
    }
    if (S_ISDIR(st.st_mode)) {
      if ((ignored.skip_dot_git && std::strcmp(name, ".git") == 0) || ignored.has(rel + "/")) return true;
      int in = ::openat(from, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (in < 0) return fail("cannot read " + at(rel), errno);
      if (::mkdirat(to, name, 0700) != 0) {
        int e = errno;
        ::close(in);
        return fail("cannot create the copy of " + at(rel), e);
      }
      int out = ::openat(to, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      bool ok = out >= 0 ? copy_dir(in, out, rel + "/") : fail("cannot open the copy of " + at(rel), errno);
      if (ok) keep_attributes(out, st);  // after the entries: they change its times
      ::close(in);
      if (out >= 0) ::close(out);
      return ok;
    }
    if (ignored.has(rel)) return true;
    if (S_ISREG(st.st_mode)) return copy_file(from, to, name, rel, st);
    if (S_ISLNK(st.st_mode)) return copy_link(from, to, name, rel, st);
    ++special;  // a fifo, a socket or a device node
    return true;
  }
};

}  // namespace

int copy_tree_main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: sbsh-wrapper --copy-tree SOURCE TARGET 0|1 [RULE...]\n");
    return 2;
  }
  std::string source = argv[0], target = argv[1];
  bool gitignore = std::strcmp(argv[2], "1") == 0;
  std::vector<std::string> rules(argv + 3, argv + argc);
  copier c;
  c.root = source;

  int from = ::open(source.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct stat st {};
  bool ok = from >= 0 ? ::fstat(from, &st) == 0 : c.fail("cannot read " + source, errno);
  if (ok && (!rules.empty() || gitignore)) {
    std::string gitdir = target + ".rules";
    c.error = ignored::list(source, gitdir, rules, gitignore, c.ignored,
                           "copy everything with --no-default-ignores (and neither --ignore nor --gitignore)");
    ok = c.error.empty();
  }
  if (ok && ::mkdir(target.c_str(), 0700) != 0) ok = c.fail("cannot create " + target, errno);
  int to = ok ? ::open(target.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
  if (ok && to < 0) ok = c.fail("cannot open " + target, errno);
  // Two workers at least: one file's bytes are copied while the next one is opened.
  unsigned threads = std::clamp(std::thread::hardware_concurrency(), 2u, 4u);
  if (ok) ok = c.with_workers(threads, [&] { return c.copy_dir(from, to, ""); });
  if (ok) c.keep_attributes(to, st);
  if (from >= 0) ::close(from);
  if (to >= 0) ::close(to);
  if (!ok) {
    std::fprintf(stderr, "%s\n", c.error.c_str());
    return 1;
  }
  std::printf("special %llu\n", c.special);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace sbsh::wrapper
