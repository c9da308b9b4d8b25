// What ignore rules leave out of a tree, for a snapshot's copy (wrapper/tree_copy.cpp) and a
// directory setup key (daemon/env_store.cpp), so that both leave out exactly the same.
//
// git itself decides (`git ls-files --others --ignored --directory` against a private, empty
// repository whose exclude file holds the rules), so the rules mean exactly what they mean in
// a .gitignore. git never looks at a directory named .git: such a directory is left out when
// the rules name `.git` (names_dot_git).
#pragma once

#include <set>
#include <string>
#include <vector>

namespace sbsh::ignored {

// What git leaves out of a tree: "a/b" for a file, "a/b/" for a directory.
struct listing {
  std::set<std::string> paths;
  bool skip_dot_git = false;

  // Whether `rel` ("a/b", or "a/b/" for a directory) is left out. git also lists a directory
  // all of whose entries are left out, and then lists those entries too: such a directory is
  // kept (empty of them), one matched by a rule has nothing listed under it.
  [[nodiscard]] bool has(const std::string& rel) const;
};

// Whether the rules name `.git`, which git itself never reports.
bool names_dot_git(const std::vector<std::string>& rules);

// Runs git over `source` with `rules` (and the tree's .gitignore files when `gitignore`),
// into `out`. `gitdir` (which must not exist) is a scratch directory for the empty
// repository, removed before returning: the tree's own repository, if it is one, must not
// count (git does not report files it tracks as ignored). Returns "" or what went wrong;
// when git is not installed, that ends with `without_git`, what the user can do instead.
std::string list(const std::string& source, const std::string& gitdir, const std::vector<std::string>& rules,
                 bool gitignore, listing& out, const std::string& without_git);

}  // namespace sbsh::ignored
