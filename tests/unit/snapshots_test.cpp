// Snapshot copies (daemon/snapshots.h): the store's checks, a copy and its removal on a real
// loop with the real copier (sbsh-wrapper --copy-tree), and remove_tree on a tree that fights back.
#include "common/paths.h"
#include "daemon/snapshots.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace sbsh::daemon::snapshots_tests {

namespace fs = std::filesystem;

class snapshots_test : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t != nullptr && *t != '\0' ? t : "/tmp") + "/sbsh-snap.XXXXXX";
    root = ::mkdtemp(tmpl.data());
    state = root + "/state";
    fs::create_directories(state);
    ::chmod(state.c_str(), 0700);
    uv_loop_init(&loop);
  }
  void TearDown() override {
    uv_run(&loop, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop), 0);
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  static void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }
  static std::string read(const std::string& path) {
    std::ifstream f(path);
    return {std::istreambuf_iterator<char>(f), {}};
  }

  std::string root, state;
  uv_loop_t loop{};
};

TEST_F(snapshots_test, RemoveTreeDeletesReadOnlyDirectoriesAndNeverFollowsLinks) {
  std::string t = root + "/tree";
  fs::create_directories(t + "/a/b");
  fs::create_directories(t + "/ro/inner");
  fs::create_directories(root + "/outside");
  write(t + "/a/b/f", "x");
  write(t + "/ro/inner/g", "y");
  write(root + "/outside/keep", "keep");
  fs::create_directory_symlink("../outside", t + "/link");
  ASSERT_EQ(::mkfifo((t + "/fifo").c_str(), 0600), 0);
  ::chmod((t + "/ro/inner").c_str(), 0500);
  ::chmod((t + "/ro").c_str(), 0500);
  EXPECT_TRUE(remove_tree(t));
  EXPECT_FALSE(fs::exists(fs::symlink_status(t)));
  EXPECT_EQ(read(root + "/outside/keep"), "keep");  // the link went, not what it points at
  EXPECT_TRUE(remove_tree(t)) << "a tree that is already gone is no error";
}

TEST_F(snapshots_test, SourcesThatCannotBeCopiedAreRefusedWithTheReason) {
  snapshot_store store(&loop, state + "/snapshots", state + "/kept", beside_self("sbsh-wrapper"));
  fs::create_directories(root + "/src");
  fs::create_directories(state + "/inside");
  write(root + "/file", "x");
  EXPECT_TRUE(store.check_source(root + "/src"));
  auto why = [&](const std::string& source) {
    auto s = store.check_source(source);
    return s ? std::string("ok") : s.err().message;
  };
  EXPECT_EQ(why(root + "/missing"), "cannot snapshot " + root + "/missing: No such file or directory");
  EXPECT_EQ(why(root + "/file"), "cannot snapshot " + root + "/file: not a directory");
  EXPECT_NE(why(root).find("it holds sbshd's state directory"), std::string::npos) << why(root);
  EXPECT_NE(why(state + "/inside").find("it is inside sbshd's state directory"), std::string::npos);
}

TEST_F(snapshots_test, ACopyIsWholeWhenItIsInPlaceAndRemovalDeletesIt) {
  snapshot_store store(&loop, state + "/snapshots", state + "/kept", beside_self("sbsh-wrapper"));
  fs::create_directories(root + "/src/sub");
  write(root + "/src/sub/f", "data");
  ::chmod((root + "/src/sub").c_str(), 0555);
  std::optional<bool> copied;
  store.copy("s", root + "/src", {}, [&](const result<uint64_t>& s) { copied = s.ok(); });
  EXPECT_FALSE(fs::exists(store.path_of("s"))) << "only a complete copy is in place";
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_TRUE(copied.has_value());
  EXPECT_TRUE(*copied);
  EXPECT_EQ(read(store.path_of("s") + "/sub/f"), "data");
  EXPECT_EQ(fs::status(store.path_of("s") + "/sub").permissions() & fs::perms::all, fs::perms(0555));

  // A second copy of the same name is refused while the first is there.
  std::string why;
  store.copy("s", root + "/src", {}, [&](const result<uint64_t>& s) { why = s ? "ok" : s.err().message; });
  EXPECT_NE(why.find("already exists"), std::string::npos) << why;

  std::string aside = store.set_aside("s");
  ASSERT_FALSE(aside.empty());
  EXPECT_FALSE(fs::exists(store.path_of("s")));
  bool removed = false;
  store.remove_later(aside, [&] { removed = true; });
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_TRUE(removed);
  EXPECT_FALSE(fs::exists(aside));
  EXPECT_TRUE(store.set_aside("s").empty());
  EXPECT_EQ(read(root + "/src/sub/f"), "data");
}

TEST_F(snapshots_test, LeftoversAreSweptAndCopiesKept) {
  snapshot_store store(&loop, state + "/snapshots", state + "/kept", beside_self("sbsh-wrapper"));
  fs::create_directories(state + "/snapshots/.copy-a-1/x");
  fs::create_directories(state + "/snapshots/.remove-b-2");
  fs::create_directories(state + "/snapshots/c");
  store.sweep_leftovers();
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_FALSE(fs::exists(state + "/snapshots/.copy-a-1"));
  EXPECT_FALSE(fs::exists(state + "/snapshots/.remove-b-2"));
  EXPECT_TRUE(fs::exists(state + "/snapshots/c")) << "a copy is kept: its session may come back";
}

}  // namespace sbsh::daemon::snapshots_tests
