// Wrappers started through the fork server (daemon/fork_server.h): copies of one started
// wrapper, which share the pages its runtime wrote, and which are otherwise what a wrapper
// sbshd starts by exec is: sbshd's children with the same arguments on show, the same
// descriptors, signal mask and dispositions, limits and environment. A fork server that is
// killed is replaced; with SBSH_FORK_SERVER=0 sbshd starts every wrapper itself.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fixture.h"

namespace sbsh::test::fork_server_tests {

// kB of `key` (Rss, Pss, Shared_Dirty, ...) in the writable mappings of /proc/PID/smaps: its
// data, heap and stack. Its code is left out: shared by every process that runs the file, and
// dirty in the page cache for a while after a build wrote it.
long writable_kb(pid_t pid, const std::string& key) {
  std::istringstream lines(proc_file(pid, "smaps"));
  std::string line;
  bool writable = false;
  long kb = 0;
  while (std::getline(lines, line)) {
    size_t space = line.find(' ');
    if (space != std::string::npos && line.find('-') < space) writable = line.compare(space + 1, 2, "rw") == 0;
    else if (writable && line.rfind(key + ":", 0) == 0) kb += std::stol(line.substr(key.size() + 1));
  }
  return kb;
}

// What of a wrapper must not tell how it was started: each a line, with the parts that differ
// between any two wrappers (its directory, descriptors' inode numbers) left out.
std::map<std::string, std::string> traits_of(pid_t wrapper, pid_t daemon, const std::string& shells_dir) {
  std::map<std::string, std::string> t;
  auto st = stat_of(wrapper);
  t["parent is sbshd"] = st && st->ppid == daemon ? "yes" : "no";
  t["comm"] = proc_file(wrapper, "comm");
  std::string args = proc_file(wrapper, "cmdline");
  std::replace(args.begin(), args.end(), '\0', ' ');
  // --dir SOCKET.d/PID.N: sbshd's pid and the sequence number differ.
  if (size_t at = args.find(shells_dir); at != std::string::npos) args.replace(at, args.find(' ', at) - at, "DIR");
  t["cmdline"] = args;
  std::string env = proc_file(wrapper, "environ");
  std::vector<std::string> vars;
  for (size_t at = 0, nul; (nul = env.find('\0', at)) != std::string::npos; at = nul + 1)
    vars.push_back(env.substr(at, nul - at));
  std::sort(vars.begin(), vars.end());
  for (const auto& v : vars) t["environ"] += v + "\n";
  std::istringstream status(proc_file(wrapper, "status"));
  for (std::string line; std::getline(status, line);)
    for (const char* key : {"SigBlk:", "SigIgn:", "SigCgt:", "SigPnd:", "NoNewPrivs:", "CapEff:", "Uid:", "Gid:"})
      if (line.rfind(key, 0) == 0) t[key] = line;
  t["limits"] = proc_file(wrapper, "limits");
  std::vector<std::string> fds;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(wrapper) + "/fd", ec)) {
    std::string target = std::filesystem::read_symlink(e.path(), ec).string();
    if (size_t colon = target.find(":["); colon != std::string::npos && target.back() == ']' &&
                                          target.find_first_not_of("0123456789", colon + 2) == target.size() - 1)
      target.resize(colon);  // socket:[INODE], pipe:[INODE]
    fds.push_back(e.path().filename().string() + " " + target);
  }
  std::sort(fds.begin(), fds.end());
  for (const auto& f : fds) t["fds"] += f + "\n";
  return t;
}

class fork_server_test : public daemon_test {
 protected:
  // No spare: each session's wrapper is started for it, with its environment.
  void SetUp() override {
    daemon_args = {"--spare-wrappers", "0"};
    daemon_test::SetUp();
  }
  void TearDown() override {
    ::unsetenv("SBSH_FORK_SERVER");
    daemon_test::TearDown();
  }
  // A session's wrapper, idle once the session has run a command.
  pid_t idle_wrapper(const std::string& name) {
    auto r = exec(name, "echo \"$SBSH_SESSION ok\"");
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, name + " ok\n");
    return static_cast<pid_t>(session_pids(name).wrapper_pid);
  }
  std::string shells_dir() const { return sock + ".d/"; }
};

TEST_F(fork_server_test, AWrapperItStartsIsOneStartedByExecThatSharesItsStaticPages) {
  pid_t first = idle_wrapper("first");
  pid_t forked = idle_wrapper("s");
  auto servers = fork_servers_of(daemon_pid);
  ASSERT_EQ(servers.size(), 1u);
  // It shares with the server and the other wrappers the pages the runtime wrote before the
  // copy: part of its data counts in its proportional share at a fraction.
  for (pid_t w : {first, forked}) {
    EXPECT_GT(writable_kb(w, "Shared_Dirty"), 0) << w;
    EXPECT_LT(writable_kb(w, "Pss"), writable_kb(w, "Rss")) << w;
  }
  auto with_server = traits_of(forked, daemon_pid, shells_dir());
  // The fork server holds nothing of any session: only the descriptors it started with (0-2,
  // its socket) and its directory, where it returns after each copy.
  EXPECT_EQ(open_fds(servers[0]), 5u);

  // The same session from a wrapper sbshd starts by exec.
  stop_daemon();
  ::setenv("SBSH_FORK_SERVER", "0", 1);
  start_daemon();
  idle_wrapper("first");
  pid_t execed = idle_wrapper("s");
  EXPECT_TRUE(fork_servers_of(daemon_pid).empty());
  EXPECT_EQ(writable_kb(execed, "Shared_Dirty"), 0);
  auto by_exec = traits_of(execed, daemon_pid, shells_dir());
  for (const auto& [key, value] : by_exec) EXPECT_EQ(with_server[key], value) << key;
  EXPECT_EQ(with_server["parent is sbshd"], "yes");
  EXPECT_NE(with_server["cmdline"].find("sbsh-wrapper --dir DIR --adopt-timeout "), std::string::npos)
      << with_server["cmdline"];
}

TEST_F(fork_server_test, AKilledForkServerIsReplacedAndSessionsStillStart) {
  idle_wrapper("first");
  auto servers = fork_servers_of(daemon_pid);
  ASSERT_EQ(servers.size(), 1u);
  ASSERT_EQ(::kill(servers[0], SIGKILL), 0);
  ASSERT_TRUE(wait_until([&] { return !pid_alive(servers[0]); }, std::chrono::seconds(10)));
  pid_t w = idle_wrapper("after");
  auto now = fork_servers_of(daemon_pid);
  ASSERT_EQ(now.size(), 1u);
  EXPECT_NE(now[0], servers[0]);
  EXPECT_EQ(parent_of(w), daemon_pid);
  EXPECT_GT(writable_kb(w, "Shared_Dirty"), 0);  // a copy of the new server
  auto r = exec("after", "printf 'a\\nb'; exit 3");
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(r.out, "a\nb");
}

TEST_F(fork_server_test, SessionsOutlivingTheirWrapperAreStartedAgainThroughIt) {
  pid_t w = idle_wrapper("s");
  ASSERT_EQ(::kill(w, SIGKILL), 0);
  ASSERT_TRUE(wait_until([&] { return !pid_alive(w); }, std::chrono::seconds(10)));
  // The next command finds the session's shell gone: whatever it says, a new one serves the
  // command after it, a copy of the server like the first.
  (void)exec("s", "true");
  pid_t again = 0;
  ASSERT_TRUE(wait_until(
      [&] {
        auto r = exec("s", "echo again");
        if (r.code != 0 || r.out != "again\n") return false;
        again = static_cast<pid_t>(session_pids("s").wrapper_pid);
        return again != w && again > 0;
      },
      std::chrono::seconds(20)));
  EXPECT_GT(writable_kb(again, "Shared_Dirty"), 0);
}

}  // namespace sbsh::test::fork_server_tests
