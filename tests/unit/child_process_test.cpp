// uv/child_process.cpp: posix_spawn + pidfd on a real libuv loop, with real children.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "uv/child_process.h"

namespace sbsh::daemon::child_process_tests {

struct ended {
  int64_t status = -2;
  int sig = -2;
};

// One loop per test, run until every handle has closed.
class child_process_test : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    devnull_ = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    ASSERT_GE(devnull_, 0);
  }
  void TearDown() override {
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
    if (devnull_ >= 0) ::close(devnull_);
  }
  int devnull() const { return devnull_; }

  // Runs bash -c `script` with `fds`; fills *out with the exit and returns the child, or
  // an empty pointer with the error's code and message in *err.
  uv::child_ptr start(const std::string& script, std::vector<int> fds, ended* out, std::string* err,
                      const char* cwd = nullptr, const char* file = "/bin/bash") {
    std::string s = script;
    char a0[] = "bash", a1[] = "-c";
    char* argv[] = {a0, a1, s.data(), nullptr};
    char* envp[] = {nullptr};
    uv::child_process::options o;
    o.file = file;
    o.argv = argv;
    o.envp = envp;
    o.cwd = cwd;
    o.fds = fds;
    auto r = uv::child_process::spawn(&loop_, o, [out](int64_t st, int sig) { *out = {st, sig}; });
    if (!r) *err = r.err().code + ": " + r.err().message;
    return r ? std::move(*r) : uv::child_ptr{};
  }

  uv_loop_t loop_{};
  int devnull_ = -1;
};

struct pipe_pair {
  int r = -1, w = -1;
  pipe_pair() {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) == 0) r = p[0], w = p[1];
  }
  ~pipe_pair() {
    if (r >= 0) ::close(r);
    close_write();
  }
  void close_write() {
    if (w >= 0) ::close(w);
    w = -1;
  }
  std::string drain() {
    close_write();
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(r, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
    return s;
  }
};

TEST_F(child_process_test, ExitStatusAndCrossedDescriptors) {
  // Each pipe's write end is placed at the other's number in the child: a naive dup2
  // sequence would overwrite the second source before copying it.
  pipe_pair a, b;
  ASSERT_GE(a.w, 0);
  ASSERT_GE(b.w, 0);
  std::vector<int> fds(static_cast<size_t>(std::max(a.w, b.w) + 1), devnull());
  fds[static_cast<size_t>(a.w)] = b.w;
  fds[static_cast<size_t>(b.w)] = a.w;
  ended e;
  std::string err;
  auto c = start(fmt::format("echo to-b >&{}; echo to-a >&{}; exit 7", a.w, b.w), fds, &e, &err);
  ASSERT_NE(c, nullptr) << err;
  EXPECT_GT(c->pid(), 0);
  uv::child_process::release(std::move(c), [&e](int64_t st, int sig) { e = {st, sig}; });
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_EQ(e.status, 7);
  EXPECT_EQ(e.sig, 0);
  EXPECT_EQ(a.drain(), "to-a\n");
  EXPECT_EQ(b.drain(), "to-b\n");
}

TEST_F(child_process_test, CleanSignalsOnlyGivenDescriptorsAndCwd) {
  // What sbshd's state must not leak into a wrapper: a blocked signal, an ignored one, and
  // a descriptor opened without close-on-exec.
  sigset_t usr1, old_mask;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  ASSERT_EQ(::sigprocmask(SIG_BLOCK, &usr1, &old_mask), 0);
  auto old_pipe = ::signal(SIGPIPE, SIG_IGN);
  int leaky = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC
  ASSERT_GE(leaky, 0);
  pipe_pair out;
  ended e;
  std::string err;
  auto c = start("pwd; sed -n 's/^SigBlk:\\t//p; s/^SigIgn:\\t//p' /proc/self/status; exec ls /proc/self/fd",
                  {devnull(), out.w, out.w}, &e, &err, "/tmp");
  ::close(leaky);
  ::signal(SIGPIPE, old_pipe);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  ASSERT_NE(c, nullptr) << err;
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_EQ(e.status, 0);
  // ls lists 0-2 and the directory it reads: the leaky descriptor is gone.
  std::string got = out.drain();
  ASSERT_EQ(got.size(), 5 + 2 * 17 + 8) << got;
  EXPECT_EQ(got.substr(0, 5), "/tmp\n");
  EXPECT_EQ(got.substr(5, 17), "0000000000000000\n");  // nothing blocked
  EXPECT_EQ(got.substr(39), "0\n1\n2\n3\n");
  // Nothing ignored, SIGPIPE included, except that glibc's posix_spawn leaves its own
  // internal signals (32 and 33) ignored in the child; the wrapper resets those for bash
  // (wrapper/spawn.cpp; exec_test checks what a command sees).
  uint64_t ignored = std::stoull(got.substr(22, 16), nullptr, 16);
  EXPECT_EQ(ignored & ~((1ULL << 31) | (1ULL << 32)), 0u) << got;
}

TEST_F(child_process_test, KillReportsTheSignal) {
  ended e;
  std::string err;
  auto c = start("exec sleep 60", {devnull(), devnull(), devnull()}, &e, &err);
  ASSERT_NE(c, nullptr) << err;
  EXPECT_FALSE(c->exited());
  pid_t pid = c->pid();
  c->kill(SIGTERM);
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_EQ(e.sig, SIGTERM);
  EXPECT_EQ(e.status, 0);
  // Its owner still holds it: an ended child stays readable until the pointer lets go.
  EXPECT_TRUE(c->exited());
  EXPECT_EQ(c->pid(), pid);
  c->kill(SIGKILL);  // a no-op on an ended child, never a recycled pid
  errno = 0;
  EXPECT_EQ(::kill(pid, 0), -1);  // reaped, not left a zombie
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(child_process_test, FailuresAreReportedNotStarted) {
  ended e;
  std::string err;
  EXPECT_EQ(start("true", {devnull(), devnull(), devnull()}, &e, &err, nullptr, "/nonexistent/sbsh-wrapper"),
            nullptr);
  EXPECT_EQ(err, std::string("spawn: ") + std::strerror(ENOENT));
  err.clear();
  EXPECT_EQ(start("true", {devnull(), devnull(), devnull()}, &e, &err, "/nonexistent-dir"), nullptr);
  EXPECT_EQ(err, std::string("spawn: ") + std::strerror(ENOENT));
  err.clear();
  EXPECT_EQ(start("true", {devnull(), 12345, devnull()}, &e, &err), nullptr);
  EXPECT_EQ(err, std::string("spawn: ") + std::strerror(EBADF));
  EXPECT_EQ(e.status, -2);  // no exit was reported for children that never ran
}

// What sbshd counts as its own children: those it spawned, and a child another started for it
// (a fork server's copy, made with CLONE_PARENT; here a plain fork) once it watches it, with
// its status read; until they are reaped. Any other child is one it inherited
// (daemon/inherited.h).
TEST_F(child_process_test, OwnChildrenAreKnownUntilReaped) {
  ended spawned, forked;
  std::string err;
  auto c = start("exit 3", {devnull(), devnull(), devnull()}, &spawned, &err);
  ASSERT_NE(c, nullptr) << err;
  EXPECT_TRUE(uv::child_process::spawned_here(c->pid()));
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::usleep(50'000);
    ::_exit(7);
  }
  EXPECT_FALSE(uv::child_process::spawned_here(pid));
  auto w = uv::child_process::watch(&loop_, pid, [&forked](int64_t st, int sig) { forked = {st, sig}; });
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(uv::child_process::spawned_here(pid));
  int spawned_pid = c->pid();
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_EQ(spawned.status, 3);
  EXPECT_EQ(forked.status, 7);
  EXPECT_EQ(forked.sig, 0);
  EXPECT_FALSE(uv::child_process::spawned_here(spawned_pid));
  EXPECT_FALSE(uv::child_process::spawned_here(pid));
  // Not a child: watched, never counted as one (the test's parent is no child of the test).
  auto other = uv::child_process::watch(&loop_, ::getppid(), [](int64_t, int) {});
  ASSERT_NE(other, nullptr);
  EXPECT_FALSE(uv::child_process::spawned_here(::getppid()));
  uv::child_process::forget(std::move(other));
}

size_t open_descriptors() {
  size_t n = 0;
  for (int fd = 0; fd < 4096; ++fd)
    if (::fcntl(fd, F_GETFD) >= 0) ++n;
  return n;
}

// sbshd's wrappers: a child holds no descriptor of its own, so thousands cost none each, and
// children that end together are all reaped and reported by one SIGCHLD watch, which closes
// when it has nothing left to watch (TearDown's loop could not close otherwise).
TEST_F(child_process_test, ChildrenHoldNoDescriptorAndEndTogether) {
  constexpr int kChildren = 40;
  std::vector<ended> ends(kChildren);
  std::vector<uv::child_ptr> kids;
  std::string err;
  kids.push_back(start("exec sleep 60", {devnull(), devnull(), devnull()}, ends.data(), &err));
  ASSERT_NE(kids.back(), nullptr) << err;
  size_t with_one = open_descriptors();
  for (int i = 1; i < kChildren; ++i) {
    kids.push_back(start("exec sleep 60", {devnull(), devnull(), devnull()}, &ends[i], &err));
    ASSERT_NE(kids.back(), nullptr) << err;
    EXPECT_FALSE(kids.back()->holds_descriptor());
    EXPECT_TRUE(kids.back()->running());
  }
  EXPECT_EQ(open_descriptors(), with_one);
  for (auto& k : kids) k->kill(SIGTERM);
  uv_run(&loop_, UV_RUN_DEFAULT);
  for (int i = 0; i < kChildren; ++i) {
    EXPECT_EQ(ends[i].sig, SIGTERM) << i;
    EXPECT_TRUE(kids[i]->exited());
    EXPECT_FALSE(kids[i]->running());
  }
  // An owner may let go of its child in the child's own exit callback.
  ended own;
  auto self = start("exit 4", {devnull(), devnull(), devnull()}, &own, &err);
  ASSERT_NE(self, nullptr) << err;
  self->on_exit([&own, &self](int64_t st, int sig) {
    own = {st, sig};
    self.reset();
  });
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_EQ(own.status, 4);
  EXPECT_EQ(self, nullptr);
  // A child let go of before it ends is still reaped, not left a zombie.
  ended last;
  auto c = start("exec sleep 0.05", {devnull(), devnull(), devnull()}, &last, &err);
  ASSERT_NE(c, nullptr) << err;
  pid_t pid = c->pid();
  uv::child_process::release(std::move(c), [&last](int64_t st, int sig) { last = {st, sig}; });
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_EQ(last.status, 0);
  errno = 0;
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

// A child that had already ended when its watch began (its SIGCHLD came before any watch was
// there to see it) is reported all the same; a process that is not a child is watched
// through a descriptor of its own.
TEST_F(child_process_test, AChildThatEndedBeforeItsWatchIsReported) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ::_exit(9);
  siginfo_t si{};
  for (int i = 0; i < 5000 && si.si_pid == 0; ++i) {
    ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOHANG | WNOWAIT), 0);
    if (si.si_pid == 0) ::usleep(1000);
  }
  ASSERT_EQ(si.si_pid, pid);  // a zombie now
  ended e;
  auto w = uv::child_process::watch(&loop_, pid, [&e](int64_t st, int sig) { e = {st, sig}; });
  ASSERT_NE(w, nullptr);
  EXPECT_FALSE(w->holds_descriptor());
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_EQ(e.status, 9);
  EXPECT_EQ(e.sig, 0);
  errno = 0;
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  auto other = uv::child_process::watch(&loop_, ::getppid(), [](int64_t, int) {});
  ASSERT_NE(other, nullptr);
  EXPECT_TRUE(other->holds_descriptor());
  EXPECT_TRUE(other->running());
  uv::child_process::forget(std::move(other));
}

}  // namespace sbsh::daemon::child_process_tests
