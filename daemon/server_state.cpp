// The state store: the session definitions in STATE/sessions.msgpack, written atomically off
// the loop (one write per file at a time, so an older state never lands last), read back at
// start, and set aside when unreadable.
#include "daemon/server.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "common/paths.h"
#include "daemon/off_loop.h"
#include "daemon/session.h"
#include "daemon/state_files.h"
#include "ipc/messages.h"

namespace sbsh::daemon {

void server::save_state() {
  activity_save_timer_.reset();  // this write has them
  ipc::sessions_file f;
  for (const auto& [name, s] : sessions_) {
    f.sessions.emplace(name, s->def());
    if (s->def().idle_expiry_ms > 0) f.last_active.emplace(name, s->last_active_ms());
  }
  write_atomically(state_file(), ipc::encode(f));
}

void server::write_atomically(const std::string& path, std::string bytes) {
  auto& w = writes_[path];
  if (w.busy) {  // one write per file at a time, so an older state never lands last
    w.next = std::move(bytes);
    return;
  }
  w.busy = true;
  auto data = std::make_shared<std::string>(std::move(bytes));
  auto error = std::make_shared<std::string>();
  // Off the loop: fsync may take a while.
  off_loop(
      &loop_,
      [path, data, error] {
        if (auto s = write_file_atomically(path, *data); !s) *error = s.err().message;
      },
      [this, path, error] {
        if (!error->empty()) spdlog::error("{}", *error);
        auto& w = writes_[path];
        w.busy = false;
        auto written = std::move(w.current_waiters);
        w.current_waiters = std::move(w.next_waiters);
        w.next_waiters.clear();
        if (w.next) {
          std::string next = std::move(*w.next);
          w.next.reset();
          write_atomically(path, std::move(next));
        }
        for (auto& done : written) done();
      });
}

void server::after_state_written(std::function<void()> done) {
  auto& w = writes_[state_file()];
  if (!w.busy) return done();
  (w.next ? w.next_waiters : w.current_waiters).push_back(std::move(done));
}

void server::load_state(std::map<std::string, adopted_shell>& adopted) {
  std::string path = state_file();
  bool missing;
  auto m = read_state_file(path, &missing);
  if (!m) {
    if (!missing) move_aside(path, m.err().message);
    return;
  }
  auto file = ipc::decode<ipc::sessions_file>(*m);
  if (!file) return move_aside(path, file.err().message);
  bool expired = false;
  for (auto& [name, spec] : file->sessions) {
    auto def = def_from_saved(std::move(spec));
    if (!def) return move_aside(path, fmt::format("session '{}' is invalid: {}", name, def.err().message));
    if (!valid_session_name(name)) return move_aside(path, fmt::format("session '{}' is invalid", name));
    auto shell = adopted.find(name);
    auto active = file->last_active.find(name);
    if (active != file->last_active.end() && def->idle_expiry_ms > 0 &&
        wall_ms() >= active->second + static_cast<int64_t>(def->idle_expiry_ms) && shell == adopted.end()) {
      // It expired while no sbshd ran: never start a shell only to remove it.
      spdlog::info("session {} removed: idle for more than its expiry ({} ms) while sbshd was not running", name,
                   def->idle_expiry_ms);
      expired = true;
      continue;
    }
    auto s = create_session(name, *def, shell != adopted.end() ? &shell->second : nullptr);
    if (s && active != file->last_active.end()) (*s)->touch(std::min(active->second, wall_ms()));
    if (!s) {
      spdlog::error("cannot recreate session {}: {}", name, s.err().message);
    } else if (shell == adopted.end()) {
      spdlog::info("recreated session {} from {}", name, path);
      (*s)->jobs().assume_earlier_shell("sbshd restarted and the session's shell did not outlive it");
    }
    if (shell != adopted.end()) adopted.erase(shell);
  }
  if (expired) save_state();
  arm_expiry();  // the sessions loaded keep the idle time they had
}

}  // namespace sbsh::daemon
