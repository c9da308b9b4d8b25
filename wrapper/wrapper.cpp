// The wrapper's loop: poll the control socket and a signalfd, answer sbshd, reap children.
#include "wrapper/wrapper.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/paths.h"
#include "common/procs.h"
#include "ipc/frame.h"
#include "ipc/messages.h"
#include "ipc/shell_channel.h"
#include "ipc/socket_io.h"
#include "ipc/text.h"
#include "wrapper/idle_memory.h"
#include "wrapper/sandbox.h"
#include "wrapper/spawn.h"

namespace sbsh::wrapper {

namespace {

using ipc::msg_type;
namespace msg = ipc::msg;

void log_error(const char* session, const std::string& what) {
  std::fprintf(stderr, "sbsh-wrapper[%s]: %s\n", session, what.c_str());
}

int64_t mono_ms() { return static_cast<int64_t>(mono_us() / 1000); }

void reap_children() {
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

bool has_children() {
  reap_children();
  return !(::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD);
}

// Waits up to `ms` for a child to end. SIGCHLD is blocked in the wrapper (its loop reads it
// from a signalfd), so it stays pending until taken here: thousands of wrappers ending their
// sessions at once (a shutdown) wake when an exit they wait for has happened, not to look
// at /proc again while the exits wait for the CPU.
void wait_for_child(long ms) {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  timespec ts{0, ms * 1000 * 1000};
  (void)::sigtimedwait(&chld, nullptr, &ts);
}

// Signals this process's children outside the groups `spare`; returns how many.
size_t signal_children(int sig, const std::set<pid_t>& spare) {
  size_t n = 0;
  for (const auto& c : procs::children_of(::getpid())) {
    if (spare.contains(c.pgid)) continue;
    ::kill(c.pid, sig);
    ++n;
  }
  return n;
}

// Ends every process below the wrapper but those of the groups `spare` (background
// processes) and what runs below them. The wrapper is a child subreaper, so a process whose
// parent ends comes back to it, whatever session or group it moved to (setsid, a double
// fork, nohup, disown, a daemon that closed its descriptors): only its own children are
// killed, round after round, until none is left. A child's pid cannot be reused before it is
// reaped here, so a signal never reaches another process; a process that forks meanwhile
// only adds a round. Bounded, so that a process stuck in the kernel does not hold the
// wrapper forever.
void end_descendants(const char* session, const std::set<pid_t>& spare) {
  const int64_t give_up = mono_ms() + kEndSessionWithinMs;
  // The pause doubles up to 32 ms: when thousands of sessions end at once (a shutdown), their
  // wrappers polling every millisecond would take the CPU from the very exits they wait for.
  for (long pause = 1; has_children() && signal_children(SIGKILL, spare) > 0; pause = std::min(pause * 2, 32L)) {
    if (mono_ms() >= give_up) {
      std::fprintf(stderr, "sbsh-wrapper[%s]: processes of the session did not end within %d s of SIGKILL\n", session,
                   kEndSessionWithinMs / 1000);
      return;
    }
    wait_for_child(pause);
  }
}

// Ends what is left of the session: a polite SIGHUP (as a closing terminal would send) to
// the shell's process session and to the wrapper's children, then SIGKILL to whatever is
// still there after a short grace, down to the last descendant (end_descendants).
void end_session(const char* session, pid_t sid, const std::set<pid_t>& spare) {
  // With no child left there is nothing to look for: no scan of /proc, whose cost grows
  // with every process on the host.
  if (!has_children()) return;
  size_t polite = procs::signal_session(sid, ::getpid(), SIGHUP, spare) + signal_children(SIGHUP, spare);
  for (int i = 0; polite > 0 && i < 50; ++i) {  // up to 500 ms
    wait_for_child(10);
    if (!has_children()) return;
    bool any = false;
    for (const auto& c : procs::children_of(::getpid()))
      if (!spare.contains(c.pgid)) any = true;
    if (!any) break;
  }
  procs::signal_session(sid, ::getpid(), SIGKILL, spare);
  end_descendants(session, spare);
}

[[gnu::noinline]] std::string current_dir() {
  char here[4096];
  return ::getcwd(here, sizeof here) != nullptr ? here : "/";
}

// Removes every entry of the link directory `dir`, then the directory: used when no sbshd
// is left to do it.
void remove_dir(const std::string& dir) {
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        ::unlinkat(::dirfd(d), e->d_name, 0);
    ::closedir(d);
  }
  ::rmdir(dir.c_str());
}

}  // namespace

int set_option(std::string_view name, const char* value, options& o, std::string& error) {
  if (name == "--dir") {
    o.dir = value;
  } else if (name == "--limit") {
    auto l = parse_limit(value);
    if (!l) {
      error = l.err().message;
      return -1;
    }
    o.limits.push_back(*l);
  } else if (name == "--rule") {
    auto r = confine::parse_rule(value);
    if (!r) {
      error = r.err().message;
      return -1;
    }
    o.rules.push_back(*r);
  } else if (name == "--ns") {
    std::string_view ns = value;
    o.pid_ns = ns == "pid" || ns == "pid,net";
    o.net_ns = ns == "net" || ns == "pid,net";
    if (!o.pid_ns && !o.net_ns) return -1;
  } else if (name == "--as") {
    char* end = nullptr;
    unsigned long uid = std::strtoul(value, &end, 10);
    if (end == value || *end != ':') return -1;
    const char* g = end + 1;
    unsigned long gid = std::strtoul(g, &end, 10);
    if (end == g || *end != '\0' || uid >= 0xffffffffUL || gid >= 0xffffffffUL) return -1;
    o.confine_uid = static_cast<uid_t>(uid);
    o.confine_gid = static_cast<gid_t>(gid);
  } else if (name == "--cgroup") {
    o.cgroup = value;
    if (o.cgroup.empty() || o.cgroup[0] != '/') return -1;
  } else if (name == "--adopt-timeout") {
    char* end = nullptr;
    o.adopt_timeout_ms = std::strtoull(value, &end, 10);
    if (end == value || *end != '\0') return -1;
  } else if (name == "--nofile") {
    char* end = nullptr;
    o.nofile_soft = std::strtoull(value, &end, 10);
    if (end == value || o.nofile_soft == 0) return -1;
    o.nofile_hard = 0;
    if (*end == ':') {
      const char* h = end + 1;
      o.nofile_hard = std::strtoull(h, &end, 10);
      if (end == h || o.nofile_hard < o.nofile_soft) return -1;
    }
    if (*end != '\0') return -1;
  } else {
    return 0;
  }
  return 1;
}

result<std::string> find_builtin() {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return make_error(ipc::errc::spawn, fmt::format("cannot read /proc/self/exe: {}", std::strerror(errno)));
  self[n] = '\0';
  std::string path = dirname_of(self) + "/" + SBSH_BUILTIN_RELPATH;
  if (::access(path.c_str(), R_OK) != 0)
    return make_error(ipc::errc::spawn, fmt::format("cannot read sbsh's bash builtin {}: {}; install sbsh completely",
                                                    path, std::strerror(errno)));
  return path;
}

std::string shell_script(const std::string& builtin) {
  // Job control puts every job of a command in a process group of its own; the SIGINT trap
  // makes a throw to the top level end a command instead of the shell (shell/sbsh_builtin.c).
  return fmt::format("enable -f {} __sbsh && set -m && trap : INT && '__sbsh serve'\n", ipc::shell_quote(builtin));
}

result<pid_t> spawn_serving_shell(const char* bash_path, const std::string& builtin, int channel, int early_err,
                                  std::span<const rlimit_spec> limits, const shell_confinement& confinement) {
  int script[2];
  if (::pipe2(script, O_CLOEXEC) != 0)
    return make_error(ipc::errc::spawn, fmt::format("pipe: {}", std::strerror(errno)));
  unique_fd script_r(script[0]), script_w(script[1]);
  std::string line = shell_script(builtin);
  if (::write(script_w.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    return make_error(ipc::errc::spawn, fmt::format("cannot write the shell's script: {}", std::strerror(errno)));
  script_w.reset();  // the builtin writes its later lines itself
  return spawn_shell(bash_path, {channel, script_r.get(), early_err}, limits, confinement);
}

namespace {

// Several lines of a program's stderr as one line of a report.
std::string trim_text(std::string_view text) {
  std::string out;
  for (char c : text) out += (c == '\n') ? ' ' : c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// The descriptors of the keepers message first on `channel` (sbshd's end), taken off it; none
// when another message comes first (a status: the command has ended), which stays for sbshd.
std::vector<unique_fd> take_keepers(int channel) {
  std::vector<unique_fd> fds;
  sbsh_status_msg m{};
  if (::recv(channel, &m, sizeof m, MSG_PEEK | MSG_DONTWAIT) != static_cast<ssize_t>(sizeof m) ||
      m.magic != SBSH_CHANNEL_MAGIC || m.type != SBSH_MSG_KEEPERS)
    return fds;
  iovec iov{&m, sizeof m};
  std::array<int, 2> got{};
  ipc::received r = ipc::recv_parts_with_fds(channel, {&iov, 1}, got, MSG_DONTWAIT);
  if (r.bytes <= 0) return fds;
  for (size_t i = 0; i < r.fds; ++i) fds.emplace_back(got[i]);
  return fds;
}

// The confinement `o` asks for, with what it holds: a Landlock ruleset of the system's rules,
// `extra` (bash, the builtin) and `o`'s, the cgroup's cgroup.procs and, for a confined
// session, the plan of its sandbox (sandbox.h: its view of the files from `cwd`, its user,
// its seccomp program: `compiled`, when given, else compiled here), on the heap so that the
// confinement's pointer to it survives a move.
struct held_confinement {
  shell_confinement confinement;
  unique_fd ruleset, cgroup_procs;
  std::unique_ptr<sandbox_plan> sandbox;
};
result<held_confinement> confinement_of(const options& o, const std::vector<confine::rule>& extra,
                                        const std::string& cwd, const std::vector<sock_filter>* compiled = nullptr) {
  held_confinement held;
  held.confinement.pid_ns = o.pid_ns;
  held.confinement.net_ns = o.net_ns;
  if (!o.rules.empty()) {
    std::vector<confine::rule> system = confine::system_rules();
    system.insert(system.end(), extra.begin(), extra.end());
    std::vector<confine::rule> rules = system;
    rules.insert(rules.end(), o.rules.begin(), o.rules.end());
    auto r = confine::build_ruleset(rules);
    if (!r) return r.err();
    held.ruleset = std::move(*r);
    held.confinement.ruleset = held.ruleset.get();
    auto plan = plan_sandbox(system, o.rules, cwd);
    if (!plan) return plan.err();
    held.sandbox = std::make_unique<sandbox_plan>(std::move(*plan));
    if (compiled != nullptr) {
      held.sandbox->seccomp = *compiled;
    } else {
      auto seccomp = seccomp_program();
      if (!seccomp) return seccomp.err();
      held.sandbox->seccomp = std::move(*seccomp);
    }
    held.sandbox->map_by_parent = ::geteuid() == 0;
    held.sandbox->uid = o.confine_uid;
    held.sandbox->gid = o.confine_gid;
    held.confinement.sandbox = held.sandbox.get();
  }
  if (!o.cgroup.empty()) {
    std::string procs = o.cgroup + "/cgroup.procs";
    held.cgroup_procs = unique_fd(::open(procs.c_str(), O_WRONLY | O_CLOEXEC));
    if (!held.cgroup_procs)
      return make_error(ipc::errc::spawn,
                        fmt::format("cannot open the session's cgroup {}: {}", procs, std::strerror(errno)));
    held.confinement.cgroup_procs = held.cgroup_procs.get();
  }
  return held;
}

class wrapper_loop {
 public:
  wrapper_loop(std::string session, options o) : session_(std::move(session)), opts_(std::move(o)) {}

  // `title`: a spare's argument memory (see run_spare), nullptr for a wrapper started for
  // its session.
  int run(char* title = nullptr, size_t title_size = 0, bool confined = false) {
    confined_spare_ = confined;
    int code = run_shell(title, title_size);
    // The link directory is sbshd's; an orphan's is nobody's but ours.
    if (!opts_.dir.empty()) {
      if (listen_) ::unlink((opts_.dir + "/" + kAdoptSocket).c_str());
      if (!ctl_.open()) remove_dir(opts_.dir);
      else ::rmdir(opts_.dir.c_str());
    }
    return code;
  }

 private:
  int run_shell(char* title, size_t title_size) {
    title_ = title;
    title_size_ = title_size;
    spare_shell_ = title != nullptr;
    sid_ = ::setsid();
    if (sid_ < 0) sid_ = ::getsid(0);
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGUSR1);
    ::sigprocmask(SIG_BLOCK, &mask, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    sigfd_ = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    ctl_ = ipc::channel(unique_fd(kControlFd), /*read_chunk=*/1024);  // one per session: keep it small
    ::fcntl(kControlFd, F_SETFD, FD_CLOEXEC);
    // sbshd's end of the shell channel, held always: sbshd closes its own while the session
    // is idle and asks for it back (lend_channel), and with adoption it is kept for the next
    // sbshd, so that the builtin reads no end-of-file and loses no status when this one goes.
    if (::fcntl(kChannelOwnerFd, F_SETFD, FD_CLOEXEC) == 0) channel_owner_ = unique_fd(kChannelOwnerFd);
    if (channel_owner_ && opts_.adopt_timeout_ms > 0 && !opts_.dir.empty()) {
      if (auto l = ipc::listen_in(opts_.dir, kAdoptSocket, 4)) listen_ = std::move(*l);
      else log_error(session_.c_str(), "no adoption by a later sbshd: " + l.err().message);
      struct stat st{};
      if (listen_ && ::stat(adopt_path().c_str(), &st) == 0) adopt_socket_ = {st.st_dev, st.st_ino};
    }
    cwd_ = current_dir();  // its buffer is not on the stack for as long as the loop runs

    unique_fd channel(kChannelFd);
    ::fcntl(kChannelFd, F_SETFD, FD_CLOEXEC);
    if (confined_spare_) {
      // Its bash starts once claimed (take_claim); until then it only waits.
      stage_bash(std::move(channel));
      return loop();
    }
    result<pid_t> pid = start_bash(channel);
    channel.reset();
    if (!pid) {
      log_error(session_.c_str(), pid.err().message);
      // No shell ran, so there is no exit status to report: only the reason.
      msg::shell_exited exited;
      exited.error = pid.err().message;
      send(ipc::encode(exited));
      return 1;
    }
    shell_ = *pid;
    shell_pidfd_ = unique_fd(static_cast<int>(::syscall(SYS_pidfd_open, shell_, 0)));
    started_at_ms_ = wall_ms();
    send(ipc::encode(msg::wrapper_ready{shell_, ::getpid()}));
    return loop();
  }

  // Starts bash on a script that loads the builtin, with stderr on a pipe of ours until the
  // builtin serves (what a start that fails prints: a missing or refused builtin, a bash that
  // is not bash).
  result<pid_t> start_bash(const unique_fd& channel) {
    auto builtin = find_builtin();
    if (!builtin) return builtin.err();
    int early[2];
    if (::pipe2(early, O_CLOEXEC) != 0)
      return make_error(ipc::errc::spawn, fmt::format("pipe: {}", std::strerror(errno)));
    unique_fd early_w(early[1]);
    early_err_ = unique_fd(early[0]);
    const char* bash = std::getenv("SBSH_BASH");
    bash_ = bash != nullptr && *bash != '\0' ? bash : "/bin/bash";
    ::unsetenv("SBSH_BASH");  // sbshd's choice, not part of the session's environment
    auto held = confinement_of(opts_,
                               {{bash_, confine::access::read_exec, false}, {*builtin, confine::access::read_only, false}},
                               cwd_);
    if (!held) return held.err();
    return spawn_serving_shell(bash_.c_str(), *builtin, channel.get(), early_w.get(), opts_.limits, held->confinement);
  }

  // A confined spare's stage (run_spare): what the shell will start with, and a child with the
  // system's part of its view. A stage that fails is logged; the claim then starts the shell
  // as a wrapper started for its session would.
  void stage_bash(unique_fd channel) {
    staged_channel_ = std::move(channel);
    const char* bash = std::getenv("SBSH_BASH");
    bash_ = bash != nullptr && *bash != '\0' ? bash : "/bin/bash";
    ::unsetenv("SBSH_BASH");
    auto builtin = find_builtin();
    if (!builtin) return log_error("(spare)", builtin.err().message);
    builtin_ = *builtin;
    int early[2], script[2];
    if (::pipe2(early, O_CLOEXEC) != 0) return log_error("(spare)", fmt::format("pipe: {}", std::strerror(errno)));
    early_err_ = unique_fd(early[0]);
    staged_early_w_ = unique_fd(early[1]);
    if (::pipe2(script, O_CLOEXEC) != 0) return log_error("(spare)", fmt::format("pipe: {}", std::strerror(errno)));
    staged_script_ = unique_fd(script[0]);
    unique_fd script_w(script[1]);
    std::string line = shell_script(builtin_);
    if (::write(script_w.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()))
      return log_error("(spare)", fmt::format("cannot write the shell's script: {}", std::strerror(errno)));
    std::vector<confine::rule> system = confine::system_rules();
    system.insert(system.end(),
                  {{bash_, confine::access::read_exec, false}, {builtin_, confine::access::read_only, false}});
    auto plan = plan_sandbox(system, {}, "/");
    if (!plan) return log_error("(spare)", plan.err().message);
    auto seccomp = seccomp_program();
    if (!seccomp) return log_error("(spare)", seccomp.err().message);
    staged_plan_ = std::make_unique<sandbox_plan>(std::move(*plan));
    staged_plan_->seccomp = std::move(*seccomp);
    staged_plan_->map_by_parent = ::geteuid() == 0;
    staged_plan_->uid = opts_.confine_uid;
    staged_plan_->gid = opts_.confine_gid;
    auto staged =
        staged_shell::start(bash_.c_str(), {staged_channel_.get(), staged_script_.get(), staged_early_w_.get()},
                            *staged_plan_);
    if (!staged) return log_error("(spare)", staged.err().message);
    staged_ = std::move(*staged);
  }

  // A confined spare's claim: the options and environment the session's wrapper would have
  // been started with. Its bash starts now, from the stage when it fits, else anew.
  result<pid_t> start_claimed(const ipc::str_list& args, const ipc::str_list& env) {
    if (args.size() % 2 != 0) return make_error(ipc::errc::invalid, "a claim's options come in pairs");
    for (size_t i = 0; i < args.size(); i += 2) {
      std::string error, value(args[i + 1]);
      // Where it listens for a later sbshd was set when it started.
      if (args[i] == "--dir" || args[i] == "--adopt-timeout")
        return make_error(ipc::errc::invalid, fmt::format("a claim may not change {}", args[i]));
      if (set_option(args[i], value.c_str(), opts_, error) != 1)
        return make_error(ipc::errc::invalid,
                          fmt::format("a claim's option {} {} is not one a session's wrapper takes{}{}", args[i], value,
                                      error.empty() ? "" : ": ", error));
    }
    if (opts_.rules.empty())
      return make_error(ipc::errc::invalid,
                        "a confined spare serves only a confined session (the claim gave no --rule)");
    // The session's environment, as a wrapper started for it would hold it; sbshd's choice of
    // bash was the spare's.
    env_store_.clear();
    for (std::string_view e : env)
      if (!e.starts_with("SBSH_BASH=")) env_store_.emplace_back(e);
    env_ptrs_.clear();
    for (auto& e : env_store_) env_ptrs_.push_back(e.data());
    env_ptrs_.push_back(nullptr);
    environ = env_ptrs_.data();
    if (builtin_.empty()) {
      auto builtin = find_builtin();
      if (!builtin) return builtin.err();
      builtin_ = *builtin;
    }
    // The stage's seccomp program, compiled as the wrapper of a confined session would.
    auto held =
        confinement_of(opts_,
                       {{bash_, confine::access::read_exec, false}, {builtin_, confine::access::read_only, false}},
                       cwd_, staged_plan_ ? &staged_plan_->seccomp : nullptr);
    if (!held) return held.err();
    bool fits = staged_ && held->sandbox && opts_.limits.empty() && opts_.pid_ns && opts_.cgroup.empty() &&
                staged_.fits(*held->sandbox);
    if (fits) {
      auto pid = staged_.finish(*held->sandbox, held->ruleset.get(), opts_.net_ns, env_store_);
      if (pid) {
        staged_script_.reset();
        staged_early_w_.reset();
        staged_channel_.reset();
        return pid;
      }
      log_error(session_.c_str(), fmt::format("the staged shell failed ({}); starting one anew", pid.err().message));
    }
    staged_ = staged_shell();  // ends the stage's child
    staged_script_.reset();
    if (!staged_early_w_) {
      int early[2];
      if (::pipe2(early, O_CLOEXEC) != 0)
        return make_error(ipc::errc::spawn, fmt::format("pipe: {}", std::strerror(errno)));
      early_err_ = unique_fd(early[0]);
      staged_early_w_ = unique_fd(early[1]);
    }
    auto pid = spawn_serving_shell(bash_.c_str(), builtin_, staged_channel_.get(), staged_early_w_.get(), opts_.limits,
                                   held->confinement);
    staged_early_w_.reset();
    staged_channel_.reset();
    return pid;
  }

  // What the shell wrote on its stderr before the builtin took over: kept for the report of a
  // failed start.
  void read_early_err() {
    char buf[1024];
    ssize_t n = ::read(early_err_.get(), buf, sizeof buf);
    if (n > 0) {
      early_text_.append(buf, std::min(static_cast<size_t>(n), kMaxEarlyText - std::min(kMaxEarlyText, early_text_.size())));
      return;
    }
    if (n < 0 && errno == EINTR) return;
    early_err_.reset();
  }

  // No sbshd is left to read a running command's output: the shell lends the pipes it holds
  // for it (SBSH_KEEP_*) when it gets SBSH_LEND_SIGNAL, in a keepers message on the channel,
  // whose sbshd end the wrapper holds now, and the wrapper reads them into nothing, so the
  // command runs on instead of meeting a pipe without a reader or filling one nobody empties.
  // (The shell is undumpable: the wrapper cannot take them with pidfd_getfd.)
  void start_draining() {
    if (!shell_pidfd_ || !channel_owner_) return;
    if (::syscall(SYS_pidfd_send_signal, shell_pidfd_.get(), SBSH_LEND_SIGNAL, nullptr, 0) != 0) return;
    // The shell answers at once while a command runs, and not at all while none does.
    pollfd p{channel_owner_.get(), POLLIN, 0};
    if (::poll(&p, 1, 500) != 1) return;
    for (unique_fd& fd : take_keepers(channel_owner_.get())) {
      struct stat st{};
      // A pipe's read end, or a terminal's master (exec --tty).
      if (::fstat(fd.get(), &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)))
        draining_.push_back(std::move(fd));
    }
  }

  // A lease of the shell (docs/architecture.md, "The direct path") lasts only while sbshd
  // reads its records and enforces its commands' timeouts: with sbshd gone, the wrapper asks
  // the shell to end it, as sbshd would (lease_end on the channel, whose sbshd end it holds),
  // so that nothing runs in the shell unwatched until the next sbshd adopts it. The shell's
  // answer, if it held one, waits on the channel for that sbshd, which drops it.
  void end_lease() {
    if (!channel_owner_) return;
    sbsh_run_header h{};
    h.magic = SBSH_CHANNEL_MAGIC;
    h.version = SBSH_CHANNEL_VERSION;
    h.type = SBSH_MSG_LEASE_END;
    while (::send(channel_owner_.get(), &h, sizeof h, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
  }

  // Reads what a drained pipe holds; drops it once no writer is left. splice(2) with
  // SPLICE_F_NONBLOCK does not block and leaves the descriptor's own flags alone (the pipe's
  // other ends may belong to a client that reads it blocking). A terminal's master cannot be
  // spliced: it is read (sbshd made it non-blocking), and says EIO once its other end is
  // closed everywhere.
  void drain(size_t i, short revents) {
    if (!devnull_) devnull_ = unique_fd(::open("/dev/null", O_WRONLY | O_CLOEXEC));
    ssize_t n = 0;
    bool gone = false;
    if ((revents & POLLIN) != 0) {
      n = ::splice(draining_[i].get(), nullptr, devnull_.get(), nullptr, 1 << 20, SPLICE_F_NONBLOCK);
      if (n < 0 && errno == EINVAL) {
        char buf[16384];
        n = ::read(draining_[i].get(), buf, sizeof buf);
        gone = n < 0 && errno == EIO;
      }
    }
    if (gone || (n == 0 && (revents & (POLLHUP | POLLERR | POLLNVAL)) != 0))
      draining_.erase(draining_.begin() + static_cast<long>(i));
  }

  // A spare's claim: it now serves this session. sbshd has told its bash to enter the
  // session's directory; the wrapper does too, as one started for the session would be.
  // Returns false when a confined spare's shell could not start (reported to sbshd).
  bool take_claim(const ipc::message& m) {
    auto claim = ipc::decode<msg::claim>(m);
    if (!claim) return true;
    session_ = std::string(claim->session);
    spare_shell_ = false;
    if (title_size_ > 0) {
      std::memset(title_, 0, title_size_);
      std::memcpy(title_, session_.data(), std::min(session_.size(), title_size_ - 1));
    }
    std::string dir(claim->cwd);
    if (::chdir(dir.c_str()) != 0)
      log_error(session_.c_str(), fmt::format("cannot enter the session's directory {}: {}", dir, std::strerror(errno)));
    cwd_ = dir;
    if (!confined_spare_) return true;
    confined_spare_ = false;
    result<pid_t> pid = start_claimed(claim->args, claim->env);
    if (!pid) {
      log_error(session_.c_str(), pid.err().message);
      msg::shell_exited exited;
      exited.error = pid.err().message;
      send(ipc::encode(exited));
      return false;
    }
    shell_ = *pid;
    shell_pidfd_ = unique_fd(static_cast<int>(::syscall(SYS_pidfd_open, shell_, 0)));
    started_at_ms_ = wall_ms();
    send(ipc::encode(msg::wrapper_ready{shell_, ::getpid()}));
    return true;
  }

  // A new sbshd on the adoption socket: it takes the session over. Any sbshd of this user
  // may (the socket's directory is theirs alone), from this PID namespace: a confined
  // session's process could otherwise take over this shell, or another session's, unconfined.
  // The first frame must be `adopt`.
  void take_adoption() {
    unique_fd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd) return;
    auto peer = ipc::peer_of(fd.get());
    if (!peer || peer->uid != ::getuid() || !procs::same_pid_namespace(peer->pid)) return;
    ipc::set_io_timeout(fd.get(), 1);  // a peer that says nothing does not stall the session
    ipc::channel ch(std::move(fd), 1024);
    auto env = ch.recv();
    if (!env || env->msg.type() != msg_type::adopt) return;
    // The last sbshd may have gone so recently that its end was not read yet: what it sent
    // first, and its lease ends as it would have (orphaned()).
    if (ctl_.open()) {
      sbshd_gone();
      if (orphan_deadline_ms_ == 0) end_lease();
    }
    msg::adopted a{spare_shell_ ? std::string_view() : std::string_view(session_),
                   cwd_,
                   shell_,
                   ::getpid(),
                   started_at_ms_,
                   std::vector<int64_t>(spare_.begin(), spare_.end()),
                   held_.size(),
                   initialized_,
                   1,
                   generation_};
    int fds[] = {channel_owner_.get()};
    if (!ch.send(ipc::encode(a, env->msg.id()), fds)) return;
    // The background processes' pipes, as sbshd lent them. The wrapper keeps its own
    // copies: if this sbshd goes away too, the next one needs them.
    for (const auto& [pgid, held] : held_) {
      std::vector<int> raw;
      for (const auto& fd : held.fds) raw.push_back(fd.get());
      if (!ch.send(ipc::encode(msg::protect_group{pgid, held.proc, held.streams, held.fds.size()}), raw)) return;
    }
    ipc::set_io_timeout(ch.fd(), 0);
    auto by = ipc::decode<msg::adopt>(env->msg);
    log_error(session_.c_str(), fmt::format("adopted by sbshd (pid {})", by ? by->pid : 0));
    ctl_ = std::move(ch);  // whatever was left of the old control socket closes
    orphan_deadline_ms_ = 0;
  }

  std::string adopt_path() const { return opts_.dir + "/" + kAdoptSocket; }

  // Whether a later sbshd can still find the adoption socket: not when its file, or the
  // directory holding it, was removed or replaced.
  bool adoptable() const {
    struct stat st{};
    return listen_ && ::stat(adopt_path().c_str(), &st) == 0 && st.st_dev == adopt_socket_.first &&
           st.st_ino == adopt_socket_.second;
  }

  // sbshd went away without ending the session: wait for the next one, or end.
  bool orphaned() {
    if (!listen_ || spare_shell_) return false;  // a spare holds no state worth keeping
    // A shell that never finished its session's set-up is refused by every sbshd: nobody
    // will ever adopt it.
    if (!initialized_) {
      log_error(session_.c_str(), "sbshd went away before the shell finished starting; ending the session");
      return false;
    }
    orphan_deadline_ms_ = mono_ms() + static_cast<int64_t>(opts_.adopt_timeout_ms);
    start_draining();
    end_lease();
    log_error(session_.c_str(), fmt::format("sbshd went away; the session waits {} s for the next sbshd to adopt it",
                                            opts_.adopt_timeout_ms / 1000));
    return true;
  }

  void send(const std::string& frame) {
    if (ctl_.open() && !ctl_.send(frame)) sbshd_gone();
  }

  // A send failed, or a new sbshd adopts the session: the last sbshd is gone. What it sent
  // before it went is still to be read, and handled before the control socket is closed: the
  // pipes of a background process it lent (protect_group) may be among it, and the next
  // sbshd needs them.
  void sbshd_gone() {
    if (reading_what_is_left_) return;  // a send that failed while it is read
    reading_what_is_left_ = true;
    for (;;) {
      pollfd p{ctl_.fd(), POLLIN, 0};
      if (!ctl_.open() || (!ctl_.buffered() && ::poll(&p, 1, 0) != 1) || !on_control()) break;
    }
    reading_what_is_left_ = false;
    ctl_.close();
  }

  int loop() {
    for (;;) {
      if (!ctl_.open()) {
        if (const char* why = why_end_orphan()) {
          if (*why != '\0') log_error(session_.c_str(), fmt::format("{}; ending it", why));
          end_session(session_.c_str(), sid_, {});
          return 0;
        }
      }
      // Fixed slots first, then one per drained pipe.
      std::vector<pollfd> fds = {{sigfd_, POLLIN, 0},
                                 {ctl_.open() ? ctl_.fd() : -1, POLLIN, 0},
                                 {listen_.get(), POLLIN, 0},
                                 {early_err_.get(), POLLIN, 0}};
      for (const auto& d : draining_) fds.push_back({d.get(), POLLIN, 0});
      int timeout = -1;
      // While orphaned: wake at the deadline, or at the next look at the adoption socket.
      if (orphan_deadline_ms_ != 0)
        timeout = static_cast<int>(
            std::clamp<int64_t>(std::min(orphan_deadline_ms_, next_adopt_check_ms_) - mono_ms(), 0, kAdoptCheckMs));
      // Frames already read but not yet handled are not seen by poll().
      bool wait = !(ctl_.open() && ctl_.buffered());
      // Before waiting after work other than a health check: give back what the work used.
      if (wait && std::exchange(trim_due_, false)) release_idle_memory();
      int n = wait ? ::poll(fds.data(), fds.size(), timeout) : 0;
      if (n < 0 && errno != EINTR) return 1;
      if (n < 0) continue;
      trim_due_ = trim_due_ || fds[0].revents != 0 || fds[2].revents != 0 || fds[3].revents != 0 || fds.size() > 4;
      if (fds[3].revents != 0) read_early_err();
      for (size_t i = fds.size(); i-- > 4;)
        if (fds[i].revents != 0) drain(i - 4, fds[i].revents);
      if (fds[0].revents != 0) {
        if (int code = on_signals(); code >= 0) return code;
      }
      if (fds[2].revents != 0) take_adoption();
      if (ctl_.open() && (fds[1].revents != 0 || ctl_.buffered())) {
        if (!on_control()) ctl_.close();  // sbshd is gone: seen at the top of the loop
        if (claim_failed_) return 1;
      }
    }
  }

  // With the control socket closed, sbshd is gone: whether a read met its end or a write
  // failed (sbshd died before this wrapper's report or answer reached it: a spare started as
  // it went, the answer to its last ping). Either way the wrapper comes here, on every turn
  // of its loop until it ends or is adopted. Returns why the session ends now ("" when said
  // already), or nullptr while it waits for adoption.
  const char* why_end_orphan() {
    if (orphan_deadline_ms_ == 0) {
      // sbshd is gone and no other may take the session: nobody can use it any more, nor its
      // background processes.
      if (!orphaned()) return "";
      next_adopt_check_ms_ = mono_ms();
    }
    int64_t now = mono_ms();
    if (now >= orphan_deadline_ms_) return "no sbshd adopted the session in time";
    // Every few seconds, not on every wake (a running command's output wakes it often).
    if (now >= next_adopt_check_ms_) {
      next_adopt_check_ms_ = now + kAdoptCheckMs;
      if (!adoptable()) return "its adoption socket was removed";
    }
    return nullptr;
  }

  // Returns an exit code when the wrapper should stop, -1 to go on.
  int on_signals() {
    signalfd_siginfo si;
    bool stop = false, restart = false;
    while (::read(sigfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      if (si.ssi_signo == SIGUSR1) restart = true;
      else if (si.ssi_signo != SIGCHLD) stop = true;
    }
    if (stop) {
      // sbshd ends the session (rm, shutdown) or refuses to adopt it: everything it started
      // ends, background processes included.
      end_descendants(session_.c_str(), {});
      return 0;
    }
    if (restart) {
      // sbshd replaces the shell: it and its commands' processes end; background processes
      // outlive it, as they outlive any restart of their session's shell.
      end_descendants(session_.c_str(), spare_);
      return 0;
    }
    int st;
    pid_t p;
    while ((p = ::waitpid(-1, &st, WNOHANG)) > 0) {
      if (p != shell_) continue;  // an orphan of the session, adopted and reaped
      while (early_err_) read_early_err();  // the shell is gone: so are its writers
      msg::shell_exited exited;
      if (WIFSIGNALED(st)) exited.signal = WTERMSIG(st);
      else exited.exit_code = WEXITSTATUS(st);
      std::string said;
      // What a shell that never served printed: bash's words for a builtin it could not load,
      // or another shell's for options it does not know. Either way, say what sbsh needs.
      if (!early_text_.empty()) {
        said = fmt::format("{} said: {} (sbsh needs a GNU bash that can load its builtin with 'enable -f', "
                                   "of the version sbsh was built for; SBSH_BASH names the bash to run)",
                                   bash_, trim_text(early_text_));
        exited.error = said;
      }
      send(ipc::encode(exited));
      // Background processes outlive the shell only for an sbshd that goes on with the session.
      end_session(session_.c_str(), sid_, ctl_.open() ? spare_ : std::set<pid_t>());
      return 0;
    }
    return -1;
  }

  bool on_control() {
    auto env = ctl_.recv();
    if (!env) return false;
    const auto& m = env->msg;
    if (m.type() != msg_type::ping) trim_due_ = true;
    switch (m.type()) {
      case msg_type::signal_command: {
        auto req = ipc::decode<msg::signal_command>(m);
        if (!req || req->signal == 0) return true;
        procs::since_mark mark;
        mark.last_pid = static_cast<pid_t>(req->since_pid);
        mark.start_ticks = req->since_ticks;
        int s = static_cast<int>(req->signal);
        bool interrupt = req->interrupt;
        // Interrupting the shell abandons the rest of the command's text (SIGINT: see
        // shell/sbsh_builtin.c). It comes before the signal to the command's processes: a
        // shell waiting for one of them then throws as soon as that one has ended, with no
        // moment in which it could start the text's next command.
        if (interrupt) ::kill(shell_, SIGINT);
        size_t count = (s > 0 && s < NSIG) ? procs::signal_command(shell_, sid_, mark, s) : 0;
        // Ctrl-C on a command with no process of its own (a loop of builtins) is the shell's,
        // as a terminal would deliver it.
        if (s == SIGINT && count == 0 && !interrupt) ::kill(shell_, SIGINT);
        send(ipc::encode(msg::signal_result{count}, m.id()));
        return true;
      }
      case msg_type::protect_group:
      case msg_type::unprotect_group: {
        // unprotect_group's fields are protect_group's first.
        auto req = ipc::decode<msg::protect_group>(m);
        if (!req || req->pgid <= 1) return true;
        auto pgid = static_cast<pid_t>(req->pgid);
        held_.erase(pgid);
        if (m.type() == msg_type::unprotect_group) {
          spare_.erase(pgid);
          return true;
        }
        spare_.insert(pgid);
        if (!env->fds.empty() && req->proc != 0 && req->streams.size() == env->fds.size())
          held_[pgid] = held_pipes{req->proc, std::string(req->streams), std::move(env->fds)};
        return true;
      }
      case msg_type::claim:
        if (!take_claim(m)) claim_failed_ = true;
        return true;
      case msg_type::initialized: {
        initialized_ = true;
        if (auto init = ipc::decode<msg::initialized>(m); init && init->generation != 0) generation_ = init->generation;
        return true;
      }
      case msg_type::ping: {
        send(ipc::encode(msg::pong{}, m.id()));
        return true;
      }
      case msg_type::lend_channel: {
        // A copy: the wrapper keeps its own, for the next time and for a later sbshd.
        if (!channel_owner_) {
          send(ipc::encode(msg::channel_lent{0}, m.id()));
          return true;
        }
        int fds[] = {channel_owner_.get()};
        if (!ctl_.send(ipc::encode(msg::channel_lent{1}, m.id()), fds)) sbshd_gone();
        return true;
      }
      default:
        return true;  // unknown messages are ignored, as everywhere in the protocol
    }
  }

  std::string session_;
  options opts_;
  std::string cwd_;
  bool spare_shell_ = false;     // not claimed yet
  bool confined_spare_ = false;  // a confined spare not claimed yet: its shell is only staged
  bool trim_due_ = true;  // work other than a health check was done since release_idle_memory
  bool claim_failed_ = false;    // a confined spare's shell could not start once claimed
  bool reading_what_is_left_ = false;  // sbshd_gone() reads the last sbshd's frames
  // A confined spare's stage and what its shell will start with (stage_bash).
  staged_shell staged_;
  std::unique_ptr<sandbox_plan> staged_plan_;
  unique_fd staged_channel_, staged_script_, staged_early_w_;
  std::string builtin_;
  std::vector<std::string> env_store_;  // a confined spare's session's environment (environ)
  std::vector<char*> env_ptrs_;
  bool initialized_ = false;  // sbshd said the shell is set up as its session defines
  uint64_t generation_ = 0;   // which shell of its session this is, as sbshd numbered it
  int64_t started_at_ms_ = 0;
  unique_fd channel_owner_, listen_;
  std::pair<dev_t, ino_t> adopt_socket_{};  // the adoption socket's file, as created
  unique_fd shell_pidfd_;
  std::string bash_;               // the bash started
  unique_fd early_err_;            // the shell's stderr until its builtin serves
  std::string early_text_;
  static constexpr size_t kMaxEarlyText = 4096;
  std::vector<unique_fd> draining_;  // a running command's pipes, read into nothing while orphaned
  unique_fd devnull_;
  int64_t orphan_deadline_ms_ = 0;  // while orphaned: when it gives up (steady clock)
  int64_t next_adopt_check_ms_ = 0;  // while orphaned: when it next looks at its adoption socket
  // How often an orphan looks whether its adoption socket is still there: a stat(), cheap
  // enough for thousands of orphans at once, where watching it would take an inotify
  // instance each (a few hundred per user).
  static constexpr int64_t kAdoptCheckMs = 5000;
  char* title_ = nullptr;  // a spare's argument memory, where ps reads its session's name
  size_t title_size_ = 0;
  ipc::channel ctl_;
  int sigfd_ = -1;
  pid_t sid_ = 0;
  pid_t shell_ = 0;
  std::set<pid_t> spare_;  // background processes' groups: they outlive the shell
  // Their pipes (sbshd's lent_pipes), held for the next sbshd and never read here.
  struct held_pipes {
    uint64_t proc;
    std::string streams;
    std::vector<unique_fd> fds;
  };
  std::map<pid_t, held_pipes> held_;
};

}  // namespace

int run(const char* session_name, const options& o) { return wrapper_loop(session_name, o).run(); }

int run_spare(char* title, size_t title_size, const options& o, bool confined) {
  return wrapper_loop("(spare)", o).run(title, title_size, confined);
}

namespace {

// The setup's bash, once started, and whether SIGTERM came (sbshd stops the setup).
volatile sig_atomic_t setup_stopped = 0;
volatile sig_atomic_t setup_bash = 0;  // a pid_t, read by the handler

// SIGTERM: bash is killed, and this process ends as usual once it has reaped it, which is
// once its PID namespace is empty, so that sbshd, waiting for this process, knows nothing of
// the setup is left. Only kill(), which is async-signal-safe.
void stop_setup(int) {
  setup_stopped = 1;
  if (setup_bash > 0) ::kill(setup_bash, SIGKILL);
}

}  // namespace

int run_setup(const char* text, const options& o) {
  // This process dies with sbshd, bash (the init of its PID namespace) with this process
  // (spawn_shell), and everything the setup started with bash: nothing of a setup outlives
  // sbshd. As a child subreaper it also gets what escapes bash where no PID namespace can
  // be made.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  struct sigaction stop {};
  stop.sa_handler = stop_setup;  // without SA_RESTART: waitpid() below returns EINTR
  sigemptyset(&stop.sa_mask);
  ::sigaction(SIGTERM, &stop, nullptr);
  const char* given = std::getenv("SBSH_BASH");
  std::string bash = given != nullptr && *given != '\0' ? given : "/bin/bash";
  ::unsetenv("SBSH_BASH");  // sbshd's choice, not part of the setup's environment
  char here[4096];
  auto held = confinement_of(o, {{bash, confine::access::read_exec, false}},
                             ::getcwd(here, sizeof here) != nullptr ? here : "/");
  if (!held) {
    std::fprintf(stderr, "sbsh: cannot confine the setup as its session is: %s\n", held.err().message.c_str());
    return 127;
  }
  std::string script = text;
  char arg0[] = "bash", arg1[] = "-c", arg3[] = "sbsh-setup";
  char* argv[] = {arg0, arg1, script.data(), arg3, nullptr};
  shell_fds fds;
  fds.early_err = STDERR_FILENO;
  fds.out = STDOUT_FILENO;
  auto pid = spawn_shell(bash.c_str(), fds, o.limits, held->confinement, argv);
  if (!pid && o.rules.empty() && !o.net_ns && held->confinement.pid_ns) {
    // An unconfined setup where this user may make no namespace: the subreaper ends what it
    // leaves, unless this process is killed first.
    held->confinement.pid_ns = false;
    pid = spawn_shell(bash.c_str(), fds, o.limits, held->confinement, argv);
  }
  if (!pid) {
    std::fprintf(stderr, "sbsh: cannot start the setup: %s\n", pid.err().message.c_str());
    return 127;
  }
  setup_bash = *pid;
  if (setup_stopped != 0) ::kill(*pid, SIGKILL);  // SIGTERM came before bash was known
  int st = 0;
  for (;;) {
    pid_t p = ::waitpid(-1, &st, 0);
    if (p == *pid) break;
    if (p < 0 && errno != EINTR) return 127;
  }
  end_descendants("setup", {});
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  // The same end as bash's, so that sbshd reports the signal; without a core dump.
  int sig = WTERMSIG(st);
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
  return 128 + sig;
}

}  // namespace sbsh::wrapper
