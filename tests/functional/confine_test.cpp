// Sessions confined by the kernel against a real sbshd: session create --confine (Landlock,
// a PID namespace) and --no-network (a network namespace). A confined session reads and
// writes beneath its root and its private TMPDIR, runs the system's programs, and reaches
// nothing else, through a symlink or ".." either; it keeps its state as any session does; all
// it starts, a double-forked daemon included, ends with it. Skipped, with the reason, only
// where the kernel lacks the feature.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "common/confine.h"
#include "fixture.h"
#include "ipc/messages.h"

namespace sbsh::test::confine_tests {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Whether this process may make PID and network namespaces, as sbsh-wrapper does for a confined
// session: as root directly, else (or without CAP_SYS_ADMIN) in a user namespace. Empty: yes.
std::string namespaces_refused() {
  for (int flags : {CLONE_NEWPID | CLONE_NEWNET, CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET}) {
    pid_t child = ::fork();
    if (child == 0) ::_exit(::unshare(flags) == 0 ? 0 : 1);
    int st = 0;
    if (child > 0 && ::waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0) return "";
  }
  return "this system allows no PID and network namespaces to this user, even in a user namespace of its own";
}

class confine_test : public daemon_test {
 protected:
  void SetUp() override {
    std::string why;
    if (confine::landlock_abi(&why) == 0) GTEST_SKIP() << why;
    if (why = namespaces_refused(); !why.empty()) GTEST_SKIP() << why;
    daemon_test::SetUp();
    fs::create_directories(dir + "/root/sub");
    fs::create_directories(dir + "/home");
    root = fs::canonical(dir + "/root").string();
    secret = fs::canonical(dir + "/home").string() + "/secret";
    std::ofstream(root + "/inside") << "inside\n";
    std::ofstream(secret) << "secret\n";
    fs::create_symlink(secret, root + "/link-out");
  }

  // Starts a daemon in `session` that double-forks into a process session of its own, and
  // returns its pid as the host knows it (/proc is the host's: its stat's first field); 0 if
  // it did not start.
  pid_t start_daemon(const std::string& session) {
    auto r = exec(session, "(setsid bash -c 'read -r pid _ < /proc/self/stat; echo $pid > daemon.pid; exec sleep 1000' "
                           "</dev/null >/dev/null 2>&1 &); for i in $(seq 100); do [ -s daemon.pid ] && break; sleep 0.05; done");
    EXPECT_EQ(r.code, 0) << r.err;
    pid_t daemon = 0;
    std::ifstream(root + "/daemon.pid") >> daemon;
    return daemon;
  }

  std::string root, secret;
};

TEST_F(confine_test, AConfinedSessionReachesOnlyItsRootItsTmpdirAndTheSystem) {
  ASSERT_EQ(sbsh({"session", "create", "box", "--root", root, "--confine"}).code, 0);
  // Within: the root, its TMPDIR, the system's programs.
  auto r = exec("box", R"(cat inside && echo made > sub/new && cat sub/new && echo t > "$TMPDIR/t" && cat "$TMPDIR/t")");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "inside\nmade\nt\n");
  EXPECT_TRUE(fs::exists(root + "/sub/new"));
  // Without: a file outside, by its path, through a symlink, through "..".
  for (const std::string& path : {secret, std::string("link-out"), std::string("../home/secret")}) {
    r = exec("box", "cat " + shell_quote(path));
    EXPECT_NE(r.code, 0) << path;
    EXPECT_EQ(r.out, "") << path;
    EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << path << ": " << r.err;
  }
  // Nor may it write to /tmp outside its own, or list the filesystem's root.
  std::string probe = "/tmp/sbsh-confine-probe-" + std::to_string(::getpid());
  r = exec("box", "echo x > " + probe);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(probe));
  r = exec("box", "ls /");
  EXPECT_NE(r.code, 0);
  // Its state persists from command to command, as in any session.
  ASSERT_EQ(exec("box", "cd sub; X=kept; f() { echo fn; }").code, 0);
  r = exec("box", "echo \"$PWD $X\"; f");
  EXPECT_EQ(r.out, root + "/sub kept\nfn\n");
  // session show says what confines it, and gives the shell's pid as the host sees it.
  auto j = json::parse(sbsh({"session", "show", "box", "--json"}).out);
  const auto& c = j.at("definition").at("confinement");
  EXPECT_GE(c.at("landlock_abi").get<int>(), 1);
  EXPECT_EQ(c.at("namespaces"), json::array({"pid"}));
  EXPECT_EQ(c.at("rules").at(0).at("path"), root);
  auto shell = j.at("session").at("shell_pid").get<pid_t>();
  EXPECT_GT(shell, 1);
  EXPECT_EQ(::kill(shell, 0), 0);
  // Inside, the shell is the init of its own PID namespace.
  EXPECT_EQ(exec("box", "echo $$").out, "1\n");
}

TEST_F(confine_test, AConfinedSessionCannotReachSbshd) {
  // Through sbshd it could run commands in other sessions, or make an unconfined one.
  ASSERT_EQ(sbsh({"session", "create", "box", "--root", root, "--confine"}).code, 0);
  std::string py = "import socket\ns = socket.socket(socket.AF_UNIX)\ns.settimeout(10)\ns.connect(" +
                   json(sock).dump() +
                   ")\ndata = b''\ntry:\n    while True:\n        b = s.recv(4096)\n        if not b: break\n"
                   "        data += b\nexcept TimeoutError:\n    pass\n"
                   "print('refused' if b'permission_denied' in data else 'served')\n";
  auto r = exec("box", "/usr/bin/python3 -c " + shell_quote(py));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "refused\n");
  EXPECT_EQ(sbsh({"session", "ls"}).code, 0);  // sbshd serves its own clients as before
}

TEST_F(confine_test, AConfinedSessionCannotTakeOverAShellThroughItsAdoptionSocket) {
  // Each wrapper listens for the next sbshd's adopt request, which hands over its shell: from
  // a confined session, that would be another session's shell, or its own unconfined.
  ASSERT_EQ(sbsh({"session", "create", "plain"}).code, 0);
  ASSERT_EQ(exec("plain", "v=1").code, 0);
  ASSERT_EQ(sbsh({"session", "create", "box", "--root", root, "--confine"}).code, 0);
  std::vector<std::string> sockets;
  for (const auto& e : fs::directory_iterator(sock + ".d"))
    if (fs::exists(e.path() / "w")) sockets.push_back((e.path() / "w").string());
  ASSERT_GE(sockets.size(), 2u);
  std::string hex;
  for (unsigned char b : ipc::encode(ipc::msg::adopt{1})) hex += fmt::format("{:02x}", b);
  // Refused: closed at once, unread (a reset) or not (end of file).
  std::string py = "import socket, sys\nfor path in sys.argv[2:]:\n    s = socket.socket(socket.AF_UNIX)\n"
                   "    s.settimeout(10)\n    s.connect(path)\n    try:\n"
                   "        s.sendall(bytes.fromhex(sys.argv[1]))\n"
                   "        print('answered' if s.recv(4096) else 'refused')\n"
                   "    except (ConnectionResetError, BrokenPipeError):\n        print('refused')\n"
                   "    except TimeoutError:\n        print('no answer')\n";
  std::string cmd = "/usr/bin/python3 -c " + shell_quote(py) + " " + hex;
  for (const auto& w : sockets) cmd += " " + shell_quote(w);
  auto r = exec("box", cmd);
  ASSERT_EQ(r.code, 0) << r.err;
  std::string expected;
  for (size_t i = 0; i < sockets.size(); ++i) expected += "refused\n";
  EXPECT_EQ(r.out, expected);
  // Every session goes on under its sbshd.
  EXPECT_EQ(exec("plain", "echo $v").out, "1\n");
  EXPECT_EQ(exec("box", "echo $$").out, "1\n");
}

TEST_F(confine_test, ExtraPathsAreGrantedAsAsked) {
  fs::create_directories(dir + "/data");
  fs::create_directories(dir + "/out");
  std::ofstream(dir + "/data/d") << "data\n";
  ASSERT_EQ(sbsh({"session", "create", "box", "--root", root, "--confine", "--read-only", dir + "/data", "--allow-write",
                  dir + "/out"})
                .code,
            0);
  auto r = exec("box", "cat " + shell_quote(dir + "/data/d") + " && echo w > " + shell_quote(dir + "/out/w"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "data\n");
  EXPECT_TRUE(fs::exists(dir + "/out/w"));
  r = exec("box", "echo no > " + shell_quote(dir + "/data/no"));
  EXPECT_NE(r.code, 0);
  EXPECT_FALSE(fs::exists(dir + "/data/no"));
}

TEST_F(confine_test, AnExtraPathThatDoesNotExistIsRefusedAtCreation) {
  // As a missing -C DIR is: refused by create, with the option and the path, rather than
  // made and then failing every start of its shell.
  fs::create_directories(dir + "/data");
  for (const std::string& option : std::vector<std::string>{"--allow-read", "--allow-write", "--read-only"}) {
    SCOPED_TRACE(option);
    auto r = sbsh({"session", "create", "box", "--root", root, "--confine", "--read-only", dir + "/data", option,
                   dir + "/nonexistent"});
    EXPECT_EQ(r.code, 255);
    EXPECT_NE(r.err.find(option + " " + dir + "/nonexistent: No such file or directory"), std::string::npos) << r.err;
    EXPECT_NE(sbsh({"session", "show", "box"}).code, 0) << "the session was made";
  }
  auto r = sbsh({"session", "create", "box", "--root", root, "--confine", "--allow-read", dir + "/data"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(exec("box", "echo up").out, "up\n");
}

TEST_F(confine_test, FileRequestsFollowTheShellsRules) {
  // sbsh file reaches what the shell may reach beside the system's directories, with the same
  // rights: the root, TMPDIR and --allow-write read and write, --read-only only read.
  fs::create_directories(dir + "/data");
  fs::create_directories(dir + "/out");
  std::ofstream(dir + "/data/d") << "data\n";
  fs::create_symlink(secret, dir + "/data/link-out");
  ASSERT_EQ(sbsh({"session", "create", "box", "--root", root, "--confine", "--read-only", dir + "/data", "--allow-write",
                  dir + "/out"})
                .code,
            0);
  auto file = [this](std::vector<std::string> args, const std::string* in = nullptr) {
    args.insert(args.begin(), "file");
    args.insert(args.begin() + 2, {"-s", "box"});
    return sbsh(args, in);
  };
  auto r = file({"read", dir + "/data/d"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "data\n");
  r = file({"ls", dir + "/data"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(" d\n"), std::string::npos) << r.out;
  // Writes beneath the read-only directory are refused, and change nothing.
  std::string text = "w\n";
  for (auto args : std::vector<std::vector<std::string>>{{"write", dir + "/data/new"},
                                                         {"rm", dir + "/data/d"},
                                                         {"mkdir", dir + "/data/sub"},
                                                         {"mv", dir + "/data/d", "moved"},
                                                         {"mv", "inside", dir + "/data/inside"}}) {
    SCOPED_TRACE(args[0] + " " + args[1]);
    r = file(args, &text);
    EXPECT_EQ(r.code, 255);
    EXPECT_NE(r.err.find("which the session may only read"), std::string::npos) << r.err;
  }
  EXPECT_EQ(fs::directory_entry(dir + "/data/d").file_size(), 5u);
  EXPECT_FALSE(fs::exists(dir + "/data/new") || fs::exists(dir + "/data/sub") || fs::exists(root + "/moved"));
  EXPECT_TRUE(fs::exists(root + "/inside"));
  // --allow-write and TMPDIR are written, and a file moves between the session's directories.
  r = file({"write", dir + "/out/w"}, &text);
  ASSERT_EQ(r.code, 0) << r.err;
  r = file({"mv", dir + "/out/w", "w"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(exec("box", "cat w").out, "w\n");
  auto tmp = exec("box", R"(echo t > "$TMPDIR/t"; printf %s "$TMPDIR")");
  ASSERT_EQ(tmp.code, 0) << tmp.err;
  r = file({"read", tmp.out + "/t"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "t\n");
  // Nothing beyond the session's own directories: elsewhere, through a symlink in one of them,
  // nor the system's, which its shell may read but which are the host's, not the session's.
  for (const std::string& p : {secret, dir + "/data/link-out", std::string("/etc/hostname")}) {
    r = file({"read", p});
    EXPECT_EQ(r.code, 255) << p;
    EXPECT_EQ(r.out, "") << p;
    EXPECT_NE(r.err.find("outside"), std::string::npos) << p << ": " << r.err;
  }
}

TEST_F(confine_test, EverythingItStartedEndsWithTheSession) {
  ASSERT_EQ(sbsh({"session", "create", "box", "--root", root, "--confine"}).code, 0);
  pid_t daemon = start_daemon("box");
  ASSERT_GT(daemon, 1);
  ASSERT_EQ(::kill(daemon, 0), 0);
  ASSERT_EQ(sbsh({"session", "rm", "box"}).code, 0);
  EXPECT_TRUE(wait_until([&] { return ::kill(daemon, 0) != 0; }, std::chrono::seconds(10)));
  if (::kill(daemon, 0) == 0) ::kill(daemon, SIGKILL);
}

TEST_F(confine_test, NoNetworkCannotReachALoopbackServerOutside) {
  int srv = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(srv, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(srv, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(srv, 8), 0);
  ASSERT_EQ(::getsockname(srv, reinterpret_cast<sockaddr*>(&a), &len), 0);
  std::string connect = "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(ntohs(a.sin_port)) + " && echo connected";
  ASSERT_EQ(sbsh({"session", "create", "off", "--no-network"}).code, 0);
  auto r = exec("off", connect);
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(r.out, "");
  // Its own loopback works.
  r = exec("off", "ip -o link show lo 2>/dev/null || cat /sys/class/net/lo/operstate");
  EXPECT_EQ(r.code, 0) << r.err;
  // A session with the network, as every session has by default, connects.
  r = exec("on", connect);
  EXPECT_EQ(r.out, "connected\n") << r.err;
  ::close(srv);
}

TEST_F(confine_test, WhatCannotBeConfinedIsRefusedBeforeAnythingRuns) {
  auto r = sbsh({"session", "create", "box", "--confine"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--root DIR or --snapshot DIR"), std::string::npos) << r.err;
  r = sbsh({"session", "create", "box", "--root", root, "--allow-write", "/tmp"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("give --confine too"), std::string::npos) << r.err;
  EXPECT_NE(sbsh({"session", "show", "box"}).code, 0);
}

// Limits by a cgroup of the session's own (--memory, --pids, --cpu). Where sbshd has no cgroup v2
// with those controllers (a cgroup v1 host, a container without delegation), they are refused
// with the reason and nothing is made; elsewhere they are in force and end with the session.
class cgroup_test : public daemon_test {
 protected:
  // Creates `name` with `limit`: true when made; false, having checked the refusal, when this
  // host cannot keep it.
  bool create_limited(const std::string& name, const std::vector<std::string>& limit, const std::string& controller) {
    std::vector<std::string> args{"session", "create", name};
    args.insert(args.end(), limit.begin(), limit.end());
    auto r = sbsh(args);
    if (r.code == 0) return true;
    EXPECT_NE(r.err.find("cgroup"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(controller), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Delegate=yes"), std::string::npos) << r.err;  // what to do about it
    EXPECT_NE(sbsh({"session", "show", name}).code, 0) << "a refused session was made";
    refusal = r.err;
    return false;
  }

  static std::string read_file(const std::string& path) {
    std::ifstream f(path);
    std::string s;
    std::getline(f, s);
    return s;
  }

  std::string refusal;
};

TEST_F(cgroup_test, LimitsAreInForceOrRefusedWithTheReason) {
  struct limit {
    std::vector<std::string> args;
    std::string controller, file, value;
  };
  for (const auto& l : {limit{{"--memory", "64M"}, "memory", "memory.max", "67108864"},
                        limit{{"--pids", "50"}, "pids", "pids.max", "50"},
                        limit{{"--cpu", "0.5"}, "cpu", "cpu.max", "50000 100000"}}) {
    if (!create_limited("lim", l.args, l.controller)) continue;
    auto show = sbsh({"session", "show", "lim", "--json"});
    ASSERT_EQ(show.code, 0) << show.err;
    std::string cg = json::parse(show.out).at("definition").at("confinement").at("cgroup").get<std::string>();
    EXPECT_EQ(read_file(cg + "/" + l.file), l.value) << l.controller;
    // The shell is in it, and so is what it starts.
    auto r = exec("lim", "cat /proc/self/cgroup");
    EXPECT_NE(r.out.find(cg.substr(cg.rfind("/sbsh-"))), std::string::npos) << r.out;
    ASSERT_EQ(sbsh({"session", "rm", "lim"}).code, 0);
    EXPECT_TRUE(wait_until([&] { return !fs::exists(cg); }, std::chrono::seconds(10))) << cg;
  }
}

TEST_F(cgroup_test, AMemoryHogIsKilledAndTheResultSaysSo) {
  if (!create_limited("hog", {"--memory", "32M"}, "memory")) GTEST_SKIP() << refusal;
  auto r = sbsh({"exec", "-s", "hog", "--json", "--", "python3 -c 'b = bytearray(256 << 20); print(len(b))'"});
  auto j = json::parse(r.out);
  EXPECT_TRUE(j.at("oom_killed").get<bool>()) << r.out;
  EXPECT_NE(j.at("exit_code"), 0) << r.out;
  // The shell was not the one killed: it keeps its state and runs the next command.
  r = exec("hog", "echo still here");
  EXPECT_EQ(r.out, "still here\n") << r.err;
  EXPECT_FALSE(json::parse(sbsh({"exec", "-s", "hog", "--json", "--", "true"}).out).at("oom_killed").get<bool>());
  ASSERT_EQ(sbsh({"session", "rm", "hog"}).code, 0);
}

TEST_F(cgroup_test, BadLimitsAreRefusedWithWhatToGive) {
  for (const auto& [args, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--memory", "12Q"}, "not a memory size"},
           {{"--memory", "1K"}, "at least 4M"},
           {{"--cpu", "0.001"}, "from 0.01 to 1000"},
           {{"--cpu", "half"}, "not a number of CPUs"},
           {{"--pids", "0"}, "--pids"}}) {
    std::vector<std::string> argv{"session", "create", "bad"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = sbsh(argv);
    EXPECT_NE(r.code, 0) << args[0] << " " << args[1];
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
  EXPECT_NE(sbsh({"session", "show", "bad"}).code, 0);
}

}  // namespace sbsh::test::confine_tests
