// Sessions started from a snapshot copy of a directory (`sbsh session create --snapshot`):
// the copies, kept in STATE/snapshots/NAME for as long as the session is defined, and the
// copies kept after their session (STATE/kept/NAME@MS, `session rm --keep-copy`).
//
// A copy is made by `sbsh-wrapper --copy-tree` (wrapper/tree_copy.h: ignore rules applied by
// git, links copied as links, special files skipped) in a child process watched on the loop:
// a large tree never stalls sbshd. It is written under a temporary name and renamed into
// place when complete, so STATE/snapshots/NAME is always a whole copy. Removal renames the
// copy aside at once (a new session of the same name gets a fresh one) and deletes it on the
// thread pool; keeping it renames it into STATE/kept, where a session of the same name never
// looks. Names starting with '.' are leftovers of a copy or a removal that sbshd did not
// finish; they are deleted at start-up.
#pragma once

#include <uv.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ipc/fd.h"
#include "ipc/records.h"
#include "ipc/result.h"
#include "uv/child_process.h"
#include "uv/handles.h"

namespace sbsh::daemon {

class snapshot_store {
 public:
  // Copies go in `dir`, kept copies beside it in `kept_dir`; `copier` is sbsh-wrapper's path.
  snapshot_store(uv_loop_t* loop, std::string dir, std::string kept_dir, std::string copier)
      : loop_(loop), dir_(std::move(dir)), kept_dir_(std::move(kept_dir)), copier_(std::move(copier)) {}
  ~snapshot_store();
  snapshot_store(const snapshot_store&) = delete;
  snapshot_store& operator=(const snapshot_store&) = delete;

  // Where the copy for session `name` lives.
  [[nodiscard]] std::string path_of(const std::string& name) const { return dir_ + "/" + name; }
  // Why the absolute path `source` cannot be copied (not a directory, or one holding the
  // store itself, or inside it), or ok.
  [[nodiscard]] status check_source(const std::string& source) const;
  // What a copy leaves out: gitignore patterns, and the tree's own .gitignore files.
  struct rules {
    std::vector<std::string> ignore;
    bool gitignore = false;
  };
  // Copies `source` to path_of(name) without what `r` leaves out; `done` gets the number of
  // special files skipped once the copy is complete and in place, or why it failed, with
  // nothing left behind.
  void copy(const std::string& name, const std::string& source, const rules& r,
            std::function<void(result<uint64_t>)> done);
  // Stops the copy for `name`, if one runs: its `done` gets an error.
  void cancel(const std::string& name);
  // Renames the copy of `name` aside (a hidden name in the store) and returns its new path,
  // or "" when there is none.
  std::string set_aside(const std::string& name);
  // Deletes the tree at `path` on the thread pool; then runs `done` (may be empty).
  void remove_later(const std::string& path, std::function<void()> done);
  // Moves the copy of `name` into the kept copies and returns its new path, or "" (logged)
  // when there is none or it cannot be moved.
  std::string keep(const std::string& name);
  // Lists the kept copies, oldest first, measuring them on the thread pool.
  void list_kept(std::function<void(std::vector<kept_copy>)> done);
  // Deletes every kept copy; `done` gets those deleted once they are gone.
  void prune_kept(std::function<void(std::vector<kept_copy>)> done);
  // Deletes what an earlier sbshd left half done (names starting with '.').
  void sweep_leftovers();

 private:
  struct copy_job {
    uv::child_ptr proc;
    unique_fd errors;        // the copier's stdout and stderr
    uv::handle_ptr<uv::fd_watch> watch;
    std::string messages;    // the start of what it printed
    std::string tmp;
    std::function<void(result<uint64_t>)> done;
  };
  static void read_errors(copy_job& job);
  void copy_ended(const std::string& name, int64_t status, int sig);

  uv_loop_t* loop_;
  std::string dir_;
  std::string kept_dir_;
  std::string copier_;
  std::map<std::string, copy_job> copies_;
  uint64_t seq_ = 0;
};

// Deletes the tree at `path` without following symbolic links, making each directory
// writable first (a copy keeps the source's modes, and a read-only directory would otherwise
// keep its entries). Returns false when something could not be deleted.
bool remove_tree(const std::string& path);
// The bytes of the regular files beneath `path`, links not followed (0 when it cannot be read).
uint64_t tree_bytes(const std::string& path);

}  // namespace sbsh::daemon
