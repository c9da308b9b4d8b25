// The shell's channel belongs to the shell: no command can take it, hold it in a background
// job, or report a result of its own on it. Each test attacks from inside a session, as a
// command would, and checks that the result sbsh reports is never the forged one.
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fixture.h"
#include "ipc/shell_channel.h"

namespace sbsh::test::channel_tests {

using json = nlohmann::json;
using channel_test = daemon_test;

// bash's printf escapes for the little-endian bytes of `v`, `n` bytes of it.
std::string le_bytes(uint64_t v, int n) {
  std::string out;
  for (int i = 0; i < n; ++i, v >>= 8) out += fmt::format("\\x{:02x}", static_cast<unsigned>(v & 0xff));
  return out;
}

// A printf writing, on the shell's channel, a well-formed status (ipc/shell_channel.h) for run
// `seq` that says the command exited 0, without the run's nonce.
std::string forged_status(uint64_t seq) {
  std::string m = le_bytes(SBSH_CHANNEL_MAGIC, 4) + le_bytes(SBSH_CHANNEL_VERSION, 2) + le_bytes(SBSH_MSG_STATUS, 2) +
                  le_bytes(seq, 8) + le_bytes(0, 4 * 4) + le_bytes(static_cast<uint64_t>(::getpid()), 8) +
                  le_bytes(0, 8);
  static_assert(sizeof(sbsh_status_msg) == 48, "the forged message follows the struct");
  return fmt::format("printf '{}' >&{}", m, SBSH_CHANNEL_FD);
}

TEST_F(channel_test, AStatusACommandWritesOnTheChannelIsNeverReported) {
  ASSERT_EQ(exec("s", "true").code, 0);
  // Every run number a session this young can be at: one of them is the command's own.
  std::string text;
  for (uint64_t seq = 1; seq <= 40; ++seq) text += forged_status(seq) + "; ";
  text += "echo 'tests: 5 failed'; exit 1";
  auto r = sbsh({"exec", "-s", "s", "--json", "--", text});
  auto j = json::parse(r.out);
  // Never "exit 0 with empty output": the shell that let it through is replaced, and the
  // command's result says so.
  EXPECT_NE(j["exit_code"], 0) << r.out;
  EXPECT_TRUE(j["shell_restarted"].get<bool>()) << r.out;
  EXPECT_NE(j["error"].get<std::string>().find("channel"), std::string::npos) << r.out;
  // The session goes on in a new shell.
  EXPECT_EQ(exec("s", "echo fine").out, "fine\n");
}

TEST_F(channel_test, NoProcessTheShellStartsHoldsTheChannel) {
  // A subshell, a background job and a command substitution: each is a fork of the shell.
  auto r = exec("s",
                "( [ -e /proc/self/fd/254 ] || [ -e /proc/self/fd/253 ] && echo sub || echo none ); "
                "{ [ -e /proc/self/fd/254 ] || [ -e /proc/self/fd/253 ] && echo job || echo none; } & wait; "
                "echo $( [ -e /proc/self/fd/254 ] && echo subst || echo none ); "
                "[ -e /proc/self/fd/254 ] && echo shell");
  EXPECT_EQ(r.out, "none\nnone\nnone\nshell\n") << r.err;
  // A job left running cannot read the next command off the channel: the next one runs.
  EXPECT_EQ(exec("s", "( read -r x <&254 && echo took >" + dir + "/took ) >/dev/null 2>&1 &").code, 0);
  auto next = sbsh({"exec", "-s", "s", "-t", "20s", "--", "echo next"});
  EXPECT_EQ(next.code, 0) << next.err;
  EXPECT_EQ(next.out, "next\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/took"));
}

// A python3 probe run by the shell: pidfd_getfd of its channel, ptrace of it, a read of its
// memory, as a command would try them (the tester did the first).
std::string reach_in_probe() {
  return R"PY(
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
shell = os.getppid()
def call(*a):
    r = libc.syscall(*[ctypes.c_long(x) if isinstance(x, int) else x for x in a])
    return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
mine, theirs = iovec(ctypes.addressof(buf), 8), iovec(0x10000, 8)
pidfd = libc.syscall(ctypes.c_long(434), ctypes.c_long(shell), ctypes.c_long(0))  # pidfd_open
print("getfd", call(438, pidfd, 254, 0))                              # pidfd_getfd
print("ptrace", call(101, 16, shell, 0, 0))                           # ptrace(PTRACE_ATTACH)
print("vm", call(310, shell, ctypes.byref(mine), 1, ctypes.byref(theirs), 1, 0))  # process_vm_readv
try:
    open("/proc/%d/mem" % shell, "rb").close(); print("mem ok")
except OSError as e:
    print("mem", errno.errorcode[e.errno])
)PY";
}

TEST_F(channel_test, NoCommandCanTakeOrTraceTheShell) {
  auto r = sbsh({"exec", "-s", "s", "--", "python3 -c '" + reach_in_probe() + "'"});
  ASSERT_EQ(r.code, 0) << r.err;
  // Root's commands hold CAP_SYS_PTRACE: /proc/PID/mem stays open to them (the manual says
  // so), the rest is refused by name. Another user's are refused all of it by the kernel.
  EXPECT_EQ(r.out,
            std::string("getfd EPERM\nptrace EPERM\nvm EPERM\n") + (::geteuid() == 0 ? "mem ok\n" : "mem EACCES\n"));
  // The same calls at another process, or at another descriptor, are not refused.
  std::string other = "sleep 30 & python3 -c 'import ctypes,os; l=ctypes.CDLL(None); "
                      "p=l.syscall(434, int(os.sys.argv[1]), 0); print(l.syscall(438, p, 1, 0) >= 0)' $!; kill $!";
  r = sbsh({"exec", "-s", "s", "--", other});
  EXPECT_EQ(r.out, "True\n") << r.err;
  // The shell itself goes on serving.
  EXPECT_EQ(exec("s", "echo fine").out, "fine\n");
}

// The same as a user other than root, with sbshd of that user: every call is refused by the
// kernel, a forged status is not reported, and sbshd, which may not read /proc/PID/cwd of
// the undumpable shell, still shows where it is.
TEST_F(channel_test, AnotherUsersShellIsOutOfItsCommandsReachToo) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run an sbshd as another user";
  nobodys_sbsh nobody(dir);
  auto r = nobody.sbsh({"exec", "-s", "u", "--", "python3 -c '" + reach_in_probe() + "'"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "getfd EPERM\nptrace EPERM\nvm EPERM\nmem EACCES\n");
  EXPECT_EQ(nobody.sbsh({"exec", "-s", "u", "cd /tmp && id -u"}).out, "65534\n");
  auto ls = nobody.sbsh({"session", "ls", "--json"});
  EXPECT_NE(ls.out.find("\"cwd\":\"/tmp\""), std::string::npos) << ls.out << ls.err;
  std::string text;
  for (uint64_t seq = 1; seq <= 40; ++seq) text += forged_status(seq) + "; ";
  auto forged = nobody.sbsh({"exec", "-s", "u", "--json", "--", text + "exit 1"});
  EXPECT_NE(forged.out.find("\"shell_restarted\":true"), std::string::npos) << forged.out;
  EXPECT_EQ(forged.out.find("\"exit_code\":0"), std::string::npos) << forged.out;
  EXPECT_EQ(nobody.sbsh({"shutdown"}).code, 0);
}

}  // namespace sbsh::test::channel_tests
