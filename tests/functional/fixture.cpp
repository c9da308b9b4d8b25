// The functional-test fixture; see fixture.h.
#include "fixture.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "ipc/fd.h"

namespace sbsh::test {

std::string bin(const std::string& name) { return std::string(SBSH_BIN_DIR) + "/" + name; }
std::string helper() { return bin("sbsh-test-helper"); }

std::string proc_file(pid_t pid, const std::string& name) {
  return read_file("/proc/" + std::to_string(pid) + "/" + name);
}

std::optional<proc_stat> stat_of(pid_t pid) {
  std::string line = proc_file(pid, "stat");  // "pid (comm) S ppid ...": comm may hold ')'
  auto lp = line.find('('), rp = line.rfind(')');
  if (lp == std::string::npos || rp == std::string::npos || rp < lp || rp + 4 >= line.size()) return std::nullopt;
  return proc_stat{line.substr(lp + 1, rp - lp - 1), line[rp + 2],
                   static_cast<pid_t>(std::atol(line.c_str() + rp + 4))};
}

long status_kb(pid_t pid, const std::string& key) {
  std::istringstream f(proc_file(pid, "status"));
  std::string k;
  long v = 0;
  while (f >> k)
    if (k == key + ":") return f >> v ? v : -1;
  return -1;
}

bool pid_alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  auto st = stat_of(pid);
  return st && st->state != 'Z';
}

size_t open_fds(pid_t pid) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

std::string cmdline_of(pid_t pid) {
  std::string line = proc_file(pid, "cmdline");
  std::replace(line.begin(), line.end(), '\0', ' ');
  if (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

pid_t parent_of(pid_t pid) {
  auto st = stat_of(pid);
  return st ? st->ppid : 0;
}

std::vector<pid_t> all_pids() {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") == std::string::npos) out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

std::vector<pid_t> fork_servers_of(pid_t daemon) {
  static const std::string kServer("sbsh-wrapper\0--fork-server\0", 27);
  std::vector<pid_t> out;
  for (pid_t pid : all_pids()) {
    auto st = stat_of(pid);
    if (st && st->state != 'Z' && st->ppid == daemon && proc_file(pid, "cmdline") == kServer) out.push_back(pid);
  }
  return out;
}

std::vector<pid_t> processes_where(const std::function<bool(const std::string&)>& match) {
  std::vector<pid_t> out;
  for (pid_t pid : all_pids()) {
    if (pid == ::getpid()) continue;
    std::string line = cmdline_of(pid);
    if (!line.empty() && match(line) && pid_alive(pid)) out.push_back(pid);
  }
  return out;
}

std::vector<pid_t> processes_with(const std::string& needle) {
  return processes_where([&](const std::string& line) { return line.find(needle) != std::string::npos; });
}

std::vector<pid_t> processes_running(const std::string& cmdline) {
  return processes_where([&](const std::string& line) { return line == cmdline; });
}

bool has_child(pid_t parent, const std::string& comm) { return child_pid(parent, comm) > 0; }

pid_t child_pid(pid_t parent, const std::string& comm) {
  for (pid_t pid : all_pids()) {
    auto st = stat_of(pid);
    if (st && st->comm == comm && st->state != 'Z' && st->ppid == parent) return pid;
  }
  return 0;
}

bool wait_until(const std::function<bool()>& cond, std::chrono::milliseconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::vector<std::string> commands_in_help(const std::string& help) {
  std::vector<std::string> names;
  size_t at = help.find("\nCommands:\n");
  for (at = at == std::string::npos ? help.size() : at + 11; at < help.size() && help[at] != '\n';) {
    size_t end = help.find('\n', at);
    if (end == std::string::npos) end = help.size();
    if (help.compare(at, 2, "  ") == 0 && help[at + 2] != ' ')  // not a summary's second line
      names.push_back(help.substr(at + 2, help.find(' ', at + 2) - at - 2));
    at = end + 1;
  }
  return names;
}

std::vector<char*> exec_argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  out.reserve(argv.size() + 1);
  for (const auto& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string read_file(const std::string& path) {
  // read(2), not a stream: a /proc file whose process ends while it is read makes libstdc++
  // throw.
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  return fd ? read_all(fd.get()) : std::string();
}

std::string read_all(int fd) {
  std::string out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) out.reserve(static_cast<size_t>(st.st_size));
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

int raw_connect(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  // Only against a hang, never a measure: under the sanitizers sbshd takes 4.5 s here to
  // refuse a 16 MiB frame of nils (memory_test), a fraction of a second in a normal build.
  timeval tv{60, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

namespace {

// While run() feeds a child's stdin, a child that exits without reading it all must not
// kill the test with SIGPIPE (the write fails with EPIPE instead). Blocked in this thread
// only, after the child is spawned (it must start with the usual mask), and a SIGPIPE that
// became pending is consumed before the mask is restored.
class sigpipe_blocked {
 public:
  sigpipe_blocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~sigpipe_blocked() {
    timespec zero{};
    while (sigtimedwait(&pipe_, nullptr, &zero) == SIGPIPE) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  sigpipe_blocked(const sigpipe_blocked&) = delete;
  sigpipe_blocked& operator=(const sigpipe_blocked&) = delete;

 private:
  sigset_t pipe_{}, old_{};
};

}  // namespace

run_result run(const std::vector<std::string>& argv, const std::string* stdin_data, std::chrono::seconds limit) {
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) std::abort();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (stdin_data != nullptr) posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  else posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  auto args = exec_argv(argv);
  pid_t pid;
  run_result r;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    r.err = std::string("spawn failed: ") + std::strerror(rc);
    ::close(in[1]);
    ::close(out[0]);
    ::close(err[0]);
    return r;
  }
  sigpipe_blocked no_sigpipe;
  size_t in_off = 0;
  int in_fd = in[1];
  if (stdin_data == nullptr || stdin_data->empty()) {
    ::close(in_fd);
    in_fd = -1;
  } else {
    ::fcntl(in_fd, F_SETFL, O_NONBLOCK);
  }
  auto deadline = std::chrono::steady_clock::now() + limit;
  int open_fds = 2;
  while (open_fds > 0) {
    pollfd pf[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {in_fd, POLLOUT, 0}};
    int n = in_fd >= 0 ? 3 : 2;
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    if (left <= 0) {
      ::kill(pid, SIGKILL);
      r.err += "\n[test: timed out]";
      break;
    }
    ::poll(pf, static_cast<nfds_t>(n), left);
    char buf[65536];
    for (int i = 0; i < 2; ++i) {
      if (pf[i].fd < 0 || pf[i].revents == 0) continue;
      ssize_t k = ::read(pf[i].fd, buf, sizeof buf);
      if (k > 0) (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(k));
      else {
        ::close(pf[i].fd);
        (i == 0 ? out[0] : err[0]) = -1;
        --open_fds;
      }
    }
    if (in_fd >= 0 && pf[2].revents != 0) {
      ssize_t w = ::write(in_fd, stdin_data->data() + in_off, stdin_data->size() - in_off);
      if (w > 0) in_off += static_cast<size_t>(w);
      if (w < 0 || in_off == stdin_data->size()) {
        ::close(in_fd);
        in_fd = -1;
      }
    }
  }
  if (in_fd >= 0) ::close(in_fd);
  for (int fd : {out[0], err[0]})
    if (fd >= 0) ::close(fd);
  int st = 0;
  ::waitpid(pid, &st, 0);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

void daemon_test::SetUp() {
  char tmpl[] = "/tmp/sbsh-test.XXXXXX";
  dir = ::mkdtemp(tmpl);
  ::mkdir((dir + "/run").c_str(), 0700);
  ::mkdir((dir + "/home").c_str(), 0700);
  ::mkdir((dir + "/tmp").c_str(), 0700);
  state = dir + "/state";
  sock = dir + "/run/sbsh/sbshd.sock";
  ::setenv("XDG_RUNTIME_DIR", (dir + "/run").c_str(), 1);
  ::setenv("HOME", (dir + "/home").c_str(), 1);
  ::setenv("TMPDIR", (dir + "/tmp").c_str(), 1);
  ::setenv("SBSH_STATE_DIR", state.c_str(), 1);
  ::setenv("SBSH_SOCKET", sock.c_str(), 1);
  ::unsetenv("SBSH_NO_AUTOSTART");
  if (start_in_setup) start_daemon();
}

void daemon_test::start_daemon() {
  std::vector<std::string> own{bin("sbshd"), "--socket", sock, "--state-dir", state, "--foreground", "--log-level", daemon_log_level};
  std::vector<std::string> argv = daemon_prefix;
  argv.insert(argv.end(), own.begin(), own.end());
  argv.insert(argv.end(), daemon_args.begin(), daemon_args.end());
  auto args = exec_argv(argv);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::string log = dir + "/sbshd.log";
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  ASSERT_EQ(posix_spawn(&daemon_pid, args[0], &fa, nullptr, args.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  bool exited = false;
  ASSERT_TRUE(wait_until(
      [&] {
        int st = 0;
        if (::waitpid(daemon_pid, &st, WNOHANG) == daemon_pid) return exited = true;
        client::connect_options o;
        o.socket_path = sock;
        o.autostart = false;
        o.start_timeout = std::chrono::seconds(2);  // a passed socket takes connections at once
        return client::connection::connect(o).ok();
      },
      std::chrono::seconds(20)))
      << "sbshd did not come up";
  if (exited) {
    daemon_pid = -1;
    std::ifstream f(log);
    FAIL() << "sbshd exited at start:\n" << std::string(std::istreambuf_iterator<char>(f), {});
  }
}

void daemon_test::stop_daemon() {
  if (daemon_pid <= 0) return;
  run({bin("sbsh"), "--socket", sock, "shutdown"});
  int st = 0;
  bool gone = wait_until([&] { return ::waitpid(daemon_pid, &st, WNOHANG) == daemon_pid; }, std::chrono::seconds(20));
  if (!gone) {
    ::kill(daemon_pid, SIGKILL);
    ::waitpid(daemon_pid, &st, 0);
  }
  daemon_pid = -1;
  // A clean shutdown exits 0; sanitizer reports from sbshd or its wrappers land in its log.
  std::ifstream f(dir + "/sbshd.log");
  std::string log((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(gone && WIFEXITED(st) && WEXITSTATUS(st) == 0) << "sbshd did not exit cleanly:\n" << log;
  for (const char* bad : {"AddressSanitizer", "LeakSanitizer", "runtime error:", "handle still open"})
    EXPECT_EQ(log.find(bad), std::string::npos) << "sbshd log:\n" << log;
}

void daemon_test::kill_daemon() {
  ::kill(daemon_pid, SIGKILL);
  int st;
  ::waitpid(daemon_pid, &st, 0);
  daemon_pid = -1;
}

void daemon_test::TearDown() {
  stop_daemon();
  // Sessions that a killed sbshd left wait to be adopted: one more sbshd adopts and ends them.
  std::error_code ec;
  if (!std::filesystem::is_empty(sock + ".d", ec) && !ec) {
    start_daemon();
    stop_daemon();
  }
  std::string cmd = "rm -rf " + shell_quote(dir);
  (void)std::system(cmd.c_str());
}

run_result daemon_test::sbsh(const std::vector<std::string>& args, const std::string* stdin_data,
                             std::chrono::seconds limit) {
  std::vector<std::string> argv{bin("sbsh"), "--socket", sock, "--no-autostart"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, stdin_data, limit);
}

run_result daemon_test::exec(const std::string& session, const std::string& command) {
  return sbsh({"exec", "-s", session, "--", command});
}

pid_t daemon_test::start_outside_session(const std::string& session, int seconds) {
  std::string pid_file = dir + "/outside-" + std::to_string(seconds) + ".pid";
  auto r = exec(session, "setsid sh -c 'echo $$ > " + pid_file + "; exec sleep " + std::to_string(seconds) +
                             "' </dev/null >/dev/null 2>&1 &");
  if (r.code != 0) return 0;
  pid_t pid = 0;
  bool left = wait_until([&] {
    std::ifstream in(pid_file);
    return static_cast<bool>(in >> pid) && ::getsid(pid) == pid;
  }, std::chrono::seconds(5));
  return left ? pid : 0;
}

result<client::exec_result> daemon_test::exec_cancelled_after(const std::string& session, const std::string& command,
                                                              std::chrono::milliseconds after) {
  auto c = conn();
  client::canceller stop;
  client::exec_options o;
  o.session = session;
  o.command = command;
  o.signal_fd = stop.fd();
  std::thread stopper([&stop, after] {
    std::this_thread::sleep_for(after);
    stop.cancel();
  });
  auto r = c.exec(o);
  stopper.join();
  return r;
}

client::connection daemon_test::conn() {
  client::connect_options o;
  o.socket_path = sock;
  o.autostart = false;
  auto c = client::connection::connect(o);
  if (!c) throw std::runtime_error(c.err().message);
  return std::move(*c);
}

nlohmann::json daemon_test::listed(const std::string& name) {
  auto list = nlohmann::json::parse(sbsh({"session", "ls", "--json"}).out);
  for (const auto& s : list)
    if (s["name"] == name) return s;
  return {};
}

client::session_status daemon_test::session_pids(const std::string& name) {
  client::session_status st;
  wait_until([&] {
    st = session_status(name);
    return st.shell_pid > 0 && st.wrapper_pid > 0;
  }, std::chrono::seconds(20));
  return st;
}

client::session_status daemon_test::session_status(const std::string& name) {
  auto c = conn();
  auto d = c.show_session(name);
  if (!d) return {};
  return d->status;
}

namespace {
// Whether a user other than the owner may reach `p`: every directory above it lets others in.
bool others_may_reach(const std::filesystem::path& p) {
  for (auto d = p.parent_path();; d = d.parent_path()) {
    struct stat st {};
    if (::stat(d.c_str(), &st) != 0 || (st.st_mode & S_IXOTH) == 0) return false;
    if (d == d.root_path() || d.empty()) return true;
  }
}
}  // namespace

std::string programs_for_others(const std::string& under) {
  namespace fs = std::filesystem;
  const fs::path bin_dir(SBSH_BIN_DIR), builtin(SBSH_BUILTIN_PATH);
  if (others_may_reach(bin_dir / "sbsh") && others_may_reach(builtin)) return bin_dir.string();
  fs::path copy = fs::path(under) / "programs" / "bin";
  fs::path copied_builtin = copy / fs::relative(builtin, bin_dir);
  fs::create_directories(copy);
  fs::create_directories(copied_builtin.parent_path());
  for (const char* p : {"sbsh", "sbshd", "sbsh-wrapper"})
    fs::copy_file(bin_dir / p, copy / p, fs::copy_options::overwrite_existing);
  fs::copy_file(builtin, copied_builtin, fs::copy_options::overwrite_existing);
  for (fs::path d = copied_builtin.parent_path(); d != fs::path(under); d = d.parent_path())
    fs::permissions(d, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                           fs::perms::others_exec);
  return fs::weakly_canonical(copy).string();
}

nobodys_sbsh::nobodys_sbsh(const std::string& under)
    : home(under + "/nobody"), run_dir(home + "/run"), programs(programs_for_others(under)) {
  for (const std::string& d : {home, run_dir}) {
    if (::mkdir(d.c_str(), 0700) != 0 || ::chown(d.c_str(), 65534, 65534) != 0)
      throw std::runtime_error(fmt::format("cannot make {} for uid 65534: {}", d, std::strerror(errno)));
  }
  if (::chmod(under.c_str(), 0711) != 0) throw std::runtime_error("cannot let others through " + under);
}

run_result nobodys_sbsh::sbsh(const std::vector<std::string>& args) const {
  std::vector<std::string> argv{"/usr/bin/setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                                "--",               "/usr/bin/env", "-i"};
  argv.insert(argv.end(), {"--chdir=" + home, "PATH=/usr/bin:/bin", "XDG_RUNTIME_DIR=" + run_dir, "HOME=" + home,
                           "SBSH_STATE_DIR=" + home + "/state", programs + "/sbsh"});
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv);
}

run_result make_demo_wheel(const std::string& path) {
  return run({"/usr/bin/python3", "-c",
              "import zipfile,sys\n"
              "z = zipfile.ZipFile(sys.argv[1], 'w')\n"
              "z.writestr('demo/__init__.py', '__version__ = \"1.0\"\\n')\n"
              "z.writestr('demo-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: demo\\nVersion: 1.0\\n')\n"
              "z.writestr('demo-1.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\n"
              "Root-Is-Purelib: true\\nTag: py3-none-any\\n')\n"
              "z.writestr('demo-1.0.dist-info/RECORD', '')\n"
              "z.close()\n",
              path});
}

void root_session_test::SetUp() {
  daemon_test::SetUp();
  if (IsSkipped() || HasFatalFailure()) return;
  root = dir + "/root";
  std::filesystem::create_directories(root);
  auto c = conn();
  client::session_spec spec;
  spec.name = "ws";
  spec.root = root;
  ASSERT_TRUE(c.create_session(spec).ok());
}

run_result root_session_test::file(std::vector<std::string> args, const std::string* in) {
  args.insert(args.begin(), "file");
  args.insert(args.begin() + 2, {"-s", "ws"});
  return sbsh(args, in);
}

void put(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace sbsh::test
