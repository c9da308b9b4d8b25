// Sessions made from a snapshot copy of a directory (session create --snapshot), against a
// real sbshd, wrappers, bash and the copier (sbsh-wrapper --copy-tree).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "client/json.h"
#include "fixture.h"

namespace sbsh::test::snapshot_tests {

namespace fs = std::filesystem;

void write_file(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream(path, std::ios::binary) << text;
  ::chmod(path.c_str(), mode);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

char process_state(pid_t pid) {
  auto st = stat_of(pid);
  return st ? st->state : '?';
}

class snapshot_test : public daemon_test {
 protected:
  std::string src() const { return dir + "/src"; }
  std::string store() const { return state + "/snapshots"; }

  // A tree with what a project holds: text, binary bytes, an executable, a symbolic link,
  // hidden and nested files, and a read-only directory.
  void make_source() {
    fs::create_directories(src() + "/sub/deep");
    fs::create_directories(src() + "/ro");
    write_file(src() + "/a.txt", "hello\n");
    write_file(src() + "/bin", std::string("\0\1\2\xff\n", 5));
    write_file(src() + "/run.sh", "#!/bin/sh\necho ran\n", 0750);
    write_file(src() + "/.hidden", "hidden\n");
    write_file(src() + "/sub/deep/f", "deep\n");
    write_file(src() + "/ro/f", "read-only\n");
    ::chmod((src() + "/ro").c_str(), 0555);
    fs::create_symlink("a.txt", src() + "/link");
  }

  std::vector<std::string> store_entries() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(store(), ec)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
};

TEST_F(snapshot_test, ASessionMadeFromASnapshotWorksOnItsOwnCopy) {
  make_source();
  auto made = sbsh({"session", "create", "work", "--snapshot", src()});
  ASSERT_EQ(made.code, 0) << made.err;
  std::string copy = store() + "/work";
  // The copy is whole when create returns, before any command ran.
  EXPECT_EQ(read_file(copy + "/a.txt"), "hello\n");
  EXPECT_EQ(exec("work", "pwd").out, copy + "\n");
  auto r = exec("work", "cmp bin " + shell_quote(src() + "/bin") +
                            " && stat -c '%a %F' run.sh ro link && readlink link && cat .hidden sub/deep/f && ./run.sh");
  EXPECT_EQ(r.out, "750 regular file\n555 directory\n777 symbolic link\na.txt\nhidden\ndeep\nran\n") << r.err;

  // What the session changes stays in its copy.
  EXPECT_EQ(exec("work", "echo changed > a.txt && rm .hidden && mkdir new").code, 0);
  EXPECT_EQ(read_file(src() + "/a.txt"), "hello\n");
  EXPECT_TRUE(fs::exists(src() + "/.hidden"));
  EXPECT_FALSE(fs::exists(src() + "/new"));

  // Another session of the same source has a copy of its own, taken from the source.
  ASSERT_EQ(sbsh({"session", "create", "other", "--snapshot", src()}).code, 0);
  EXPECT_EQ(exec("other", "pwd; cat a.txt").out, store() + "/other\nhello\n");
  // Defining the session again the same way changes nothing: no new copy.
  ASSERT_EQ(sbsh({"session", "create", "work", "--snapshot", src()}).code, 0);
  EXPECT_EQ(exec("work", "cat a.txt").out, "changed\n");

  auto show = sbsh({"session", "show", "work"});
  EXPECT_NE(show.out.find("snapshot of " + src() + "\n"), std::string::npos) << show.out;
  auto json = sbsh({"session", "show", "work", "--json"});
  EXPECT_NE(json.out.find("\"snapshot\":\"" + src() + "\""), std::string::npos) << json.out;

  // A new shell, and a new sbshd, go on in the same copy with its changes.
  exec("work", "kill -9 $$");
  EXPECT_EQ(exec("work", "pwd; cat a.txt").out, copy + "\nchanged\n");
  stop_daemon();
  start_daemon();
  EXPECT_EQ(exec("work", "pwd; cat a.txt; ls -d new").out, copy + "\nchanged\nnew\n");

  // rm deletes the copy, read-only directory and all, and nothing else.
  ASSERT_EQ(sbsh({"session", "rm", "work"}).code, 0);
  EXPECT_FALSE(fs::exists(copy));
  EXPECT_EQ(store_entries(), std::vector<std::string>{"other"});
  EXPECT_EQ(read_file(src() + "/ro/f"), "read-only\n");
  // The name can be used again, with a fresh copy.
  ASSERT_EQ(sbsh({"session", "create", "work", "--snapshot", src()}).code, 0);
  EXPECT_EQ(exec("work", "cat a.txt").out, "hello\n");

  // A copy deleted behind sbshd's back is never replaced by another directory: the session
  // fails and says why.
  stop_daemon();
  std::string cmd = "rm -rf " + shell_quote(store() + "/other");
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  start_daemon();
  r = exec("other", "pwd");
  EXPECT_EQ(r.code, 255);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("cannot enter the session's copy of " + src() + " (" + store() + "/other)"), std::string::npos)
      << r.err;
}

TEST_F(snapshot_test, PathsThatAreNotUtf8AreShownWithTheirExactBytes) {
  // A session's directory, root and snapshot are bytes: one that is not UTF-8 is in the JSON
  // with U+FFFD in its text and its exact bytes at KEY_base64 beside it, in the listing and in
  // the definition alike, and kept exactly across a restart of sbshd.
  std::string latin = dir + "/caf\xe9";
  fs::create_directories(latin);
  write_file(latin + "/f", "latin\n");
  ASSERT_EQ(sbsh({"session", "create", "here", "-C", latin}).code, 0);
  ASSERT_EQ(sbsh({"session", "create", "copy", "--snapshot", latin}).code, 0);
  write_file(latin + "/key\xff", "k\n");
  ASSERT_EQ(sbsh({"session", "create", "keyed", "-C", latin, "--setup", "true", "--setup-key", "f", "--setup-key",
                  "key\xff"})
                .code,
            0);
  std::string b64 = client::base64(latin);
  for (int round = 0; round < 2; ++round) {
    auto ls = sbsh({"session", "ls", "--json"});
    ASSERT_EQ(ls.code, 0) << ls.err;
    for (const auto& s : nlohmann::json::parse(ls.out)) {
      if (s["name"] == "here") {
        EXPECT_EQ(s["cwd"], dir + "/caf\uFFFD") << ls.out;
        EXPECT_EQ(s["cwd_base64"], b64) << ls.out;
      } else if (s["name"] == "copy") {
        EXPECT_FALSE(s.contains("cwd_base64")) << ls.out;  // the copy's own path is UTF-8
      }
    }
    auto here = nlohmann::json::parse(sbsh({"session", "show", "here", "--json"}).out);
    EXPECT_EQ(here["definition"]["cwd_base64"], b64) << here.dump();
    auto copy = nlohmann::json::parse(sbsh({"session", "show", "copy", "--json"}).out);
    EXPECT_EQ(copy["definition"]["snapshot_base64"], b64) << copy.dump();
    EXPECT_FALSE(copy["definition"].contains("root_base64")) << copy.dump();
    // A list of names: each one's bytes beside it, null for those that are UTF-8.
    auto keyed = nlohmann::json::parse(sbsh({"session", "show", "keyed", "--json"}).out)["definition"];
    EXPECT_EQ(keyed["setup_keys"], nlohmann::json({"f", "key\uFFFD"})) << keyed.dump();
    EXPECT_EQ(keyed["setup_keys_base64"], nlohmann::json({nullptr, client::base64("key\xff")})) << keyed.dump();
    EXPECT_EQ(exec("here", "pwd; cat f").out, latin + "\nlatin\n");
    stop_daemon();
    start_daemon();
  }
}

TEST_F(snapshot_test, BadSnapshotsAreRefusedWithTheReasonAndLeaveNothingBehind) {
  make_source();
  write_file(dir + "/file", "x");
  fs::create_directories(state + "/inside");
  std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--snapshot", dir + "/missing"}, "cannot snapshot " + dir + "/missing: No such file or directory"},
      {{"--snapshot", dir + "/file"}, "cannot snapshot " + dir + "/file: not a directory"},
      {{"--snapshot", dir}, "it holds sbshd's state directory " + state + ", and so would hold the copy"},
      {{"--snapshot", state + "/inside"}, "it is inside sbshd's state directory"},
      {{"--snapshot", src(), "-C", "/tmp"}, "-C and --snapshot do not go together"},
  };
  // The copier's reason when the copy fails: a file even root may not read.
  if (::access("/proc/sys/net/ipv4/route/flush", F_OK) == 0)
    cases.push_back({{"--snapshot", "/proc/sys/net/ipv4/route"},
                     "cannot copy the snapshot: cannot read /proc/sys/net/ipv4/route/flush: Permission denied"});
  for (const auto& [extra, why] : cases) {
    std::vector<std::string> args{"session", "create", "x"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = sbsh(args);
    EXPECT_EQ(r.code, 255);
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  }
  // sbshd checks for clients other than the CLI too. The library takes a relative path from
  // its process's directory (sbshd refuses one: robustness_test).
  auto c = conn();
  client::session_spec spec;
  spec.name = "x";
  spec.snapshot = "no-such-dir";
  auto made = c.create_session(spec);
  ASSERT_FALSE(made);
  EXPECT_EQ(made.err().code, "bad_request");
  EXPECT_NE(made.err().message.find("cannot snapshot " + fs::current_path().string() + "/no-such-dir: No such file"),
            std::string::npos)
      << made.err().message;
  spec.snapshot = src();
  spec.cwd = "/tmp";
  made = c.create_session(spec);
  ASSERT_FALSE(made);
  EXPECT_NE(made.err().message.find("give either cwd or snapshot"), std::string::npos) << made.err().message;
  EXPECT_EQ(sbsh({"session", "show", "x"}).code, 255);
  EXPECT_EQ(store_entries(), std::vector<std::string>{});

  // Another definition for an existing session says what differs.
  fs::create_directories(dir + "/src2");
  ASSERT_EQ(sbsh({"session", "create", "y", "--snapshot", src()}).code, 0);
  auto r = sbsh({"session", "create", "y", "--snapshot", dir + "/src2"});
  EXPECT_NE(r.err.find("snapshot of " + src() + " (asked: " + dir + "/src2)"), std::string::npos) << r.err;
  r = sbsh({"session", "create", "y"});
  EXPECT_NE(r.err.find("snapshot of " + src() + " (asked: none)"), std::string::npos) << r.err;
}

// The copy is made by sbshd's --wrapper program (sbsh-wrapper --copy-tree). The one given
// here, `copier`, copies with the real one, then stops itself while the file `hold` exists:
// the test then acts while a copy is under way, its partial copy on disk. Anything else it
// is asked to do it hands to the real sbsh-wrapper.
TEST_F(snapshot_test, ACopyRunsOffTheLoopAndIsUndoneWhenNobodyWaitsForIt) {
  make_source();
  std::string real = shell_quote(bin("sbsh-wrapper"));
  std::string hold = dir + "/hold";
  fs::create_directories(dir + "/shim");
  write_file(dir + "/shim/copier",
             "#!/bin/sh\n[ \"$1\" = --copy-tree ] || exec " + real + " \"$@\"\n" + real +
                 " \"$@\" || exit\nif [ -e " + shell_quote(hold) + " ]; then kill -STOP $$; fi\n",
             0755);
  stop_daemon();
  daemon_args = {"--wrapper", dir + "/shim/copier"};
  start_daemon();
  auto stopped_copy = [&] {
    pid_t cp = 0;
    EXPECT_TRUE(wait_until([&] { return (cp = child_pid(daemon_pid, "copier")) > 0 && process_state(cp) == 'T'; },
                           std::chrono::seconds(30)));
    return cp;
  };

  write_file(hold, "");
  run_result first;
  std::thread t([&] { first = sbsh({"session", "create", "big", "--snapshot", src()}); });
  pid_t cp = stopped_copy();
  // sbshd serves everyone else meanwhile, and says why the session is not there yet.
  EXPECT_EQ(exec("default", "echo alive").out, "alive\n");
  auto r = exec("big", "true");
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("session 'big' is still being made from a snapshot of " + src()), std::string::npos) << r.err;
  for (auto other : {std::vector<std::string>{"--snapshot", dir + "/home"}, std::vector<std::string>{"-C", "/"}}) {
    std::vector<std::string> args{"session", "create", "big"};
    args.insert(args.end(), other.begin(), other.end());
    r = sbsh(args);
    EXPECT_NE(r.err.find("session 'big' is being made from a snapshot of " + src()), std::string::npos) << r.err;
  }
  EXPECT_EQ(sbsh({"session", "show", "big"}).code, 255);
  // The client that asked goes away (Ctrl-C): the copy is stopped and its files deleted.
  pid_t cli = child_pid(::getpid(), "sbsh");
  ASSERT_GT(cli, 0);
  ::kill(cli, SIGKILL);
  t.join();
  EXPECT_EQ(first.code, 128 + SIGKILL);
  EXPECT_TRUE(wait_until([&] { return !pid_alive(cp); }, std::chrono::seconds(20)));
  EXPECT_TRUE(wait_until([&] { return store_entries().empty(); }, std::chrono::seconds(20)));
  EXPECT_EQ(sbsh({"session", "show", "big"}).code, 255);

  // The reply waits for the copy.
  std::atomic<bool> returned = false;
  run_result second;
  t = std::thread([&] {
    second = sbsh({"session", "create", "big", "--snapshot", src()});
    returned = true;
  });
  cp = stopped_copy();
  EXPECT_FALSE(returned);
  fs::remove(hold);
  ::kill(cp, SIGCONT);
  t.join();
  EXPECT_EQ(second.code, 0) << second.err;
  EXPECT_EQ(exec("big", "cat a.txt").out, "hello\n");

  // A copy cut short by a crash of sbshd is deleted by the next one.
  write_file(hold, "");
  run_result third;
  t = std::thread([&] { third = sbsh({"session", "create", "crash", "--snapshot", src()}); });
  cp = stopped_copy();
  kill_daemon();
  t.join();
  EXPECT_EQ(third.code, 255);
  ::kill(cp, SIGKILL);  // the stopped copier outlived its sbshd
  auto entries = store_entries();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].rfind(".copy-crash-", 0), 0u) << entries[0];
  start_daemon();
  EXPECT_TRUE(wait_until([&] { return store_entries() == std::vector<std::string>{"big"}; }, std::chrono::seconds(20)));
  EXPECT_EQ(exec("big", "cat a.txt").out, "hello\n");
}

// A copy that completes just as its client goes away (`timeout 1 sbsh session create ...`):
// sbshd learns both at once, in either order, and makes no session of it. The copier has
// copied and waits, stopped; sbshd is stopped while the copier exits and the client is
// killed, so that both wait for the same turn of its loop.
TEST_F(snapshot_test, ACopyThatEndsAsItsClientGoesMakesNoSession) {
  make_source();
  std::string real = shell_quote(bin("sbsh-wrapper"));
  fs::create_directories(dir + "/shim");
  write_file(dir + "/shim/copier",
             "#!/bin/sh\n[ \"$1\" = --copy-tree ] || exec " + real + " \"$@\"\n" + real +
                 " \"$@\" || exit\nkill -STOP $$\n",
             0755);
  stop_daemon();
  daemon_args = {"--wrapper", dir + "/shim/copier"};
  daemon_log_level = "info";  // what it made and removed, in the log a failure shows
  start_daemon();
  for (int round = 0; round < 3; ++round) {
    std::string name = "gone" + std::to_string(round);
    run_result r;
    std::thread t([&] { r = sbsh({"session", "create", name, "--snapshot", src()}); });
    pid_t cp = 0;
    ASSERT_TRUE(wait_until([&] { return (cp = child_pid(daemon_pid, "copier")) > 0 && process_state(cp) == 'T'; },
                           std::chrono::seconds(30)));
    pid_t cli = child_pid(::getpid(), "sbsh");
    ASSERT_GT(cli, 0);
    ASSERT_EQ(::kill(daemon_pid, SIGSTOP), 0);
    ASSERT_TRUE(wait_until([&] { return process_state(daemon_pid) == 'T'; }, std::chrono::seconds(10)));
    ::kill(cp, SIGCONT);  // the copy is complete: the copier exits 0
    EXPECT_TRUE(wait_until([&] { return process_state(cp) == 'Z'; }, std::chrono::seconds(10)));
    ::kill(cli, SIGKILL);
    t.join();
    ::kill(daemon_pid, SIGCONT);
    EXPECT_EQ(r.code, 128 + SIGKILL);
    // Nothing of it is left: no session, no copy.
    EXPECT_TRUE(wait_until([&] { return store_entries().empty(); }, std::chrono::seconds(20)))
        << store_entries().size();
    auto show = sbsh({"session", "show", name});
    EXPECT_EQ(show.code, 255) << show.out << read_file(dir + "/sbshd.log");
    EXPECT_FALSE(listed(name).is_object()) << listed(name).dump();
  }
  // sbshd goes on making sessions for clients that wait.
  std::thread t([&] {
    pid_t cp = 0;
    wait_until([&] { return (cp = child_pid(daemon_pid, "copier")) > 0 && process_state(cp) == 'T'; },
               std::chrono::seconds(30));
    ::kill(cp, SIGCONT);
  });
  auto made = sbsh({"session", "create", "kept", "--snapshot", src()});
  t.join();
  EXPECT_EQ(made.code, 0) << made.err;
  EXPECT_EQ(exec("kept", "cat a.txt").out, "hello\n");
}

// sbshd's own paths too: a state directory whose name is not UTF-8 (a home in Latin-1) shows
// in a process's log and an environment's path with their bytes beside them.
class latin_state_test : public daemon_test {
 protected:
  latin_state_test() { start_in_setup = false; }
};

TEST_F(latin_state_test, SbshdsOwnPathsKeepTheirExactBytes) {
  state = dir + "/\xe9tat";
  ::setenv("SBSH_STATE_DIR", state.c_str(), 1);
  start_daemon();
  ASSERT_EQ(sbsh({"start", "--name", "p", "--", "echo hi"}).code, 0);
  ASSERT_EQ(sbsh({"wait", "p"}).code, 0);
  auto ps = sbsh({"ps", "-a", "--json"});
  ASSERT_EQ(ps.code, 0) << ps.err;
  auto procs = nlohmann::json::parse(ps.out)["processes"];
  ASSERT_EQ(procs.size(), 1u) << ps.out;
  std::string shown = dir + "/\uFFFDtat";
  std::string log = procs[0]["log"];
  ASSERT_EQ(log.rfind(shown, 0), 0u) << ps.out;
  std::string exact = state + log.substr(shown.size());
  EXPECT_EQ(procs[0]["log_base64"], client::base64(exact)) << ps.out;
  EXPECT_TRUE(std::filesystem::exists(exact)) << exact;
  ASSERT_EQ(sbsh({"session", "create", "e", "--setup", "true"}).code, 0);
  auto envs = nlohmann::json::parse(sbsh({"env", "ls", "--json"}).out);
  ASSERT_EQ(envs.size(), 1u);
  std::string path = envs[0]["path"];
  ASSERT_EQ(path.rfind(shown, 0), 0u) << envs.dump();
  EXPECT_EQ(envs[0]["path_base64"], client::base64(state + path.substr(shown.size()))) << envs.dump();
}

}  // namespace sbsh::test::snapshot_tests
