// The exec-path figures, each measured next to its baseline in the same run:
//
//   round trip      exec of `true` / `echo hi` on one kept library connection, vs a minimal
//                   one-hop driver of a persistent bash (writes `cmd; echo MARK$?`, reads to
//                   the marker). Goal <= 2.5x, pinned. Its floor row: sbsh's per-command protocol
//                   driven with no daemon in between (builtin_driver below). Under it, the
//                   bounds of a direct path (docs/architecture.md): the floor with a second
//                   process told of each command in each way sbshd could be (notice_sink),
//                   and what single steps of the path cost alone (step_costs).
//   cli             `sbsh exec -s s true` as a whole process vs `bash -c true`. Goal <= 1.0x.
//   new session     a new session and its first result vs spawning bash and reading its
//                   first reply, 20 ms apart. Goal <= 2x. Also back to back, and with no
//                   spare shell.
//   throughput      1 GB of text through `sbsh exec` into /dev/null vs the same generator
//                   through a plain pipe. Goal >= 0.8x (higher is better).
//   1 MiB command   a command whose text is 1 MiB, through the library; goal <= 1.2x bash's
//                   own eval of the same text already in memory. Also printed: the same text
//                   fed to the bare driver, one byte per read().
//   CPU per exec    what one exec of `true` costs the client, sbshd, the wrapper and bash.
//   snapshot        `session create --snapshot` of a tree of 10,000 files (200 MB) beside a
//                   50 MB node_modules, to the same filesystem, vs `rsync -a
//                   --exclude=node_modules` of it. Goal <= 1.0x. Needs rsync
//                   (apt-get install rsync).
//   file I/O        1 GB written into a session's root and read back out with `sbsh file
//                   write` and `sbsh file read`, vs `cat` doing the same in the same
//                   directory. Goal >= 0.8x (higher is better); sbshd's resident memory may
//                   grow by 8 MB at most meanwhile (its own sbshd, peak resident set).
//   environments    a session whose environment (session create --setup) is ready, created
//                   and its first command answered, vs one without a setup. Goal <= 1.5x.
//                   Also printed: a session whose setup runs (python3 -m venv and an
//                   offline pip install of one wheel). Needs python3-venv.
//   confined        a session confined by the kernel (--root, --confine) created and its
//                   first command answered, vs a plain session with the same root. Goals
//                   <= 2x and <= 10 ms (a confined spare serves it). Beside them: --confine
//                   --no-network, a plain session with a --limit (no spare shell can serve
//                   it either: what starting the wrapper and bash costs without
//                   confinement), a confined one with a --limit (no confined spare serves
//                   it: a confined start from scratch), and the floors, `unshare`
//                   of the same namespaces + `bash -c true`, and `bash -c true`; and where
//                   the time goes: the wrapper's start of bash with no daemon, plain and
//                   with each part of the confinement added, with its CPU time. Then the
//                   round trip of `true` in a confined session vs a plain one: goal <= 1.1x.
//
//   clients         100 clients at once, each on its own session, running `true`; beside
//                   them 100 marker drivers. Goals: >= 15,000 exec/s, p99 <= 20 ms.
//
// Usage: sbsh-bench [--quick] [--only round-trip|clients|snapshot|files|envs|confine|tty] [--clients N]
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <new>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "bench_util.h"
#include "common/confine.h"
#include "daemon/lease_page.h"
#include "daemon/shell_messages.h"
#include "ipc/frame.h"
#include "ipc/socket_io.h"
#include "uv/framed_socket.h"
#include "uv/handles.h"
#include "wrapper/sandbox.h"
#include "wrapper/spawn.h"
#include "wrapper/wrapper.h"

namespace sbsh::bench {
namespace {

// The baseline: bash driven over pipes with an end marker, the way pexpect-style tools do.
class marker_driver {
 public:
  marker_driver() {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) std::exit(1);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    char a0[] = "bash", a1[] = "--noprofile", a2[] = "--norc";
    char* argv[] = {a0, a1, a2, nullptr};
    posix_spawnp(&pid_, "bash", &fa, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~marker_driver() {
    ::close(to_);
    ::close(from_);
    int st;
    ::waitpid(pid_, &st, 0);
  }
  // Runs one command and returns its output (up to the marker line).
  std::string run(const std::string& cmd) const {
    std::string line = cmd + "\necho __MARK__$?\n";
    size_t off = 0;
    while (off < line.size()) {
      ssize_t w = ::write(to_, line.data() + off, line.size() - off);
      if (w <= 0) std::exit(1);
      off += static_cast<size_t>(w);
    }
    std::string out;
    char buf[65536];
    for (;;) {
      auto pos = out.find("__MARK__");
      if (pos != std::string::npos && out.find('\n', pos) != std::string::npos) return out.substr(0, pos);
      ssize_t n = ::read(from_, buf, sizeof buf);
      if (n <= 0) std::exit(1);
      out.append(buf, static_cast<size_t>(n));
    }
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
};

// The floor for the round trip: sbsh's own per-command protocol (daemon/shell_messages.h)
// driven directly, with no daemon and no client library in between: a bash running the sbsh
// builtin, one message with each command's text and fresh stdout and stderr pipes, its
// status back on the channel. What sbsh adds to this is the cost of the daemon's hops; what
// this adds to the marker driver is the cost of keeping each command's output and status
// apart.
class builtin_driver {
 public:
  explicit builtin_driver(const wrapper::shell_confinement& confinement = {}) {
    auto ch = daemon::make_shell_channel();
    auto builtin = wrapper::find_builtin();
    if (!ch || !builtin) std::exit(1);
    channel_ = std::move(ch->first);
    int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    auto pid = wrapper::spawn_serving_shell("/bin/bash", *builtin, ch->second.get(), devnull, {}, confinement);
    ::close(devnull);
    if (!pid) std::exit(1);
    pid_ = *pid;
    if (next()->type != SBSH_MSG_READY) std::exit(1);
  }
  // Runs on `lease`, a lease of a session's shell that sbshd granted (the real direct path):
  // the shell is sbshd's, not this driver's.
  explicit builtin_driver(unique_fd lease) : lease_(std::move(lease)) {}
  ~builtin_driver() {
    channel_.reset();
    int st;
    if (pid_ > 0) ::waitpid(pid_, &st, 0);
  }
  // Runs one command; returns its stdout (stderr is read and dropped).
  std::string run(const std::string& cmd) {
    return run_with(
        cmd, [](uint64_t) {}, [](uint64_t, int) {});
  }
  // The same, calling `before` just before the command is sent and `after` once its status
  // is in (the notices of the direct path's rows, below).
  template <typename B, typename A>
  std::string run_with(const std::string& cmd, B&& before, A&& after) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) std::exit(1);
    daemon::run_message m;
    m.seq = ++seq_;
    m.text = cmd;
    m.out = out[1];
    m.err = err[1];
    m.keep_out = out[0];
    m.keep_err = err[0];
    before(seq_);
    int to = lease_.valid() ? lease_.get() : channel_.get();
    if (!daemon::send_run(to, m, big_)) std::exit(1);
    ::close(out[1]);
    ::close(err[1]);
    auto st = next(to);
    if (st->seq != seq_) std::exit(1);
    after(seq_, st->exit_value);
    std::string text;
    char buf[65536];
    for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
    while (::read(err[0], buf, sizeof buf) > 0) {
    }
    ::close(out[0]);
    ::close(err[0]);
    return text;
  }

  [[nodiscard]] pid_t pid() const { return pid_; }
  // From now on sends its runs on a lease of the shell (docs/architecture.md, "The direct
  // path"), as a client holding one would; the shell then waits on its channel and the lease.
  void take_lease() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) std::exit(1);
    unique_fd shells(sv[1]);
    lease_ = unique_fd(sv[0]);
    auto page = daemon::lease_page::make();
    if (!page) std::exit(1);
    if (!daemon::send_lease(channel_.get(), 1, daemon::new_nonce(), shells.get(), page->second.get(),
                            SBSH_LEASE_MARK_PIDS))
      std::exit(1);
    page_.emplace(std::move(page->first));
    if (next(channel_.get())->type != SBSH_MSG_LEASED) std::exit(1);
  }

 private:
  std::optional<daemon::shell_message> next(int fd = -1) {
    if (fd < 0) fd = channel_.get();
    for (;;) {
      auto m = daemon::receive_message(fd);
      if (!m) std::exit(1);
      if (m.value()) return m.value();
      pollfd p{fd, POLLIN, 0};
      ::poll(&p, 1, -1);
    }
  }
  unique_fd channel_, lease_;
  std::optional<daemon::lease_page> page_;  // the lease's records, which the builtin writes
  daemon::text_memfd big_;
  pid_t pid_ = -1;
  uint64_t seq_ = 0;
};

// What sbshd would be told per command if a client drove the session's channel itself (the
// direct path, docs/architecture.md): small frames, the size of sbshd's own, written on a unix
// stream socket to another process that cuts and decodes them on a libuv loop with sbshd's
// own framed socket and keeps a record per command. `eager`: each notice is read as it comes
// (it wakes the reader); `batched`: the reader looks every 5 ms and takes what has come;
// `answered`: a start notice is answered and its sender waits for the answer before the
// command (sbshd granting each command); `shared`: no notice at all, the start (with its since
// mark, read from ns_last_pid) and the end (with the text's first 256 bytes) are written into
// memory shared with the reader, which looks at it every 5 ms.
class notice_sink {
 public:
  enum class mode { eager, batched, answered, shared };
  explicit notice_sink(mode m) : mode_(m) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) std::exit(1);
    if (m == mode::shared) {
      void* p = ::mmap(nullptr, sizeof(record_page), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) std::exit(1);
      page_ = new (p) record_page();
      last_pid_ = unique_fd(::open("/proc/sys/kernel/ns_last_pid", O_RDONLY | O_CLOEXEC));
    }
    pid_ = ::fork();
    if (pid_ < 0) std::exit(1);
    if (pid_ == 0) {
      ::close(sv[0]);
      serve(unique_fd(sv[1]), m, page_);
      ::_exit(0);
    }
    ::close(sv[1]);
    fd_ = unique_fd(sv[0]);
  }
  ~notice_sink() {
    fd_.reset();
    int st;
    ::waitpid(pid_, &st, 0);
    if (page_ != nullptr) ::munmap(page_, sizeof(record_page));
  }
  notice_sink(const notice_sink&) = delete;
  notice_sink& operator=(const notice_sink&) = delete;

  // What sbshd needs before a command runs: which one, and what marks the processes it
  // starts (the since mark) and when its deadline passes.
  void start(uint64_t seq) {
    if (mode_ == mode::shared) {
      char buf[32];
      ssize_t n = ::pread(last_pid_.get(), buf, sizeof buf - 1, 0);
      if (n <= 0) std::exit(1);
      buf[n] = '\0';
      page_->since_pid = std::strtoull(buf, nullptr, 10);
      page_->deadline_ms = 0;
      page_->running.store(seq, std::memory_order_release);
      return;
    }
    ipc::frame_builder f(ipc::msg_type::exec_started, seq);
    f.str("session", "rt").u64("seq", seq).u64("since_pid", 4242).u64("since_tick", 123456789).u64("timeout_ms", 0);
    f.boolean("answer", mode_ == mode::answered);
    if (write_all(fd_.get(), f.finish()) != 0) std::exit(1);
    if (mode_ == mode::answered) await_answer();
  }
  // How it ended; with `and_start`, the start's fields too (one notice per command).
  void end(uint64_t seq, int exit_value, bool and_start, std::string_view text = "true") {
    if (mode_ == mode::shared) {
      uint64_t at = page_->ended.load(std::memory_order_relaxed);
      auto& e = page_->ring[at % record_page::kRing];
      e.seq = seq;
      e.exit = exit_value;
      e.since_pid = page_->since_pid;
      e.text_len = static_cast<uint32_t>(std::min(text.size(), sizeof e.text));
      std::memcpy(e.text, text.data(), e.text_len);
      page_->running.store(0, std::memory_order_relaxed);
      page_->ended.store(at + 1, std::memory_order_release);
      return;
    }
    ipc::frame_builder f(ipc::msg_type::exec_done, seq);
    f.str("session", "rt").u64("seq", seq).i64("exit", exit_value).nil("signal").u64("generation", 1);
    f.boolean("ran", true).u64("started_ns", 1000).u64("ended_ns", 2000).boolean("interrupted", false);
    if (and_start) f.u64("since_pid", 4242).u64("since_tick", 123456789).u64("timeout_ms", 0);
    if (write_all(fd_.get(), f.finish()) != 0) std::exit(1);
  }

 private:
  // The shared memory of `shared`: what runs now, and a ring of the commands that ended.
  struct record_page {
    static constexpr size_t kRing = 512;  // more than the shell runs in 5 ms
    struct entry {
      uint64_t seq = 0, since_pid = 0;
      int64_t exit = 0;
      uint32_t text_len = 0;
      char text[256] = {};
    };
    std::atomic<uint64_t> running{0}, ended{0};
    uint64_t since_pid = 0, deadline_ms = 0;
    entry ring[kRing];
  };
  void await_answer() {
    char head[4];
    read_exactly(head, sizeof head);
    uint32_t n = (uint32_t{static_cast<unsigned char>(head[0])} << 24) |
                 (uint32_t{static_cast<unsigned char>(head[1])} << 16) |
                 (uint32_t{static_cast<unsigned char>(head[2])} << 8) | uint32_t{static_cast<unsigned char>(head[3])};
    std::string body(n, '\0');
    read_exactly(body.data(), n);
    if (!ipc::message::parse(body.data(), body.size())) std::exit(1);
  }
  void read_exactly(char* p, size_t n) const {
    for (size_t got = 0; got < n;) {
      ssize_t r = ::read(fd_.get(), p + got, n - got);
      if (r <= 0) std::exit(1);
      got += static_cast<size_t>(r);
    }
  }
  // The reader: sbshd's framed socket on a libuv loop, a record per command.
  static void serve(unique_fd fd, mode m, record_page* page) {
    struct record {
      int64_t exit = 0;
      uint64_t since_pid = 0, since_tick = 0, timeout_ms = 0;
      bool ended = false;
    };
    std::unordered_map<uint64_t, record> table;
    uv_loop_t loop;
    uv_loop_init(&loop);
    std::unique_ptr<uv::framed_socket> sock;
    uv::framed_socket::callbacks cbs;
    cbs.on_message = [&](ipc::envelope&& e) {
      auto seq = e.msg.get_u64("seq");
      if (!seq || !*seq) std::exit(1);
      auto& r = table[**seq];
      if (auto v = e.msg.get_u64("since_pid"); v && *v) r.since_pid = **v;
      if (auto v = e.msg.get_u64("since_tick"); v && *v) r.since_tick = **v;
      if (auto v = e.msg.get_u64("timeout_ms"); v && *v) r.timeout_ms = **v;
      if (e.msg.type() == ipc::msg_type::exec_done) {
        if (auto v = e.msg.get_i64("exit"); v && *v) r.exit = **v;
        r.ended = true;
        table.erase(**seq);  // a finished command leaves the table, as sbshd's job does
      } else if (auto a = e.msg.get_bool("answer"); a && *a && **a) {
        ipc::frame_builder f(ipc::msg_type::exec_started, **seq);
        f.u64("seq", **seq);
        sock->send(f.take());
      }
    };
    cbs.on_closed = [&](const std::string&) { uv_stop(&loop); };
    sock = std::make_unique<uv::framed_socket>(&loop, std::move(fd), std::move(cbs));
    uv::handle_ptr<uv::timer> tick;
    uint64_t seen = 0;
    unsigned long long lost = 0;
    if (m == mode::shared) {
      tick.reset(uv::timer::create(&loop));
      tick->start(
          5,
          [&] {
            uint64_t ended = page->ended.load(std::memory_order_acquire);
            if (ended - seen > record_page::kRing) {  // the shell went faster: sbshd would be woken sooner
              lost += ended - seen - record_page::kRing;
              seen = ended - record_page::kRing;
            }
            for (; seen < ended; ++seen) {
              const auto& e = page->ring[seen % record_page::kRing];
              if (e.text_len > sizeof e.text) std::exit(1);
              auto& r = table[e.seq];
              r.exit = e.exit;
              r.since_pid = e.since_pid;
              r.ended = true;
              table.erase(e.seq);
            }
            if (uint64_t now = page->running.load(std::memory_order_acquire); now != 0)
              table[now].since_pid = page->since_pid;
          },
          5);
    }
    if (m == mode::batched) {
      sock->pause_reading(true);
      tick.reset(uv::timer::create(&loop));
      tick->start(
          5,
          [&] {
            sock->pause_reading(false);
            sock->read_pending();
            if (sock->is_open()) sock->pause_reading(true);
          },
          5);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    if (lost != 0) std::fprintf(stderr, "sbsh-bench: %llu command records overwritten unread\n", lost);
    tick.reset();
    sock.reset();
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
  }
  mode mode_;
  unique_fd fd_;
  pid_t pid_ = -1;
  record_page* page_ = nullptr;
  unique_fd last_pid_;
};

struct row {
  std::string name;
  stats sbsh, base;
  std::string unit;
  double goal;
  bool higher_is_better;
};

void print(const row& r) {
  double ratio = r.base.median > 0 ? r.sbsh.median / r.base.median : 0;
  bool met = r.higher_is_better ? ratio >= r.goal : ratio <= r.goal;
  std::printf("%-28s %10.3f %-5s (p90 %8.3f) %10.3f %-5s (p90 %8.3f) %7.2fx  goal %s%.1fx  %s\n", r.name.c_str(),
              r.sbsh.median, r.unit.c_str(), r.sbsh.p90, r.base.median, r.unit.c_str(), r.base.p90, ratio,
              r.higher_is_better ? ">=" : "<=", r.goal, met ? "met" : "NOT met");
}

template <typename F>
stats time_ms(int warm, int iters, F&& f) {
  for (int i = 0; i < warm; ++i) f();
  std::vector<double> v;
  v.reserve(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    auto t0 = clock_type::now();
    f();
    v.push_back(ms_since(t0));
  }
  return summarize(v);
}

// Times sbsh (fa) and its baseline (fb) in alternating blocks of about a tenth of the
// iterations each, so that a change in the machine's load during the run affects both alike
// while each still runs warm, as it would alone. `pause`, untimed, comes before each timed
// call of either.
template <typename A, typename B, typename P = void (*)()>
std::pair<stats, stats> compare(int warm, int iters, A&& fa, B&& fb, P pause = [] {}) {
  for (int i = 0; i < warm; ++i) {
    fa();
    fb();
  }
  std::vector<double> va, vb;
  auto block = [&pause](auto& f, std::vector<double>& v, int n) {
    for (int i = 0; i < n; ++i) {
      pause();
      auto t0 = clock_type::now();
      f();
      v.push_back(ms_since(t0));
    }
  };
  int per_block = std::max(1, iters / 10);
  for (int done = 0, k = 0; done < iters; done += per_block, ++k) {
    int n = std::min(per_block, iters - done);
    if (k % 2 == 0) {
      block(fa, va, n);
      block(fb, vb, n);
    } else {
      block(fb, vb, n);
      block(fa, va, n);
    }
  }
  return {summarize(va), summarize(vb)};
}

// CPU time (ns) a thread or process has run, from the scheduler's own count.
uint64_t cpu_ns(const std::string& schedstat) {
  std::ifstream f(schedstat);
  uint64_t ns = 0;
  f >> ns;
  return ns;
}

// The client's share: CPU per command of this thread and of the bash that ran it, through
// sbshd with the library (`via`) and on the floor (`floor`): what the library spends on its own
// side, which a direct path keeps, beside what the floor's driver spends.
void client_share(const std::function<void()>& via, pid_t via_shell, const std::function<void()>& floor,
                  pid_t floor_shell, int iters) {
  std::string self = "/proc/self/task/" + std::to_string(::gettid()) + "/schedstat";
  auto per_command = [&](const std::function<void()>& f, pid_t shell) {
    std::string theirs = "/proc/" + std::to_string(shell) + "/schedstat";
    uint64_t me = cpu_ns(self), sh = cpu_ns(theirs);
    for (int i = 0; i < iters; ++i) f();
    return std::pair<double, double>{static_cast<double>(cpu_ns(self) - me) / 1000.0 / iters,
                                     static_cast<double>(cpu_ns(theirs) - sh) / 1000.0 / iters};
  };
  auto [lib, lib_bash] = per_command(via, via_shell);
  auto [drv, drv_bash] = per_command(floor, floor_shell);
  std::printf("%-38s client %.1f us (library) / %.1f us (floor's driver); bash %.1f / %.1f us\n",
              "  CPU per command of true", lib, drv, lib_bash, drv_bash);
}

// One row under the round trip: a way of running the command against the marker driver, in
// the same alternation, with what it costs beyond the floor's median.
void print_beside_floor(const char* name, const stats& v, const stats& b, const stats& floor) {
  std::printf("%-38s %7.3f ms (p90 %6.3f) %7.3f ms (p90 %6.3f) %6.2fx  floor %+6.2f us\n", name, v.median, v.p90,
              b.median, b.p90, v.median / b.median, (v.median - floor.median) * 1000);
}

// What one step of the per-command path costs alone, in microseconds per step.
void print_step(const char* name, const stats& s) {
  std::printf("%-38s %7.2f us (p90 %6.2f)\n", name, s.median * 1000, s.p90 * 1000);
}

// The steps a direct path still takes or could drop, each alone: the two pipes a command's
// output goes through, its four descriptors passed over the channel, and the framing of a
// request and its reply as the client library does it.
void step_costs(int iters) {
  print_step("  step: 2 pipes made and closed", time_ms(200, iters, [] {
               int a[2], b[2];
               if (::pipe2(a, O_CLOEXEC) != 0 || ::pipe2(b, O_CLOEXEC) != 0) std::exit(1);
               for (int fd : {a[0], a[1], b[0], b[1]}) ::close(fd);
             }));
  int sv[2], a[2], b[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0 || ::pipe2(a, O_CLOEXEC) != 0 ||
      ::pipe2(b, O_CLOEXEC) != 0)
    std::exit(1);
  int four[] = {a[0], a[1], b[0], b[1]};
  auto pass = [&](bool with_fds) {
    char byte = 'r';
    iovec iov{&byte, 1};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof four)];
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (with_fds) {
      mh.msg_control = ctl;
      mh.msg_controllen = sizeof ctl;
      cmsghdr* c = CMSG_FIRSTHDR(&mh);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof four);
      std::memcpy(CMSG_DATA(c), four, sizeof four);
    }
    if (::sendmsg(sv[0], &mh, 0) != 1) std::exit(1);
    msghdr in{};
    in.msg_iov = &iov;
    in.msg_iovlen = 1;
    in.msg_control = ctl;
    in.msg_controllen = sizeof ctl;
    if (::recvmsg(sv[1], &in, MSG_CMSG_CLOEXEC) != 1) std::exit(1);
    for (cmsghdr* c = CMSG_FIRSTHDR(&in); c != nullptr; c = CMSG_NXTHDR(&in, c)) {
      int got[4];
      std::memcpy(got, CMSG_DATA(c), sizeof got);
      for (int fd : got) ::close(fd);
    }
  };
  auto bare = time_ms(200, iters, [&] { pass(false); });
  auto with = time_ms(200, iters, [&] { pass(true); });
  print_step("  step: a message sent and received", bare);
  print_step("  step: the same with 4 fds (SCM_RIGHTS)", with);
  for (int fd : {sv[0], sv[1], a[0], a[1], b[0], b[1]}) ::close(fd);
  // What the shell would add to mark each command's start for sbshd itself: the since mark
  // (ns_last_pid, from a descriptor kept open) and a look at two channels instead of one.
  int last_pid = ::open("/proc/sys/kernel/ns_last_pid", O_RDONLY | O_CLOEXEC);
  print_step("  step: ns_last_pid read (pread)", time_ms(200, iters, [last_pid] {
               char buf[32];
               if (::pread(last_pid, buf, sizeof buf, 0) <= 0) std::exit(1);
             }));
  ::close(last_pid);
  int p1[2], p2[2];
  if (::pipe2(p1, O_CLOEXEC) != 0 || ::pipe2(p2, O_CLOEXEC) != 0 || ::write(p2[1], "x", 1) != 1) std::exit(1);
  print_step("  step: ppoll of 2 descriptors", time_ms(200, iters, [&] {
               pollfd pf[2] = {{p1[0], POLLIN, 0}, {p2[0], POLLIN, 0}};
               if (::ppoll(pf, 2, nullptr, nullptr) != 1) std::exit(1);
             }));
  for (int fd : {p1[0], p1[1], p2[0], p2[1]}) ::close(fd);
  print_step("  step: an exec frame built, a reply parsed", time_ms(200, iters, [] {
               ipc::frame_builder req(ipc::msg_type::exec, 7);
               req.str("session", "rt").str("command", "true").boolean("same_env", true).str("io", "fds");
               req.u64("timeout_ms", 0).str_array("fds", {"stdout", "stderr", "keep_out", "keep_err"});
               auto frame = req.take();
               ipc::frame_builder rep(ipc::msg_type::exec_done, 7);
               rep.i64("exit", 0).nil("signal").u64("generation", 1).boolean("ran", true).boolean("state_lost", false);
               rep.u64("started_ns", 1000).u64("ended_ns", 2000).str("cwd", "/tmp");
               auto reply = rep.take();
               if (frame.empty() || !ipc::message::parse(reply.data() + 4, reply.size() - 4)) std::exit(1);
             }));
}

// A lease of session `session` from the real sbshd at `socket` (its own connection, kept open
// by the caller while the lease is used), for the "sbsh on a lease" row.
std::optional<unique_fd> lease_from(const std::string& socket, const std::string& session, ipc::channel& ch) {
  auto fd = ipc::connect_in(socket.substr(0, socket.rfind('/')), socket.substr(socket.rfind('/') + 1).c_str());
  if (!fd) return std::nullopt;
  ch = ipc::channel(std::move(*fd));
  ipc::frame_builder hello(ipc::msg_type::hello, 1);
  hello.u64("version", ipc::kProtocolVersion);
  ipc::frame_builder lease(ipc::msg_type::lease, 2);
  lease.str("session", session);
  if (!ch.send(hello.finish()) || !ch.send(lease.finish())) return std::nullopt;
  for (;;) {
    auto env = ch.recv();
    if (!env) return std::nullopt;
    if (env->msg.id() != 2) continue;
    if (env->msg.type() != ipc::msg_type::lease_granted || env->fds.size() != 1) return std::nullopt;
    return std::move(env->fds[0]);
  }
}

void round_trip(const private_daemon& d, int iters) {
  // The notices' readers first, so that they hold none of the descriptors made below.
  notice_sink eager(notice_sink::mode::eager), batched(notice_sink::mode::batched),
      answered(notice_sink::mode::answered), shared(notice_sink::mode::shared);
  auto c = d.connect();
  marker_driver drv;
  builtin_driver proto, leased;
  leased.take_lease();
  for (const char* cmd : {"true", "echo hi"}) {
    client::exec_options o;
    o.session = "rt";
    o.command = cmd;
    auto [s, b] = compare(
        200, iters, [&] { (void)c.exec(o); }, [&] { (void)drv.run(cmd); });
    print({std::string("round trip: ") + cmd, s, b, "ms", 2.5, false});
    if (std::string_view(cmd) == "true") {
      // The direct path as built: runs on a lease sbshd granted, with no word to sbshd.
      (void)c.exec([] {
        client::exec_options x;
        x.session = "rt-lease";
        x.command = "true";
        return x;
      }());
      ipc::channel holder;
      if (auto fd = lease_from(d.socket(), "rt-lease", holder)) {
        builtin_driver on_lease(std::move(*fd));
        auto [ls, lb] = compare(
            200, iters, [&] { (void)on_lease.run(cmd); }, [&] { (void)drv.run(cmd); });
        print({"sbsh on a lease: true", ls, lb, "ms", 2.5, false});
      } else {
        std::printf("sbsh on a lease: sbshd granted no lease\n");
      }
      // The same through the library's lease (client::lease), on a connection of its own.
      auto lc = d.connect();
      if (auto l = lc.lease("rt-lease")) {
        auto [ls, lb] = compare(
            200, iters, [&] { (void)l->run(cmd); }, [&] { (void)drv.run(cmd); });
        print({"sbsh on a lease, library", ls, lb, "ms", 2.5, false});
      } else {
        std::printf("sbsh on a lease, library: %s\n", l.err().message.c_str());
      }
    }
    auto [f, b2] = compare(
        200, iters, [&] { (void)proto.run(cmd); }, [&] { (void)drv.run(cmd); });
    std::printf("%-28s %10.3f ms    (p90 %8.3f) %10.3f ms    (p90 %8.3f) %7.2fx  sbsh / floor %.2fx\n",
                "  floor: protocol, no daemon", f.median, f.p90, b2.median, b2.p90, f.median / b2.median,
                s.median / f.median);
    if (std::string_view(cmd) != "true") continue;
    auto [l, b4] = compare(200, iters, [&] { (void)leased.run(cmd); }, [&] { (void)drv.run(cmd); });
    // The builtin records each run on a lease in its page (no reader here): the design's cost
    // on the shell's side, beside the floor.
    print_beside_floor("  floor on a lease, runs recorded", l, b4, f);
    // The bounds of a direct path (docs/architecture.md): the floor, with sbshd told of each
    // command in each way it could be.
    auto with = [&](notice_sink& sink, bool start, bool one, builtin_driver& by) {
      return [&sink, start, one, &by, cmd] {
        (void)by.run_with(
            cmd,
            [&](uint64_t seq) {
              if (start) sink.start(seq);
            },
            [&](uint64_t seq, int exit_value) { sink.end(seq, exit_value, one); });
      };
    };
    struct variant {
      const char* name;
      notice_sink& sink;
      bool start, one;
    };
    for (const auto& v : {variant{"  floor + start, end notices", eager, true, false},
                          variant{"  floor + one notice (at the end)", eager, false, true},
                          variant{"  floor + start, end, read every 5 ms", batched, true, false},
                          variant{"  floor + one notice, read every 5 ms", batched, false, true},
                          variant{"  floor + start answered, end notice", answered, true, false},
                          variant{"  floor + records in shared memory", shared, true, false}}) {
      auto [n, b3] = compare(
          200, iters, with(v.sink, v.start, v.one, proto), [&] { (void)drv.run(cmd); });
      print_beside_floor(v.name, n, b3, f);
    }
  }
  step_costs(iters * 4);
  client::exec_options o;
  o.session = "rt";
  o.command = "true";
  pid_t rt_shell = 0;
  if (auto all = c.sessions())
    for (const auto& s : *all)
      if (s.name == "rt") rt_shell = s.shell_pid;
  client_share([&] { (void)c.exec(o); }, rt_shell, [&] { (void)proto.run("true"); }, proto.pid(), iters * 2);
}

// Many clients at once: `clients` threads, each with its own kept library connection to a
// session of its own, run `true` for `seconds`; beside them the same number of marker drivers,
// one per thread. Prints exec/s and each exec's p50 and p99. Goals: >= 15,000 exec/s and
// p99 <= 20 ms with 100 clients over 100 sessions.
struct load_figures {
  double per_second = 0, p50 = 0, p99 = 0;
  size_t count = 0;
};

template <typename Run>
load_figures under_load(unsigned clients, double seconds, Run run) {
  std::vector<std::vector<double>> took(static_cast<size_t>(clients));
  std::atomic<bool> stop{false};
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < clients; ++i)
    threads.emplace_back([&, i] {
      auto step = run(i);  // sets up this client's connection or driver
      ready.fetch_add(1);
      while (ready.load() < static_cast<int>(clients)) std::this_thread::yield();
      while (!stop.load(std::memory_order_relaxed)) {
        auto t0 = clock_type::now();
        step();
        took[static_cast<size_t>(i)].push_back(ms_since(t0));
      }
    });
  while (ready.load() < static_cast<int>(clients)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto t0 = clock_type::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  double elapsed = ms_since(t0) / 1000;
  std::vector<double> all;
  for (auto& v : took) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  if (all.empty()) return {};
  return {static_cast<double>(all.size()) / elapsed, all[all.size() / 2],
          all[std::min(all.size() - 1, all.size() * 99 / 100)], all.size()};
}

void many_clients(const private_daemon& d, unsigned clients, double seconds) {
  // sbshd is one thread: its CPU per exec bounds the rate whatever the cores.
  std::string daemon_cpu = "/proc/" + std::to_string(d.pid()) + "/schedstat";
  uint64_t cpu_before = cpu_ns(daemon_cpu);
  auto sbsh = under_load(clients, seconds, [&](unsigned i) {
    auto c = std::make_shared<client::connection>(d.connect());
    client::exec_options o;
    o.session = fmt::format("load{}", i);
    o.command = "true";
    if (auto r = c->exec(o); !r) std::fprintf(stderr, "exec: %s\n", r.err().message.c_str());  // makes the session
    return [c, o] { (void)c->exec(o); };
  });
  double daemon_us = static_cast<double>(cpu_ns(daemon_cpu) - cpu_before) / 1000.0 / static_cast<double>(std::max<size_t>(sbsh.count, 1));
  auto base = under_load(clients, seconds, [](unsigned) {
    auto drv = std::make_shared<marker_driver>();
    return [drv] { (void)drv->run("true"); };
  });
  std::printf("%-28s %10.0f /s    (p50 %6.3f ms  p99 %7.3f ms) %10.0f /s  %7.2fx  goal >= 15000/s: %s, p99 <= 20 ms: %s\n",
              fmt::format("{} clients, `true`", clients).c_str(), sbsh.per_second, sbsh.p50, sbsh.p99,
              base.per_second, sbsh.per_second / std::max(base.per_second, 1.0),
              sbsh.per_second >= 15000 ? "met" : "NOT met", sbsh.p99 <= 20 ? "met" : "NOT met");
  std::printf("%-28s %10.1f us  (at most %.0f /s from sbshd alone)\n", "  sbshd's CPU per exec", daemon_us,
              1e6 / std::max(daemon_us, 0.001));
}

// exec --tty beside a plain exec of the same command, and how long after a program starts
// reading its terminal sbshd says so (exec --interactive --detach-after returns): that time
// less the settle sbshd waits for (no output for kInputSettleMs), beside the same exec of a
// command that reads nothing.
void terminal(const private_daemon& d, int iters) {
  auto c = d.connect();
  client::exec_options plain;
  plain.session = "tty";
  plain.command = "true";
  client::exec_options tty = plain;
  tty.tty = true;
  auto [t, p] = compare(50, iters, [&] { (void)c.exec(tty); }, [&] { (void)c.exec(plain); });
  print({"exec --tty true vs exec true", t, p, "ms", 1.5, false});
  client::exec_options waits = tty;
  waits.interactive = true;
  waits.detach_after = std::chrono::seconds(30);
  waits.command = "read -r line";
  client::exec_options ends = waits;
  ends.command = "true";
  constexpr double kSettleMs = 100;  // daemon/job_runner.cpp's kInputSettleMs
  std::vector<double> beyond;
  for (int i = 0; i < std::max(10, iters / 10); ++i) {
    auto t0 = clock_type::now();
    auto r = c.exec(waits);
    double waited = ms_since(t0);
    if (!r || !r->waiting_for_input) {
      std::printf("waiting for input: not detected (%s)\n", r ? "it did not say so" : r.err().message.c_str());
      return;
    }
    (void)c.kill_command(r->command_id);
    t0 = clock_type::now();
    (void)c.exec(ends);
    beyond.push_back(waited - ms_since(t0) - kSettleMs);
  }
  stats b = summarize(beyond);
  std::printf("%-28s %10.3f ms    (p90 %8.3f) beyond the settle of %.0f ms  goal <= 50 ms  %s\n",
              "waiting for input seen", b.median, b.p90, kSettleMs, b.median <= 50 ? "met" : "NOT met");
}

void cli(const private_daemon& d, int iters) {
  std::string sbsh = bin_dir() + "/sbsh";
  auto [s, b] = compare(
      20, iters, [&] { run_quiet({sbsh, "--socket", d.socket(), "exec", "-s", "s", "true"}); },
      [&] { run_quiet({"bash", "-c", "true"}); });
  print({"sbsh exec true vs bash -c", s, b, "ms", 1.0, false});
}

void new_session(const private_daemon& d, int iters) {
  // sbshd as it runs by default (a spare shell waits for the next session), and one that
  // starts each session's wrapper and bash when the session is created. Sessions are
  // created 20 ms apart, as a client that creates one and then uses it would (and the
  // baseline's bash is spawned after the same pause), and then back to back, where each new
  // session's start overlaps the start of the spare that replaces the last one.
  const private_daemon cold("cold", {"--spare-wrappers", "0"});
  auto idle = [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
  auto none = [] {};
  struct variant {
    const private_daemon* daemon;
    bool paced;
    const char* label;
  };
  int n = 0;  // every session is a new one
  for (const variant& v : {variant{&d, true, ""}, variant{&d, false, "back to back"},
                           variant{&cold, true, "--spare-wrappers 0"}}) {
    auto c = v.daemon->connect();
    auto fa = [&] {
      client::exec_options o;
      o.session = "fresh-" + std::to_string(n++);
      o.command = "true";
      (void)c.exec(o);
    };
    auto fb = [&] {
      marker_driver drv;
      (void)drv.run("true");
    };
    auto [s, b] = v.paced ? compare(5, iters, fa, fb, idle) : compare(5, iters, fa, fb, none);
    if (*v.label == '\0') print({"new session + first result", s, b, "ms", 2.0, false});
    else
      std::printf("  %-26s %10.3f ms    (p90 %8.3f) %10.3f ms    (p90 %8.3f) %7.2fx\n", v.label, s.median,
                  s.p90, b.median, b.p90, s.median / b.median);
  }
}

void throughput(const private_daemon& d, long long bytes) {
  std::string gen = "yes 'the quick brown fox jumps over the lazy dog 0123456789' | head -c " + std::to_string(bytes);
  std::string sbsh = bin_dir() + "/sbsh";
  int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  auto [s, b] = compare(
      1, 5, [&] { run_quiet({sbsh, "--socket", d.socket(), "exec", "-s", "tp", gen}, devnull); },
      [&] { run_quiet({"bash", "-c", gen + " | cat"}, devnull); });
  ::close(devnull);
  double mb = static_cast<double>(bytes) / 1e6;
  // Report throughput (MB/s): higher is better.
  row r{"text throughput " + std::to_string(bytes / 1000000) + " MB", {mb / (s.median / 1000), mb / (s.p90 / 1000)},
        {mb / (b.median / 1000), mb / (b.p90 / 1000)}, "MB/s", 0.8, true};
  print(r);
}

// Remote use: the same requests through `sbsh dial-stdio` as a dial command (a local stand-in
// for ssh, which adds its own cost), next to the direct connection. No goal: what the relay
// and io "frames" cost.
void through_dial(const private_daemon& d, int iters, long long bytes) {
  std::string sbsh = bin_dir() + "/sbsh";
  client::connect_options o;
  o.dial_command = {sbsh, "-S", d.socket(), "--no-autostart", "dial-stdio"};
  auto far = client::connection::connect(o);
  if (!far) {
    std::printf("dial-stdio: %s\n", far.err().message.c_str());
    return;
  }
  auto near = d.connect();
  client::exec_options e;
  e.session = "dial";
  e.command = "true";
  auto [s, b] = compare(200, iters, [&] { (void)far->exec(e); }, [&] { (void)near.exec(e); });
  std::printf("%-28s %10.3f ms    (p90 %8.3f) %10.3f ms    (p90 %8.3f) %7.2fx  vs the socket itself\n",
              "round trip via dial-stdio", s.median, s.p90, b.median, b.p90, s.median / b.median);
  std::string gen = "yes 'the quick brown fox jumps over the lazy dog 0123456789' | head -c " + std::to_string(bytes);
  std::string dial = sbsh + " -S " + d.socket() + " --no-autostart dial-stdio";
  int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  auto [ts, tb] = compare(
      1, 5, [&] { run_quiet({sbsh, "--dial", dial, "exec", "-s", "tp", gen}, devnull); },
      [&] { run_quiet({sbsh, "--socket", d.socket(), "exec", "-s", "tp", gen}, devnull); });
  ::close(devnull);
  double mb = static_cast<double>(bytes) / 1e6;
  std::printf("%-28s %10.0f MB/s  (p90 %8.0f) %10.0f MB/s  (p90 %8.0f) %7.2fx  vs the socket itself\n",
              ("throughput via dial-stdio " + std::to_string(bytes / 1000000) + " MB").c_str(), mb / (ts.median / 1000),
              mb / (ts.p90 / 1000), mb / (tb.median / 1000), mb / (tb.p90 / 1000), tb.median / ts.median);
}

void big_command(const private_daemon& d) {
  auto c = d.connect();
  client::exec_options o;
  o.session = "big";
  o.command = ": " + std::string(1 << 20, 'x');
  marker_driver drv;
  auto b = time_ms(1, 3, [&] { (void)drv.run(o.command); });
  // The floor: bash's own eval of the same text, already in one of its variables (no
  // transport at all), in the same bare driver. What sbsh adds is the difference.
  std::string path = d.dir() + "/big-command";
  {
    FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) std::exit(1);
    std::fwrite(o.command.data(), 1, o.command.size(), f);
    std::fclose(f);
  }
  marker_driver fresh;
  (void)fresh.run("mapfile -d '' -t __big < " + path);
  auto [s, floor] = compare(2, 10, [&] { (void)c.exec(o); }, [&] { (void)fresh.run("eval \"$__big\""); });
  std::printf("%-28s %10.3f ms    (p90 %8.3f) %10.3f ms    (p90 %8.3f) %7.2fx  vs bash's own eval: %.2fx  goal <= "
              "1.2x  %s\n",
              "1 MiB command text", s.median, s.p90, b.median, b.p90, s.median / b.median, s.median / floor.median,
              s.median <= 1.2 * floor.median ? "met" : "NOT met");
  std::printf("%-28s %10.3f ms    (p90 %8.3f)    bash's own eval of the same text, no transport\n",
              "  floor: bash eval", floor.median, floor.p90);
}


// What one exec costs each process on the way, in CPU time: the client (this thread),
// sbshd, the session's wrapper (not on the path: it should cost nothing) and bash.
void cpu_split(const private_daemon& d, int iters) {
  auto c = d.connect();
  client::exec_options o;
  o.session = "cpu";
  o.command = "true";
  for (int i = 0; i < 200; ++i) (void)c.exec(o);
  client::session_status st;
  auto all = c.sessions();
  if (!all) std::exit(1);
  for (const auto& s : *all)
    if (s.name == "cpu") st = s;
  std::string self = "/proc/self/task/" + std::to_string(::gettid()) + "/schedstat";
  std::vector<std::pair<const char*, std::string>> who = {
      {"client", self},
      {"sbshd", "/proc/" + std::to_string(d.pid()) + "/schedstat"},
      {"wrapper", "/proc/" + std::to_string(st.wrapper_pid) + "/schedstat"},
      {"bash", "/proc/" + std::to_string(st.shell_pid) + "/schedstat"}};
  std::vector<uint64_t> before;
  before.reserve(who.size());
  for (const auto& w : who) before.push_back(cpu_ns(w.second));
  for (int i = 0; i < iters; ++i) (void)c.exec(o);
  std::printf("%-28s", "CPU per exec of true");
  double total = 0;
  for (size_t i = 0; i < who.size(); ++i) {
    double us = static_cast<double>(cpu_ns(who[i].second) - before[i]) / 1000.0 / iters;
    total += us;
    std::printf(" %s %.1f us,", who[i].first, us);
  }
  std::printf(" total %.1f us\n", total);
}

}  // namespace
// Writes `files` files of `size` bytes under `dir`, 100 to a directory.
void make_tree(const std::string& dir, int files, size_t size) {
  std::string data(size, 'x');
  for (int i = 0; i < files; ++i) {
    std::string sub = dir + "/d" + std::to_string(i / 100);
    if (i % 100 == 0) ::mkdir(sub.c_str(), 0755);
    for (size_t k = 0; k < data.size(); k += 4096) data[k] = static_cast<char>('a' + (i + k) % 26);
    std::ofstream(sub + "/f" + std::to_string(i) + ".txt", std::ios::binary) << data;
  }
}

void snapshot(const private_daemon& d, int iters) {
  if (run_quiet({"rsync", "--version"}) != 0) {
    std::printf("%-28s rsync is not installed (apt-get install rsync): skipped\n", "snapshot copy");
    return;
  }
  // The copies go in the state directory, beside the tree: the same filesystem.
  std::string tree = d.dir() + "/tree";
  ::mkdir(tree.c_str(), 0755);
  make_tree(tree, 10000, 20000);  // 200 MB
  ::mkdir((tree + "/node_modules").c_str(), 0755);
  make_tree(tree + "/node_modules", 2000, 25000);  // 50 MB
  run_quiet({"sync"});
  auto c = d.connect();
  std::vector<double> vs, vb;
  // Nothing is deleted until every copy is made. On an ext4 without a journal the kernel
  // will not reuse an inode freed in the last minute or more, and creating files after a
  // large delete walks past every such inode: a copy timed after the last one was deleted
  // measures that walk, and which of the two pays it more depends on where the kernel put
  // the directories. Each copy is written back to the disk before the next one starts.
  std::vector<std::string> copies;
  for (int i = 0; i < iters; ++i) {
    client::session_spec spec;
    spec.name = "snap" + std::to_string(i);
    spec.snapshot = tree;
    run_quiet({"sync"});
    auto t0 = clock_type::now();
    if (auto made = c.create_session(spec); !made) {
      std::printf("snapshot: %s\n", made.err().message.c_str());
      return;
    }
    vs.push_back(ms_since(t0));
    if (auto kept = c.remove_session(spec.name, true); kept && !kept->empty()) copies.push_back(*kept);
    std::string to = d.dir() + "/rsync" + std::to_string(i);
    copies.push_back(to);
    run_quiet({"sync"});
    t0 = clock_type::now();
    run_quiet({"rsync", "-a", "--exclude=node_modules", tree + "/", to + "/"});
    vb.push_back(ms_since(t0));
  }
  for (const auto& copy : copies) run_quiet({"rm", "-rf", copy});
  print({"snapshot: 200 MB + node_modules", summarize(vs), summarize(vb), "ms", 1.0, false});
}

// A process's resident set, or its peak so far, in KiB (/proc/PID/status).
long status_kib(pid_t pid, const char* field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::strlen(field));
  return -1;
}

void file_io(long long bytes, int iters) {
  private_daemon d("files");  // its own: its peak memory is this figure's alone
  std::string root = d.dir() + "/root", src = d.dir() + "/src.bin";
  ::mkdir(root.c_str(), 0755);
  {
    std::ofstream f(src, std::ios::binary);
    std::string block(1 << 20, '\0');
    for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<char>((i * 7919) >> 3);
    for (long long done = 0; done < bytes; done += static_cast<long long>(block.size()))
      f.write(block.data(), static_cast<std::streamsize>(std::min<long long>(bytes - done, block.size())));
  }
  auto c = d.connect();
  client::session_spec spec;
  spec.name = "files";
  spec.root = root;
  if (auto made = c.create_session(spec); !made) {
    std::printf("file I/O: %s\n", made.err().message.c_str());
    return;
  }
  long rss_before = status_kib(d.pid(), "VmRSS:");
  std::string sbsh = bin_dir() + "/sbsh -S " + d.socket(), back = d.dir() + "/back.bin";
  auto [s, b] = compare(
      1, iters,
      [&] {
        run_quiet({"bash", "-c", sbsh + " file write -s files out.bin < " + src + " && " + sbsh +
                                     " file read -s files out.bin > " + back});
      },
      [&] { run_quiet({"bash", "-c", "cat " + src + " > " + root + "/out.cat && cat " + root + "/out.cat > " + back}); });
  long peak = status_kib(d.pid(), "VmHWM:");
  double mb = 2.0 * static_cast<double>(bytes) / 1e6;  // written, then read
  print({"file write+read " + std::to_string(bytes / 1000000) + " MB", {mb / (s.median / 1000), mb / (s.p90 / 1000)},
         {mb / (b.median / 1000), mb / (b.p90 / 1000)}, "MB/s", 0.8, true});
  double growth = static_cast<double>(peak - rss_before) / 1024.0;
  std::printf("%-28s %10.1f MB  (peak resident set during file I/O minus before)  goal <= 8 MB  %s\n",
              "sbshd memory growth", growth, growth <= 8.0 ? "met" : "NOT met");
}

// Sessions with an environment (session create --setup): one whose environment is ready
// (created and its first command answered) beside one without a setup, and what a setup
// that runs costs (python3 -m venv and an offline pip install of a local wheel).
void environments(const private_daemon& d, int iters) {
  std::string proj = d.dir() + "/envproj";
  ::mkdir(proj.c_str(), 0755);
  ::mkdir((proj + "/wheels").c_str(), 0755);
  if (run_quiet({"/usr/bin/python3", "-c",
                 "import zipfile,sys\n"
                 "z = zipfile.ZipFile(sys.argv[1], 'w')\n"
                 "z.writestr('demo/__init__.py', '')\n"
                 "z.writestr('demo-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: demo\\nVersion: 1.0\\n')\n"
                 "z.writestr('demo-1.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n"
                 "z.writestr('demo-1.0.dist-info/RECORD', '')\n",
                 proj + "/wheels/demo-1.0-py3-none-any.whl"}) != 0 ||
      run_quiet({"/usr/bin/python3", "-m", "venv", "--help"}) != 0) {
    std::printf("%-28s python3 with venv is needed (apt-get install python3-venv): skipped\n", "environments");
    return;
  }
  auto c = d.connect();
  int n = 0;
  auto spec_for = [&](const std::string& name) {
    client::session_spec s;
    s.name = name;
    s.cwd = proj;
    s.setup = "/usr/bin/python3 -m venv \"$SBSH_ENV/venv\" && PIP_DISABLE_PIP_VERSION_CHECK=1 \"$SBSH_ENV/venv/bin/pip\" "
              "install --quiet --no-index --find-links wheels -r requirements.txt";
    s.setup_keys = {"requirements.txt"};
    return s;
  };
  // Each build has a key of its own: a comment in the requirements.
  std::vector<double> builds;
  for (int i = 0; i < (iters > 20 ? 3 : 1); ++i) {
    std::ofstream(proj + "/requirements.txt") << "demo==1.0\n# build " << i << "\n";
    auto t0 = clock_type::now();
    if (auto made = c.create_session(spec_for("build-" + std::to_string(i))); !made) {
      std::printf("environments: %s\n", made.err().message.c_str());
      return;
    }
    builds.push_back(ms_since(t0));
  }
  auto first = [&](const client::session_spec& s) {
    (void)c.create_session(s);
    client::exec_options o;
    o.session = s.name;
    o.command = "true";
    (void)c.exec(o);
  };
  auto idle = [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
  auto [s, b] = compare(
      3, iters, [&] { first(spec_for("warm-" + std::to_string(n++))); },
      [&] {
        client::session_spec plain;
        plain.name = "plain-" + std::to_string(n++);
        plain.cwd = proj;
        first(plain);
      },
      idle);
  print({"session, env ready + 1st", s, b, "ms", 1.5, false});
  auto built = summarize(builds);
  std::printf("  %-26s %10.1f ms    (venv + offline pip install of one wheel; %zu run%s)\n", "session whose setup runs",
              built.median, builds.size(), builds.size() == 1 ? "" : "s");
}


// Confined sessions (session create --confine): what creating one and answering its first
// command costs, next to a plain session with the same root, a plain one that no spare shell
// can serve (a --limit), the same namespaces made by unshare(1) for `bash -c true` (the floor:
// starting a process tree in them and nothing else), and `bash -c true`. Every variant runs
// 20 ms after the last one's session was removed (untimed), in alternating blocks, so that a
// change in the machine's load falls on all alike and no removal overlaps a creation.
// One thing the confinement benchmark times, and what it measured.
struct confine_variant {
  const char* label;
  std::function<std::string()> timed;  // "" or why it failed
  std::function<void()> after;
  std::string failed;  // why it could not run (then it is left out)
  std::vector<double> ms;
  std::vector<double> cpu;  // this process's and its children's, ms: the floors and the no-daemon rows
};

// CPU time of this process and of its children that have been waited for, in ms.
double cpu_ms() {
  double ms = 0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage u{};
    ::getrusage(who, &u);
    for (const timeval& tv : {u.ru_utime, u.ru_stime})
      ms += static_cast<double>(tv.tv_sec) * 1e3 + static_cast<double>(tv.tv_usec) / 1e3;
  }
  return ms;
}

// Times each variant `iters` times, 20 ms apart, after three rounds not kept; in blocks
// that take turns, so that a slow spell of the machine falls on all of them alike. A variant
// that fails once is left out from then on, with the reason.
void measure(std::vector<confine_variant>& vs, int iters) {
  auto once = [](confine_variant& v, bool keep) {
    if (!v.failed.empty()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    double c0 = cpu_ms();
    auto t0 = clock_type::now();
    v.failed = v.timed();
    double t = ms_since(t0);
    v.after();
    if (keep && v.failed.empty()) {
      v.ms.push_back(t);
      v.cpu.push_back(cpu_ms() - c0);  // with what ending it costs, which is waited for
    }
  };
  for (int w = 0; w < 3; ++w)
    for (auto& v : vs) once(v, false);
  int per_block = std::max(1, iters / 10);
  for (int done = 0, k = 0; done < iters; done += per_block, ++k)
    for (size_t j = 0; j < vs.size(); ++j) {
      confine_variant& v = vs[(j + static_cast<size_t>(k)) % vs.size()];
      for (int i = 0; i < std::min(per_block, iters - done); ++i) once(v, true);
    }
}

void print_line(const std::string& label, const stats& s, const std::string& rest) {
  std::printf("  %-26s %10.3f ms    (p90 %8.3f) %s\n", label.c_str(), s.median, s.p90, rest.c_str());
}

// The table of confined(): rows 0-4 the sessions (confined, confined without network,
// plain, plain with --limit, confined with --limit), then the floors, then from
// `first_spawn` the rows without a daemon, each against the one above.
constexpr size_t kSessionRows = 5;
void print_variants(const std::vector<confine_variant>& vs, size_t first_spawn, bool root_user, int iters) {
  auto get = [&vs](size_t i) { return vs[i].failed.empty() ? summarize(vs[i].ms) : stats{}; };
  stats plain = get(2), limited = get(3);
  auto ratio = [](const stats& a, const stats& b) { return b.median > 0 ? a.median / b.median : 0.0; };
  auto fmt_ratio = [](double r, const char* of) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%5.2fx %s", r, of);
    return std::string(buf);
  };
  std::printf("%-28s   (%s; %d each, 20 ms apart)\n", "confined session + first",
              root_user ? "as root" : "as a user: unshare --user --map-current-user", iters);
  for (size_t i = 0; i < vs.size(); ++i) {
    if (!vs[i].failed.empty()) {
      std::printf("  %-26s skipped: %s\n", vs[i].label, vs[i].failed.c_str());
      continue;
    }
    stats s = get(i);
    std::string rest;
    if (i > first_spawn) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%+.3f ms over the row above", s.median - get(i - 1).median);
      rest = buf;
    } else if (i == first_spawn) {
      rest = fmt_ratio(ratio(s, get(first_spawn - 1)), "bash -c true");
    } else if (i != 2) {
      rest = fmt_ratio(ratio(s, plain), "plain");
    }
    if (i == 0 || i == 1 || i == 4) rest += ", " + fmt_ratio(ratio(s, limited), "plain --limit");
    if (i == 0)
      rest += std::string("  goal <= 2.0x plain ") + (ratio(s, plain) <= 2.0 ? "met" : "NOT met") + ", <= 10 ms " +
              (s.median <= 10.0 ? "met" : "NOT met");
    if (i >= kSessionRows) {  // no daemon: all the CPU is this process's and its children's
      char buf[64];
      std::snprintf(buf, sizeof buf, "  CPU %.3f ms", summarize(vs[i].cpu).median);
      rest += buf;
    }
    print_line(vs[i].label, s, rest);
  }
}

// The round trip in an existing session: confined vs plain, the same root.
void confined_round_trip(client::connection& c, const std::string& root, int iters) {
  client::session_spec cs, ps;
  cs.name = "rt-confined";
  cs.root = ps.root = root;
  cs.confine = true;
  ps.name = "rt-plain";
  if (auto made = c.create_session(cs); !made) return;
  if (auto made = c.create_session(ps); !made) return;
  client::exec_options oc, op;
  oc.session = cs.name;
  op.session = ps.name;
  oc.command = op.command = "true";
  auto [s, b] = compare(200, iters * 20, [&] { (void)c.exec(oc); }, [&] { (void)c.exec(op); });
  print({"round trip, confined", s, b, "ms", 1.1, false});
  (void)c.remove_session(cs.name);
  (void)c.remove_session(ps.name);
}

void confined(int iters) {
  private_daemon d("confine");
  std::string root = d.dir() + "/root";
  ::mkdir(root.c_str(), 0755);
  auto c = d.connect();
  // What this user's sbsh-wrapper does: the namespaces directly as root, inside a user
  // namespace of bash's own (mapping the user to itself) otherwise.
  bool root_user = ::geteuid() == 0;
  std::vector<std::string> unshare_ns = {"unshare"};
  if (!root_user) unshare_ns.insert(unshare_ns.end(), {"--user", "--map-current-user"});
  unshare_ns.insert(unshare_ns.end(), {"--pid", "--fork"});
  std::vector<std::string> unshare_net = unshare_ns;
  unshare_net.insert(unshare_net.begin() + 1, "--net");
  for (auto* v : {&unshare_ns, &unshare_net}) v->insert(v->end(), {"bash", "-c", "true"});

  int n = 0;
  std::string last;
  auto session = [&](bool confine, bool no_network, bool limit) {
    return [&c, &n, &last, &root, confine, no_network, limit] {
      client::session_spec spec;
      spec.name = "c" + std::to_string(n++);
      spec.root = root;
      spec.confine = confine;
      spec.no_network = no_network;
      if (limit) spec.limits = {"core=0"};
      last = spec.name;
      if (auto made = c.create_session(spec); !made) return made.err().message;
      client::exec_options o;
      o.session = spec.name;
      o.command = "true";
      auto r = c.exec(o);
      if (!r) return r.err().message;
      return std::string(r->exit_code == 0 ? "" : "`true` did not answer 0");
    };
  };
  auto remove = [&c, &last] {
    if (!last.empty()) (void)c.remove_session(last);
    last.clear();
  };
  auto process = [](std::vector<std::string> argv) {
    return [argv = std::move(argv)] {
      return run_quiet(argv) == 0 ? std::string() : argv[0] + " failed (exit status not 0)";
    };
  };
  std::vector<confine_variant> vs;
  vs.push_back({"confined", session(true, false, false), remove, {}, {}, {}});
  vs.push_back({"confined, no network", session(true, true, false), remove, {}, {}, {}});
  vs.push_back({"plain", session(false, false, false), remove, {}, {}, {}});
  vs.push_back({"plain, --limit", session(false, false, true), remove, {}, {}, {}});
  // A confined session that no confined spare serves (one with a limit): started as every
  // confined session was before there were confined spares.
  vs.push_back({"confined, --limit", session(true, false, true), remove, {}, {}, {}});
  vs.push_back({"floor: unshare, pid", process(unshare_ns), [] {}, {}, {}, {}});
  vs.push_back({"floor: unshare, pid + net", process(unshare_net), [] {}, {}, {}, {}});
  vs.push_back({"floor: bash -c true", process({"bash", "-c", "true"}), [] {}, {}, {}, {}});
  // Where the time goes: the wrapper's own start of bash (spawn_shell, then the builtin's
  // ready message and the first command's status), with no daemon and no wrapper process,
  // plain and in each confinement; the session's rules as the wrapper builds them.
  std::string tmp = d.dir() + "/session-tmp";
  ::mkdir(tmp.c_str(), 0700);
  auto builtin = wrapper::find_builtin();
  std::vector<confine::rule> rules = confine::system_rules();
  rules.push_back({root, confine::access::read_write, false});
  rules.push_back({tmp, confine::access::read_write, false});
  rules.push_back({"/bin/bash", confine::access::read_exec, false});
  if (builtin) rules.push_back({*builtin, confine::access::read_only, false});
  std::optional<builtin_driver> drv;
  // Only where the sessions could be confined: the driver ends the program when bash cannot start.
  // With `view`, as the wrapper starts a confined session's shell: the view planned and the
  // seccomp filter compiled for each start, a user namespace, the view built, no capability.
  auto spawn = [&drv, &rules, &vs, root, tmp](bool landlock, bool pid_ns, bool net_ns, bool view = false) {
    return [&drv, &rules, &vs, root, tmp, landlock, pid_ns, net_ns, view] {
      if (const std::string& why = vs[net_ns ? 1 : 0].failed; !why.empty()) return "as the session: " + why;
      unique_fd ruleset;
      if (landlock) {
        auto r = confine::build_ruleset(rules);
        if (!r) return r.err().message;
        ruleset = std::move(*r);
      }
      wrapper::shell_confinement conf{ruleset.get(), pid_ns, net_ns};
      wrapper::sandbox_plan plan;
      if (view) {
        std::vector<confine::rule> own{{root, confine::access::read_write, false},
                                       {tmp, confine::access::read_write, false}};
        std::vector<confine::rule> system(rules.begin(), rules.end());
        std::erase_if(system, [&](const confine::rule& r) { return r.path == root || r.path == tmp; });
        auto p = wrapper::plan_sandbox(system, own, root);
        if (!p) return p.err().message;
        auto filter = wrapper::seccomp_program();
        if (!filter) return filter.err().message;
        plan = std::move(*p);
        plan.seccomp = std::move(*filter);
        plan.map_by_parent = ::geteuid() == 0;
        conf.sandbox = &plan;
      }
      drv.emplace(conf);
      return std::string(drv->run("true").empty() ? "" : "`true` printed something");
    };
  };
  auto drop = [&drv] { drv.reset(); };
  size_t first_spawn = vs.size();
  vs.push_back({"no daemon: bash, plain", spawn(false, false, false), drop, {}, {}, {}});
  vs.push_back({"no daemon: + pid ns", spawn(false, true, false), drop, {}, {}, {}});
  vs.push_back({"no daemon: + Landlock", spawn(true, true, false), drop, {}, {}, {}});
  vs.push_back({"no daemon: + net ns", spawn(true, true, true), drop, {}, {}, {}});
  vs.push_back({"no daemon: + user ns, view, seccomp", spawn(true, true, true, true), drop, {}, {}, {}});
  measure(vs, iters);

  print_variants(vs, first_spawn, root_user, iters);
  if (!vs[0].failed.empty() || !vs[2].failed.empty()) return;
  auto build = time_ms(20, iters * 10, [&rules] { (void)confine::build_ruleset(rules); });
  print_line("Landlock ruleset, built", build, "(" + std::to_string(rules.size()) + " rules, as the wrapper builds them)");
  confined_round_trip(c, root, iters);
}

}  // namespace sbsh::bench

static int unguarded_main(int argc, char** argv) {
  using namespace sbsh::bench;
  bool quick = false;
  std::string only;
  unsigned clients = 100;
  sbsh::cli::command_line cl("sbsh-bench", "");
  cl.describe("Measures sbsh's exec path beside its baselines and prints the ratios (docs/benchmarks.md).");
  cl.flag("--quick", "fewer iterations of each figure", quick);
  cl.option("--only", "SECTION", "one section alone: round-trip, clients, snapshot, files, envs, confine or tty",
            only, sbsh::cli::check_one_of({"round-trip", "clients", "snapshot", "files", "envs", "confine", "tty"}));
  cl.number("--clients", "N", "clients at once in the clients section (default 100)", clients, "a number of clients",
            1, 1000);
  if (int done = parse_or_exit(cl, "sbsh-bench", argc, argv); done >= 0) return done;
  if (only == "round-trip") {  // what scripts/test.sh prints after the tests, pinned and not
    private_daemon d("rt");
    std::printf("%-28s %24s %27s %8s\n", "figure", "sbsh", "baseline", "ratio");
    round_trip(d, quick ? 500 : 5000);
    return 0;
  }
  if (only == "clients") {
    private_daemon d("clients");
    many_clients(d, clients, quick ? 2 : 5);
    return 0;
  }
  if (only == "snapshot") {
    private_daemon d("snap");
    snapshot(d, quick ? 3 : 10);
    return 0;
  }
  if (only == "envs") {
    private_daemon d("envs");
    environments(d, quick ? 20 : 100);
    return 0;
  }
  if (only == "confine") {
    confined(quick ? 30 : 100);
    return 0;
  }
  if (only == "tty") {
    private_daemon d("tty");
    std::printf("%-28s %24s %27s %8s\n", "figure", "sbsh", "baseline", "ratio");
    terminal(d, quick ? 100 : 1000);
    return 0;
  }
  if (only == "files") {
    file_io(1000000000LL, quick ? 2 : 5);
    return 0;
  }
  private_daemon d("exec");
  std::printf("%-28s %24s %27s %8s\n", "figure", "sbsh", "baseline", "ratio");
  round_trip(d, quick ? 500 : 5000);
  many_clients(d, clients, quick ? 2 : 5);
  cpu_split(d, quick ? 2000 : 20000);
  cli(d, quick ? 50 : 500);
  terminal(d, quick ? 100 : 1000);
  new_session(d, quick ? 20 : 200);
  confined(quick ? 30 : 100);
  environments(d, quick ? 20 : 100);
  throughput(d, quick ? 100000000LL : 1000000000LL);
  big_command(d);
  through_dial(d, quick ? 500 : 5000, quick ? 100000000LL : 1000000000LL);
  snapshot(d, quick ? 3 : 10);
  file_io(1000000000LL, quick ? 2 : 5);
  return 0;
}

// Nothing is thrown on purpose; should something be, say what instead of dumping core.
int main(int argc, char** argv) {
  try {
    return unguarded_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sbsh-bench: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "sbsh-bench: internal error\n");
  }
  return 1;
}
