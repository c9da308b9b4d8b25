// The listener, client connections, signals, and orderly shutdown.
#include "daemon/server.h"

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "daemon/service_manager.h"
#include "daemon/state_lock.h"
#include "ipc/environ.h"
#include "ipc/messages.h"
#include "ipc/clock.h"
#include "ipc/paths.h"
#include "ipc/text.h"
#include "common/procs.h"
#include "ipc/wrapper_link.h"

namespace sbsh::daemon {

namespace {
constexpr uint64_t kMaxLentProcs = 65536;  // background processes one adopted session may report
// After the last client leaves, how long sbshd waits before giving free memory back (a
// burst of one-shot clients leaves and comes back between two of its commands).
constexpr uint64_t kTrimDelayMs = 200;

// Whether process `pid` is in sbshd's own PID namespace. One that has gone already is not
// known to be: it may have handed its connection to another process before it went. One whose
// namespace sbshd may not read is not in a namespace sbshd's sessions made (sbshd can read
// those): it runs outside sbshd's own user namespace (sbshd was started in one of its own).
bool same_pid_namespace(pid_t pid) {
  static const ino_t own = [] {
    struct stat st{};
    return ::stat("/proc/self/ns/pid", &st) == 0 ? st.st_ino : 0;
  }();
  if (own == 0) return true;  // no /proc to tell: as before namespaces were checked
  struct stat st{};
  if (::stat(fmt::format("/proc/{}/ns/pid", pid).c_str(), &st) != 0) return errno != ENOENT && errno != ESRCH;
  return st.st_ino == own;
}

// A short key for a state directory (FNV-1a): the sessions' cgroups of sbshds with different
// state directories do not meet.
std::string state_key(std::string_view dir) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : dir) h = (h ^ c) * 1099511628211ULL;
  return fmt::format("{:012x}", h & 0xffffffffffffULL);
}
}  // namespace

client_conn::client_conn(server& srv, uint64_t serial, unique_fd fd, uid_t, pid_t pid)
    : peer_pid(pid),
      srv_(srv),
      serial_(serial),
      sock_(srv.loop(), std::move(fd),
            // A request may end this connection, and sbshd too (shutdown): nothing of `this`
            // may be used after handle().
            {[this](ipc::envelope&& env) { srv_.handle(*this, std::move(env)); },
             [this](const std::string& reason) { srv_.client_closed(this, reason); }},
            64 * 1024, &srv.client_memory(), ipc::kRequestDecode) {
  sock_.on_drained = [this] { srv_.client_drained(this); };
}

client_conn::~client_conn() { srv_.client_memory().change(charged_, 0); }

void client_conn::recount_jobs() {
  size_t now = text_bytes + jobs.size() * ipc::kJobCharge;
  srv_.client_memory().change(std::exchange(charged_, now), now);
}

void client_conn::send(std::string frame, std::vector<unique_fd> fds) {
  sock_.send(std::move(frame), std::move(fds));
  size_t queued = sock_.queued_bytes();
  if (queued > ipc::kReplyQueuePause && !replies_paused_) {
    // The client is not keeping up with its replies: take no more requests from it until
    // it has read them, and drop it if it does not within the time allowed.
    replies_paused_ = true;
    update_reading();
    if (stall_timer_ == nullptr) stall_timer_ = make_handle<timer>(srv_.loop());
    stall_timer_->start(srv_.opts().stalled_client_ms, [this] {
      drop(ipc::errc::too_slow,
           fmt::format("sbshd dropped this connection: {} KiB of replies waited {} ms for it to read them; read "
                       "replies as they come",
                       sock_.queued_bytes() >> 10, srv_.opts().stalled_client_ms));
    });
  }
  if (queued > ipc::kReplyQueueMax) srv_.enforce_bounds_soon();
}

void client_conn::drained() {
  if (!replies_paused_) return;
  replies_paused_ = false;
  stall_timer_->stop();
  update_reading();
}

void client_conn::drop(ipc::errc code, const std::string& message) {
  spdlog::warn("client {} (pid {}) dropped: {}", serial_, peer_pid, message);
  // Without an id: it answers no request.
  auto last = sock_.end_with(ipc::encode(ipc::msg::error{ipc::wire_name(code), message}), message);  // the server forgets this client here
  srv_.parting().add(std::move(last.fd), std::move(last.bytes));
}

void client_conn::send_error(uint64_t id, std::string_view code, const std::string& message) {
  send(ipc::encode(ipc::msg::error{code, message}, id));
}

server::server(options opts)
    : opts_(std::move(opts)), pid_(::getpid()), snapshots_(&loop_, opts_.state_dir + "/snapshots", opts_.state_dir + "/kept", opts_.wrapper_path),
      envs_(&loop_, opts_.state_dir + "/envs", [] {
        const char* bash = std::getenv("SBSH_BASH");  // the bash sessions run (the wrapper reads it too)
        return std::string(bash != nullptr && *bash != '\0' ? bash : "/bin/bash");
      }()),
      cgroups_(state_key(opts_.state_dir)) {
  uv_loop_init(&loop_);
  devnull_ = unique_fd(::open("/dev/null", O_RDWR | O_CLOEXEC));
  ns_last_pid_ = unique_fd(::open("/proc/sys/kernel/ns_last_pid", O_RDONLY | O_CLOEXEC));
  started_us_ = mono_us();
  procs_ = std::make_unique<proc_table>(*this);
  kept_ = std::make_unique<kept_commands>(*this);
  files_ = std::make_unique<file_service>(*this);
}

server::~server() {
  procs_.reset();
  sessions_.clear();
  clients_.clear();
  dead_clients_.clear();
  kept_.reset();  // after the sessions, whose commands report to it
  drop_spares();
  close_bound_timers();
  farewells_.close_all();
  listen_watch_.reset();
  spare_timer_.reset();
  watchdog_timer_.reset();
  shutdown_timer_.reset();
  expiry_timer_.reset();
  activity_save_timer_.reset();
  // Let every close callback run, then check that nothing was left open.
  uv_run(&loop_, UV_RUN_DEFAULT);
  if (uv_loop_close(&loop_) != 0) {
    uv_walk(&loop_, [](uv_handle_t* h, void*) {
      spdlog::error("handle still open at exit: {}", uv_handle_type_name(h->type));
    }, nullptr);
  }
  if (bound_) ::unlink(opts_.socket_path.c_str());
}

status server::listen(unique_fd activated) {
  const std::string& path = opts_.socket_path;
  if (auto s = ipc::check_socket_path(path); !s) return s;
  if (auto s = ipc::ensure_socket_dir(ipc::dirname_of(path)); !s) {
    if (!activated) return s;
    return make_error(s.err().code, s.err().message + "; for a socket that systemd creates, set DirectoryMode=0700 "
                                                      "in its .socket unit");
  }

  // The lock says which sbshd owns this socket path; a daemon that is shutting down still
  // holds it for a moment, so wait a little before calling the path taken.
  std::string lock_path = path + ".lock";
  lock_fd_ = unique_fd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock_fd_) return make_error("io", fmt::format("cannot open {}: {}", lock_path, std::strerror(errno)));
  bool locked = false;
  for (int i = 0; i < 250 && !locked; ++i) {
    if (::flock(lock_fd_.get(), LOCK_EX | LOCK_NB) == 0) locked = true;
    else ::usleep(20000);
  }
  if (!locked)
    return make_error("already_running",
                      fmt::format("another sbshd is already serving {}; stop it with 'sbsh --socket {} "
                                  "shutdown' or choose another --socket",
                                  path, path));
  if (activated) {
    // systemd made the socket and keeps it across restarts of sbshd: use it, never unlink it.
    listen_fd_ = std::move(activated);
    ::chmod(path.c_str(), 0600);
    return start_listening();
  }
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return make_error("bad_socket", fmt::format("{} exists and is not a socket; remove it or choose "
                                                  "another --socket",
                                                  path));
    ::unlink(path.c_str());  // stale: we hold the lock, so no daemon serves it
  }
  listen_fd_ = unique_fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  mode_t old = ::umask(0177);
  int rc = ::bind(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::umask(old);
  if (rc != 0) return make_error("io", fmt::format("cannot bind {}: {}", path, std::strerror(errno)));
  bound_ = true;
  ::chmod(path.c_str(), 0600);
  if (::listen(listen_fd_.get(), 512) != 0)
    return make_error("io", fmt::format("cannot listen on {}: {}", path, std::strerror(errno)));
  return start_listening();
}

status server::start_listening() {
  listen_watch_ = make_handle<fd_watch>(&loop_, listen_fd_.get());
  listen_watch_->start(UV_READABLE, [this](int, int) { on_accept(); });
  std::string shells = shells_dir();
  struct stat st{};
  if (::mkdir(shells.c_str(), 0700) != 0 && errno != EEXIST)
    return make_error("io", fmt::format("cannot create {}: {}", shells, std::strerror(errno)));
  if (::lstat(shells.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid())
    return make_error("bad_socket", fmt::format("{} is not a directory of this user; remove it", shells));
  // Before any request: a client must never find a session missing that is only waiting to
  // be adopted, or one recreated with a fresh shell while its old one still runs.
  auto adopted = adopt_orphans();
  load_state(adopted);
  snapshots_.sweep_leftovers();
  envs_.sweep_incomplete();
  for (auto& [name, shell] : adopted) {  // not in the state file: it was not written yet
    session_def def;
    def.cwd = shell.cwd;
    if (auto made = create_session(name, def, &shell); !made)
      spdlog::error("cannot adopt session {}: {}", name, made.err().message);
  }
  procs_->load();
  kept_->clear_files();
  return ok_status();
}

namespace {

// The `count` protect_group frames that follow `adopted`: each background process's pipes.
status take_lent_pipes(ipc::channel& ch, uint64_t count, std::map<pid_t, lent_pipes>& out) {
  if (count > kMaxLentProcs)
    return make_error(ipc::errc::bad_request, fmt::format("it reports {} background processes", count));
  for (uint64_t i = 0; i < count; ++i) {
    auto env = ch.recv();
    if (!env) return env.err();
    auto p = env->msg.type() == ipc::msg_type::protect_group ? ipc::decode<ipc::msg::protect_group>(env->msg)
                                                             : result<ipc::msg::protect_group>(make_error("", ""));
    bool ok = p && p->pgid > 1 && p->proc > 0 && p->streams.size() == env->fds.size();
    for (size_t k = 0; ok && k < env->fds.size(); ++k) {
      char c = p->streams[k];
      ok = kLentStreams.find(c) != std::string_view::npos && p->streams.find(c) == k;
    }
    if (!ok) return make_error(ipc::errc::bad_request, "a background process's pipes are malformed");
    out[static_cast<pid_t>(p->pgid)] = lent_pipes{p->proc, std::string(p->streams), std::move(env->fds)};
  }
  return ok_status();
}

}  // namespace

std::map<std::string, adopted_shell> server::adopt_orphans() {
  std::map<std::string, adopted_shell> found;
  std::string shells = shells_dir();
  std::vector<std::string> dirs;
  if (DIR* d = ::opendir(shells.c_str())) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') dirs.push_back(shells + "/" + e->d_name);
    ::closedir(d);
  }
  for (const auto& dir : dirs) {
    auto fd = ipc::connect_in(dir, wrapper::kAdoptSocket);
    if (!fd) {
      // Its wrapper is gone (killed, or adoption was off): nothing there is of use.
      if (fd.err().code == "unreachable") remove_shell_dir(dir);
      else spdlog::warn("cannot adopt the shell of {}: {}", dir, fd.err().message);
      continue;
    }
    auto peer = ipc::peer_of(fd->get());
    if (!peer || peer->uid != ::getuid()) continue;
    ucred cred = *peer;
    ipc::set_io_timeout(fd->get(), 1);  // a stopped wrapper does not hold up the start for long
    ipc::channel ch(std::move(*fd), 4096);
    auto answer = ch.send(ipc::encode(ipc::msg::adopt{pid_}, 1)) ? ch.recv()
                                                                 : result<ipc::envelope>(make_error("io", "cannot send"));
    auto fail = [&](const std::string& why) {
      spdlog::warn("cannot adopt the shell of {} (wrapper pid {}): {}", dir, cred.pid, why);
    };
    if (!answer) {
      // An unclaimed spare ends as soon as its sbshd is gone, maybe just now.
      spdlog::info("the wrapper of {} (pid {}) did not take adoption: {}", dir, cred.pid, answer.err().message);
      continue;
    }
    auto got = answer->msg.type() == ipc::msg_type::adopted
                   ? ipc::decode<ipc::msg::adopted>(answer->msg)
                   : result<ipc::msg::adopted>(make_error("", fmt::format("it answered with {}",
                                                                          ipc::type_name(answer->msg.type()))));
    if (!got || got->shell_pid <= 1 || got->wrapper_pid != cred.pid || answer->fds.size() != 1) {
      fail(fmt::format("its answer is malformed{}", got ? "" : ": " + got.err().message));
      continue;
    }
    const auto& m = *got;
    std::string session(m.session);
    if (!session.empty() && !m.initialized) {
      // The earlier sbshd went before the shell ran its init commands: half set up, it is of
      // no use; the session starts afresh from its definition.
      spdlog::info("not adopting the shell of session {} (wrapper pid {}): it had not finished starting", session,
                   cred.pid);
      ::kill(cred.pid, SIGTERM);
      continue;
    }
    if (session.empty() || !valid_session_name(session) || found.count(session) != 0) {
      // A spare nobody claimed (or a duplicate): it is of no use, end it. Its pid is the
      // peer of a connection still open, so it is not a recycled one.
      if (!session.empty()) fail(fmt::format("session {} was adopted already", session));
      ::kill(cred.pid, SIGTERM);  // the wrapper removes its socket, then the directory
      continue;
    }
    adopted_shell a;
    a.session = session;
    a.cwd = std::string(m.cwd);
    a.dir = dir;
    a.generation = m.generation;
    a.shell_pid = static_cast<pid_t>(m.shell_pid);
    a.wrapper_pid = cred.pid;
    a.started_at_ms = m.started_at_ms;
    for (int64_t g : m.groups)
      if (g > 1 && g < (1 << 22)) a.groups.insert(static_cast<pid_t>(g));
    a.channel = std::move(answer->fds[0]);
    ::fcntl(a.channel.get(), F_SETFL, ::fcntl(a.channel.get(), F_GETFL) | O_NONBLOCK);
    if (auto lent = take_lent_pipes(ch, m.procs, a.pipes); !lent) {
      // The shell is still worth adopting; its background processes will show as lost.
      fail(lent.err().message);
      a.pipes.clear();
    }
    ipc::set_io_timeout(ch.fd(), 0);
    a.ctl = unique_fd(::dup(ch.fd()));  // ch closes its own on return
    ::fcntl(a.ctl.get(), F_SETFD, FD_CLOEXEC);
    spdlog::info("adopting session {} (wrapper pid {}, shell pid {})", session, a.wrapper_pid, a.shell_pid);
    found.emplace(session, std::move(a));
  }
  return found;
}

void server::on_accept() {
  for (int i = 0; i < 64; ++i) {
    int fd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The connection stays in the backlog, and the listening socket readable: stop
        // polling it for a moment, or the loop would spin until a descriptor is free.
        spdlog::warn("cannot accept a connection: {}; trying again in 100 ms", std::strerror(errno));
        listen_watch_->set_events(0);
        accept_timer_ = make_handle<timer>(&loop_);
        accept_timer_->start(100, [this] {
          accept_timer_.reset();
          if (listen_watch_ != nullptr) listen_watch_->set_events(UV_READABLE);
        });
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        spdlog::warn("accept failed: {}", std::strerror(errno));
      }
      return;
    }
    unique_fd conn(fd);
    auto peer = ipc::peer_of(fd);
    ucred cred = peer.value_or(ucred{});
    if (!peer || cred.uid != ::getuid()) {
      std::string why = fmt::format("this sbshd serves only uid {}, and uid {} may not use it; run sbshd as "
                                    "your own user (each user has a private socket)",
                                    ::getuid(), cred.uid);
      spdlog::warn("refused a connection from uid {} (pid {}): {}", cred.uid, cred.pid, why);
      refuse(std::move(conn), ipc::errc::permission_denied, why);
      continue;
    }
    if (cred.pid > 0 && !same_pid_namespace(cred.pid)) {
      // A confined session's processes (each such session has a PID namespace of its own)
      // would otherwise reach every other session, and create unconfined ones, through sbshd.
      std::string why = "a process in another PID namespace than sbshd's (a confined session's, or a container's) "
                        "may not use it: sbshd would run its commands outside that confinement";
      spdlog::warn("refused a connection from pid {}: {}", cred.pid, why);
      refuse(std::move(conn), ipc::errc::permission_denied, why);
      continue;
    }
    if (clients_.size() >= opts_.max_clients) {
      std::string why = fmt::format("sbshd already serves {} connections, its limit; end some of its clients "
                                    "(each running sbsh command or program using libsbsh holds one) and try again",
                                    opts_.max_clients);
      spdlog::warn("refused a connection from pid {}: {}", cred.pid, why);
      refuse(std::move(conn), ipc::errc::too_many_clients, why);
      continue;
    }
    auto c = std::make_unique<client_conn>(*this, next_serial_++, std::move(conn), cred.uid, cred.pid);
    spdlog::debug("client {} connected (pid {})", c->serial(), cred.pid);
    client_conn* raw = c.get();
    clients_.emplace(raw, std::move(c));
  }
}

void server::refuse(unique_fd conn, ipc::errc code, const std::string& message) {
  farewells_.add(std::move(conn), ipc::encode(ipc::msg::error{ipc::wire_name(code), message}));
}

void server::enforce_bounds_soon() {
  if (bounds_timer_ != nullptr || shutting_down_) return;
  bounds_timer_ = make_handle<timer>(&loop_);
  bounds_timer_->start(0, [this] {
    bounds_timer_.reset();
    enforce_bounds();
  });
}

void server::enforce_bounds() {
  std::vector<client_conn*> over;
  for (auto& [raw, c] : clients_)
    if (c->queued_bytes() > ipc::kReplyQueueMax) over.push_back(raw);
  for (auto* c : over)
    c->drop(ipc::errc::too_slow, fmt::format("sbshd dropped this connection: more than {} MiB of replies waited for "
                                            "it to read them; read replies as they come",
                                            ipc::kReplyQueueMax >> 20));
  // Like Redis's maxmemory-clients: the connection holding the most goes first, which is
  // the one that did most to get here.
  while (client_memory_.over()) {
    client_conn* top = nullptr;
    for (auto& [raw, c] : clients_)
      if (top == nullptr || c->footprint() > top->footprint()) top = raw;
    if (top == nullptr) break;
    top->drop(ipc::errc::memory_limit,
              fmt::format("sbshd dropped this connection: its clients held more than {} MiB together, and this "
                          "one the most ({} KiB of requests partly sent, replies unread and commands in flight); "
                          "send less at once and read replies as they come",
                          client_memory_.limit() >> 20, top->footprint() >> 10));
  }
  if (client_memory_.over()) farewells_.close_all();  // what is left is theirs
}

void server::close_bound_timers() {
  bounds_timer_.reset();
  accept_timer_.reset();
  trim_timer_.reset();
}

void server::trim_memory_soon() {
  if (trim_timer_ != nullptr || shutting_down_) return;
  trim_timer_ = make_handle<timer>(&loop_);
  trim_timer_->start(kTrimDelayMs, [this] {
    trim_timer_.reset();
    // Large blocks are mappings of their own, returned when freed (daemon.cpp); what the
    // clients' many smaller ones left free inside the heap goes back to the system here.
    if (clients_.empty()) ::malloc_trim(0);
  });
}

void server::client_closed(client_conn* c, const std::string& reason) {
  spdlog::debug("client {} closed: {}", c->serial(), reason);
  // A snapshot copy or a setup nobody waits for any more is stopped (Ctrl-C on `session
  // create`).
  std::vector<std::string> abandoned;
  for (auto& [name, p] : pending_) {
    std::erase_if(p.waiters, [c](const auto& w) { return w.serial == c->serial(); });
    if (!p.waiters.empty()) continue;
    snapshots_.cancel(name);
    if (p.env_ticket != 0) abandoned.push_back(name);
  }
  for (const auto& name : abandoned) {
    envs_.leave(std::exchange(pending_[name].env_ticket, 0));
    pending_done(name, make_error(ipc::errc::cancelled, "nobody waits for the session any more"));
  }
  for (const auto& [id, ref] : c->jobs)
    if (auto* s = find_session(ref.session)) s->client_gone(c);
  files_->client_gone(*c);
  c->jobs.clear();
  c->text_bytes = 0;
  c->recount_jobs();
  auto it = clients_.find(c);
  if (it == clients_.end()) return;
  // We may be inside this connection's callback: free it on the next loop iteration.
  dead_clients_.push_back(std::move(it->second));
  clients_.erase(it);
  if (clients_.empty()) trim_memory_soon();
  if (dead_clients_.size() == 1) {
    auto* t = timer::create(&loop_);
    t->start(0, [this, t] {
      dead_clients_.clear();
      t->close();
    });
  }
}

void server::client_drained(client_conn* c) {
  c->drained();
  procs_->client_drained(*c);
  kept_->client_drained(*c);
  files_->client_drained(*c);
  for (const auto& [id, ref] : c->jobs)
    if (auto* s = find_session(ref.session)) s->client_drained(c);
}

void server::job_done(client_conn* c, uint64_t id) {
  auto it = c->jobs.find(id);
  if (it == c->jobs.end()) return;
  c->text_bytes -= it->second.text_bytes;
  c->jobs.erase(it);
  c->recount_jobs();
}

client_conn* server::client_by_serial(uint64_t serial) {
  for (auto& [raw, c] : clients_)
    if (c->serial() == serial) return raw;
  return nullptr;
}

session* server::find_session(const std::string& name) {
  auto it = sessions_.find(name);
  return it == sessions_.end() ? nullptr : it->second.get();
}

namespace {

// The directory a session starts in: the one asked for, which must exist (a command meant
// for it must never run elsewhere); none asked for: $HOME, else /.
result<std::string> session_dir(const std::string& dir) {
  if (dir.empty()) {
    const char* home = std::getenv("HOME");
    return std::string(home != nullptr && *home != '\0' ? home : "/");
  }
  if (dir[0] != '/')
    return make_error(ipc::errc::bad_request, fmt::format("the session's directory '{}' is not absolute", ipc::printable(dir)));
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0)
    return make_error(ipc::errc::bad_directory, fmt::format("cannot use {} as the session's directory: {}",
                                                           ipc::printable(dir, 256), std::strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    return make_error(ipc::errc::bad_directory,
                      fmt::format("cannot use {} as the session's directory: it is not a directory",
                                  ipc::printable(dir, 256)));
  return dir;
}

std::string describe_difference(const session_def& a, const session_def& b) {
  std::vector<std::string> diffs;
  auto source = [](const session_def& d) {
    return d.snapshot.empty() ? std::string("none") : ipc::printable(d.snapshot, 256);
  };
  if (a.snapshot != b.snapshot) diffs.push_back(fmt::format("snapshot of {} (asked: {})", source(a), source(b)));
  else if (a.cwd != b.cwd) diffs.push_back(fmt::format("directory {} (asked: {})", ipc::printable(a.cwd, 256), ipc::printable(b.cwd, 256)));
  if (a.env != b.env) diffs.emplace_back("environment");
  if (a.init != b.init) diffs.emplace_back("init commands");
  auto limits = [](const session_def& d) {
    return d.limits.empty() ? std::string("none") : fmt::format("{}", fmt::join(d.limits, " "));
  };
  if (a.limits != b.limits) diffs.push_back(fmt::format("limits {} (asked: {})", limits(a), limits(b)));
  if (a.restart != b.restart)
    diffs.push_back(fmt::format("restart policy {} (asked: {})", policy_name(a.restart), policy_name(b.restart)));
  auto timeout = [](const session_def& d) {
    return d.timeout_ms == 0 ? std::string("none") : fmt::format("{} ms", d.timeout_ms);
  };
  if (a.timeout_ms != b.timeout_ms)
    diffs.push_back(fmt::format("default timeout {} (asked: {})", timeout(a), timeout(b)));
  if (a.ignore != b.ignore || a.no_default_ignores != b.no_default_ignores || a.gitignore != b.gitignore)
    diffs.emplace_back("ignore rules");
  if (a.keep_copy_on_failure != b.keep_copy_on_failure) diffs.emplace_back("keep-copy-on-failure");
  if (a.setup != b.setup) diffs.emplace_back("setup");
  if (a.setup_keys != b.setup_keys) diffs.emplace_back("setup keys");
  if (a.confine != b.confine || a.allow_write != b.allow_write || a.allow_read != b.allow_read ||
      a.read_only != b.read_only)
    diffs.emplace_back("confinement");
  if (a.no_network != b.no_network) diffs.emplace_back("network");
  if (a.memory_max != b.memory_max || a.pids_max != b.pids_max || a.cpu_millis != b.cpu_millis)
    diffs.emplace_back("memory, process or CPU limits");
  return fmt::format("{}", fmt::join(diffs, ", "));
}

// How a pending session is being made, for messages.
std::string being_made(const session_def& d) {
  if (d.snapshot.empty()) return "(its environment's setup is running)";
  return fmt::format("from a snapshot of {}{}", d.snapshot, d.setup.empty() ? "" : " (then its environment's setup)");
}

}  // namespace

result<session*> server::get_or_create_session(const std::string& name, const std::string& cwd,
                                               const std::function<std::vector<std::string>()>& environment) {
  if (auto* s = find_session(name)) return s;
  if (auto p = pending_.find(name); p != pending_.end())
    return make_error(ipc::errc::session_creating,
                      fmt::format("session '{}' is still being made {}; run commands in it once "
                                  "'sbsh session create' has returned",
                                  name, being_made(p->second.def)));
  auto dir = session_dir(cwd);
  if (!dir) return dir.err();
  session_def def;
  def.cwd = *dir;
  auto env = session_environment(environment());
  if (!env) return env.err();
  def.environment = std::move(*env);
  def.implicit = true;
  def.idle_expiry_ms = opts_.idle_expiry_ms;
  return create_session(name, std::move(def));
}

result<session*> server::create_session(const std::string& name, session_def def, adopted_shell* adopted) {
  if (shutting_down_) return make_error(ipc::errc::shutting_down, "sbshd is shutting down");
  if (opts_.no_sessions) return make_error(ipc::errc::session_failed, "this sbshd runs no sessions (a test build)");
  if (auto* s = find_session(name)) {
    // A session made implicitly takes the expiry and default timeout asked for; one defined
    // on purpose keeps its own, and another default timeout is another definition.
    if (s->def().same_shells(def) && (s->def().implicit || def.implicit || s->def().timeout_ms == def.timeout_ms)) {
      if (s->def().implicit && !def.implicit) {
        s->make_explicit(def.idle_expiry_ms, def.timeout_ms);
        save_state();
        arm_expiry();
      }
      return s;
    }
    return make_error(ipc::errc::session_exists,
                      fmt::format("session '{}' exists with a different definition: {}; remove it first with "
                                  "'sbsh session rm {}'",
                                  name, describe_difference(s->def(), def), name));
  }
  // A cgroup of the session's own for its limits. Only for them: moving bash into a cgroup
  // costs about 10 ms (the kernel's migration waits for RCU), more than the rest of a
  // confined session's start, whose PID namespace already ends all it started.
  def.cgroup.clear();
  if (def.has_cgroup_limits()) {
    auto dir = cgroups_.make(name, {def.memory_max, def.pids_max, def.cpu_millis});
    if (!dir) return dir.err();
    def.cgroup = std::move(*dir);
  }
  // A definition saved before sessions kept their creator's environment (or an adopted shell
  // not in the state file): the minimal one, never sbshd's.
  if (def.environment.empty())
    if (auto login = session_environment({})) def.environment = std::move(*login);
  auto s = adopted != nullptr ? std::make_unique<session>(*this, name, def, std::move(*adopted))
                              : std::make_unique<session>(*this, name, def);
  session* raw = s.get();
  sessions_.emplace(name, std::move(s));
  spdlog::info("session {} created in {}{}", name, def.cwd, def.implicit ? " (implicitly)" : "");
  save_state();
  arm_expiry();
  return raw;
}

status server::room_for_definition(const std::string& name, const session_def& def) {
  if (find_session(name) != nullptr) return ok_status();  // the same definition, or create_session says how not
  size_t total = text_size(def);
  for (const auto& [n, s] : sessions_) total += text_size(s->def());
  for (const auto& [n, p] : pending_) total += text_size(p.def);
  if (total <= ipc::kMaxDefinitionsText) return ok_status();
  return make_error(ipc::errc::bad_request,
                    fmt::format("the definitions of all sessions would hold more than {} MiB of directories, "
                                "variables and init commands; remove sessions no longer needed with 'sbsh session rm'",
                                ipc::kMaxDefinitionsText >> 20));
}

void server::define_session(const std::string& name, session_def def, uint64_t serial,
                            std::function<void(result<session*>)> done, output_fn output) {
  if (opts_.no_sessions) return done(create_session(name, std::move(def)));  // refused: copies nothing
  if (!def.snapshot.empty()) {
    def.cwd = snapshots_.path_of(name);
  } else {
    auto dir = session_dir(def.cwd);
    if (!dir) return done(dir.err());
    def.cwd = *dir;
  }
  if (auto p = pending_.find(name); p != pending_.end() && !shutting_down_) {
    if (p->second.def != def)
      return done(make_error(ipc::errc::session_creating,
                             fmt::format("session '{}' is being made {}; wait for that, then "
                                         "remove it with 'sbsh session rm {}' to define it again",
                                         name, being_made(p->second.def), name)));
    p->second.waiters.push_back({serial, std::move(done), std::move(output)});
    return;
  }
  if (auto room = room_for_definition(name, def); !room) return done(room.err());
  if ((def.snapshot.empty() && def.setup.empty()) || shutting_down_ || find_session(name) != nullptr) {
    auto made = create_session(name, std::move(def));  // made, the same, or says why not
    if (!made) return done(made);
    return after_state_written([made, done = std::move(done)] { done(made); });
  }
  if (!def.snapshot.empty())
    if (auto ok = snapshots_.check_source(def.snapshot); !ok) return done(ok.err());
  auto& p = pending_[name];
  p.def = std::move(def);
  p.waiters.push_back({serial, std::move(done), std::move(output)});
  if (p.def.snapshot.empty()) return prepare_env(name);
  snapshot_store::rules rules{p.def.ignore_rules(), p.def.gitignore};
  snapshots_.copy(name, p.def.snapshot, rules,
                  [this, name](result<uint64_t> copied) { snapshot_copied(name, std::move(copied)); });
}

void server::snapshot_copied(const std::string& name, result<uint64_t> copied) {
  auto p = pending_.find(name);
  if (p == pending_.end()) return;
  if (!copied) return pending_done(name, copied.err());
  p->second.def.special_skipped = *copied;
  if (p->second.def.setup.empty() || shutting_down_) return pending_done(name, ok_status());
  prepare_env(name);
}

void server::prepare_env(const std::string& name) {
  const session_def& def = pending_.at(name).def;
  // Relative key files are the session directory's: where the setup runs.
  std::vector<std::string> keys;
  for (const auto& k : def.setup_keys) keys.push_back(k[0] == '/' ? k : def.cwd + "/" + k);
  envs_.key(def.setup, std::move(keys), [this, name](result<std::string> hash) { env_keyed(name, std::move(hash)); });
}

void server::env_keyed(const std::string& name, result<std::string> hash) {
  auto p = pending_.find(name);
  if (p == pending_.end()) return;
  if (!hash) return pending_done(name, hash.err());
  if (p->second.waiters.empty() || shutting_down_)
    return pending_done(name, make_error(ipc::errc::cancelled, "nobody waits for the session any more"));
  session_def& def = p->second.def;
  def.sbsh_env = envs_.path_of(*hash);
  if (envs_.use_if_ready(*hash)) return pending_done(name, ok_status());
  // What the session's shells start with (shell_supervisor.cpp), SBSH_ENV added by the store.
  env_store::setup_run how{def.setup, def.setup_keys, def.cwd, def.environment};
  for (const auto& e : def.env) how.env.push_back(e);
  how.env.push_back("SBSH_SESSION=" + name);
  if (!root_of(def).empty()) how.env.push_back("SBSH_ROOT=" + root_of(def));
  spdlog::info("session {}: building its environment {}", name, *hash);
  p->second.env_ticket = envs_.build(
      *hash, how,
      [this, name](uint32_t stream, std::string_view data) {
        auto it = pending_.find(name);
        if (it == pending_.end()) return;
        std::vector<output_fn> outs;  // a copy: a client may go while it is told
        for (const auto& w : it->second.waiters)
          if (w.output) outs.push_back(w.output);
        for (const auto& out : outs) out(stream, data);
      },
      [this, name, h = *hash](status built) {
        if (auto it = pending_.find(name); it != pending_.end()) it->second.env_ticket = 0;
        if (built) envs_.use_if_ready(h);
        pending_done(name, built);
        if (built) enforce_env_cap();
      });
}

std::vector<std::string> server::env_users(const std::string& path) const {
  std::vector<std::string> names;
  for (const auto& [name, s] : sessions_)
    if (s->def().sbsh_env == path) names.push_back(name);
  for (const auto& [name, p] : pending_)
    if (p.def.sbsh_env == path) names.push_back(name);
  return names;
}

void server::list_envs(std::function<void(std::vector<environment_info>)> done) {
  envs_.list([this, done = std::move(done)](std::vector<environment_info> envs) {
    for (auto& e : envs) e.sessions = env_users(e.path);
    done(std::move(envs));
  });
}

void server::evict_envs(env_picker pick, std::function<void(std::vector<environment_info>)> done) {
  list_envs([this, pick = std::move(pick), done = std::move(done)](std::vector<environment_info> envs) {
    auto victims = pick(std::move(envs));
    auto left = std::make_shared<size_t>(victims.size() + 1);
    auto gone = std::make_shared<std::vector<environment_info>>();
    auto one_done = [left, gone, done] {
      if (--*left == 0) done(std::move(*gone));
    };
    for (auto& v : victims) {
      // Used since the list was made (a session created meanwhile), or being rebuilt: kept.
      if (!env_users(v.path).empty() || !envs_.remove(v.hash, one_done)) {
        one_done();
        continue;
      }
      spdlog::info("environment {} deleted ({} bytes)", v.hash, v.size_bytes);
      gone->push_back(std::move(v));
    }
    one_done();
  });
}

void server::enforce_env_cap() {
  if (opts_.env_cap == 0) return;
  evict_envs(
      [cap = opts_.env_cap](std::vector<environment_info> envs) {
        // All of them count, those in use too; the least recently used unused ones go first.
        uint64_t total = 0;
        for (const auto& e : envs) total += e.size_bytes;
        std::vector<environment_info> out;
        for (auto it = envs.rbegin(); it != envs.rend() && total > cap; ++it) {
          if (!it->sessions.empty()) continue;
          total -= it->size_bytes;
          out.push_back(*it);
        }
        if (total > cap) spdlog::warn("environments hold {} bytes, over the cap of {}, and sessions use them all", total, cap);
        return out;
      },
      [](const std::vector<environment_info>&) {});
}

void server::pending_done(const std::string& name, status outcome) {
  auto p = pending_.find(name);
  if (p == pending_.end()) return;
  pending_session waiting = std::move(p->second);
  pending_.erase(p);
  result<session*> made = outcome ? create_session(name, waiting.def) : result<session*>(outcome.err());
  // A copy that belongs to no session (it failed, or sbshd is shutting down) is deleted.
  if (!made && !waiting.def.snapshot.empty()) {
    std::string aside = snapshots_.set_aside(name);
    if (!aside.empty()) snapshots_.remove_later(aside, nullptr);
  }
  if (!made && waiting.waiters.empty()) spdlog::info("session {} was not made: {}", name, made.err().message);
  after_state_written([made, waiters = std::move(waiting.waiters)] {
    for (const auto& w : waiters) w.done(made);
  });
}

namespace {

// Whether the last command `s` ran failed: a non-zero status, a timeout, or the shell lost.
bool last_command_failed(const session& s) {
  auto history = s.describe_full().history;
  if (history.empty()) return false;
  const history_entry& h = history.back();
  return h.timed_out || h.shell_restarted || !h.exit_code || *h.exit_code != 0;
}

}  // namespace

void server::remove_session(const std::string& name, bool keep_copy, std::function<void(std::string)> done) {
  auto it = sessions_.find(name);
  if (it == sessions_.end()) {
    done({});
    return;
  }
  std::unique_ptr<session> s = std::move(it->second);
  sessions_.erase(it);
  // The copy is renamed now, so that a new session of this name gets a fresh one: into the
  // kept copies, or aside to be deleted once the session's processes are gone.
  const bool snapshot = !s->def().snapshot.empty();
  std::string kept;
  if (snapshot && (keep_copy || (s->def().keep_copy_on_failure && last_command_failed(*s)))) kept = snapshots_.keep(name);
  std::function<void()> finished = [done = std::move(done), kept] { done(kept); };
  if (std::string aside = !snapshot || !kept.empty() ? "" : snapshots_.set_aside(name); !aside.empty())
    finished = [this, aside, finished = std::move(finished)] { snapshots_.remove_later(aside, finished); };
  // A confined session's TMPDIR goes the same way: renamed now, deleted once its processes are.
  if (std::string tmp = session_tmp_dir(name), aside = fmt::format("{}.removed-{}", tmp, ipc::mono_us());
      s->def().confine && ::rename(tmp.c_str(), aside.c_str()) == 0)
    finished = [this, aside, finished = std::move(finished)] { snapshots_.remove_later(aside, finished); };
  save_state();
  procs_->kill_all(name);
  s->stop(/*removed=*/true);
  arm_expiry();
  session* raw = s.get();
  removed_.push_back(std::move(s));
  // Wait for the wrapper to end the session's processes (5 s at most), then sweep for
  // stragglers.
  auto deadline = std::make_shared<handle_ptr<timer>>(make_handle<timer>(&loop_));
  auto finish = [this, raw, deadline, done = std::make_shared<std::function<void()>>(std::move(finished))] {
    deadline->reset();
    removed(raw, std::move(*done));
  };
  (*deadline)->start(5000, finish);
  raw->when_gone(finish);
}

void server::removed(session* s, std::function<void()> done) {
  auto it = std::find_if(removed_.begin(), removed_.end(), [s](const auto& p) { return p.get() == s; });
  if (it == removed_.end()) return;  // finished already (the deadline and the exit both came)
  pid_t sid = s->last_wrapper_pid();
  std::string cgroup = s->def().cgroup;
  removed_.erase(it);
  sweep_session(sid, std::move(done), {}, std::move(cgroup));
}

void server::sweep_session(pid_t sid, std::function<void()> done, std::set<pid_t> spare, std::string cgroup) {
  off_loop(
      &loop_, [sid, spare = std::move(spare), cgroup = std::move(cgroup)] {
        if (sid > 1) procs::signal_session(sid, 0, SIGKILL, spare);
        cgroup::kill_and_remove(cgroup, 2000);
      },
      std::move(done));
}

void server::reap_session_later(pid_t sid, const std::set<pid_t>& spare) {
  if (sid > 1) sweep_session(sid, nullptr, spare);
}

void server::save_state() {
  activity_save_timer_.reset();  // this write has them
  ipc::sessions_file f;
  for (const auto& [name, s] : sessions_) {
    f.sessions.emplace(name, spec_of(s->def()));
    if (s->def().idle_expiry_ms > 0) f.last_active.emplace(name, s->last_active_ms());
  }
  write_atomically(state_file(), ipc::encode(f));
}

bool server::busy(const session& s) const {
  return s.jobs_const().current() != nullptr || s.jobs_const().queued() > 0 || (procs_ && procs_->any_running(s.name()));
}

void server::session_activity() {
  if (shutting_down_) return;
  // Idle times are saved at most once a minute (and at shutdown): losing a minute of one in
  // a crash changes nothing that matters, and a command's end costs no write.
  if (!activity_save_timer_) {
    activity_save_timer_ = make_handle<timer>(&loop_);
    activity_save_timer_->start(60'000, [this] { save_state(); });
  }
  arm_expiry();
}

void server::arm_expiry() {
  if (shutting_down_) return;
  int64_t first = INT64_MAX;
  for (const auto& [name, s] : sessions_)
    if (s->def().idle_expiry_ms > 0 && !busy(*s))
      first = std::min(first, s->last_active_ms() + static_cast<int64_t>(s->def().idle_expiry_ms));
  if (first == INT64_MAX) {
    expiry_timer_.reset();
    return;
  }
  if (!expiry_timer_) expiry_timer_ = make_handle<timer>(&loop_);
  // A little late rather than early: a session is removed only once it is due.
  expiry_timer_->start(static_cast<uint64_t>(std::max<int64_t>(first - wall_ms(), 0)) + 1, [this] { expire_idle(); });
}

void server::expire_idle() {
  int64_t now = wall_ms();
  std::vector<std::string> due;
  for (const auto& [name, s] : sessions_)
    if (s->def().idle_expiry_ms > 0 && !busy(*s) &&
        now >= s->last_active_ms() + static_cast<int64_t>(s->def().idle_expiry_ms))
      due.push_back(name);
  for (const auto& name : due) {
    spdlog::info("session {} removed: idle for {} ms, its expiry", name, find_session(name)->def().idle_expiry_ms);
    remove_session(name, false, [](const std::string&) {});
  }
  arm_expiry();
}

void server::prune_sessions(uint64_t idle_ms, std::function<void(std::vector<std::string>)> done) {
  int64_t now = wall_ms();
  std::vector<std::string> names;
  for (const auto& [name, s] : sessions_)
    if (s->def().implicit && !busy(*s) && now - s->last_active_ms() >= static_cast<int64_t>(idle_ms))
      names.push_back(name);
  auto left = std::make_shared<size_t>(names.size());
  auto finish = std::make_shared<std::function<void(std::vector<std::string>)>>(std::move(done));
  if (names.empty()) return (*finish)({});
  for (const auto& name : names) {
    spdlog::info("session {} pruned: idle for {} ms", name, now - find_session(name)->last_active_ms());
    remove_session(name, false, [left, finish, names](const std::string&) {
      if (--*left == 0) (*finish)(names);
    });
  }
  arm_expiry();
}

void server::write_atomically(const std::string& path, std::string bytes) {
  auto& w = writes_[path];
  if (w.busy) {  // one write per file at a time, so an older state never lands last
    w.next = std::move(bytes);
    return;
  }
  w.busy = true;
  struct writer {
    server* srv;
    std::string path;
    std::string bytes;
    std::string error;
    uv_work_t req;
  };
  auto* wr = new writer{this, path, std::move(bytes), {}, {}};
  wr->req.data = wr;
  // Off the loop: fsync may take a while.
  uv_queue_work(
      &loop_, &wr->req,
      [](uv_work_t* r) {
        auto* me = static_cast<writer*>(r->data);
        if (auto s = ipc::write_file_atomically(me->path, me->bytes); !s) me->error = s.err().message;
      },
      [](uv_work_t* r, int) {
        auto* me = static_cast<writer*>(r->data);
        if (!me->error.empty()) spdlog::error("{}", me->error);
        auto& w = me->srv->writes_[me->path];
        w.busy = false;
        auto written = std::move(w.current_waiters);
        w.current_waiters = std::move(w.next_waiters);
        w.next_waiters.clear();
        if (w.next) {
          std::string next = std::move(*w.next);
          w.next.reset();
          me->srv->write_atomically(me->path, std::move(next));
        }
        delete me;
        for (auto& done : written) done();
      });
}

void server::after_state_written(std::function<void()> done) {
  auto& w = writes_[state_file()];
  if (!w.busy) return done();
  (w.next ? w.next_waiters : w.current_waiters).push_back(std::move(done));
}

result<ipc::message> server::read_state_file(const std::string& path, bool* missing) {
  *missing = false;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *missing = errno == ENOENT;
    return make_error("io", fmt::format("cannot open: {}", std::strerror(errno)));
  }
  std::string bytes;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0 && bytes.size() <= ipc::kMaxFrame + 4)
    bytes.append(buf, static_cast<size_t>(n));
  ::close(fd);
  ipc::frame_reader reader;
  reader.feed(bytes.data(), bytes.size());
  auto body = reader.next_body();
  if (!body) return body.err();
  if (!body.value()) return make_error("io", "the file is truncated");
  return ipc::message::parse(body.value()->data(), body.value()->size());
}

void server::move_aside(const std::string& path, const std::string& why) {
  std::string aside = fmt::format("{}.corrupt-{}", path, wall_ms());
  ::rename(path.c_str(), aside.c_str());
  spdlog::error("state file {} is unreadable ({}); moved it to {} and started without it", path, why, aside);
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

uint64_t server::uptime_ms() const { return (mono_us() - started_us_) / 1000; }

void server::begin_shutdown(const std::string& why, bool keep_sessions) {
  if (shutting_down_) return;
  shutting_down_ = true;
  keep_sessions_ = keep_sessions;
  spdlog::info("shutting down{}: {}", keep_sessions ? ", keeping the sessions for the next sbshd" : "", why);
  service_manager::notify("STOPPING=1\nSTATUS=shutting down: " + why);
  // An sbshd started meanwhile waits for this one to let go of the state directory.
  if (opts_.state_lock_fd >= 0) write_state_lock(opts_.state_lock_fd, opts_.socket_path, true);
  drop_spares();
  if (activity_save_timer_) save_state();  // idle times not yet saved
  expiry_timer_.reset();
  for (auto& [name, p] : pending_) {
    snapshots_.cancel(name);
    if (p.env_ticket != 0) envs_.leave(std::exchange(p.env_ticket, 0));  // its setup stops
  }
  listen_watch_.reset();
  listen_fd_.reset();
  if (bound_) {
    ::unlink(opts_.socket_path.c_str());
    bound_ = false;
  }
  if (keep_sessions) {
    for (auto& [name, s] : sessions_) s->abandon();
  } else {
    procs_->kill_all("");
    for (auto& [name, s] : sessions_) s->stop();
  }
  // Wait for the wrappers to end their sessions (3 s at most), then finish: each session says
  // when its wrapper has gone.
  shutdown_timer_ = make_handle<timer>(&loop_);
  shutdown_timer_->start(3000, [this] { finish_shutdown(); });
  sessions_left_ = sessions_.size();
  for (auto& [name, s] : sessions_)
    s->when_gone([this] {
      if (--sessions_left_ == 0) finish_shutdown();
    });
  if (sessions_.empty()) finish_shutdown();
}

void server::finish_shutdown() {
  if (!shutdown_timer_) return;  // finished already
  shutdown_timer_.reset();
  watchdog_timer_.reset();
  expiry_timer_.reset();
  activity_save_timer_.reset();
  // Sessions that end with sbshd take their cgroups with them (the next sbshd makes them again).
  if (!keep_sessions_) {
    for (const auto& [name, s] : sessions_) cgroup::kill_and_remove(s->def().cgroup, 1000);
    cgroups_.release();
  }
  sessions_.clear();  // any wrapper still there is killed by its session's destructor
  clients_.clear();
  procs_.reset();
  kept_.reset();
  close_bound_timers();
  farewells_.close_all();
  uv_close(reinterpret_cast<uv_handle_t*>(&sig_term_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&sig_int_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&sig_hup_), nullptr);
}

std::optional<spare_shell> server::take_spare() {
  // A dying process's descriptors close before its pidfd says it has ended: the control
  // socket's hang-up is the first sign.
  auto alive = [](const spare_shell& s) {
    pollfd p{s.wrapper.ctl.get(), POLLRDHUP, 0};
    return s.wrapper.proc->running() && ::poll(&p, 1, 0) == 0;
  };
  std::optional<spare_shell> out;
  while (!spares_.empty() && !out) {
    spare_shell s = std::move(spares_.front());
    spares_.pop_front();
    if (alive(s)) {
      out = std::move(s);
    } else {
      s.wrapper.proc->release();  // ended unseen: reaped when the loop sees it
      remove_shell_dir(s.dir);
    }
  }
  start_spares_in(0);
  return out;
}

void server::start_spares_in(uint64_t ms) {
  if (shutting_down_ || opts_.spare_wrappers == 0) return;
  if (!spare_timer_) spare_timer_ = make_handle<timer>(&loop_);
  spare_timer_->start(ms, [this] { start_spares(); });
}

std::optional<wrapper_process> server::start_wrapper(const std::string& dir, const std::vector<std::string>& args,
                                                     std::vector<std::string>& env, const char* cwd,
                                                     child_process::exit_callback on_exit, int* err) {
  int ctl[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) != 0) {
    *err = errno;
    return std::nullopt;
  }
  wrapper_process w{nullptr, unique_fd(ctl[0]), {}};
  unique_fd theirs(ctl[1]);
  auto channel = make_shell_channel();
  if (!channel) {
    *err = errno;
    return std::nullopt;
  }
  unique_fd owner(::fcntl(channel->first.get(), F_DUPFD_CLOEXEC, 0));
  if (::mkdir(dir.c_str(), 0700) != 0 || !owner) {
    *err = errno;
    return std::nullopt;
  }
  std::vector<std::string> argv_store{"sbsh-wrapper", "--dir", dir, "--adopt-timeout",
                                      std::to_string(opts_.adopt_timeout_ms)};
  argv_store.insert(argv_store.end(), args.begin(), args.end());
  std::vector<char*> argv = ipc::c_pointers(argv_store);
  std::vector<char*> envp = ipc::c_pointers(env);
  static_assert(wrapper::kControlFd == 3 && wrapper::kChannelFd == 4 && wrapper::kChannelOwnerFd == 5);
  int fds[] = {devnull_.get(), 2, 2, theirs.get(), channel->second.get(), owner.get()};
  child_process::options po;
  po.file = opts_.wrapper_path.c_str();
  po.argv = argv.data();
  po.envp = envp.data();
  po.cwd = cwd;
  po.fds = fds;
  w.proc = child_process::spawn(&loop_, po, std::move(on_exit), err);
  if (w.proc == nullptr) {
    ::rmdir(dir.c_str());
    return std::nullopt;
  }
  w.channel = std::move(channel->first);
  return w;
}

std::string server::new_shell_dir() { return fmt::format("{}/{}.{}", shells_dir(), pid_, ++shell_seq_); }

void server::start_spares() {
  while (!shutting_down_ && spares_.size() < opts_.spare_wrappers) {
    // Its bash starts at once, with an empty environment (the session that claims it exports
    // its own: none of sbshd's reaches a shell), in / (it holds no directory busy while it
    // waits). The padding is the argument memory in which the wrapper will show its session's
    // name, as long as the longest name.
    std::vector<std::string> env;
    if (const char* bash = std::getenv("SBSH_BASH"); bash != nullptr) env.push_back(fmt::format("SBSH_BASH={}", bash));
    std::string dir = new_shell_dir();
    int err = 0;
    auto spare = start_wrapper(
        dir, {"--spare", std::string(64, ' ')}, env, "/",
        [this](int64_t status, int sig) {
          // It ended unclaimed: forget it (its handle frees itself after this callback).
          std::erase_if(spares_, [](const spare_shell& s) {
            if (!s.wrapper.proc->exited()) return false;
            remove_shell_dir(s.dir);
            return true;
          });
          spdlog::warn("a spare wrapper {}; another starts in 1 s",
                       sig != 0 ? fmt::format("was killed by signal {}", sig)
                                : fmt::format("exited with status {}", status));
          start_spares_in(1000);
        },
        &err);
    if (!spare) {
      spdlog::warn("cannot start a spare wrapper ({}): {}; sessions start their own", opts_.wrapper_path,
                   std::strerror(err));
      return;
    }
    spares_.push_back({std::move(*spare), std::move(dir)});
  }
}

void server::drop_spares() {
  for (auto& s : spares_) {
    s.wrapper.proc->kill(SIGTERM);
    s.wrapper.proc->release();
    remove_shell_dir(s.dir);
  }
  spares_.clear();  // and their control sockets close
  spare_timer_.reset();
}

// Pings at half the interval the service manager asked for, as sd_watchdog_enabled(3)
// advises; a loop that is stuck stops pinging, and systemd restarts sbshd.
void server::watchdog_tick(uint64_t interval_ms) {
  service_manager::notify("WATCHDOG=1");
  watchdog_timer_->start(std::max<uint64_t>(interval_ms / 2, 1), [this, interval_ms] { watchdog_tick(interval_ms); });
}

void server::on_signal(int signum) {
  if (signum == SIGHUP) {
    spdlog::info("SIGHUP: nothing to reload");
    return;
  }
  begin_shutdown(fmt::format("signal {}", strsignal(signum)));
}

int server::run(const std::function<void()>& on_ready) {
  start(on_ready);
  uv_run(&loop_, UV_RUN_DEFAULT);
  return exit_code_;
}

void server::start(const std::function<void()>& on_ready) {
  ::signal(SIGPIPE, SIG_IGN);
  uv_signal_init(&loop_, &sig_term_);
  uv_signal_init(&loop_, &sig_int_);
  uv_signal_init(&loop_, &sig_hup_);
  for (auto* h : {&sig_term_, &sig_int_, &sig_hup_}) h->data = this;
  auto cb = [](uv_signal_t* h, int signum) { static_cast<server*>(h->data)->on_signal(signum); };
  uv_signal_start(&sig_term_, cb, SIGTERM);
  uv_signal_start(&sig_int_, cb, SIGINT);
  uv_signal_start(&sig_hup_, cb, SIGHUP);
  spdlog::info("sbshd {} listening on {} (pid {})", SBSH_VERSION, opts_.socket_path, pid_);
  if (on_ready) on_ready();
  service_manager::notify(fmt::format("READY=1\nMAINPID={}\nSTATUS=listening on {}", pid_, opts_.socket_path));
  if (uint64_t interval = service_manager::watchdog_interval_ms(); interval > 0) {
    watchdog_timer_ = make_handle<timer>(&loop_);
    watchdog_tick(interval);
  }
  start_spares();  // before the first request: an auto-started sbshd gets one at once
}

}  // namespace sbsh::daemon
