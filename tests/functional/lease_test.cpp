// Leases (docs/architecture.md, "The direct path"): a client asks sbshd for a lease of a
// session's shell and runs commands on the lease's socket with no word to sbshd, exactly as
// sbshd itself does on the shell's channel. The lease is a job in the session's queue: it
// ends when its holder releases it, when its holder goes, or when anything else is queued on
// the session, which then serves it as always, with the shell's state kept.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "fixture.h"
#include "ipc/frame.h"
#include "ipc/shell_channel.h"
#include "ipc/socket_io.h"

namespace sbsh::test::lease_tests {

// A connection to sbshd that has said hello.
ipc::channel greeted(const std::string& sock) {
  ipc::channel ch{unique_fd(raw_connect(sock))};
  ipc::frame_builder hello(ipc::msg_type::hello, 1);
  hello.u64("version", ipc::kProtocolVersion);
  EXPECT_TRUE(ch.send(hello.finish()).ok());
  auto w = ch.recv();
  EXPECT_TRUE(w && w->msg.type() == ipc::msg_type::welcome);
  return ch;
}

// The next frame answering request `id` (others are skipped).
std::optional<ipc::envelope> reply_to(ipc::channel& ch, uint64_t id) {
  for (;;) {
    auto env = ch.recv();
    if (!env) return std::nullopt;
    if (env->msg.id() == id) return std::move(*env);
  }
}

std::string str_field(const ipc::envelope& env, const char* key) {
  auto v = env.msg.get_str(key);
  return v && v.value() ? std::string(*v.value()) : std::string();
}

// How a command run on a lease ended; closed: the lease's socket closed instead (the lease
// is over), and the command's status never came on it.
struct lease_run {
  bool closed = false;
  int exit = -1;
  pid_t sender = 0;
  std::string out, err;
};

// A lease held on one connection: its socket, and commands run on it as sbshd runs them on
// the shell's channel (ipc/shell_channel.h): the text, fresh stdout and stderr pipes, the
// status back with the run's seq and nonce, sent by the shell.
struct holder {
  explicit holder(ipc::channel c) : ch(std::move(c)) {}
  ipc::channel ch;
  uint64_t id = 0;
  unique_fd lease;
  pid_t shell = 0;
  std::string error_code, error;  // when it was refused

  // Asks for a lease of `session` under request id `req` and waits for the answer.
  bool take(const std::string& session, uint64_t req = 7) {
    id = req;
    ipc::frame_builder f(ipc::msg_type::lease, id);
    f.str("session", session);
    if (!ch.send(f.finish()).ok()) return false;
    auto r = reply_to(ch, id);
    if (!r) return false;
    if (r->msg.type() == ipc::msg_type::error) {
      error_code = str_field(*r, "code");
      error = str_field(*r, "message");
      return false;
    }
    EXPECT_EQ(r->msg.type(), ipc::msg_type::lease_granted);
    EXPECT_EQ(r->fds.size(), 1u);
    if (r->fds.size() != 1) return false;
    shell = static_cast<pid_t>(r->msg.get_i64("shell_pid").value().value_or(0));
    lease = std::move(r->fds[0]);
    return true;
  }

  // Releases it; returns the reason lease_ended gives.
  std::string release() {
    ipc::frame_builder f(ipc::msg_type::release, id);
    EXPECT_TRUE(ch.send(f.finish()).ok());
    return ended();
  }

  // Waits for lease_ended; its reason.
  std::string ended() {
    auto r = reply_to(ch, id);
    if (!r) return "(no answer)";
    EXPECT_EQ(r->msg.type(), ipc::msg_type::lease_ended);
    return str_field(*r, "reason");
  }

  lease_run run(const std::string& text) {
    lease_run res;
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) std::abort();
    unique_fd out_r(out[0]), out_w(out[1]), err_r(err[0]), err_w(err[1]);
    sbsh_run_header h{};
    h.magic = SBSH_CHANNEL_MAGIC;
    h.version = SBSH_CHANNEL_VERSION;
    h.type = SBSH_MSG_RUN;
    h.seq = ++seq_;
    h.nonce = nonce_();
    h.text_len = static_cast<uint32_t>(text.size());
    iovec iov[2] = {{&h, sizeof h}, {const_cast<char*>(text.data()), text.size()}};
    alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))]{};
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = 2;
    mh.msg_control = control;
    mh.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(2 * sizeof(int));
    int fds[2] = {out_w.get(), err_w.get()};
    std::memcpy(CMSG_DATA(c), fds, sizeof fds);
    if (::sendmsg(lease.get(), &mh, MSG_NOSIGNAL) < 0) {
      res.closed = true;
      return res;
    }
    out_w.reset();
    err_w.reset();
    bool status = false;
    while (!status || out_r || err_r) {
      pollfd p[3] = {{status ? -1 : lease.get(), POLLIN, 0},
                     {out_r ? out_r.get() : -1, POLLIN, 0},
                     {err_r ? err_r.get() : -1, POLLIN, 0}};
      if (::poll(p, 3, 20000) <= 0) {
        ADD_FAILURE() << "a run on the lease did not end within 20 s";
        res.closed = true;
        return res;
      }
      for (int i = 1; i < 3; ++i) {
        if (p[i].revents == 0) continue;
        unique_fd& fd = i == 1 ? out_r : err_r;
        char buf[4096];
        ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n <= 0) fd.reset();
        else (i == 1 ? res.out : res.err).append(buf, static_cast<size_t>(n));
      }
      if (p[0].revents == 0) continue;
      sbsh_status_msg st{};
      char cwd[SBSH_CHANNEL_MAX_CWD];
      iovec in[2] = {{&st, sizeof st}, {cwd, sizeof cwd}};
      alignas(cmsghdr) char cred[CMSG_SPACE(sizeof(ucred))]{};
      msghdr rh{};
      rh.msg_iov = in;
      rh.msg_iovlen = 2;
      rh.msg_control = cred;
      rh.msg_controllen = sizeof cred;
      ssize_t n = ::recvmsg(lease.get(), &rh, MSG_CMSG_CLOEXEC);
      if (n <= 0) {
        res.closed = true;
        status = true;
        continue;
      }
      for (cmsghdr* k = CMSG_FIRSTHDR(&rh); k != nullptr; k = CMSG_NXTHDR(&rh, k))
        if (k->cmsg_level == SOL_SOCKET && k->cmsg_type == SCM_CREDENTIALS) {
          ucred u{};
          std::memcpy(&u, CMSG_DATA(k), sizeof u);
          res.sender = u.pid;
        }
      EXPECT_EQ(st.type, SBSH_MSG_STATUS);
      EXPECT_EQ(st.seq, h.seq);
      EXPECT_EQ(st.nonce, h.nonce);
      res.exit = st.exit_value;
      status = true;
    }
    return res;
  }

  // Whether the lease's socket reads end-of-file within `limit` (the shell closed its end).
  bool closes_within(std::chrono::milliseconds limit) const {
    pollfd p{lease.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(limit.count())) <= 0) return false;
    char b;
    return ::recv(lease.get(), &b, 1, MSG_DONTWAIT) == 0;
  }

 private:
  uint64_t seq_ = 0;
  std::mt19937_64 nonce_{std::random_device{}()};
};

class lease_test : public daemon_test {
 protected:
  // Session "s" leased through the library by a connection of its own; `other` asks sbshd,
  // and `before` is sbshd's status from before the lease.
  struct leased {
    client::connection holder, other;
    client::daemon_status before;
    std::optional<client::lease> lease;
  };
  std::unique_ptr<leased> lease_of_s() {
    EXPECT_EQ(sbsh({"session", "create", "s"}).code, 0);
    auto held = std::make_unique<leased>(leased{conn(), conn(), {}, std::nullopt});
    auto st = held->other.status();
    EXPECT_TRUE(st) << st.err().message;
    if (st) held->before = *st;
    auto l = held->holder.lease("s");
    EXPECT_TRUE(l) << l.err().message;
    if (l) held->lease.emplace(std::move(*l));
    return held;
  }

  holder hold(const std::string& session) {
    holder h{greeted(sock)};
    EXPECT_TRUE(h.take(session)) << h.error;
    return h;
  }
};

TEST_F(lease_test, RunsCommandsExactlyAndKeepsTheShellsStateForLaterExecs) {
  ASSERT_EQ(sbsh({"session", "create", "s"}).code, 0);
  holder h = hold("s");
  ASSERT_TRUE(h.lease);
  EXPECT_EQ(h.shell, session_pids("s").shell_pid);

  lease_run r = h.run(std::string("printf 'a\\0b'; printf 'to err\\n' >&2; (exit 3)"));
  EXPECT_FALSE(r.closed);
  EXPECT_EQ(r.out, std::string("a\0b", 3));
  EXPECT_EQ(r.err, "to err\n");
  EXPECT_EQ(r.exit, 3);
  EXPECT_EQ(r.sender, h.shell);  // the shell answered, as the kernel says

  r = h.run("cd /tmp && X=leased");
  EXPECT_EQ(r.exit, 0);
  r = h.run("echo \"$X\"; pwd");
  EXPECT_EQ(r.out, "leased\n/tmp\n");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.exit, 0);
}

TEST_F(lease_test, StateCarriesFromLeaseRunsToExecsAndBack) {
  ASSERT_EQ(sbsh({"session", "create", "s"}).code, 0);
  ASSERT_EQ(exec("s", "Y=before").code, 0);
  holder h = hold("s");
  lease_run r = h.run("echo \"$Y\"; cd /tmp; X=leased");
  EXPECT_EQ(r.out, "before\n");
  EXPECT_EQ(r.exit, 0);
  r = h.run(R"(echo "$X" "$PWD")");
  EXPECT_EQ(r.out, "leased /tmp\n");
  EXPECT_EQ(h.release(), "its holder released it");
  EXPECT_TRUE(h.closes_within(std::chrono::seconds(10)));

  run_result e = exec("s", "echo \"$X\"; pwd; Z=after");
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_EQ(e.out, "leased\n/tmp\n");
  // sbshd learnt where the shell is, which it did not see while the lease lasted.
  EXPECT_EQ(session_status("s").cwd, "/tmp");

  // A second lease on the same connection, after the first ended.
  ASSERT_TRUE(h.take("s", 9)) << h.error;
  r = h.run("echo \"$Z\"");
  EXPECT_EQ(r.out, "after\n");
  EXPECT_EQ(h.release(), "its holder released it");
}

TEST_F(lease_test, AnotherClientsExecEndsTheLeaseAndIsServed) {
  ASSERT_EQ(sbsh({"session", "create", "s"}).code, 0);
  holder h = hold("s");
  ASSERT_EQ(h.run("W=held").exit, 0);
  run_result e = exec("s", "echo \"$W\"; echo err >&2; (exit 4)");
  EXPECT_EQ(e.code, 4);
  EXPECT_EQ(e.out, "held\n");
  EXPECT_EQ(e.err, "err\n");
  std::string why = h.ended();
  EXPECT_NE(why.find("another request was queued on session 's'"), std::string::npos) << why;
  EXPECT_TRUE(h.closes_within(std::chrono::seconds(10)));
  EXPECT_TRUE(h.run("true").closed);  // the lease is over: nothing runs on it
}

TEST_F(lease_test, TheHoldersDeathEndsTheLeaseAndTheSessionServesOthers) {
  ASSERT_EQ(sbsh({"session", "create", "s"}).code, 0);
  int ready[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    holder h{greeted(sock)};
    bool ok = h.take("s") && h.run("V=from-the-dead; cd /").exit == 0;
    (void)!::write(ready[1], ok ? "y" : "n", 1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char said = 0;
  EXPECT_EQ(::read(ready[0], &said, 1), 1);
  ::close(ready[0]);
  EXPECT_EQ(said, 'y');
  ::kill(child, SIGKILL);
  int st = 0;
  ::waitpid(child, &st, 0);
  run_result e = exec("s", "echo \"$V\"; pwd");
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_EQ(e.out, "from-the-dead\n/\n");
}

TEST_F(lease_test, AHolderWhoseConnectionClosesLosesTheLease) {
  ASSERT_EQ(sbsh({"session", "create", "s"}).code, 0);
  holder h = hold("s");
  h.ch.close();  // the socket stays with it: sbshd ends the lease all the same
  EXPECT_TRUE(h.closes_within(std::chrono::seconds(10)));
  EXPECT_EQ(exec("s", "echo ok").out, "ok\n");
}

TEST_F(lease_test, ALeaseWaitsForTheCommandBeforeIt) {
  ASSERT_EQ(sbsh({"session", "create", "s"}).code, 0);
  run_result first;
  std::string started = dir + "/started";
  std::thread t([&] { first = exec("s", "touch " + shell_quote(started) + "; sleep 0.5; U=first"); });
  EXPECT_TRUE(wait_until([&] { return ::access(started.c_str(), F_OK) == 0; }, std::chrono::seconds(20)));
  holder h = hold("s");  // granted once the command has ended
  EXPECT_EQ(h.run("echo \"$U\"").out, "first\n");
  t.join();
  EXPECT_EQ(first.code, 0) << first.err;
}

TEST_F(lease_test, RefusalsSayWhy) {
  holder h{greeted(sock)};
  EXPECT_FALSE(h.take("nope"));
  EXPECT_EQ(h.error_code, "no_such_session");
  EXPECT_NE(h.error.find("sbsh session create nope"), std::string::npos) << h.error;
  EXPECT_FALSE(h.take("bad name!", 8));
  EXPECT_EQ(h.error_code, "invalid_session_name");

  // A shell that may not have the lease's descriptor (a limit on its descriptors) cannot
  // take it; the session goes on.
  ASSERT_EQ(sbsh({"session", "create", "small", "--limit", "nofile=64"}).code, 0);
  EXPECT_FALSE(h.take("small", 10));
  EXPECT_EQ(h.error_code, "internal");
  EXPECT_NE(h.error.find("could not take the lease"), std::string::npos) << h.error;
  EXPECT_EQ(exec("small", "echo ok").out, "ok\n");
}

TEST_F(lease_test, AConfinedSessionIsRefusedALeaseWhenSbshdRunsAsRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "only a root sbshd refuses a confined session a lease";
  std::string root = dir + "/root";
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  run_result created = sbsh({"session", "create", "box", "--root", root, "--confine"});
  if (created.code != 0) GTEST_SKIP() << "no confined session here: " << created.err;
  holder h{greeted(sock)};
  EXPECT_FALSE(h.take("box"));
  EXPECT_EQ(h.error_code, "not_supported");
  EXPECT_NE(h.error.find("is confined and sbshd runs as root"), std::string::npos) << h.error;
  EXPECT_EQ(exec("box", "echo ok").out, "ok\n");
}

// With idle channels parked at once: a parked session is leased (its channel asked back), and
// a leased one is not parked, so sbshd can still end the lease when another request comes.
class lease_parking_test : public lease_test {
 protected:
  void SetUp() override {
    daemon_args = {"--park-after-ms", "50"};
    lease_test::SetUp();
  }
};

TEST_F(lease_parking_test, AParkedSessionIsLeasedAndALeasedOneStaysReachable) {
  ASSERT_EQ(sbsh({"session", "create", "s"}).code, 0);
  ASSERT_EQ(exec("s", "P=parked").code, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // idle: parked
  holder h = hold("s");
  EXPECT_EQ(h.run(R"(echo "$P")").out, "parked\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // leased: not parked
  EXPECT_EQ(h.run("P=leased").exit, 0);
  run_result e = exec("s", R"(echo "$P")");
  EXPECT_EQ(e.out, "leased\n") << e.err;
  EXPECT_NE(h.ended().find("another request"), std::string::npos);
}

// The library's lease (client::lease): the same, through connection::lease.
TEST_F(lease_test, TheLibrarysLeaseRunsExactlyAndGivesTheConnectionBackOnRelease) {
  ASSERT_EQ(sbsh({"session", "create", "s"}).code, 0);
  client::connection c = conn();
  auto l = c.lease("s");
  ASSERT_TRUE(l) << l.err().message;
  EXPECT_TRUE(l->held());
  EXPECT_EQ(l->shell_pid(), session_pids("s").shell_pid);
  auto r = l->run(std::string("printf 'a\\0b'; printf 'e\\n' >&2; cd /tmp; L=lib; (exit 5)"));
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(r->stdout_data, std::string("a\0b", 3));
  EXPECT_EQ(r->stderr_data, "e\n");
  EXPECT_EQ(r->exit_code, 5);
  EXPECT_FALSE(r->signal);
  r = l->run("sh -c 'kill -TERM $$'");
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(r->signal, SIGTERM);
  // A text longer than one message travels in a memfd.
  std::string long_text = "echo " + std::string(100000, 'x');
  r = l->run(long_text);
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(r->stdout_data, std::string(100000, 'x') + "\n");

  // The connection serves nothing else while it holds the lease.
  client::exec_options o;
  o.session = "s";
  o.command = "echo \"$L\"; pwd";
  auto refused = c.exec(o);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.err().message.find("holds a lease"), std::string::npos) << refused.err().message;

  ASSERT_TRUE(l->release().ok());
  EXPECT_FALSE(l->held());
  auto e = c.exec(o);
  ASSERT_TRUE(e) << e.err().message;
  EXPECT_EQ(e->stdout_data, "lib\n/tmp\n");
}

TEST_F(lease_test, TheLibrarysLeaseSaysWhenAnotherRequestEndedIt) {
  ASSERT_EQ(sbsh({"session", "create", "s"}).code, 0);
  client::connection c = conn();
  auto l = c.lease("s");
  ASSERT_TRUE(l) << l.err().message;
  ASSERT_TRUE(l->run("M=1"));
  EXPECT_EQ(exec("s", "echo \"$M\"").out, "1\n");
  auto r = l->run("true");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, "eof");
  EXPECT_NE(r.err().message.find("the lease has ended"), std::string::npos) << r.err().message;
  ASSERT_TRUE(l->release().ok());
  EXPECT_TRUE(c.exec([] {
    client::exec_options o;
    o.session = "s";
    o.command = "true";
    return o;
  }()));
}

TEST_F(lease_test, TheLibraryRefusesALeaseThroughADialCommand) {
  ASSERT_EQ(sbsh({"session", "create", "s"}).code, 0);
  client::connect_options o;
  o.dial_command = {bin("sbsh"), "-S", sock, "--no-autostart", "dial-stdio"};
  auto c = client::connection::connect(o);
  ASSERT_TRUE(c) << c.err().message;
  auto l = c->lease("s");
  ASSERT_FALSE(l);
  EXPECT_EQ(l.err().code, "not_supported");
  EXPECT_NE(l.err().message.find("local connection"), std::string::npos) << l.err().message;
}

// The pid a command wrote into `path`, or 0 while it has not.
pid_t read_pid_file(const std::string& path) {
  std::string text = read_file(path);
  return text.empty() ? 0 : static_cast<pid_t>(std::atoi(text.c_str()));
}

// The record page: what a holder runs on its lease, sbshd learns from memory the shell writes,
// with no message per command, and tells as it tells of any command.
TEST_F(lease_test, SbshdSeesWhatALeaseRunsInItsStatusHistoryAndCounters) {
  auto held = lease_of_s();
  ASSERT_TRUE(held->lease);
  // Between its runs, the session says who holds it.
  EXPECT_EQ(session_status("s").running, fmt::format("(leased by pid {})", ::getpid()));
  ASSERT_TRUE(held->lease->run("true"));
  ASSERT_TRUE(held->lease->run("echo leased; (exit 3)"));
  auto shown = held->other.show_session("s");
  ASSERT_TRUE(shown) << shown.err().message;
  const auto& h = shown->history;
  ASSERT_GE(h.size(), 2u);
  EXPECT_EQ(h[h.size() - 2].command, "true");
  EXPECT_EQ(h[h.size() - 2].exit_code, 0);
  EXPECT_EQ(h.back().command, "echo leased; (exit 3)");
  EXPECT_EQ(h.back().exit_code, 3);
  auto after = held->other.status();
  ASSERT_TRUE(after) << after.err().message;
  EXPECT_EQ(after->counters.commands, held->before.counters.commands + 2);
  EXPECT_EQ(after->counters.failed, held->before.counters.failed + 1);
  EXPECT_EQ(session_status("s").commands, 2u);

  // A command running on the lease is what the session shows running.
  std::string fdir = dir + "/lease-ps";
  ASSERT_EQ(::mkdir(fdir.c_str(), 0700), 0);
  std::string fifo = fdir + "/go";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string text = "read -r line < " + fifo + "; echo \"$line\"";
  std::thread runner([&] {
    auto r = held->lease->run(text);
    EXPECT_TRUE(r && r->stdout_data == "done\n");
  });
  EXPECT_TRUE(wait_until([&] { return session_status("s").running == text; }, std::chrono::seconds(20)))
      << session_status("s").running;
  {
    unique_fd w(::open(fifo.c_str(), O_WRONLY | O_CLOEXEC));
    EXPECT_TRUE(w);
    EXPECT_EQ(::write(w.get(), "done\n", 5), 5);
  }
  runner.join();
  EXPECT_TRUE(wait_until([&] { return session_status("s").commands == 3; }, std::chrono::seconds(20)));
  ASSERT_TRUE(held->lease->release().ok());
}

// A holder that runs more than the page's ring holds while sbshd does not read it (stopped
// here): the runs written over are missing from the history, but sbshd's counters have every
// one of them, its failures too.
TEST_F(lease_test, RunsSbshdDidNotReadInTimeAreStillCountedWithTheirFailures) {
  auto held = lease_of_s();
  ASSERT_TRUE(held->lease);
  constexpr uint64_t kRuns = uint64_t{3} * SBSH_RECORD_RING;
  uint64_t failing = 0;
  ASSERT_EQ(::kill(daemon_pid, SIGSTOP), 0);
  for (uint64_t i = 1; i <= kRuns; ++i) {
    bool fails = i % 4 == 0;
    failing += fails ? 1 : 0;
    auto r = held->lease->run(fails ? "false" : "true");
    ASSERT_TRUE(r) << r.err().message;
    EXPECT_EQ(r->exit_code, fails ? 1 : 0);
  }
  ASSERT_EQ(::kill(daemon_pid, SIGCONT), 0);
  auto after = held->other.status();
  ASSERT_TRUE(after) << after.err().message;
  EXPECT_EQ(after->counters.commands, held->before.counters.commands + kRuns);
  EXPECT_EQ(after->counters.failed, held->before.counters.failed + failing);
  EXPECT_EQ(session_status("s").commands, kRuns);
  auto shown = held->other.show_session("s");
  ASSERT_TRUE(shown) << shown.err().message;
  // The newest were read: the last run, which failed, is the history's last.
  ASSERT_FALSE(shown->history.empty());
  EXPECT_EQ(shown->history.back().command, "false");
  EXPECT_EQ(shown->history.back().exit_code, 1);
  ASSERT_TRUE(held->lease->release().ok());
}

// What a command run on a lease can find of the lease's record page, printed by a python3
// run by the shell: the shell's mappings, mapped files, memory and descriptors (the page's
// memfd is closed, its mapping in the shell alone), and whether its own mappings hold it.
std::string page_probe() {
  return R"PY(
import errno, os
shell = os.getppid()
print(open("/proc/%d/comm" % shell).read().strip())
def probe(name, reach):
    try:
        reach(); print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
probe("maps", lambda: open("/proc/%d/maps" % shell).read())
probe("map_files", lambda: os.listdir("/proc/%d/map_files" % shell))
probe("mem", lambda: open("/proc/%d/mem" % shell, "rb").close())
probe("fd", lambda: os.listdir("/proc/%d/fd" % shell))
print("own", "page" if "sbsh-lease-records" in open("/proc/self/maps").read() else "none")
)PY";
}

// As a user other than root (sbshd, the holder and so the shell all that user's), nothing a
// leased command starts can reach the page: the shell is undumpable, so its /proc entries are
// refused (map_files would need CAP_SYS_ADMIN besides), and no fork keeps the page mapped.
TEST_F(lease_test, AUsersLeasedCommandCannotReachTheRecordPage) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run an sbshd as another user";
  nobodys_sbsh nobody(dir);
  ASSERT_EQ(nobody.sbsh({"session", "create", "u"}).code, 0);
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  unique_fd from_holder(out[0]), to_test(out[1]);
  pid_t holder_pid = ::fork();
  ASSERT_GE(holder_pid, 0);
  if (holder_pid == 0) {
    std::string said = "cannot become uid 65534";
    if (::setgroups(0, nullptr) == 0 && ::setresgid(65534, 65534, 65534) == 0 &&
        ::setresuid(65534, 65534, 65534) == 0) {
      client::connect_options o;
      o.socket_path = nobody.socket();
      o.autostart = false;
      auto c = client::connection::connect(o);
      auto l = c ? c->lease("u") : result<client::lease>(c.err());
      auto r = l ? l->run("python3 -c '" + page_probe() + "'") : result<client::exec_result>(l.err());
      said = r ? r->stdout_data + r->stderr_data : r.err().message;
    }
    (void)!::write(to_test.get(), said.data(), said.size());
    ::_exit(0);
  }
  to_test.reset();
  std::string said = read_all(from_holder.get());
  int st = 0;
  ASSERT_EQ(::waitpid(holder_pid, &st, 0), holder_pid);
  EXPECT_EQ(said, "bash\nmaps EACCES\nmap_files EACCES\nmem EACCES\nfd EACCES\nown none\n");
  EXPECT_EQ(nobody.sbsh({"shutdown"}).code, 0);
}

// A run's timeout holds on a lease: sbshd reads its deadline in the page and stops it, its
// processes included, as it stops an exec that times out; the lease goes on.
TEST_F(lease_test, ALeasedRunsTimeoutStopsItAndItsProcesses) {
  ASSERT_EQ(sbsh({"session", "create", "s"}).code, 0);
  client::connection c = conn();
  auto l = c.lease("s");
  ASSERT_TRUE(l) << l.err().message;
  std::string pidfile = dir + "/sleeper.pid";
  auto r = l->run("sh -c 'echo $$ > " + pidfile + "; exec sleep 300'; echo after", 500);
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_TRUE(r->timed_out);
  EXPECT_FALSE(r->cancelled);
  EXPECT_EQ(r->stdout_data, "");  // the rest of the text was abandoned
  pid_t sleeper = read_pid_file(pidfile);
  ASSERT_GT(sleeper, 0);
  EXPECT_TRUE(wait_until([&] { return !pid_alive(sleeper); }, std::chrono::seconds(20)));
  r = l->run("echo still here");
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(r->stdout_data, "still here\n");
  EXPECT_FALSE(r->timed_out);
  auto shown = conn().show_session("s");
  ASSERT_TRUE(shown) << shown.err().message;
  ASSERT_GE(shown->history.size(), 2u);
  EXPECT_TRUE(shown->history[shown->history.size() - 2].timed_out);
  ASSERT_TRUE(l->release().ok());
}

// A run that gives no timeout has its session's default, as an exec does.
TEST_F(lease_test, ALeasedRunWithoutATimeoutHasItsSessionsDefault) {
  auto made = sbsh({"session", "create", "t", "--timeout", "500ms"});
  ASSERT_EQ(made.code, 0) << made.err;
  client::connection c = conn();
  auto l = c.lease("t");
  ASSERT_TRUE(l) << l.err().message;
  auto r = l->run("echo before; sleep 60; echo never");
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->stdout_data, "before\n");
  r = l->run("echo in time");
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->stdout_data, "in time\n");
}

// A run whose background job keeps its stdout returns as an exec does, at its status; the job
// never meets a pipe without a reader, while the lease lasts nor after its release.
TEST_F(lease_test, ABackgroundJobNeitherHoldsUpARunNorDiesOfItsPipe) {
  ASSERT_EQ(sbsh({"session", "create", "s"}).code, 0);
  client::connection c = conn();
  auto l = c.lease("s");
  ASSERT_TRUE(l) << l.err().message;
  std::string pid = dir + "/bg.pid", done = dir + "/bg.done";
  auto r = l->run("(sleep 1; echo late; sleep 1; echo later; touch " + done + ") & echo $! > " + pid +
                  "; echo started");
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(r->stdout_data, "started\n");
  pid_t bg = read_pid_file(pid);
  EXPECT_TRUE(bg > 0 && pid_alive(bg)) << "the run waited for its background job";
  r = l->run("echo next");
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(r->stdout_data, "next\n");
  // One that never stops writing holds up no later run either.
  std::string spam = dir + "/spam.pid";
  r = l->run("(while :; do echo spam; done) & echo $! > " + spam);
  ASSERT_TRUE(r) << r.err().message;
  r = l->run("echo after spam");
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(r->stdout_data, "after spam\n");
  if (pid_t sp = read_pid_file(spam); sp > 0) ::kill(sp, SIGKILL);
  ASSERT_TRUE(l->release().ok());
  EXPECT_TRUE(wait_until([&] { return ::access(done.c_str(), F_OK) == 0; }, std::chrono::seconds(20)))
      << "the background job died writing to its stdout";
}

// sbshd's death ends a lease: the session's wrapper, waiting for the next sbshd, has the shell
// end it, so that nothing runs there unwatched; the next sbshd adopts the shell as the lease
// left it.
TEST_F(lease_test, SbshdsDeathEndsTheLeaseAndTheNextSbshdAdoptsTheShell) {
  ASSERT_EQ(sbsh({"session", "create", "s"}).code, 0);
  client::connection c = conn();
  auto l = c.lease("s");
  ASSERT_TRUE(l) << l.err().message;
  auto r = l->run("cd /tmp; Q=kept");
  ASSERT_TRUE(r) << r.err().message;
  kill_daemon();
  std::string why;
  EXPECT_TRUE(wait_until(
      [&] {
        auto x = l->run("true");
        if (!x) why = x.err().code;
        return !x;
      },
      std::chrono::seconds(20)));
  EXPECT_EQ(why, "eof");
  start_daemon();
  run_result e = exec("s", "echo \"$Q\"; pwd");
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_EQ(e.out, "kept\n/tmp\n");
}

// A holder that dies while its command runs: sbshd hangs up on the command, as on any command
// whose client left, and the session serves the next client.
TEST_F(lease_test, TheHoldersDeathHangsUpOnTheCommandItRan) {
  ASSERT_EQ(sbsh({"session", "create", "s"}).code, 0);
  std::string pidfile = dir + "/hung.pid";
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    holder h{greeted(sock)};
    if (h.take("s")) (void)h.run("sh -c 'echo $$ > " + pidfile + ".tmp; mv " + pidfile + ".tmp " + pidfile +
                                 "; exec sleep 300'");
    ::_exit(0);
  }
  pid_t sleeper = 0;
  EXPECT_TRUE(wait_until([&] { return (sleeper = read_pid_file(pidfile)) > 0; }, std::chrono::seconds(20)));
  ::kill(child, SIGKILL);
  int st = 0;
  ::waitpid(child, &st, 0);
  ASSERT_GT(sleeper, 0);
  EXPECT_TRUE(wait_until([&] { return !pid_alive(sleeper); }, std::chrono::seconds(20)));
  run_result e = exec("s", "echo served");
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_EQ(e.out, "served\n");
}

}  // namespace sbsh::test::lease_tests
