// The file operations agents use, from the CLI and the C++ library, against a real sbshd:
// sbsh file edit (the file's exact bytes after it, and unchanged when the text occurs 0 or 2
// times), file search (the exact matches, what it leaves out), file read --lines (the exact
// lines) and file ls --depth; and the library's shell fallback in a session without a root.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "fixture.h"

namespace sbsh::test::file_ops_tests {

namespace fs = std::filesystem;


using file_ops_test = root_session_test;

TEST_F(file_ops_test, EditReplacesAnExactTextOnceOrEveryOneAndOtherwiseNothing) {
  const std::string text = "def f():\n    return 1\n\ndef g():\n    return 1\n";
  put(root + "/app.py", text);
  ::chmod((root + "/app.py").c_str(), 0750);
  // 0 and 2 occurrences: exit 1, the count said, the file untouched.
  auto r = file({"edit", "app.py", "--old", "return 2", "--new", "return 3"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("occurs 0 times in app.py: nothing was changed"), std::string::npos) << r.err;
  r = file({"edit", "app.py", "--old", "    return 1\n", "--new", "    return 2\n"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("occurs 2 times"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--all replaces every one"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(root + "/app.py"), text);
  // Once, across lines, with --json.
  r = file({"edit", "app.py", "--old", "def g():\n    return 1", "--new", "def g():\n    return 2", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out),
            nlohmann::json::parse(R"({"path": "app.py", "replacements": 1, "bytes": 45, "first_line": 4})"));
  EXPECT_EQ(read_file(root + "/app.py"), "def f():\n    return 1\n\ndef g():\n    return 2\n");
  // Every one; quiet without --json.
  r = file({"edit", "app.py", "--old", "return", "--new", "yield", "--all"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(read_file(root + "/app.py"), "def f():\n    yield 1\n\ndef g():\n    yield 2\n");
  struct stat st {};
  ASSERT_EQ(::stat((root + "/app.py").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);  // the file keeps its mode
  // The texts from local files, exactly (a trailing newline, and a NUL byte), one from stdin.
  put(dir + "/old.txt", "    yield 1\n");
  std::string replacement("    pass\n\0\n", 11);
  r = file({"edit", "app.py", "--old-file", dir + "/old.txt", "--new-file", "-"}, &replacement);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_file(root + "/app.py"), "def f():\n    pass\n" + std::string(1, '\0') + "\n\ndef g():\n    yield 2\n");
  // Bad input: said before anything is read.
  r = file({"edit", "app.py", "--new", "x"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("give the text to replace, --old TEXT"), std::string::npos) << r.err;
  r = file({"edit", "app.py", "--old", "x", "--old-file", dir + "/old.txt", "--new", "y"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("--old or --old-file, not both"), std::string::npos) << r.err;
  r = file({"edit", "app.py", "--old", "same", "--new", "same"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("are the same"), std::string::npos) << r.err;
  r = file({"edit", "nosuch.py", "--old", "a", "--new", "b"});
  EXPECT_EQ(r.code, 255);
  r = file({"edit", "../outside", "--old", "a", "--new", "b"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("leads outside the session's root"), std::string::npos) << r.err;
}

TEST_F(file_ops_test, ReadLinesGivesTheExactLinesAsSedHeadAndTailChooseThem) {
  put(root + "/five.txt", "one\ntwo\nthree\nfour\nfive");  // no newline after the last
  auto lines = [&](const std::string& range) { return file({"read", "--lines", range, "five.txt"}); };
  EXPECT_EQ(lines("2").out, "two\n");
  EXPECT_EQ(lines("2:4").out, "two\nthree\nfour\n");
  EXPECT_EQ(lines("4:").out, "four\nfive");
  EXPECT_EQ(lines(":2").out, "one\ntwo\n");
  EXPECT_EQ(lines("-2:").out, "four\nfive");
  EXPECT_EQ(lines("4:99").out, "four\nfive");
  auto past = lines("9:");
  EXPECT_EQ(past.code, 0) << past.err;
  EXPECT_EQ(past.out, "");
  auto j = file({"read", "--lines", "2:3", "--json", "five.txt"});
  ASSERT_EQ(j.code, 0) << j.err;
  EXPECT_EQ(nlohmann::json::parse(j.out), nlohmann::json::parse(R"({"path": "five.txt", "bytes": 10,
      "content": "two\nthree\n", "encoding": "utf-8", "truncated": true, "start_line": 2, "end_line": 3,
      "total_lines": 5})"));
  for (const char* bad : {"0", "3:2", "x", ":", "-2:4", "2:x", ""}) {
    auto r = lines(bad);
    EXPECT_EQ(r.code, 255) << bad;
    EXPECT_NE(r.err.find("--lines"), std::string::npos) << bad << ": " << r.err;
    EXPECT_EQ(r.out, "") << bad;
  }
  auto both = file({"read", "--lines", "2", "--offset", "3", "five.txt"});
  EXPECT_EQ(both.code, 255);
  EXPECT_NE(both.err.find("give one or the other"), std::string::npos) << both.err;
  auto json_bytes = file({"read", "--json", "five.txt"});
  EXPECT_EQ(json_bytes.code, 255);
  EXPECT_NE(json_bytes.err.find("--json goes with --lines"), std::string::npos) << json_bytes.err;
}

TEST_F(file_ops_test, SearchPrintsTheMatchingLinesAndLeavesOutWhatASnapshotDoes) {
  put(root + "/src/a.py", "import os\ndef needle():\n    pass\n");
  put(root + "/src/deep/b.txt", "no\nNEEDLE here\n");
  put(root + "/node_modules/pkg/index.js", "needle()\n");
  put(root + "/.git/config", "needle\n");
  put(root + "/bin.dat", std::string("needle\0", 7));
  auto r = file({"search", "-i", "needle"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "src/a.py:2:def needle():\nsrc/deep/b.txt:2:NEEDLE here\n");
  // Beneath a directory: its paths as file read takes them; --glob; --json.
  r = file({"search", "needle", "src", "--glob", "*.py"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "src/a.py:2:def needle():\n");
  r = file({"search", "e+d", "src", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out),
            nlohmann::json::parse(R"({"matches": [{"path": "a.py", "line": 2, "text": "def needle():"}],
                "files_searched": 2, "files_skipped": 0, "truncated": false, "dir": "src"})"));
  // A file is searched alone, even where the default ignores would leave it out.
  r = file({"search", "needle", "node_modules/pkg/index.js"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "node_modules/pkg/index.js:1:needle()\n");
  r = file({"search", "NEEDLE", "src/deep/b.txt", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out),
            nlohmann::json::parse(R"({"matches": [{"path": "b.txt", "line": 2, "text": "NEEDLE here"}],
                "files_searched": 1, "files_skipped": 0, "truncated": false, "dir": "src/deep"})"));
  r = file({"search", "needle", "src/a.py", "--glob", "*.txt"});
  EXPECT_EQ(r.code, 1) << r.err;
  auto all = file({"search", "needle", "--json"});
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_EQ(nlohmann::json::parse(all.out)["files_skipped"], 1) << all.out;  // bin.dat
  // None: exit 1, nothing printed. A pattern that is not one: 255 and why.
  r = file({"search", "absent"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(r.out, "");
  r = file({"search", "("});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("is not a POSIX extended regular expression"), std::string::npos) << r.err;
  r = file({"search"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("PATTERN"), std::string::npos) << r.err;
}

TEST_F(file_ops_test, LsToADepth) {
  put(root + "/a/b/c/d.txt", "d");
  put(root + "/top.txt", "t");
  auto names = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "ls");
    args.emplace_back("--json");
    auto r = file(args);
    EXPECT_EQ(r.code, 0) << r.err;
    std::vector<std::string> v;
    for (const auto& e : nlohmann::json::parse(r.out)) v.push_back(e["path"]);
    return v;
  };
  EXPECT_EQ(names({"--depth", "1"}), (std::vector<std::string>{"a", "top.txt"}));
  EXPECT_EQ(names({"--depth", "2"}), (std::vector<std::string>{"a", "a/b", "top.txt"}));
  EXPECT_EQ(names({"a", "--depth", "2"}), (std::vector<std::string>{"b", "b/c"}));
  auto r = file({"ls", "--depth", "0"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("--depth"), std::string::npos) << r.err;
  r = file({"ls", "--depth", "2", "-R"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("give one or the other"), std::string::npos) << r.err;
}

// The library's operations: the same rules for every caller; in a session without a root
// they refuse (no_root) unless as_shell, and then act as its shell would.
TEST_F(file_ops_test, TheLibraryRefusesASessionWithoutARootUnlessAsShell) {
  std::string here = dir + "/plain";
  put(here + "/notes.txt", "one\ntwo\n");
  ASSERT_EQ(exec("plain", "cd " + shell_quote(here)).code, 0);
  auto c = conn();
  auto refused = c.edit_file("plain", "notes.txt", "two", "2");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.err().code, "no_root");
  client::file_edit_options o;
  o.as_shell = true;
  auto done = c.edit_file("plain", "notes.txt", "two", "2", o);
  ASSERT_TRUE(done.ok()) << done.err().message;
  EXPECT_EQ(done->replacements, 1u);
  EXPECT_EQ(done->first_line, 2u);
  EXPECT_EQ(read_file(here + "/notes.txt"), "one\n2\n");
  client::file_lines_options lo;
  lo.line = -1;
  lo.as_shell = true;
  auto last = c.read_lines("plain", "notes.txt", lo);
  ASSERT_TRUE(last.ok()) << last.err().message;
  EXPECT_EQ(last->content, "2\n");
  EXPECT_EQ(last->start_line, 2);
  EXPECT_EQ(last->total_lines, 2);
  client::file_search_options so;
  so.as_shell = true;
  auto found = c.search_files("plain", "^o", so);
  ASSERT_TRUE(found.ok()) << found.err().message;
  ASSERT_EQ(found->matches.size(), 1u);
  EXPECT_EQ(found->matches[0].path, "notes.txt");
  EXPECT_EQ(found->matches[0].line, 1u);
  EXPECT_EQ(found->matches[0].text, "one");
  // A budget of matches stops at a whole match and says so.
  put(root + "/many.txt", "x1\nx2\nx3\n");
  client::file_search_options budget;
  budget.max_bytes = 2 * std::string("many.txt:1: x1\n").size();
  auto cut = c.search_files("ws", "x", budget);
  ASSERT_TRUE(cut.ok()) << cut.err().message;
  EXPECT_EQ(cut->matches.size(), 2u);
  EXPECT_TRUE(cut->truncated);
}

}  // namespace sbsh::test::file_ops_tests
