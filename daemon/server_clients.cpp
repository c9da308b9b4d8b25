// The listening socket and the client connections: binding the socket (or taking the one a
// service manager passed), accepting with its peer checks (same user, same PID namespace, the
// limit on clients), each client_conn's lifetime, and the bounds on what clients hold.
#include "daemon/server.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/paths.h"
#include "common/procs.h"
#include "daemon/capacity.h"
#include "daemon/session.h"
#include "ipc/bounds.h"
#include "ipc/messages.h"

namespace sbsh::daemon {

namespace {
// After the last client leaves, how long sbshd waits before giving free memory back (a
// burst of one-shot clients leaves and comes back between two of its commands).
constexpr uint64_t kTrimDelayMs = 200;

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
            size_t{64} * 1024, &srv.client_memory(), ipc::kRequestDecode) {
  sock_.on_drained = [this] { srv_.client_drained(this); };
}

client_conn::~client_conn() { srv_.client_memory().change(charged_, 0); }

void client_conn::keep_env(std::vector<std::string> env) {
  kept_env_bytes_ = 0;
  for (const auto& e : env) kept_env_bytes_ += e.size() + sizeof(std::string);
  kept_env_ = std::move(env);
  recount_jobs();
}

void client_conn::recount_jobs() {
  size_t now = text_bytes_ + kept_env_bytes_ + jobs_.size() * ipc::kJobCharge;
  srv_.client_memory().change(std::exchange(charged_, now), now);
}

status client_conn::job_room(uint64_t id, size_t text_bytes) const {
  if (jobs_.contains(id))
    return make_error(ipc::errc::bad_request, fmt::format("request id {} is already in use on this connection", id));
  if (jobs_.size() >= ipc::kMaxJobsPerClient)
    return make_error(ipc::errc::bad_request,
                      fmt::format("this connection already has {} commands in flight; wait for some to finish",
                                  ipc::kMaxJobsPerClient));
  if (text_bytes_ + text_bytes > ipc::kMaxTextPerClient)
    return make_error(ipc::errc::bad_request,
                      fmt::format("this connection already has {} MiB of command text queued; wait for some "
                                  "commands to finish",
                                  text_bytes_ >> 20));
  return ok_status();
}

void client_conn::add_job(uint64_t id, const std::string& session, size_t text_bytes) {
  jobs_.emplace(id, job_ref{session, text_bytes});
  text_bytes_ += text_bytes;
  recount_jobs();
}

const std::string* client_conn::job_session(uint64_t id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second.session;
}

void client_conn::job_done(uint64_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  text_bytes_ -= it->second.text_bytes;
  jobs_.erase(it);
  recount_jobs();
}

void client_conn::forget_jobs() {
  jobs_.clear();
  text_bytes_ = 0;
  recount_jobs();
}

void client_conn::send(std::string frame, std::vector<unique_fd> fds) {
  sock_.send(std::move(frame), std::move(fds));
  size_t queued = sock_.queued_bytes();
  if (queued > ipc::kReplyQueuePause && !replies_paused_) {
    // The client is not keeping up with its replies: take no more requests from it until
    // it has read them, and drop it if it does not within the time allowed.
    replies_paused_ = true;
    update_reading();
    if (stall_timer_ == nullptr) stall_timer_ = uv::make_handle<uv::timer>(srv_.loop());
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

status server::listen(unique_fd activated) {
  const std::string& path = opts_.socket_path;
  if (auto s = check_socket_path(path); !s) return s;
  if (auto s = ensure_socket_dir(dirname_of(path)); !s) {
    if (!activated) return s;
    return make_error(s.err().code, s.err().message + "; for a socket that systemd creates, set DirectoryMode=0700 "
                                                      "in its .socket unit");
  }

  // The lock says which sbshd owns this socket path; a daemon that is shutting down still
  // holds it for a moment, so wait a little before calling the path taken.
  std::string lock_path = path + ".lock";
  lock_fd_ = unique_fd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock_fd_) return make_error(ipc::errc::io, fmt::format("cannot open {}: {}", lock_path, std::strerror(errno)));
  bool locked = false;
  for (int i = 0; i < 250 && !locked; ++i) {
    if (::flock(lock_fd_.get(), LOCK_EX | LOCK_NB) == 0) locked = true;
    else ::usleep(20000);
  }
  if (!locked)
    return make_error(ipc::errc::already_running,
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
      return make_error(ipc::errc::bad_socket, fmt::format("{} exists and is not a socket; remove it or choose "
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
  if (rc != 0) return make_error(ipc::errc::io, fmt::format("cannot bind {}: {}", path, std::strerror(errno)));
  bound_ = true;
  ::chmod(path.c_str(), 0600);
  if (::listen(listen_fd_.get(), 512) != 0)
    return make_error(ipc::errc::io, fmt::format("cannot listen on {}: {}", path, std::strerror(errno)));
  return start_listening();
}

status server::start_listening() {
  listen_watch_ = uv::make_handle<uv::fd_watch>(&loop_, listen_fd_.get());
  listen_watch_->start(UV_READABLE, [this](int, int) { on_accept(); });
  std::string shells = shells_dir();
  struct stat st{};
  if (::mkdir(shells.c_str(), 0700) != 0 && errno != EEXIST)
    return make_error(ipc::errc::io, fmt::format("cannot create {}: {}", shells, std::strerror(errno)));
  if (::lstat(shells.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid())
    return make_error(ipc::errc::bad_socket, fmt::format("{} is not a directory of this user; remove it", shells));
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
  records_->start();
  return ok_status();
}

void server::on_accept() {
  for (int i = 0; i < 64; ++i) {
    int fd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if ((errno == EMFILE || errno == ENFILE) && refuse_for_descriptors()) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The connection stays in the backlog, and the listening socket readable: stop
        // polling it for a moment, or the loop would spin until a descriptor is free.
        spdlog::warn("cannot accept a connection: {}; trying again in 100 ms", std::strerror(errno));
        listen_watch_->set_events(0);
        accept_timer_ = uv::make_handle<uv::timer>(&loop_);
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
    if (cred.pid > 0 && !procs::same_pid_namespace(cred.pid)) {
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

bool server::refuse_for_descriptors() {
  int e = errno;
  if (!accept_reserve_) return false;
  accept_reserve_.reset();
  std::string why = resource_failure(e, "take another connection");
  unique_fd conn(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  bool taken = static_cast<bool>(conn);
  if (taken) {
    // Written at once and closed, so that the reserve can be taken back: a new connection's
    // socket buffer has room for one small frame.
    spdlog::warn("refused a connection: {}", why);
    std::string frame = ipc::encode(ipc::msg::error{ipc::wire_name(ipc::errc::too_many_clients), why});
    (void)::send(conn.get(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    conn.reset();
  }
  accept_reserve_ = unique_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  return taken && accept_reserve_;
}

void server::refuse(unique_fd conn, ipc::errc code, const std::string& message) {
  farewells_.add(std::move(conn), ipc::encode(ipc::msg::error{ipc::wire_name(code), message}));
}

void server::enforce_bounds_soon() {
  if (bounds_timer_ != nullptr || shutting_down_) return;
  bounds_timer_ = uv::make_handle<uv::timer>(&loop_);
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
  trim_timer_ = uv::make_handle<uv::timer>(&loop_);
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
  c->each_job_session([&](const std::string& name) {
    if (auto* s = find_session(name)) s->client_gone(c);
  });
  files_->client_gone(*c);
  c->forget_jobs();
  auto it = clients_.find(c);
  if (it == clients_.end()) return;
  // We may be inside this connection's callback: free it on the next loop iteration.
  dead_clients_.push_back(std::move(it->second));
  clients_.erase(it);
  if (clients_.empty()) trim_memory_soon();
  if (dead_clients_.size() == 1) {
    auto* t = uv::timer::create(&loop_);
    t->start(0, [this, t] {
      dead_clients_.clear();
      t->close();
    });
  }
}

void server::client_drained(client_conn* c) {
  c->drained();
  procs_->client_drained(*c);
  records_->client_drained(*c);
  files_->client_drained(*c);
  c->each_job_session([&](const std::string& name) {
    if (auto* s = find_session(name)) s->client_drained(c);
  });
}

client_conn* server::client_by_serial(uint64_t serial) {
  for (auto& [raw, c] : clients_)
    if (c->serial() == serial) return raw;
  return nullptr;
}

}  // namespace sbsh::daemon
