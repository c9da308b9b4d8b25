// daemon/log: which stream is the journal, the journal fields of a message, and the log file
// that rotates instead of growing.
#include "daemon/log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace sbsh::daemon::log_tests {

bool has(const std::vector<std::string>& fields, const std::string& f) {
  return std::find(fields.begin(), fields.end(), f) != fields.end();
}

bool has_prefix(const std::vector<std::string>& fields, const std::string& prefix) {
  return std::any_of(fields.begin(), fields.end(), [&](const std::string& f) { return f.starts_with(prefix); });
}

class temp_dir {
 public:
  temp_dir() {
    char tmpl[] = "/tmp/sbsh-log-test.XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~temp_dir() { std::filesystem::remove_all(path_); }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(log, PriorityComesFromTheLevel) {
  EXPECT_TRUE(has(journal_fields(spdlog::level::trace, "m"), "PRIORITY=7"));
  EXPECT_TRUE(has(journal_fields(spdlog::level::debug, "m"), "PRIORITY=7"));
  EXPECT_TRUE(has(journal_fields(spdlog::level::info, "m"), "PRIORITY=6"));
  EXPECT_TRUE(has(journal_fields(spdlog::level::warn, "m"), "PRIORITY=4"));
  EXPECT_TRUE(has(journal_fields(spdlog::level::err, "m"), "PRIORITY=3"));
  EXPECT_TRUE(has(journal_fields(spdlog::level::critical, "m"), "PRIORITY=2"));
  auto f = journal_fields(spdlog::level::info, "sbshd 0.1.0 listening on /run/x");
  EXPECT_TRUE(has(f, "MESSAGE=sbshd 0.1.0 listening on /run/x"));
  EXPECT_TRUE(has(f, "SYSLOG_IDENTIFIER=sbshd"));
  EXPECT_FALSE(has_prefix(f, "SBSH_SESSION="));
  EXPECT_FALSE(has_prefix(f, "SBSH_EXEC_ID="));
}

TEST(log, SessionAndExecIdAreTakenFromTheMessagesConvention) {
  auto f = journal_fields(spdlog::level::warn, "session web.1: shell lost: killed");
  EXPECT_TRUE(has(f, "SBSH_SESSION=web.1"));
  EXPECT_FALSE(has_prefix(f, "SBSH_EXEC_ID="));
  EXPECT_TRUE(has(journal_fields(spdlog::level::info, "session build created in /src"), "SBSH_SESSION=build"));
  f = journal_fields(spdlog::level::debug, "session build: exec 42 done: exit 0");
  EXPECT_TRUE(has(f, "SBSH_SESSION=build"));
  EXPECT_TRUE(has(f, "SBSH_EXEC_ID=42"));
  EXPECT_TRUE(has(f, "MESSAGE=session build: exec 42 done: exit 0"));
  EXPECT_TRUE(has(journal_fields(spdlog::level::debug, "session b: exec 7"), "SBSH_EXEC_ID=7"));
}

TEST(log, NoFieldsFromMessagesThatDoNotFollowTheConvention) {
  for (const char* m : {"sessions: 3", "session", "session : x", "session -bad: x", "a session web: x",
                        "session web", "session wébapp: x", "process 4 starting in session web"}) {
    auto f = journal_fields(spdlog::level::info, m);
    EXPECT_FALSE(has_prefix(f, "SBSH_SESSION=")) << m;
  }
  for (const char* m : {"session web: exec x", "session web: exec 12abc done", "session web: exec ", "session web: exe 3",
                        "session web: exec 123456789012345678901234 done"}) {
    auto f = journal_fields(spdlog::level::info, m);
    EXPECT_TRUE(has(f, "SBSH_SESSION=web")) << m;
    EXPECT_FALSE(has_prefix(f, "SBSH_EXEC_ID=")) << m;
  }
}

TEST(log, OnlyTheStreamNamedByJournalStreamIsTheJournal) {
  temp_dir d;
  std::string a = d.path() + "/a", b = d.path() + "/b";
  std::ofstream(a) << "a";
  std::ofstream(b) << "b";
  struct stat st {};
  ASSERT_EQ(::stat(a.c_str(), &st), 0);
  std::string named = fmt::format("{}:{}", st.st_dev, st.st_ino);
  int fd_a = ::open(a.c_str(), O_RDONLY | O_CLOEXEC);
  int fd_b = ::open(b.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd_a, 0);
  ASSERT_GE(fd_b, 0);
  EXPECT_TRUE(stderr_is_journal(named.c_str(), fd_a));
  EXPECT_FALSE(stderr_is_journal(named.c_str(), fd_b));
  EXPECT_FALSE(stderr_is_journal(nullptr, fd_a));
  for (const std::string& bad : {std::string(), std::string("garbage"), named + ":1", named + "x",
                                 fmt::format("{}", st.st_dev), fmt::format("{}:{}", st.st_dev, st.st_ino + 1)})
    EXPECT_FALSE(stderr_is_journal(bad.c_str(), fd_a)) << bad;
  ::close(fd_a);
  ::close(fd_b);
  EXPECT_FALSE(stderr_is_journal(named.c_str(), 1000));  // not open
}

TEST(log, LogFileRotatesAtItsSizeAndKeepsItsCount) {
  temp_dir d;
  int saved_stderr = ::dup(STDERR_FILENO);
  ASSERT_GE(saved_stderr, 0);
  log_options o;
  o.level = "info";
  o.file = d.path() + "/sbshd.log";
  o.max_bytes = 2048;
  o.files = 2;
  ASSERT_TRUE(setup_logging(o).ok());
  for (int i = 0; i < 200; ++i) spdlog::info("line {} of a log that must not grow without bound", i);
  // fd 2 follows the current file, so what children write there is rotated with it.
  struct stat err {}, cur {};
  ASSERT_EQ(::fstat(STDERR_FILENO, &err), 0);
  ASSERT_EQ(::stat(o.file.c_str(), &cur), 0);
  EXPECT_EQ(err.st_ino, cur.st_ino);
  spdlog::set_default_logger(spdlog::stderr_logger_mt("restored"));
  ::dup2(saved_stderr, STDERR_FILENO);
  ::close(saved_stderr);

  for (const char* name : {"sbshd.log", "sbshd.1.log", "sbshd.2.log"}) {
    std::string p = d.path() + "/" + name;
    struct stat st {};
    ASSERT_EQ(::stat(p.c_str(), &st), 0) << p;
    EXPECT_LE(st.st_size, 2048) << p;
    // Every message is on disk at once (a rotated file is a full one).
    EXPECT_GT(st.st_size, std::string(name) == "sbshd.log" ? 0 : 1900) << p;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << p;
  }
  EXPECT_FALSE(std::filesystem::exists(d.path() + "/sbshd.3.log"));
  std::ifstream last(o.file);
  std::string text((std::istreambuf_iterator<char>(last)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("line 199 of a log"), std::string::npos) << text;
}

TEST(log, LevelsAndFormatsAreChecked) {
  log_options o;
  o.level = "loud";
  auto s = setup_logging(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.err().message.find("unknown log level 'loud'"), std::string::npos);
  o.level = "info";
  o.format = "xml";
  s = setup_logging(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.err().message.find("unknown log format 'xml'"), std::string::npos);
  // A file where the log's directory should be: it cannot be made.
  temp_dir d;
  std::ofstream(d.path() + "/file") << "x";
  o.format = "text";
  o.file = d.path() + "/file/sbshd.log";
  s = setup_logging(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.err().message.find("cannot open the log file " + o.file), std::string::npos) << s.err().message;
}

}  // namespace sbsh::daemon::log_tests
