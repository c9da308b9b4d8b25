// Files beneath a session's root (sbsh file, connection::read_file and the rest) against a
// real sbshd: exact bytes, atomic writes, and confinement to the root through every verb
// (.., absolute paths, symlinks pointing out, a symlink swapped during the call, fifos,
// devices, directories), locally (the open file passed) and through a dial command (chunks).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "fixture.h"
#include "ipc/messages.h"
#include "ipc/socket_io.h"

namespace sbsh::test::file_tests {

namespace fs = std::filesystem;


// Every byte value, NULs and invalid UTF-8 among them, `n` times over, shuffled.
std::string awkward_bytes(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i)
    for (int b = 0; b < 256; ++b) s.push_back(static_cast<char>(b));
  std::shuffle(s.begin(), s.end(), std::mt19937(7));
  return s;
}

// Names beneath `root` that a write left behind (its temporary files).
std::vector<std::string> leftovers(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.path().filename().string().find(".sbsh-") != std::string::npos) out.push_back(e.path().string());
  return out;
}

constexpr size_t file_service_writes = 16;  // sbshd's kMaxWritesPerClient
constexpr size_t file_service_reads = 8;    // and kMaxReadsPerClient

class file_test : public root_session_test {
 protected:
  void SetUp() override {
    root_session_test::SetUp();
    if (HasFatalFailure()) return;
    outside = dir + "/outside";
    fs::create_directories(root + "/sub");
    put(outside + "/secret", "outside secret\n");
    put(root + "/inside/secret", "inside\n");
  }
  // The same through a dial command: bytes in chunks rather than a passed descriptor.
  run_result dial_file(std::vector<std::string> args, const std::string* in = nullptr) {
    std::vector<std::string> argv{bin("sbsh"), "--dial",
                                  shell_quote(bin("sbsh")) + " -S " + shell_quote(sock) + " --no-autostart dial-stdio",
                                  "file"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.begin() + 5, {"-s", "ws"});
    return run(argv, in);
  }
  client::connection dial_conn() {
    client::connect_options o;
    o.dial_command = {bin("sbsh"), "-S", sock, "--no-autostart", "dial-stdio"};
    auto c = client::connection::connect(o);
    EXPECT_TRUE(c.ok()) << c.err().message;
    return std::move(*c);
  }
  // A refusal: exit 255, the reason on stderr, naming `given` and nothing of the host beyond it.
  void expect_outside(const run_result& r, const std::string& given) {
    EXPECT_EQ(r.code, 255) << r.out << r.err;
    EXPECT_NE(r.err.find("'" + given + "' leads outside the session's root"), std::string::npos) << r.err;
    if (given.find(outside) == std::string::npos) {
      EXPECT_EQ(r.err.find(outside), std::string::npos) << r.err;
    }
    EXPECT_EQ(r.out.find("outside secret"), std::string::npos);
  }

  std::string outside;
};

TEST_F(file_test, BytesRoundTripExactlyAndWritesKeepOrSetTheMode) {
  std::string bytes = awkward_bytes(64);
  auto w = file({"write", "data/in.bin"}, &bytes);
  ASSERT_EQ(w.code, 0) << w.err;
  EXPECT_EQ(read_file(root + "/data/in.bin"), bytes);  // the parent was made
  struct stat st {};
  ASSERT_EQ(::stat((root + "/data/in.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  auto r = file({"read", "data/in.bin"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, bytes);
  r = file({"read", "--offset", "10", "--length", "100", root + "/data/in.bin"});  // absolute, inside
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, bytes.substr(10, 100));

  ASSERT_EQ(::chmod((root + "/data/in.bin").c_str(), 0751), 0);
  std::string next = "next\n";
  ASSERT_EQ(file({"write", "data/in.bin"}, &next).code, 0);
  ASSERT_EQ(::stat((root + "/data/in.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0751u) << "an existing file keeps its mode";
  EXPECT_EQ(read_file(root + "/data/in.bin"), next);
  ASSERT_EQ(file({"write", "--mode", "600", "data/in.bin"}, &next).code, 0);
  ASSERT_EQ(::stat((root + "/data/in.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);

  auto no = file({"write", "--no-parents", "missing/x"}, &next);
  EXPECT_EQ(no.code, 255);
  EXPECT_NE(no.err.find("'missing/x'"), std::string::npos) << no.err;
  EXPECT_FALSE(fs::exists(root + "/missing"));
  EXPECT_TRUE(leftovers(root).empty());
}

TEST_F(file_test, EveryVerbRefusesPathsLeadingOutOfTheRoot) {
  ASSERT_EQ(::symlink("/etc", (root + "/etc-link").c_str()), 0);
  ASSERT_EQ(::symlink("../outside", (root + "/up-link").c_str()), 0);
  ASSERT_EQ(::symlink(outside.c_str(), (root + "/abs-link").c_str()), 0);
  std::string text = "x";
  for (const std::string& p : std::vector<std::string>{"../outside/secret", outside + "/secret", "up-link/secret", "abs-link/secret",
                              "sub/../../outside/secret"}) {
    SCOPED_TRACE(p);
    expect_outside(file({"read", p}), p);
    expect_outside(file({"stat", p}), p);
    expect_outside(file({"rm", p}), p);
    expect_outside(file({"write", p}, &text), p);
    expect_outside(file({"mv", p, "moved"}), p);
    expect_outside(file({"mv", "inside/secret", p}), p);
  }
  expect_outside(file({"read", "etc-link/passwd"}), "etc-link/passwd");
  expect_outside(file({"ls", "etc-link"}), "etc-link");
  expect_outside(file({"ls", ".."}), "..");
  expect_outside(file({"mkdir", "-p", "up-link/new"}), "up-link/new");
  expect_outside(file({"rm", "-r", "up-link/"}), "up-link/");
  // Nothing outside changed, and nothing was left behind inside.
  EXPECT_EQ(read_file(outside + "/secret"), "outside secret\n");
  EXPECT_FALSE(fs::exists(outside + "/new"));
  EXPECT_EQ(read_file(root + "/inside/secret"), "inside\n");
  EXPECT_TRUE(leftovers(root).empty());
  EXPECT_TRUE(leftovers(outside).empty());
  // A symlink that stays beneath the root is followed; one at the end of rm's path goes itself.
  ASSERT_EQ(::symlink("inside", (root + "/in-link").c_str()), 0);
  auto r = file({"read", "in-link/secret"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "inside\n");
  EXPECT_EQ(file({"rm", "abs-link"}).code, 0);
  EXPECT_FALSE(fs::is_symlink(root + "/abs-link"));
  EXPECT_EQ(read_file(outside + "/secret"), "outside secret\n");
}

TEST_F(file_test, AnAbsoluteSymlinkIntoTheRootIsFollowedAsTheShellFollowsIt) {
  // Links made with absolute paths, as `ln -s "$PWD/data" here` makes them, that lead back
  // beneath the root (named by its real path) are followed by every verb and by exec -C, as
  // the shell follows them; those that lead out, even through the root's text, are not.
  std::string real = fs::canonical(root).string();
  put(root + "/data/in.txt", "in\n");
  ASSERT_EQ(::symlink((real + "/data/in.txt").c_str(), (root + "/abs-file").c_str()), 0);
  ASSERT_EQ(::symlink((real + "/data").c_str(), (root + "/sub/abs-dir").c_str()), 0);
  ASSERT_EQ(::symlink((real + "//./data/").c_str(), (root + "/abs-dir-slashes").c_str()), 0);
  ASSERT_EQ(::symlink("sub/abs-dir", (root + "/rel-to-abs").c_str()), 0);  // relative, then absolute
  ASSERT_EQ(::symlink(real.c_str(), (root + "/abs-root").c_str()), 0);
  ASSERT_EQ(::symlink((real + "/../outside").c_str(), (root + "/abs-dotdot").c_str()), 0);
  ASSERT_EQ(::symlink((real + "/abs-loop").c_str(), (root + "/abs-loop").c_str()), 0);
  for (const std::string& p : std::vector<std::string>{"abs-file", "sub/abs-dir/in.txt", "abs-dir-slashes/in.txt",
                                                       "rel-to-abs/in.txt", "abs-root/data/in.txt",
                                                       "sub/abs-dir/../data/in.txt", real + "/sub/abs-dir/in.txt"}) {
    SCOPED_TRACE(p);
    auto r = file({"read", p});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "in\n");
    r = file({"stat", p, "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
  }
  auto r = file({"ls", "rel-to-abs", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at(0).at("path"), "in.txt") << r.out;
  std::string text = "new\n";
  r = file({"write", "sub/abs-dir/new.txt"}, &text);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_file(root + "/data/new.txt"), text);
  EXPECT_EQ(file({"mkdir", "-p", "rel-to-abs/made/deeper"}).code, 0);
  EXPECT_TRUE(fs::is_directory(root + "/data/made/deeper"));
  EXPECT_EQ(file({"mv", "sub/abs-dir/new.txt", "abs-root/moved.txt"}).code, 0);
  EXPECT_EQ(read_file(root + "/moved.txt"), text);
  EXPECT_EQ(sbsh({"exec", "-s", "ws", "-C", "sub/abs-dir", "pwd"}).out, real + "/data\n");
  // The shell reaches the same files by the same links.
  EXPECT_EQ(sbsh({"exec", "-s", "ws", "cat abs-file rel-to-abs/in.txt"}).out, "in\nin\n");

  expect_outside(file({"read", "abs-dotdot/secret"}), "abs-dotdot/secret");
  expect_outside(file({"ls", "abs-dotdot"}), "abs-dotdot");
  expect_outside(file({"write", "abs-dotdot/new"}, &text), "abs-dotdot/new");
  EXPECT_FALSE(fs::exists(outside + "/new"));
  r = file({"read", "abs-loop"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("'abs-loop': Too many levels of symbolic links"), std::string::npos) << r.err;
  EXPECT_TRUE(leftovers(root).empty());
}

TEST_F(file_test, ASymlinkSwappedDuringTheCallsNeverLeadsOut) {
  put(root + "/safe/secret", "safe\n");
  ASSERT_EQ(::symlink("safe", (root + "/swap").c_str()), 0);
  std::atomic<bool> stop{false};
  // Swaps root/swap between a link to safe/ and one to the outside directory, atomically.
  std::thread swapper([&] {
    for (int i = 0; !stop; ++i) {
      std::string tmp = root + "/.swap-tmp";
      ::unlink(tmp.c_str());
      if (::symlink(i % 2 == 0 ? outside.c_str() : "safe", tmp.c_str()) == 0) ::rename(tmp.c_str(), (root + "/swap").c_str());
    }
  });
  auto c = conn();
  // Until both outcomes were seen: the race was really run through.
  int inside = 0, refused = 0;
  for (int i = 0; i < 300 || ((inside == 0 || refused == 0) && i < 20000); ++i) {
    std::string got;
    auto r = c.read_file("ws", "swap/secret", [&got](std::string_view d) { got.append(d); });
    if (r.ok()) {
      EXPECT_EQ(got, "safe\n");
      ++inside;
    } else {
      EXPECT_EQ(r.err().code, "outside_root") << r.err().message;
      ++refused;
    }
    auto w = c.write_file("ws", "swap/dropped", std::string_view("x"));
    if (!w.ok()) {
      EXPECT_EQ(w.err().code, "outside_root") << w.err().message;
    }
  }
  stop = true;
  swapper.join();
  EXPECT_GT(inside, 0);
  EXPECT_GT(refused, 0);
  // The same with the swaps made by a command running in the session itself.
  auto started = sbsh({"start", "-s", "ws", "--name", "swapper",
                       "cd \"$SBSH_ROOT\" && while :; do ln -sfn " + outside + " .t1 && mv -Tf .t1 swap; "
                       "ln -sfn safe .t2 && mv -Tf .t2 swap; done"});
  ASSERT_EQ(started.code, 0) << started.err;
  for (int i = 0; i < 200; ++i) {
    std::string got;
    auto r = c.read_file("ws", "swap/secret", [&got](std::string_view d) { got.append(d); });
    if (r.ok()) {
      EXPECT_EQ(got, "safe\n");
    } else {
      EXPECT_TRUE(r.err().code == "outside_root" || r.err().code == "file_failed") << r.err().message;
    }
  }
  EXPECT_EQ(sbsh({"kill", "-s", "KILL", "swapper"}).code, 0);
  EXPECT_FALSE(fs::exists(outside + "/dropped"));
  EXPECT_EQ(read_file(outside + "/secret"), "outside secret\n");
}

TEST_F(file_test, FifosDevicesAndDirectoriesAreNotFiles) {
  ASSERT_EQ(::mkfifo((root + "/fifo").c_str(), 0644), 0);
  auto r = file({"read", "fifo"});  // must not block on the fifo
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("'fifo' is not a regular file (a fifo)"), std::string::npos) << r.err;
  std::string text = "x";
  r = file({"write", "fifo"}, &text);
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
  EXPECT_EQ(file({"stat", "fifo", "--json"}).out.find("\"type\":\"fifo\"") != std::string::npos, true);
  if (::mknod((root + "/null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
    r = file({"read", "null"});
    EXPECT_EQ(r.code, 255);
    EXPECT_NE(r.err.find("not a regular file (a char)"), std::string::npos) << r.err;
  }
  r = file({"read", "sub"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("'sub' is a directory"), std::string::npos) << r.err;
  r = file({"write", "sub"}, &text);
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("'sub' is a directory"), std::string::npos) << r.err;
  r = file({"read", "nothing-here"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("'nothing-here': No such file or directory"), std::string::npos) << r.err;
  EXPECT_TRUE(leftovers(root).empty());
}

TEST_F(file_test, ListStatRemoveMakeAndMove) {
  put(root + "/a/b/c.txt", "ccc");
  ASSERT_EQ(::symlink("/etc", (root + "/a/link").c_str()), 0);
  auto r = file({"ls", "a", "-R", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 3u) << r.out;
  EXPECT_EQ(j[0]["path"], "b");
  EXPECT_EQ(j[0]["type"], "dir");
  EXPECT_EQ(j[1]["path"], "b/c.txt");
  EXPECT_EQ(j[1]["size"], 3);
  EXPECT_EQ(j[1]["mode"], "0644");
  EXPECT_EQ(j[2]["path"], "link");
  EXPECT_EQ(j[2]["type"], "symlink");
  EXPECT_EQ(j[2]["target"], "/etc");
  r = file({"ls"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(" a\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" inside\n"), std::string::npos) << r.out;
  r = file({"stat", "a/b/c.txt", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["size"], 3);

  EXPECT_EQ(file({"mkdir", "x/y"}).code, 255);  // no parent, no -p
  EXPECT_EQ(file({"mkdir", "-p", "x/y/z"}).code, 0);
  EXPECT_TRUE(fs::is_directory(root + "/x/y/z"));
  EXPECT_EQ(file({"mkdir", "-p", "x/y/z"}).code, 0);
  EXPECT_EQ(file({"mkdir", "x"}).code, 255);
  EXPECT_EQ(file({"mv", "a/b/c.txt", "x/y/c.txt"}).code, 0);
  EXPECT_EQ(read_file(root + "/x/y/c.txt"), "ccc");
  EXPECT_FALSE(fs::exists(root + "/a/b/c.txt"));
  r = file({"rm", "x"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("give -r"), std::string::npos) << r.err;
  EXPECT_EQ(file({"rm", "-r", "x"}).code, 0);
  EXPECT_FALSE(fs::exists(root + "/x"));
  r = file({"rm", "-r", "."});
  EXPECT_EQ(r.code, 255);
  EXPECT_TRUE(fs::exists(root + "/inside/secret")) << "the root itself is never removed";
  EXPECT_EQ(file({"rm", "a/link"}).code, 0);
  EXPECT_TRUE(fs::exists("/etc/passwd"));
}

TEST_F(file_test, NamesThatAreNotUtf8AreListedWithTheirExactBytes) {
  // A name is bytes: one that is not UTF-8 has U+FFFD in its JSON text and its bytes in
  // KEY_base64 beside it, from which it can be named again; a UTF-8 one has no such key.
  put(root + "/d/caf\xe9.txt", "latin-1\n");
  put(root + "/d/plain.txt", "plain\n");
  ASSERT_EQ(::symlink("caf\xe9.txt", (root + "/d/link-\xff").c_str()), 0);
  for (const auto& r : {file({"ls", "d", "--json"}), dial_file({"ls", "d", "--json"})}) {
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j.size(), 3u) << r.out;
    EXPECT_EQ(j[0]["path"], "caf\uFFFD.txt") << r.out;
    EXPECT_EQ(j[0]["path_base64"], "Y2Fm6S50eHQ=") << r.out;  // base64 of "caf\xe9.txt"
    EXPECT_EQ(j[1]["path"], "link-\uFFFD") << r.out;
    EXPECT_EQ(j[1]["path_base64"], "bGluay3/") << r.out;  // "link-\xff"
    EXPECT_EQ(j[1]["target_base64"], "Y2Fm6S50eHQ=") << r.out;
    EXPECT_EQ(j[2]["path"], "plain.txt");
    EXPECT_FALSE(j[2].contains("path_base64")) << r.out;
  }
  auto st = file({"stat", "d/link-\xff", "--json"});
  ASSERT_EQ(st.code, 0) << st.err;
  EXPECT_EQ(nlohmann::json::parse(st.out)["path_base64"], "ZC9saW5rLf8=") << st.out;  // "d/link-\xff"
  EXPECT_EQ(file({"read", "d/link-\xff"}).out, "latin-1\n");
}

TEST_F(file_test, ASessionWithoutARootHasNoFilesAndBadRequestsLeaveSbshdServing) {
  ASSERT_EQ(exec("plain", "true").code, 0);
  std::string text = "x";
  auto r = sbsh({"file", "write", "-s", "plain", "f"}, &text);
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("session 'plain' has no root"), std::string::npos) << r.err;
  r = sbsh({"file", "read", "-s", "nosuch", "f"});
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("no session named 'nosuch'"), std::string::npos) << r.err;
  r = file({"write", "--mode", "999", "f"}, &text);
  EXPECT_EQ(r.code, 255);
  EXPECT_NE(r.err.find("--mode"), std::string::npos) << r.err;
  // A client that goes away in the middle of a write leaves the old file and nothing else.
  put(root + "/kept.txt", "old\n");
  std::string cmd = "(printf partial; sleep 30) | " + shell_quote(bin("sbsh")) + " -S " + shell_quote(sock) +
                    " file write -s ws kept.txt";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::execl("/bin/bash", "bash", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(wait_until([&] { return !leftovers(root).empty(); }, std::chrono::seconds(20)));
  ::kill(-pid, SIGKILL);
  int st = 0;
  ::waitpid(pid, &st, 0);
  EXPECT_TRUE(wait_until([&] { return leftovers(root).empty(); }, std::chrono::seconds(20))) << leftovers(root).size();
  EXPECT_EQ(read_file(root + "/kept.txt"), "old\n");
  EXPECT_EQ(sbsh({"status"}).code, 0);
}

// Without a spare wrapper, whose start after "ws" took the last one would add descriptors
// of its own to sbshd's count while the test measures it.
class file_bounds_test : public file_test {
 public:
  file_bounds_test() { daemon_args = {"--spare-wrappers", "0"}; }
};

TEST_F(file_bounds_test, AClientThatNeverReadsItsRepliesHoldsABoundedShareOfSbshd) {
  put(root + "/ten", std::string(10u << 20, 'x'));
  const size_t before = open_fds(daemon_pid);
  // sbshd's descriptors settle between `low` and `high`: requests still on the thread pool hold
  // theirs only until the loop takes their answers, which under load can come late, and a
  // refused request lets go of its own.
  auto settles = [&](size_t low, size_t high) {
    bool in = wait_until(
        [&] {
          size_t n = open_fds(daemon_pid);
          return n >= low && n <= high;
        },
        std::chrono::seconds(20));
    return ::testing::AssertionResult(in) << open_fds(daemon_pid) << " descriptors, not " << low << " to " << high
                                          << " (" << before << " before the client came)";
  };
  ipc::channel ch{unique_fd(raw_connect(sock))};
  ASSERT_TRUE(ch.send(ipc::encode(ipc::msg::hello{ipc::kProtocolVersion, "test"}, 1)).ok());
  // 40 writes never closed: sbshd keeps 16, each a new file and its directory, and refuses the
  // rest.
  for (uint64_t id = 2; id < 42; ++id) {
    ipc::msg::file_write w;
    w.session = "ws";
    std::string name = "w" + std::to_string(id);
    w.path = name;
    ASSERT_TRUE(ch.send(ipc::encode(w, id)).ok());
  }
  EXPECT_TRUE(wait_until([&] { return leftovers(root).size() == file_service_writes; }, std::chrono::seconds(20)))
      << leftovers(root).size();
  const size_t writing = before + 1 + 2 * file_service_writes;  // with the connection
  EXPECT_TRUE(settles(writing, writing));
  // 40 chunked reads of a file larger than what sbshd queues for a client that does not read:
  // it keeps 8, each an open file, then stops reading this client, whose replies wait unread.
  for (uint64_t id = 42; id < 82; ++id) {
    ipc::msg::file_read r;
    r.session = "ws";
    r.path = "ten";
    ASSERT_TRUE(ch.send(ipc::encode(r, id)).ok());
  }
  EXPECT_TRUE(settles(writing + file_service_reads, writing + file_service_reads));
  EXPECT_EQ(leftovers(root).size(), file_service_writes);
  EXPECT_EQ(sbsh({"status"}).code, 0) << "sbshd goes on serving others";
  ch = ipc::channel();  // the client leaves: what it held is let go, and its new files deleted
  EXPECT_TRUE(wait_until([&] { return leftovers(root).empty(); }, std::chrono::seconds(20))) << leftovers(root).size();
  EXPECT_TRUE(settles(0, before + 1));
}

TEST_F(file_test, LargeFilesPassThroughTheCliTheLibraryAndADialCommand) {
  // 200 MB of a pattern no two blocks of which are alike. Under the sanitizers, where every
  // byte costs several times as much, 40 MB: still 160 chunks and more than two frames' worth.
#ifdef SBSH_SANITIZED
  const size_t kSize = 40u << 20;
#else
  const size_t kSize = 200u << 20;
#endif
  std::string src = dir + "/big.src";
  {
    std::ofstream f(src, std::ios::binary);
    std::mt19937_64 rng(42);
    std::string block(1 << 20, '\0');
    for (size_t done = 0; done < kSize; done += block.size()) {
      for (size_t i = 0; i < block.size(); i += 8) {
        uint64_t v = rng();
        std::memcpy(&block[i], &v, 8);
      }
      f.write(block.data(), static_cast<std::streamsize>(block.size()));
    }
  }
  auto same = [&](const std::string& a, const std::string& b) {
    return run({"/usr/bin/cmp", "-s", a, b}).code == 0;
  };
  std::string q = shell_quote(bin("sbsh")) + " -S " + shell_quote(sock);
  // The CLI, locally: the open file passed both ways.
  auto r = run({"/bin/bash", "-c", q + " file write -s ws big.local < " + shell_quote(src)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(same(src, root + "/big.local"));
  r = run({"/bin/bash", "-c", q + " file read -s ws big.local > " + shell_quote(dir + "/big.back")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(same(src, dir + "/big.back"));
  // Through a dial command: chunks both ways.
  std::string d = shell_quote(bin("sbsh")) + " --dial " + shell_quote(q + " --no-autostart dial-stdio");
  r = run({"/bin/bash", "-c", d + " file write -s ws big.dial < " + shell_quote(src)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(same(src, root + "/big.dial"));
  r = run({"/bin/bash", "-c", d + " file read -s ws big.dial > " + shell_quote(dir + "/big.dial.back")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(same(src, dir + "/big.dial.back"));
  fs::remove(dir + "/big.back");
  fs::remove(dir + "/big.dial.back");
  // The library, local and dialled, from and to memory.
  std::string bytes = read_file(src);
  for (bool remote : {false, true}) {
    SCOPED_TRACE(remote ? "dial" : "local");
    auto c = remote ? dial_conn() : conn();
    auto w = c.write_file("ws", "big.lib", bytes);
    ASSERT_TRUE(w.ok()) << w.err().message;
    EXPECT_EQ(*w, kSize);
    std::string back;
    back.reserve(kSize);
    auto n = c.read_file("ws", "big.lib", [&back](std::string_view d) { back.append(d); });
    ASSERT_TRUE(n.ok()) << n.err().message;
    EXPECT_EQ(*n, kSize);
    EXPECT_TRUE(back == bytes);
  }
  EXPECT_TRUE(leftovers(root).empty());
}

TEST_F(file_test, ASnapshotSessionsRootIsItsCopy) {
  put(dir + "/proj/run.sh", "cat config.yml > result.txt; grep -q fail config.yml && exit 3; exit 0\n");
  ASSERT_EQ(sbsh({"session", "create", "model", "--snapshot", dir + "/proj", "--keep-copy-on-failure"}).code, 0);
  std::string cfg = "mode: fail\n";
  ASSERT_EQ(sbsh({"file", "write", "-s", "model", "config.yml"}, &cfg).code, 0);
  EXPECT_EQ(exec("model", "bash run.sh").code, 3);
  auto r = sbsh({"file", "read", "-s", "model", "result.txt"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, cfg);
  EXPECT_FALSE(fs::exists(dir + "/proj/config.yml")) << "the source is untouched";
  r = sbsh({"file", "ls", "-s", "model", "-R", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto listed = nlohmann::json::parse(r.out);
  ASSERT_EQ(listed.size(), 3u) << r.out;
  EXPECT_EQ(listed[1]["path"], "result.txt");
  r = sbsh({"file", "read", "-s", "model", "../../etc/passwd"});
  EXPECT_EQ(r.code, 255);
  r = sbsh({"session", "rm", "model"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::string kept = trim(r.out);
  EXPECT_EQ(read_file(kept + "/result.txt"), cfg) << "the failed run's copy is kept";
}

}  // namespace sbsh::test::file_tests
