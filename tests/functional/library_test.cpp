// libsbsh used directly: one connection for many requests, one per thread, streaming,
// stdin, cancelling, sessions and background processes.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "fixture.h"

namespace sbsh::test::library_tests {

using library_test = daemon_test;

TEST_F(library_test, OneConnectionServesManyRequests) {
  auto c = conn();
  client::exec_options o;
  o.session = "lib";
  for (int i = 0; i < 200; ++i) {
    o.command = "echo " + std::to_string(i);
    auto r = c.exec(o);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->stdout_data, std::to_string(i) + "\n");
  }
  auto st = c.status();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->sessions.at(0).commands, 200u);
}

TEST_F(library_test, OneConnectionPerThread) {
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  ts.reserve(8);
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      auto c = conn();
      client::exec_options o;
      o.session = "t" + std::to_string(t % 4);
      for (int i = 0; i < 25; ++i) {
        o.command = "echo " + std::to_string(t * 100 + i);
        auto r = c.exec(o);
        if (!r || r->stdout_data != std::to_string(t * 100 + i) + "\n") ++bad;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(library_test, StreamingStdinResultFields) {
  auto c = conn();
  client::exec_options o;
  o.session = "lib";
  std::string seen;
  o.command = "printf 'a\\0b'; echo e >&2; cat";
  o.stdin_data = std::string("in\0put", 6);
  o.on_output = [&](client::stream s, std::string_view d) { seen += (s == client::stream::out ? "O:" : "E:") + std::string(d); };
  auto r = c.exec(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_NE(seen.find(std::string("a\0b", 3)), std::string::npos);
  EXPECT_NE(seen.find("E:e\n"), std::string::npos);
  EXPECT_NE(seen.find(std::string("in\0put", 6)), std::string::npos);
  EXPECT_GT(r->started_at_ms, 0);
  o.on_output = nullptr;
  o.stdin_data.reset();
  o.command = "sleep 5";
  o.timeout = std::chrono::milliseconds(200);
  r = c.exec(o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->signal, SIGTERM);
}

// exec writes to pipes (the command's stdin, output copied to a descriptor): a reader that
// went away must not kill the caller, whose SIGPIPE here is at its default (fatal).
TEST_F(library_test, ClosedPipesDoNotKillTheCaller) {
  ASSERT_EQ(::signal(SIGPIPE, SIG_DFL), SIG_DFL);
  auto c = conn();
  client::exec_options o;
  o.session = "lib";
  o.command = "head -c 5 | wc -c";
  o.stdin_data = std::string(4 << 20, 'x');
  auto r = c.exec(o);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_data, "5\n");

  // Output to a pipe nobody reads: the command gets SIGPIPE, as in a shell pipeline.
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  ::close(p[0]);
  o.stdin_data.reset();
  o.command = "yes";
  o.stdout_fd = p[1];
  r = c.exec(o);
  ::close(p[1]);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->signal, SIGPIPE);
  EXPECT_EQ(r->exit_code, 128 + SIGPIPE);

  // The caller's mask is as it was, with no SIGPIPE left pending.
  sigset_t mask, pending;
  ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, nullptr, &mask), 0);
  EXPECT_EQ(::sigismember(&mask, SIGPIPE), 0);
  ASSERT_EQ(::sigpending(&pending), 0);
  EXPECT_EQ(::sigismember(&pending, SIGPIPE), 0);
  o.stdout_fd = -1;
  o.command = "echo ok";
  r = c.exec(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "ok\n");
}

TEST_F(library_test, CancellerStopsARunningCommand) {
  auto t0 = std::chrono::steady_clock::now();
  auto r = exec_cancelled_after("lib", "sleep 60", std::chrono::milliseconds(300));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->cancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

// Ctrl-C as forwarded by the CLI: SIGINT to the command's processes. The rest of the
// command is abandoned (as an interactive shell does at its prompt) and its status is 130;
// the shell and its state stay.
TEST_F(library_test, SigintStopsTheCommandNotTheShell) {
  auto c = conn();
  client::exec_options o;
  o.session = "int";
  o.command = "cd /tmp; kept=yes";
  ASSERT_TRUE(c.exec(o).ok());
  client::canceller k;
  o.signal_fd = k.fd();
  pid_t shell = static_cast<pid_t>(session_pids("int").shell_pid);
  ASSERT_GT(shell, 0);
  std::atomic<bool> seen{false};
  std::thread t([&] {
    seen = wait_until([&] { return has_child(shell, "sleep"); }, std::chrono::seconds(20));
    k.signal(SIGINT);
  });
  o.command = "for i in 1 2 3; do sleep 30; done; echo after";
  auto t0 = std::chrono::steady_clock::now();
  auto r = c.exec(o);
  t.join();
  EXPECT_TRUE(seen) << "no sleep below the shell " << shell;
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  EXPECT_EQ(r->exit_code, 130);
  EXPECT_EQ(r->signal, SIGINT);
  EXPECT_FALSE(r->shell_restarted);
  EXPECT_EQ(r->stdout_data, "");
  o.signal_fd = -1;
  o.command = "echo $? $kept $PWD";
  r = c.exec(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "130 yes /tmp\n");
  EXPECT_EQ(session_status("int").restarts, 0u);
}

TEST_F(library_test, SessionsAndProcesses) {
  auto c = conn();
  client::session_spec spec;
  spec.name = "api";
  spec.cwd = "/tmp";
  spec.init = {"X=from-init"};
  ASSERT_TRUE(c.create_session(spec).ok());
  client::exec_options o;
  o.session = "api";
  o.command = "echo $X; pwd";
  EXPECT_EQ(c.exec(o)->stdout_data, "from-init\n/tmp\n");
  client::start_options so;
  so.session = "api";
  so.name = "job";
  so.command = "echo $X; exit 5";
  auto p = c.start(so);
  ASSERT_TRUE(p.ok()) << p.err().message;
  auto w = c.wait("job", std::chrono::milliseconds(10000));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->state, "exited");
  EXPECT_EQ(w->exit_code, 5);
  std::string logs;
  auto l = c.logs("job", {}, [&](client::stream, std::string_view d) { logs += d; });
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(logs, "from-init\n");
  ASSERT_TRUE(c.remove_session("api").ok());
  auto e = c.exec(o);  // recreated on first use, with no init this time
  EXPECT_EQ(e->stdout_data.substr(0, 1), "\n");
}

TEST_F(library_test, AFollowOfLogsCanBeEndedEarly) {
  auto c = conn();
  client::start_options so;
  so.name = "ticker";
  so.command = "while :; do echo tick; sleep 0.05; done";
  auto p = c.start(so);
  ASSERT_TRUE(p.ok()) << p.err().message;
  client::canceller stop;
  client::logs_options lo;
  lo.follow = true;
  lo.cancel_fd = stop.fd();
  // End the follow from inside it, once three lines have streamed in (cancel() is one
  // write to a pipe, safe from anywhere).
  std::string seen;
  bool asked = false;
  auto t0 = std::chrono::steady_clock::now();
  auto end = c.logs("ticker", lo, [&](client::stream, std::string_view d) {
    seen += d;
    if (!asked && seen.size() >= 3 * std::string("tick\n").size()) {
      asked = true;
      stop.cancel();
    }
  });
  ASSERT_TRUE(end.ok()) << end.err().message;
  EXPECT_TRUE(asked);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  EXPECT_EQ(end->state, "running");
  EXPECT_NE(seen.find("tick\n"), std::string::npos);
  // The connection is in step: the next requests get their own answers.
  auto k = c.kill("ticker", SIGKILL);
  ASSERT_TRUE(k.ok()) << k.err().message;
  EXPECT_EQ(k->state, "killed");
  client::exec_options o;
  o.command = "echo next";
  auto r = c.exec(o);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->stdout_data, "next\n");
}

// A one-shot client sends its first request right behind the hello; the welcome is read
// first and the connection then works as any other.
TEST_F(library_test, TheFirstRequestCanFollowTheHelloAtOnce) {
  client::connect_options o;
  o.socket_path = sock;
  o.autostart = false;
  o.wait_for_welcome = false;
  client::start_options so;
  so.session = "lazy";
  so.command = "echo logged";
  auto started = conn().start(so);
  ASSERT_TRUE(started.ok()) << started.err().message;
  std::string proc = std::to_string(started->id);
  ASSERT_TRUE(conn().wait(proc, std::chrono::seconds(30)).ok());
  for (int first = 0; first < 3; ++first) {
    auto c = client::connection::connect(o);
    ASSERT_TRUE(c.ok()) << c.err().message;
    if (first == 0) {
      client::exec_options e;
      e.session = "lazy";
      e.command = "printf '%s' \"$(cat)\"";
      e.stdin_data = "from stdin";
      auto r = c->exec(e);
      ASSERT_TRUE(r.ok()) << r.err().message;
      EXPECT_EQ(r->stdout_data, "from stdin");
    } else if (first == 1) {
      auto st = c->status();
      ASSERT_TRUE(st.ok()) << st.err().message;
      EXPECT_GT(st->pid, 0);
    } else {
      std::string logged;
      auto l = c->logs(proc, {}, [&](client::stream, std::string_view d) { logged.append(d); });
      ASSERT_TRUE(l.ok()) << l.err().message;
      EXPECT_EQ(logged, "logged\n");
    }
    client::exec_options e;
    e.session = "lazy";
    e.command = "echo next";
    auto r = c->exec(e);
    ASSERT_TRUE(r.ok()) << r.err().message;
    EXPECT_EQ(r->stdout_data, "next\n");
  }
}

TEST_F(library_test, ErrorsNameWhatWasWrong) {
  auto c = conn();
  client::exec_options o;
  o.session = "no good";
  o.command = "true";
  auto r = c.exec(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, "invalid_session_name");
  EXPECT_FALSE(c.kill("no-such-process", SIGTERM).ok());
}

// A daemon that never becomes ready makes connect fail after start_timeout, naming the
// socket, instead of waiting for ever; what was started is stopped.
TEST_F(library_test, AutoStartGivesUpAfterStartTimeout) {
  std::string fake = dir + "/stuck-sbshd";
  {
    std::ofstream f(fake);
    f << "#!/bin/sh\necho $$ > " << dir << "/stuck.pid\nexec sleep 60\n";
  }
  ::chmod(fake.c_str(), 0700);
  client::connect_options o;
  o.socket_path = dir + "/run/other.sock";
  o.daemon_path = fake;
  o.start_timeout = std::chrono::milliseconds(1000);
  auto t0 = std::chrono::steady_clock::now();
  auto c = client::connection::connect(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.err().code, "unreachable");
  EXPECT_NE(c.err().message.find("did not become ready on " + o.socket_path), std::string::npos) << c.err().message;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  std::ifstream pidf(dir + "/stuck.pid");
  pid_t pid = 0;
  ASSERT_TRUE(pidf >> pid);
  EXPECT_FALSE(pid_alive(pid));
}

}  // namespace sbsh::test::library_tests
