// sbsh through a dial command (--dial, --host ssh://, connect_options::dial_command): the
// bytes travel through a program's stdin and stdout to `sbsh dial-stdio` and on to a real
// sbshd, with output and input in frames.
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "fixture.h"
#include "ipc/frame.h"
#include "ipc/protocol.h"

namespace sbsh::test::remote_tests {

class remote_test : public daemon_test {
 protected:
  // The far end as a dial command reaches it (here the same host, through a pipe pair).
  std::string far_end() const { return shell_quote(bin("sbsh")) + " -S " + shell_quote(sock) + " --no-autostart dial-stdio"; }
  run_result dial(const std::vector<std::string>& args, const std::string* in = nullptr) {
    std::vector<std::string> argv{bin("sbsh"), "--dial", far_end()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, in);
  }
  client::connection dial_conn(std::vector<std::string> argv = {}) {
    client::connect_options o;
    o.dial_command = argv.empty() ? std::vector<std::string>{bin("sbsh"), "-S", sock, "--no-autostart", "dial-stdio"}
                                  : std::move(argv);
    auto c = client::connection::connect(o);
    EXPECT_TRUE(c.ok()) << c.err().message;
    return std::move(*c);
  }
};

TEST_F(remote_test, TheCliThroughADialKeepsStateBytesAndExitCodes) {
  auto r = dial({"exec", "-s", "far", "cd /tmp && export V=kept && f() { echo fn; }"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = dial({"exec", "-s", "far", "echo \"$PWD $V $(f)\"; printf 'a\\0b\\377' >&2; exit_code() { return 3; }; exit_code"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(r.out, "/tmp kept fn\n");
  EXPECT_EQ(r.err, std::string("a\0b\377", 4));

  // stdin and output larger than every buffer on the way, in both directions at once.
  std::string in;
  for (int i = 0; i < 300000; ++i) in += std::to_string(i) + "\n";
  r = dial({"exec", "-s", "far", "cat"}, &in);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.out == in) << "got " << r.out.size() << " bytes of " << in.size();

  r = dial({"exec", "-s", "far", "-t", "300ms", "sleep 30"});
  EXPECT_EQ(r.code, 124);
  r = dial({"exec", "-s", "far", "--json", "echo hi"});
  EXPECT_NE(r.out.find("\"stdout\":\"hi\\n\""), std::string::npos) << r.out;
  // The same session as a local client sees.
  EXPECT_EQ(exec("far", "echo $V").out, "kept\n");
}

TEST_F(remote_test, AHostUrlRunsSshWithTheFarSbsh) {
  // A stand-in for ssh that records its arguments and runs the far command line as sshd
  // would: through a shell, on "the far host" (this one).
  std::string fake = dir + "/fakebin";
  ASSERT_EQ(::mkdir(fake.c_str(), 0700), 0);
  std::string log = dir + "/ssh-args";
  {
    std::ofstream f(fake + "/ssh");
    f << "#!/bin/sh\nprintf '%s\\n' \"$@\" > " << shell_quote(log) << "\n"
      << "while [ \"$1\" != -- ]; do shift; done; shift 2\nexec sh -c \"$*\"\n";
  }
  ASSERT_EQ(::chmod((fake + "/ssh").c_str(), 0700), 0);
  std::string bindir = bin("sbsh").substr(0, bin("sbsh").rfind('/'));
  std::string path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "/usr/bin:/bin";
  std::vector<std::string> argv{"/usr/bin/env", "PATH=" + fake + ":" + bindir + ":" + path, bin("sbsh"),
                                "-H", "ssh://alice@far.example:2222", "-S", sock, "--no-autostart",
                                "exec", "-s", "viassh", "echo $SBSH_SESSION"};
  auto r = run(argv);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "viassh\n");
  EXPECT_EQ(read_file(log), "-T\n-o\nBatchMode=yes\n-l\nalice\n-p\n2222\n--\nfar.example\nsbsh\n-S\n" +
                            shell_quote(sock) + "\n--no-autostart\ndial-stdio\n");

  // SBSH_HOST says the same; --dial given here wins over it.
  argv = {"/usr/bin/env", "PATH=" + fake + ":" + bindir + ":" + path, "SBSH_HOST=ssh://far.example", bin("sbsh"),
          "-S", sock, "exec", "-s", "viassh", "echo again"};
  r = run(argv);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "again\n");
  EXPECT_EQ(read_file(log), "-T\n-o\nBatchMode=yes\n--\nfar.example\nsbsh\n-S\n" + shell_quote(sock) + "\ndial-stdio\n");
  argv = {"/usr/bin/env", "SBSH_HOST=ssh://nowhere.invalid", bin("sbsh"), "--dial", far_end(), "exec", "-s", "viassh", "echo dial"};
  r = run(argv);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "dial\n");
}

// Stand-ins for podman, docker and kubectl that record their arguments and run, on "the
// container" (this host), the command their exec would run there.
class engine_test : public remote_test {
 protected:
  void SetUp() override {
    remote_test::SetUp();
    fake = dir + "/fakebin";
    ASSERT_EQ(::mkdir(fake.c_str(), 0700), 0);
    for (const char* engine : {"podman", "docker"})
      write_script(engine, "[ \"$1 $2\" = 'exec -i' ] || exit 99\nshift 3\nexec \"$@\"\n");
    write_script("kubectl", "while [ \"$1\" != -- ]; do shift; done\nshift\nexec \"$@\"\n");
  }
  void write_script(const std::string& name, const std::string& body) {
    std::string log = dir + "/" + name + "-args";
    {
      std::ofstream f(fake + "/" + name);
      f << "#!/bin/sh\nprintf '%s\\n' \"$@\" > " << shell_quote(log) << "\n" << body;
    }
    ASSERT_EQ(::chmod((fake + "/" + name).c_str(), 0700), 0);
  }
  std::string path_env() const {
    std::string bindir = bin("sbsh").substr(0, bin("sbsh").rfind('/'));
    const char* path = std::getenv("PATH");
    return "PATH=" + fake + ":" + bindir + ":" + (path != nullptr ? path : "/usr/bin:/bin");
  }
  run_result via(const std::string& url, const std::vector<std::string>& args) {
    std::vector<std::string> argv{"/usr/bin/env", path_env(), bin("sbsh"), "-H", url, "-S", sock, "--no-autostart"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv);
  }
  std::string args_of(const std::string& engine) { return read_file(dir + "/" + engine + "-args"); }
  std::string fake;
};

TEST_F(engine_test, PodmanAndDockerUrlsRunTheEnginesExecWithTheFarSbsh) {
  for (std::string engine : {"podman", "docker"}) {
    std::string session = "in" + engine;
    auto r = via(engine + "://sandbox-1", {"exec", "-s", session, "cd /tmp && export V=$SBSH_SESSION"});
    ASSERT_EQ(r.code, 0) << engine << ": " << r.err;
    EXPECT_EQ(args_of(engine), "exec\n-i\nsandbox-1\nsbsh\n-S\n" + sock + "\n--no-autostart\ndial-stdio\n");
    // A second call, a second exec: the same shell, its state kept.
    r = via(engine + "://sandbox-1/", {"exec", "-s", session, "echo $PWD $V; (exit 4)"});
    EXPECT_EQ(r.code, 4) << r.err;
    EXPECT_EQ(r.out, "/tmp " + session + "\n");
    EXPECT_EQ(exec(session, "echo $V").out, session + "\n");
  }
  // Without -S and --no-autostart, the far sbsh is left to its own defaults; SBSH_HOST says
  // the same as -H.
  auto r = run({"/usr/bin/env", path_env(), "SBSH_SOCKET=" + sock, "SBSH_HOST=docker://0123abcd", bin("sbsh"), "exec",
                "-s", "indocker", "echo $V"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "indocker\n");
  EXPECT_EQ(args_of("docker"), "exec\n-i\n0123abcd\nsbsh\ndial-stdio\n");

  // shutdown through the engine waits for the connection to close, not for a pid, which
  // would be the container's.
  r = via("podman://sandbox-1", {"shutdown"});
  EXPECT_EQ(r.code, 0) << r.err;
  int st = -1;
  EXPECT_TRUE(wait_until([&] { return ::waitpid(daemon_pid, &st, WNOHANG) == daemon_pid; }, std::chrono::seconds(5)));
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  daemon_pid = -1;
}

TEST_F(engine_test, KubectlUrlsNameTheNamespacePodAndContainer) {
  auto r = via("kubectl://agents/sandbox-7f9c.x/sbshd", {"exec", "-s", "pod", "export K=kept"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(args_of("kubectl"), "exec\n-i\n-n\nagents\n-c\nsbshd\nsandbox-7f9c.x\n--\nsbsh\n-S\n" + sock +
                                    "\n--no-autostart\ndial-stdio\n");
  r = via("kubectl://sandbox-7f9c.x", {"exec", "-s", "pod", "echo $K"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "kept\n");
  EXPECT_EQ(args_of("kubectl"), "exec\n-i\nsandbox-7f9c.x\n--\nsbsh\n-S\n" + sock + "\n--no-autostart\ndial-stdio\n");
  r = via("kubectl://agents/sandbox", {"exec", "-s", "pod", "true"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(args_of("kubectl"),
            "exec\n-i\n-n\nagents\nsandbox\n--\nsbsh\n-S\n" + sock + "\n--no-autostart\ndial-stdio\n");
  r = via("kubectl:///sandbox/sbshd", {"exec", "-s", "pod", "true"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(args_of("kubectl"),
            "exec\n-i\n-c\nsbshd\nsandbox\n--\nsbsh\n-S\n" + sock + "\n--no-autostart\ndial-stdio\n");
}

TEST_F(engine_test, TheLibrariesAndMcpTakeTheSameUrls) {
  // C++: the argv, then a connection through it (the fake engine is found on PATH).
  auto argv = client::host_dial_command("podman://box", sock, false);
  ASSERT_TRUE(argv.ok()) << argv.err().message;
  EXPECT_EQ(*argv, (std::vector<std::string>{"podman", "exec", "-i", "box", "sbsh", "-S", sock, "--no-autostart",
                                             "dial-stdio"}));
  auto ssh = client::host_dial_command("ssh://h");
  ASSERT_TRUE(ssh.ok());
  EXPECT_EQ(ssh->front(), "ssh");
  client::connect_options o;
  o.dial_command = {"/usr/bin/env", path_env()};  // the fake engine first on its PATH
  o.dial_command.insert(o.dial_command.end(), argv->begin(), argv->end());
  auto c = client::connection::connect(o);
  ASSERT_TRUE(c.ok()) << c.err().message;
  EXPECT_TRUE(c->remote());
  client::exec_options e;
  e.session = "lib";
  e.command = "export L=1; echo $SBSH_SESSION";
  auto r = c->exec(e);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->stdout_data, "lib\n");

  // sbsh mcp with -H: a tool call runs through the engine.
  std::string in =
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})"
      "\n"
      R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
      "\n"
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"session":"lib","command":"echo via-mcp $L"}}})"
      "\n";
  // stdin stays open until the call's answer is out: at its end, mcp cancels what runs.
  std::string out = dir + "/mcp.out";
  auto m = run({"/bin/sh", "-c",
                "{ cat; until grep -q '\"id\":2' " + shell_quote(out) + "; do sleep 0.05; done; } | /usr/bin/env " +
                    shell_quote(path_env()) + " " + shell_quote(bin("sbsh")) + " -H kubectl://ns/box -S " +
                    shell_quote(sock) + " --no-autostart mcp > " + shell_quote(out)},
               &in, std::chrono::seconds(60));
  EXPECT_EQ(m.code, 0) << m.err;
  EXPECT_NE(read_file(out).find("via-mcp 1"), std::string::npos) << read_file(out);
  EXPECT_EQ(args_of("kubectl"), "exec\n-i\n-n\nns\nbox\n--\nsbsh\n-S\n" + sock + "\n--no-autostart\ndial-stdio\n");
  // A bad URL stops mcp before it serves anything.
  m = run({bin("sbsh"), "-H", "podman://-x", "mcp"}, &in);
  EXPECT_EQ(m.code, 255);
  EXPECT_NE(m.err.find("invalid host 'podman://-x'"), std::string::npos) << m.err;
  EXPECT_EQ(m.out, "");
}

TEST_F(engine_test, BadContainerAndPodUrlsAreRefusedWithAReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"podman://", "not named"},
      {"docker:///", "not named"},
      {"podman://-it", "letter or digit"},
      {"docker://a b", "letter or digit"},
      {"podman://box/path", "path"},
      {"docker://.box", "letter or digit"},
      {"kubectl://", "pod is not named"},
      {"kubectl://ns//", "pod is not named"},
      {"kubectl:///pod", "namespace is empty"},
      {"kubectl://a/b/c/d", "too many"},
      {"kubectl://ns/pod//", "container is empty"},
      {"kubectl://Pod", "pod's name"},
      {"kubectl://-n/pod", "namespace"},
      {"kubectl://ns/pod/Main", "container's name"},
      {"kubectl://ns/pod./c", "pod's name"},
      {"kubectl://ns.x/pod", "namespace"},
      {"lxc://box", "podman://CONTAINER"},
      {"podman:box", "podman://CONTAINER"},
  };
  for (const auto& [url, why] : cases) {
    auto r = run({bin("sbsh"), "-H", url, "exec", "true"});
    EXPECT_EQ(r.code, 255) << url;
    EXPECT_NE(r.err.find(fmt::format("invalid host '{}'", url)), std::string::npos) << url << ": " << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << url << ": " << r.err;
  }
  std::string long_ns(64, 'a');
  auto c = client::host_dial_command("kubectl://" + long_ns + "/pod");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.err().code, "usage");
  EXPECT_TRUE(client::host_dial_command("kubectl://" + std::string(63, 'a') + "/pod").ok());
  EXPECT_FALSE(client::host_dial_command("podman://" + std::string(256, 'a')).ok());
}

TEST_F(remote_test, BadHostsAndConflictingOptionsAreRefusedWithAReason) {
  for (const char* url : {"host", "http://host", "ssh://", "ssh://@host", "ssh://host:", "ssh://host:0",
                          "ssh://host:70000", "ssh://host/path", "ssh://-oProxyCommand=x", "ssh://a b",
                          "ssh://[::1", "ssh://u;rm@host"}) {
    auto r = run({bin("sbsh"), "-H", url, "exec", "true"});
    EXPECT_EQ(r.code, 255) << url;
    EXPECT_NE(r.err.find("invalid host"), std::string::npos) << url << ": " << r.err;
  }
  auto r = run({bin("sbsh"), "-H", "ssh://h", "--dial", "x", "exec", "true"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("give one"), std::string::npos) << r.err;
  r = run({bin("sbsh"), "--dial", "x", "-S", sock, "exec", "true"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("dial command"), std::string::npos) << r.err;
  r = run({bin("sbsh"), "-H", "ssh://h", "dial-stdio"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("far end"), std::string::npos) << r.err;
  auto c = client::ssh_dial_command("ssh://[fe80::1%eth0]:22");
  ASSERT_TRUE(c.ok()) << c.err().message;
  EXPECT_EQ((*c)[4], "-p");
  EXPECT_EQ((*c)[7], "fe80::1%eth0");
}

TEST_F(remote_test, ADialThatFailsSaysWhyAndOneThatHangsIsEnded) {
  auto r = run({bin("sbsh"), "--dial", "echo no route to far >&2; exit 7", "exec", "true"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("no route to far"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exit status 7"), std::string::npos) << r.err;

  std::string pidfile = dir + "/dial.pid";
  client::connect_options o;
  o.dial_command = {"sh", "-c", "echo $$ > " + shell_quote(pidfile) + "; exec sleep 300"};
  o.start_timeout = std::chrono::milliseconds(300);
  auto c = client::connection::connect(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.err().code, "unreachable");
  EXPECT_NE(c.err().message.find("no sbshd answered"), std::string::npos) << c.err().message;
  pid_t pid = std::atoi(read_file(pidfile).c_str());
  ASSERT_GT(pid, 0);
  EXPECT_FALSE(pid_alive(pid)) << "the dial command outlived its connection";
}

TEST_F(remote_test, TheLibraryThroughADialStreamsFeedsAndStaysUsable) {
  auto c = dial_conn();
  EXPECT_TRUE(c.remote());
  client::exec_options o;
  o.session = "lib";
  // A new session is not started in this process's directory, which is not on the far host.
  o.command = "pwd";
  auto r = c.exec(o);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->stdout_data, dir + "/home\n");

  std::string got[3];
  o.command = "for i in 1 2 3; do echo out$i; echo err$i >&2; done";
  o.on_output = [&](client::stream s, std::string_view d) { got[static_cast<int>(s)].append(d); };
  r = c.exec(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(got[1], "out1\nout2\nout3\n");
  EXPECT_EQ(got[2], "err1\nerr2\nerr3\n");
  o.on_output = nullptr;

  // Input the command never reads, while it writes more than sbshd queues: neither side may
  // wait for the other, and the connection must serve the next request.
  o.stdin_data = std::string(5u << 20, 'x');
  o.command = "head -c 4000000 /dev/zero | wc -c";
  r = c.exec(o);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->stdout_data, "4000000\n");
  o.stdin_data = std::string("piped\n");
  o.command = "cat";
  r = c.exec(o);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->stdout_data, "piped\n");

  // Input from a descriptor, a cap on what is kept, and a background process's logs.
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  ASSERT_EQ(::write(p[1], "from fd\n", 8), 8);
  ::close(p[1]);
  o.stdin_data.reset();
  o.stdin_fd = p[0];
  o.output_limit = 4;
  r = c.exec(o);
  ::close(p[0]);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "frd\n");  // the first and the last 2 bytes of "from fd\n"
  EXPECT_TRUE(r->stdout_truncated);
  EXPECT_EQ(r->stdout_omitted_bytes, 4u);

  client::start_options so;
  so.session = "lib";
  so.command = "echo logged";
  auto pr = c.start(so);
  ASSERT_TRUE(pr.ok()) << pr.err().message;
  auto w = c.wait(std::to_string(pr->id), std::chrono::seconds(20));
  ASSERT_TRUE(w.ok());
  std::string logs;
  auto l = c.logs(std::to_string(pr->id), {}, [&](client::stream, std::string_view d) { logs.append(d); });
  ASSERT_TRUE(l.ok()) << l.err().message;
  EXPECT_EQ(logs, "logged\n");
}

TEST_F(remote_test, DialStdioEndsWhenItsClientLeaves) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
  std::vector<std::string> args{bin("sbsh"), "-S", sock, "--no-autostart", "dial-stdio"};
  auto argv = exec_argv(args);
  pid_t pid;
  ASSERT_EQ(::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  ::close(sv[1]);

  ipc::frame_builder hello(ipc::msg_type::hello, 1);
  hello.u64("version", ipc::kProtocolVersion).str("client", "remote_test");
  std::string f = hello.take();
  ASSERT_EQ(::write(sv[0], f.data(), f.size()), static_cast<ssize_t>(f.size()));
  // The welcome comes back through it: a frame's 4-byte length, then the message.
  char buf[4096];
  pollfd pf{sv[0], POLLIN, 0};
  ASSERT_EQ(::poll(&pf, 1, 20000), 1);
  ASSERT_GT(::read(sv[0], buf, sizeof buf), 4);
  ::shutdown(sv[0], SHUT_WR);
  int st = -1;
  EXPECT_TRUE(wait_until([&] { return ::waitpid(pid, &st, WNOHANG) == pid; }, std::chrono::seconds(20)));
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  ::close(sv[0]);
  if (!WIFEXITED(st)) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
}

}  // namespace sbsh::test::remote_tests
