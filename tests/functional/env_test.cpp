// Environments built once and shared by content (session create --setup COMMAND --setup-key
// FILE): on a real sbshd, with real setups whose runs are counted in a file outside them.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "tests/functional/fixture.h"

namespace sbsh::test::env_tests {

namespace fs = std::filesystem;
using json = nlohmann::json;

class env_test : public daemon_test {
 protected:
  void SetUp() override {
    daemon_test::SetUp();
    project = dir + "/project";
    fs::create_directories(project);
    put(project + "/requirements.txt", "left-pad==1.0\n");
    runs = dir + "/runs";
  }
  static void put(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }
  static std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  }
  // How many times a setup made by setup_text() has run.
  [[nodiscard]] size_t count_runs() const {
    std::string all = slurp(runs);
    return static_cast<size_t>(std::count(all.begin(), all.end(), '\n'));
  }
  // A setup that counts its run, says so on both streams, and builds a "tool" from the key.
  [[nodiscard]] std::string setup_text(const std::string& extra = "") const {
    return "echo run >> " + shell_quote(runs) + "; echo building on stdout; echo building on stderr >&2; " + extra +
           "cp requirements.txt \"$SBSH_ENV/tool\"";
  }
  run_result create(const std::string& name, const std::string& setup, const std::vector<std::string>& more = {}) {
    std::vector<std::string> args{"session", "create", name, "-C", project, "--setup", setup, "--setup-key",
                                  "requirements.txt"};
    args.insert(args.end(), more.begin(), more.end());
    return sbsh(args);
  }
  // The session's SBSH_ENV, as its shell sees it.
  std::string env_of(const std::string& session) { return trim(exec(session, "echo \"$SBSH_ENV\"").out); }
  // The environments' directory entries (hash directories and their markers).
  [[nodiscard]] std::vector<std::string> env_entries() const {
    std::vector<std::string> out;
    if (fs::exists(state + "/envs"))
      for (const auto& e : fs::directory_iterator(state + "/envs")) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string project, runs;
};

TEST_F(env_test, TheSetupRunsOnceForSessionsWithTheSameKeyAndAgainWhenAKeyChanges) {
  auto r = create("one", setup_text());
  ASSERT_EQ(r.code, 0) << r.err;
  // The setup's output reached the creating client as it ran, each stream on its own.
  EXPECT_EQ(r.out, "building on stdout\n");
  EXPECT_EQ(r.err, "building on stderr\n");
  EXPECT_EQ(count_runs(), 1u);
  std::string env = env_of("one");
  ASSERT_FALSE(env.empty());
  EXPECT_EQ(fs::path(env).parent_path(), fs::path(state) / "envs");
  EXPECT_EQ(slurp(env + "/tool"), "left-pad==1.0\n");

  // Another session with the same setup and key: nothing runs, it shares the directory.
  r = create("two", setup_text());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out + r.err, "");
  EXPECT_EQ(count_runs(), 1u);
  EXPECT_EQ(env_of("two"), env);
  // A new shell of the session (a restart) keeps it, and session show names it.
  ASSERT_EQ(sbsh({"session", "restart", "two"}).code, 0);
  EXPECT_EQ(env_of("two"), env);
  auto shown = json::parse(sbsh({"session", "show", "two", "--json"}).out);
  EXPECT_EQ(shown.at("definition").at("sbsh_env"), env);
  EXPECT_EQ(shown.at("definition").at("setup_keys"), json::array({"requirements.txt"}));

  // The key file changes: a new environment, built by a new run; the old one stays.
  put(project + "/requirements.txt", "left-pad==2.0\n");
  r = create("three", setup_text());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count_runs(), 2u);
  std::string env3 = env_of("three");
  EXPECT_NE(env3, env);
  EXPECT_EQ(slurp(env3 + "/tool"), "left-pad==2.0\n");
  EXPECT_EQ(slurp(env + "/tool"), "left-pad==1.0\n");
  // So does another setup text with the same key.
  r = create("four", setup_text("true; "));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count_runs(), 3u);
  EXPECT_NE(env_of("four"), env3);
  // SBSH_ENV from the creator's environment never reaches a session.
  r = run({"/usr/bin/env", "SBSH_ENV=/nowhere", bin("sbsh"), "--socket", sock, "--no-autostart", "exec", "-s",
           "plain", "echo \"[${SBSH_ENV-unset}]\""});
  EXPECT_EQ(r.out, "[unset]\n") << r.err;
}

TEST_F(env_test, CreatorsArrivingTogetherWaitForOneRunAndShareIt) {
  std::string gate = dir + "/gate";
  // The setup says it waits, every 50 ms, until the test opens the gate.
  std::string setup = setup_text("until [ -e " + shell_quote(gate) + " ]; do echo waiting; sleep 0.05; done; ");
  auto create_async = [&](const std::string& name, const std::string& out) {
    return std::async(std::launch::async, [this, name, setup, out] {
      std::string line = "exec " + shell_quote(bin("sbsh")) + " --socket " + shell_quote(sock) +
                         " --no-autostart session create " + name + " -C " + shell_quote(project) + " --setup " +
                         shell_quote(setup) + " --setup-key requirements.txt > " + shell_quote(out) + " 2>&1";
      return run({"/bin/sh", "-c", line});
    });
  };
  std::vector<std::future<run_result>> creators;
  std::vector<std::string> outs;
  for (const char* name : {"a", "b", "c"}) {
    outs.push_back(dir + "/out-" + name);
    creators.push_back(create_async(name, outs.back()));
  }
  // Each creator hears the run while it is still waiting: all three joined the same one.
  for (const auto& out : outs)
    ASSERT_TRUE(wait_until([&] { return slurp(out).find("waiting") != std::string::npos; }, std::chrono::seconds(60)))
        << out << ": " << slurp(out);
  put(gate, "");
  for (auto& c : creators) EXPECT_EQ(c.get().code, 0);
  EXPECT_EQ(count_runs(), 1u);
  std::string env = env_of("a");
  EXPECT_EQ(env_of("b"), env);
  EXPECT_EQ(env_of("c"), env);
  EXPECT_EQ(slurp(env + "/tool"), "left-pad==1.0\n");
}

TEST_F(env_test, AFailedSetupKeepsNothingAndTellsWhy) {
  std::string ok_file = dir + "/ok";
  std::string setup = setup_text("echo partial > \"$SBSH_ENV/partial\"; [ -e " + shell_quote(ok_file) +
                                 " ] || { echo the index is unreachable >&2; exit 3; }; ");
  auto r = create("py", setup);
  EXPECT_NE(r.code, 0);
  // The status and the end of its output are in the error; the output also came as it ran.
  EXPECT_NE(r.err.find("exited with status 3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the index is unreachable"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "building on stdout\n");
  EXPECT_TRUE(listed("py").is_null());
  EXPECT_EQ(env_entries(), std::vector<std::string>{});  // no directory, no marker
  // The next creator runs it again, and this time it holds.
  put(ok_file, "");
  r = create("py", setup);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count_runs(), 2u);
  EXPECT_EQ(slurp(env_of("py") + "/partial"), "partial\n");
  // Bad requests are refused clearly, and nothing runs.
  r = sbsh({"session", "create", "bad", "--setup-key", "requirements.txt"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("give --setup"), std::string::npos) << r.err;
  r = create("bad", setup_text(), {"--setup-key", "missing.lock"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("missing.lock"), std::string::npos) << r.err;
  EXPECT_TRUE(listed("bad").is_null());
  EXPECT_EQ(count_runs(), 2u);
}

TEST_F(env_test, AFailedSetupsOutputIsShownOnceAndLineByLine) {
  std::string setup = setup_text(R"(printf 'first line\nsecond \033[2J line\n' >&2; exit 4; )");
  // The CLI showed the output as it ran: the error says so instead of repeating it.
  auto r = create("py", setup);
  EXPECT_EQ(r.code, 255);
  EXPECT_EQ(r.out, "building on stdout\n");
  EXPECT_EQ(r.err, "building on stderr\nfirst line\nsecond \033[2J line\n"
                   "sbsh: the setup exited with status 4; nothing of it was kept: the next session created with "
                   "this setup runs it again; its output is above\n");
  // A caller that did not take the output gets its end in the error, one line per line,
  // each with its control characters escaped.
  client::session_spec spec;
  spec.name = "py";
  spec.cwd = project;
  spec.setup = setup;
  spec.setup_keys = {"requirements.txt"};
  auto made = conn().create_session(spec);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.err().code, "setup_failed");
  // The two streams come through two pipes: the order of their lines may vary.
  const std::string& m = made.err().message;
  EXPECT_NE(m.find("; the end of its output:\n"), std::string::npos) << m;
  EXPECT_NE(m.find("\nbuilding on stdout"), std::string::npos) << m;
  EXPECT_NE(m.find("\nfirst line\nsecond \\e[2J line"), std::string::npos) << m;
  EXPECT_EQ(made.err().message.find("\\n"), std::string::npos) << made.err().message;
  EXPECT_EQ(count_runs(), 2u);
}

TEST_F(env_test, ASetupCutShortBySbshdsDeathIsEndedAndRebuiltFromNothing) {
  std::string first = dir + "/first", ready = dir + "/ready", later = dir + "/later";
  // Processes are found by a marker in their command line (sh's $0; "; true" keeps sh from
  // becoming sleep): inside the setup's PID namespace they have pids of their own.
  std::string mark = "sbsh-cut-" + std::to_string(::getpid());
  // The first run leaves a process behind, writes part of the environment and hangs; a later
  // run (the same setup: the same key) finishes, leaving a process behind too.
  std::string setup = setup_text(
      "if [ ! -e " + shell_quote(first) + " ]; then touch " + shell_quote(first) + "; sh -c 'sleep 600; true' " + mark +
      "-first & echo stale > \"$SBSH_ENV/stale\"; touch " + shell_quote(ready) +
      "; while :; do sleep 0.05; done; fi; sh -c 'touch " + shell_quote(later) + "; sleep 600; true' " + mark +
      "-later & until [ -e " + shell_quote(later) + " ]; do sleep 0.01; done; ");
  auto cut = std::async(std::launch::async, [&] { return create("py", setup); });
  ASSERT_TRUE(wait_until([&] { return fs::exists(ready); }, std::chrono::seconds(60)));
  ASSERT_FALSE(processes_with(mark + "-first").empty());
  kill_daemon();
  EXPECT_NE(cut.get().code, 0);
  // All of the setup ended with sbshd: its wrapper dies with sbshd, its bash with the wrapper,
  // and all bash started with bash, the init of its PID namespace.
  EXPECT_TRUE(wait_until([&] { return processes_with(mark + "-first").empty(); }, std::chrono::seconds(20)));
  for (pid_t p : processes_with(mark)) ::kill(p, SIGKILL);  // should sbsh have failed
  start_daemon();
  auto r = create("py", setup);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count_runs(), 2u);
  // What the cut-short run left is gone: its files, rebuilt from nothing.
  std::string env = env_of("py");
  EXPECT_EQ(slurp(env + "/tool"), "left-pad==1.0\n");
  EXPECT_FALSE(fs::exists(env + "/stale"));
  EXPECT_FALSE(fs::exists(env + ".building"));
  // What a setup that succeeded left running ended with it.
  EXPECT_TRUE(fs::exists(later));
  EXPECT_EQ(processes_with(mark), std::vector<pid_t>());
  for (pid_t p : processes_with(mark)) ::kill(p, SIGKILL);
}

TEST_F(env_test, EnvironmentsAreListedRemovedAndPrunedButNeverOneInUse) {
  ASSERT_EQ(create("one", setup_text()).code, 0);
  std::string a = env_of("one");
  put(project + "/requirements.txt", "other\n");
  ASSERT_EQ(create("two", setup_text()).code, 0);
  std::string b = env_of("two");
  auto r = sbsh({"env", "ls", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto envs = json::parse(r.out);
  ASSERT_EQ(envs.size(), 2u) << r.out;
  EXPECT_EQ(envs[0].at("path"), b);  // most recently used first
  EXPECT_EQ(envs[0].at("sessions"), json::array({"two"}));
  EXPECT_EQ(envs[1].at("sessions"), json::array({"one"}));
  EXPECT_EQ(envs[1].at("keys"), json::array({"requirements.txt"}));
  EXPECT_EQ(envs[1].at("size_bytes"), 14);  // its one file, "left-pad==1.0\n"
  std::string hash_a = envs[1].at("hash");
  EXPECT_EQ(fs::path(a).filename(), hash_a);
  // The table: a header, then a row each, in the same order.
  r = sbsh({"env", "ls"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream table(r.out);
  std::vector<std::string> rows;
  for (std::string line; std::getline(table, line);) rows.push_back(line);
  ASSERT_EQ(rows.size(), 3u) << r.out;
  EXPECT_TRUE(rows[0].starts_with("HASH ") && rows[0].find(" SIZE  LAST USED ") != std::string::npos) << r.out;
  EXPECT_TRUE(rows[1].starts_with(envs[0].at("hash").get<std::string>() + " ")) << r.out;
  EXPECT_TRUE(rows[2].starts_with(hash_a + " ")) << r.out;
  EXPECT_TRUE(rows[2].ends_with(" one                  requirements.txt")) << r.out;
  // In use: refused, and it stays.
  r = sbsh({"env", "rm", hash_a});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("used by session one"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(a + "/tool"));
  r = sbsh({"env", "rm", "nosuchhash"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("no environment nosuchhash"), std::string::npos) << r.err;
  // Once its session is gone, it goes.
  ASSERT_EQ(sbsh({"session", "rm", "one"}).code, 0);
  r = sbsh({"env", "rm", hash_a});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(wait_until([&] { return !fs::exists(a); }, std::chrono::seconds(20)));
  EXPECT_EQ(json::parse(sbsh({"env", "ls", "--json"}).out).size(), 1u);
  // Creating it again builds it again.
  put(project + "/requirements.txt", "left-pad==1.0\n");
  ASSERT_EQ(create("one", setup_text()).code, 0);
  EXPECT_EQ(count_runs(), 3u);
  EXPECT_EQ(env_of("one"), a);
  // prune: --keep keeps the most recently used of those unused; those in use always stay.
  put(project + "/requirements.txt", "third\n");
  ASSERT_EQ(create("three", setup_text()).code, 0);
  std::string c = env_of("three");
  ASSERT_EQ(sbsh({"session", "rm", "one"}).code, 0);
  ASSERT_EQ(sbsh({"session", "rm", "three"}).code, 0);
  // --older-than: both were used just now, so none is deleted.
  r = sbsh({"env", "prune", "--older-than", "1h"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  r = sbsh({"env", "prune", "--keep", "1", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto gone = json::parse(r.out);
  ASSERT_EQ(gone.size(), 1u) << r.out;
  EXPECT_EQ(gone[0].at("path"), a);  // "three" was used last
  r = sbsh({"env", "prune"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("deleted " + fs::path(c).filename().string()), std::string::npos) << r.out;
  EXPECT_TRUE(wait_until([&] { return !fs::exists(c) && !fs::exists(a); }, std::chrono::seconds(20)));
  EXPECT_TRUE(fs::exists(b + "/tool"));  // "two" uses it
  envs = json::parse(sbsh({"env", "ls", "--json"}).out);
  ASSERT_EQ(envs.size(), 1u);
  EXPECT_EQ(envs[0].at("path"), b);
}

TEST_F(env_test, TheSizeCapEvictsTheLeastRecentlyUsedThatNoSessionUses) {
  stop_daemon();
  daemon_args = {"--env-cap", "2500"};  // two environments of 1000 bytes each, not three
  start_daemon();
  auto build = [&](const std::string& session, char fill) {
    put(project + "/requirements.txt", std::string(999, fill) + "\n");
    auto r = create(session, setup_text());
    EXPECT_EQ(r.code, 0) << r.err;
    return env_of(session);
  };
  std::string e1 = build("s1", 'a');
  std::string e2 = build("s2", 'b');
  ASSERT_EQ(sbsh({"session", "rm", "s1"}).code, 0);
  ASSERT_EQ(sbsh({"session", "rm", "s2"}).code, 0);
  // e1 is used again, so e2 is now the least recently used.
  EXPECT_EQ(build("s1b", 'a'), e1);
  ASSERT_EQ(sbsh({"session", "rm", "s1b"}).code, 0);
  EXPECT_EQ(count_runs(), 2u);
  std::string e3 = build("s3", 'c');
  EXPECT_TRUE(wait_until([&] { return !fs::exists(e2); }, std::chrono::seconds(20)));
  EXPECT_TRUE(fs::exists(e1 + "/tool"));
  EXPECT_TRUE(fs::exists(e3 + "/tool"));
  // Over the cap with every environment in use: none goes.
  std::string e4 = build("s4", 'd');
  EXPECT_TRUE(wait_until([&] { return !fs::exists(e1); }, std::chrono::seconds(20)));  // unused: it goes
  EXPECT_TRUE(fs::exists(e3 + "/tool") && fs::exists(e4 + "/tool"));
  std::string e5 = build("s5", 'e');
  auto envs = json::parse(sbsh({"env", "ls", "--json"}).out);
  EXPECT_EQ(envs.size(), 3u) << envs.dump();  // 3000 bytes over 2500, but all in use
  EXPECT_TRUE(fs::exists(e5 + "/tool"));
}

// The README's examples: a venv keyed by requirements.txt and a node_modules keyed by
// package-lock.json, each installed offline from a package made here.
TEST_F(env_test, TheReadmesVenvAndNodeModulesExamplesWork) {
  // A wheel of a package "demo", and the requirements naming it.
  fs::create_directories(project + "/wheels");
  auto made = make_demo_wheel(project + "/wheels/demo-1.0-py3-none-any.whl");
  ASSERT_EQ(made.code, 0) << made.err;
  put(project + "/requirements.txt", "demo==1.0\n");
  std::string venv_setup =
      "/usr/bin/python3 -m venv \"$SBSH_ENV/venv\" && PIP_DISABLE_PIP_VERSION_CHECK=1 \"$SBSH_ENV/venv/bin/pip\" "
      "install --quiet --no-index --find-links wheels -r requirements.txt";
  for (const char* name : {"py", "py2"}) {
    auto r = sbsh({"session", "create", name, "-C", project, "--setup", venv_setup, "--setup-key", "requirements.txt",
                   "--setup-key", "wheels/", "--init", "source \"$SBSH_ENV/venv/bin/activate\""});
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    r = exec(name, "python -c 'import demo, sys; print(demo.__version__, sys.prefix)'");
    EXPECT_EQ(r.out, "1.0 " + env_of(name) + "/venv\n") << r.err;
  }
  EXPECT_EQ(env_of("py"), env_of("py2"));
  EXPECT_EQ(json::parse(sbsh({"env", "ls", "--json"}).out).size(), 1u);  // built once

  // A node_modules from a package-lock.json, with `npm ci --offline` and a local tarball.
  auto npm = run({"/bin/sh", "-c", "command -v npm"});
  ASSERT_EQ(npm.code, 0) << "npm is needed (scripts/deps.sh --test installs it)";
  std::string web = dir + "/web";
  fs::create_directories(web + "/demo");
  put(web + "/demo/package.json", R"({"name": "demo", "version": "1.0.0", "main": "index.js"})");
  put(web + "/demo/index.js", "module.exports = 'demo 1.0.0';\n");
  put(web + "/package.json", R"({"name": "web", "version": "1.0.0", "dependencies": {"demo": "file:demo-1.0.0.tgz"}})");
  auto packed = run({"/bin/sh", "-c",
                     "cd " + shell_quote(web) + " && npm pack --silent ./demo >/dev/null && npm install --offline "
                     "--package-lock-only --ignore-scripts --no-audit --no-fund --silent"});
  ASSERT_EQ(packed.code, 0) << packed.out << packed.err;
  ASSERT_TRUE(fs::exists(web + "/package-lock.json"));
  std::string npm_setup =
      "cp package.json package-lock.json demo-1.0.0.tgz \"$SBSH_ENV/\" && cd \"$SBSH_ENV\" && "
      "npm ci --offline --ignore-scripts --no-audit --no-fund --silent";
  auto r = sbsh({"session", "create", "web", "-C", web, "--setup", npm_setup, "--setup-key", "package-lock.json",
                 "--init", "export NODE_PATH=\"$SBSH_ENV/node_modules\""});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  r = exec("web", "node -e 'console.log(require(\"demo\"))'");
  EXPECT_EQ(r.out, "demo 1.0.0\n") << r.err;
}

// A directory key (the README's wheels/): its tree is hashed, relative to it, so a change
// inside it builds a new environment and the same tree elsewhere shares the one built.
TEST_F(env_test, ADirectoryKeyIsItsTreeWhereverItIs) {
  fs::create_directories(project + "/wheels/sub");
  put(project + "/wheels/a.whl", "a 1");
  put(project + "/wheels/sub/b.whl", "b 1");
  fs::create_symlink("a.whl", project + "/wheels/latest");
  auto make = [&](const std::string& name, const std::string& where) {
    return sbsh({"session", "create", name, "-C", where, "--setup", setup_text(), "--setup-key", "requirements.txt",
                 "--setup-key", "wheels"});
  };
  auto r = make("one", project);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count_runs(), 1u);
  std::string env = env_of("one");
  ASSERT_EQ(make("two", project).code, 0);
  EXPECT_EQ(count_runs(), 1u);
  EXPECT_EQ(env_of("two"), env);

  // A file deep inside changes: a new environment, built by a new run.
  put(project + "/wheels/sub/b.whl", "b 2");
  ASSERT_EQ(make("three", project).code, 0);
  EXPECT_EQ(count_runs(), 2u);
  std::string env3 = env_of("three");
  EXPECT_NE(env3, env);
  // So does a file's executable bit, and a link's target (the link is not followed).
  fs::permissions(project + "/wheels/a.whl", fs::perms::owner_exec, fs::perm_options::add);
  ASSERT_EQ(make("four", project).code, 0);
  EXPECT_EQ(count_runs(), 3u);
  EXPECT_NE(env_of("four"), env3);
  fs::remove(project + "/wheels/latest");
  fs::create_symlink("sub/b.whl", project + "/wheels/latest");
  ASSERT_EQ(make("five", project).code, 0);
  EXPECT_EQ(count_runs(), 4u);
  std::string env5 = env_of("five");
  EXPECT_NE(env5, env_of("four"));

  // The same tree in another place: the same environment, nothing runs.
  std::string other = dir + "/elsewhere/project";
  fs::create_directories(other);
  fs::copy(project, other, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  ASSERT_EQ(make("six", other).code, 0);
  EXPECT_EQ(count_runs(), 4u);
  EXPECT_EQ(env_of("six"), env5);
  // Another project with the same requirements.txt and other wheels gets one of its own.
  put(other + "/wheels/a.whl", "a 3");
  ASSERT_EQ(make("seven", other).code, 0);
  EXPECT_EQ(count_runs(), 5u);
  EXPECT_NE(env_of("seven"), env5);
}

// What a snapshot's copy leaves out (node_modules, .git, __pycache__) is no part of a
// directory key either: changing it builds nothing.
TEST_F(env_test, WhatTheIgnoreRulesLeaveOutOfADirectoryKeyDoesNotCount) {
  for (const char* d : {"/wheels/node_modules", "/wheels/.git", "/wheels/__pycache__"})
    fs::create_directories(project + d);
  put(project + "/wheels/a.whl", "a 1");
  put(project + "/wheels/node_modules/x", "x 1");
  put(project + "/wheels/.git/x", "x 1");
  auto make = [&](const std::string& name) {
    return sbsh({"session", "create", name, "-C", project, "--setup", setup_text(), "--setup-key", "wheels"});
  };
  auto r = make("one");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count_runs(), 1u);
  std::string env = env_of("one");
  put(project + "/wheels/node_modules/x", "x 2");
  put(project + "/wheels/.git/x", "x 2");
  put(project + "/wheels/__pycache__/y.pyc", "y");
  // A FIFO where nothing is looked at is no reason to refuse.
  ASSERT_EQ(::mkfifo((project + "/wheels/node_modules/pipe").c_str(), 0600), 0);
  r = make("two");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count_runs(), 1u);
  EXPECT_EQ(env_of("two"), env);
  // What the rules keep does count.
  put(project + "/wheels/c.whl", "c 1");
  ASSERT_EQ(make("three").code, 0);
  EXPECT_EQ(count_runs(), 2u);
  EXPECT_NE(env_of("three"), env);
}

// A FIFO, socket or device inside a directory key is refused as one given as a key is, with
// its path in the directory named, and nothing waits on it.
TEST_F(env_test, ADirectoryKeyHoldingAFifoIsRefusedNamingIt) {
  fs::create_directories(project + "/wheels/sub");
  put(project + "/wheels/a.whl", "a 1");
  std::string fifo = project + "/wheels/sub/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = sbsh({"session", "create", "k", "-C", project, "--setup", setup_text(), "--setup-key", "wheels"}, nullptr,
                std::chrono::seconds(60));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("the setup key directory " + project + "/wheels holds sub/pipe, which is a FIFO (named pipe)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("move it out of the directory"), std::string::npos) << r.err;
  EXPECT_TRUE(listed("k").is_null());
  EXPECT_EQ(count_runs(), 0u);
}

// Lets go of whatever waits to open the FIFO at `path` for reading: it opens, then reads
// end-of-file. Only an sbshd that opened a key FIFO without O_NONBLOCK waits there; this
// lets such an sbshd, and so the test, end.
void release_readers(const std::string& path) {
  for (int i = 0; i < 20; ++i) {
    int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) ::close(fd);
    ::usleep(10000);
  }
}

TEST_F(env_test, AKeyThatIsNotARegularFileIsRefusedAndOtherClientsAreServed) {
  std::string fifo = project + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  struct guard {
    std::string p;
    ~guard() { release_readers(p); }
  } release{fifo};
  // A socket, as a confined session could leave one in its root.
  std::string sock_path = project + "/sock";
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock_path.c_str());
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  // Each is refused while nothing writes to the FIFO or connects to the socket: nothing
  // waited for them (the limit only guards against a hang).
  for (const auto& [key, what] :
       std::vector<std::pair<std::string, std::string>>{{"fifo", "is a FIFO (named pipe)"},
                                                        {"sock", "is a socket"},
                                                        {"/dev/null", "is a character device"}}) {
    auto r = sbsh({"session", "create", "k", "-C", project, "--setup", setup_text(), "--setup-key", key}, nullptr,
                  std::chrono::seconds(60));
    EXPECT_NE(r.code, 0) << key;
    std::string path = key[0] == '/' ? key : project + "/" + key;
    EXPECT_NE(r.err.find("the setup key " + path + " " + what + ", not a regular file"), std::string::npos)
        << key << ": " << r.err;
    EXPECT_NE(r.err.find("give the file the setup reads"), std::string::npos) << r.err;
    EXPECT_TRUE(listed("k").is_null());
  }
  // So is a directory holding them, naming what it holds.
  auto r = sbsh({"session", "create", "k", "-C", project, "--setup", setup_text(), "--setup-key", "."}, nullptr,
                std::chrono::seconds(60));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("the setup key directory " + project + "/. holds fifo, which is a FIFO (named pipe)"),
            std::string::npos)
      << r.err;
  ::close(s);
  EXPECT_EQ(count_runs(), 0u);
  // Another client's file request is answered, and the setup with a file for its key runs.
  ASSERT_EQ(sbsh({"session", "create", "files", "--root", project}).code, 0);
  r = sbsh({"file", "read", "-s", "files", "requirements.txt"}, nullptr, std::chrono::seconds(60));
  EXPECT_EQ(r.out, "left-pad==1.0\n") << r.err;
  ASSERT_EQ(create("ok", setup_text()).code, 0);
  EXPECT_EQ(count_runs(), 1u);
}

// Setup keys that are FIFOs, more of them at once than sbshd has pool threads: none of them
// holds a thread, so another client's file requests and commands are served meanwhile.
TEST_F(env_test, ManyFifoKeysAtOnceStopNoOtherClient) {
  std::string fifo = project + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  struct guard {
    std::string p;
    ~guard() { release_readers(p); }
  } release{fifo};
  ASSERT_EQ(sbsh({"session", "create", "files", "--root", project}).code, 0);
  ASSERT_EQ(exec("files", "true").code, 0);
  std::vector<std::future<run_result>> creators;
  creators.reserve(5);
  for (int i = 0; i < 5; ++i)
    creators.push_back(std::async(std::launch::async, [this, i] {
      return sbsh({"session", "create", "k" + std::to_string(i), "-C", project, "--setup", "true", "--setup-key",
                   "fifo"},
                  nullptr, std::chrono::seconds(60));
    }));
  // Whether or not those are answered yet, this client is.
  auto r = sbsh({"file", "read", "-s", "files", "requirements.txt"}, nullptr, std::chrono::seconds(60));
  EXPECT_EQ(r.out, "left-pad==1.0\n") << r.err;
  r = sbsh({"exec", "-s", "files", "echo served"}, nullptr, std::chrono::seconds(60));
  EXPECT_EQ(r.out, "served\n") << r.err;
  // So is a file request for the FIFO itself, refused without opening it.
  r = sbsh({"file", "read", "-s", "files", "fifo"}, nullptr, std::chrono::seconds(60));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("'fifo' is not a regular file (a fifo)"), std::string::npos) << r.err;
  for (auto& c : creators) {
    auto made = c.get();
    EXPECT_NE(made.code, 0);
    EXPECT_NE(made.err.find("is a FIFO (named pipe), not a regular file"), std::string::npos) << made.err;
  }
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(listed("k" + std::to_string(i)).is_null());
}

// A setup that leaves a daemon behind (setsid, its output closed), round after round: once
// the setup has ended, and when sbshd shuts down while a setup runs, nothing of it is left.
TEST_F(env_test, NothingASetupStartedOutlivesIt) {
  std::string up = dir + "/up";
  for (int round = 0; round < 10; ++round) {
    std::string marker = "sbsh-leftover-" + std::to_string(::getpid()) + "-" + std::to_string(round);
    ::unlink(up.c_str());
    // The daemon's command line holds the marker (its $0); so does the setup's bash's. The
    // setup goes on only once the daemon runs. Each round's setup is another text: it runs.
    auto setup = [&](const std::string& then) {
      return "setsid sh -c 'echo up > " + up + "; while :; do sleep 1; done' " + marker +
             " </dev/null >/dev/null 2>&1 & until [ -s " + up + " ]; do sleep 0.01; done; " + then;
    };
    auto r = sbsh(
        {"session", "create", "s", "-C", project, "--setup", setup("echo done"), "--setup-key", "requirements.txt"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "done\n");
    // The session is made once the setup has ended, and all it started with it.
    EXPECT_EQ(processes_with(marker), std::vector<pid_t>()) << "round " << round;
    ASSERT_EQ(sbsh({"session", "rm", "s"}).code, 0);
    EXPECT_EQ(processes_with(marker), std::vector<pid_t>()) << "round " << round;
    for (pid_t p : processes_with(marker)) ::kill(p, SIGKILL);  // should sbsh have failed

    // A setup that never ends, while sbshd shuts down.
    marker += "-cut";
    ::unlink(up.c_str());
    auto cut = std::async(std::launch::async, [&, text = setup("while :; do sleep 0.05; done")] {
      return sbsh({"session", "create", "cut", "-C", project, "--setup", text, "--setup-key", "requirements.txt"});
    });
    ASSERT_TRUE(
        wait_until([&] { return fs::exists(up) && !processes_with(marker).empty(); }, std::chrono::seconds(60)));
    stop_daemon();
    EXPECT_NE(cut.get().code, 0);
    EXPECT_EQ(processes_with(marker), std::vector<pid_t>()) << "round " << round;
    for (pid_t p : processes_with(marker)) ::kill(p, SIGKILL);  // should sbsh have failed
    start_daemon();
  }
}

// env rm --force under a session: its next shell runs the setup again (the definition has
// it), unless its key files have changed, when the start says what to run.
TEST_F(env_test, ASessionWhoseEnvironmentWasDeletedBuildsItAgain) {
  ASSERT_EQ(create("s", setup_text(), {"--init", "cat \"$SBSH_ENV/tool\" >/dev/null"}).code, 0);
  std::string env = env_of("s");
  std::string hash = fs::path(env).filename().string();
  auto r = sbsh({"env", "rm", "--force", hash});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(wait_until([&] { return !fs::exists(env); }, std::chrono::seconds(20)));
  ASSERT_EQ(sbsh({"session", "restart", "s"}).code, 0);
  r = exec("s", "cat \"$SBSH_ENV/tool\"");
  EXPECT_EQ(r.out, "left-pad==1.0\n") << r.err;
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(count_runs(), 2u);
  EXPECT_EQ(env_of("s"), env);
  EXPECT_EQ(json::parse(sbsh({"env", "ls", "--json"}).out).at(0).at("sessions"), json::array({"s"}));
  // So does a session that a new sbshd starts from the state file.
  ASSERT_EQ(sbsh({"env", "rm", "--force", hash}).code, 0);
  ASSERT_TRUE(wait_until([&] { return !fs::exists(env); }, std::chrono::seconds(20)));
  stop_daemon();
  start_daemon();
  EXPECT_EQ(exec("s", "cat \"$SBSH_ENV/tool\"").out, "left-pad==1.0\n");
  EXPECT_EQ(count_runs(), 3u);
  // Its key changed since: the setup would build another environment; the start fails and
  // says what to run.
  put(project + "/requirements.txt", "left-pad==2.0\n");
  ASSERT_EQ(sbsh({"env", "rm", "--force", hash}).code, 0);
  ASSERT_TRUE(wait_until([&] { return !fs::exists(env); }, std::chrono::seconds(20)));
  sbsh({"session", "restart", "s"});
  r = exec("s", "true");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("no longer key the same environment"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("remove the session with 'sbsh session rm s' and create it again"), std::string::npos)
      << r.err;
  EXPECT_EQ(count_runs(), 3u);
}

TEST_F(env_test, APlansSessionTakesASetup) {
  std::string plan = dir + "/plan.yml";
  put(plan, "session:\n  cwd: " + project + "\n  setup: " + json(setup_text()).dump() +
                "\n  setup_keys: [requirements.txt]\nstages:\n  - name: use\n    commands: ['cat \"$SBSH_ENV/tool\"']\n");
  for (int i = 0; i < 2; ++i) {
    auto r = sbsh({"run", "-q", "--report", dir + "/report.json", plan});
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    auto rep = json::parse(slurp(dir + "/report.json"));
    EXPECT_EQ(rep["stages"][0]["commands"][0]["stdout"], "left-pad==1.0\n") << rep.dump();
  }
  EXPECT_EQ(count_runs(), 1u);  // the second plan's session found it built
}

}  // namespace sbsh::test::env_tests
