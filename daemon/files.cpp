#include "daemon/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "daemon/beneath.h"
#include "daemon/client_conn.h"
#include "daemon/off_loop.h"
#include "daemon/service_context.h"
#include "daemon/session.h"
#include "ipc/bounds.h"
#include "ipc/messages.h"

namespace sbsh::daemon {

namespace msg = ipc::msg;

namespace {

std::string type_of(mode_t m) {
  if (S_ISREG(m)) return "file";
  if (S_ISDIR(m)) return "dir";
  if (S_ISLNK(m)) return "symlink";
  if (S_ISFIFO(m)) return "fifo";
  if (S_ISSOCK(m)) return "socket";
  if (S_ISCHR(m)) return "char";
  if (S_ISBLK(m)) return "block";
  return "unknown";
}

file_entry entry_of(std::string path, const struct stat& st, int dir, const char* name) {
  file_entry e;
  e.path = std::move(path);
  e.type = type_of(st.st_mode);
  e.size = static_cast<uint64_t>(st.st_size);
  e.mode = st.st_mode & 07777;
  e.mtime_ms = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
  if (S_ISLNK(st.st_mode)) {
    char buf[PATH_MAX];
    ssize_t n = ::readlinkat(dir, name, buf, sizeof buf);
    if (n > 0) e.target.assign(buf, static_cast<size_t>(n));
  }
  return e;
}

// Where a session's file requests reach (own_rules): its root, and for a confined session
// every directory its shell may reach besides the system's, with the shell's rights: what the
// shell may only read, a request may only read. An error when the session has no root.
using file_scope = std::vector<confine::rule>;
result<file_scope> scope_of_session(service_context& srv, std::string_view name) {
  if (auto s = check_session_name(name); !s) return s.err();
  session* s = srv.find_session(std::string(name));
  if (s == nullptr)
    return make_error(ipc::errc::no_such_session, fmt::format("no session named '{}'; 'sbsh session ls' lists them", name));
  if (root_of(s->def()).empty())
    return make_error(ipc::errc::no_root,
                      fmt::format("session '{}' has no root for files to be beneath: create a session with "
                                  "'sbsh session create NAME --root DIR' or '--snapshot DIR'",
                                  name));
  file_scope scope = own_rules(s->def(), srv.session_tmp_dir(s->name()));
  for (auto& r : scope) {  // compared by their text below, as a request's path is
    r.path = std::filesystem::path(r.path).lexically_normal().string();
    while (r.path.size() > 1 && r.path.back() == '/') r.path.pop_back();
  }
  return scope;
}

enum class intent { read, write };

// A request's path resolved to the descriptor of a directory of the scope that holds it, and
// the path from there. A relative path is taken from the root. An absolute one may lie beneath
// several (the root and a directory inside it given with --read-only): as with the shell's
// Landlock rules, what any of them allows is allowed, so a write takes one that may be
// written. Refused when none holds the path (by its text), and for a write when none that
// does may be written. The lookup then stays beneath the directory taken (beneath.h).
struct located {
  unique_fd root;
  std::string rel;
  bool in_root = true;  // beneath the root, not another directory of the scope
};
result<located> locate(const file_scope& scope, std::string_view given, intent want) {
  auto rel = beneath::relative(given, scope.front().path);
  if (!rel && !ipc::has_code(rel.err(), ipc::errc::outside_root)) return rel.err();
  const confine::rule* area = rel ? &scope.front() : nullptr;
  const confine::rule* read_only = nullptr;  // one that holds it but may only be read
  if (!given.empty() && given[0] == '/') {
    for (const auto& r : scope) {
      auto there = beneath::relative(given, r.path);
      if (!there) continue;
      if (want == intent::write && r.what != confine::access::read_write) {
        if (read_only == nullptr) read_only = &r;
        continue;
      }
      rel = std::move(there);
      area = &r;
      break;
    }
  }  // a relative path is taken from the root, which may always be written
  if (area == nullptr && read_only != nullptr)
    return make_error(ipc::errc::read_only,
                      fmt::format("'{}' is beneath {}, which the session may only read (--allow-read, --read-only): "
                                  "write beneath its root or a directory given with --allow-write",
                                  ipc::printable(given, 256), read_only->path));
  if (area == nullptr) {
    if (scope.size() == 1) return rel.err();
    return make_error(ipc::errc::outside_root,
                      fmt::format("'{}' is outside the session's root and the directories it was allowed "
                                  "(TMPDIR, --allow-write, --allow-read, --read-only)",
                                  ipc::printable(given, 256)));
  }
  auto fd = beneath::open_root(area->path);
  if (!fd) return fd.err();
  return located{std::move(*fd), std::move(*rel), area == &scope.front()};
}

// What the directory at the top of `at`'s scope directory is called in messages.
std::string_view top_name(const located& at) {
  return at.in_root ? "the session's root" : "a directory the session was given";
}

// Lists `dir` (open) into `out` as paths after `prefix`; recursing into directories (never
// through a symlink). False with errno when it cannot, or past kMaxListEntries (E2BIG).
bool list_dir(int dir, const std::string& prefix, bool recursive, std::vector<file_entry>& out) {
  std::vector<std::string> names;
  if (!beneath::names_in(dir, &names)) return false;
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    struct stat st {};
    if (::fstatat(dir, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
    if (out.size() >= file_service::kMaxListEntries) {
      errno = E2BIG;
      return false;
    }
    out.push_back(entry_of(prefix + n, st, dir, n.c_str()));
    if (!recursive || !S_ISDIR(st.st_mode)) continue;
    unique_fd sub(::openat(dir, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!sub) continue;  // unreadable: listed, not entered
    if (!list_dir(sub.get(), prefix + n + "/", true, out)) return false;
  }
  return true;
}

std::string temp_name(const std::string& name) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format(".{}.sbsh-{:016x}", name.substr(0, 200), rng());
}

// What each request's work needs, owned.
struct path_args {
  std::string path, to;
  bool flag = false;
};
path_args work_args(const msg::file_stat& r) { return {std::string(r.path), {}, false}; }
path_args work_args(const msg::file_list& r) { return {std::string(r.path), {}, r.recursive}; }
path_args work_args(const msg::file_remove& r) { return {std::string(r.path), {}, r.recursive}; }
path_args work_args(const msg::file_mkdir& r) { return {std::string(r.path), {}, r.parents}; }
path_args work_args(const msg::file_move& r) { return {std::string(r.from), std::string(r.to), false}; }
struct read_args {
  std::string path;
  uint64_t offset;
  std::optional<uint64_t> length;
  bool pass_fd;
};
read_args work_args(const msg::file_read& r) { return {std::string(r.path), r.offset, r.length, r.pass_fd}; }
struct write_args {
  std::string path;
  std::optional<uint32_t> mode;
  bool parents, pass_fd;
};
write_args work_args(const msg::file_write& r) { return {std::string(r.path), r.mode, r.parents, r.pass_fd}; }

// Decodes request M, finds its session's scope, and runs `work(scope, request)` on the thread
// pool; `reply(result)` then runs on the loop if the client is still there. Errors found
// before the work are sent at once.
// `in_flight` counts each client's requests on the pool, at most kMaxInFlight.
template <typename M, typename R, typename Work, typename Reply>
void off_loop_request(service_context& srv, client_conn& c, ipc::envelope& env, std::map<uint64_t, size_t>& in_flight, Work work,
                      Reply reply) {
  uint64_t id = env.msg.id();
  if (in_flight[c.serial()] >= file_service::kMaxInFlight)
    return c.send_error(id, ipc::errc::file_failed,
                        fmt::format("this connection has {} file requests under way: wait for their answers first",
                                    file_service::kMaxInFlight));
  auto req = ipc::decode<M>(env.msg);
  if (!req) return c.send_error(id, req.err());
  auto scope = scope_of_session(srv, req->session);
  if (!scope) return c.send_error(id, scope.err());
  // The request's views point into its frame: the work gets its own copy of what it needs.
  auto state = std::make_shared<std::pair<std::function<R()>, std::optional<R>>>();
  state->first = [work = std::move(work), scope = std::move(*scope), r = work_args(*req)]() { return work(scope, r); };
  uint64_t serial = c.serial();
  ++in_flight[serial];
  off_loop_client(
      srv.loop(), serial, [state] { state->second.emplace(state->first()); },
      [&srv, &in_flight, state, serial, id, reply = std::move(reply)]() mutable {
        if (--in_flight[serial] == 0) in_flight.erase(serial);
        client_conn* conn = srv.client_by_serial(serial);
        reply(conn, id, std::move(*state->second));
      });
}

void reply_ok(client_conn* c, uint64_t id, const status& s) {
  if (c == nullptr) return;
  if (!s) c->send_error(id, s.err());
  else c->send(ipc::encode(msg::ok{}, id));
}

}  // namespace

file_service::~file_service() {
  for (auto& w : writes_) ::unlinkat(w.dir.get(), w.temp.c_str(), 0);
}

void file_service::handle_stat(client_conn& c, ipc::envelope& env) {
  off_loop_request<msg::file_stat, result<file_entry>>(
      srv_, c, env, in_flight_,
      [](const file_scope& scope, const path_args& a) -> result<file_entry> {
        auto at = locate(scope, a.path, intent::read);
        if (!at) return at.err();
        struct stat st {};
        if (at->rel == ".") {
          if (::fstat(at->root.get(), &st) != 0) return beneath::error_for(errno, a.path);
          return entry_of(a.path.empty() ? "." : a.path, st, at->root.get(), ".");
        }
        auto p = beneath::open_parent(at->root.get(), at->rel, false, a.path);
        if (!p) return p.err();
        if (::fstatat(p->dir.get(), p->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return beneath::error_for(errno, a.path);
        return entry_of(a.path, st, p->dir.get(), p->name.c_str());
      },
      [](client_conn* c, uint64_t id, result<file_entry> e) {
        if (c == nullptr) return;
        if (!e) return c->send_error(id, e.err());
        c->send(ipc::encode(msg::file_info{std::move(*e)}, id));
      });
}

void file_service::handle_list(client_conn& c, ipc::envelope& env) {
  off_loop_request<msg::file_list, result<std::vector<file_entry>>>(
      srv_, c, env, in_flight_,
      [](const file_scope& scope, const path_args& a) -> result<std::vector<file_entry>> {
        auto at = locate(scope, a.path, intent::read);
        if (!at) return at.err();
        auto dir = beneath::open(at->root.get(), at->rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0, a.path);
        if (!dir) return dir.err();
        std::vector<file_entry> out;
        if (!list_dir(dir->get(), "", a.flag, out)) {
          if (errno == E2BIG)
            return make_error(ipc::errc::file_failed,
                              fmt::format("'{}' holds more than {} entries: list its directories one at a time",
                                          a.path.empty() ? "." : a.path, kMaxListEntries));
          return beneath::error_for(errno, a.path);
        }
        return out;
      },
      [this](client_conn* c, uint64_t id, result<std::vector<file_entry>> entries) {
        if (c == nullptr) return;
        if (!entries) return c->send_error(id, entries.err());
        if (auto busy = check_reads(*c); !busy) return c->send_error(id, busy.err());
        reading r{c->serial(), id, unique_fd(), 0, 0, std::move(*entries), true};
        reads_.push_back(std::move(r));
        pump(std::prev(reads_.end()));
      });
}

void file_service::handle_remove(client_conn& c, ipc::envelope& env) {
  off_loop_request<msg::file_remove, status>(
      srv_, c, env, in_flight_,
      [](const file_scope& scope, const path_args& a) -> status {
        auto at = locate(scope, a.path, intent::write);
        if (!at) return at.err();
        if (at->rel == ".")
          return make_error(ipc::errc::file_failed,
                            fmt::format("'{}' is {}: remove what is in it instead", a.path, top_name(*at)));
        auto p = beneath::open_parent(at->root.get(), at->rel, false, a.path);
        if (!p) return p.err();
        struct stat st {};
        if (::fstatat(p->dir.get(), p->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return beneath::error_for(errno, a.path);
        if (!S_ISDIR(st.st_mode)) {
          if (::unlinkat(p->dir.get(), p->name.c_str(), 0) != 0) return beneath::error_for(errno, a.path);
          return ok_status();
        }
        if (a.flag) {
          unique_fd d(
              ::openat(p->dir.get(), p->name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
          if (!d || !beneath::remove_contents(d.get())) return beneath::error_for(errno, a.path);
        }
        if (::unlinkat(p->dir.get(), p->name.c_str(), AT_REMOVEDIR) != 0) {
          if (errno == ENOTEMPTY || errno == EEXIST)
            return make_error(ipc::errc::file_failed,
                              fmt::format("'{}' is a directory that is not empty: give -r to remove it and all in it", a.path));
          return beneath::error_for(errno, a.path);
        }
        return ok_status();
      },
      reply_ok);
}

void file_service::handle_mkdir(client_conn& c, ipc::envelope& env) {
  off_loop_request<msg::file_mkdir, status>(
      srv_, c, env, in_flight_,
      [](const file_scope& scope, const path_args& a) -> status {
        auto at = locate(scope, a.path, intent::write);
        if (!at) return at.err();
        if (at->rel == ".") {
          if (a.flag) return ok_status();
          return make_error(ipc::errc::file_failed, fmt::format("'{}' is {}: it exists already", a.path, top_name(*at)));
        }
        return beneath::make_dirs(at->root.get(), at->rel, a.flag, a.path);
      },
      reply_ok);
}

void file_service::handle_move(client_conn& c, ipc::envelope& env) {
  off_loop_request<msg::file_move, status>(
      srv_, c, env, in_flight_,
      [](const file_scope& scope, const path_args& a) -> status {
        auto from = locate(scope, a.path, intent::write);
        if (!from) return from.err();
        auto to = locate(scope, a.to, intent::write);
        if (!to) return to.err();
        auto f = beneath::open_parent(from->root.get(), from->rel, false, a.path);
        if (!f) return f.err();
        auto t = beneath::open_parent(to->root.get(), to->rel, false, a.to);
        if (!t) return t.err();
        if (::renameat(f->dir.get(), f->name.c_str(), t->dir.get(), t->name.c_str()) != 0) {
          int e = errno;
          if (e == EXDEV)  // both were found beneath the scope: they are on two filesystems
            return make_error(ipc::errc::file_failed,
                              fmt::format("'{}' and '{}' are on different filesystems: write a copy and remove the "
                                          "original instead",
                                          a.path, a.to));
          // Which path the failure is about: the source if it is missing, else the target.
          struct stat st {};
          bool from_there = ::fstatat(f->dir.get(), f->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
          return beneath::error_for(e, from_there ? a.to : a.path);
        }
        return ok_status();
      },
      reply_ok);
}

// ---- read -----------------------------------------------------------------------------

void file_service::handle_read(client_conn& c, ipc::envelope& env) {
  struct opened {
    unique_fd fd;
    uint64_t size = 0, length = 0, offset = 0;
    uint32_t mode = 0;
    bool pass_fd = false;
  };
  off_loop_request<msg::file_read, result<std::shared_ptr<opened>>>(
      srv_, c, env, in_flight_,
      [](const file_scope& scope, const read_args& a) -> result<std::shared_ptr<opened>> {
        auto at = locate(scope, a.path, intent::read);
        if (!at) return at.err();
        // Looked up without opening (O_PATH: a fifo does not block, a device is not touched),
        // then opened for reading only if it is a regular file.
        auto path = beneath::open(at->root.get(), at->rel, O_PATH, 0, a.path);
        if (!path) return path.err();
        struct stat st {};
        if (::fstat(path->get(), &st) != 0) return beneath::error_for(errno, a.path);
        if (S_ISDIR(st.st_mode))
          return make_error(ipc::errc::file_failed, fmt::format("'{}' is a directory: 'sbsh file ls' lists it", a.path));
        if (!S_ISREG(st.st_mode))
          return make_error(ipc::errc::file_failed,
                            fmt::format("'{}' is not a regular file (a {}): only regular files are read", a.path,
                                        type_of(st.st_mode)));
        // Reopened without waiting, and looked at again: what is open is a regular file, on
        // which O_NONBLOCK changes nothing for the client that reads it.
        std::string self = fmt::format("/proc/self/fd/{}", path->get());
        unique_fd fd(::open(self.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
        if (!fd) return beneath::error_for(errno, a.path);
        if (::fstat(fd.get(), &st) != 0) return beneath::error_for(errno, a.path);
        if (!S_ISREG(st.st_mode))
          return make_error(ipc::errc::file_failed,
                            fmt::format("'{}' is not a regular file (a {}): only regular files are read", a.path,
                                        type_of(st.st_mode)));
        auto o = std::make_shared<opened>();
        o->fd = std::move(fd);
        o->size = static_cast<uint64_t>(st.st_size);
        o->mode = st.st_mode & 07777;
        o->offset = std::min(a.offset, o->size);
        o->length = o->size - o->offset;
        if (a.length) o->length = std::min(o->length, *a.length);
        o->pass_fd = a.pass_fd;
        return o;
      },
      [this](client_conn* c, uint64_t id, const result<std::shared_ptr<opened>>& o) {
        if (c == nullptr) return;
        if (!o) return c->send_error(id, o.err());
        opened& f = *o.value();
        msg::file_opened reply{f.size, f.mode, f.length, f.pass_fd ? 1u : 0u};
        if (f.pass_fd) {
          std::vector<unique_fd> fds;
          fds.push_back(std::move(f.fd));
          return c->send(ipc::encode(reply, id), std::move(fds));
        }
        if (auto busy = check_reads(*c); !busy) return c->send_error(id, busy.err());
        c->send(ipc::encode(reply, id));
        reads_.push_back(reading{c->serial(), id, std::move(f.fd), f.offset, f.offset + f.length, {}, false});
        pump(std::prev(reads_.end()));
      });
}

void file_service::pump(std::list<reading>::iterator it) {
  client_conn* c = srv_.client_by_serial(it->serial);
  if (c == nullptr) {
    reads_.erase(it);
    return;
  }
  constexpr size_t kBatch = 1024;
  if (it->listing) {
    while (c->queued_bytes() < ipc::kLogAhead) {
      size_t n = std::min(kBatch, it->entries.size());
      msg::file_entries m;
      m.entries.assign(std::make_move_iterator(it->entries.begin()), std::make_move_iterator(it->entries.begin() + static_cast<std::ptrdiff_t>(n)));
      it->entries.erase(it->entries.begin(), it->entries.begin() + static_cast<std::ptrdiff_t>(n));
      m.more = !it->entries.empty();
      c->send(ipc::encode(m, it->req));
      if (!m.more) {
        reads_.erase(it);
        return;
      }
    }
    return;  // the rest once the client has read what is queued (client_drained)
  }
  std::string buf;
  while (it->pos < it->end && c->queued_bytes() < ipc::kLogAhead) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(ipc::kMaxChunk, it->end - it->pos));
    buf.resize(want);
    ssize_t n = ::pread(it->fd.get(), buf.data(), want, static_cast<off_t>(it->pos));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // an error, or the file shrank: what was sent is all there is
      if (n < 0) {
        c->send_error(it->req, ipc::errc::file_failed, fmt::format("cannot read the file: {}", std::strerror(errno)));
        reads_.erase(it);
        return;
      }
      it->end = it->pos;
      break;
    }
    it->pos += static_cast<uint64_t>(n);
    c->send(ipc::encode(msg::file_chunk{ipc::bin_view{std::string_view(buf.data(), static_cast<size_t>(n))}}, it->req));
  }
  if (it->pos < it->end) return;  // more once the client has read what is queued
  c->send(ipc::encode(msg::file_end{it->end}, it->req));
  reads_.erase(it);
}

void file_service::client_drained(client_conn& c) {
  for (auto it = reads_.begin(); it != reads_.end();) {
    auto next = std::next(it);
    if (it->serial == c.serial()) pump(it);
    it = next;
  }
}

void file_service::client_gone(client_conn& c) {
  std::erase_if(reads_, [&c](const reading& r) { return r.serial == c.serial(); });
  for (auto it = writes_.begin(); it != writes_.end();) {
    auto next = std::next(it);
    if (it->serial == c.serial()) discard(it);
    it = next;
  }
}

// ---- write ----------------------------------------------------------------------------

std::list<file_service::writing>::iterator file_service::find_write(uint64_t serial, uint64_t req) {
  return std::find_if(writes_.begin(), writes_.end(), [&](const writing& w) { return w.serial == serial && w.req == req; });
}

void file_service::discard(std::list<writing>::iterator it) {
  ::unlinkat(it->dir.get(), it->temp.c_str(), 0);
  writes_.erase(it);
}

status file_service::check_reads(const client_conn& c) const {
  if (std::count_if(reads_.begin(), reads_.end(), [&c](const reading& r) { return r.serial == c.serial(); }) <
      static_cast<std::ptrdiff_t>(kMaxReadsPerClient))
    return ok_status();
  return make_error(ipc::errc::file_failed,
                    fmt::format("this connection already has {} files or listings being sent: read them first",
                                kMaxReadsPerClient));
}

status file_service::check_writes(const client_conn& c) const {
  if (std::count_if(writes_.begin(), writes_.end(), [&c](const writing& w) { return w.serial == c.serial(); }) <
      static_cast<std::ptrdiff_t>(kMaxWritesPerClient))
    return ok_status();
  return make_error(ipc::errc::file_failed,
                    fmt::format("this connection already writes {} files: close one before writing another",
                                kMaxWritesPerClient));
}

void file_service::handle_write(client_conn& c, ipc::envelope& env) {
  if (auto busy = check_writes(c); !busy) return c.send_error(env.msg.id(), busy.err());
  if (find_write(c.serial(), env.msg.id()) != writes_.end())
    return c.send_error(env.msg.id(), ipc::errc::bad_request, "a file is already written under this request id");
  off_loop_request<msg::file_write, result<std::shared_ptr<writing>>>(
      srv_, c, env, in_flight_,
      [](const file_scope& scope, const write_args& a) -> result<std::shared_ptr<writing>> {
        if (a.mode && *a.mode > 07777)
          return make_error(ipc::errc::bad_request, fmt::format("mode {:o} is not a permission mode (0 to 7777, octal)", *a.mode));
        auto at = locate(scope, a.path, intent::write);
        if (!at) return at.err();
        auto p = beneath::open_parent(at->root.get(), at->rel, a.parents, a.path);
        if (!p) return p.err();
        auto w = std::make_shared<writing>();
        w->mode = a.mode.value_or(0644);
        struct stat st {};
        if (::fstatat(p->dir.get(), p->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
          if (S_ISDIR(st.st_mode))
            return make_error(ipc::errc::file_failed, fmt::format("'{}' is a directory: give a file's path", a.path));
          if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
            return make_error(ipc::errc::file_failed,
                              fmt::format("'{}' is not a regular file (a {}): remove it first to write a file there", a.path,
                                          type_of(st.st_mode)));
          if (!a.mode && S_ISREG(st.st_mode)) w->mode = st.st_mode & 07777;
        } else if (errno != ENOENT) {
          return beneath::error_for(errno, a.path);
        }
        // The directory is reopened for writing names in it (O_PATH cannot be written through).
        unique_fd dir(::openat(p->dir.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!dir) return beneath::error_for(errno, a.path);
        for (int tries = 0; tries < 8 && !w->fd; ++tries) {
          w->temp = temp_name(p->name);
          w->fd = unique_fd(::openat(dir.get(), w->temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
          if (!w->fd && errno != EEXIST) return beneath::error_for(errno, a.path);
        }
        if (!w->fd) return beneath::error_for(EEXIST, a.path);
        w->dir = std::move(dir);
        w->name = std::move(p->name);
        w->given = a.path;
        w->pass_fd = a.pass_fd;
        return w;
      },
      [this](client_conn* c, uint64_t id, result<std::shared_ptr<writing>> w) {
        if (!w) {
          if (c != nullptr) c->send_error(id, w.err());
          return;
        }
        writing& f = **w;
        if (c == nullptr) {  // gone meanwhile: nothing is left behind
          ::unlinkat(f.dir.get(), f.temp.c_str(), 0);
          return;
        }
        if (auto busy = check_writes(*c); !busy) {
          ::unlinkat(f.dir.get(), f.temp.c_str(), 0);
          return c->send_error(id, busy.err());
        }
        f.serial = c->serial();
        f.req = id;
        bool pass = f.pass_fd;
        writes_.push_back(std::move(f));
        auto it = std::prev(writes_.end());
        msg::file_opened reply{0, it->mode, 0, pass ? 1u : 0u};
        if (pass) {
          unique_fd dup(::fcntl(it->fd.get(), F_DUPFD_CLOEXEC, 0));
          if (!dup) {
            c->send_error(id, ipc::errc::file_failed, fmt::format("cannot pass the file: {}", std::strerror(errno)));
            return discard(it);
          }
          std::vector<unique_fd> out;
          out.push_back(std::move(dup));
          return c->send(ipc::encode(reply, id), std::move(out));
        }
        c->send(ipc::encode(reply, id));
      });
}

void file_service::handle_data(client_conn& c, ipc::envelope& env) {
  auto it = find_write(c.serial(), env.msg.id());
  if (it == writes_.end()) return;  // after an error the client has been told of: dropped
  auto d = ipc::decode<msg::file_data>(env.msg);
  if (!d) {
    c.send_error(env.msg.id(), d.err());
    return discard(it);
  }
  std::string_view bytes = d->data.bytes;
  while (!bytes.empty() && it->error == 0) {
    ssize_t n = ::write(it->fd.get(), bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) it->error = errno;
    else bytes.remove_prefix(static_cast<size_t>(n));
  }
}

void file_service::handle_close(client_conn& c, ipc::envelope& env) {
  uint64_t id = env.msg.id();
  auto it = find_write(c.serial(), id);
  if (it == writes_.end())
    return c.send_error(id, ipc::errc::bad_request, fmt::format("no file is being written under request id {}", id));
  auto req = ipc::decode<msg::file_close>(env.msg);
  if (!req) {
    c.send_error(id, req.err());
    return discard(it);
  }
  if (req->discard) {
    discard(it);
    return c.send(ipc::encode(msg::ok{}, id));
  }
  struct stat st {};
  if (it->error == 0 && (::fchmod(it->fd.get(), it->mode) != 0 || ::fstat(it->fd.get(), &st) != 0)) it->error = errno;
  if (it->error == 0 && ::renameat(it->dir.get(), it->temp.c_str(), it->dir.get(), it->name.c_str()) != 0) it->error = errno;
  if (it->error != 0) {
    c.send_error(id, beneath::error_for(it->error, it->given));
    return discard(it);
  }
  c.send(ipc::encode(msg::file_end{static_cast<uint64_t>(st.st_size)}, id));
  writes_.erase(it);
}

}  // namespace sbsh::daemon
