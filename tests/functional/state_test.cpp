// The session table on disk (daemon/session_store.h): one file per session under
// STATE/sessions, one per distinct environment under STATE/environs, kept as sessions come
// and go, read back after a restart, what cannot be read set aside; the single
// STATE/sessions.msgpack of earlier versions converted; the bound on all definitions, with
// each environment counted once.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ipc/messages.h"
#include "fixture.h"

namespace sbsh::test::state_tests {

namespace fs = std::filesystem;
using std::chrono::seconds;

class state_test : public daemon_test {
 protected:
  // The files in STATE/`sub` that hold something (NAME.msgpack), by name less the ending.
  std::vector<std::string> files_in(const std::string& sub) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(state + "/" + sub, ec)) {
      std::string n = e.path().filename().string();
      if (n.size() > 8 && n.substr(n.size() - 8) == ".msgpack") out.push_back(n.substr(0, n.size() - 8));
    }
    return out;
  }
  bool set_aside_in(const std::string& sub, const std::string& prefix) {
    std::error_code ec;
    return std::ranges::any_of(fs::directory_iterator(state + "/" + sub, ec), [&](const fs::directory_entry& e) {
      return e.path().filename().string().starts_with(prefix + ".corrupt-");
    });
  }
  // Creates session `name` through the library with exactly `environment` as its creator's.
  sbsh::status create_with(const std::string& name, std::vector<std::string> environment) {
    session_spec spec;
    spec.name = name;
    spec.cwd = dir;
    spec.environment = std::move(environment);
    spec.restart = "never";  // a shell that cannot start with it is not started again
    return conn().create_session(spec);
  }
};

TEST_F(state_test, SessionsSurviveARestartEachInItsOwnFile) {
  ASSERT_EQ(sbsh({"session", "create", "a", "-e", "GREETING=hello"}).code, 0);
  ASSERT_EQ(sbsh({"session", "create", "b"}).code, 0);
  // session create answers once the definition is on disk.
  EXPECT_TRUE(fs::exists(state + "/sessions/a.msgpack"));
  EXPECT_TRUE(fs::exists(state + "/sessions/b.msgpack"));
  EXPECT_FALSE(fs::exists(state + "/sessions.msgpack"));
  stop_daemon();
  start_daemon();
  EXPECT_EQ(exec("a", "echo $GREETING").out, "hello\n");
  EXPECT_FALSE(listed("b").is_null());
}

// Idle times are saved all in one file (STATE/activity.msgpack), not by writing each
// session's file again: a shutdown of 10,000 sessions writes one file. After a restart each
// session is idle since its last command, not since it was created.
TEST_F(state_test, IdleTimesAreSavedInOneFileAndOutliveARestart) {
  constexpr int kSessions = 24;
  std::vector<std::string> names;
  for (int i = 0; i < kSessions; ++i) {
    names.push_back("m" + std::to_string(i));
    ASSERT_EQ(sbsh({"session", "create", names.back(), "--idle-expiry", "1h"}).code, 0);
  }
  std::map<std::string, fs::file_time_type> before;
  for (const auto& n : names) before[n] = fs::last_write_time(state + "/sessions/" + n + ".msgpack");
  // ISO 8601 times in UTC, which sort as text.
  std::string created = listed(names[0]).at("idle_since").get<std::string>();
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  for (const auto& n : names) ASSERT_EQ(exec(n, "v=" + n).code, 0);
  stop_daemon();
  EXPECT_TRUE(fs::exists(state + "/activity.msgpack"));
  for (const auto& n : names)
    EXPECT_EQ(fs::last_write_time(state + "/sessions/" + n + ".msgpack"), before[n]) << n << "'s file was written again";
  start_daemon();
  for (const auto& n : names) {
    auto s = listed(n);
    ASSERT_FALSE(s.is_null()) << n;
    // Idle since its command, a second after the first was created.
    EXPECT_GT(s.at("idle_since").get<std::string>(), created) << n;
  }
}

// A damaged idle times' file is set aside; the sessions load with the idle times their own
// files have.
TEST_F(state_test, ADamagedIdleTimesFileIsSetAside) {
  ASSERT_EQ(sbsh({"session", "create", "d", "--idle-expiry", "1h"}).code, 0);
  stop_daemon();
  std::ofstream(state + "/activity.msgpack", std::ios::trunc) << "not msgpack";
  start_daemon();
  EXPECT_FALSE(listed("d").is_null());
  EXPECT_TRUE(set_aside_in("", "activity.msgpack"));
}

TEST_F(state_test, SessionsFromOneClientShareOneEnvironmentFile) {
  for (int i = 0; i < 12; ++i) ASSERT_EQ(sbsh({"session", "create", "s" + std::to_string(i)}).code, 0);
  EXPECT_EQ(files_in("sessions").size(), 12u);
  auto envs = files_in("environs");
  ASSERT_EQ(envs.size(), 1u);
  // That one file is what every session starts with: the creating client's environment.
  auto m = read_file(state + "/environs/" + envs[0] + ".msgpack");
  EXPECT_NE(m.find("HOME=" + dir), std::string::npos);
  EXPECT_EQ(read_file(state + "/sessions/s3.msgpack").find("HOME="), std::string::npos);
  stop_daemon();
  start_daemon();
  EXPECT_EQ(files_in("environs").size(), 1u);
  EXPECT_EQ(exec("s11", "echo $HOME").out, dir + "/home\n");
}

TEST_F(state_test, ARemovedSessionsFileGoesAndAnUnusedEnvironmentIsCollected) {
  ASSERT_EQ(sbsh({"session", "create", "one"}).code, 0);
  auto c = create_with("two", {"HOME=" + dir, "ONLY_TWO=2"});
  ASSERT_TRUE(c) << c.err().message;
  ASSERT_EQ(files_in("environs").size(), 2u);
  ASSERT_EQ(sbsh({"session", "rm", "two"}).code, 0);
  EXPECT_TRUE(wait_until([&] { return !fs::exists(state + "/sessions/two.msgpack"); }, seconds(10)));
  EXPECT_TRUE(wait_until([&] { return files_in("environs").size() == 1; }, seconds(10)));
  ASSERT_EQ(sbsh({"session", "rm", "one"}).code, 0);
  EXPECT_TRUE(wait_until([&] { return files_in("sessions").empty() && files_in("environs").empty(); }, seconds(10)));
}

TEST_F(state_test, TheSingleFileOfEarlierVersionsIsConverted) {
  stop_daemon();
  ipc::sessions_file old;
  session_spec a;
  a.cwd = dir;
  a.env = {"GREETING=from-before"};
  a.environment = {"HOME=" + dir, "PATH=/usr/bin:/bin", "FROM_CLIENT=kept"};
  old.sessions.emplace("old-a", a);
  session_spec b;
  b.cwd = dir;  // saved before sessions kept their creator's environment
  old.sessions.emplace("old-b", b);
  std::ofstream(state + "/sessions.msgpack", std::ios::binary) << ipc::encode(old);
  start_daemon();
  EXPECT_EQ(exec("old-a", "echo $GREETING $FROM_CLIENT").out, "from-before kept\n");
  EXPECT_FALSE(listed("old-b").is_null());
  EXPECT_TRUE(wait_until([&] { return !fs::exists(state + "/sessions.msgpack"); }, seconds(10)));
  EXPECT_TRUE(fs::exists(state + "/sessions/old-a.msgpack"));
  EXPECT_TRUE(fs::exists(state + "/sessions/old-b.msgpack"));
  // And from there on, as any session.
  stop_daemon();
  start_daemon();
  EXPECT_EQ(exec("old-a", "echo $GREETING $FROM_CLIENT").out, "from-before kept\n");
}

TEST_F(state_test, AnUnreadableSessionFileIsSetAsideAndTheOthersLoad) {
  ASSERT_EQ(sbsh({"session", "create", "good", "-e", "X=good"}).code, 0);
  ASSERT_EQ(sbsh({"session", "create", "bad"}).code, 0);
  auto c = create_with("lost-env", {"HOME=" + dir, "ONLY_HERE=1"});
  ASSERT_TRUE(c) << c.err().message;
  stop_daemon();
  std::ofstream(state + "/sessions/bad.msgpack", std::ios::trunc) << "this is not msgpack";
  // The environment only lost-env has: its session cannot start as defined.
  std::string lost;
  for (const auto& h : files_in("environs"))
    if (read_file(state + "/environs/" + h + ".msgpack").find("ONLY_HERE") != std::string::npos) lost = h;
  ASSERT_FALSE(lost.empty());
  fs::remove(state + "/environs/" + lost + ".msgpack");
  start_daemon();
  EXPECT_EQ(exec("good", "echo $X").out, "good\n");
  EXPECT_TRUE(listed("bad").is_null());
  EXPECT_TRUE(listed("lost-env").is_null());
  EXPECT_TRUE(set_aside_in("sessions", "bad.msgpack"));
  EXPECT_TRUE(set_aside_in("sessions", "lost-env.msgpack"));
  // A name set aside is free again.
  EXPECT_EQ(sbsh({"session", "create", "bad"}).code, 0);
}

// A half-written file (the temporary one a crash left) is never read as a session.
TEST_F(state_test, AFileLeftHalfWrittenIsIgnored) {
  ASSERT_EQ(sbsh({"session", "create", "whole"}).code, 0);
  stop_daemon();
  std::ofstream(state + "/sessions/half.msgpack.tmp") << std::string(2, '\0');
  start_daemon();
  EXPECT_FALSE(listed("whole").is_null());
  EXPECT_TRUE(listed("half").is_null());
  EXPECT_FALSE(fs::exists(state + "/sessions/half.msgpack.tmp"));
}

// sbshd killed (as by a crash) right after its sessions were made: they all load, and an
// environment file that no session names (its last session's removal was cut short) goes.
TEST_F(state_test, AfterACrashTheSessionsLoadAndAnOrphanEnvironmentGoes) {
  for (int i = 0; i < 5; ++i) ASSERT_EQ(sbsh({"session", "create", "c" + std::to_string(i)}).code, 0);
  kill_daemon();
  std::string orphan = state + "/environs/" + std::string(64, 'a') + ".msgpack";
  std::ofstream(orphan) << "left by a removal cut short";
  start_daemon();
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(listed("c" + std::to_string(i)).is_null()) << i;
  EXPECT_TRUE(wait_until([&] { return !fs::exists(orphan); }, seconds(10)));
  EXPECT_EQ(files_in("environs").size(), 1u);
}

// Each distinct environment counts once towards the bound on all definitions: many sessions
// may share a large one; distinct large ones are refused past the bound, with the figures.
TEST_F(state_test, TheBoundOnDefinitionsCountsEachEnvironmentOnce) {
  // 900 KiB in nine variables (one variable may hold at most 128 KiB for execve).
  auto big = [&](const std::string& prefix) {
    std::vector<std::string> env{"HOME=" + dir};
    for (int v = 0; v < 9; ++v) env.push_back(prefix + std::to_string(v) + "=" + std::string(100 << 10, 'x'));
    return env;
  };
  for (int i = 0; i < 12; ++i) {
    auto c = create_with("same" + std::to_string(i), big("BIG"));
    ASSERT_TRUE(c) << i << ": " << c.err().message;
  }
  std::string refusal;
  for (int i = 0; i < 12 && refusal.empty(); ++i) {
    auto c = create_with("other" + std::to_string(i), big("OTHER" + std::to_string(i) + "_"));
    if (!c) refusal = c.err().message;
  }
  ASSERT_FALSE(refusal.empty()) << "twelve distinct environments of 900 KiB were all kept";
  EXPECT_NE(refusal.find("more than the 8 MiB sbshd keeps"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("distinct environments"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("sbsh session rm"), std::string::npos) << refusal;
}

}  // namespace sbsh::test::state_tests
