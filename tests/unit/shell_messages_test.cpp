// daemon/shell_messages: the run message as the builtin reads it, texts through the memfd,
// and the checks on what comes back.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/lease_page.h"
#include "daemon/shell_messages.h"
#include "ipc/socket_io.h"
#include "wrapper/wrapper.h"

namespace sbsh::daemon::shell_messages_tests {

struct received {
  sbsh_run_header h{};
  std::string body;
  std::vector<unique_fd> fds;
};

received receive_run(int fd) {
  received r;
  std::string buf(sizeof(sbsh_run_header) + SBSH_CHANNEL_MAX_CWD + SBSH_CHANNEL_INLINE_TEXT, '\0');
  iovec iov{buf.data(), buf.size()};
  int fds[8];
  ipc::received got = ipc::recv_parts_with_fds(fd, {&iov, 1}, fds);
  ssize_t n = got.bytes;
  EXPECT_GE(n, static_cast<ssize_t>(sizeof r.h));
  std::memcpy(&r.h, buf.data(), sizeof r.h);
  r.body = buf.substr(sizeof r.h, static_cast<size_t>(n) - sizeof r.h);
  for (size_t i = 0; i < got.fds; ++i) r.fds.emplace_back(fds[i]);
  return r;
}

void send_status(int fd, const sbsh_status_msg& m) { ASSERT_EQ(::send(fd, &m, sizeof m, 0), static_cast<ssize_t>(sizeof m)); }

sbsh_status_msg status_of(uint64_t seq, int value, int sig, uint32_t flags) {
  sbsh_status_msg m{};
  m.magic = SBSH_CHANNEL_MAGIC;
  m.version = SBSH_CHANNEL_VERSION;
  m.type = SBSH_MSG_STATUS;
  m.seq = seq;
  m.exit_value = value;
  m.exit_signal = sig;
  m.flags = flags;
  return m;
}

TEST(shell_messages, ARunCarriesItsTextDirectoryAndDescriptorsInOneMessage) {
  auto ch = make_shell_channel();
  ASSERT_TRUE(ch.ok()) << ch.err().message;
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  unique_fd r(p[0]), w(p[1]);
  text_memfd big;
  run_message m;
  m.seq = 7;
  m.text = "echo hi";
  m.check_cwd = "/tmp";
  m.out = w.get();
  m.err = w.get();
  m.keep_out = r.get();
  m.keep_err = r.get();
  ASSERT_TRUE(send_run(ch->first.get(), m, big).ok());
  auto got = receive_run(ch->second.get());
  EXPECT_EQ(got.h.magic, SBSH_CHANNEL_MAGIC);
  EXPECT_EQ(got.h.type, SBSH_MSG_RUN);
  EXPECT_EQ(got.h.seq, 7u);
  EXPECT_EQ(got.h.flags, static_cast<uint32_t>(SBSH_RUN_KEEPERS));
  EXPECT_EQ(got.body, "/tmpecho hi");
  EXPECT_EQ(got.h.cwd_len, 4u);
  EXPECT_EQ(got.fds.size(), 4u);
}

TEST(shell_messages, ALongTextTravelsInTheMemfdAndItsMemoryIsGivenBack) {
  auto ch = make_shell_channel();
  ASSERT_TRUE(ch.ok());
  text_memfd big;
  std::string text(3u << 20, 'x');
  run_message m;
  m.seq = 1;
  m.text = text;
  m.out = m.err = 1;
  ASSERT_TRUE(send_run(ch->first.get(), m, big).ok());
  auto got = receive_run(ch->second.get());
  EXPECT_EQ(got.h.flags & SBSH_RUN_TEXT_MEMFD, static_cast<uint32_t>(SBSH_RUN_TEXT_MEMFD));
  EXPECT_EQ(got.h.text_len, text.size());
  EXPECT_TRUE(got.body.empty());
  ASSERT_EQ(got.fds.size(), 3u);
  std::string read_back(text.size(), '\0');
  ASSERT_EQ(::pread(got.fds[2].get(), read_back.data(), read_back.size(), 0), static_cast<ssize_t>(text.size()));
  EXPECT_EQ(read_back, text);
  // A short text after a long one: the long one's memory is not kept.
  std::string short_text(SBSH_CHANNEL_INLINE_TEXT + 1, 'y');
  m.text = short_text;
  ASSERT_TRUE(send_run(ch->first.get(), m, big).ok());
  auto second = receive_run(ch->second.get());
  ASSERT_EQ(second.fds.size(), 3u);
  EXPECT_LT(::lseek(second.fds[2].get(), 0, SEEK_END), static_cast<off_t>(text.size()));
}

TEST(shell_messages, StatusesAreCheckedAndSignalsKeptOnlyWhenSaid) {
  auto ch = make_shell_channel();
  ASSERT_TRUE(ch.ok());
  int shell = ch->second.get();
  auto none = receive_message(ch->first.get());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.value().has_value());
  send_status(shell, status_of(3, 137, 9, SBSH_STATUS_SIGNALED));
  send_status(shell, status_of(4, 137, 9, 0));  // no flag: no signal
  send_status(shell, status_of(5, 130, 2, SBSH_STATUS_SIGNALED | SBSH_STATUS_INTERRUPTED));
  auto a = receive_message(ch->first.get());
  ASSERT_TRUE(a.ok() && a.value());
  EXPECT_EQ(a.value()->seq, 3u);
  EXPECT_EQ(a.value()->signal, 9);
  auto b = receive_message(ch->first.get());
  ASSERT_TRUE(b.ok() && b.value());
  EXPECT_FALSE(b.value()->signal.has_value());
  auto c = receive_message(ch->first.get());
  ASSERT_TRUE(c.ok() && c.value());
  EXPECT_TRUE(c.value()->interrupted);
  // Anything else is a channel not to be trusted.
  auto bad = status_of(6, 0, 0, 0);
  bad.magic = 1;
  send_status(shell, bad);
  auto d = receive_message(ch->first.get());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.err().code, "bad_message");
  ASSERT_EQ(::send(shell, "short", 5, 0), 5);
  EXPECT_EQ(receive_message(ch->first.get()).err().code, "bad_message");
  ch->second.reset();
  auto e = receive_message(ch->first.get());
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.err().code, "gone");
}

TEST(shell_messages, ARunToAShellThatHasEndedIsGone) {
  auto ch = make_shell_channel();
  ASSERT_TRUE(ch.ok());
  ch->second.reset();
  text_memfd big;
  run_message m;
  m.text = "true";
  m.out = m.err = 1;
  auto s = send_run(ch->first.get(), m, big);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.err().code, "gone");
}

// A real bash running the sbsh builtin on the channel, with no sbshd: the interrupt message
// and the runs are put on the channel exactly when the test says.
class builtin_shell {
 public:
  builtin_shell() {
    auto ch = make_shell_channel();
    auto builtin = wrapper::find_builtin();
    if (!ch || !builtin) return;
    channel_ = std::move(ch->first);
    int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    auto pid = wrapper::spawn_serving_shell("/bin/bash", *builtin, ch->second.get(), devnull);
    if (pid) pid_ = *pid;
    ::close(devnull);
  }
  ~builtin_shell() {
    channel_.reset();  // the builtin reads end-of-file and the shell ends
    if (pid_ > 0) {
      int st;
      ::waitpid(pid_, &st, 0);
    }
  }
  pid_t pid() const { return pid_; }
  int channel() const { return channel_.get(); }
  // The next message from the builtin on the channel (or on `fd`, a lease), waiting up to 10 s.
  std::optional<shell_message> next(int fd = -1) {
    if (fd < 0) fd = channel_.get();
    for (int waited = 0; waited < 100; ++waited) {
      auto m = receive_message(fd);
      if (!m) return std::nullopt;
      if (m.value()) return m.value();
      pollfd p{fd, POLLIN, 0};
      ::poll(&p, 1, 100);
    }
    return std::nullopt;
  }
  // Sends `text` as run `seq` with fresh pipes for its output, on the channel (or on `fd`, a
  // lease); the read end of stdout stays here.
  unique_fd send(uint64_t seq, std::string_view text, int fd = -1, uint32_t timeout_ms = 0) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return {};
    run_message m;
    m.seq = seq;
    m.text = text;
    m.timeout_ms = timeout_ms;
    m.out = out[1];
    m.err = err[1];
    EXPECT_TRUE(send_run(fd < 0 ? channel_.get() : fd, m, big_).ok());
    ::close(out[1]);
    ::close(err[0]);
    ::close(err[1]);
    return unique_fd(out[0]);
  }

 private:
  unique_fd channel_;
  text_memfd big_;
  pid_t pid_ = -1;
};

std::string read_all(int fd) {
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  return text;
}

// The race the interrupt message closes: sbshd's SIGINT can reach the shell after the builtin
// has read a run and before the command is under way, where a SIGINT cannot be told from a
// stray one and is dropped. Here the shell is stopped while the run and its interrupt are
// queued, so the builtin finds both at once: nothing of the text may run. An interrupt for a
// run already answered is dropped, and the shell serves the next run in full.
TEST(shell_messages, AnInterruptQueuedBeforeTheCommandStartsStopsAllOfIt) {
  builtin_shell sh;
  ASSERT_GT(sh.pid(), 0) << "cannot start bash with the sbsh builtin";
  auto ready = sh.next();
  ASSERT_TRUE(ready && ready->type == SBSH_MSG_READY);
  EXPECT_TRUE(ready->serves_interrupts);

  ASSERT_EQ(::kill(sh.pid(), SIGSTOP), 0);
  unique_fd out = sh.send(1, "echo ran; X=changed");
  send_interrupt(sh.channel(), 1);
  ASSERT_EQ(::kill(sh.pid(), SIGCONT), 0);
  auto st = sh.next();
  ASSERT_TRUE(st && st->type == SBSH_MSG_STATUS);
  EXPECT_EQ(st->seq, 1u);
  EXPECT_TRUE(st->interrupted);
  EXPECT_EQ(st->exit_value, 128 + SIGINT);
  EXPECT_EQ(read_all(out.get()), "");

  // A stale interrupt (run 1 was answered) ahead of run 2, and one for another run behind it.
  ASSERT_EQ(::kill(sh.pid(), SIGSTOP), 0);
  send_interrupt(sh.channel(), 1);
  out = sh.send(2, "echo \"$? ${X-unset}\"");
  send_interrupt(sh.channel(), 7);
  ASSERT_EQ(::kill(sh.pid(), SIGCONT), 0);
  st = sh.next();
  ASSERT_TRUE(st && st->type == SBSH_MSG_STATUS);
  EXPECT_EQ(st->seq, 2u);
  EXPECT_FALSE(st->interrupted);
  EXPECT_EQ(st->exit_value, 0);
  EXPECT_EQ(read_all(out.get()), "130 unset\n");
}

TEST(shell_messages, TheKernelNamesEachMessagesSenderAndDescriptorsSentAreClosed) {
  auto ch = make_shell_channel();
  ASSERT_TRUE(ch.ok());
  send_status(ch->second.get(), status_of(1, 0, 0, 0));
  // Another process with a copy of the shell's end: the kernel names it, whatever it says.
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto m = status_of(2, 0, 0, 0);
    m.pid = ::getppid();  // a lie the sender's pid gives away
    int fd = ::open("/dev/null", O_RDONLY);
    iovec iov{&m, sizeof m};
    ::_exit(ipc::send_parts_with_fds(ch->second.get(), {&iov, 1}, {&fd, 1}) == static_cast<ssize_t>(sizeof m) ? 0 : 1);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  auto mine = receive_message(ch->first.get());
  ASSERT_TRUE(mine.ok() && mine.value());
  EXPECT_EQ(mine.value()->sender, ::getpid());
  int before = ::fcntl(0, F_DUPFD_CLOEXEC, 0);  // the lowest free descriptor now
  ::close(before);
  auto theirs = receive_message(ch->first.get());
  ASSERT_TRUE(theirs.ok() && theirs.value());
  EXPECT_EQ(theirs.value()->sender, child);
  EXPECT_EQ(theirs.value()->seq, 2u);
  // The descriptor it carried was not kept: the lowest free one is still free.
  int after = ::fcntl(0, F_DUPFD_CLOEXEC, 0);
  EXPECT_EQ(after, before);
  ::close(after);
}

TEST(shell_messages, EachNonceIsNew) {
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(new_nonce());
  EXPECT_EQ(seen.size(), 1000u);
}

// A lease (docs/architecture.md, "The direct path"): a socket whose other end the shell gets
// from sbshd, on which whoever holds this end runs commands with no daemon in between.
// With it, the record page sbshd reads (daemon/lease_page.h).
struct lease_pair {
  unique_fd mine, shells, page_fd;
  std::optional<lease_page> page;
  lease_pair() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return;
    mine = unique_fd(sv[0]);
    shells = unique_fd(sv[1]);
    watch_senders(mine.get());
    auto made = lease_page::make();
    if (!made) return;
    page.emplace(std::move(made->first));
    page_fd = std::move(made->second);
  }
};

// Takes a lease for `sh` as sbshd would: true once the builtin said it holds it.
bool take_lease(builtin_shell& sh, lease_pair& l, uint64_t seq, uint64_t nonce) {
  if (!send_lease(sh.channel(), seq, nonce, l.shells.get(), l.page_fd.get(), SBSH_LEASE_MARK_PIDS).ok()) return false;
  l.shells.reset();
  l.page_fd.reset();
  auto m = sh.next();
  return m && m->type == SBSH_MSG_LEASED && m->seq == seq && m->nonce == nonce;
}

TEST(shell_messages, ALeasedShellAnswersItsHoldersRunsOnTheLeaseAndSbshdsOnTheChannel) {
  builtin_shell sh;
  ASSERT_GT(sh.pid(), 0) << "cannot start bash with the sbsh builtin";
  auto ready = sh.next();
  ASSERT_TRUE(ready && ready->type == SBSH_MSG_READY);
  EXPECT_TRUE(ready->serves_leases);
  lease_pair l;
  ASSERT_TRUE(take_lease(sh, l, 5, 77));

  unique_fd out = sh.send(1, "X=leased; printf 'out\\n'; (exit 3)", l.mine.get());
  auto st = sh.next(l.mine.get());
  ASSERT_TRUE(st && st->type == SBSH_MSG_STATUS);
  EXPECT_EQ(st->seq, 1u);
  EXPECT_EQ(st->exit_value, 3);
  EXPECT_EQ(st->sender, sh.pid());  // the kernel says the shell sent it
  EXPECT_EQ(read_all(out.get()), "out\n");

  // sbshd's own runs still come on the channel, in the same shell.
  out = sh.send(2, "echo \"$? $X\"");
  st = sh.next();
  ASSERT_TRUE(st && st->type == SBSH_MSG_STATUS);
  EXPECT_EQ(st->seq, 2u);
  EXPECT_EQ(read_all(out.get()), "3 leased\n");

  // A sync is sbshd's alone: on the lease it is refused, and nothing else changes.
  ASSERT_TRUE(send_sync(l.mine.get(), 3, 9).ok());
  st = sh.next(l.mine.get());
  ASSERT_TRUE(st && st->type == SBSH_MSG_STATUS);
  EXPECT_TRUE(st->not_run);

  // sbshd ends it: the builtin says so on the channel and closes its end.
  ASSERT_TRUE(send_lease_end(sh.channel(), 0).ok());
  auto ended = sh.next();
  ASSERT_TRUE(ended && ended->type == SBSH_MSG_LEASE_ENDED);
  EXPECT_EQ(ended->seq, 5u);
  EXPECT_EQ(ended->nonce, 77u);
  char byte;
  EXPECT_EQ(::recv(l.mine.get(), &byte, 1, 0), 0);
  out = sh.send(4, "echo $X");
  st = sh.next();
  ASSERT_TRUE(st && st->type == SBSH_MSG_STATUS);
  EXPECT_EQ(st->seq, 4u);
  EXPECT_EQ(read_all(out.get()), "leased\n");
}

TEST(shell_messages, ALeaseEndsWhenItsHolderGoesAndSbshdLearnsWhereTheShellIs) {
  builtin_shell sh;
  ASSERT_GT(sh.pid(), 0) << "cannot start bash with the sbsh builtin";
  ASSERT_TRUE(sh.next());
  lease_pair l;
  ASSERT_TRUE(take_lease(sh, l, 1, 2));
  unique_fd out = sh.send(1, "cd /tmp", l.mine.get());
  auto st = sh.next(l.mine.get());
  ASSERT_TRUE(st && st->type == SBSH_MSG_STATUS);
  EXPECT_EQ(st->cwd, std::optional<std::string>("/tmp"));
  l.mine.reset();  // the holder is gone
  auto ended = sh.next();
  ASSERT_TRUE(ended && ended->type == SBSH_MSG_LEASE_ENDED);
  EXPECT_EQ(ended->seq, 1u);
  // sbshd did not see the lease's statuses: the next one says where the shell is.
  out = sh.send(2, "true");
  st = sh.next();
  ASSERT_TRUE(st && st->type == SBSH_MSG_STATUS);
  EXPECT_EQ(st->cwd, std::optional<std::string>("/tmp"));
}

TEST(shell_messages, ACommandThatClosesTheLeaseEndsItAndItsStatusComesOnTheChannel) {
  builtin_shell sh;
  ASSERT_GT(sh.pid(), 0) << "cannot start bash with the sbsh builtin";
  ASSERT_TRUE(sh.next());
  lease_pair l;
  ASSERT_TRUE(take_lease(sh, l, 3, 4));
  unique_fd out = sh.send(1, "exec " + std::to_string(SBSH_LEASE_FD) + ">&-; echo closed", l.mine.get());
  auto ended = sh.next();
  ASSERT_TRUE(ended && ended->type == SBSH_MSG_LEASE_ENDED);
  EXPECT_EQ(ended->seq, 3u);
  auto st = sh.next();
  ASSERT_TRUE(st && st->type == SBSH_MSG_STATUS);
  EXPECT_EQ(st->seq, 1u);
  EXPECT_EQ(read_all(out.get()), "closed\n");
  char byte;
  EXPECT_EQ(::recv(l.mine.get(), &byte, 1, 0), 0);  // nothing holds the shell's end any more
}

TEST(shell_messages, NoCommandHoldsTheLease) {
  builtin_shell sh;
  ASSERT_GT(sh.pid(), 0) << "cannot start bash with the sbsh builtin";
  ASSERT_TRUE(sh.next());
  lease_pair l;
  ASSERT_TRUE(take_lease(sh, l, 1, 1));
  // A background job and a subshell look for the lease's descriptor.
  std::string fd = std::to_string(SBSH_LEASE_FD);
  unique_fd out = sh.send(1,
                          "(test -e /proc/self/fd/" + fd + " && echo sub); { test -e /proc/self/fd/" + fd +
                              " && echo job; } & wait; test -e /proc/self/fd/" + fd + " && echo shell",
                          l.mine.get());
  auto st = sh.next(l.mine.get());
  ASSERT_TRUE(st && st->type == SBSH_MSG_STATUS);
  EXPECT_EQ(read_all(out.get()), "shell\n");  // the shell holds it, and nothing it forked
}

// A shell with the builtin, ready, holding a lease with its record page.
class shell_messages_leased : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GT(sh.pid(), 0) << "cannot start bash with the sbsh builtin";
    auto ready = sh.next();
    ASSERT_TRUE(ready && ready->type == SBSH_MSG_READY);
    ASSERT_TRUE(l.page.has_value());
    ASSERT_TRUE(take_lease(sh, l, 5, 6));
  }
  builtin_shell sh;
  lease_pair l;
};

// The record page (ipc/shell_channel.h): each run on the lease is written there as it starts
// and as it ends, so that sbshd knows it with no message; no process the shell forks has it.
TEST_F(shell_messages_leased, ARunIsRecordedInThePageThatNoCommandMaps) {
  lease_page::run now;
  ASSERT_EQ(l.page->running(&now), lease_page::reading::ok);
  EXPECT_EQ(now.seq, 0u);

  char dir[] = "/tmp/sbsh-page-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string fifo = std::string(dir) + "/go";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string text = "read -r line < " + fifo + "; echo \"got $line\"";
  unique_fd out = sh.send(1, text, l.mine.get(), 5000);
  // While it waits, the page shows it running, with its deadline and its since mark.
  for (int i = 0; i < 1000 && now.seq == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(l.page->running(&now), lease_page::reading::ok);
  }
  EXPECT_EQ(now.seq, 1u);
  EXPECT_EQ(now.text, text);
  EXPECT_EQ(now.full_len, text.size());
  EXPECT_EQ(now.deadline_us, now.started_us + uint64_t{5000} * 1000);
  EXPECT_GT(now.mark.start_ticks, 0u);
  EXPECT_GT(now.mark.last_pid, 0);
  std::vector<lease_page::record> ended;
  lease_page::tally sum;
  ASSERT_EQ(l.page->take_ended(&ended, &sum), lease_page::reading::ok);
  EXPECT_TRUE(ended.empty());
  {
    unique_fd w(::open(fifo.c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(w);
    ASSERT_EQ(::write(w.get(), "x\n", 2), 2);
  }
  auto st = sh.next(l.mine.get());
  ASSERT_TRUE(st && st->type == SBSH_MSG_STATUS);
  EXPECT_EQ(read_all(out.get()), "got x\n");
  ASSERT_EQ(l.page->take_ended(&ended, &sum), lease_page::reading::ok);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(sum.ended, 1u);
  EXPECT_EQ(sum.failed, 0u);
  EXPECT_EQ(ended[0].seq, 1u);
  EXPECT_EQ(ended[0].exit_value, 0);
  EXPECT_EQ(ended[0].text, text);
  EXPECT_GE(ended[0].ended_us, ended[0].started_us);
  ASSERT_EQ(l.page->running(&now), lease_page::reading::ok);
  EXPECT_EQ(now.seq, 0u);
  ::unlink(fifo.c_str());
  ::rmdir(dir);

  // The shell maps the page; a subshell it forks does not.
  out = sh.send(2,
                "m=; while read -r l; do case $l in *sbsh-lease-records*) m=mapped;; esac; done < /proc/$$/maps; "
                "(c=; while read -r l; do case $l in *sbsh-lease-records*) c=mapped;; esac; done < "
                "/proc/$BASHPID/maps; echo \"child:${c:-none}\"); echo \"shell:${m:-none}\"",
                l.mine.get());
  st = sh.next(l.mine.get());
  ASSERT_TRUE(st && st->type == SBSH_MSG_STATUS);
  EXPECT_EQ(read_all(out.get()), "child:none\nshell:mapped\n");
}

// A holder running faster than sbshd reads: the builtin says so once the ring is half full
// (once for each reading), and what it wrote over before sbshd read is counted as lost, and
// counted all the same.
TEST_F(shell_messages_leased, TheBuiltinSaysWhenThePagesRingFillsAndWhatWasLostIsCounted) {
  auto run = [&](uint64_t from, uint64_t to) {
    for (uint64_t seq = from; seq <= to; ++seq) {
      unique_fd out = sh.send(seq, "(exit 7)", l.mine.get());
      auto st = sh.next(l.mine.get());
      ASSERT_TRUE(st && st->type == SBSH_MSG_STATUS && st->seq == seq);
      EXPECT_EQ(st->exit_value, 7);
    }
  };
  run(1, 40);
  auto nudge = sh.next();
  ASSERT_TRUE(nudge.has_value());
  EXPECT_EQ(nudge->type, SBSH_MSG_RECORDS);
  EXPECT_EQ(nudge->seq, SBSH_RECORD_RING / 2);
  std::vector<lease_page::record> ended;
  lease_page::tally sum;
  ASSERT_EQ(l.page->take_ended(&ended, &sum), lease_page::reading::ok);
  ASSERT_EQ(ended.size(), 40u);
  EXPECT_EQ(sum.lost, 0u);
  EXPECT_EQ(sum.failed, 40u);
  for (uint64_t i = 0; i < 40; ++i) {
    EXPECT_EQ(ended[i].seq, i + 1);
    EXPECT_EQ(ended[i].exit_value, 7);
    EXPECT_EQ(ended[i].text, "(exit 7)");
  }
  run(41, 110);
  nudge = sh.next();
  ASSERT_TRUE(nudge.has_value());
  EXPECT_EQ(nudge->type, SBSH_MSG_RECORDS);
  EXPECT_EQ(nudge->seq, 40u + SBSH_RECORD_RING / 2);
  ended.clear();
  ASSERT_EQ(l.page->take_ended(&ended, &sum), lease_page::reading::ok);
  // Those written over count too, their failures with them (the totals each record carries).
  EXPECT_EQ(sum.ended, 70u);
  EXPECT_EQ(sum.lost, 70u - SBSH_RECORD_RING);
  EXPECT_EQ(sum.failed, 70u);
  ASSERT_EQ(ended.size(), size_t{SBSH_RECORD_RING});
  EXPECT_EQ(ended.front().seq, 110u - SBSH_RECORD_RING + 1);
  EXPECT_EQ(ended.back().seq, 110u);
}

// A lease that ends while its holder has runs queued on it: each is answered as not run, and
// one sent afterwards fails at its sender, so the holder knows of every run whether it ran.
TEST_F(shell_messages_leased, RunsLeftUnreadWhenTheLeaseEndsAreAnsweredAsNotRun) {
  char dir[] = "/tmp/sbsh-unread-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string fifo = std::string(dir) + "/go", ran = std::string(dir) + "/ran";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  unique_fd first = sh.send(1, "read -r line < " + fifo + "; echo first", l.mine.get());
  lease_page::run now;
  for (int i = 0; i < 1000 && now.seq != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(l.page->running(&now), lease_page::reading::ok);
  }
  ASSERT_EQ(now.seq, 1u);
  unique_fd second = sh.send(2, "echo second > " + ran, l.mine.get());
  ASSERT_TRUE(send_lease_end(sh.channel(), 0).ok());
  {
    unique_fd w(::open(fifo.c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(w);
    ASSERT_EQ(::write(w.get(), "x\n", 2), 2);
  }
  auto st = sh.next(l.mine.get());
  ASSERT_TRUE(st && st->type == SBSH_MSG_STATUS);
  EXPECT_EQ(st->seq, 1u);
  EXPECT_FALSE(st->not_run);
  EXPECT_EQ(read_all(first.get()), "first\n");
  st = sh.next(l.mine.get());
  ASSERT_TRUE(st && st->type == SBSH_MSG_STATUS);
  EXPECT_EQ(st->seq, 2u);
  EXPECT_TRUE(st->not_run);
  EXPECT_EQ(st->err, SBSH_ERR_LEASE_ENDED);
  EXPECT_EQ(read_all(second.get()), "");
  auto ended = sh.next();
  ASSERT_TRUE(ended && ended->type == SBSH_MSG_LEASE_ENDED);
  EXPECT_NE(::access(ran.c_str(), F_OK), 0) << "the run the shell never read ran";
  // Sent now, a run fails at once.
  run_message m;
  m.seq = 3;
  m.text = "true";
  m.out = m.err = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  text_memfd big;
  EXPECT_FALSE(send_run(l.mine.get(), m, big).ok());
  ::close(m.out);
  ::unlink(fifo.c_str());
  ::rmdir(dir);
}

}  // namespace sbsh::daemon::shell_messages_tests
