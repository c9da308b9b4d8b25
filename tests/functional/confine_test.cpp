// Sessions confined by the kernel against a real sbshd: session create --confine (Landlock,
// a PID namespace) and --no-network (a network namespace). A confined session reads and
// writes beneath its root and its private TMPDIR, runs the system's programs, and reaches
// nothing else, through a symlink or ".." either; it keeps its state as any session does; all
// it starts, a double-forked daemon included, ends with it. Skipped, with the reason, only
// where the kernel lacks the feature.
#include <arpa/inet.h>
#include <pwd.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

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
    if (!confine::user_namespaces(&why)) GTEST_SKIP() << why;  // sbshd refuses --confine then
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
  // returns its pid as the host knows it (the session's /proc is its own: the host's tells
  // it by its command line, a sleep of a length no other process has); 0 if it did not start.
  pid_t start_daemon(const std::string& session) {
    std::string length = std::to_string(100000000 + ::getpid());
    auto r = exec(session, "(setsid bash -c 'echo started > daemon.pid; exec sleep " + length +
                               "' </dev/null >/dev/null 2>&1 &); for i in $(seq 100); do [ -s daemon.pid ] && break; "
                               "sleep 0.05; done");
    EXPECT_EQ(r.code, 0) << r.err;
    pid_t daemon = 0;
    wait_until([&] { return (daemon = host_pid_of({"sleep", length})) > 0; }, std::chrono::seconds(10));
    return daemon;
  }

  // The pid of the host's process whose command line is `argv`, or 0.
  static pid_t host_pid_of(const std::vector<std::string>& argv) {
    std::string want;
    for (const auto& a : argv) want += a + '\0';
    for (const auto& e : fs::directory_iterator("/proc")) {
      std::string name = e.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      if (read_file(e.path() / "cmdline") == want) return static_cast<pid_t>(std::stol(name));
    }
    return 0;
  }

  // The pid of this sbshd's confined spare (sbsh-wrapper --spare-confined, its directory
  // beneath this test's socket's), once one runs; 0 if none does within 20 s.
  pid_t confined_spare() const {
    pid_t found = 0;
    wait_until(
        [&] {
          for (const auto& e : fs::directory_iterator("/proc")) {
            std::string name = e.path().filename();
            if (name.find_first_not_of("0123456789") != std::string::npos) continue;
            // read_file: these processes come and go (a stage's short-lived helpers too).
            std::string line = read_file(e.path() / "cmdline");
            if (line.find(sock + ".d/") == std::string::npos || line.find("--spare-confined") == std::string::npos)
              continue;
            // Not its staged shell, a copy of it in a PID namespace of its own (two pids).
            std::istringstream status(read_file(e.path() / "status"));
            for (std::string l; std::getline(status, l);)
              if (l.starts_with("NSpid:") && l.find_first_of(" \t", l.find_first_not_of(" \t", 6)) == std::string::npos)
                found = static_cast<pid_t>(std::stol(name));
          }
          return found > 0;
        },
        std::chrono::seconds(20));
    return found;
  }

  // A TCP server on the host's loopback, and a command that says, in a session, which
  // interfaces it has, whether its own loopback is up (a UDP socket connects to 127.0.0.1 only
  // then) and whether it reaches the server.
  struct loopback_server {
    loopback_server() {
      fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof a;
      if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 8) != 0 ||
          ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        ADD_FAILURE() << "cannot listen on the loopback: " << std::strerror(errno);
      port = ntohs(a.sin_port);
    }
    ~loopback_server() { ::close(fd); }
    loopback_server(const loopback_server&) = delete;
    loopback_server& operator=(const loopback_server&) = delete;
    [[nodiscard]] std::string probe() const {
      return "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; "
             "{ exec 3<>/dev/udp/127.0.0.1/9 && echo 'loopback: up'; exec 3>&-; } 2>/dev/null; "
             "{ exec 3<>/dev/tcp/127.0.0.1/" +
             std::to_string(port) + " && echo 'host: connected'; exec 3>&-; } 2>/dev/null; true";
    }
    int fd = -1;
    int port = 0;
  };
  static constexpr const char* kOnlyItsOwnLoopback = "lo\nloopback: up\n";

  // What a confined shell is, as it sees it: its user and group maps, capabilities, seccomp
  // and no_new_privs, its pid and user, the mounts of its view with their options, its
  // environment, what it may read and write. Its session's name is NAME in it, so that two
  // sessions' shells started alike print the same.
  static constexpr const char* kProfile =
      "cat /proc/self/uid_map /proc/self/gid_map; grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status; "
      "echo $$ $(id -u) $(id -g); cat /proc/1/comm; ls /proc/$$/fd | sort -n | tr '\\n' ' '; echo; "
      "awk '{print $5, $6}' /proc/self/mountinfo | sed \"s|$SBSH_SESSION|NAME|g\" | sort; "
      "env | sed \"s|$SBSH_SESSION|NAME|g\" | grep -v -E '^(_|OLDPWD)=' | sort; "
      "cat inside; { cat ../home/secret; ls /; echo x > /etc/sbsh-probe; echo y > /usr/sbsh-probe; } 2>&1; "
      "echo made > \"made-$SBSH_SESSION\" && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"";

  std::string root, secret;
};

TEST_F(confine_test, AConfinedSessionReachesOnlyItsRootItsTmpdirAndTheSystem) {
  ASSERT_EQ(sbsh({"session", "create", "box", "--root", root, "--confine"}).code, 0);
  // Within: the root, its TMPDIR, the system's programs.
  auto r = exec("box", R"(cat inside && echo made > sub/new && cat sub/new && echo t > "$TMPDIR/t" && cat "$TMPDIR/t")");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "inside\nmade\nt\n");
  EXPECT_TRUE(fs::exists(root + "/sub/new"));
  // Without: a file outside, by its path, through a symlink, through "..": absent from its
  // view of the files.
  for (const std::string& path : {secret, std::string("link-out"), std::string("../home/secret")}) {
    r = exec("box", "cat " + shell_quote(path));
    EXPECT_NE(r.code, 0) << path;
    EXPECT_EQ(r.out, "") << path;
    EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << path << ": " << r.err;
  }
  // Its /tmp is its own: what it writes there never reaches the host's. Nor may it list the
  // filesystem's root.
  std::string probe = "/tmp/sbsh-confine-probe-" + std::to_string(::getpid());
  r = exec("box", "echo x > " + probe + " && cat " + probe);
  EXPECT_EQ(r.out, "x\n") << r.err;
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

TEST_F(confine_test, AConfinedCommandGetsATerminalOfItsOwn) {
  // The shell is the init of its PID namespace and nobody outside its user namespace: the
  // terminal sbshd made is still its controlling terminal, and the job's.
  ASSERT_EQ(sbsh({"session", "create", "box", "--root", root, "--confine"}).code, 0);
  std::string input = "typed\n";
  auto r = sbsh({"exec", "-s", "box", "--tty",
                 "tty; read -p 'say: ' said; python3 -c 'import os; print(os.tcgetpgrp(0) == os.getpgrp())'"},
                &input);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("/dev/pts/"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("True\r\n"), std::string::npos) << r.out;
  EXPECT_EQ(exec("box", "echo $said; tty").out, "typed\nnot a tty\n");
}

TEST_F(confine_test, AConfinedSessionCannotReachSbshd) {
  // Through sbshd it could run commands in other sessions, or make an unconfined one.
  ASSERT_EQ(sbsh({"session", "create", "box", "--root", root, "--confine"}).code, 0);
  std::string py = "import socket\ns = socket.socket(socket.AF_UNIX)\ns.settimeout(10)\ntry:\n    s.connect(" +
                   json(sock).dump() +
                   ")\nexcept OSError:\n    print('unreachable')\n    raise SystemExit(0)\ndata = b''\ntry:\n    while True:\n        b = s.recv(4096)\n        if not b: break\n"
                   "        data += b\nexcept TimeoutError:\n    pass\n"
                   "print('refused' if b'permission_denied' in data else 'served')\n";
  auto r = exec("box", "/usr/bin/python3 -c " + shell_quote(py));
  ASSERT_EQ(r.code, 0) << r.err;
  // Its socket is out of the session's view; were it in, sbshd would refuse the connection.
  EXPECT_EQ(r.out, "unreachable\n");
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
                   "    s.settimeout(10)\n    try:\n        s.connect(path)\n    except OSError:\n"
                   "        print('refused')\n        continue\n    try:\n"
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

// A script of system calls a confined shell must not be able to make, each printed with
// its outcome: "ok" or the error's name.
constexpr const char* kProbe = R"PY(import ctypes, errno, os, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return 'ok' if r >= 0 else errno.errorcode[ctypes.get_errno()]
what = sys.argv[1]
if what == 'bpf':  # BPF_MAP_CREATE of a one-entry array
    attr = (ctypes.c_uint32 * 32)(2, 4, 4, 1)
    print('bpf', call(321, 0, ctypes.addressof(attr), 128))
elif what == 'pidfd_getfd':  # the shell's stdin, through a pidfd of the shell
    fd = libc.syscall(ctypes.c_long(434), ctypes.c_long(os.getppid()), ctypes.c_long(0))
    print('pidfd_getfd', call(438, fd, 0, 0) if fd >= 0 else 'no pidfd')
elif what == 'ptrace':  # PTRACE_ATTACH to a child of its own
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    print('ptrace', call(101, 16, pid, 0, 0))
    os.kill(pid, 9)
elif what == 'process_vm_readv':  # a word of the shell's memory
    buf = ctypes.create_string_buffer(8)
    local = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)
    remote = (ctypes.c_void_p * 2)(0x400000, 8)
    print('process_vm_readv', call(310, os.getppid(), ctypes.addressof(local), 1, ctypes.addressof(remote), 1, 0))
elif what == 'unshare_user':
    print('unshare_user', call(272, 0x10000000))
elif what == 'connect':
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(sys.argv[2].replace('@', '\0', 1) if sys.argv[2].startswith('@') else sys.argv[2])
        print('connected')
    except OSError as e:
        print(errno.errorcode[e.errno])
)PY";

TEST_F(confine_test, AConfinedShellHoldsNoPrivilege) {
  ASSERT_EQ(sbsh({"session", "create", "box", "--root", root, "--confine", "--no-network"}).code, 0);
  // No capability now nor after an execve, not even of a set-user-ID program.
  auto r = exec("box", "grep -E '^(Cap[a-zA-Z]+|NoNewPrivs|Seccomp):' /proc/self/status");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* line : {"CapInh:\t0000000000000000\n", "CapPrm:\t0000000000000000\n", "CapEff:\t0000000000000000\n",
                           "CapBnd:\t0000000000000000\n", "CapAmb:\t0000000000000000\n", "NoNewPrivs:\t1\n",
                           "Seccomp:\t2\n"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << " not in\n" << r.out;
  // As root, sbshd maps the shell's root to nobody; unprivileged, its own user to itself.
  r = exec("box", "cat /proc/self/uid_map");
  std::string outside = ::geteuid() == 0 ? "65534" : std::to_string(::geteuid());
  std::string inside = ::geteuid() == 0 ? "0" : outside;
  std::istringstream map(r.out);
  std::string a, b, n;
  map >> a >> b >> n;
  EXPECT_EQ(a + " " + b + " " + n, inside + " " + outside + " 1") << r.out;
  // What the tester did as root: each refused, and the host unchanged.
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  for (const std::string& cmd : {std::string("hostname sbsh-probe"), std::string("mknod kmsg c 1 11"),
                                 std::string("echo probe > /dev/kmsg"), std::string("mount -t tmpfs none /tmp"),
                                 std::string("cat /etc/shadow")}) {
    if (cmd == "cat /etc/shadow" && !fs::exists("/etc/shadow")) continue;
    r = exec("box", cmd);
    EXPECT_NE(r.code, 0) << cmd << ": " << r.out;
    EXPECT_EQ(r.out, "") << cmd;
  }
  char after[256] = {};
  ::gethostname(after, sizeof after - 1);
  EXPECT_STREQ(host, after);
  EXPECT_FALSE(fs::exists(root + "/kmsg"));
  std::ofstream(root + "/probe.py") << kProbe;
  r = exec("box", "python3 probe.py bpf");
  EXPECT_EQ(r.out, "bpf EPERM\n") << r.err;
}

TEST_F(confine_test, AConfinedShellCannotTraceNorTakeDescriptors) {
  // Through ptrace, pidfd_getfd or another process's memory, a command could take the shell's
  // channel and forge results; a new user namespace would give it capabilities again.
  ASSERT_EQ(sbsh({"session", "create", "box", "--root", root, "--confine"}).code, 0);
  std::ofstream(root + "/probe.py") << kProbe;
  for (const char* what : {"ptrace", "pidfd_getfd", "process_vm_readv", "unshare_user"}) {
    auto r = exec("box", std::string("python3 probe.py ") + what);
    EXPECT_EQ(r.out, std::string(what) + " EPERM\n") << r.err;
  }
  // The same calls succeed in a plain session of the same user: the refusals are the
  // confinement's.
  ASSERT_EQ(sbsh({"session", "create", "plain", "--root", root}).code, 0);
  auto r = exec("plain", "python3 probe.py pidfd_getfd");
  EXPECT_EQ(r.out, "pidfd_getfd ok\n") << r.err;
}

TEST_F(confine_test, AConfinedShellSeesOnlyItsOwnProcesses) {
  ASSERT_EQ(sbsh({"session", "create", "box", "--root", root, "--confine"}).code, 0);
  auto r = exec("box", "cat /proc/1/comm; read -r pid _ < /proc/self/stat; echo $pid; echo $$");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string comm, self, shell;
  lines >> comm >> self >> shell;
  EXPECT_EQ(comm, "bash");
  EXPECT_EQ(shell, "1");
  EXPECT_LT(std::stol(self), 100) << "a pid of the host's: " << self;
  // Every process /proc lists is the session's: sbshd's and this test's are not there, nor
  // is their environment.
  r = exec("box", "for p in /proc/[0-9]*; do cat $p/comm; done | sort -u");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("sbshd"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("functional_test"), std::string::npos) << r.out;
  for (pid_t host : {daemon_pid, ::getpid()}) {
    r = exec("box", fmt::format("cat /proc/{}/environ /proc/{}/comm", host, host));
    EXPECT_NE(r.code, 0);
    EXPECT_EQ(r.out, "") << host;
  }
}

// A UNIX socket the test listens on, at `path` ('@' first: abstract).
int listen_unix(const std::string& path) {
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.data(), path.size());
  if (path[0] == '@') a.sun_path[0] = '\0';
  auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(s, 8) != 0) return -1;
  return s;
}

TEST_F(confine_test, AConfinedShellCannotReachTheHostsUnixSockets) {
  // A host program's socket in a temporary directory (as docker's, an ssh agent's or a
  // D-Bus's would be), and an abstract one.
  fs::create_directories(dir + "/agent");
  std::string path = dir + "/agent/agent.sock";
  std::string abstract = "@sbsh-confine-test-" + std::to_string(::getpid());
  int s1 = listen_unix(path), s2 = listen_unix(abstract);
  ASSERT_GE(s1, 0);
  ASSERT_GE(s2, 0);
  ::setenv("SSH_AUTH_SOCK", path.c_str(), 1);  // the client's environment, as a user's has it
  ::setenv("DBUS_SESSION_BUS_ADDRESS", ("unix:path=" + path).c_str(), 1);
  ASSERT_EQ(sbsh({"session", "create", "box", "--root", root, "--confine"}).code, 0);
  ASSERT_EQ(sbsh({"session", "create", "off", "--root", root, "--confine", "--no-network"}).code, 0);
  ASSERT_EQ(sbsh({"session", "create", "plain", "--root", root}).code, 0);
  ::unsetenv("SSH_AUTH_SOCK");
  ::unsetenv("DBUS_SESSION_BUS_ADDRESS");
  std::ofstream(root + "/probe.py") << kProbe;
  for (std::string session : {"box", "off"}) {
    SCOPED_TRACE(session);
    auto r = exec(session, "python3 probe.py connect " + shell_quote(path));
    EXPECT_EQ(r.out, "ENOENT\n") << r.err;
    r = exec(session, "python3 probe.py connect " + abstract);
    EXPECT_NE(r.out, "connected\n") << r.err;
    EXPECT_NE(r.out, "") << r.err;
    r = exec(session, "echo ${SSH_AUTH_SOCK-unset} ${DBUS_SESSION_BUS_ADDRESS-unset}");
    EXPECT_EQ(r.out, "unset unset\n");
  }
  // A plain session reaches both and has the variables: what the confined ones lack is the
  // confinement's doing.
  EXPECT_EQ(exec("plain", "python3 probe.py connect " + shell_quote(path)).out, "connected\n");
  EXPECT_EQ(exec("plain", "python3 probe.py connect " + abstract).out, "connected\n");
  EXPECT_EQ(exec("plain", "echo $SSH_AUTH_SOCK").out, path + "\n");
  ::close(s1);
  ::close(s2);
}

TEST_F(confine_test, TheSessionsFilesKeepTheirOwner) {
  // What the shell makes in its root is owned outside as the root's files are (idmapped as
  // root); it may change what sbshd's file requests wrote there, and write to /dev/stdout.
  ASSERT_EQ(sbsh({"session", "create", "box", "--root", root, "--confine"}).code, 0);
  std::string text = "written\n";
  ASSERT_EQ(sbsh({"file", "write", "-s", "box", "by-request"}, &text).code, 0);
  auto r = exec("box", "echo more >> by-request && echo made > made && echo out > /dev/stdout && "
                       "echo tmp > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "out\ntmp\n");
  struct stat st{};
  ASSERT_EQ(::stat((root + "/made").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid());
  EXPECT_EQ(read_file(root + "/by-request"), "written\nmore\n");
}

// The same confinement under an unprivileged sbshd: a whole sbshd, and its clients, run as
// nobody (needs root to start them so); its shell maps nobody to itself.
class confine_user_test : public confine_test {
 protected:
  confine_user_test() { start_in_setup = false; }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to run sbshd as another user";
    confine_test::SetUp();
    if (IsSkipped()) return;
    for (const auto& e : fs::recursive_directory_iterator(dir)) ASSERT_EQ(::lchown(e.path().c_str(), 65534, 65534), 0);
    ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
    programs = programs_for_others(dir);
    auto r = run(as_nobody({programs + "/sbshd", "--socket", sock, "--state-dir", state}));
    ASSERT_EQ(r.code, 0) << r.err;
    started = true;
  }
  void TearDown() override {
    if (started) run(as_nobody({programs + "/sbsh", "--no-autostart", "shutdown"}));
    confine_test::TearDown();
  }
  static std::vector<std::string> as_nobody(std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"/usr/bin/setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "--"});
    return argv;
  }
  run_result client(std::vector<std::string> args) {
    args.insert(args.begin(), {programs + "/sbsh", "--no-autostart"});
    return run(as_nobody(std::move(args)));
  }
  run_result in(const std::string& session, const std::string& command) {
    return client({"exec", "-s", session, "--", command});
  }
  bool started = false;
  std::string programs;  // where nobody may run them (programs_for_others)
};

TEST_F(confine_user_test, AnUnprivilegedSbshdConfinesAsWell) {
  fs::create_directories(dir + "/agent");
  std::string path = dir + "/agent/agent.sock";
  int s = listen_unix(path);
  ASSERT_GE(s, 0);
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);  // its own user's: only the view keeps it out
  ASSERT_EQ(client({"session", "create", "box", "--root", root, "--confine", "--no-network"}).code, 0);
  auto r = in("box", "grep -E '^Cap(Eff|Prm|Bnd):' /proc/self/status; cat /proc/1/comm; echo $$");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nbash\n1\n");
  r = in("box", "cat /proc/self/uid_map");
  std::istringstream map(r.out);
  std::string a, b, n;
  map >> a >> b >> n;
  EXPECT_EQ(a + " " + b + " " + n, "65534 65534 1") << r.out;
  std::ofstream(root + "/probe.py") << kProbe;
  ASSERT_EQ(::chown((root + "/probe.py").c_str(), 65534, 65534), 0);
  EXPECT_EQ(in("box", "python3 probe.py connect " + shell_quote(path)).out, "ENOENT\n");
  EXPECT_EQ(in("box", "python3 probe.py pidfd_getfd").out, "pidfd_getfd EPERM\n");
  EXPECT_EQ(in("box", "python3 probe.py bpf").out, "bpf EPERM\n");
  r = in("box", "for p in /proc/[0-9]*; do cat $p/comm; done | sort -u");
  EXPECT_EQ(r.out.find("sbshd"), std::string::npos) << r.out;
  r = in("box", "echo made > made && echo out > /dev/stdout");
  EXPECT_EQ(r.out, "out\n") << r.err;
  struct stat st{};
  ASSERT_EQ(::stat((root + "/made").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  ::close(s);
}

TEST_F(confine_user_test, AConfinedCommandOfAnUnprivilegedSbshdGetsATerminal) {
  // The terminal comes from the shell's own devpts, which an unprivileged sbshd reaches
  // through the shell's root: it owns the shell's user namespace.
  ASSERT_EQ(client({"session", "create", "box", "--root", root, "--confine"}).code, 0);
  auto r = client({"exec", "-s", "box", "--tty", "tty; stty size"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("/dev/pts/"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("24 80\r\n"), std::string::npos) << r.out;
  EXPECT_EQ(in("box", "tty").out, "not a tty\n");
}

TEST_F(confine_user_test, AConfinedSpareServesAsAShellStartedForItsSession) {
  ASSERT_EQ(client({"session", "create", "first", "--root", root, "--confine"}).code, 0);
  auto fresh = in("first", kProfile);
  ASSERT_EQ(fresh.code, 0) << fresh.err;
  pid_t spare = confined_spare();
  ASSERT_GT(spare, 0) << "no confined spare started after a confined session";
  ASSERT_EQ(client({"session", "create", "second", "--root", root, "--confine"}).code, 0);
  auto staged = in("second", kProfile);
  ASSERT_EQ(staged.code, 0) << staged.err;
  EXPECT_EQ(staged.out, fresh.out);
  auto show = json::parse(client({"session", "show", "second", "--json"}).out);
  EXPECT_EQ(show.at("session").at("wrapper_pid").get<pid_t>(), spare) << "the spare did not serve the session";
  struct stat st {};
  ASSERT_EQ(::stat((root + "/made-second").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  // The next spare serves a --no-network session: only its own loopback, up.
  spare = confined_spare();
  ASSERT_GT(spare, 0);
  loopback_server host;
  ASSERT_EQ(client({"session", "create", "net", "--root", root, "--confine", "--no-network"}).code, 0);
  EXPECT_EQ(in("net", host.probe()).out, kOnlyItsOwnLoopback);
  show = json::parse(client({"session", "show", "net", "--json"}).out);
  EXPECT_EQ(show.at("session").at("wrapper_pid").get<pid_t>(), spare) << "the spare did not serve the session";
}

// sbshd --confine-user: as root, the confined shell is that user outside, never root.
class confine_as_test : public confine_test {
 protected:
  confine_as_test() { daemon_args = {"--confine-user", "daemon"}; }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "--confine-user applies only when sbshd runs as root";
    if (::getpwnam("daemon") == nullptr) GTEST_SKIP() << "this system has no user 'daemon'";
    confine_test::SetUp();
  }
};

TEST_F(confine_as_test, TheShellIsTheNamedUserOutside) {
  const passwd* pw = ::getpwnam("daemon");
  ASSERT_NE(pw, nullptr);
  uid_t uid = pw->pw_uid;
  ASSERT_EQ(sbsh({"session", "create", "box", "--root", root, "--confine"}).code, 0);
  auto r = exec("box", "cat /proc/self/uid_map; grep CapEff /proc/self/status; echo made > made");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream map(r.out);
  std::string a, b, n;
  map >> a >> b >> n;
  EXPECT_EQ(a + " " + b + " " + n, "0 " + std::to_string(uid) + " 1") << r.out;
  EXPECT_NE(r.out.find("CapEff:\t0000000000000000"), std::string::npos) << r.out;
  // The shell's own processes run as that user on the host.
  pid_t shell = json::parse(sbsh({"session", "show", "box", "--json"}).out).at("session").at("shell_pid").get<pid_t>();
  struct stat st{};
  ASSERT_EQ(::stat(fmt::format("/proc/{}", shell).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, uid);
  // Root is refused: the shell would own root's files.
  auto refused = run({bin("sbshd"), "--confine-user", "root", "--socket", dir + "/other.sock", "--state-dir",
                      dir + "/other-state", "--foreground"});
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("name an unprivileged user"), std::string::npos) << refused.err;
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

// A confined spare (sbsh-wrapper --spare-confined) is kept once a confined session has
// started; the next confined session's shell is finished from its stage. It is what a shell
// started for its session is: the same view, user, capabilities, filter and environment.
TEST_F(confine_test, AConfinedSpareServesAsAShellStartedForItsSession) {
  ASSERT_EQ(sbsh({"session", "create", "first", "--root", root, "--confine"}).code, 0);
  auto fresh = exec("first", kProfile);
  ASSERT_EQ(fresh.code, 0) << fresh.err;
  EXPECT_NE(fresh.out.find("CapEff:\t0000000000000000\n"), std::string::npos) << fresh.out;
  EXPECT_NE(fresh.out.find("Seccomp:\t2\n"), std::string::npos) << fresh.out;
  pid_t spare = confined_spare();
  ASSERT_GT(spare, 0) << "no confined spare started after a confined session";
  ASSERT_EQ(sbsh({"session", "create", "second", "--root", root, "--confine"}).code, 0);
  auto staged = exec("second", kProfile);
  ASSERT_EQ(staged.code, 0) << staged.err;
  EXPECT_EQ(staged.out, fresh.out);
  auto status = session_pids("second");
  EXPECT_EQ(status.wrapper_pid, spare) << "the spare did not serve the session";
  struct stat st {};
  ASSERT_EQ(::stat((root + "/made-second").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid());
  // Its processes are the shell's own: nothing of the stage is left in its PID namespace.
  EXPECT_EQ(exec("second", "ls -d /proc/[0-9]* | wc -l").out, exec("first", "ls -d /proc/[0-9]* | wc -l").out);
}

TEST_F(confine_test, WhatAStageCannotGiveStartsTheShellAnew) {
  // An own path that is a system directory would hide the part of the view the stage built;
  // limits and a network namespace are not staged: each is started as without a spare.
  ASSERT_EQ(sbsh({"session", "create", "first", "--root", root, "--confine"}).code, 0);
  ASSERT_GT(confined_spare(), 0);
  ASSERT_EQ(sbsh(
                {"session", "create", "etc", "--root", root, "--confine", "--allow-write", root, "--read-only", "/etc"})
                .code,
            0);
  auto r = exec("etc", "head -c0 /etc/hostname && echo read; { echo x > /etc/sbsh-probe; } 2>&1; echo $$");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("read\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Read-only file system"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists("/etc/sbsh-probe"));
  ASSERT_GT(confined_spare(), 0);
  ASSERT_EQ(sbsh({"session", "create", "lim", "--root", root, "--confine", "--limit", "nofile=512"}).code, 0);
  EXPECT_EQ(exec("lim", "ulimit -n; echo $$").out, "512\n1\n");
}

// A spare's stage makes a network namespace ahead: a --no-network session is served by the
// spare, and its shell has only its own loopback, up, and no way to the host's.
TEST_F(confine_test, AConfinedSpareServesANoNetworkSession) {
  ASSERT_EQ(sbsh({"session", "create", "first", "--root", root, "--confine"}).code, 0);
  ASSERT_EQ(exec("first", "true").code, 0);
  pid_t spare = confined_spare();
  ASSERT_GT(spare, 0);
  loopback_server host;
  ASSERT_EQ(sbsh({"session", "create", "net", "--root", root, "--confine", "--no-network"}).code, 0);
  EXPECT_EQ(exec("net", host.probe()).out, kOnlyItsOwnLoopback);
  EXPECT_EQ(session_pids("net").wrapper_pid, spare) << "the spare did not serve the session";
  // The session with the network, served by the next spare, still reaches the host's.
  ASSERT_GT(confined_spare(), 0);
  ASSERT_EQ(sbsh({"session", "create", "on", "--root", root, "--confine"}).code, 0);
  EXPECT_NE(exec("on", host.probe()).out.find("host: connected\n"), std::string::npos);
}

TEST_F(confine_test, AStageThatEndedStartsTheShellAnew) {
  ASSERT_EQ(sbsh({"session", "create", "first", "--root", root, "--confine"}).code, 0);
  auto fresh = exec("first", kProfile);
  ASSERT_EQ(fresh.code, 0) << fresh.err;
  pid_t spare = confined_spare();
  ASSERT_GT(spare, 0);
  // The staged shell, the spare's child, dies unseen by sbshd: its wrapper starts the shell
  // anew on the claim, confined as any other.
  pid_t staged = 0;
  ASSERT_TRUE(wait_until(
      [&] {
        std::ifstream f("/proc/" + std::to_string(spare) + "/task/" + std::to_string(spare) + "/children");
        return static_cast<bool>(f >> staged) && staged > 0;
      },
      std::chrono::seconds(10)));
  ASSERT_EQ(::kill(staged, SIGKILL), 0);
  ASSERT_TRUE(wait_until([&] { return !pid_alive(staged); }, std::chrono::seconds(5)));
  ASSERT_EQ(sbsh({"session", "create", "second", "--root", root, "--confine"}).code, 0);
  auto anew = exec("second", kProfile);
  ASSERT_EQ(anew.code, 0) << anew.err;
  EXPECT_EQ(anew.out, fresh.out);
  EXPECT_EQ(session_pids("second").wrapper_pid, spare);
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

// A background process of a confined session starts, logs and ends as in any session: its
// pipes reach it as descriptors, not through sbshd's /proc, which is not in the view.
TEST_F(confine_test, ABackgroundProcessRunsInAConfinedSession) {
  ASSERT_EQ(sbsh({"session", "create", "box", "--root", root, "--confine"}).code, 0);
  auto r = sbsh({"start", "-s", "box", "--", "echo out; echo err >&2; echo made > made.txt; exit 3"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::string id = trim(r.out);
  EXPECT_EQ(sbsh({"wait", "-t", "20s", id}).code, 3);
  EXPECT_EQ(sbsh({"logs", "--stdout", id}).out, "out\n");
  EXPECT_EQ(sbsh({"logs", "--stderr", id}).err, "err\n");  // to stderr, as it was written
  std::ifstream f(root + "/made.txt");
  std::string line;
  std::getline(f, line);
  EXPECT_EQ(line, "made");
}

// The setup of a confined session runs as its shell does: under its Landlock rules, in a PID
// namespace of its own, with read and write on its environment only; the session then reads
// and runs what it built, and cannot change it.
TEST_F(confine_test, ASetupRunsUnderItsSessionsConfinement) {
  std::ofstream(root + "/requirements.txt") << "tool\n";
  std::string probe = "/tmp/sbsh-setup-probe-" + std::to_string(::getpid());
  std::string setup =
      "cat " + shell_quote(secret) + " && echo LEAKED; echo x > " + shell_quote(probe) +
      " && echo WROTE; echo $$ > \"$SBSH_ENV/pid\"; mkdir -p \"$SBSH_ENV/bin\" && "
      "printf '#!/bin/sh\\necho tool ran\\n' > \"$SBSH_ENV/bin/tool\" && chmod +x \"$SBSH_ENV/bin/tool\"";
  auto r = sbsh(
      {"session", "create", "box", "--root", root, "--confine", "--setup", setup, "--setup-key", "requirements.txt"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  // The secret is not in its view; what it writes in /tmp goes to a /tmp of its own.
  EXPECT_EQ(r.out, "WROTE\n");
  EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(probe));
  if (fs::exists(probe)) fs::remove(probe);
  r = exec("box", R"(cat "$SBSH_ENV/pid" && PATH="$SBSH_ENV/bin:$PATH" && tool)");
  EXPECT_EQ(r.out, "1\ntool ran\n") << r.err;  // the setup was the init of its PID namespace
  r = exec("box", "echo no > \"$SBSH_ENV/bin/tool\"");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("Read-only file system"), std::string::npos) << r.err;  // bound read-only in its view
  // A restart starts with the same rules.
  ASSERT_EQ(sbsh({"session", "restart", "box"}).code, 0);
  EXPECT_EQ(exec("box", "\"$SBSH_ENV/bin/tool\"").out, "tool ran\n");
  // The same setup for an unconfined session is another environment, built unconfined.
  r = sbsh({"session", "create", "plain", "-C", root, "--setup", setup, "--setup-key", "requirements.txt"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "secret\nLEAKED\nWROTE\n");
  fs::remove(probe);
  EXPECT_NE(trim(exec("plain", "echo $SBSH_ENV").out), trim(exec("box", "echo $SBSH_ENV").out));
}

// The README's examples with --confine: a venv from a wheel made here, installed offline by
// pip inside the confinement, and a node_modules by npm ci --offline.
TEST_F(confine_test, TheReadmesEnvironmentExamplesWorkConfined) {
  fs::create_directories(root + "/wheels");
  auto made = make_demo_wheel(root + "/wheels/demo-1.0-py3-none-any.whl");
  ASSERT_EQ(made.code, 0) << made.err;
  std::ofstream(root + "/requirements.txt") << "demo==1.0\n";
  std::string venv_setup =
      "/usr/bin/python3 -m venv \"$SBSH_ENV/venv\" && PIP_DISABLE_PIP_VERSION_CHECK=1 \"$SBSH_ENV/venv/bin/pip\" "
      "install --quiet --no-index --find-links wheels -r requirements.txt";
  auto r = sbsh({"session", "create", "py", "--root", root, "--confine", "--setup", venv_setup, "--setup-key",
                 "requirements.txt", "--init", "source \"$SBSH_ENV/venv/bin/activate\""});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::string env = trim(exec("py", "echo $SBSH_ENV").out);
  r = exec("py", "python -c 'import demo, sys; print(demo.__version__, sys.prefix)'");
  EXPECT_EQ(r.out, "1.0 " + env + "/venv\n") << r.err;

  auto npm = run({"/bin/sh", "-c", "command -v npm"});
  ASSERT_EQ(npm.code, 0) << "npm is needed (scripts/deps.sh --test installs it)";
  std::string web = root + "/web";
  fs::create_directories(web + "/demo");
  std::ofstream(web + "/demo/package.json") << R"({"name": "demo", "version": "1.0.0", "main": "index.js"})";
  std::ofstream(web + "/demo/index.js") << "module.exports = 'demo 1.0.0';\n";
  std::ofstream(web + "/package.json")
      << R"({"name": "web", "version": "1.0.0", "dependencies": {"demo": "file:demo-1.0.0.tgz"}})";
  auto packed = run({"/bin/sh", "-c",
                     "cd " + shell_quote(web) +
                         " && npm pack --silent ./demo >/dev/null && npm install --offline "
                         "--package-lock-only --ignore-scripts --no-audit --no-fund --silent"});
  ASSERT_EQ(packed.code, 0) << packed.out << packed.err;
  // npm's cache is in $HOME, which a confined setup may not write: it goes to TMPDIR.
  std::string npm_setup =
      "cp package.json package-lock.json demo-1.0.0.tgz \"$SBSH_ENV/\" && cd \"$SBSH_ENV\" && "
      "npm ci --offline --cache \"$TMPDIR/npm\" --ignore-scripts --no-audit --no-fund --silent";
  r = sbsh({"session", "create", "web", "--root", root, "-C", web, "--confine", "--setup", npm_setup, "--setup-key",
            "package-lock.json", "--init", "export NODE_PATH=\"$SBSH_ENV/node_modules\""});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  r = exec("web", "node -e 'console.log(require(\"demo\"))'");
  EXPECT_EQ(r.out, "demo 1.0.0\n") << r.err;
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
