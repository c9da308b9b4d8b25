// The state store: the session definitions, one file each (session_store.h), their idle times
// saved at most once a minute, read back at start; and the other state files (procs.msgpack),
// written atomically off the loop, one write per file at a time, so that an older state never
// lands last.
#include "daemon/server.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
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
  // When any idle time changed since it was saved: all of them, in one file.
  std::map<std::string, int64_t> idle;
  bool changed = false;
  for (const auto& [name, s] : sessions_) {
    if (s->def().idle_expiry_ms == 0) continue;
    idle[name] = s->last_active_ms();
    changed = changed || !store_.saved_with(name, s->last_active_ms());
  }
  if (changed) store_.save_activity(std::move(idle));
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

void server::after_state_written(std::function<void()> done) { store_.when_written(std::move(done)); }

void server::load_state(std::map<std::string, adopted_shell>& adopted) {
  auto saved = store_.load();
  size_t converted = 0, bad = 0;
  for (auto& l : saved) {
    const std::string& name = l.name;
    auto def = def_from_saved(std::move(l.spec));
    if (!def || !valid_session_name(name)) {
      std::string why = def ? "its name is invalid" : def.err().message;
      if (l.converted) {
        ++bad;
        spdlog::error("session {} in {} is invalid and was left out: {}", name, store_.legacy_file(), why);
        continue;
      }
      move_aside(fmt::format("{}/{}.msgpack", store_.sessions_dir(), name), fmt::format("session '{}' is invalid: {}", name, why));
      continue;
    }
    auto shell = adopted.find(name);
    if (l.last_active > 0 && def->idle_expiry_ms > 0 &&
        wall_ms() >= l.last_active + static_cast<int64_t>(def->idle_expiry_ms) && shell == adopted.end()) {
      // It expired while no sbshd ran: never start a shell only to remove it.
      spdlog::info("session {} removed: idle for more than its expiry ({} ms) while sbshd was not running", name,
                   def->idle_expiry_ms);
      if (!l.converted) store_.remove(name);
      continue;
    }
    // A session read from its own file is there already; one converted is written now.
    state_on_disk_ = !l.converted;
    auto s = create_session(name, *def, shell != adopted.end() ? &shell->second : nullptr);
    state_on_disk_ = false;
    if (s && l.last_active > 0) (*s)->touch(std::min(l.last_active, wall_ms()));
    if (!s) {
      spdlog::error("cannot recreate session {}: {}", name, s.err().message);
      if (!l.converted) store_.remove(name);
    } else if (shell == adopted.end()) {
      spdlog::info("recreated session {}", name);
      (*s)->jobs().assume_earlier_shell("sbshd restarted and the session's shell did not outlive it");
    }
    if (s && l.converted) {
      ++converted;
      store_.save(name, (*s)->def(), (*s)->last_active_ms());  // with the idle time it had
    }
    if (shell != adopted.end()) adopted.erase(shell);
  }
  if (store_.converting()) {
    spdlog::info("{} sessions read from {}, to be kept one file each in {}", converted, store_.legacy_file(),
                 store_.sessions_dir());
    store_.finish_conversion(bad > 0, fmt::format("{} of its sessions are invalid", bad));
  }
  upkeep_.arm_expiry();  // the sessions loaded keep the idle time they had
}

}  // namespace sbsh::daemon
