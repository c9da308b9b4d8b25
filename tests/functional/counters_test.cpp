// The daemon-wide counters of `sbsh status`: commands, failed, timed out, shell restarts,
// bytes streamed through sbshd, clients now; counted from real commands, shells and
// transports, and shown by the CLI as JSON and as text.
#include <string>

#include <nlohmann/json.hpp>

#include "fixture.h"

namespace sbsh::test::counters_tests {

using json = nlohmann::json;

class counters_test : public daemon_test {
 protected:
  json counters() {
    auto r = sbsh({"status", "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return json::parse(r.out)["counters"];
  }
  // The CLI through a dial command on this host: output and input then travel in frames
  // through sbshd instead of straight through pipes.
  run_result dialled(const std::vector<std::string>& args, const std::string* input = nullptr) {
    std::vector<std::string> argv{bin("sbsh"), "--dial", bin("sbsh") + " --socket " + shell_quote(sock) + " dial-stdio"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, input);
  }
};

TEST_F(counters_test, CountCommandsFailuresTimeoutsAndRestarts) {
  auto n = counters();
  for (const char* k : {"commands", "failed", "timed_out", "shell_restarts", "bytes_streamed"}) EXPECT_EQ(n[k].get<long long>(), 0) << k;
  EXPECT_EQ(n["clients"].get<long long>(), 1);  // the one asking

  EXPECT_EQ(exec("s", "true").code, 0);
  EXPECT_EQ(exec("s", "exit 3").code, 3);
  EXPECT_EQ(sbsh({"exec", "-s", "s", "-t", "300ms", "sleep 30"}).code, 124);
  n = counters();
  EXPECT_EQ(n["commands"].get<long long>(), 3);
  EXPECT_EQ(n["failed"].get<long long>(), 2);
  EXPECT_EQ(n["timed_out"].get<long long>(), 1);
  // The timeout may have needed a new shell: when it came before bash had started sleep,
  // there was no process to signal but the shell itself.
  long long restarts = n["shell_restarts"].get<long long>();
  EXPECT_LE(restarts, 1);

  // A shell that dies is restarted; so is one restarted on request.
  EXPECT_NE(exec("s", "kill -9 $$").code, 0);
  EXPECT_EQ(sbsh({"session", "restart", "s"}).code, 0);
  n = counters();
  EXPECT_EQ(n["commands"].get<long long>(), 4);
  EXPECT_EQ(n["failed"].get<long long>(), 3);
  EXPECT_EQ(n["shell_restarts"].get<long long>(), restarts + 2);

  auto text = sbsh({"status"});
  EXPECT_EQ(text.code, 0);
  EXPECT_NE(text.out.find(std::to_string(restarts + 2) + " shell restarts, 1 client\n"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("4 commands (3 failed, 1 timed out), "), std::string::npos) << text.out;
}

TEST_F(counters_test, CountBytesThatPassThroughSbshdAndClientsNow) {
  // Local output goes from the command's pipes to the client: none of it passes sbshd.
  EXPECT_EQ(exec("s", "head -c 100000 /dev/zero").out.size(), 100000u);
  EXPECT_EQ(counters()["bytes_streamed"].get<long long>(), 0);

  auto r = dialled({"exec", "-s", "s", "printf 12345"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "12345");
  EXPECT_EQ(counters()["bytes_streamed"].get<long long>(), 5);
  std::string input = "abc";
  r = dialled({"exec", "-s", "s", "cat"}, &input);
  EXPECT_EQ(r.out, "abc") << r.err;
  EXPECT_EQ(counters()["bytes_streamed"].get<long long>(), 5 + 3 + 3);  // in, and out again

  auto held = conn();
  auto other = conn();
  auto st = other.status();
  ASSERT_TRUE(st.ok()) << st.err().message;
  EXPECT_EQ(st->counters.clients, 2u);
  EXPECT_EQ(st->counters.commands, 3u);
  EXPECT_GT(st->uptime_ms, 0u);
}

}  // namespace sbsh::test::counters_tests
