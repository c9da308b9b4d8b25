// Where the session table lives on disk: one file per session, STATE/sessions/NAME.msgpack
// (its definition, its idle time, and its creator's environment named by hash), and one
// file per distinct environment, STATE/environs/HASH.msgpack (session_environ.h), written
// when the first session with it is saved and removed when the last one goes. A change
// rewrites one small file, so that making the 10,000th session costs what the first did.
// The idle times of all sessions are saved together in STATE/activity.msgpack
// (save_activity): a session's own file is not written again when only its idle time
// changed.
//
// Writes are queued and done in batches off the loop, one batch at a time, each in three
// steps with an fsync of the directory after each: the environments new to the disk, then the
// sessions' files written or removed, then the environments no session uses any more. Every
// file is written beside its place and renamed into it. So whenever sbshd stops, each file
// is either the old one or the new one, and a session's file is never on disk before its
// environment's. At start, a file that cannot be read is set aside (NAME.msgpack.corrupt-MS)
// and the others load; so is a session whose environment is missing; an environment no
// session names is deleted. The single STATE/sessions.msgpack of earlier versions is read
// once, its sessions saved this way, and removed once they are on disk.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/session_def.h"
#include "ipc/records.h"

namespace sbsh::daemon {

class session_store {
 public:
  session_store(uv_loop_t* loop, std::string state_dir);
  session_store(const session_store&) = delete;
  session_store& operator=(const session_store&) = delete;

  [[nodiscard]] std::string sessions_dir() const { return state_dir_ + "/sessions"; }
  [[nodiscard]] std::string environs_dir() const { return state_dir_ + "/environs"; }
  // The file of earlier versions, converted at start.
  [[nodiscard]] std::string legacy_file() const { return state_dir_ + "/sessions.msgpack"; }
  // Every session's idle time, in one file (ipc::activity_file).
  [[nodiscard]] std::string activity_file() const { return state_dir_ + "/activity.msgpack"; }

  // A session read back at start: its definition as saved (its environment filled in from its
  // environment's file), when it last had something to do (0: unknown), and whether it came
  // from the file of earlier versions (it is then not on disk in this form yet).
  struct loaded {
    std::string name;
    session_spec spec;
    int64_t last_active = 0;
    bool converted = false;
  };
  // Reads every session saved, sets aside what cannot be read, deletes what nothing uses (an
  // environment no session names, a file left half-written), and reads the file of earlier
  // versions for the sessions not saved otherwise. Call once, at start, before saving.
  std::vector<loaded> load();

  // Saves session `name` (its file, and its environment's when the disk does not have it).
  // With `on_disk`, the file is there already (loaded at start): it is only counted.
  void save(const std::string& name, const session_def& def, int64_t last_active, bool on_disk = false);
  // Removes session `name`'s file, and its environment's when no other session has it.
  void remove(const std::string& name);
  // Whether session `name` was saved with this idle time (an idle time that changed since is
  // saved at most once a minute: server::session_activity).
  [[nodiscard]] bool saved_with(const std::string& name, int64_t last_active) const;
  // Saves the idle times of the sessions that can expire, all of them, in one file: the
  // sessions' own files are not written again for it.
  void save_activity(std::map<std::string, int64_t> last_active);
  // Calls `done` once everything saved or removed so far is on disk (at once when nothing
  // waits): a client told that a session was made can count on it surviving a crash.
  void when_written(std::function<void()> done);
  // Whether load() read the file of earlier versions; once the sessions converted from it are
  // on disk, finish_conversion removes it, or with `keep_aside` sets it aside saying `why`.
  [[nodiscard]] bool converting() const { return converting_; }
  void finish_conversion(bool keep_aside, const std::string& why);

  // The text of the distinct environments of the sessions saved, each counted once, and
  // whether environment `hash` is among them (server::room_for_definition).
  [[nodiscard]] size_t environ_bytes() const { return environ_bytes_; }
  [[nodiscard]] bool has_environ(const std::string& hash) const { return uses_.contains(hash); }
  [[nodiscard]] size_t environ_count() const { return uses_.size(); }

 private:
  // What one batch does, in this order (see the top of this file).
  struct batch {
    std::map<std::string, std::string> environ_writes;                 // by hash: bytes
    std::map<std::string, std::optional<std::string>> session_writes;  // by name: bytes, or none to remove
    std::set<std::string> environ_removes;                             // hashes
    std::optional<std::string> activity_write;                         // the idle times' file
    std::vector<std::function<void()>> waiters;
    [[nodiscard]] bool empty() const {
      return environ_writes.empty() && session_writes.empty() && environ_removes.empty() && !activity_write;
    }
  };
  void use_environ(const environ_ref& e);
  void drop_environ(const std::string& hash);
  void flush();
  // What load() reads from each directory, and the idle times' file.
  void load_activity();
  void load_sessions(std::vector<loaded>& out);
  void load_legacy(std::vector<loaded>& out);
  // The variables of environment `hash`, read once; nullptr when its file cannot be read.
  const std::vector<std::string>* environ_vars(const std::string& hash);

  uv_loop_t* loop_;
  std::string state_dir_;
  struct saved {
    std::string environ;  // its hash
    int64_t last_active = 0;
  };
  std::unordered_map<std::string, saved> saved_;  // by session name
  std::map<std::string, int64_t> activity_;        // the idle times in the activity file
  // While loading: the activity file's idle times.
  std::map<std::string, int64_t> read_activity_;
  struct use {
    size_t sessions = 0;
    size_t bytes = 0;
  };
  std::unordered_map<std::string, use> uses_;  // by environment hash
  size_t environ_bytes_ = 0;
  std::set<std::string> environs_on_disk_;  // those written or being written, not removed since
  batch next_;
  bool busy_ = false;  // a batch is being written
  bool converting_ = false;
  std::vector<std::function<void()>> running_waiters_;
  // While loading: environments read, by hash (absent: unreadable).
  std::map<std::string, std::optional<std::vector<std::string>>> read_environs_;
};

}  // namespace sbsh::daemon
