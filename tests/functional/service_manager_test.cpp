// sbshd under a service manager. No systemd runs here, so the test speaks its side of the
// two protocols as systemd does: it passes a listening socket as descriptor 3 with
// LISTEN_FDS and LISTEN_PID (sd_listen_fds(3)), and reads the datagrams sbshd sends to
// NOTIFY_SOCKET (sd_notify(3)). sbshd, its wrappers and bash are the real ones.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "fixture.h"
#include "ipc/protocol.h"
#include "ipc/socket_io.h"

namespace sbsh::test::service_manager_tests {

using namespace std::chrono_literals;

// A unix socket of `type` bound to `path` (and listening, for a stream socket), at a
// descriptor of 20 or more that is kept across exec, so that a prefix from as_service() can
// move it to 3.
int bound_socket(int type, const std::string& path) {
  int fd = ::socket(AF_UNIX, type, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  ::unlink(path.c_str());
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return -1;
  if (type == SOCK_STREAM && ::listen(fd, 16) != 0) return -1;
  int high = ::fcntl(fd, F_DUPFD, 20);
  ::close(fd);
  return high;
}

// A command line that starts the program after it as systemd would: `fds` as descriptors
// 3, 4, ... with LISTEN_FDS and LISTEN_PID naming that program, and `env` ("NAME=value").
std::vector<std::string> as_service(const std::vector<int>& fds, const std::vector<std::string>& env = {}) {
  std::string script;
  for (size_t i = 0; i < fds.size(); ++i)
    script += "exec " + std::to_string(3 + i) + "<&" + std::to_string(fds[i]) + " " + std::to_string(fds[i]) + "<&-; ";
  if (!fds.empty()) script += "export LISTEN_PID=$$ LISTEN_FDS=" + std::to_string(fds.size()) + "; ";
  for (const auto& e : env) script += "export " + shell_quote(e) + "; ";
  script += R"(exec "$0" "$@")";
  return {"/bin/bash", "-c", script};
}

// The test's end of NOTIFY_SOCKET: collects what sbshd sends.
class notify_listener {
 public:
  explicit notify_listener(const std::string& path) : path_(path), fd_(bound_socket(SOCK_DGRAM, path)) {}
  ~notify_listener() {
    if (fd_ >= 0) ::close(fd_);
  }
  notify_listener(const notify_listener&) = delete;
  notify_listener& operator=(const notify_listener&) = delete;
  [[nodiscard]] bool ok() const { return fd_ >= 0; }
  [[nodiscard]] std::string variable() const { return "NOTIFY_SOCKET=" + path_; }

  // The next message that contains `what`, skipping others; "" when none comes in `limit`.
  std::string next_with(const std::string& what, std::chrono::milliseconds limit = 20s) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return "";
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) continue;
      std::string msg(buf, static_cast<size_t>(n));
      if (msg.find(what) != std::string::npos) return msg;
    }
  }

 private:
  std::string path_;
  int fd_;
};

class service_manager_test : public daemon_test {
 protected:
  service_manager_test() { start_in_setup = false; }
  void TearDown() override {
    daemon_test::TearDown();
    for (int fd : close_at_end) ::close(fd);
  }
  // The socket sbshd would find at the default path, made as a .socket unit makes it, with
  // its directory's mode.
  int listening_socket(mode_t dir_mode = 0700) {
    std::filesystem::create_directories(std::filesystem::path(sock).parent_path());
    ::chmod(std::filesystem::path(sock).parent_path().c_str(), dir_mode);
    int fd = bound_socket(SOCK_STREAM, sock);
    close_at_end.push_back(fd);
    return fd;
  }
  std::vector<int> close_at_end;
};

TEST_F(service_manager_test, TellsTheServiceManagerItIsReadyAliveAndStopping) {
  notify_listener nl(dir + "/notify");
  ASSERT_TRUE(nl.ok());
  daemon_prefix = as_service({}, {nl.variable(), "WATCHDOG_USEC=200000"});
  start_daemon();
  std::string ready = nl.next_with("READY=1");
  EXPECT_NE(ready.find("MAINPID=" + std::to_string(daemon_pid)), std::string::npos) << ready;
  EXPECT_NE(ready.find("STATUS=listening on " + sock), std::string::npos) << ready;
  // Pings at half the 200 ms asked for: two must come well within the limit.
  EXPECT_NE(nl.next_with("WATCHDOG=1"), "");
  EXPECT_NE(nl.next_with("WATCHDOG=1"), "");
  // What is meant for sbshd alone reaches neither its commands nor the daemons they start.
  auto r = exec("s", "echo ${NOTIFY_SOCKET-none} ${WATCHDOG_USEC-none} ${LISTEN_FDS-none}");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "none none none\n");
  stop_daemon();
  EXPECT_NE(nl.next_with("STOPPING=1", 5s), "");
}

TEST_F(service_manager_test, AnAutoStartedDaemonDoesNotSpeakForTheCallersService) {
  // A CI job run as a Type=notify service calls sbsh, which starts sbshd: that sbshd must not
  // tell the job's service manager it is the job's main process, nor that it is ready.
  notify_listener nl(dir + "/notify");
  ASSERT_TRUE(nl.ok());
  auto argv = as_service({}, {nl.variable()});
  for (const std::string& a : {bin("sbsh"), std::string("--socket"), sock, std::string("exec"), std::string("echo hi")})
    argv.push_back(a);
  auto r = run(argv);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "hi\n");
  EXPECT_EQ(nl.next_with("", 1s), "");
  // Stop the daemon it started, by its pid, through the socket.
  EXPECT_EQ(sbsh({"shutdown"}).code, 0);
}

TEST_F(service_manager_test, ServesOnThePassedSocketAndLeavesItForTheNextStart) {
  int fd = listening_socket();
  ASSERT_GE(fd, 0);
  daemon_prefix = as_service({fd});
  start_daemon();
  auto r = exec("s", "cd /tmp; echo ${LISTEN_FDS-none} ${LISTEN_PID-none}");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "none none\n");
  stop_daemon();

  // The socket is systemd's: sbshd left it in place, and it still takes connections that
  // wait for the next sbshd (systemd starts one when the first arrives).
  struct stat st{};
  ASSERT_EQ(::lstat(sock.c_str(), &st), 0) << "sbshd removed the socket systemd made";
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  int waiting = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, sock.c_str(), sizeof addr.sun_path - 1);
  EXPECT_EQ(::connect(waiting, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  ::close(waiting);
  start_daemon();
  r = exec("s", "echo again");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "again\n");
}

// Between a failed start and the next, systemd's socket takes connections with no sbshd
// behind it: a client gives up at its start timeout and says where to look.
TEST_F(service_manager_test, AClientDoesNotWaitForeverOnASocketNobodyServes) {
  ASSERT_GE(listening_socket(), 0);
  client::connect_options o;
  o.socket_path = sock;
  o.autostart = false;
  o.start_timeout = 300ms;
  auto c = client::connection::connect(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.err().code, "unreachable");
  EXPECT_NE(c.err().message.find("did not answer within 300 ms"), std::string::npos) << c.err().message;

  // The same when the first request follows the hello without waiting for the welcome (as
  // the CLI sends it): that request fails, and so does every later one, at once.
  o.wait_for_welcome = false;
  auto lazy = client::connection::connect(o);
  ASSERT_TRUE(lazy.ok()) << lazy.err().message;
  client::exec_options e;
  e.command = "true";
  auto r = lazy->exec(e);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, "unreachable");
  EXPECT_NE(r.err().message.find("did not answer within 300 ms"), std::string::npos) << r.err().message;
  auto t0 = std::chrono::steady_clock::now();
  auto st = lazy->status();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.err().code, "unreachable");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 250ms);
}

// A daemon that refuses the hello (here, a stand-in that answers as an sbshd of another
// protocol version does): connect() says so, or, when the first request followed the hello,
// that request and every later one do.
TEST_F(service_manager_test, ARefusedHandshakeIsEveryRequestsError) {
  int listener = listening_socket();
  ASSERT_GE(listener, 0);
  std::thread refuser([listener] {
    for (int i = 0; i < 2; ++i) {
      ipc::channel ch(unique_fd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC)));
      auto hello = ch.recv();
      if (!hello) return;
      ipc::frame_builder f(ipc::msg_type::error, hello->msg.id());
      f.str("code", "version_mismatch").str("message", "this sbshd speaks protocol version 99");
      (void)ch.send(f.finish());
      while (ch.recv()) {  // until the client hangs up
      }
    }
  });
  client::connect_options o;
  o.socket_path = sock;
  o.autostart = false;
  // In a function of its own so that a failed assertion still reaches the join below,
  // with every client connection closed.
  [&] {
    auto c = client::connection::connect(o);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.err().code, "version_mismatch");
    EXPECT_EQ(c.err().message, "this sbshd speaks protocol version 99");

    o.wait_for_welcome = false;
    {
      auto lazy = client::connection::connect(o);
      ASSERT_TRUE(lazy.ok()) << lazy.err().message;
      client::exec_options e;
      e.command = "true";
      e.stdin_data = "input";
      auto r = lazy->exec(e);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.err().code, "version_mismatch");
      auto st = lazy->status();
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.err().code, "version_mismatch");
    }
  }();
  ::shutdown(listener, SHUT_RDWR);  // ends an accept still waiting
  refuser.join();
}

// Each mistake in a unit ends sbshd at once, with what to change in the unit.
TEST_F(service_manager_test, RefusesWhatItCannotServeWithTheFix) {
  auto sbshd_run = [&](const std::vector<int>& fds, const std::string& socket_path) {
    auto argv = as_service(fds);
    for (const std::string& a : {bin("sbshd"), std::string("--foreground"), std::string("--socket"), socket_path})
      argv.push_back(a);
    return run(argv, nullptr, 60s);
  };
  int fd = listening_socket();
  ASSERT_GE(fd, 0);

  int fd2 = ::fcntl(fd, F_DUPFD, 20);
  close_at_end.push_back(fd2);
  auto r = sbshd_run({fd, fd2}, sock);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("passed 2 sockets"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("single ListenStream="), std::string::npos) << r.err;

  int dgram = bound_socket(SOCK_DGRAM, dir + "/dgram");
  close_at_end.push_back(dgram);
  r = sbshd_run({dgram}, sock);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("not a listening unix stream socket"), std::string::npos) << r.err;

  r = sbshd_run({fd}, dir + "/elsewhere.sock");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("drop --socket"), std::string::npos) << r.err;

  ::chmod(std::filesystem::path(sock).parent_path().c_str(), 0755);
  r = sbshd_run({fd}, sock);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("mode 0755"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("DirectoryMode=0700"), std::string::npos) << r.err;
}

// The journal, as far as it can be without journald: sbshd runs in a user and mount
// namespace of its own where the test's datagram socket stands at journald's path
// (/run/systemd/journal/socket), and the test reads the entries sbshd sends there
// (sd_journal_sendv). JOURNAL_STREAM names sbshd's stderr, or not, as systemd would.
bool can_unshare() { return run({"/usr/bin/unshare", "-Urm", "/bin/true"}).code == 0; }

std::vector<std::string> with_journal(const std::string& journal_dir, const std::string& journal_stream) {
  std::string script = "mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/journal && mount --bind " +
                       shell_quote(journal_dir) + " /run/systemd/journal && export JOURNAL_STREAM=" +
                       shell_quote(journal_stream) + R"( && exec "$0" "$@")";
  return {"/usr/bin/unshare", "-Urm", "/bin/bash", "-c", script};
}

// "DEVICE:INODE" of a file, as JOURNAL_STREAM names a stream.
std::string stream_id(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

class journal_test : public service_manager_test {
 protected:
  void SetUp() override {
    service_manager_test::SetUp();
    if (!can_unshare()) GTEST_SKIP() << "unshare -Urm fails here: no user namespaces to put a journal in";
    std::filesystem::create_directories(dir + "/journal");
    daemon_log_level = "info";
    std::ofstream(log_path()).close();  // start_daemon() appends to it: its identity is known now
  }
  [[nodiscard]] std::string log_path() const { return dir + "/sbshd.log"; }
  [[nodiscard]] std::string log_text() const {
    std::ifstream f(log_path());
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  }
};

TEST_F(journal_test, EntriesCarryThePriorityAndTheSessionWhenStderrIsTheJournal) {
  notify_listener journal(dir + "/journal/socket");
  ASSERT_TRUE(journal.ok());
  daemon_prefix = with_journal(dir + "/journal", stream_id(log_path()));
  start_daemon();
  std::string ready = journal.next_with("listening on");
  EXPECT_NE(ready.find("MESSAGE=sbshd "), std::string::npos) << ready;
  EXPECT_NE(ready.find("\nPRIORITY=6\n"), std::string::npos) << ready;
  EXPECT_NE(ready.find("\nSYSLOG_IDENTIFIER=sbshd\n"), std::string::npos) << ready;
  EXPECT_EQ(ready.find("SBSH_SESSION="), std::string::npos) << ready;
  auto r = exec("web", "echo hi");
  EXPECT_EQ(r.code, 0) << r.err;
  std::string about = journal.next_with("\nSBSH_SESSION=web\n");
  EXPECT_NE(about.find("MESSAGE=session web"), std::string::npos) << about;
  // What went to the journal did not also go to stderr.
  EXPECT_EQ(log_text().find("listening on"), std::string::npos) << log_text();
}

TEST_F(journal_test, AJournalStreamThatIsNotStderrLeavesPlainText) {
  notify_listener journal(dir + "/journal/socket");
  ASSERT_TRUE(journal.ok());
  // Another file's identity, as when sbshd inherits JOURNAL_STREAM with stderr redirected.
  std::ofstream(dir + "/other").close();
  daemon_prefix = with_journal(dir + "/journal", stream_id(dir + "/other"));
  start_daemon();
  auto r = exec("web", "echo hi");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(wait_until([&] { return log_text().find("session web") != std::string::npos; }, 20s)) << log_text();
  EXPECT_NE(log_text().find(" info: sbshd "), std::string::npos) << log_text();
  EXPECT_EQ(journal.next_with("", 200ms), "");
}

}  // namespace sbsh::test::service_manager_tests
