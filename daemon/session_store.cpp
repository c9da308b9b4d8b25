// The session table on disk (session_store.h): a file per session and per distinct
// environment, written in batches off the loop, read back and checked at start, and the
// single file of earlier versions converted.
#include "daemon/session_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/paths.h"
#include "daemon/off_loop.h"
#include "daemon/state_files.h"
#include "ipc/fd.h"
#include "ipc/messages.h"
#include "ipc/text.h"

namespace sbsh::daemon {

namespace {

constexpr std::string_view kSuffix = ".msgpack";

// Writes `bytes` to `path` through a temporary file beside it, synced before it is renamed
// into place, so that `path` is always the old file or the new one, never part of one. The
// directory is synced by the caller, once per batch. Returns what went wrong, or "".
std::string write_synced(const std::string& path, const std::string& bytes) {
  std::string tmp = path + ".tmp";
  unique_fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd) return fmt::format("cannot write {}: {}", tmp, std::strerror(errno));
  bool ok = ::write(fd.get(), bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()) && ::fsync(fd.get()) == 0;
  int e = errno;
  fd.reset();
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) e = errno;
    ::unlink(tmp.c_str());
    return fmt::format("cannot write {}: {}", path, std::strerror(e));
  }
  return {};
}

void sync_dir(const std::string& dir) {
  unique_fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd) ::fsync(fd.get());
}

// The names in `dir` ending in ".msgpack", that ending removed; files half-written (".tmp")
// are deleted. Set aside files (".corrupt-MS") are left as they are.
std::vector<std::string> stems_in(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    std::string_view n(e->d_name);
    if (n.size() > 4 && n.substr(n.size() - 4) == ".tmp") {
      ::unlinkat(::dirfd(d), e->d_name, 0);
      continue;
    }
    if (n.size() > kSuffix.size() && n.substr(n.size() - kSuffix.size()) == kSuffix)
      out.emplace_back(n.substr(0, n.size() - kSuffix.size()));
  }
  ::closedir(d);
  return out;
}

}  // namespace

session_store::session_store(uv_loop_t* loop, std::string state_dir) : loop_(loop), state_dir_(std::move(state_dir)) {}

void session_store::save(const std::string& name, const session_def& def, int64_t last_active, bool on_disk) {
  std::string hash = def.environ ? def.environ->hash : std::string();
  auto it = saved_.find(name);
  if (it == saved_.end() || it->second.environ != hash) {
    if (def.environ) use_environ(def.environ);
    if (it != saved_.end()) drop_environ(it->second.environ);
  }
  saved_[name] = {hash, last_active};
  if (on_disk) return;
  ipc::session_file f;
  f.name = name;
  f.definition = def;
  f.definition.environment.clear();  // in its own file
  f.environ = hash;
  f.last_active = last_active;
  next_.session_writes[name] = ipc::encode(f);
  flush();
}

void session_store::remove(const std::string& name) {
  if (auto it = saved_.find(name); it != saved_.end()) {
    drop_environ(it->second.environ);
    saved_.erase(it);
  }
  next_.session_writes[name] = std::nullopt;
  flush();
}

void session_store::save_activity(std::map<std::string, int64_t> last_active) {
  ipc::activity_file f;
  f.last_active = std::move(last_active);
  next_.activity_write = ipc::encode(f);
  activity_ = std::move(f.last_active);
  flush();
}

bool session_store::saved_with(const std::string& name, int64_t last_active) const {
  if (auto a = activity_.find(name); a != activity_.end() && a->second == last_active) return true;
  auto it = saved_.find(name);
  return it != saved_.end() && it->second.last_active == last_active;
}

void session_store::use_environ(const environ_ref& e) {
  auto& u = uses_[e->hash];
  if (u.sessions++ > 0) return;
  u.bytes = e->bytes;
  environ_bytes_ += e->bytes;
  // Its removal has not started: the file stays.
  bool staying = next_.environ_removes.erase(e->hash) != 0;
  if (!environs_on_disk_.insert(e->hash).second || staying) return;
  ipc::environ_file f;
  f.vars = e->vars;
  next_.environ_writes[e->hash] = ipc::encode(f);
}

void session_store::drop_environ(const std::string& hash) {
  auto it = uses_.find(hash);
  if (it == uses_.end() || --it->second.sessions > 0) return;
  environ_bytes_ -= it->second.bytes;
  uses_.erase(it);
  next_.environ_writes.erase(hash);  // not started: never written
  next_.environ_removes.insert(hash);
  environs_on_disk_.erase(hash);
}

void session_store::when_written(std::function<void()> done) {
  if (!next_.empty()) return next_.waiters.push_back(std::move(done));
  if (busy_) return running_waiters_.push_back(std::move(done));
  done();
}

void session_store::flush() {
  if (busy_ || next_.empty()) return;
  busy_ = true;
  auto b = std::make_shared<batch>(std::move(next_));
  next_ = batch{};
  running_waiters_ = std::move(b->waiters);
  auto errors = std::make_shared<std::vector<std::string>>();
  // Off the loop: every fsync may take a while. The batch is the job's alone meanwhile.
  off_loop(
      loop_,
      [b, errors, sessions = sessions_dir(), environs = environs_dir(), activity = activity_file(),
       state = state_dir_] {
        auto note = [&](std::string e) {
          if (!e.empty()) errors->push_back(std::move(e));
        };
        if (!b->environ_writes.empty()) {
          for (const auto& [hash, bytes] : b->environ_writes)
            note(write_synced(fmt::format("{}/{}{}", environs, hash, kSuffix), bytes));
          sync_dir(environs);  // before any session's file names them
        }
        if (!b->session_writes.empty()) {
          for (const auto& [name, bytes] : b->session_writes) {
            std::string path = fmt::format("{}/{}{}", sessions, name, kSuffix);
            if (bytes) note(write_synced(path, *bytes));
            else if (::unlink(path.c_str()) != 0 && errno != ENOENT)
              note(fmt::format("cannot remove {}: {}", path, std::strerror(errno)));
          }
          sync_dir(sessions);
        }
        if (b->activity_write) {
          note(write_synced(activity, *b->activity_write));
          sync_dir(state);
        }
        if (!b->environ_removes.empty()) {
          for (const auto& hash : b->environ_removes)
            ::unlink(fmt::format("{}/{}{}", environs, hash, kSuffix).c_str());
          sync_dir(environs);
        }
      },
      [this, errors] {
        for (const auto& e : *errors) spdlog::error("{}", e);
        busy_ = false;
        auto written = std::move(running_waiters_);
        running_waiters_.clear();
        flush();
        for (auto& done : written) done();
      });
}

std::vector<session_store::loaded> session_store::load() {
  for (const auto& dir : {sessions_dir(), environs_dir()})
    if (auto made = make_dirs(dir); !made) spdlog::error("{}", made.err().message);
  std::vector<loaded> out;
  load_activity();
  load_sessions(out);
  load_legacy(out);
  activity_ = std::move(read_activity_);
  read_activity_.clear();
  // An environment that no session names (its last session's removal was cut short) goes.
  for (const auto& hash : stems_in(environs_dir()))
    if (valid_environ_hash(hash) && !environs_on_disk_.contains(hash)) next_.environ_removes.insert(hash);
  read_environs_.clear();
  flush();
  return out;
}

const std::vector<std::string>* session_store::environ_vars(const std::string& hash) {
  auto [it, fresh] = read_environs_.try_emplace(hash);
  if (!fresh) return it->second ? &*it->second : nullptr;
  std::string path = fmt::format("{}/{}{}", environs_dir(), hash, kSuffix);
  bool missing = false;
  auto m = read_state_file(path, &missing);
  if (!m) {
    if (!missing) move_aside(path, m.err().message);
    return nullptr;
  }
  auto f = ipc::decode<ipc::environ_file>(*m);
  if (!f) {
    move_aside(path, f.err().message);
    return nullptr;
  }
  if (environ_hash(f->vars) != hash) {
    move_aside(path, "its variables do not have the hash it is named by");
    return nullptr;
  }
  environs_on_disk_.insert(hash);
  it->second = std::move(f->vars);
  return &*it->second;
}

void session_store::load_activity() {
  bool missing = false;
  auto m = read_state_file(activity_file(), &missing);
  if (!m) {
    if (!missing) move_aside(activity_file(), m.err().message);
    return;
  }
  auto f = ipc::decode<ipc::activity_file>(*m);
  if (!f) return move_aside(activity_file(), f.err().message);
  read_activity_ = std::move(f->last_active);
}

void session_store::load_sessions(std::vector<loaded>& out) {
  for (const auto& name : stems_in(sessions_dir())) {
    std::string path = fmt::format("{}/{}{}", sessions_dir(), name, kSuffix);
    bool missing = false;
    auto m = read_state_file(path, &missing);
    if (!m) {
      if (!missing) move_aside(path, m.err().message);
      continue;
    }
    auto f = ipc::decode<ipc::session_file>(*m);
    if (!f) {
      move_aside(path, f.err().message);
      continue;
    }
    if (!valid_session_name(name) || f->name != name) {
      move_aside(path, fmt::format("it holds session '{}', not one named as the file is", ipc::printable(f->name, 80)));
      continue;
    }
    int64_t active = f->last_active;
    if (auto a = read_activity_.find(name); a != read_activity_.end()) active = std::max(active, a->second);
    loaded l{name, std::move(f->definition), active, false};
    if (!f->environ.empty()) {
      const auto* vars = valid_environ_hash(f->environ) ? environ_vars(f->environ) : nullptr;
      if (vars == nullptr) {
        move_aside(path, fmt::format("its environment {}/{}{} is missing or unreadable", environs_dir(),
                                     ipc::printable(f->environ, 80), kSuffix));
        continue;
      }
      l.spec.environment = *vars;
    }
    out.push_back(std::move(l));
  }
}

void session_store::load_legacy(std::vector<loaded>& out) {
  std::string path = legacy_file();
  bool missing = false;
  auto m = read_state_file(path, &missing);
  if (!m) {
    if (!missing) move_aside(path, m.err().message);
    return;
  }
  auto file = ipc::decode<ipc::sessions_file>(*m);
  if (!file) return move_aside(path, file.err().message);
  converting_ = true;
  std::set<std::string> have;
  for (const auto& l : out) have.insert(l.name);
  for (auto& [name, spec] : file->sessions) {
    if (have.contains(name)) continue;  // converted already, before a crash
    auto active = file->last_active.find(name);
    out.push_back({name, std::move(spec), active != file->last_active.end() ? active->second : 0, true});
  }
}

void session_store::finish_conversion(bool keep_aside, const std::string& why) {
  when_written([path = legacy_file(), dir = sessions_dir(), keep_aside, why] {
    if (keep_aside) return move_aside(path, why);
    if (::unlink(path.c_str()) == 0) spdlog::info("converted {} into one file per session in {}", path, dir);
  });
}

}  // namespace sbsh::daemon
