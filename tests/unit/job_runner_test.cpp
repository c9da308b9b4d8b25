// daemon/job_runner.cpp alone, with no server: a stand-in shell (shell_port) records the runs
// and signals the runner asks for and answers as a test says, and stand-in clients
// (reply_port) keep what they are told, on a real loop for the runner's timers and pipes.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/job_runner.h"
#include "ipc/messages.h"

namespace sbsh::daemon::job_runner_tests {

// The shell as the runner sees it, with every request kept for the test to check.
class fake_shell final : public shell_port {
 public:
  struct run {
    uint64_t seq;
    std::string text;
  };
  struct signal_request {
    int sig;
    bool interrupt;
  };
  struct restart {
    std::string why;
    bool forced;
  };

  [[nodiscard]] session_state state() const override { return state_; }
  [[nodiscard]] const std::string& failure() const override { return failure_; }
  [[nodiscard]] uint64_t generation() const override { return generation_; }
  [[nodiscard]] bool serving() const override { return state_ == session_state::ready && serving_; }
  [[nodiscard]] bool adopted_busy() const override { return adopted_busy_; }
  [[nodiscard]] int64_t shell_pid() const override { return 0; }
  status send_run(run_message& m) override {
    m.seq = ++seq_;
    if (gone_) return make_error("gone", "the shell has ended");
    runs.push_back({m.seq, std::string(m.text)});
    return ok_status();
  }
  uint64_t signal_command(const procs::since_mark&, int sig, bool interrupt) override {
    if (gone_) return 0;
    signals.push_back({sig, interrupt});
    return signals.size();
  }
  void restart_shell(const std::string& why, bool forced) override { restarts.push_back({why, forced}); }
  void retry_if_failed() override { ++retries; }
  void initialized() override { ++initialized_calls; }
  void want_channel() override { ++channel_wanted; }

  session_state state_ = session_state::ready;
  std::string failure_;
  uint64_t generation_ = 1;
  bool serving_ = true;
  bool adopted_busy_ = false;
  bool gone_ = false;  // send_run answers "gone"; nobody takes signals

  std::vector<run> runs;
  std::vector<signal_request> signals;
  std::vector<restart> restarts;
  int retries = 0;
  int initialized_calls = 0;
  int channel_wanted = 0;

 private:
  uint64_t seq_ = 0;
};

// The client as the runner sees it (reply_port), with every frame it was sent kept, and the
// account the request handler keeps of its commands: from add_job until job_done.
class fake_client final : public reply_port {
 public:
  void reply(std::string frame) override { frames.push_back(std::move(frame)); }
  [[nodiscard]] size_t queued_bytes() const override { return 0; }
  void pause_reading(bool p) override { paused = p; }
  void job_done(uint64_t id) override { jobs.erase(id); }

  void add_job(uint64_t id) { jobs.insert(id); }
  [[nodiscard]] bool holds(uint64_t id) const { return jobs.contains(id); }

  std::vector<std::string> frames;
  std::set<uint64_t> jobs;
  bool paused = false;
};

// Where the runner records kept commands: how often it was told.
class fake_recorder final : public command_recorder {
 public:
  void queued(const exec_job&) override { ++calls; }
  void started(const exec_job&) override { ++calls; }
  void output(uint64_t, int, std::string_view) override { ++calls; }
  void detached(uint64_t) override { ++calls; }
  void finished(const exec_job&, uint64_t) override { ++calls; }
  void waiting(uint64_t, std::string_view) override { ++calls; }
  void resumed(uint64_t) override { ++calls; }
  int calls = 0;
};

// What a client was sent: the exec_done frames, by request id.
struct done_record {
  uint64_t id = 0;
  std::optional<int> exit_code, signal;
  bool timed_out = false, cancelled = false, shell_restarted = false, ran = false, state_lost = false;
  bool release = false;
  std::string error_code, error, state_lost_reason;
};

class job_runner_test : public ::testing::Test {
 protected:
  void SetUp() override {
    uv_loop_init(&loop_);
    ctx_.loop = &loop_;
    ctx_.counters = &counters_;
    ctx_.records = &records_;
    runner_ = std::make_unique<job_runner>(ctx_, name_, def_, shell_, [this] { ++activity_; });
  }
  void TearDown() override {
    runner_.reset();
    clients_.clear();
    // Let every close callback run, then check that the runner left nothing open.
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }

  fake_client& new_client() {
    clients_.push_back(std::make_unique<fake_client>());
    return *clients_.back();
  }

  // Every exec_done `c` was sent so far.
  std::vector<done_record> dones(fake_client& c) {
    spin();
    std::vector<done_record> out;
    for (const auto& frame : c.frames) {
      auto m = ipc::message::parse(frame.data() + 4, frame.size() - 4);
      if (!m || m->type() != ipc::msg_type::exec_done) continue;
      auto d = ipc::decode<ipc::msg::exec_done>(*m);
      if (!d) continue;
      out.push_back({m->id(), d->exit_code, d->signal, d->timed_out, d->cancelled, d->shell_restarted, d->ran,
                     d->state_lost, d->release, std::string(d->error_code), std::string(d->error),
                     std::string(d->state_lost_reason)});
    }
    return out;
  }

  // A user's command from client `c` (frames mode: the runner makes its pipes), with the
  // account the request handler keeps of it.
  std::unique_ptr<exec_job> user_job(fake_client& c, uint64_t id, std::string text) {
    auto j = std::make_unique<exec_job>();
    j->id = id;
    j->client = &c;
    j->session = name_;
    j->command = text;
    j->text = std::move(text);
    c.add_job(id);
    return j;
  }

  // A command on sbshd's own behalf, whose finished job lands in `finished`.
  std::unique_ptr<exec_job> internal_job(uint64_t id, std::string text) {
    auto j = std::make_unique<exec_job>();
    j->id = id;
    j->internal = true;
    j->session = name_;
    j->command = text;
    j->text = std::move(text);
    j->on_done = [this](exec_job& done) {
      finished_.push_back({done.id, done.outcome, done.started, done.undelivered, done.generation});
    };
    return j;
  }

  // The shell's status for run `seq`.
  void answer(uint64_t seq, int exit_value, std::optional<int> sig = std::nullopt, bool interrupted = false) {
    shell_message m;
    m.type = SBSH_MSG_STATUS;
    m.seq = seq;
    m.exit_value = exit_value;
    m.signal = sig;
    m.interrupted = interrupted;
    runner_->run_answered(m);
  }

  // Runs the loop until `done` holds, for at most `ms`.
  bool run_until(const std::function<bool()>& done, uint64_t ms = 5000) {
    uint64_t until = mono_us() + ms * 1000;
    while (!done()) {
      if (mono_us() > until) return false;
      uv_run(&loop_, UV_RUN_NOWAIT);
      ::usleep(1000);
    }
    return true;
  }
  // Runs the loop for `ms`, whatever happens.
  void run_for(uint64_t ms) { (void)run_until([] { return false; }, ms); }
  void spin() {
    for (int i = 0; i < 5; ++i) uv_run(&loop_, UV_RUN_NOWAIT);
  }

  struct finished_job {
    uint64_t id;
    exec_outcome outcome;
    bool started, undelivered;
    uint64_t generation;
  };

  uv_loop_t loop_{};
  daemon::counters counters_;
  fake_recorder records_;
  runner_context ctx_;
  std::string name_ = "s";
  session_def def_;
  fake_shell shell_;
  int activity_ = 0;
  std::vector<finished_job> finished_;
  std::vector<std::unique_ptr<fake_client>> clients_;
  std::unique_ptr<job_runner> runner_;
};

TEST_F(job_runner_test, SecondCommandWaitsForTheFirst) {
  auto& c = new_client();
  runner_->enqueue(user_job(c, 1, "first"));
  runner_->enqueue(user_job(c, 2, "second"));
  ASSERT_EQ(shell_.runs.size(), 1u);
  EXPECT_EQ(shell_.runs[0].text, "first");
  EXPECT_EQ(runner_->queued(), 1u);
  ASSERT_NE(runner_->current(), nullptr);
  EXPECT_EQ(runner_->current()->id, 1u);

  answer(shell_.runs[0].seq + 100, 0);  // a stale status is not the first's
  EXPECT_EQ(shell_.runs.size(), 1u);
  EXPECT_TRUE(dones(c).empty());

  answer(shell_.runs[0].seq, 0);
  ASSERT_EQ(shell_.runs.size(), 2u);
  EXPECT_EQ(shell_.runs[1].text, "second");
  answer(shell_.runs[1].seq, 3);
  auto d = dones(c);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].id, 1u);
  EXPECT_EQ(d[0].exit_code, 0);
  EXPECT_EQ(d[1].id, 2u);
  EXPECT_EQ(d[1].exit_code, 3);
  EXPECT_TRUE(d[1].ran);
  EXPECT_EQ(runner_->commands(), 2u);
  EXPECT_EQ(activity_, 2);
  // Answered and released (its pipes had no writer left): the client's account is empty.
  EXPECT_TRUE(c.jobs.empty());
}

TEST_F(job_runner_test, WaitsForAShellThatServes) {
  shell_.serving_ = false;
  runner_->run_first({"init"}, /*init=*/true);
  runner_->enqueue(internal_job(1, "cmd"));
  EXPECT_TRUE(shell_.runs.empty());
  shell_.serving_ = true;
  runner_->shell_ready();
  ASSERT_EQ(shell_.runs.size(), 1u);
  EXPECT_EQ(shell_.runs[0].text, "init");  // the init command before the queue
  EXPECT_EQ(shell_.initialized_calls, 0);
  answer(shell_.runs[0].seq, 0);
  EXPECT_EQ(shell_.initialized_calls, 1);
  ASSERT_EQ(shell_.runs.size(), 2u);
  EXPECT_EQ(shell_.runs[1].text, "cmd");
}

TEST_F(job_runner_test, FailingInitCommandRestartsTheShell) {
  runner_->run_first({"false"}, /*init=*/true);
  runner_->shell_changed();
  ASSERT_EQ(shell_.runs.size(), 1u);
  answer(shell_.runs[0].seq, 1);
  EXPECT_TRUE(runner_->init_failed());
  EXPECT_EQ(shell_.initialized_calls, 0);
  runner_->enqueue(internal_job(1, "cmd"));  // blocked: nothing runs in that shell any more
  EXPECT_EQ(shell_.runs.size(), 1u);
  ASSERT_TRUE(run_until([&] { return !shell_.restarts.empty(); }));
  EXPECT_FALSE(shell_.restarts[0].forced);
  EXPECT_NE(shell_.restarts[0].why.find("init command 'false' exited with status 1"), std::string::npos);
  EXPECT_NE(runner_->init_output().find("exited with status 1"), std::string::npos);
}

TEST_F(job_runner_test, TimeoutWhileQueuedNeverRuns) {
  runner_->enqueue(internal_job(1, "long"));
  auto j = internal_job(2, "late");
  j->timeout_ms = 20;
  runner_->enqueue(std::move(j));
  ASSERT_TRUE(run_until([&] { return !finished_.empty(); }));
  ASSERT_EQ(finished_.size(), 1u);
  EXPECT_EQ(finished_[0].id, 2u);
  EXPECT_TRUE(finished_[0].outcome.timed_out);
  EXPECT_FALSE(finished_[0].started);
  EXPECT_EQ(finished_[0].outcome.error_code, "timeout");
  EXPECT_EQ(shell_.runs.size(), 1u);  // the first still runs; the second never reached the shell
  EXPECT_EQ(runner_->queued(), 0u);
  EXPECT_TRUE(shell_.signals.empty());  // and the running one was not touched
}

TEST_F(job_runner_test, TimeoutEscalatesToSigkillThenARestart) {
  auto j = internal_job(1, "sleep");
  j->timeout_ms = 10;
  j->grace_ms = 30;
  runner_->enqueue(std::move(j));
  ASSERT_TRUE(run_until([&] { return shell_.signals.size() == 1; }));
  EXPECT_EQ(shell_.signals[0].sig, SIGTERM);
  EXPECT_TRUE(shell_.signals[0].interrupt);
  EXPECT_EQ(runner_->current()->kill_stage, kill_stage::first_signal);
  ASSERT_TRUE(run_until([&] { return shell_.signals.size() == 2; }));
  EXPECT_EQ(shell_.signals[1].sig, SIGKILL);
  EXPECT_TRUE(shell_.signals[1].interrupt);
  EXPECT_EQ(runner_->current()->kill_stage, kill_stage::sigkill);
  EXPECT_TRUE(shell_.restarts.empty());
  // The shell answers neither: after the settle time, only a new shell stops it.
  ASSERT_TRUE(run_until([&] { return !shell_.restarts.empty(); }));
  EXPECT_TRUE(shell_.restarts[0].forced);
  EXPECT_EQ(runner_->current()->kill_stage, kill_stage::restart);
  EXPECT_TRUE(finished_.empty());  // until the shell is lost
  runner_->shell_lost(1, shell_loss{std::nullopt, std::nullopt, "restarted", true, false});
  ASSERT_EQ(finished_.size(), 1u);
  const auto& o = finished_[0].outcome;
  EXPECT_TRUE(o.timed_out);
  EXPECT_TRUE(o.shell_restarted);
  EXPECT_EQ(o.error_code, "shell_restarted");
  EXPECT_NE(o.error.find("restarted to stop it"), std::string::npos);
  EXPECT_FALSE(o.exit_code.has_value());
  EXPECT_EQ(shell_.signals.size(), 2u);
}

TEST_F(job_runner_test, ACommandThatStopsInTheGraceIsNotKilled) {
  auto j = internal_job(1, "sleep");
  j->timeout_ms = 10;
  j->grace_ms = 50;
  runner_->enqueue(std::move(j));
  ASSERT_TRUE(run_until([&] { return shell_.signals.size() == 1; }));
  // The shell was interrupted by sbshd, not the command by the user: that SIGINT is not its.
  answer(shell_.runs[0].seq, 130, SIGINT, /*interrupted=*/true);
  ASSERT_EQ(finished_.size(), 1u);
  EXPECT_TRUE(finished_[0].outcome.timed_out);
  EXPECT_EQ(finished_[0].outcome.exit_code, 130);
  EXPECT_FALSE(finished_[0].outcome.signal.has_value());
  run_for(120);
  EXPECT_EQ(shell_.signals.size(), 1u);  // no SIGKILL once it has ended
  EXPECT_TRUE(shell_.restarts.empty());
}

TEST_F(job_runner_test, CancelQueuedAndRunning) {
  auto& c = new_client();
  runner_->enqueue(user_job(c, 1, "running"));
  runner_->enqueue(user_job(c, 2, "queued"));
  EXPECT_FALSE(runner_->cancel(&c, 9, 0, true));
  ASSERT_TRUE(runner_->cancel(&c, 2, 0, true));
  auto d = dones(c);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].id, 2u);
  EXPECT_TRUE(d[0].cancelled);
  EXPECT_FALSE(d[0].ran);
  EXPECT_EQ(d[0].error, "cancelled before it started");
  EXPECT_TRUE(shell_.signals.empty());

  // Stopping the running one with SIGINT: a SIGINT it then reports is the one it was sent.
  ASSERT_TRUE(runner_->cancel(&c, 1, SIGINT, true));
  ASSERT_EQ(shell_.signals.size(), 1u);
  EXPECT_EQ(shell_.signals[0].sig, SIGINT);
  EXPECT_TRUE(shell_.signals[0].interrupt);
  EXPECT_EQ(dones(c).size(), 1u);  // until the shell answers
  answer(shell_.runs[0].seq, 130, SIGINT, /*interrupted=*/true);
  d = dones(c);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[1].id, 1u);
  EXPECT_TRUE(d[1].cancelled);
  EXPECT_EQ(d[1].signal, SIGINT);
  EXPECT_EQ(shell_.runs.size(), 1u);  // the cancelled one never ran
}

TEST_F(job_runner_test, ForwardedSignalNeitherStopsNorOvertakes) {
  auto& c = new_client();
  runner_->enqueue(user_job(c, 1, "first"));
  runner_->enqueue(user_job(c, 2, "second"));
  ASSERT_TRUE(runner_->cancel(&c, 1, SIGINT, /*stop=*/false));  // Ctrl-C
  ASSERT_EQ(shell_.signals.size(), 1u);
  EXPECT_FALSE(shell_.signals[0].interrupt);
  EXPECT_EQ(runner_->current()->kill_stage, kill_stage::none);
  answer(shell_.runs[0].seq, 130, SIGINT);
  auto d = dones(c);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].signal, SIGINT);
  EXPECT_FALSE(d[0].cancelled);
  // The signal's answer has not come: it could still reach the next command, which waits.
  EXPECT_EQ(shell_.runs.size(), 1u);
  runner_->signal_answered();
  ASSERT_EQ(shell_.runs.size(), 2u);
  run_for(50);
  EXPECT_EQ(shell_.signals.size(), 1u);
}

TEST_F(job_runner_test, KillBySerialStopsAsATimeoutDoes) {
  auto j = internal_job(1, "sleep");
  uint64_t serial = j->serial;
  j->grace_ms = 20;
  runner_->enqueue(std::move(j));
  EXPECT_FALSE(runner_->stop(serial + 1000, 0));
  ASSERT_TRUE(runner_->stop(serial, SIGUSR1));
  ASSERT_EQ(shell_.signals.size(), 1u);
  EXPECT_EQ(shell_.signals[0].sig, SIGUSR1);
  ASSERT_TRUE(run_until([&] { return shell_.signals.size() == 2; }));
  EXPECT_EQ(shell_.signals[1].sig, SIGKILL);
  answer(shell_.runs[0].seq, 137, SIGKILL);
  ASSERT_EQ(finished_.size(), 1u);
  EXPECT_TRUE(finished_[0].outcome.cancelled);
  EXPECT_EQ(finished_[0].outcome.signal, SIGKILL);
}

TEST_F(job_runner_test, ClientGoneHangsUpOnItsCommand) {
  auto& c = new_client();
  auto& other = new_client();
  runner_->enqueue(user_job(c, 1, "running"));
  runner_->enqueue(user_job(c, 2, "queued"));
  runner_->enqueue(user_job(other, 3, "other's"));
  runner_->client_gone(&c);
  EXPECT_EQ(runner_->queued(), 1u);  // only the other client's
  ASSERT_EQ(shell_.signals.size(), 1u);
  EXPECT_EQ(shell_.signals[0].sig, SIGHUP);
  EXPECT_EQ(runner_->current()->client, nullptr);
  answer(shell_.runs[0].seq, 129, SIGHUP);
  runner_->signal_answered();
  ASSERT_EQ(shell_.runs.size(), 2u);
  EXPECT_EQ(shell_.runs[1].text, "other's");
  EXPECT_TRUE(dones(c).empty());  // nobody to tell
}

TEST_F(job_runner_test, ShellLostMidCommand) {
  auto& c = new_client();
  runner_->enqueue(user_job(c, 1, "dies"));
  runner_->enqueue(user_job(c, 2, "was queued"));
  EXPECT_TRUE(runner_->ran_user_commands());
  shell_.generation_ = 2;
  shell_.serving_ = false;
  runner_->shell_lost(1, shell_loss{std::nullopt, SIGKILL, "its shell was killed by signal 9", true, false});
  auto d = dones(c);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].id, 1u);
  EXPECT_TRUE(d[0].shell_restarted);
  EXPECT_EQ(d[0].exit_code, 128 + SIGKILL);
  EXPECT_EQ(d[0].signal, SIGKILL);
  EXPECT_EQ(d[0].error_code, "shell_restarted");
  EXPECT_NE(d[0].error.find("ended while running the command (its shell was killed by signal 9)"), std::string::npos);
  EXPECT_NE(d[0].error.find("a new shell is being started"), std::string::npos);
  // The queued one expected the first's shell: it does not run in the next.
  shell_.serving_ = true;
  runner_->shell_ready();
  d = dones(c);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[1].id, 2u);
  EXPECT_TRUE(d[1].shell_restarted);
  EXPECT_FALSE(d[1].ran);
  EXPECT_TRUE(d[1].state_lost);
  EXPECT_EQ(shell_.runs.size(), 1u);
  // The next command runs, and does not report the loss the first already did.
  runner_->enqueue(user_job(c, 3, "next"));
  ASSERT_EQ(shell_.runs.size(), 2u);
  answer(shell_.runs[1].seq, 0);
  d = dones(c);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[2].exit_code, 0);
  EXPECT_FALSE(d[2].state_lost);
}

TEST_F(job_runner_test, CommandThatNeverReachedTheShellRunsInTheNext) {
  auto& c = new_client();
  shell_.gone_ = true;
  runner_->enqueue(user_job(c, 1, "cmd"));
  ASSERT_NE(runner_->current(), nullptr);
  EXPECT_TRUE(runner_->current()->undelivered);
  // No user command ran in that shell: its loss costs nothing, and the command waits.
  shell_.gone_ = false;
  shell_.generation_ = 2;
  shell_.serving_ = false;
  runner_->shell_lost(1, shell_loss{1, std::nullopt, "its shell exited with status 1", true, false});
  EXPECT_TRUE(dones(c).empty());
  EXPECT_EQ(runner_->queued(), 1u);
  shell_.serving_ = true;
  runner_->shell_ready();
  ASSERT_EQ(shell_.runs.size(), 1u);
  EXPECT_EQ(shell_.runs[0].text, "cmd");
  answer(shell_.runs[0].seq, 0);
  auto d = dones(c);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].exit_code, 0);
  EXPECT_FALSE(d[0].shell_restarted);
}

// A command cancelled while no shell had it yet is not run by the next shell: it ends
// cancelled, never run, instead of running later with a result that says cancelled.
TEST_F(job_runner_test, ACancelledCommandThatNeverReachedTheShellNeverRuns) {
  auto& c = new_client();
  shell_.gone_ = true;
  runner_->enqueue(user_job(c, 1, "cmd"));
  ASSERT_NE(runner_->current(), nullptr);
  EXPECT_TRUE(runner_->current()->undelivered);
  EXPECT_TRUE(runner_->cancel(&c, 1, 0, true));
  shell_.gone_ = false;
  shell_.generation_ = 2;
  shell_.serving_ = false;
  runner_->shell_lost(1, shell_loss{1, std::nullopt, "its shell exited with status 1", true, false});
  auto d = dones(c);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d[0].cancelled);
  EXPECT_FALSE(d[0].ran);
  EXPECT_EQ(d[0].error_code, "cancelled");
  EXPECT_EQ(runner_->queued(), 0u);
  shell_.serving_ = true;
  runner_->shell_ready();
  EXPECT_TRUE(shell_.runs.empty());
}

TEST_F(job_runner_test, ShellThatWillNotRestartRefusesWhatWaits) {
  auto& c = new_client();
  runner_->enqueue(user_job(c, 1, "runs"));
  runner_->enqueue(user_job(c, 2, "waits"));
  shell_.generation_ = 2;
  shell_.state_ = session_state::exited;
  shell_.failure_ = "its restart policy is never";
  runner_->shell_lost(1, shell_loss{0, std::nullopt, "its shell exited with status 0", false, false});
  runner_->shell_changed();
  auto d = dones(c);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_NE(d[0].error.find("no new shell starts"), std::string::npos);
  EXPECT_EQ(d[1].error_code, "session_failed");
  EXPECT_NE(d[1].error.find("session 's' is exited: its restart policy is never"), std::string::npos);
  runner_->enqueue(user_job(c, 3, "later"));
  EXPECT_EQ(shell_.retries, 3);  // each command asks a failed session to try again
  d = dones(c);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[2].error_code, "session_failed");
  EXPECT_EQ(shell_.runs.size(), 1u);
}

// fds mode: the client's pipes may still have writers (background jobs) when the command
// ends; the job is kept until the client has drained them and says so.
TEST_F(job_runner_test, ReleaseEndsAnFdsCommand) {
  auto& c = new_client();
  int out[2], err[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(err, O_CLOEXEC), 0);
  unique_fd out_w(out[1]), err_w(err[1]);  // a background job's copies
  auto j = user_job(c, 1, "bg &");
  j->io_fds = true;
  j->out_r = unique_fd(out[0]);
  j->err_r = unique_fd(err[0]);
  runner_->enqueue(std::move(j));
  answer(shell_.runs[0].seq, 0);
  auto d = dones(c);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d[0].release);
  EXPECT_TRUE(c.holds(1));  // still the client's until released
  runner_->release(&c, 2);         // not that one
  EXPECT_TRUE(c.holds(1));
  runner_->release(&c, 1);
  EXPECT_FALSE(c.holds(1));

  // Released ahead (before it ended): done with at once.
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  unique_fd out_w2(out[1]);
  j = user_job(c, 2, "bg2 &");
  j->io_fds = true;
  j->out_r = unique_fd(out[0]);
  runner_->enqueue(std::move(j));
  runner_->release(&c, 2);
  EXPECT_TRUE(c.holds(2));
  answer(shell_.runs[1].seq, 0);
  EXPECT_FALSE(c.holds(2));
}

TEST_F(job_runner_test, RefuseAllAnswersEveryJob) {
  auto& c = new_client();
  runner_->enqueue(user_job(c, 1, "runs"));
  runner_->enqueue(user_job(c, 2, "waits"));
  runner_->refuse_all("shutting_down", "not run", "stopped");
  auto d = dones(c);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].id, 2u);
  EXPECT_EQ(d[0].error, "not run");
  EXPECT_EQ(d[1].id, 1u);
  EXPECT_EQ(d[1].error, "stopped");
  EXPECT_EQ(runner_->current(), nullptr);
  EXPECT_EQ(runner_->queued(), 0u);
}

}  // namespace sbsh::daemon::job_runner_tests
