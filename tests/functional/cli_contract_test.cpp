// What the sbsh command line promises beyond running commands: every verb finds the sbshd
// that holds the sessions (starting one to adopt kept sessions), a connection lost before
// sbshd answered is made again once, what sbsh prints cannot drive the viewer's terminal,
// output that cannot be written is an error, and the smaller promises of the manual
// (attach's Ctrl-C and failures, --json's keys, SIGHUP).
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "attach_tty.h"
#include "fixture.h"
#include "ipc/frame.h"
#include "ipc/messages.h"
#include "ipc/protocol.h"
#include "ipc/socket_io.h"

namespace sbsh::test {

using json = nlohmann::json;

namespace cli_contract_tests {

class cli_contract_test : public daemon_test {
 public:
  // sbsh as a user runs it: it starts sbshd when none answers.
  run_result cli(const std::vector<std::string>& args, const std::string* stdin_data = nullptr) {
    std::vector<std::string> argv{bin("sbsh"), "--socket", sock};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, stdin_data);
  }

 protected:
  // A shell command line running sbsh (for redirections): `sbsh --socket SOCK --no-autostart ARGS`.
  std::string sbsh_line(const std::string& args) const {
    return shell_quote(bin("sbsh")) + " --socket " + shell_quote(sock) + " --no-autostart " + args;
  }
  // The pid of the sbshd that answers now, or 0.
  pid_t answering_daemon() {
    auto r = sbsh({"status", "--json"});
    if (r.code != 0) return 0;
    return json::parse(r.out).at("pid").get<pid_t>();
  }
  // shutdown --keep-sessions, and wait until that sbshd is gone.
  void keep_sessions_and_stop() {
    pid_t pid = answering_daemon();
    ASSERT_GT(pid, 0);
    auto r = sbsh({"shutdown", "--keep-sessions"});
    ASSERT_EQ(r.code, 0) << r.err;
    if (pid == daemon_pid) {
      ::waitpid(daemon_pid, nullptr, 0);
      daemon_pid = -1;
    }
    ASSERT_TRUE(wait_until([&] { return !pid_alive(pid); }, std::chrono::seconds(20)));
  }
  // An sbshd that a client started is not the fixture's child: stop it here.
  void TearDown() override {
    if (daemon_pid <= 0) {
      if (pid_t pid = answering_daemon(); pid > 0) {
        sbsh({"shutdown"});
        EXPECT_TRUE(wait_until([&] { return !pid_alive(pid); }, std::chrono::seconds(20)));
      }
    }
    daemon_test::TearDown();
  }
};

// ---- Every verb finds the sbshd that holds the sessions ----

TEST_F(cli_contract_test, EveryVerbStartsSbshdToAdoptKeptSessions) {
  ASSERT_EQ(exec("k", "kept=yes").code, 0);
  auto bg = sbsh({"start", "-s", "k", "--name", "bg", "--",
                  "echo one; until [ -e \"$TMPDIR/go\" ]; do sleep 0.02; done; echo two"});
  ASSERT_EQ(bg.code, 0) << bg.err;
  ASSERT_EQ(sbsh({"start", "-s", "k", "--name", "sl", "--", "exec sleep 300"}).code, 0);
  ASSERT_TRUE(wait_until([&] { return sbsh({"logs", "bg"}).out == "one\n"; }, std::chrono::seconds(20)));
  auto procs = json::parse(sbsh({"ps", "--json"}).out).at("processes");
  pid_t sleeper = 0;
  for (const auto& p : procs)
    if (p.at("name") == "sl") sleeper = p.at("pid").get<pid_t>();
  ASSERT_GT(sleeper, 0);
  auto shell = session_pids("k").shell_pid;
  ASSERT_GT(shell, 0);

  // With --no-autostart, the answer stays that no sbshd runs.
  keep_sessions_and_stop();
  auto r = sbsh({"session", "ls"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "no sessions (sbshd is not running)\n");

  // Each verb, right after a shutdown that kept the sessions, starts an sbshd that adopts them.
  r = cli({"session", "ls", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto ls = json::parse(r.out);
  ASSERT_EQ(ls.size(), 1u) << r.out;
  EXPECT_EQ(ls.at(0).at("name"), "k");
  EXPECT_EQ(ls.at(0).at("shell_pid"), shell);

  keep_sessions_and_stop();
  r = cli({"status"});  // the manual's own example
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\nk "), std::string::npos) << r.out;

  keep_sessions_and_stop();
  r = cli({"ps", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto ps = json::parse(r.out);
  ASSERT_EQ(ps.at("sessions").size(), 1u) << r.out;
  EXPECT_EQ(ps.at("sessions").at(0).at("shell_pid"), shell);
  EXPECT_EQ(ps.at("processes").size(), 2u) << r.out;

  keep_sessions_and_stop();
  r = cli({"logs", "bg"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "one\n");

  keep_sessions_and_stop();
  r = cli({"session", "show", "k", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out).at("session").at("shell_pid"), shell);

  keep_sessions_and_stop();
  r = cli({"kill", "-9", "sl"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(wait_until([&] { return !pid_alive(sleeper); }, std::chrono::seconds(20)));

  keep_sessions_and_stop();
  std::ofstream(dir + "/tmp/go").put('\n');
  r = cli({"wait", "bg"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(cli({"logs", "bg"}).out, "one\ntwo\n");
  EXPECT_EQ(cli({"exec", "-s", "k", "echo $kept"}).out, "yes\n");  // the same shell all along
  EXPECT_EQ(session_pids("k").shell_pid, shell);

  keep_sessions_and_stop();
  r = cli({"session", "rm", "k"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(wait_until([&] { return !pid_alive(static_cast<pid_t>(shell)); }, std::chrono::seconds(20)));
}

// What each verb of `sbsh --help` (and each subcommand of one) is given in the walk below:
// enough words to reach sbshd, whatever it then answers. A verb missing here fails the test.
std::map<std::string, std::vector<std::string>> verb_words(const std::string& dir) {
  std::string plan = dir + "/walk-plan.yaml";
  std::ofstream(plan) << "stages: [{name: s, commands: [\"true\"]}]\n";
  return {{"exec", {"true"}},
          {"run", {plan}},
          {"session create", {"walk"}},
          {"session ls", {"--kept"}},
          {"session show", {"none"}},
          {"session rm", {"none"}},
          {"session restart", {"none"}},
          {"session prune", {}},
          {"file write", {"-s", "none", "f"}},
          {"file read", {"-s", "none", "f"}},
          {"file ls", {"-s", "none"}},
          {"file stat", {"-s", "none", "f"}},
          {"file rm", {"-s", "none", "f"}},
          {"file mkdir", {"-s", "none", "d"}},
          {"file mv", {"-s", "none", "f", "g"}},
          {"file edit", {"-s", "none", "--old", "a", "--new", "b", "f"}},
          {"file search", {"-s", "none", "a"}},
          {"env ls", {}},
          {"env rm", {"0123abcd"}},
          {"env prune", {}},
          {"start", {"true"}},
          {"logs", {"none"}},
          {"kill", {"none"}},
          {"wait", {"none"}},
          {"input", {"%1", "x"}},
          {"ps", {}},
          {"attach", {}},
          {"status", {}},
          {"mcp", {}},
          {"dial-stdio", {}}};
}

// The manual: when no daemon answers, every verb but shutdown, version and completion starts
// one. Each verb `sbsh --help` lists, and each subcommand of one, is run against a stopped
// sbshd.
TEST_F(cli_contract_test, EveryVerbOfTheHelpButShutdownVersionAndCompletionStartsSbshd) {
  stop_daemon();
  auto words = verb_words(dir);
  // The MCP server reaches sbshd for a tool call: one, after the handshake, on its stdin.
  std::string mcp_input =
      R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},)"
      R"("clientInfo":{"name":"walk","version":"1"}}})" "\n"
      R"({"jsonrpc":"2.0","method":"notifications/initialized"})" "\n"
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_sessions","arguments":{}}})" "\n";
  size_t walked = 0;
  for (const auto& verb : commands_in_help(cli({"--help"}).out)) {
    auto subs = commands_in_help(cli({verb, "--help"}).out);
    if (subs.empty()) subs.emplace_back();
    for (const auto& sub : subs) {
      std::string shown = sub.empty() ? verb : verb + " " + sub;
      SCOPED_TRACE(shown);
      ASSERT_EQ(answering_daemon(), 0) << "an sbshd still answers before " << shown;
      std::vector<std::string> args{verb};
      if (!sub.empty()) args.push_back(sub);
      if (verb == "shutdown" || verb == "version" || verb == "completion") {
        if (verb == "completion") args.emplace_back("bash");
        auto r = cli(args);
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(answering_daemon(), 0) << shown << " started an sbshd";
        continue;
      }
      auto given = words.find(shown);
      ASSERT_NE(given, words.end()) << "give '" << shown << "' its words in verb_words()";
      args.insert(args.end(), given->second.begin(), given->second.end());
      auto r = cli(args, verb == "mcp" ? &mcp_input : nullptr);
      EXPECT_EQ(r.err.find("no sbshd"), std::string::npos) << r.err;
      pid_t started = answering_daemon();
      EXPECT_GT(started, 0) << shown << " did not start sbshd: exit " << r.code << ", " << r.err;
      if (started > 0) {
        EXPECT_EQ(sbsh({"shutdown"}).code, 0);
        EXPECT_TRUE(wait_until([&] { return !pid_alive(started); }, std::chrono::seconds(20)));
      }
      ++walked;
    }
  }
  EXPECT_GE(walked, words.size()) << "verb_words() gives words to verbs the help no longer lists";
}

TEST_F(cli_contract_test, ShutdownEndsSessionsThatWaitToBeAdopted) {
  ASSERT_EQ(exec("k", "true").code, 0);
  auto shell = session_pids("k").shell_pid;
  keep_sessions_and_stop();
  ASSERT_TRUE(pid_alive(static_cast<pid_t>(shell)));
  // A plain shutdown with no sbshd running still ends what the last one kept.
  auto r = cli({"shutdown"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(wait_until([&] { return !pid_alive(static_cast<pid_t>(shell)); }, std::chrono::seconds(20)));
  // And with nothing kept, it starts nothing.
  r = cli({"shutdown"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(answering_daemon(), 0);
}

// ---- A connection lost before sbshd answered is made again, once ----

// A socket at the fixture's path that takes connections and answers as told, standing for
// an sbshd that dies with connections in its backlog.
class fake_daemon {
 public:
  explicit fake_daemon(const std::string& path) : path_(path) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    ::chmod(std::filesystem::path(path).parent_path().c_str(), 0700);
    ::unlink(path.c_str());
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    ok_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd_, 16) == 0;
  }
  ~fake_daemon() { gone(); }
  fake_daemon(const fake_daemon&) = delete;
  fake_daemon& operator=(const fake_daemon&) = delete;
  [[nodiscard]] bool ok() const { return ok_; }
  // The next connection (-1 after 20 s without one).
  int accept_one() {
    pollfd pf{fd_, POLLIN, 0};
    if (::poll(&pf, 1, 20000) != 1) return -1;
    return ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  }
  // Whether a connection waits to be accepted.
  bool pending() {
    pollfd pf{fd_, POLLIN, 0};
    return ::poll(&pf, 1, 0) == 1;
  }
  // Unlinks the socket and closes it: the next client finds nothing there.
  void gone() {
    if (fd_ < 0) return;
    ::unlink(path_.c_str());
    ::close(fd_);
    fd_ = -1;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool ok_ = false;
};

class retry_test : public cli_contract_test {
 protected:
  retry_test() { start_in_setup = false; }
};

// Runs `exec` in a thread, against what listens on the socket now.
struct exec_in_thread {
  run_result r;
  std::thread t;
  exec_in_thread(retry_test* self, const std::string& session, const std::string& command)
      : t([this, self, session, command] { r = self->cli({"exec", "-s", session, "--", command}); }) {}
  run_result join() {
    t.join();
    return r;
  }
};

TEST_F(retry_test, ARequestThatNoSbshdReadIsSentAgainToANewOne) {
  std::string ran = dir + "/tmp/ran";
  std::string command = "echo once >> " + shell_quote(ran) + "; echo hi";
  for (bool with_data : {true, false}) {
    SCOPED_TRACE(with_data ? "reset with the request unread" : "closed before the request was read");
    fake_daemon fake(sock);
    ASSERT_TRUE(fake.ok());
    exec_in_thread client(this, with_data ? "reset" : "closed", command);
    int c = fake.accept_one();
    ASSERT_GE(c, 0);
    if (with_data) {  // the hello and the request are there, unread: closing resets the connection
      pollfd pf{c, POLLIN, 0};
      ASSERT_EQ(::poll(&pf, 1, 20000), 1);
    }
    fake.gone();
    ::close(c);
    auto r = client.join();
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "hi\n");
    EXPECT_EQ(r.err, "");
    // Stop the sbshd the retry started, for the next round.
    pid_t pid = answering_daemon();
    ASSERT_GT(pid, 0);
    sbsh({"shutdown"});
    ASSERT_TRUE(wait_until([&] { return !pid_alive(pid); }, std::chrono::seconds(20)));
  }
  EXPECT_EQ(read_file(ran), "once\nonce\n");  // each ran once
}

TEST_F(retry_test, ARequestWhoseHelloWasAnsweredIsNeverSentAgain) {
  std::string ran = dir + "/tmp/ran";
  fake_daemon fake(sock);
  ASSERT_TRUE(fake.ok());
  exec_in_thread client(this, "s", "echo once >> " + shell_quote(ran));
  int c = fake.accept_one();
  ASSERT_GE(c, 0);
  // Read the hello, answer it, then close with the request unread.
  ipc::channel ch{unique_fd(c)};
  auto hello = ch.recv();
  ASSERT_TRUE(hello.ok()) << hello.err().message;
  ASSERT_EQ(hello->msg.type(), ipc::msg_type::hello);
  ASSERT_TRUE(ch.send(ipc::encode(ipc::msg::welcome{ipc::kProtocolVersion, "fake", ::getpid()}, hello->msg.id())).ok());
  ch.close();
  auto r = client.join();
  EXPECT_EQ(r.code, 255) << r.out;
  EXPECT_NE(r.err, "");
  EXPECT_FALSE(fake.pending());  // no second connection
  fake.gone();
  EXPECT_EQ(answering_daemon(), 0);  // and no sbshd started for one
  EXPECT_FALSE(std::filesystem::exists(ran));
}

// ---- What sbsh prints cannot drive the terminal ----

TEST_F(cli_contract_test, TablesShowControlCharactersEscapedAndJsonKeepsThem) {
  const std::string esc_command = ": '\x1b[2J\x07' \xff";
  ASSERT_EQ(exec("e", esc_command).code, 0);
  ASSERT_EQ(sbsh({"start", "-s", "e", "--name", "bgesc", "--", "exec sleep 300 # \x1b]0;title\x07"}).code, 0);
  // A running command, shown by session ls and ps while it runs.
  std::thread running([&] { exec("r", "# \x1b[31m\nuntil [ -e \"$TMPDIR/go\" ]; do sleep 0.02; done"); });
  ASSERT_TRUE(wait_until(
      [&] {
        auto r = sbsh({"session", "ls", "--json"});
        if (r.code != 0) return false;
        auto sessions = json::parse(r.out);
        return std::any_of(sessions.begin(), sessions.end(),
                           [](const json& s) { return s.at("name") == "r" && s.at("running").is_string(); });
      },
      std::chrono::seconds(20)));
  auto show = sbsh({"session", "show", "e"});
  auto ls = sbsh({"session", "ls"});
  auto ps = sbsh({"ps"});
  auto status = sbsh({"status"});
  std::ofstream(dir + "/tmp/go").put('\n');
  running.join();
  for (const auto* r : {&show, &ls, &ps, &status}) {
    EXPECT_EQ(r->code, 0) << r->err;
    EXPECT_EQ(r->out.find('\x1b'), std::string::npos) << r->out;
    EXPECT_EQ(r->out.find('\x07'), std::string::npos) << r->out;
  }
  EXPECT_NE(show.out.find(": '\\e[2J\\x07' \\xff"), std::string::npos) << show.out;
  EXPECT_NE(ps.out.find("exec sleep 300 # \\e]0;title\\x07"), std::string::npos) << ps.out;
  EXPECT_NE(ls.out.find("# \\e[31m\\nuntil"), std::string::npos) << ls.out;
  // --json keeps the exact text.
  auto jshow = json::parse(sbsh({"session", "show", "e", "--json"}).out);
  EXPECT_EQ(jshow.at("history").back().at("command"), ": '\x1b[2J\x07' \xef\xbf\xbd");  // JSON is UTF-8
  auto jps = sbsh({"ps", "--json"});
  EXPECT_NE(jps.out.find("\\u001b]0;title\\u0007"), std::string::npos) << jps.out;
  EXPECT_EQ(json::parse(jps.out).at("processes").at(0).at("command"), "exec sleep 300 # \x1b]0;title\x07");
}

TEST_F(cli_contract_test, TableColumnsStayAlignedAndKeepTheEndOfADirectory) {
  std::string long_name(64, 'n');
  std::string deep = dir + "/tmp/" + std::string(40, 'a') + "/" + std::string(40, 'b') + "/the-end";
  std::filesystem::create_directories(deep);
  ASSERT_EQ(exec(long_name, "cd " + shell_quote(deep)).code, 0);
  ASSERT_EQ(exec("short", "true").code, 0);
  auto r = sbsh({"session", "ls"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> lines;
  for (size_t at = 0, nl; (nl = r.out.find('\n', at)) != std::string::npos; at = nl + 1)
    lines.push_back(r.out.substr(at, nl - at));
  ASSERT_EQ(lines.size(), 3u) << r.out;
  size_t state_col = lines[0].find("STATE");
  ASSERT_NE(state_col, std::string::npos);
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].find("ready"), state_col) << r.out;
    EXPECT_EQ(lines[i][state_col - 1], ' ') << r.out;
  }
  const auto& deep_row = lines[1].starts_with(long_name) ? lines[1] : lines[2];
  EXPECT_TRUE(deep_row.starts_with(long_name + "  ")) << r.out;
  EXPECT_NE(deep_row.find("\xe2\x80\xa6"), std::string::npos) << r.out;  // cut at the front...
  EXPECT_NE(deep_row.find("/the-end"), std::string::npos) << r.out;     // ...so the end shows
}

TEST_F(cli_contract_test, CountsOfOneAreSingular) {
  ASSERT_EQ(exec("one", "true").code, 0);
  auto r = sbsh({"status"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\n1 command (0 failed, 0 timed out), 0 shell restarts, 1 client\n"),
            std::string::npos)
      << r.out;
}

// ---- Output that cannot be written is an error ----

TEST_F(cli_contract_test, OutputThatCannotBeWrittenIsAnErrorOfSbsh) {
  // Without the fix, sbsh would wait for the command (or follow) for ever: 30 s is plenty.
  auto sh = [&](const std::string& line) { return run({"/bin/sh", "-c", "exec " + line}, nullptr, std::chrono::seconds(30)); };
  auto r = sh(sbsh_line("exec -s w 'echo hi'") + " >/dev/full");
  EXPECT_EQ(r.code, 255);
  EXPECT_EQ(r.err, "sbsh: write error: No space left on device\n");
  r = sh(sbsh_line("exec -s w 'echo hi'") + " >&-");
  EXPECT_EQ(r.code, 255);
  EXPECT_EQ(r.err, "sbsh: write error: Bad file descriptor\n");
  r = sh(sbsh_line("exec -s w 'echo hi >&2'") + " 2>/dev/full");
  EXPECT_EQ(r.code, 255);
  // Nothing to write is no error, even with stdout closed.
  r = sh(sbsh_line("exec -s w true") + " >&-");
  EXPECT_EQ(r.code, 0) << r.err;
  // A command still running when its output fails is stopped first: sbsh returns at once.
  auto t0 = std::chrono::steady_clock::now();
  r = sh(sbsh_line(R"(exec -s w 'sh -c "echo \$\$ > \$TMPDIR/p; echo hi; exec sleep 300"')") + " >/dev/full");
  EXPECT_EQ(r.code, 255);
  EXPECT_TRUE(r.err.ends_with("sbsh: write error: No space left on device\n")) << r.err;  // after bash's notice
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
  pid_t p = static_cast<pid_t>(std::atoi(read_file(dir + "/tmp/p").c_str()));
  ASSERT_GT(p, 0);
  EXPECT_TRUE(wait_until([&] { return !pid_alive(p); }, std::chrono::seconds(20)));
  EXPECT_EQ(exec("w", "echo still").out, "still\n");  // the session goes on
  // Every verb that prints.
  ASSERT_EQ(sbsh({"start", "-s", "w", "--name", "talker", "--", "echo a; echo b"}).code, 0);
  ASSERT_EQ(sbsh({"wait", "talker"}).code, 0);
  for (const char* verb : {"exec -s w --json true", "ps", "ps --json", "session ls", "session ls --json",
                                  "session show w", "status", "status --json", "logs talker", "version"}) {
    r = sh(sbsh_line(verb) + " >/dev/full");
    EXPECT_EQ(r.code, 255) << verb;
    EXPECT_EQ(r.err, "sbsh: write error: No space left on device\n") << verb;
  }
  // A follow ends when its output fails.
  ASSERT_EQ(sbsh({"start", "-s", "w", "--name", "forever", "--", "while :; do echo x; sleep 0.05; done"}).code, 0);
  r = sh(sbsh_line("logs -f forever") + " >/dev/full");
  EXPECT_EQ(r.code, 255);
  EXPECT_EQ(r.err, "sbsh: write error: No space left on device\n");
  EXPECT_EQ(sbsh({"kill", "forever"}).code, 0);
}

// ---- The manual's smaller promises ----

TEST_F(cli_contract_test, ExecJsonHasEveryKeyNullWhenAbsent) {
  auto r = sbsh({"exec", "-s", "j", "--json", "true"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = json::parse(r.out);
  for (const char* key : {"session", "command", "exit_code", "signal", "timed_out", "shell_restarted", "cancelled",
                          "ran", "generation", "state_lost", "state_lost_reason", "oom_killed", "stdout", "stderr",
                          "stdout_base64", "stderr_base64", "stdout_truncated", "stderr_truncated", "duration_ms",
                          "started_at", "error"})
    EXPECT_TRUE(j.contains(key)) << key << " in " << r.out;
  for (const char* key : {"signal", "state_lost_reason", "stdout_base64", "stderr_base64", "error"})
    EXPECT_TRUE(j.at(key).is_null()) << key << " in " << r.out;
}

// Starts sbsh with `args`, its output to files; returns its pid.
pid_t spawn_sbsh(const std::vector<std::string>& args, const std::string& out, const std::string& err) {
  std::vector<std::string> argv{bin("sbsh")};
  argv.insert(argv.end(), args.begin(), args.end());
  auto a = exec_argv(argv);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  if (posix_spawn(&pid, a[0], &fa, nullptr, a.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

TEST_F(cli_contract_test, HangupStopsTheCommandAsTermDoes) {
  std::string t = dir + "/tmp/";
  // A child that tells which signal reached it, in its own process: the session's shell is
  // interrupted, never sent the signal.
  std::string command = "bash -c 'trap \"echo HUP >> " + t + "got; exit 11\" HUP; trap \"echo TERM >> " + t +
                        "got; exit 12\" TERM; touch " + t + "ready; while :; do sleep 0.02; done'; echo rest-ran";
  pid_t pid = spawn_sbsh({"--socket", sock, "--no-autostart", "exec", "-s", "h", "--", command}, t + "out", t + "err");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(t + "ready"); }, std::chrono::seconds(20)));
  ::kill(pid, SIGHUP);
  int st = 0;
  ASSERT_TRUE(wait_until([&] { return ::waitpid(pid, &st, WNOHANG) == pid; }, std::chrono::seconds(20)));
  // TERM, never HUP. (A bash child caught between fork and exec still has the traps: it may
  // report the TERM it got too, so the line can come more than once.)
  std::string got = read_file(t + "got");
  EXPECT_NE(got, "");
  for (size_t at; (at = got.find("TERM\n")) != std::string::npos;) got.erase(at, 5);
  EXPECT_EQ(got, "") << "a signal other than TERM reached the command";
  EXPECT_EQ(read_file(t + "out"), "");  // the rest of the text was abandoned, as on a timeout
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_NE(WEXITSTATUS(st), 0);
  EXPECT_EQ(exec("h", "echo fine").out, "fine\n");  // the shell stays
}

TEST_F(cli_contract_test, AttachToAFailedSessionSaysWhy) {
  auto c = sbsh({"session", "create", "f", "--init", "exit 3", "--restart", "never"});
  ASSERT_TRUE(wait_until(
      [&] {
        auto st = session_status("f").state;
        return st == "failed" || st == "exited";
      },
      std::chrono::seconds(20)))
      << c.err;
  auto e = sbsh({"exec", "-s", "f", "echo hi"});
  EXPECT_EQ(e.code, 255);
  ASSERT_NE(e.err, "");
  std::string line = "echo hi\n";
  auto a = sbsh({"attach", "-s", "f"}, &line);
  EXPECT_EQ(a.code, 255);
  EXPECT_EQ(a.err, e.err);  // what exec says
}

TEST_F(cli_contract_test, CtrlCAtAnIdlePromptClearsTheLine) {
  attach_tty t(sock, /*autostart=*/false);
  ASSERT_TRUE(t.started());
  ASSERT_TRUE(t.wait_for("[tty ")) << t.seen();
  ASSERT_TRUE(t.wait_for("]$ ")) << t.seen();
  t.type_at_prompt("echo abandoned");
  ASSERT_TRUE(t.wait_for("echo abandoned")) << t.seen();
  t.type_at_prompt("\x03");  // Ctrl-C: the line goes, a new prompt comes
  ASSERT_TRUE(t.wait_for("]$ ")) << t.seen();
  EXPECT_TRUE(t.running());
  t.type_at_prompt("\x03");  // twice in a row too
  ASSERT_TRUE(t.wait_for("]$ ")) << t.seen();
  EXPECT_TRUE(t.running());
  t.type_at_prompt("echo $((6 * 7))\r");
  ASSERT_TRUE(t.wait_for("42")) << t.seen();
  ASSERT_TRUE(t.wait_for("]$ ")) << t.seen();
  // Only the line typed after Ctrl-C ran.
  auto hist = json::parse(sbsh({"session", "show", "tty", "--json"}).out).at("history");
  ASSERT_EQ(hist.size(), 1u) << hist.dump();
  EXPECT_EQ(hist.at(0).at("command"), "echo $((6 * 7))");
  t.type_at_prompt("\x04");  // Ctrl-D leaves
  EXPECT_EQ(t.wait_exit(), 0);
}

}  // namespace cli_contract_tests
}  // namespace sbsh::test
