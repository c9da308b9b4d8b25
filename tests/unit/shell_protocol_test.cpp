// daemon/shell_protocol.cpp: status lines, the text slot, and the start-up script in a real bash.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "daemon/shell_protocol.h"

namespace sbsh::daemon {
namespace {

TEST(shell_protocol, StatusLines) {
  EXPECT_EQ(parse_status_line("\0370"), 0);
  EXPECT_EQ(parse_status_line("\037130"), 130);
  EXPECT_EQ(parse_status_line("\037255"), 255);
  EXPECT_EQ(parse_status_line("\037256"), std::nullopt);
  EXPECT_EQ(parse_status_line("\037"), std::nullopt);
  EXPECT_EQ(parse_status_line("0"), std::nullopt);        // no \037: command output
  EXPECT_EQ(parse_status_line("\037-1"), std::nullopt);
  EXPECT_EQ(parse_status_line("\0371x"), std::nullopt);
  EXPECT_EQ(parse_status_line("\0370000"), std::nullopt);  // longer than any status
}

std::string slot_contents(int fd) {
  struct stat st{};
  EXPECT_EQ(::fstat(fd, &st), 0);
  std::string s(static_cast<size_t>(st.st_size), '\0');
  EXPECT_EQ(::pread(fd, s.data(), s.size(), 0), st.st_size);
  return s;
}

TEST(shell_protocol, TextSlotKeepsItsSizeUntilALargeText) {
  int fd = ::memfd_create("text", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  size_t size = 0;
  ASSERT_TRUE(store_command_text(fd, "echo longer", size));
  ASSERT_TRUE(store_command_text(fd, "ls", size));
  // The new text and its NUL first; the tail of the longer one after it is never read.
  EXPECT_EQ(slot_contents(fd), std::string("ls\0o longer\0", 12));
  EXPECT_EQ(size, 12u);
  std::string big(2u << 20, 'x');
  ASSERT_TRUE(store_command_text(fd, big, size));
  ASSERT_TRUE(store_command_text(fd, "pwd", size));
  EXPECT_EQ(slot_contents(fd), std::string("pwd\0", 4));  // cut back: its memory is not kept
  ::close(fd);
}

// The start-up script and the run lines, in a real bash with slots of this process: the
// status of each command, `$?` carried into the next, stdin /dev/null unless the in slot is
// asked for, and output in the out slot only.
TEST(shell_protocol, RunsCommandsInARealBash) {
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC | O_NONBLOCK), 0);
  shell_slots slots;
  slots.owner = ::getpid();
  slots.text = ::memfd_create("text", MFD_CLOEXEC);
  int in[2];  // the caller's stdin for the one command run with kRunLineStdin
  ASSERT_EQ(::pipe2(in, O_CLOEXEC), 0);
  ASSERT_EQ(::write(in[1], "piped\n", 6), 6);
  ::close(in[1]);
  slots.in = in[0];
  slots.out = out[1];
  slots.err = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  size_t size = 0;
  char tmpl[] = "/tmp/sbsh-links.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string links = std::string(tmpl) + "/l i n k s";  // quoted in the script
  ASSERT_TRUE(point_links(links, slots));
  std::string script = shell_init_script(links);
  std::string status, got;  // statuses; each command's output, ended by '|'
  // One bash, each command stored and then run by the run line, one at a time.
  int to[2], from[2];
  ASSERT_EQ(::pipe2(to, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(from, O_CLOEXEC), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(to[0], 0);
    ::dup2(from[1], 1);
    ::execlp("bash", "bash", "--noprofile", "--norc", nullptr);
    ::_exit(127);
  }
  ::close(to[0]);
  ::close(from[1]);
  ASSERT_EQ(::write(to[1], script.data(), script.size()), static_cast<ssize_t>(script.size()));
  struct step {
    const char* cmd;
    std::string_view line;
  };
  // `cat` reads /dev/null under kRunLine (nothing, at once) and the in slot under kRunLineStdin.
  for (auto [cmd, run] : {step{"echo one", kRunLine}, step{"false", kRunLine}, step{"echo \"prev=$?\"", kRunLine},
                          step{"cat", kRunLine}, step{"cat", kRunLineStdin}, step{"(exit 7)", kRunLine}}) {
    ASSERT_TRUE(store_command_text(slots.text, cmd, size));
    ASSERT_EQ(::write(to[1], run.data(), run.size()), static_cast<ssize_t>(run.size()));
    std::string line;
    char c;
    while (::read(from[0], &c, 1) == 1 && c != '\n') line += c;
    auto v = parse_status_line(line);
    ASSERT_TRUE(v.has_value()) << "not a status line: " << line;
    status += std::to_string(*v) + " ";
    // The command has ended: what it wrote is in the out pipe now.
    char buf[256];
    for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
    got += '|';
  }
  ::close(to[1]);
  int st;
  ::waitpid(pid, &st, 0);
  ::close(from[0]);
  EXPECT_EQ(status, "0 1 0 0 0 7 ");
  for (int fd : {slots.text, slots.in, slots.out, slots.err}) ::close(fd);
  ::close(out[0]);
  EXPECT_EQ(got, "one\n||prev=1\n||piped\n||");
  remove_links(links);
  EXPECT_EQ(::rmdir(tmpl), 0) << "the link directory was not removed";
}

// A new owner takes a shell over by pointing its links at slots of its own; the old targets
// are replaced, not added to, and removal leaves nothing.
TEST(shell_protocol, LinksArePointedAgainAndRemoved) {
  char tmpl[] = "/tmp/sbsh-links.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string links = std::string(tmpl) + "/shell";
  auto target = [&](const char* name) {
    char buf[256];
    ssize_t n = ::readlink((links + "/" + name).c_str(), buf, sizeof buf);
    return n < 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
  };
  ASSERT_TRUE(point_links(links, {100, 3, 4, 5, 6}));
  EXPECT_EQ(target("t"), "/proc/100/fd/3");
  EXPECT_EQ(target("e"), "/proc/100/fd/6");
  ASSERT_TRUE(point_links(links, {200, 7, 8, 9, 10}));
  EXPECT_EQ(target("t"), "/proc/200/fd/7");
  EXPECT_EQ(target("i"), "/proc/200/fd/8");
  EXPECT_EQ(target("o"), "/proc/200/fd/9");
  EXPECT_EQ(target("e"), "/proc/200/fd/10");
  struct stat st{};
  ASSERT_EQ(::stat(links.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ::close(::open((links + "/w").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));  // the wrapper's
  remove_links(links);
  EXPECT_EQ(::access(links.c_str(), F_OK), 0) << "removed while the wrapper's socket is there";
  remove_links(links, "w");
  EXPECT_NE(::access(links.c_str(), F_OK), 0);
  EXPECT_EQ(::rmdir(tmpl), 0);
}

}  // namespace
}  // namespace sbsh::daemon
