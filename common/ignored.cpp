// What ignore rules leave out of a tree (see ignored.h).
#include "common/ignored.h"

#include <fcntl.h>
#include <ftw.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdio>
#include <cstring>


namespace sbsh::ignored {

namespace {

bool write_file(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "we");
  if (f == nullptr) return false;
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return std::fclose(f) == 0 && ok;
}

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  (void)::remove(path);
  return 0;
}

std::string failed(const std::string& what, int err) { return what + ": " + std::strerror(err); }

// Creates the empty repository in `gitdir`, its exclude file holding `rules`.
std::string make_repo(const std::string& gitdir, const std::vector<std::string>& rules) {
  if (::mkdir(gitdir.c_str(), 0700) != 0) return failed("cannot create " + gitdir, errno);
  std::string text;
  for (const auto& r : rules) text += r + "\n";
  for (const char* d : {"/objects", "/refs"})
    if (::mkdir((gitdir + d).c_str(), 0700) != 0) return failed("cannot create " + gitdir + d, errno);
  if (!write_file(gitdir + "/HEAD", "ref: refs/heads/main\n") || !write_file(gitdir + "/rules", text))
    return failed("cannot write in " + gitdir, errno);
  return {};
}

// Runs git ls-files in the repository `gitdir` over `source`; its NUL-separated output goes
// to `out`.
std::string run_git(const std::string& source, const std::string& gitdir, bool gitignore, std::string& out,
                    const std::string& without_git) {
  // No configuration of the user's or the system's counts; a tree owned by someone else is
  // no reason to refuse (safe.directory guards repositories, and this one is ours).
  std::vector<std::string> env_store{"GIT_DIR=" + gitdir,       "GIT_WORK_TREE=" + source,
                                     "GIT_CONFIG_NOSYSTEM=1",   "GIT_CONFIG_GLOBAL=/dev/null",
                                     "GIT_CONFIG_COUNT=1",      "GIT_CONFIG_KEY_0=safe.directory",
                                     "GIT_CONFIG_VALUE_0=*",    "LC_ALL=C"};
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "GIT_", 4) != 0 && std::strncmp(*e, "LC_ALL=", 7) != 0) env_store.emplace_back(*e);
  std::vector<std::string> argv_store{"git", "ls-files", "--others", "--ignored", "--directory", "-z",
                                      "--exclude-from=" + gitdir + "/rules"};
  if (gitignore) argv_store.emplace_back("--exclude-per-directory=.gitignore");
  std::vector<char*> argv, envp;
  for (auto& a : argv_store) argv.push_back(a.data());
  for (auto& e : env_store) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);

  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return failed("cannot run git: pipe", errno);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addchdir_np(&fa, source.c_str());
  pid_t pid = 0;
  int err = ::posix_spawnp(&pid, "git", &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(p[1]);
  if (err != 0) {
    ::close(p[0]);
    if (err == ENOENT)
      return "the ignore rules are applied by git, which is not installed: install git, or " + without_git;
    return failed("cannot run git", err);
  }
  char chunk[65536];
  for (;;) {
    ssize_t n = ::read(p[0], chunk, sizeof chunk);
    if (n > 0) out.append(chunk, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  ::close(p[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return "git could not apply the ignore rules (its message is above)";
  return {};
}

}  // namespace

bool listing::has(const std::string& rel) const {
  auto it = paths.find(rel);
  if (it == paths.end()) return false;
  if (rel.back() != '/') return true;
  ++it;
  return it == paths.end() || it->compare(0, rel.size(), rel) != 0;
}

bool names_dot_git(const std::vector<std::string>& rules) {
  return std::ranges::any_of(rules, [](const std::string& r) {
    return r == ".git" || r == ".git/" || r == "/.git" || r == "/.git/";
  });
}

std::string list(const std::string& source, const std::string& gitdir, const std::vector<std::string>& rules,
                 bool gitignore, listing& out, const std::string& without_git) {
  out.skip_dot_git = names_dot_git(rules);
  std::string text;
  std::string error = make_repo(gitdir, rules);
  if (error.empty()) error = run_git(source, gitdir, gitignore, text, without_git);
  ::nftw(gitdir.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  if (!error.empty()) return error;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.paths.emplace(text, start, end - start);
    start = end + 1;
  }
  return {};
}

}  // namespace sbsh::ignored
