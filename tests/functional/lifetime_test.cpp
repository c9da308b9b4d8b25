// What a session's lifetime holds: nothing it started outlives `session rm`, `shutdown` or a
// wrapper nobody adopts, wherever a process moved (setsid, a double fork, nohup, a daemon
// that closed its descriptors); a restart ends the old shell's processes but not background
// ones; one sbshd per state directory; a request that would wait for the command making it
// is refused at once.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "fixture.h"
#include "ipc/fd.h"
#include "ipc/shell_channel.h"

namespace sbsh::test::lifetime_tests {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

class lifetime_test : public daemon_test {
 protected:
  void TearDown() override {
    // A failing test may leave its processes: they are this test's, known by pid.
    for (pid_t p : started_)
      if (pid_alive(p) && cmdline_of(p).find(tag()) != std::string::npos) ::kill(p, SIGKILL);
    daemon_test::TearDown();
  }

  // Every process the tests start carries this in its command line.
  static std::string tag() { return "lifetime-" + std::to_string(::getpid()); }

  // A command that writes its own pid to FILE in $TMPDIR, then sleeps with the tag as its
  // name.
  static std::string sleeper(const std::string& file) {
    return "bash -c " + shell_quote("echo $$ >\"$TMPDIR/" + file + ".tmp\"; mv \"$TMPDIR/" + file + ".tmp\" \"$TMPDIR/" +
                                    file + "\"; exec -a " + tag() + " sleep 300");
  }

  // The pid written to FILE, once it is there (0 if it never is).
  pid_t pid_in(const std::string& file) {
    std::string path = dir + "/tmp/" + file;
    wait_until([&] { return std::filesystem::exists(path); }, seconds(20));
    pid_t p = static_cast<pid_t>(std::atoi(read_file(path).c_str()));
    if (p > 0) started_.push_back(p);
    return p;
  }

  // Starts, in `session`, processes that leave the shell every way a command can; returns
  // their pids once each runs.
  std::vector<pid_t> start_escapees(const std::string& session) {
    std::string cmd = "setsid " + sleeper(session + "-setsid") + " >/dev/null 2>&1 &\n" +
                      "( ( " + sleeper(session + "-double") + " >/dev/null 2>&1 & ) & )\n" +
                      "nohup " + sleeper(session + "-nohup") + " >/dev/null 2>&1 & disown\n" +
                      // A daemon: closes its descriptors, leaves the session, its parent exits.
                      "bash -c " +
                      shell_quote("exec </dev/null >/dev/null 2>&1; setsid " + sleeper(session + "-daemon") + " & exit 0") +
                      " &\nwait";
    auto r = exec(session, cmd);
    EXPECT_EQ(r.code, 0) << r.err;
    std::vector<pid_t> pids;
    for (const char* k : {"-setsid", "-double", "-nohup", "-daemon"}) pids.push_back(pid_in(session + k));
    return pids;
  }

  // A background process whose child calls setsid; returns that child's pid.
  pid_t start_background(const std::string& session) {
    auto r = sbsh({"start", "-s", session, "--", "setsid " + sleeper(session + "-bg") + " >/dev/null 2>&1 & sleep 300"});
    EXPECT_EQ(r.code, 0) << r.err;
    return pid_in(session + "-bg");
  }

  static bool all_gone(const std::vector<pid_t>& pids) {
    return std::ranges::none_of(pids, [](pid_t p) { return p <= 0 || pid_alive(p); });
  }

  std::vector<pid_t> started_;
};

TEST_F(lifetime_test, SessionRmEndsEveryProcessTheSessionStarted) {
  auto pids = start_escapees("r");
  pids.push_back(start_background("r"));
  ASSERT_EQ(pids.size(), 5u);
  for (pid_t p : pids) ASSERT_TRUE(p > 0 && pid_alive(p)) << p;
  auto st = session_pids("r");
  auto r = sbsh({"session", "rm", "r"});
  ASSERT_EQ(r.code, 0) << r.err;
  // rm answers once the wrapper has ended them: a short margin for the kernel to finish.
  EXPECT_TRUE(wait_until([&] { return all_gone(pids); }, seconds(3)));
  for (pid_t p : pids) EXPECT_FALSE(pid_alive(p)) << "survived session rm: " << p << " " << cmdline_of(p);
  EXPECT_FALSE(pid_alive(static_cast<pid_t>(st.shell_pid)));
  EXPECT_FALSE(pid_alive(static_cast<pid_t>(st.wrapper_pid)));
}

TEST_F(lifetime_test, ShutdownEndsEveryProcessOfEverySession) {
  auto pids = start_escapees("a");
  for (pid_t p : start_escapees("b")) pids.push_back(p);
  pids.push_back(start_background("b"));
  for (pid_t p : pids) ASSERT_TRUE(p > 0 && pid_alive(p)) << p;
  stop_daemon();
  EXPECT_TRUE(wait_until([&] { return all_gone(pids); }, seconds(3)));
  for (pid_t p : pids) EXPECT_FALSE(pid_alive(p)) << "survived shutdown: " << p << " " << cmdline_of(p);
}

TEST_F(lifetime_test, RestartEndsTheOldShellsProcessesButNotBackgroundOnes) {
  auto pids = start_escapees("s");
  pid_t bg = start_background("s");
  ASSERT_TRUE(bg > 0 && pid_alive(bg));
  auto before = session_pids("s");
  auto r = sbsh({"session", "restart", "s"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(wait_until([&] { return all_gone(pids); }, seconds(5)));
  for (pid_t p : pids) EXPECT_FALSE(pid_alive(p)) << "survived session restart: " << p << " " << cmdline_of(p);
  EXPECT_TRUE(wait_until([&] { return !pid_alive(static_cast<pid_t>(before.wrapper_pid)); }, seconds(5)));
  EXPECT_TRUE(pid_alive(bg)) << "a background process outlives a restart of its session's shell";
  EXPECT_EQ(exec("s", "echo fresh").out, "fresh\n");
  ASSERT_EQ(sbsh({"session", "rm", "s"}).code, 0);
  EXPECT_TRUE(wait_until([&] { return !pid_alive(bg); }, seconds(3)));
}

// A background process outlives its session's shell and wrapper for as long as an sbshd, or
// a wrapper that waits for one, can still reach it. When sbshd and the wrapper are killed at
// once, nothing can: its tree ends by itself, setsid children included.
TEST_F(lifetime_test, ABackgroundProcessNothingCanReachAnyMoreEnds) {
  pid_t bg = start_background("s");
  ASSERT_TRUE(bg > 0 && pid_alive(bg));
  auto before = session_pids("s");
  // Killing only the wrapper leaves it: sbshd still holds it and ends it with its session.
  ASSERT_EQ(::kill(static_cast<pid_t>(before.wrapper_pid), SIGKILL), 0);
  ASSERT_TRUE(wait_until([&] { return !pid_alive(static_cast<pid_t>(before.wrapper_pid)); }, seconds(20)));
  EXPECT_EQ(exec("s", "echo again").out, "again\n");  // a new shell, a new wrapper
  EXPECT_TRUE(pid_alive(bg)) << "a background process outlives its session's wrapper while sbshd holds it";
  // Both at once: the new wrapper, which holds what a later sbshd would need, and sbshd.
  auto now = session_pids("s");
  ASSERT_EQ(::kill(static_cast<pid_t>(now.wrapper_pid), SIGKILL), 0);
  kill_daemon();
  EXPECT_TRUE(wait_until([&] { return !pid_alive(bg); }, seconds(20))) << "a background process nothing can reach";
}

// The keeper of a background process (sbsh's builtin, "keep" and "reap"), run as sbshd's
// text runs it, with its status pipe given by the test. With nobody to read that pipe from
// the start (sbshd gave the start up, or went), "keep" says so and nothing is started. When
// the last reader goes while the keeper, between two children, has none, what it starts after
// still ends: the chaos test found a tree that outlived everything this way.
class keeper_test : public lifetime_test {
 protected:
  keeper_test() { start_in_setup = false; }  // no sbshd: the test is the keeper's sbshd

  // bash, with sbsh's builtin loaded (it needs a channel on descriptor 254), runs `keeper` in
  // a subshell whose descriptor 3 is the write end of `status`; its stdout goes to `out`.
  pid_t spawn_keeper(const std::string& keeper, int status_w, int out_w) {
    int chan[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, chan), 0);
    channel_.emplace_back(chan[0]);
    std::string script = "enable -f " + shell_quote(SBSH_BUILTIN_PATH) +
                         " __sbsh || { echo cannot load the builtin; exit 90; }\n(\n" + keeper + "\n) &\nwait\n";
    std::vector<std::string> argv{"/bin/bash", "--noprofile", "--norc", "-c", script};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_w, 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);  // bash reports the kills
    posix_spawn_file_actions_adddup2(&fa, status_w, 3);
    posix_spawn_file_actions_adddup2(&fa, chan[1], 254);
    posix_spawnattr_t attr;  // a group of its own, for TearDown
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    pid_t pid = -1;
    auto args = exec_argv(argv);
    EXPECT_EQ(::posix_spawn(&pid, "/bin/bash", &fa, &attr, args.data(), environ), 0);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    ::close(chan[1]);
    if (pid > 0) groups_.push_back(pid);
    return pid;
  }

  void TearDown() override {
    // What a failing test left: the groups of the shells not reaped yet (their leader is
    // still this process's child), and the processes carrying its tag.
    for (pid_t g : groups_) ::kill(-g, SIGKILL);
    for (pid_t p : processes_with(tag())) ::kill(p, SIGKILL);
    for (pid_t g : groups_) ::waitpid(g, nullptr, 0);
    lifetime_test::TearDown();
  }

  // Whether bash `pid`, which waits for its keeper, has ended within `limit` (and is reaped).
  bool ends_within(pid_t pid, seconds limit) {
    int st;
    if (!wait_until([&] { return ::waitpid(pid, &st, WNOHANG) == pid; }, limit)) return false;
    std::erase(groups_, pid);  // its number may be another process's from now on
    return true;
  }

  std::vector<unique_fd> channel_;
  std::vector<pid_t> groups_;
};

TEST_F(keeper_test, NobodyToReadTheStatusStartsNothing) {
  int status[2], out[2];
  ASSERT_EQ(::pipe2(status, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  ::close(status[0]);  // no reader from the start
  pid_t bash = spawn_keeper("'__sbsh serve' keep; echo $?", status[1], out[1]);
  ::close(status[1]);
  ::close(out[1]);
  unique_fd out_r(out[0]);
  ASSERT_TRUE(ends_within(bash, seconds(20)));
  EXPECT_EQ(read_all(out_r.get()), std::to_string(SBSH_KEEPER_UNREAD) + "\n");
}

TEST_F(keeper_test, WhatItStartsAfterItsLastReaderWentEnds) {
  int status[2], out[2];
  ASSERT_EQ(::pipe2(status, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  std::string fifo = dir + "/tmp/pause";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // After "+", a pause with no child (a builtin read that times out), then a tree that ignores
  // SIGTERM, a setsid child included, and the wait sbshd's text ends with.
  std::string keeper = "'__sbsh serve' keep; echo keep $?; echo + >&3\nread -t 1 <>" + shell_quote(fifo) +
                       "\necho starting\nsetsid " + sleeper("k-setsid") + " & " + sleeper("k-child") +
                       " & wait\nexec </dev/null >/dev/null 2>&1\n'__sbsh serve' reap";
  pid_t bash = spawn_keeper(keeper, status[1], out[1]);
  ::close(status[1]);
  ::close(out[1]);
  unique_fd status_r(status[0]), out_r(out[0]);
  char plus[2] = {};
  ASSERT_EQ(::read(status_r.get(), plus, 2), 2);
  EXPECT_EQ(std::string(plus, 2), "+\n");
  status_r.reset();  // the last reader goes while the keeper waits, with no child
  EXPECT_TRUE(ends_within(bash, seconds(20))) << "the keeper did not end";
  EXPECT_EQ(read_all(out_r.get()), "keep 0\nstarting\n");
  EXPECT_TRUE(wait_until([&] { return processes_with(tag()).empty(); }, seconds(5)))
      << "left running: " << processes_with(tag()).size() << " processes started after the reader went";
}

// A wrapper nobody adopts ends, with its shell and everything the shell started: when its
// adoption timeout passes, at once when its adoption socket is removed, and at once when its
// sbshd went before the shell had finished starting (every later sbshd would refuse it). So
// does one that learnt of sbshd's end from an answer it could not deliver rather than from
// its control socket's end-of-file. A spare holds nothing worth keeping: it ends at once.
class orphan_test : public lifetime_test {
 protected:
  orphan_test() { start_in_setup = false; }

  struct orphan {
    std::vector<pid_t> pids;  // wrapper, shell, what the shell started
    bool looked = true;       // whether this process could see sbshd's ping wait (unanswered)
  };
  // `unanswered`: sbshd dies while its last ping waits, unread, for the wrapper, which was
  // stopped meanwhile: the wrapper then reads it and its answer fails, the first sign it gets
  // of sbshd's end.
  orphan make_orphan(const std::string& adopt_timeout, bool unanswered = false) {
    daemon_args = {"--adopt-timeout", adopt_timeout};
    if (unanswered) daemon_args.insert(daemon_args.end(), {"--health-interval", "2s"});
    start_daemon();
    orphan o;
    o.pids = start_escapees("o");
    o.pids.push_back(start_background("o"));
    auto st = session_pids("o");
    auto wrapper = static_cast<pid_t>(st.wrapper_pid);
    o.pids.push_back(wrapper);
    o.pids.push_back(static_cast<pid_t>(st.shell_pid));
    for (pid_t p : o.pids) EXPECT_TRUE(p > 0 && pid_alive(p)) << p;
    if (!unanswered) {
      kill_daemon();
      return o;
    }
    o.looked = unread_by(wrapper) >= 0;
    ::kill(wrapper, SIGSTOP);
    EXPECT_TRUE(!o.looked || wait_until([&] { return unread_by(wrapper) > 0; }, seconds(10))) << "no ping came";
    kill_daemon();
    ::kill(wrapper, SIGCONT);
    return o;
  }

  // How many bytes sbshd sent the wrapper `w` that it has not read yet (on its control
  // socket, fd 3); -1 when this process may not look (pidfd_getfd needs ptrace's permission).
  static int unread_by(pid_t w) {
    unique_fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, w, 0)));
    if (!pidfd) return -1;
    unique_fd ctl(static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd.get(), 3, 0)));
    int n = 0;
    return ctl && ::ioctl(ctl.get(), FIONREAD, &n) == 0 ? n : -1;
  }

  // The unclaimed spares of this test's sbshd.
  std::vector<pid_t> spares() const {
    std::string links = sock + ".d/";
    return processes_where([&](const std::string& line) {
      return line.starts_with("sbsh-wrapper ") && line.find(links) != std::string::npos &&
             line.find(" --spare ") != std::string::npos;
    });
  }

  // The link directories of shells under this test's socket.
  std::set<std::string> link_dirs() const {
    std::set<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(sock + ".d", ec)) out.insert(e.path().string());
    return out;
  }
};

TEST_F(orphan_test, AWrapperNotAdoptedInTimeEndsWithEverythingItsShellStarted) {
  auto o = make_orphan("1s");
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_TRUE(pid_alive(o.pids.back())) << "the session waits for adoption first";
  EXPECT_TRUE(wait_until([&] { return all_gone(o.pids); }, seconds(1 + 5)));
  for (pid_t p : o.pids) EXPECT_FALSE(pid_alive(p)) << "outlived the adoption timeout: " << p << " " << cmdline_of(p);
}

TEST_F(orphan_test, AWrapperWhoseLastAnswerToSbshdFailedEndsAfterTheTimeout) {
  auto o = make_orphan("3s", true);
  if (!o.looked) GTEST_SKIP() << "this process may not look at a wrapper's socket (pidfd_getfd)";
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_TRUE(pid_alive(o.pids.back())) << "the session waits for adoption first";
  EXPECT_TRUE(wait_until([&] { return all_gone(o.pids); }, seconds(3 + 10)));
  for (pid_t p : o.pids) EXPECT_FALSE(pid_alive(p)) << "outlived the adoption timeout: " << p << " " << cmdline_of(p);
}

// Removes a runtime directory as a logout does, while wrappers that leave may be deleting
// their own files in it (remove_all fails on an entry that goes as it walks).
void remove_runtime_dir(const std::string& path) {
  for (int i = 0; i < 500; ++i) {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (!std::filesystem::exists(path, ec)) return;
    std::this_thread::sleep_for(milliseconds(10));
  }
  ADD_FAILURE() << "cannot remove " << path;
}

// An orphan looks whether its adoption socket is still there every few seconds.
TEST_F(orphan_test, AWrapperWhoseAdoptionSocketWasRemovedEnds) {
  auto o = make_orphan("10m");
  remove_runtime_dir(dir + "/run");  // as a logout removes it
  EXPECT_TRUE(wait_until([&] { return all_gone(o.pids); }, seconds(15)));
  for (pid_t p : o.pids) EXPECT_FALSE(pid_alive(p)) << "outlived its runtime directory: " << p << " " << cmdline_of(p);
  ::mkdir((dir + "/run").c_str(), 0700);
}

TEST_F(orphan_test, AWrapperWhoseLastAnswerToSbshdFailedEndsWhenItsAdoptionSocketIsRemoved) {
  auto o = make_orphan("10m", true);
  if (!o.looked) GTEST_SKIP() << "this process may not look at a wrapper's socket (pidfd_getfd)";
  remove_runtime_dir(dir + "/run");
  EXPECT_TRUE(wait_until([&] { return all_gone(o.pids); }, seconds(15)));
  for (pid_t p : o.pids) EXPECT_FALSE(pid_alive(p)) << "outlived its runtime directory: " << p << " " << cmdline_of(p);
  ::mkdir((dir + "/run").c_str(), 0700);
}

TEST_F(orphan_test, SparesEndWithTheirSbshd) {
  daemon_args = {"--adopt-timeout", "10m", "--spare-wrappers", "3"};
  start_daemon();
  std::vector<pid_t> pids;
  ASSERT_TRUE(wait_until(
      [&] {
        pids = spares();
        return pids.size() == 3 && std::ranges::all_of(pids, [](pid_t p) { return child_pid(p, "bash") > 0; });
      },
      seconds(20)));
  for (pid_t p : std::vector<pid_t>(pids)) pids.push_back(child_pid(p, "bash"));
  kill_daemon();
  // Nobody would adopt them: they end at once, not after the adoption timeout.
  EXPECT_TRUE(wait_until([&] { return all_gone(pids); }, seconds(10)));
  for (pid_t p : pids) EXPECT_FALSE(pid_alive(p)) << "outlived its sbshd: " << p << " " << cmdline_of(p);
  EXPECT_TRUE(wait_until([&] { return link_dirs().empty(); }, seconds(5))) << link_dirs().size();
}

// sbshd asks its fork server for a spare and dies before the server starts it: the spare's
// first report to sbshd fails. This process is made a child subreaper, so that everything
// the killed sbshd left, the spare started after its end included, comes back to it and is
// seen, by pid, to end.
TEST_F(orphan_test, ASpareStartedAsItsSbshdDiedEnds) {
  daemon_args = {"--adopt-timeout", "10m"};
  start_daemon();
  pid_t server = 0, spare = 0;
  ASSERT_TRUE(wait_until(
      [&] {
        auto servers = fork_servers_of(daemon_pid);
        auto found = spares();
        if (servers.size() != 1 || found.size() != 1) return false;
        server = servers[0];
        spare = found[0];
        return true;
      },
      seconds(20)));
  // Orphans come to this process until the end of the test; then, whatever happened, the
  // server goes on and orphans go to init again.
  struct subreaper {
    pid_t server;
    explicit subreaper(pid_t s) : server(s) { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }
    subreaper(const subreaper&) = delete;
    subreaper& operator=(const subreaper&) = delete;
    ~subreaper() {
      if (server > 0) ::kill(server, SIGCONT);
      ::prctl(PR_SET_CHILD_SUBREAPER, 0);
    }
  } guard(server);
  auto before = link_dirs();
  ::kill(server, SIGSTOP);
  ::kill(spare, SIGKILL);
  // sbshd starts another spare a second later: it makes the spare's link directory, asks the
  // stopped server and waits for its answer, in poll() (its loop waits in epoll_wait()).
  auto in_poll = [&] {
    std::string call = proc_file(daemon_pid, "syscall");
    long nr = std::atol(call.c_str());
#ifdef SYS_poll
    if (nr == SYS_poll) return true;
#endif
    return nr == SYS_ppoll;
  };
  std::string next;
  ASSERT_TRUE(wait_until(
      [&] {
        for (const auto& d : link_dirs())
          if (!before.contains(d)) next = d;
        return !next.empty() && in_poll();
      },
      seconds(10)))
      << "sbshd did not ask for another spare";
  kill_daemon();
  ::kill(server, SIGCONT);
  guard.server = 0;  // once reaped below, its pid may be another process's
  // Everything the killed sbshd left is this process's child now, or will be once its parent
  // ends; a zombie is reaped once seen. Only a look that reaped none is the last: a child may
  // start (the server's spare) after the list of /proc was read and before its parent ends.
  std::map<pid_t, std::string> seen;
  std::vector<pid_t> live;
  auto none_left = [&] {
    live.clear();
    bool reaped = false;
    for (pid_t p : all_pids()) {
      auto st = stat_of(p);
      if (!st || st->ppid != ::getpid()) continue;
      seen.emplace(p, st->comm);
      if (st->state == 'Z') reaped = ::waitpid(p, nullptr, WNOHANG) == p || reaped;
      else live.push_back(p);
    }
    return live.empty() && !reaped;
  };
  bool ended = wait_until(none_left, seconds(15));
  std::string left;
  for (pid_t p : live) left += " " + std::to_string(p) + " (" + cmdline_of(p) + ")";
  EXPECT_TRUE(ended) << "outlived their sbshd:" << left;
  EXPECT_TRUE(std::ranges::any_of(seen, [&](const auto& e) {
    return e.first != server && e.first != spare && e.second == "sbsh-wrapper";
  })) << "the server started no spare after sbshd's end";
  EXPECT_FALSE(std::filesystem::exists(next)) << "the spare left its link directory " << next << "\n"
                                              << read_file(dir + "/sbshd.log");
  // What a failure left, by pid: this process's children, and theirs once they come back.
  for (int round = 0; round < 10 && !none_left(); ++round) {
    for (pid_t p : live) ::kill(p, SIGKILL);
    std::this_thread::sleep_for(milliseconds(100));
  }
}

TEST_F(orphan_test, AWrapperWhoseShellHadNotFinishedStartingEnds) {
  daemon_args = {"--adopt-timeout", "10m"};
  start_daemon();
  // Its init command is still running when sbshd goes: no sbshd will ever adopt the shell.
  auto r = sbsh({"session", "create", "h", "--init", sleeper("h-init")});
  ASSERT_EQ(r.code, 0) << r.err;
  pid_t init = pid_in("h-init");
  auto st = session_pids("h");
  std::vector<pid_t> pids{init, static_cast<pid_t>(st.wrapper_pid), static_cast<pid_t>(st.shell_pid)};
  for (pid_t p : pids) ASSERT_TRUE(p > 0 && pid_alive(p)) << p;
  kill_daemon();
  EXPECT_TRUE(wait_until([&] { return all_gone(pids); }, seconds(5)));
  for (pid_t p : pids) EXPECT_FALSE(pid_alive(p)) << "a half-started shell waited for adoption: " << cmdline_of(p);
}

// One sbshd per state directory: a second one, on another socket, is refused at start with
// the pid and socket of the first, and changes none of its files.
TEST_F(lifetime_test, ASecondSbshdOnTheSameStateDirectoryIsRefused) {
  ASSERT_EQ(exec("one", "true").code, 0);
  ASSERT_EQ(sbsh({"start", "-s", "one", "--", "exec -a " + tag() + " sleep 300"}).code, 0);
  auto snapshot = [&] {
    std::string all;
    for (const char* f : {"sessions/one.msgpack", "procs.msgpack"}) {
      struct stat st{};
      ::stat((state + "/" + f).c_str(), &st);
      all += read_file(state + "/" + f) + "|" + std::to_string(st.st_mtim.tv_sec) + "." +
             std::to_string(st.st_mtim.tv_nsec) + "|";
    }
    return all;
  };
  // Once the first sbshd has written what it knows of the process.
  ASSERT_TRUE(wait_until([&] { return read_file(state + "/procs.msgpack").find("running") != std::string::npos; },
                         seconds(20)));
  std::this_thread::sleep_for(milliseconds(200));
  std::string before = snapshot();
  ASSERT_NE(before.find("one"), std::string::npos);
  std::string other = dir + "/run/other.sock";
  std::string expect_pid = "pid " + std::to_string(daemon_pid);

  auto started = steady_clock::now();
  auto d = run({bin("sbshd"), "--socket", other}, nullptr, seconds(30));
  EXPECT_EQ(d.code, 1);
  EXPECT_NE(d.err.find(expect_pid), std::string::npos) << d.err;
  EXPECT_NE(d.err.find(sock), std::string::npos) << d.err;
  EXPECT_LT(steady_clock::now() - started, seconds(3)) << "refused at once, not after a wait";

  // The client that would start it says why, and exits 255.
  auto c = run({bin("sbsh"), "--socket", other, "exec", "-s", "one", "--", "echo ran"}, nullptr, seconds(30));
  EXPECT_EQ(c.code, 255);
  EXPECT_EQ(c.out, "");
  EXPECT_NE(c.err.find(expect_pid), std::string::npos) << c.err;
  EXPECT_NE(c.err.find(sock), std::string::npos) << c.err;

  EXPECT_EQ(snapshot(), before) << "the first sbshd's files were changed";
  EXPECT_FALSE(std::filesystem::exists(other + ".d"));
  EXPECT_EQ(exec("one", "echo still").out, "still\n");
  // In case it was not refused (a broken build): nothing of it is left.
  run({bin("sbsh"), "--socket", other, "--no-autostart", "shutdown"}, nullptr, seconds(30));
}

// An explicit socket's directory must exist: sbshd and the client create no directory
// outside the ones they own.
TEST_F(lifetime_test, AMissingSocketDirectoryIsAnErrorNotCreated) {
  std::string top = dir + "/nonexistent-root-dir";
  std::string own_state = dir + "/state2";  // the fixture's sbshd holds its own
  auto d = run({bin("sbshd"), "--socket", top + "/x/s.sock", "--state-dir", own_state}, nullptr, seconds(30));
  EXPECT_EQ(d.code, 1);
  EXPECT_NE(d.err.find(top + "/x does not exist"), std::string::npos) << d.err;
  EXPECT_FALSE(std::filesystem::exists(top));
  auto c = run({bin("sbsh"), "--socket", top + "/x/s.sock", "exec", "true"}, nullptr, seconds(30));
  EXPECT_EQ(c.code, 255);
  EXPECT_NE(c.err.find(top + "/x does not exist"), std::string::npos) << c.err;
  EXPECT_FALSE(std::filesystem::exists(top));
}

// A request that would wait for the command making it is refused at once, exit 255.
class deadlock_test : public lifetime_test {
 protected:
  // `sbsh` as a command in a session runs it.
  std::string inner(const std::string& args) const { return shell_quote(bin("sbsh")) + " --socket " + shell_quote(sock) + " " + args; }

  // Runs `command` in `session` with a timeout that ends a deadlock; returns the result and
  // how long it took.
  std::pair<run_result, milliseconds> timed(const std::string& session, const std::string& command) {
    auto t0 = steady_clock::now();
    auto r = sbsh({"exec", "-s", session, "-t", "20s", "--", command});
    return {r, std::chrono::duration_cast<milliseconds>(steady_clock::now() - t0)};
  }
};

TEST_F(deadlock_test, ACommandAskingItsOwnSessionIsRefusedAtOnce) {
  auto [r, took] = timed("x", inner("exec -s x true"));
  EXPECT_EQ(r.code, 255) << r.err;
  EXPECT_NE(r.err.find("wait for itself"), std::string::npos) << r.err;
  EXPECT_LT(took, seconds(5));
  // The same for a background start, which would run in the shell after the command.
  auto [s, took2] = timed("x", inner("start -s x true"));
  EXPECT_EQ(s.code, 255) << s.err;
  EXPECT_NE(s.err.find("wait for itself"), std::string::npos) << s.err;
  EXPECT_LT(took2, seconds(5));
}

TEST_F(deadlock_test, ACommandAskingItsOwnSessionThroughAnotherIsRefused) {
  auto [r, took] = timed("x", inner("exec -s y " + shell_quote(inner("exec -s x true"))));
  EXPECT_EQ(r.code, 255) << r.err;
  EXPECT_NE(r.err.find("session 'y'"), std::string::npos) << r.err;
  EXPECT_LT(took, seconds(5));
}

TEST_F(deadlock_test, RequestsThatWaitForNothingOfTheirOwnRun) {
  // Another session.
  auto r = exec("x", inner("exec -s y 'echo from y'"));
  EXPECT_EQ(r.out, "from y\n") << r.err;
  // A background job of an earlier command asks while another command runs: it waits for
  // that one, which does not wait for it.
  ASSERT_EQ(exec("x", "(sleep 0.3; " + inner("exec -s x 'echo later'") + " >\"$TMPDIR/later\" 2>&1) &").code, 0);
  ASSERT_EQ(exec("x", "sleep 1").code, 0);
  EXPECT_TRUE(wait_until([&] { return read_file(dir + "/tmp/later") == "later\n"; }, seconds(20)))
      << read_file(dir + "/tmp/later");
}

TEST_F(deadlock_test, RemovingItsOwnSessionFromInsideDoesNotHang) {
  auto [r, took] = timed("x", inner("session rm x"));
  EXPECT_LT(took, seconds(15)) << r.err;
  EXPECT_EQ(r.err.find("[test: timed out]"), std::string::npos);
  EXPECT_NE(sbsh({"session", "show", "x"}).code, 0) << "the session is gone";
}

}  // namespace sbsh::test::lifetime_tests
