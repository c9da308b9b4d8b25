// sbshd's own log when it runs detached (no --foreground, so not under systemd): the file
// STATE/sbshd.log is rotated at --log-size, --log-files rotated ones are kept, and what
// sbshd's children write to their stderr lands in the current file.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "fixture.h"

namespace sbsh::test::daemon_log_tests {

using namespace std::chrono_literals;

class daemon_log_test : public daemon_test {
 protected:
  daemon_log_test() { start_in_setup = false; }
  void TearDown() override {
    // The detached sbshd is not this process's child: end it by its pid if the test did not.
    if (detached_pid > 0 && pid_alive(detached_pid)) {
      run({bin("sbsh"), "--socket", sock, "shutdown"});
      if (pid_alive(detached_pid)) ::kill(detached_pid, SIGKILL);
    }
    daemon_test::TearDown();
  }
  pid_t detached_pid = -1;
};

off_t file_size(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

TEST_F(daemon_log_test, RotatesAtItsSizeAndKeepsItsCount) {
  // 0.004 MiB: 4194 bytes, some forty lines of the debug log.
  auto r = run({bin("sbshd"), "--socket", sock, "--state-dir", state, "--log-level", "debug", "--log-size", "0.004",
                "--log-files", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  {
    auto st = conn().status();
    ASSERT_TRUE(st.ok()) << st.err().message;
    detached_pid = static_cast<pid_t>(st->pid);
  }
  // Every connection logs two lines; every command a few more.
  for (int i = 0; i < 150; ++i) {
    auto c = conn();
    client::exec_options o;
    o.session = "s";
    o.command = "true";
    auto e = c.exec(o);
    ASSERT_TRUE(e.ok()) << e.err().message;
  }
  const std::string log = state + "/sbshd.log";
  for (const std::string& p : {log, state + "/sbshd.1.log", state + "/sbshd.2.log"}) {
    EXPECT_GT(file_size(p), 0) << p;
    EXPECT_LE(file_size(p), 4194) << p;
  }
  EXPECT_FALSE(std::filesystem::exists(state + "/sbshd.3.log"));
  // sbshd's stderr, which its wrappers inherit, is the current file.
  std::error_code ec;
  EXPECT_EQ(std::filesystem::read_symlink("/proc/" + std::to_string(detached_pid) + "/fd/2", ec).string(), log);

  EXPECT_EQ(run({bin("sbsh"), "--socket", sock, "shutdown"}).code, 0);
  EXPECT_FALSE(pid_alive(detached_pid));
}

TEST_F(daemon_log_test, RefusesALogSizeThatIsNotOne) {
  for (const char* bad : {"0", "-1", "big", "2x"}) {
    auto r = run({bin("sbshd"), "--socket", sock, "--state-dir", state, "--log-size", bad});
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_NE(r.err.find("--log-size takes a number of MiB"), std::string::npos) << r.err;
  }
  auto r = run({bin("sbshd"), "--socket", sock, "--state-dir", state, "--log-files", "0"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--log-files"), std::string::npos) << r.err;
}

}  // namespace sbsh::test::daemon_log_tests
