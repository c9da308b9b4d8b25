// What a snapshot leaves out (the default ignore patterns, --ignore, --gitignore,
// --no-default-ignores), links and special files in it, and the copies kept after their
// session (rm --keep-copy, --keep-copy-on-failure, ls --kept, prune --kept), against a real
// sbshd, wrappers, bash and git.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "fixture.h"

namespace sbsh::test::snapshot_ignore_tests {

namespace fs = std::filesystem;

void write_file(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// Every path under `root`, relative to it, directories ending in '/', sorted.
std::vector<std::string> tree(const std::string& root) {
  std::vector<std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    std::string rel = it->path().lexically_relative(root).string();
    out.push_back(it->is_directory() && !it->is_symlink() ? rel + "/" : rel);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string last_line(const std::string& out) {
  std::string t = trim(out);
  auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

class snapshot_ignore_test : public daemon_test {
 protected:
  std::string src() const { return dir + "/src"; }
  std::string copy_of(const std::string& name) const { return state + "/snapshots/" + name; }

  // Creates session `name` from src() with `extra` options; asserts it worked.
  void create(const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"session", "create", name, "--snapshot", src()};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = sbsh(args);
    ASSERT_EQ(r.code, 0) << r.err;
  }

  nlohmann::json show_json(const std::string& name) {
    auto r = sbsh({"session", "show", name, "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  }

  nlohmann::json kept_json() {
    auto r = sbsh({"session", "ls", "--kept", "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  }
};

const std::vector<std::string> kDefaults = {".git",        ".venv",         "venv",        "node_modules",
                                            "__pycache__", "*.pyc",         "*.pyo",       "*.egg-info",
                                            ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox",
                                            ".idea",       ".vscode",       ".DS_Store"};

TEST_F(snapshot_ignore_test, EachDefaultPatternIsLeftOutAndOrdinaryFilesAreCopied) {
  for (const char* d : {".git", ".venv", "venv", "node_modules", "__pycache__", "pkg.egg-info", ".mypy_cache",
                        ".pytest_cache", ".ruff_cache", ".tox", ".idea", ".vscode"}) {
    write_file(src() + "/" + d + "/inner", "x");
    write_file(src() + "/sub/" + d + "/inner", "x");  // at any depth
  }
  for (const char* f : {"m.pyc", "m.pyo", ".DS_Store", "sub/n.pyc", "sub/.DS_Store"}) write_file(src() + "/" + f, "x");
  write_file(src() + "/main.py", "print(1)\n");
  write_file(src() + "/sub/lib.py", "x = 1\n");
  write_file(src() + "/.gitignore", "main.py\n");  // not read without --gitignore
  write_file(src() + "/venvs/kept", "y");          // a name that only starts like a default
  create("d");
  EXPECT_EQ(tree(copy_of("d")),
            (std::vector<std::string>{".gitignore", "main.py", "sub/", "sub/lib.py", "venvs/", "venvs/kept"}));
  EXPECT_EQ(read_file(copy_of("d") + "/main.py"), "print(1)\n");

  auto j = show_json("d");
  EXPECT_EQ(j["definition"]["ignore_rules"], nlohmann::json(kDefaults)) << j.dump();
  EXPECT_EQ(j["definition"]["gitignore"], false);
  auto text = sbsh({"session", "show", "d"});
  EXPECT_NE(text.out.find("ignore      node_modules\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("ignore      *.egg-info\n"), std::string::npos) << text.out;
}

TEST_F(snapshot_ignore_test, IgnorePatternsAddToTheDefaultsWithGitignoreMeaningsAndNegation) {
  write_file(src() + "/a.log", "a");
  write_file(src() + "/keep.log", "k");
  write_file(src() + "/sub/b.log", "b");
  write_file(src() + "/sub/keep.log", "k");
  write_file(src() + "/data/raw/big", "r");
  write_file(src() + "/data/cooked/small", "c");
  write_file(src() + "/raw/top", "t");  // data/raw/ is anchored: this one stays
  write_file(src() + "/node_modules/m", "m");
  create("p", {"--ignore", "*.log", "--ignore", "!keep.log", "--ignore", "data/raw/"});
  EXPECT_EQ(tree(copy_of("p")), (std::vector<std::string>{"data/", "data/cooked/", "data/cooked/small", "keep.log",
                                                          "raw/", "raw/top", "sub/", "sub/keep.log"}));
  auto rules = show_json("p")["definition"]["ignore_rules"];
  ASSERT_EQ(rules.size(), kDefaults.size() + 3) << rules.dump();
  EXPECT_EQ(rules.back(), "data/raw/");
  EXPECT_EQ(show_json("p")["definition"]["ignore"], nlohmann::json({"*.log", "!keep.log", "data/raw/"}));
}

TEST_F(snapshot_ignore_test, GitignoreHonoursTheTreesOwnNestedGitignoreFiles) {
  write_file(src() + "/.gitignore", "*.tmp\n/build/\n");
  write_file(src() + "/x.tmp", "x");
  write_file(src() + "/build/out", "o");
  write_file(src() + "/sub/build/out", "o");  // /build/ is anchored at the root
  write_file(src() + "/sub/.gitignore", "secret\n!important.tmp\n");
  write_file(src() + "/sub/secret", "s");
  write_file(src() + "/sub/important.tmp", "i");
  write_file(src() + "/sub/plain", "p");
  create("g", {"--gitignore"});
  EXPECT_EQ(tree(copy_of("g")), (std::vector<std::string>{".gitignore", "sub/", "sub/.gitignore", "sub/build/",
                                                          "sub/build/out", "sub/important.tmp", "sub/plain"}));
  EXPECT_EQ(show_json("g")["definition"]["gitignore"], true);
  EXPECT_NE(sbsh({"session", "show", "g"}).out.find("the tree's own .gitignore files"), std::string::npos);
  create("plain");  // without --gitignore the files are only copied
  EXPECT_TRUE(fs::exists(copy_of("plain") + "/x.tmp"));
  EXPECT_TRUE(fs::exists(copy_of("plain") + "/sub/secret"));
}

TEST_F(snapshot_ignore_test, NoDefaultIgnoresCopiesWhatTheDefaultsLeaveOut) {
  write_file(src() + "/.git/HEAD", "ref: refs/heads/main\n");
  write_file(src() + "/node_modules/m/index.js", "js");
  write_file(src() + "/__pycache__/m.pyc", "pyc");
  write_file(src() + "/a.log", "log");
  create("all", {"--no-default-ignores"});
  EXPECT_EQ(tree(copy_of("all")), (std::vector<std::string>{".git/", ".git/HEAD", "__pycache__/", "__pycache__/m.pyc",
                                                            "a.log", "node_modules/", "node_modules/m/",
                                                            "node_modules/m/index.js"}));
  EXPECT_TRUE(show_json("all")["definition"]["ignore_rules"].empty());
  // With only patterns of its own.
  create("some", {"--no-default-ignores", "--ignore", "*.log"});
  EXPECT_TRUE(fs::exists(copy_of("some") + "/node_modules/m/index.js"));
  EXPECT_FALSE(fs::exists(copy_of("some") + "/a.log"));
}

TEST_F(snapshot_ignore_test, LinksAreCopiedAsLinksNeverFollowedAndSpecialFilesAreSkippedAndCounted) {
  write_file(dir + "/outside/secret", "outside");
  write_file(src() + "/a.txt", "a");
  fs::create_directories(src() + "/d");
  fs::create_directory_symlink(dir + "/outside", src() + "/out");  // out of the tree
  fs::create_symlink("../outside/secret", src() + "/d/rel");
  fs::create_symlink("a.txt", src() + "/in");
  fs::create_symlink("/nonexistent/x", src() + "/dangling");
  ASSERT_EQ(::mkfifo((src() + "/fifo").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((src() + "/d/fifo2").c_str(), 0600), 0);
  create("l");
  std::string c = copy_of("l");
  for (const auto& [link, target] : std::vector<std::pair<std::string, std::string>>{
           {"out", dir + "/outside"}, {"d/rel", "../outside/secret"}, {"in", "a.txt"}, {"dangling", "/nonexistent/x"}}) {
    EXPECT_TRUE(fs::is_symlink(fs::symlink_status(c + "/" + link))) << link;
    EXPECT_EQ(fs::read_symlink(c + "/" + link).string(), target) << link;
  }
  EXPECT_EQ(tree(c), (std::vector<std::string>{"a.txt", "d/", "d/rel", "dangling", "in", "out"}));
  EXPECT_EQ(tree(dir + "/outside"), std::vector<std::string>{"secret"});
  EXPECT_EQ(read_file(dir + "/outside/secret"), "outside");
  EXPECT_EQ(show_json("l")["definition"]["special_skipped"], 2);
  EXPECT_NE(sbsh({"session", "show", "l"}).out.find("skipped     2 special files"), std::string::npos);
}

TEST_F(snapshot_ignore_test, RmKeepCopyLeavesTheCopyWhichOutlivesARestartUntilPruned) {
  write_file(src() + "/in.txt", "input\n");
  create("run");
  ASSERT_EQ(exec("run", "tr a-z A-Z < in.txt > result.txt").code, 0);
  auto rm = sbsh({"session", "rm", "run", "--keep-copy"});
  ASSERT_EQ(rm.code, 0) << rm.err;
  std::string kept = last_line(rm.out);
  ASSERT_FALSE(kept.empty());
  EXPECT_EQ(read_file(kept + "/result.txt"), "INPUT\n");
  EXPECT_EQ(kept.rfind(state + "/kept/", 0), 0u) << kept;
  EXPECT_FALSE(fs::exists(copy_of("run")));

  // A new session of the same name gets a fresh copy; the kept one stays as it was.
  create("run");
  EXPECT_FALSE(fs::exists(copy_of("run") + "/result.txt"));
  ASSERT_EQ(sbsh({"session", "rm", "run"}).code, 0);
  EXPECT_EQ(read_file(kept + "/result.txt"), "INPUT\n");

  stop_daemon();
  start_daemon();
  auto list = kept_json();
  ASSERT_EQ(list.size(), 1u) << list.dump();
  EXPECT_EQ(list[0]["session"], "run");
  EXPECT_EQ(list[0]["path"], kept);
  EXPECT_EQ(list[0]["size_bytes"], 12);  // in.txt and result.txt
  EXPECT_FALSE(list[0]["kept_at"].get<std::string>().empty());
  auto table = sbsh({"session", "ls", "--kept"});
  EXPECT_NE(table.out.find(kept), std::string::npos) << table.out;

  auto pruned = sbsh({"session", "prune", "--kept"});
  ASSERT_EQ(pruned.code, 0) << pruned.err;
  EXPECT_EQ(pruned.out, "deleted " + kept + "\n");
  EXPECT_FALSE(fs::exists(kept));
  EXPECT_TRUE(kept_json().empty());
  EXPECT_EQ(read_file(src() + "/in.txt"), "input\n");
}

TEST_F(snapshot_ignore_test, KeepCopyOnFailureKeepsOnlyWhenTheLastCommandFailed) {
  write_file(src() + "/f", "x");
  create("bad", {"--keep-copy-on-failure"});
  create("slow", {"--keep-copy-on-failure"});
  create("good", {"--keep-copy-on-failure"});
  create("plain");
  EXPECT_EQ(exec("bad", "touch made; (exit 3)").code, 3);
  EXPECT_NE(sbsh({"exec", "-s", "slow", "-t", "200ms", "--", "sleep 30"}).code, 0);
  EXPECT_EQ(exec("good", "false || true").code, 0);
  EXPECT_EQ(exec("plain", "false").code, 1);

  auto bad = sbsh({"session", "rm", "bad"});
  ASSERT_EQ(bad.code, 0) << bad.err;
  EXPECT_TRUE(fs::exists(last_line(bad.out) + "/made")) << bad.out;
  auto slow = sbsh({"session", "rm", "slow"});
  ASSERT_EQ(slow.code, 0) << slow.err;
  EXPECT_TRUE(fs::exists(last_line(slow.out) + "/f")) << slow.out;
  for (const char* name : {"good", "plain"}) {
    auto r = sbsh({"session", "rm", name});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "") << name;
    EXPECT_FALSE(fs::exists(copy_of(name)));
  }
  auto list = kept_json();
  ASSERT_EQ(list.size(), 2u) << list.dump();
  std::vector<std::string> names{list[0]["session"], list[1]["session"]};
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"bad", "slow"}));
}

TEST_F(snapshot_ignore_test, APlansSessionCarriesTheRulesAndKeepsItsCopyWhenItFails) {
  write_file(src() + "/in.txt", "x");
  write_file(src() + "/debug.log", "log");
  write_file(src() + "/node_modules/m", "m");
  write_file(dir + "/plan.yaml", "session: {snapshot: " + src() +
                                     ", ignore: ['*.log'], keep_copy_on_failure: true}\n"
                                     "stages:\n"
                                     "  - name: run\n"
                                     "    commands: ['echo * > listing; (exit 4)']\n");
  auto r = sbsh({"run", dir + "/plan.yaml", "--quiet"});
  EXPECT_EQ(r.code, 1) << r.err;
  auto list = kept_json();
  ASSERT_EQ(list.size(), 1u) << list.dump() << r.err;
  EXPECT_EQ(read_file(list[0]["path"].get<std::string>() + "/listing"), "in.txt\n");
  // A plan that passes leaves nothing behind.
  write_file(dir + "/ok.yaml", "session: {snapshot: " + src() +
                                   ", keep_copy_on_failure: true, no_default_ignores: true, gitignore: false}\n"
                                   "stages:\n"
                                   "  - name: run\n"
                                   "    commands: ['test -e node_modules/m']\n");
  r = sbsh({"run", dir + "/ok.yaml", "--quiet"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(kept_json().size(), 1u);
  write_file(dir + "/bad.yaml", "session: {snapshot: " + src() + ", gitignore: 'yes'}\nstages: []\n");
  r = sbsh({"run", dir + "/bad.yaml", "--quiet"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("gitignore"), std::string::npos) << r.err;
}

TEST_F(snapshot_ignore_test, BadInputIsRefusedWithOneLineAndLeavesNothingBehind) {
  write_file(src() + "/f", "x");
  auto expect_refused = [&](const std::vector<std::string>& args, const std::string& says) {
    auto r = sbsh(args);
    EXPECT_EQ(r.code, 255) << r.out << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  };
  expect_refused({"session", "create", "x", "--snapshot", src(), "--ignore", "#comment"}, "invalid ignore pattern");
  expect_refused({"session", "create", "x", "--snapshot", src(), "--ignore", "!"}, "invalid ignore pattern");
  expect_refused({"session", "create", "x", "--snapshot", dir + "/missing"}, "No such file or directory");
  expect_refused({"session", "create", "x", "--ignore", "*.log"}, "--snapshot");
  expect_refused({"session", "create", "x", "--keep-copy-on-failure"}, "--snapshot");
  EXPECT_TRUE(listed("x").is_null());
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(state + "/snapshots", ec)) ADD_FAILURE() << "left behind: " << e.path();

  ASSERT_EQ(sbsh({"session", "create", "nosnap"}).code, 0);
  expect_refused({"session", "rm", "nosnap", "--keep-copy"}, "not made from a snapshot");
  EXPECT_FALSE(listed("nosnap").is_null()) << "a refused rm removes nothing";
  EXPECT_FALSE(fs::exists(state + "/kept"));
  EXPECT_EQ(exec("nosnap", "echo still").out, "still\n");
}

}  // namespace sbsh::test::snapshot_ignore_tests
