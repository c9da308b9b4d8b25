// Timeouts, crashes, disconnects, concurrency, auto-start, hostile input and permissions.
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "fixture.h"
#include "ipc/frame.h"
#include "ipc/socket_io.h"

namespace sbsh::test {

using json = nlohmann::json;

namespace robustness_tests {

using robustness_test = daemon_test;

std::vector<pid_t> pids_in(const std::string& text) {
  std::vector<pid_t> out;
  std::istringstream in(text);
  long p;
  while (in >> p) out.push_back(static_cast<pid_t>(p));
  return out;
}

TEST_F(robustness_test, TimeoutStopsAnExternalCommandAndKeepsTheShell) {
  ASSERT_EQ(exec("s", "keep=yes").code, 0);
  auto t0 = std::chrono::steady_clock::now();
  auto r = sbsh({"exec", "-s", "s", "-t", "500ms", "--", "sleep 30 & echo $!; wait"});
  EXPECT_EQ(r.code, 124);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  auto pids = pids_in(r.out);
  ASSERT_EQ(pids.size(), 1u);
  EXPECT_TRUE(wait_until([&] { return !pid_alive(pids[0]); }, std::chrono::seconds(5)));
  EXPECT_EQ(exec("s", "echo $keep").out, "yes\n");  // no restart was needed
}

TEST_F(robustness_test, TimeoutKillsWhatIgnoresSigterm) {
  auto r = sbsh({"exec", "-s", "s", "-t", "500ms", "--json", "--", helper() + " ignore-term 60"});
  EXPECT_EQ(r.code, 124);
  auto j = json::parse(r.out);
  EXPECT_TRUE(j.at("timed_out").get<bool>());
  auto pids = pids_in(j.at("stdout").get<std::string>());
  ASSERT_EQ(pids.size(), 1u);
  EXPECT_TRUE(wait_until([&] { return !pid_alive(pids[0]); }, std::chrono::seconds(5)));
}

TEST_F(robustness_test, TimeoutKillsTheWholeTree) {
  auto r = sbsh({"exec", "-s", "s", "-t", "1s", "--", "(sleep 40 & echo $!; sleep 41 & echo $!; wait) & echo $!; wait"});
  EXPECT_EQ(r.code, 124);
  auto pids = pids_in(r.out);
  ASSERT_EQ(pids.size(), 3u) << r.out;
  for (pid_t p : pids) EXPECT_TRUE(wait_until([&] { return !pid_alive(p); }, std::chrono::seconds(5))) << p;
}

TEST_F(robustness_test, KillingTheShellOrTheWrapperMidCommandIsReported) {
  for (const char* victim : {"shell", "wrapper"}) {
    ASSERT_EQ(exec("s", "true").code, 0);
    auto st = session_pids("s");
    pid_t pid = static_cast<pid_t>(std::string(victim) == "shell" ? st.shell_pid : st.wrapper_pid);
    ASSERT_GT(pid, 0);
    std::thread killer([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ::kill(pid, SIGKILL);
    });
    auto r = sbsh({"exec", "-s", "s", "--json", "--", "sleep 30"});
    killer.join();
    EXPECT_NE(r.code, 0) << victim;
    auto j = json::parse(r.out);
    EXPECT_TRUE(j.at("shell_restarted").get<bool>()) << victim;
    EXPECT_FALSE(j.value("error", "").empty() && j.at("exit_code").is_null()) << victim;
    EXPECT_EQ(exec("s", "echo next").out, "next\n") << victim;
  }
}

// A caller can tell a command that never ran, and is safe to send again, from one that a
// shell took and then lost: `ran`.
TEST_F(robustness_test, ACommandThatNeverRanSaysSo) {
  client::exec_options dying;
  dying.session = "s";
  dying.command = "echo going; sleep 0.5; kill -9 $$";
  client::exec_result first, queued;
  std::thread t([&] {
    auto c = conn();
    auto r = c.exec(dying);
    if (r) first = *r;
  });
  // (EXPECT, not ASSERT: the thread must be joined whatever happens.)
  EXPECT_TRUE(wait_until([&] { return session_status("s").state == "running"; }, std::chrono::seconds(20)));
  client::exec_options behind;
  behind.session = "s";
  behind.command = "touch " + shell_quote(dir + "/ran");
  auto c = conn();
  auto r = c.exec(behind);
  t.join();
  ASSERT_TRUE(r.ok()) << r.err().message;
  queued = *r;
  EXPECT_TRUE(first.ran);
  EXPECT_TRUE(first.shell_restarted);
  EXPECT_EQ(first.exit_code, 137);
  EXPECT_EQ(first.stdout_data, "going\n");
  EXPECT_FALSE(queued.ran);
  EXPECT_FALSE(queued.exit_code.has_value());
  EXPECT_NE(queued.error.find("not run"), std::string::npos) << queued.error;
  EXPECT_FALSE(std::filesystem::exists(dir + "/ran"));

  // Sent again, it runs.
  r = c.exec(behind);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_TRUE(r->ran);
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(dir + "/ran"));

  // A session that has ended and is not restarted runs nothing; the CLI says so in --json.
  ASSERT_EQ(sbsh({"session", "create", "never", "--restart", "never"}).code, 0);
  exec("never", "exit 0");
  auto cli = sbsh({"exec", "-s", "never", "--json", "--", "echo no"});
  EXPECT_EQ(cli.code, 255);
  auto j = json::parse(cli.out);
  EXPECT_FALSE(j.at("ran").get<bool>()) << cli.out;
  EXPECT_TRUE(j.at("exit_code").is_null());
  EXPECT_NE(j.at("error").get<std::string>().find("restart"), std::string::npos) << j.at("error");
}

TEST_F(robustness_test, ADisconnectingClientsCommandIsStopped) {
  std::string pidfile = dir + "/pid";
  std::vector<std::string> argv{bin("sbsh"), "--socket", sock, "exec", "-s", "s", "--",
                                helper() + " ignore-term 60 > " + pidfile};
  pid_t cli;
  auto args = exec_argv(argv);
  ASSERT_EQ(posix_spawn(&cli, args[0], nullptr, nullptr, args.data(), environ), 0);
  pid_t victim = 0;
  ASSERT_TRUE(wait_until([&] {
    std::ifstream f(pidfile);
    return static_cast<bool>(f >> victim);
  }, std::chrono::seconds(10)));
  ::kill(cli, SIGKILL);  // the client vanishes
  int st;
  ::waitpid(cli, &st, 0);
  // SIGHUP first, then SIGKILL after the grace period (it ignores SIGTERM, not SIGHUP).
  EXPECT_TRUE(wait_until([&] { return !pid_alive(victim); }, std::chrono::seconds(10)));
  EXPECT_EQ(exec("s", "echo free").out, "free\n");
}

TEST_F(robustness_test, FiftyClientsTenSessions) {
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  threads.reserve(50);
  for (int t = 0; t < 50; ++t) {
    threads.emplace_back([&, t] {
      std::string s = "c" + std::to_string(t % 10);
      std::string log = dir + "/" + s + ".log";
      // Start and end markers: if two commands of one session overlapped, they would interleave.
      auto r = exec(s, "echo start >>" + log + "; sleep 0.05; echo end >>" + log + "; echo " + std::to_string(t));
      if (r.code != 0 || r.out != std::to_string(t) + "\n") ++bad;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  for (int s = 0; s < 10; ++s) {
    std::ifstream f(dir + "/c" + std::to_string(s) + ".log");
    std::string line, expect = "start";
    int n = 0;
    while (std::getline(f, line)) {
      EXPECT_EQ(line, expect) << "session c" << s;
      expect = expect == "start" ? "end" : "start";
      ++n;
    }
    EXPECT_EQ(n, 10);
  }
}

TEST_F(robustness_test, SessionsRunInParallel) {
  // Each session waits up to 10 s for the other's marker: both succeed only if they overlap.
  // One after the other, the first would give up waiting and fail.
  std::string a = dir + "/a", b = dir + "/b";
  auto meet = [](const std::string& mine, const std::string& theirs) {
    return "touch " + mine + "; for i in $(seq 200); do [ -e " + theirs + " ] && break; sleep 0.05; done; [ -e " + theirs + " ]";
  };
  run_result first;
  std::thread t1([&] { first = exec("p1", meet(a, b)); });
  auto second = exec("p2", meet(b, a));
  t1.join();
  EXPECT_EQ(first.code, 0) << "p1 did not see p2's marker: the sessions did not run at once";
  EXPECT_EQ(second.code, 0) << "p2 did not see p1's marker: the sessions did not run at once";
}

std::string reply_of(int fd) {
  std::string all;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) all.append(buf, static_cast<size_t>(n));
  return all;
}

TEST_F(robustness_test, HostileFramesGetAnErrorAndOthersAreStillServed) {
  std::vector<std::string> attacks = {
      std::string("\xff\xff\xff\xff", 4),                    // length far past the cap
      std::string("\x00\x00\x00\x00", 4),                    // empty frame
      std::string("\x00\x00\x00\x03\xc1\xc1\xc1", 7),        // not msgpack
      std::string("\x00\x00\x00\x02\x92\x01", 6),            // truncated array
      std::string("\x00\x00\x00\x03\x93\x01\x02", 7),        // an array, not a map
  };
  ipc::frame_builder wrong_type(ipc::msg_type::hello, 1);
  wrong_type.str("version", "one");
  attacks.push_back(wrong_type.take());
  ipc::frame_builder huge_array(ipc::msg_type::hello, 1);
  attacks.emplace_back("\x00\x00\x00\x06\x81\xa1x\xdd\xff\xff", 10);  // array of 4G elements
  for (const auto& bytes : attacks) {
    int fd = raw_connect(sock);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    ::shutdown(fd, SHUT_WR);
    std::string reply = reply_of(fd);
    ::close(fd);
    EXPECT_NE(reply.find("\xa4" "code"), std::string::npos) << "no error frame for attack of " << bytes.size() << " bytes";
  }
  // A request with a field of the wrong type names the field; relative directories, which
  // the CLI and the library never send, are refused with the reason.
  int fd = raw_connect(sock);
  ipc::frame_builder hello(ipc::msg_type::hello, 1);
  hello.u64("version", ipc::kProtocolVersion);
  ipc::frame_builder exec_bad(ipc::msg_type::exec, 2);
  exec_bad.u64("command", 7);
  ipc::frame_builder relative_cwd(ipc::msg_type::session_create, 3);
  relative_cwd.str("name", "r").str("cwd", "here");
  ipc::frame_builder relative_snapshot(ipc::msg_type::session_create, 4);
  relative_snapshot.str("name", "r").str("snapshot", "there");
  std::string both = hello.take() + exec_bad.take() + relative_cwd.take() + relative_snapshot.take();
  ASSERT_EQ(::write(fd, both.data(), both.size()), static_cast<ssize_t>(both.size()));
  ::shutdown(fd, SHUT_WR);
  std::string reply = reply_of(fd);
  ::close(fd);
  EXPECT_NE(reply.find("field 'command' must be a string"), std::string::npos);
  EXPECT_NE(reply.find("the session directory 'here' must be an absolute path"), std::string::npos);
  EXPECT_NE(reply.find("the snapshot source 'there' must be an absolute path"), std::string::npos);
  EXPECT_EQ(exec("s", "echo still serving").out, "still serving\n");
  EXPECT_TRUE(pid_alive(daemon_pid));
}

TEST_F(robustness_test, VersionMismatchIsExplained) {
  int fd = raw_connect(sock);
  ipc::frame_builder hello(ipc::msg_type::hello, 1);
  hello.u64("version", 999);
  std::string b = hello.take();
  ASSERT_EQ(::write(fd, b.data(), b.size()), static_cast<ssize_t>(b.size()));
  ::shutdown(fd, SHUT_WR);
  std::string reply = reply_of(fd);
  ::close(fd);
  EXPECT_NE(reply.find("version_mismatch"), std::string::npos);
  EXPECT_NE(reply.find("protocol version"), std::string::npos);
}

TEST_F(robustness_test, SocketAndDirectoryArePrivate) {
  struct stat st{};
  ASSERT_EQ(::stat(sock.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir + "/run/sbsh").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // A directory others can enter is refused, with the reason and the fix.
  std::string unsafe = dir + "/unsafe";
  ::mkdir(unsafe.c_str(), 0755);
  ::chmod(unsafe.c_str(), 0755);
  auto r = run({bin("sbshd"), "--socket", unsafe + "/s.sock", "--foreground", "--state-dir", dir + "/state2"});  // the running sbshd holds `state`
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("0755"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("chmod 700"), std::string::npos) << r.err;
  r = run({bin("sbsh"), "--socket", unsafe + "/s.sock", "exec", "true"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("0700"), std::string::npos) << r.err;
}

class autostart_test : public daemon_test {
 protected:
  autostart_test() { start_in_setup = false; }
};

TEST_F(autostart_test, ConcurrentClientsStartOneDaemon) {
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      auto r = run({bin("sbsh"), "--socket", sock, "exec", "-s", "s" + std::to_string(i), "--", "echo hi"});
      if (r.code == 0 && r.out == "hi\n") ++ok;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8);
  // Exactly one sbshd serves this socket.
  auto daemons = processes_where([&](const std::string& cmd) {
    return cmd.substr(0, cmd.find(' ')).ends_with("sbshd") && cmd.find(sock) != std::string::npos;
  });
  ASSERT_EQ(daemons.size(), 1u);
  run({bin("sbsh"), "--socket", sock, "shutdown"});
  EXPECT_TRUE(wait_until([&] { return !pid_alive(daemons[0]); }, std::chrono::seconds(10)));
}

}  // namespace robustness_tests
}  // namespace sbsh::test

namespace sbsh::test::robustness_tests {

// A client of the protocol itself, with output and stdin as frames (io "frames").
class frames_client {
 public:
  explicit frames_client(const std::string& sock) : ch_(unique_fd(raw_connect(sock))) {
    ipc::frame_builder hello(ipc::msg_type::hello, 1);
    hello.u64("version", ipc::kProtocolVersion);
    EXPECT_TRUE(ch_.send(hello.finish()).ok());
    EXPECT_TRUE(ch_.recv().ok());
  }
  ipc::channel& ch() { return ch_; }

 private:
  ipc::channel ch_;
};

TEST_F(robustness_test, FramesModeCarriesOutputAndStdin) {
  frames_client c(sock);
  ipc::frame_builder ex(ipc::msg_type::exec, 2);
  ex.str("session", "fr").str("command", "cat; echo done >&2; exit 3").boolean("stdin", true);
  ASSERT_TRUE(c.ch().send(ex.finish()).ok());
  ipc::frame_builder in(ipc::msg_type::stdin_data, 2);
  in.bin("data", "abc\0def", 7);
  ASSERT_TRUE(c.ch().send(in.finish()).ok());
  ASSERT_TRUE(c.ch().send(ipc::frame_builder(ipc::msg_type::stdin_eof, 2).finish()).ok());
  std::string out, err;
  for (;;) {
    auto env = c.ch().recv();
    ASSERT_TRUE(env.ok()) << env.err().message;
    const auto& m = env->msg;
    if (m.type() == ipc::msg_type::output) {
      auto d = m.get_bin("data");
      (*m.get_u64("stream").value() == 1 ? out : err) += std::string(*d.value());
      continue;
    }
    ASSERT_EQ(m.type(), ipc::msg_type::exec_done);
    EXPECT_EQ(*m.get_i64("exit_code").value(), 3);
    break;
  }
  EXPECT_EQ(out, std::string("abc\0def", 7));
  EXPECT_EQ(err, "done\n");
}

TEST_F(robustness_test, ASlowReaderDoesNotGrowTheDaemon) {
  frames_client c(sock);
  long before = status_kb(daemon_pid, "VmRSS");
  ipc::frame_builder ex(ipc::msg_type::exec, 2);
  ex.str("session", "slow").str("command", helper() + " write 300000000");
  ASSERT_TRUE(c.ch().send(ex.finish()).ok());
  std::this_thread::sleep_for(std::chrono::seconds(2));  // not reading: the command must wait
  long during = status_kb(daemon_pid, "VmRSS");
  EXPECT_LT(during - before, 16 * 1024) << "sbshd grew by " << (during - before) << " kB";
  uint64_t got = 0;
  for (;;) {
    auto env = c.ch().recv();
    ASSERT_TRUE(env.ok());
    if (env->msg.type() == ipc::msg_type::output) {
      got += env->msg.get_bin("data").value()->size();
      continue;
    }
    ASSERT_EQ(env->msg.type(), ipc::msg_type::exec_done);
    break;
  }
  EXPECT_EQ(got, 300000000u);
  EXPECT_EQ(exec("other", "echo served").out, "served\n");
}

}  // namespace sbsh::test::robustness_tests
