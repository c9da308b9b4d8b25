// A session's root against a real sbshd: session create --root, SBSH_ROOT, and exec -C and
// start -C kept beneath the root (a relative directory taken from it; "..", an absolute path
// elsewhere and a symlink pointing out refused with exit 255 before anything runs), a
// snapshot session's copy as its root, and a session without a root behaving as before.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fixture.h"

namespace sbsh::test::root_tests {

namespace fs = std::filesystem;
using json = nlohmann::json;

class root_test : public daemon_test {
 protected:
  void SetUp() override {
    daemon_test::SetUp();
    fs::create_directories(dir + "/root/sub/a/b");
    fs::create_directories(dir + "/outside");
    fs::create_directories(dir + "/etc");  // what "-C ../etc" would reach
    fs::create_directories(dir + "/markers");
    root = fs::canonical(dir + "/root").string();
    outside = fs::canonical(dir + "/outside").string();
    fs::create_symlink("/etc", root + "/link-to-etc");
    fs::create_symlink("../outside", root + "/link-out");
    fs::create_symlink("sub", root + "/link-in");
    fs::create_symlink("sub/a/b", root + "/deep-link");
    ASSERT_EQ(sbsh({"session", "create", "ws", "--root", root}).code, 0);
  }

  // sbsh run from directory `cwd`, so that a relative -C could be taken from it.
  run_result sbsh_in(const std::string& cwd, const std::vector<std::string>& args) {
    std::string line = "cd " + shell_quote(cwd) + " && exec " + shell_quote(bin("sbsh")) + " --socket " +
                       shell_quote(sock) + " --no-autostart";
    for (const auto& a : args) line += " " + shell_quote(a);
    return run({"/bin/sh", "-c", line});
  }
  // The same through a dial command, where sbshd cannot know the caller's directory.
  run_result dial(const std::vector<std::string>& args) {
    std::vector<std::string> argv{bin("sbsh"), "--dial",
                                  shell_quote(bin("sbsh")) + " -S " + shell_quote(sock) + " --no-autostart dial-stdio"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv);
  }
  // Where `start -s SESSION -C DIR pwd`, run by sbsh from directory `cwd`, ran: its line.
  std::string started_in(const std::string& cwd, const std::string& session, const std::string& where) {
    std::string out = dir + "/markers/started-" + std::to_string(++starts_);
    auto r = sbsh_in(cwd, {"start", "-s", session, "-C", where, "pwd > " + shell_quote(out)});
    if (r.code != 0) return "start failed: " + r.err;
    auto w = sbsh({"wait", "-t", "60s", trim(r.out)});
    if (w.code != 0) return "wait failed: " + w.err;
    std::ifstream f(out);
    std::string line;
    std::getline(f, line);
    return line;
  }

  std::string root, outside;
  int starts_ = 0;
};

TEST_F(root_test, ASessionWithARootStartsThereWithSbshRoot) {
  auto r = exec("ws", "pwd; echo \"$SBSH_ROOT\"");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, root + "\n" + root + "\n");
  // A relative -C is taken from the root; an absolute one within it is kept.
  ASSERT_EQ(sbsh({"session", "create", "deep", "--root", root, "-C", "sub/a"}).code, 0);
  r = exec("deep", "pwd; echo \"$SBSH_ROOT\"");
  EXPECT_EQ(r.out, root + "/sub/a\n" + root + "\n");
  // session show names the root, in text and JSON.
  r = sbsh({"session", "show", "ws"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("root        " + root + "\n"), std::string::npos) << r.out;
  auto j = json::parse(sbsh({"session", "show", "ws", "--json"}).out);
  EXPECT_EQ(j.at("definition").at("root"), root);
  ASSERT_EQ(sbsh({"session", "create", "plain", "-C", root}).code, 0);
  EXPECT_TRUE(json::parse(sbsh({"session", "show", "plain", "--json"}).out).at("definition").at("root").is_null());
  // Nothing of a root reaches a session without one, even from the creator's environment.
  r = run({"/usr/bin/env", "SBSH_ROOT=/nowhere", bin("sbsh"), "--socket", sock, "--no-autostart", "exec", "-s", "fresh",
           "echo \"[${SBSH_ROOT-unset}]\""});
  EXPECT_EQ(r.out, "[unset]\n") << r.err;
}

TEST_F(root_test, RelativeDashCIsTakenFromTheRoot) {
  // The caller stands in another directory that also has a "sub": the root's is meant.
  fs::create_directories(outside + "/sub");
  auto r = sbsh_in(outside, {"exec", "-s", "ws", "-C", "sub", "pwd"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, root + "/sub\n");
  EXPECT_EQ(started_in(outside, "ws", "sub/a"), root + "/sub/a");
  // Also over a dial command, where no caller's directory travels.
  r = dial({"exec", "-s", "ws", "-C", "sub", "pwd"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, root + "/sub\n");
}

TEST_F(root_test, DirectoriesInsideTheRootWork) {
  for (auto [given, where] : {std::pair{root + "/sub", "/sub"}, std::pair{root + "/sub/../sub/a/", "/sub/a"},
                              std::pair{std::string("."), ""}, std::pair{std::string("link-in"), "/sub"},
                              // bash's own cd would take ".." textually, to the root's parent: the
                              // kernel's lookup goes up from where the link leads, and stays inside.
                              std::pair{std::string("deep-link/../.."), "/sub"}}) {
    auto r = exec("ws", "true");  // the session is idle between the checks
    r = sbsh({"exec", "-s", "ws", "-C", given, "pwd"});
    EXPECT_EQ(r.code, 0) << given << ": " << r.err;
    EXPECT_EQ(r.out, root + where + "\n") << given;
  }
  // A directory that is not there is named as given and nothing runs.
  std::string marker = dir + "/markers/missing";
  auto r = sbsh({"exec", "-s", "ws", "-C", "nope", "touch " + shell_quote(marker)});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("cannot run in 'nope': No such file or directory"), std::string::npos) << r.err;
  r = sbsh({"exec", "-s", "ws", "-C", "sub/a/b/../../../link-in/a", "pwd"});
  EXPECT_EQ(r.out, root + "/sub/a\n") << r.err;
  EXPECT_FALSE(fs::exists(marker));
}

TEST_F(root_test, EscapesAreRefusedForExecAndStartAndNothingRuns) {
  int n = 0;
  for (const std::string& given : {std::string("../etc"), std::string("/etc"), std::string("link-to-etc"),
                                   std::string("link-out"), std::string("sub/../.."), std::string("link-in/../.."),
                                   root + "/../outside", std::string("/"), outside}) {
    for (const char* verb : {"exec", "start"}) {
      std::string marker = dir + "/markers/m" + std::to_string(n++);
      auto r = sbsh({verb, "-s", "ws", "-C", given, "touch " + shell_quote(marker)});
      EXPECT_EQ(r.code, 255) << verb << " -C " << given << ": " << r.out << r.err;
      EXPECT_NE(r.err.find("'" + given + "' leads outside the session's root"), std::string::npos)
          << verb << " -C " << given << ": " << r.err;
      // The message names the directory as given, never where a link leads on the host.
      if (given.starts_with("link")) {
        EXPECT_EQ(r.err.find("/etc"), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find(outside), std::string::npos) << r.err;
      }
      EXPECT_TRUE(r.out.empty()) << r.out;
    }
  }
  // Nothing was started: no process listed, and a command queued after them all finds no marker.
  auto ps = sbsh({"ps", "-a", "--json"});
  ASSERT_EQ(ps.code, 0) << ps.err;
  EXPECT_TRUE(json::parse(ps.out).at("processes").empty()) << ps.out;
  ASSERT_EQ(exec("ws", "sleep 0.2").code, 0);
  for (const auto& e : fs::directory_iterator(dir + "/markers")) ADD_FAILURE() << "it ran: " << e.path();
  // The library answers with the error code.
  auto c = conn();
  client::exec_options o;
  o.session = "ws";
  o.command = "true";
  o.cwd = "../etc";
  auto res = c.exec(o);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.err().code, "outside_root");
  client::start_options so;
  so.session = "ws";
  so.command = "true";
  so.cwd = "link-to-etc";
  auto p = c.start(so);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.err().code, "outside_root");
}

TEST_F(root_test, ASnapshotSessionsRootIsItsCopy) {
  fs::create_directories(dir + "/proj/src");
  std::ofstream(dir + "/proj/src/main.c") << "int main;\n";
  ASSERT_EQ(sbsh({"session", "create", "snap", "--snapshot", dir + "/proj"}).code, 0);
  auto r = exec("snap", "pwd; echo \"$SBSH_ROOT\"");
  ASSERT_EQ(r.code, 0) << r.err;
  auto nl = r.out.find('\n');
  ASSERT_NE(nl, std::string::npos);
  std::string copy = r.out.substr(0, nl);
  EXPECT_EQ(r.out, copy + "\n" + copy + "\n");
  EXPECT_NE(copy, fs::canonical(dir + "/proj").string());
  EXPECT_EQ(json::parse(sbsh({"session", "show", "snap", "--json"}).out).at("definition").at("root"), copy);
  r = sbsh({"exec", "-s", "snap", "-C", "src", "pwd"});
  EXPECT_EQ(r.out, copy + "/src\n") << r.err;
  std::string marker = dir + "/markers/snap";
  for (const char* verb : {"exec", "start"}) {
    r = sbsh({verb, "-s", "snap", "-C", "..", "touch " + shell_quote(marker)});
    EXPECT_EQ(r.code, 255) << verb << r.err;
    EXPECT_NE(r.err.find("'..' leads outside the session's root"), std::string::npos) << r.err;
  }
  ASSERT_EQ(exec("snap", "true").code, 0);
  EXPECT_FALSE(fs::exists(marker));
}

TEST_F(root_test, BadRootsAreRefusedClearly) {
  auto r = sbsh({"session", "create", "x", "--root", dir + "/missing"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("the session root '" + dir + "/missing' cannot be used: No such file or directory"),
            std::string::npos)
      << r.err;
  std::ofstream(dir + "/a-file") << "x";
  r = sbsh({"session", "create", "x", "--root", dir + "/a-file"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("is not a directory"), std::string::npos) << r.err;
  r = sbsh({"session", "create", "x", "--root", root, "-C", outside});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("is outside its root"), std::string::npos) << r.err;
  r = sbsh({"session", "create", "x", "--root", root, "-C", "../outside"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("is outside its root"), std::string::npos) << r.err;
  r = sbsh({"session", "create", "x", "--root", root, "--snapshot", outside});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("--root and --snapshot do not go together"), std::string::npos) << r.err;
  // sbshd refuses the pair too, whoever asks.
  client::session_spec spec;
  spec.name = "x";
  spec.root = root;
  spec.snapshot = outside;
  auto s = conn().create_session(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.err().message.find("give either root or snapshot"), std::string::npos) << s.err().message;
  EXPECT_EQ(sbsh({"session", "show", "x"}).code, 255);  // none of them was made
  EXPECT_EQ(exec("ws", "echo still serving").out, "still serving\n");
}

TEST_F(root_test, APlansSessionTakesARoot) {
  std::string text = "session: {root: " + root + "}\nstages:\n  - name: s\n    commands: ['pwd; echo $SBSH_ROOT', "
                     "{run: pwd, cwd: sub}]\n";
  auto r = sbsh({"run", "-q", "-"}, &text);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  auto cmds = json::parse(r.out).at("stages").at(0).at("commands");
  EXPECT_EQ(cmds.at(0).at("stdout"), root + "\n" + root + "\n");
  EXPECT_EQ(cmds.at(1).at("stdout"), root + "/sub\n");
  text = "session: {root: " + root + ", snapshot: " + root + "}\nstages: [{name: s, commands: [true]}]\n";
  r = sbsh({"run", "-q", "-"}, &text);
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("root and snapshot do not go together"), std::string::npos) << r.err;
}

TEST_F(root_test, WithoutARootDashCBehavesAsBefore) {
  ASSERT_EQ(sbsh({"session", "create", "plain", "-C", outside}).code, 0);
  // Relative: from the caller's directory, on a local connection.
  auto r = sbsh_in(root, {"exec", "-s", "plain", "-C", "sub", "pwd"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, root + "/sub\n");
  EXPECT_EQ(started_in(root, "plain", "sub/a"), root + "/sub/a");
  // Anywhere, absolute.
  r = sbsh({"exec", "-s", "plain", "-C", "/etc", "pwd"});
  EXPECT_EQ(r.out, "/etc\n") << r.err;
  // Over a dial command a relative one means nothing on sbshd's side: refused, nothing runs.
  std::string marker = dir + "/markers/dialled";
  r = dial({"exec", "-s", "plain", "-C", "sub", "touch " + shell_quote(marker)});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("give an absolute path"), std::string::npos) << r.err;
  r = dial({"start", "-s", "plain", "-C", "sub", "touch " + shell_quote(marker)});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("give an absolute path"), std::string::npos) << r.err;
  r = dial({"exec", "-s", "plain", "-C", root + "/sub", "pwd"});
  EXPECT_EQ(r.out, root + "/sub\n") << r.err;
  EXPECT_FALSE(fs::exists(marker));
}

}  // namespace sbsh::test::root_tests
