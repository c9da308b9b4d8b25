// sbsh exec --jsonl on a real sbshd: the events arrive as the command runs (read from the pipe
// before it ends), in order; output that is not UTF-8 comes in base64 with its exact bytes;
// a character split across writes arrives whole; "finished" is exec --json's object; and
// with --json or --jsonl, sbsh's own failures are a JSON object on stdout too.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <set>

#include <nlohmann/json.hpp>

#include "fixture.h"

namespace sbsh::test {

using json = nlohmann::json;

namespace jsonl_tests {

using jsonl_test = daemon_test;

std::vector<json> lines_of(const std::string& out) {
  std::vector<json> v;
  size_t start = 0;
  while (start < out.size()) {
    size_t nl = out.find('\n', start);
    if (nl == std::string::npos) nl = out.size();
    v.push_back(json::parse(out.substr(start, nl - start)));
    start = nl + 1;
  }
  return v;
}

std::string decode_base64(const std::string& s) {
  static const std::string kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    size_t v = kAlphabet.find(c);
    if (v == std::string::npos) return "<not base64>";
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

// The bytes of one stream, from its chunk events; every chunk has exactly one of the keys.
std::string stream_bytes(const std::vector<json>& events, const std::string& type, bool* any_base64 = nullptr) {
  std::string bytes;
  for (const auto& e : events) {
    if (e["type"] != type) continue;
    EXPECT_NE(e.contains("data"), e.contains("data_base64")) << e.dump();
    if (e.contains("data")) {
      bytes += e["data"].get<std::string>();
    } else {
      bytes += decode_base64(e["data_base64"].get<std::string>());
      if (any_base64 != nullptr) *any_base64 = true;
    }
  }
  return bytes;
}

// sbsh running with its stdout on a pipe that the test reads line by line as it comes.
struct live_sbsh {
  pid_t pid = -1;
  int out = -1;
  std::string buf;

  explicit live_sbsh(const std::vector<std::string>& argv) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) std::abort();
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    auto args = exec_argv(argv);
    if (posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ) != 0) pid = -1;
    posix_spawn_file_actions_destroy(&fa);
    ::close(p[1]);
    out = p[0];
  }
  ~live_sbsh() {
    if (out >= 0) ::close(out);
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  live_sbsh(const live_sbsh&) = delete;
  live_sbsh& operator=(const live_sbsh&) = delete;

  // The next line, or "" when none came within `limit` (or the pipe ended).
  std::string next_line(std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      if (size_t nl = buf.find('\n'); nl != std::string::npos) {
        std::string line = buf.substr(0, nl);
        buf.erase(0, nl + 1);
        return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return "";
      pollfd pf{out, POLLIN, 0};
      if (::poll(&pf, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[4096];
      ssize_t n = ::read(out, chunk, sizeof chunk);
      if (n <= 0) return "";
      buf.append(chunk, static_cast<size_t>(n));
    }
  }
  int wait_exit() {
    int st = 0;
    ::waitpid(pid, &st, 0);
    pid = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
};

TEST_F(jsonl_test, OutputThatIsNotUtf8ArrivesInBase64WithItsExactBytes) {
  auto r = sbsh({"exec", "--jsonl", "-s", "b", R"(printf '\xff\xfe\x00x'; printf 'ok\n' >&2)"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto ev = lines_of(r.out);
  bool base64 = false;
  EXPECT_EQ(stream_bytes(ev, "stdout", &base64), std::string("\xff\xfe\0x", 4));
  EXPECT_TRUE(base64);
  EXPECT_EQ(stream_bytes(ev, "stderr"), "ok\n");
  for (const auto& e : ev) {
    if (e["type"] == "stdout") {
      EXPECT_FALSE(e.contains("data")) << e.dump();
    }
  }
}

TEST_F(jsonl_test, ACharacterSplitAcrossWritesArrivesWhole) {
  auto r = sbsh({"exec", "--jsonl", "-s", "u", "printf 'caf\\xc3'; sleep 0.2; printf '\\xa9!'"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto ev = lines_of(r.out);
  bool base64 = false;
  EXPECT_EQ(stream_bytes(ev, "stdout", &base64), "caf\xc3\xa9!");
  EXPECT_FALSE(base64) << r.out;
  bool whole = false;
  for (const auto& e : ev)
    if (e["type"] == "stdout" && e["data"].get<std::string>().find("\xc3\xa9") != std::string::npos) whole = true;
  EXPECT_TRUE(whole) << r.out;
  // The output that ends inside a character: what is left goes out alone, in base64.
  r = sbsh({"exec", "--jsonl", "-s", "u", "printf 'a\\xe2\\x82'"});
  ASSERT_EQ(r.code, 0) << r.err;
  ev = lines_of(r.out);
  base64 = false;
  EXPECT_EQ(stream_bytes(ev, "stdout", &base64), "a\xe2\x82");
  EXPECT_TRUE(base64) << r.out;
  EXPECT_EQ(ev[ev.size() - 2]["data_base64"], "4oI=") << r.out;
}

TEST_F(jsonl_test, EventsComeInOrderAndFinishedIsTheJsonResult) {
  const std::string cmd = "echo one; echo two >&2; echo three; (exit 3)";
  auto js = sbsh({"exec", "--json", "-s", "o", cmd});
  ASSERT_EQ(js.code, 3) << js.err;
  auto r = sbsh({"exec", "--jsonl", "-s", "o", cmd});
  ASSERT_EQ(r.code, 3) << r.err;
  auto ev = lines_of(r.out);
  ASSERT_GE(ev.size(), 4u) << r.out;
  EXPECT_EQ(ev.front()["type"], "started");
  EXPECT_EQ(ev.front()["session"], "o");
  EXPECT_EQ(ev.front()["id"].get<std::string>()[0], '%') << ev.front().dump();
  EXPECT_TRUE(ev.front()["generation"].is_number()) << ev.front().dump();
  EXPECT_EQ(ev.back()["type"], "finished");
  for (size_t i = 1; i + 1 < ev.size(); ++i) EXPECT_TRUE(ev[i]["type"] == "stdout" || ev[i]["type"] == "stderr") << ev[i];
  EXPECT_EQ(stream_bytes(ev, "stdout"), "one\nthree\n");
  EXPECT_EQ(stream_bytes(ev, "stderr"), "two\n");

  json fin = ev.back();
  fin.erase("type");
  json want = json::parse(js.out);
  std::set<std::string> fin_keys, want_keys;
  for (auto it = fin.begin(); it != fin.end(); ++it) fin_keys.insert(it.key());
  for (auto it = want.begin(); it != want.end(); ++it) want_keys.insert(it.key());
  EXPECT_EQ(fin_keys, want_keys);
  for (const auto& k : want_keys) {
    if (k != "duration_ms" && k != "started_at" && k != "id") {
      EXPECT_EQ(fin[k], want[k]) << k;
    }
  }
  EXPECT_EQ(fin["exit_code"], 3);
  EXPECT_EQ(fin["id"], ev.front()["id"]);  // the command's, kept under it
  EXPECT_EQ(fin["stdout"], "one\nthree\n");
  EXPECT_EQ(fin["generation"], ev.front()["generation"]);
}

TEST_F(jsonl_test, OutputStreamsWhileTheCommandRuns) {
  // The command goes on only once the test has read its first line from sbsh's stdout: output
  // held back until the end would never come.
  std::string gate = dir + "/gate";
  live_sbsh p({bin("sbsh"), "--socket", sock, "--no-autostart", "exec", "--jsonl", "-s", "live",
               "echo first; while [ ! -e " + shell_quote(gate) + " ]; do sleep 0.02; done; echo second"});
  ASSERT_GT(p.pid, 0);
  auto started = json::parse(p.next_line(std::chrono::seconds(30)));
  EXPECT_EQ(started["type"], "started");
  std::string line = p.next_line(std::chrono::seconds(30));
  ASSERT_FALSE(line.empty()) << "no output before the command ended";
  auto first = json::parse(line);
  EXPECT_EQ(first["type"], "stdout");
  EXPECT_EQ(first["data"], "first\n");
  int fd = ::open(gate.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  auto second = json::parse(p.next_line(std::chrono::seconds(30)));
  EXPECT_EQ(second["data"], "second\n");
  auto fin = json::parse(p.next_line(std::chrono::seconds(30)));
  EXPECT_EQ(fin["type"], "finished");
  EXPECT_EQ(fin["stdout"], "first\nsecond\n");
  EXPECT_EQ(p.wait_exit(), 0);
}

TEST_F(jsonl_test, SbshsOwnFailuresAreJsonOnStdout) {
  // Nothing listens on this socket, and sbsh may not start one.
  std::string nobody = dir + "/nobody.sock";
  for (const char* flag : {"--json", "--jsonl"}) {
    auto r = run({bin("sbsh"), "--socket", nobody, "--no-autostart", "exec", flag, "true"});
    EXPECT_EQ(r.code, 255) << flag;
    EXPECT_NE(r.err.find("sbsh: "), std::string::npos) << r.err;
    auto ev = lines_of(r.out);
    ASSERT_EQ(ev.size(), 1u) << r.out;
    EXPECT_EQ(ev[0]["code"], "unreachable") << r.out;
    EXPECT_FALSE(ev[0]["error"].get<std::string>().empty());
    EXPECT_EQ(ev[0].contains("type"), std::string(flag) == "--jsonl") << r.out;
    if (ev[0].contains("type")) {
      EXPECT_EQ(ev[0]["type"], "error");
    }
  }
  // Every command's --json, not only exec's.
  auto ls = run({bin("sbsh"), "--socket", nobody, "--no-autostart", "session", "show", "x", "--json"});
  EXPECT_EQ(ls.code, 255);
  auto ls_ev = lines_of(ls.out);
  ASSERT_EQ(ls_ev.size(), 1u) << ls.out;
  EXPECT_EQ(ls_ev[0]["code"], "unreachable") << ls.out;
  // A session name sbshd refuses.
  for (const char* flag : {"--json", "--jsonl"}) {
    auto r = sbsh({"exec", flag, "-s", "no such/name", "true"});
    EXPECT_EQ(r.code, 255) << flag;
    auto ev = lines_of(r.out);
    ASSERT_EQ(ev.size(), 1u) << r.out;
    EXPECT_EQ(ev[0]["code"], "invalid_session_name") << r.out;
    EXPECT_NE(r.err.find("sbsh: "), std::string::npos) << r.err;
  }
  // Without either, stdout stays empty.
  auto r = sbsh({"exec", "-s", "no such/name", "true"});
  EXPECT_EQ(r.code, 255);
  EXPECT_EQ(r.out, "");
}

}  // namespace jsonl_tests
}  // namespace sbsh::test
