// sbsh attach on a pseudo-terminal, for the tests that type at its prompt.
#pragma once

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "fixture.h"

namespace sbsh::test {

class attach_tty {
 public:
  // `sbsh attach -s tty` on socket `sock` (with --no-autostart unless `autostart`).
  explicit attach_tty(const std::string& sock, bool autostart = true) {
    pid_ = ::forkpty(&master_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      std::string sbsh = bin("sbsh");
      if (autostart) ::execl(sbsh.c_str(), "sbsh", "--socket", sock.c_str(), "attach", "-s", "tty", nullptr);
      else ::execl(sbsh.c_str(), "sbsh", "--socket", sock.c_str(), "--no-autostart", "attach", "-s", "tty", nullptr);
      ::_exit(127);
    }
  }
  ~attach_tty() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) ::close(master_);
  }
  attach_tty(const attach_tty&) = delete;
  attach_tty& operator=(const attach_tty&) = delete;

  [[nodiscard]] const std::string& seen() const { return seen_; }
  [[nodiscard]] bool started() const { return pid_ > 0 && master_ >= 0; }
  void type(const std::string& keys) const { ASSERT_EQ(::write(master_, keys.data(), keys.size()), static_cast<ssize_t>(keys.size())); }
  // Types at the prompt once the line editor has put the terminal in raw mode: keys typed
  // before that may be flushed by its tcsetattr().
  void type_at_prompt(const std::string& keys) const {
    ASSERT_TRUE(wait_until(
        [&] {
          termios tio{};
          return ::tcgetattr(master_, &tio) == 0 && (tio.c_lflag & ICANON) == 0;
        },
        std::chrono::seconds(20)));
    type(keys);
  }
  // Reads the terminal until `what` has appeared since the last call, or 20 s pass.
  bool wait_for(const std::string& what) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (seen_.find(what) == std::string::npos) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd pf{master_, POLLIN, 0};
      if (::poll(&pf, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      ssize_t n = ::read(master_, buf, sizeof buf);
      if (n <= 0) return false;  // the terminal closed: sbsh exited
      seen_.append(buf, static_cast<size_t>(n));
    }
    before_ = seen_.substr(0, seen_.find(what));
    seen_.erase(0, before_.size() + what.size());
    return true;
  }
  // What came before `what` in the last successful wait_for.
  [[nodiscard]] const std::string& before() const { return before_; }
  [[nodiscard]] bool running() const { return !exited_ && ::waitpid(pid_, nullptr, WNOHANG) == 0; }
  // Its exit status, or -1 when it is still running after 20 s.
  int wait_exit() {
    int st = 0;
    if (!wait_until([&] { return ::waitpid(pid_, &st, WNOHANG) == pid_; }, std::chrono::seconds(20))) return -1;
    exited_ = true;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

 private:
  pid_t pid_ = -1;
  int master_ = -1;
  bool exited_ = false;
  std::string seen_, before_;
};

}  // namespace sbsh::test
