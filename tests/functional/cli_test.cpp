// The sbsh command line, through the real binary and a real sbshd: every spelling of an
// option reaches the daemon as meant (checked by its effect: the session that ran, the
// signal that ended a process), options are read only before a command's words, --help
// answers on stdout for every command, and a bad value is refused on one line with exit
// status 255 before anything runs.
#include <algorithm>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "fixture.h"

namespace sbsh::test {

using json = nlohmann::json;

namespace cli_tests {

using cli_test = daemon_test;

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(cli_test, AnOptionTakesItsValueInEverySpelling) {
  ASSERT_EQ(exec("x", "v=in-x").code, 0);
  for (const auto& s :
       std::vector<std::vector<std::string>>{{"-s", "x"}, {"-sx"}, {"--session", "x"}, {"--session=x"}}) {
    auto r = sbsh(cat(cat({"exec"}, s), {"echo ${v:-elsewhere}"}));
    EXPECT_EQ(r.out, "in-x\n") << s[0] << ": " << r.err;
  }
  // The global options, before the command; SBSH_SOCKET names no daemon, so only a socket
  // option that was read reaches this one.
  for (const auto& s :
       std::vector<std::vector<std::string>>{{"-S", sock}, {"-S" + sock}, {"--socket", sock}, {"--socket=" + sock}}) {
    auto argv = cat({"/usr/bin/env", "SBSH_SOCKET=" + dir + "/none.sock", bin("sbsh"), "--no-autostart"}, s);
    auto r = run(cat(argv, {"exec", "-s", "x", "echo ${v:-elsewhere}"}));
    EXPECT_EQ(r.out, "in-x\n") << s[0] << ": " << r.err;
  }
  auto r = run({"/usr/bin/env", "SBSH_SOCKET=" + dir + "/none.sock", bin("sbsh"), "--no-autostart", "exec", "true"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("no sbshd"), std::string::npos) << r.err;
}

TEST_F(cli_test, OptionsEndAtTheFirstWordOfTheCommand) {
  // As with ssh: what follows the first word is the command's, options and all.
  EXPECT_EQ(sbsh({"exec", "-s", "x", "echo", "-s", "y", "--json", "-t", "1"}).out, "-s y --json -t 1\n");
  EXPECT_EQ(sbsh({"exec", "-s", "x", "echo", "--help"}).out, "--help\n");
  EXPECT_EQ(sbsh({"exec", "-s", "x", "--", "echo", "--", "-x"}).out, "-- -x\n");
  EXPECT_EQ(sbsh({"exec", "-s", "x", "-t", "5s", "--", "echo", "--json"}).out, "--json\n");
  auto id = sbsh({"start", "-s", "x", "--name", "w", "echo", "--name", "z"});
  ASSERT_EQ(id.code, 0) << id.err;
  EXPECT_EQ(sbsh({"wait", "w"}).code, 0);
  EXPECT_EQ(sbsh({"logs", "w"}).out, "--name z\n");
  // Global options go before the command, not after it.
  auto r = sbsh({"exec", "--no-autostart", "true"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("unknown option '--no-autostart' for sbsh exec"), std::string::npos) << r.err;
}

TEST_F(cli_test, KillTakesSignalsAsKillDoesAndIdsAfterDashDash) {
  const std::vector<std::pair<std::vector<std::string>, std::string>>
      spellings{{{"-9"}, "SIGKILL"},     {{"-KILL"}, "SIGKILL"},  {{"-SIGINT"}, "SIGINT"},      {{"-hup"}, "SIGHUP"},
                {{"-sQUIT"}, "SIGQUIT"}, {{"-s", "2"}, "SIGINT"}, {{"--signal=HUP"}, "SIGHUP"}, {{}, "SIGTERM"}};
  // Each is killed once it runs its command (a kill at the moment of its start can miss it).
  auto start = [this](const std::string& name) {
    ASSERT_EQ(sbsh({"start", "--name", name, "--", "echo up; exec sleep 300"}).code, 0);
    ASSERT_TRUE(wait_until([&] { return sbsh({"logs", "--", name}).out == "up\n"; }, std::chrono::seconds(20)));
  };
  for (size_t i = 0; i < spellings.size(); ++i) {
    std::string name = "p" + std::to_string(i);
    start(name);
    auto r = sbsh(cat(cat({"kill"}, spellings[i].first), {name}));
    EXPECT_EQ(r.code, 0) << r.err;
  }
  // After "--", a word that starts with '-' is an ID (here a name), never a signal.
  start("-5");
  auto r = sbsh({"kill", "--", "-5"});
  EXPECT_EQ(r.code, 0) << r.err;
  r = sbsh({"kill", "--", "-6"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("no background process with that id or name"), std::string::npos) << r.err;

  std::map<std::string, json> by_name;
  auto all_ended = [&] {
    by_name.clear();
    auto table = json::parse(sbsh({"ps", "-a", "--json"}).out);
    for (const auto& p : table.at("processes")) by_name[p.at("name").get<std::string>()] = p;
    return std::all_of(by_name.begin(), by_name.end(), [](const auto& p) { return p.second.at("state") != "running"; });
  };
  EXPECT_TRUE(wait_until(all_ended, std::chrono::seconds(20)));
  for (size_t i = 0; i < spellings.size(); ++i) {
    const auto& p = by_name["p" + std::to_string(i)];
    EXPECT_EQ(p.at("state"), "killed") << i;
    EXPECT_EQ(p.at("signal"), spellings[i].second) << i;
  }
  EXPECT_EQ(by_name["-5"].at("signal"), "SIGTERM");
}

TEST_F(cli_test, HelpIsOnStdoutForEveryCommandAndRunsNothing) {
  auto top = sbsh({"--help"});
  ASSERT_EQ(top.code, 0);
  std::vector<std::vector<std::string>> commands;
  for (const auto& c : commands_in_help(top.out)) {
    commands.push_back({c});
    for (const auto& sub : commands_in_help(sbsh({c, "--help"}).out)) commands.push_back({c, sub});
  }
  ASSERT_GE(commands.size(), 18u) << top.out;  // 13 commands, 5 of session
  for (const auto& c : commands) {
    for (std::string flag : {"--help", "-h"}) {
      auto r = sbsh(cat(c, {flag}));
      std::string shown = c.size() == 1 ? c[0] : c[0] + " " + c[1];
      EXPECT_EQ(r.code, 0) << shown;
      EXPECT_EQ(r.err, "") << shown;
      EXPECT_EQ(r.out.rfind("usage: sbsh " + shown, 0), 0u) << r.out;
    }
    // "sbsh help file write" is "sbsh file write --help", not the help of file.
    auto help = sbsh(cat({"help"}, c));
    EXPECT_EQ(help.code, 0) << help.err;
    EXPECT_EQ(help.out, sbsh(cat(c, {"--help"})).out) << "sbsh help " << c[0] << (c.size() > 1 ? " " + c[1] : "");
  }
  EXPECT_EQ(sbsh({"exec", "-t", "nonsense", "--help"}).out, sbsh({"exec", "--help"}).out);
  EXPECT_EQ(sbsh({"session", "ls", "--json"}).out, "[]\n");  // not even the default session
}

TEST_F(cli_test, BadValuesAreRefusedOnOneLineBeforeAnythingRuns) {
  const std::string bytes = "--output-limit takes a number of bytes, not ";
  const std::string lines = "--tail takes a number of lines, not ";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"exec", "--output-limit", "-5", "true"}, bytes + "'-5'"},
      {{"exec", "--output-limit=", "true"}, bytes + "''"},
      {{"exec", "--output-limit", "", "true"}, bytes + "''"},
      {{"exec", "--output-limit", "12k", "true"}, bytes + "'12k'"},
      {{"exec", "--output-limit", " 5", "true"}, bytes + "' 5'"},
      {{"exec", "--output-limit", "+5", "true"}, bytes + "'+5'"},
      {{"exec", "--output-limit", "0x10", "true"}, bytes + "'0x10'"},
      {{"exec", "--output-limit", "18446744073709551616", "true"}, "that is more than 18446744073709551615"},
      {{"exec", "--output-limit", "-5", "true"}, "not '-5' (0 or more, in decimal digits only)"},
      {{"run", "--output-limit", "-1", "p.yaml"}, bytes + "'-1'"},
      {{"run", "--output-limit=", "p.yaml"}, bytes + "''"},
      {{"run", "--report=", "p.yaml"}, "--report needs a file, or - for stdout, not an empty word"},
      {{"run", "--events", "", "p.yaml"}, "--events needs a file, or - for stdout, not an empty word"},
      {{"run", "--artifacts=", "p.yaml"}, "--artifacts needs a directory"},
      {{"run", "-s", "", "p.yaml"}, "invalid session name ''"},
      {{"run", "--report", "-", "--events", "-", "p.yaml"}, "--report - and --events - would both write to stdout"},
      {{"run", "p.yaml", "q.yaml"}, "unexpected argument 'q.yaml'; usage: sbsh run"},
      {{"run"}, "run needs a plan file"},
      {{"logs", "-n", "-1", "x"}, lines + "'-1'"},
      {{"logs", "-n", "0", "x"}, lines + "'0'"},
      {{"logs", "--tail=", "x"}, lines + "''"},
      {{"logs", "-n", "1.5", "x"}, lines + "'1.5'"},
      {{"logs", "-n99999999999999999999", "x"}, "that is more than 18446744073709551615"},
      {{"exec", "-t", "-5", "true"}, "--timeout: invalid duration '-5': use a number of seconds"},
      {{"exec", "-t", "", "true"}, "--timeout: invalid duration ''"},
      {{"exec", "--timeout=", "true"}, "--timeout: invalid duration ''"},
      {{"exec", "-t", "5x", "true"}, "--timeout: invalid duration '5x'"},
      {{"exec", "-t", "99999999999h", "true"}, "--timeout: invalid duration '99999999999h'"},
      {{"exec", "-t", "0", "true"}, "a timeout of zero would stop the command at once"},
      {{"wait", "-t", "-1", "x"}, "--timeout: invalid duration '-1'"},
      {{"wait", "-t", "1y", "x"}, "--timeout: invalid duration '1y'"},
      {{"wait", "--timeout", "", "x"}, "--timeout: invalid duration ''"},
      {{"kill", "-s", "-5", "x"}, "--signal: unknown signal '-5'"},
      {{"kill", "--signal=", "x"}, "--signal: unknown signal ''"},
      {{"kill", "-NOPE", "x"}, "unknown signal or option '-NOPE'"},
      {{"exec", "-s"}, "option -s needs a value (SESSION)"},
      {{"exec", "--session=", "true"}, "invalid session name ''"},
      {{"exec", "-z", "true"}, "unknown option '-z' for sbsh exec; put '--' before a command that starts with '-'"},
      {{"exec", "-e", "=x", "true"}, "--env takes NAME=VALUE, not '=x'"},
      {{"exec", "-C", "", "true"}, "--cwd needs a directory"},
      {{"status", "--json=no"}, "option --json takes no value"},
      {{"logs", "1", "2"}, "unexpected argument '2'; usage: sbsh logs"},
      {{"session", "bogus"}, "unknown sbsh session command 'bogus': use create, ls, show, rm, restart or prune"},
      {{"session", "create", "x", "--restart", "sometimes"},
       "--restart takes always, on-failure or never, not 'sometimes'"},
      {{"--bogus", "exec", "true"}, "unknown option '--bogus' for sbsh"},
      {{"nonsense"}, "unknown command 'nonsense'"},
  };
  for (const auto& [args, why] : cases) {
    auto r = sbsh(args);
    std::string shown;
    for (const auto& a : args) shown += "'" + a + "' ";
    EXPECT_EQ(r.code, 255) << shown;
    EXPECT_EQ(r.out, "") << shown;
    EXPECT_EQ(r.err.rfind("sbsh: ", 0), 0u) << shown << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << shown << ": " << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << shown << ": " << r.err;
  }
  EXPECT_EQ(sbsh({"session", "ls", "--json"}).out, "[]\n");
  EXPECT_EQ(json::parse(sbsh({"ps", "-a", "--json"}).out).at("processes").size(), 0u);
}

TEST_F(cli_test, NumbersAtTheEdgesOfTheirRangeAreTaken) {
  auto j = json::parse(sbsh({"exec", "--output-limit", "0", "--json", "echo hi"}).out);
  EXPECT_EQ(j.at("stdout"), "");
  EXPECT_TRUE(j.at("stdout_truncated").get<bool>());
  j = json::parse(sbsh({"exec", "--output-limit=18446744073709551615", "--json", "echo hi"}).out);
  EXPECT_EQ(j.at("stdout"), "hi\n");
  EXPECT_FALSE(j.at("stdout_truncated").get<bool>());
  ASSERT_EQ(sbsh({"start", "--name", "n", "--", "seq 3"}).code, 0);
  EXPECT_EQ(sbsh({"wait", "-t", "30s", "n"}).code, 0);
  EXPECT_EQ(sbsh({"logs", "-n", "1", "n"}).out, "3\n");
  EXPECT_EQ(sbsh({"logs", "--tail=18446744073709551615", "n"}).out, "1\n2\n3\n");
}

// sbshd reads its options as sbsh does: the same help layout, spellings and refusals.
TEST_F(cli_test, SbshdReadsItsOptionsAsSbshDoes) {
  auto help = run({bin("sbshd"), "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_EQ(help.out.rfind("usage: sbshd [--socket PATH]", 0), 0u) << help.out;
  EXPECT_NE(help.out.find("\nOptions:\n      --socket PATH "), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("\n      --idle-expiry DURATION "), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("  -h, --help "), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("--max-clients"), std::string::npos) << "the test bounds are not for users";
  auto version = run({bin("sbshd"), "--version"});
  EXPECT_EQ(version.code, 0);
  EXPECT_EQ(version.out.rfind("sbshd ", 0), 0u) << version.out;
  std::string other = dir + "/other.sock";
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused{
      {{"--idle-expiry", "0"}, "--idle-expiry takes a duration such as 24h or 30m, or 'never'"},
      {{"--idle-expiry=soon"}, "--idle-expiry: "},
      {{"--log-level", "loud"}, "--log-level takes trace, debug, info, warn, error, critical or off, not 'loud'"},
      {{"--spare-wrappers", "17"}, "--spare-wrappers takes a number of wrappers, not '17'"},
      {{"--env-cap", "10X"}, "--env-cap takes a size such as 10G, 512M or 0 (no cap), not '10X'"},
      {{"--bogus"}, "unknown option '--bogus' for sbshd; see 'sbshd --help'"},
      {{"--state-dir"}, "option --state-dir needs a value (DIR)"},
      {{"--foreground=yes"}, "option --foreground takes no value"},
      {{"extra"}, "unexpected argument 'extra'"},
  };
  for (const auto& [args, message] : refused) {
    auto r = run(cat({bin("sbshd"), "--socket", other}, args));
    EXPECT_EQ(r.code, 2) << args[0];
    EXPECT_EQ(r.err.rfind("sbshd: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(other)) << args[0] << ": sbshd ran";
  }
}

}  // namespace cli_tests
}  // namespace sbsh::test
