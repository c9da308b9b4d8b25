// Reaching sbshd through a program instead of a socket (ssh, podman or docker exec, kubectl
// exec), and the far end of that program: `sbsh dial-stdio`, which relays bytes to the local
// sbshd. As `docker -H ssh://HOST` does, no network server is added: the transport's own
// authentication (ssh keys, access to the engine's socket, the cluster's credentials) decides
// who gets in, and the far sbshd checks the uid of dial-stdio as of any local client.
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "client/connection_impl.h"
#include "common/environ.h"
#include "common/paths.h"
#include "ipc/fd.h"
#include "ipc/text.h"

namespace sbsh::client {

namespace {

bool host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_' || c == ':' ||
         c == '%';
}

bool user_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_';
}

}  // namespace

result<std::vector<std::string>> ssh_dial_command(std::string_view url, const std::string& remote_socket,
                                                  bool autostart) {
  auto bad = [&](std::string_view why) -> error {
    return make_error(ipc::errc::usage,
                      fmt::format("invalid host '{}': {}; expected ssh://[USER@]HOST[:PORT]", url, why));
  };
  constexpr std::string_view scheme = "ssh://";
  if (url.substr(0, scheme.size()) != scheme) return bad("not an ssh:// URL (host_dial_command takes the other kinds)");
  std::string_view rest = url.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) return bad("a path is not supported (name the far socket with -S)");
  std::string_view user, host = rest, port;
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    user = rest.substr(0, at);
    host = rest.substr(at + 1);
    if (user.empty()) return bad("the user name is empty");
  }
  if (!host.empty() && host.front() == '[') {
    auto close = host.find(']');
    if (close == std::string_view::npos) return bad("'[' without ']'");
    std::string_view after = host.substr(close + 1);
    host = host.substr(1, close - 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("unexpected text after ']'");
      port = after.substr(1);
      if (port.empty()) return bad("the port is empty");
    }
  } else if (auto colon = host.find(':'); colon != std::string_view::npos) {
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
    if (port.empty()) return bad("the port is empty");
  }
  if (host.empty()) return bad("the host name is empty");
  if (host.front() == '-' || (!user.empty() && user.front() == '-')) return bad("a host or user may not start with '-'");
  for (char c : host)
    if (!host_char(c)) return bad(fmt::format("the host name may not contain '{}'", c));
  for (char c : user)
    if (!user_char(c)) return bad(fmt::format("the user name may not contain '{}'", c));
  if (!port.empty()) {
    unsigned long v = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || v > 65535) return bad("the port must be a number from 1 to 65535");
      v = v * 10 + static_cast<unsigned long>(c - '0');
    }
    if (v == 0 || v > 65535) return bad("the port must be a number from 1 to 65535");
  }

  // -T: no terminal on the far side (the bytes are frames). BatchMode: ssh runs without a
  // terminal to ask on, so it must fail at once, saying why, rather than wait for a password.
  std::vector<std::string> argv{"ssh", "-T", "-o", "BatchMode=yes"};
  if (!user.empty()) argv.insert(argv.end(), {"-l", std::string(user)});
  if (!port.empty()) argv.insert(argv.end(), {"-p", std::string(port)});
  argv.insert(argv.end(), {"--", std::string(host), "sbsh"});
  // ssh hands the far shell one line made of these words: the path is quoted for it.
  if (!remote_socket.empty()) argv.insert(argv.end(), {"-S", ipc::shell_quote(remote_socket)});
  if (!autostart) argv.emplace_back("--no-autostart");
  argv.emplace_back("dial-stdio");
  return argv;
}

namespace {

// A container's name or id as podman and docker take it: [a-zA-Z0-9][a-zA-Z0-9_.-]*.
bool container_name_ok(std::string_view n) {
  if (n.empty() || n.size() > 255 || std::isalnum(static_cast<unsigned char>(n.front())) == 0) return false;
  return std::all_of(n.begin(), n.end(), [](char c) { return user_char(c); });
}

// Kubernetes' names (RFC 1123): lowercase letters, digits and '-', starting and ending with a
// letter or digit; a subdomain (a pod's name) may also hold '.'.
bool k8s_name_ok(std::string_view n, size_t max, bool dots) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (n.empty() || n.size() > max || !alnum(n.front()) || !alnum(n.back())) return false;
  return std::all_of(n.begin(), n.end(), [&](char c) { return alnum(c) || c == '-' || (dots && c == '.'); });
}

// The words that run the far `sbsh dial-stdio` through an engine's exec, which runs them as
// they are (no shell): the socket path is not quoted.
void far_sbsh(std::vector<std::string>& argv, const std::string& remote_socket, bool autostart) {
  argv.emplace_back("sbsh");
  if (!remote_socket.empty()) argv.insert(argv.end(), {"-S", remote_socket});
  if (!autostart) argv.emplace_back("--no-autostart");
  argv.emplace_back("dial-stdio");
}

result<std::vector<std::string>> engine_dial_command(std::string_view url, std::string_view engine,
                                                     const std::string& remote_socket, bool autostart) {
  std::string_view name = url.substr(engine.size() + 3);
  if (!name.empty() && name.back() == '/') name.remove_suffix(1);
  auto bad = [&](std::string_view why) -> error {
    return make_error(ipc::errc::usage,
                      fmt::format("invalid host '{}': {}; expected {}://CONTAINER (a name or id)", url, why, engine));
  };
  if (name.empty()) return bad("the container is not named");
  if (name.find('/') != std::string_view::npos) return bad("a path is not supported (name the far socket with -S)");
  if (!container_name_ok(name))
    return bad("a container's name starts with a letter or digit and holds only letters, digits, '_', '.' and '-'");
  // -i: stdin is the connection; no -t: the bytes are frames, not a terminal's.
  std::vector<std::string> argv{std::string(engine), "exec", "-i", std::string(name)};
  far_sbsh(argv, remote_socket, autostart);
  return argv;
}

result<std::vector<std::string>> kubectl_dial_command(std::string_view url, const std::string& remote_socket,
                                                      bool autostart) {
  auto bad = [&](std::string_view why) -> error {
    return make_error(ipc::errc::usage,
                      fmt::format("invalid host '{}': {}; expected kubectl://[NAMESPACE/]POD[/CONTAINER] "
                                  "(kubectl:///POD/CONTAINER: a container in the current namespace)",
                                  url, why));
  };
  std::string_view rest = url.substr(std::string_view("kubectl://").size());
  std::vector<std::string_view> parts;
  for (;;) {
    size_t slash = rest.find('/');
    parts.push_back(rest.substr(0, slash));
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  if (parts.size() > 1 && parts.back().empty()) parts.pop_back();  // one trailing '/'
  if (parts.size() > 3) return bad("too many parts");
  std::string_view ns, pod, container;
  if (parts.size() == 1) pod = parts[0];
  if (parts.size() >= 2) {
    ns = parts[0];
    pod = parts[1];
  }
  if (parts.size() == 3) container = parts[2];
  if (pod.empty()) return bad("the pod is not named");
  if (parts.size() == 2 && ns.empty()) return bad("the namespace is empty");
  if (parts.size() == 3 && container.empty()) return bad("the container is empty");
  constexpr std::string_view rule = "lowercase letters, digits and '-', starting and ending with a letter or digit";
  if (!ns.empty() && !k8s_name_ok(ns, 63, false)) return bad(fmt::format("a namespace has at most 63 {}", rule));
  if (!k8s_name_ok(pod, 253, true)) return bad(fmt::format("a pod's name has at most 253 {} (and '.')", rule));
  if (!container.empty() && !k8s_name_ok(container, 63, false))
    return bad(fmt::format("a container's name has at most 63 {}", rule));
  std::vector<std::string> argv{"kubectl", "exec", "-i"};
  if (!ns.empty()) argv.insert(argv.end(), {"-n", std::string(ns)});
  if (!container.empty()) argv.insert(argv.end(), {"-c", std::string(container)});
  argv.insert(argv.end(), {std::string(pod), "--"});
  far_sbsh(argv, remote_socket, autostart);
  return argv;
}

}  // namespace

result<std::vector<std::string>> host_dial_command(std::string_view url, const std::string& remote_socket,
                                                   bool autostart) {
  size_t sep = url.find("://");
  std::string_view scheme = sep == std::string_view::npos ? std::string_view() : url.substr(0, sep);
  if (scheme == "ssh") return ssh_dial_command(url, remote_socket, autostart);
  if (scheme == "podman" || scheme == "docker") return engine_dial_command(url, scheme, remote_socket, autostart);
  if (scheme == "kubectl") return kubectl_dial_command(url, remote_socket, autostart);
  return make_error(ipc::errc::usage,
                    fmt::format("invalid host '{}': give ssh://[USER@]HOST[:PORT], podman://CONTAINER, "
                                "docker://CONTAINER or kubectl://[NAMESPACE/]POD[/CONTAINER] (for another transport, "
                                "give the command that reaches `sbsh dial-stdio` there with --dial)",
                                url));
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& a : argv) {
    if (!line.empty()) line += ' ';
    bool plain = !a.empty() && a.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                                                   "_-./=:@%+,") == std::string::npos;
    line += plain ? a : ipc::shell_quote(a);
  }
  return line;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("signal {} ({})", WTERMSIG(status), ipc::signal_name(WTERMSIG(status)));
  return "an unknown state";
}

result<dialed> spawn_dial(const std::vector<std::string>& argv) {
  if (argv.empty() || argv[0].empty()) return make_error(ipc::errc::usage, "the dial command is empty");
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return make_error(ipc::errc::io, fmt::format("socketpair: {}", std::strerror(errno)));
  unique_fd ours(sv[0]), theirs(sv[1]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, theirs.get(), 0);
  posix_spawn_file_actions_adddup2(&fa, theirs.get(), 1);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // A process group of its own: a terminal's Ctrl-C is for the command, which exec forwards;
  // it must not end the connection. Signals as a fresh program expects them.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<std::string> args = argv;
  std::vector<char*> cargv = c_pointers(args);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, args[0].c_str(), &fa, &attr, cargv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    return make_error(ipc::errc::unreachable,
                      fmt::format("cannot run the dial command `{}`: {}", command_line(argv), std::strerror(rc)));
  return dialed{std::move(ours), pid};
}

std::optional<int> reap_dial(pid_t pid, std::chrono::milliseconds limit) {
  // Its pidfd becomes readable when it ends (Linux 5.3, which sbshd requires too).
  unique_fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (pidfd && limit.count() > 0) {
    pollfd pf{pidfd.get(), POLLIN, 0};
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (::poll(&pf, 1, static_cast<int>(std::max<int64_t>(left.count(), 0))) >= 0 || errno != EINTR) break;
    }
  }
  int st = 0;
  if (::waitpid(pid, &st, WNOHANG) == pid) return st;
  return std::nullopt;
}

void end_dial(pid_t pid, std::chrono::milliseconds grace) {
  using std::chrono::milliseconds;
  if (reap_dial(pid, grace)) return;
  // The whole group: ssh may have started helpers (a ProxyCommand).
  ::kill(-pid, SIGTERM);
  ::kill(-pid, SIGCONT);  // one stopped (by SIGTTIN, say) must be able to act on it
  if (reap_dial(pid, milliseconds(1000))) return;
  ::kill(-pid, SIGKILL);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

connection::impl::~impl() {
  if (dial_pid <= 0) return;
  ch.close();  // the dial command reads EOF and ends, and so does dial-stdio at the far end
  end_dial(dial_pid, std::chrono::milliseconds(2000));
}

sbsh::status dial_stdio(const connect_options& opts, int in_fd, int out_fd) {
  std::string path = resolve_socket_path(opts.socket_path);
  auto fd = dial_or_start(path, opts);
  if (!fd) return fd.err();
  int sock = fd->get();
  // Up: in_fd -> sbshd, at most one buffer at a time. The socket is written without blocking:
  // sbshd stops reading a client that has sent more input than a command takes, and must
  // still be able to send that command's output down, or both sides would wait forever.
  // Down: sbshd -> out_fd, written as it comes (the client at the other end always reads).
  char buf[64 * 1024];
  std::string up;
  size_t up_off = 0;
  bool in_open = true;
  for (;;) {
    pollfd pf[2] = {{sock, static_cast<short>(POLLIN | (up_off < up.size() ? POLLOUT : 0)), 0}, {-1, POLLIN, 0}};
    if (in_open && up_off == up.size()) pf[1].fd = in_fd;
    if (::poll(pf, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return make_error(ipc::errc::io, fmt::format("poll: {}", std::strerror(errno)));
    }
    if (pf[1].revents != 0) {
      ssize_t n = ::read(in_fd, buf, sizeof buf);
      if (n > 0) {
        up.assign(buf, static_cast<size_t>(n));
        up_off = 0;
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        in_open = false;
        ::shutdown(sock, SHUT_WR);  // sbshd sees its client leave and closes the connection
      }
    }
    if ((pf[0].revents & POLLOUT) != 0 && up_off < up.size()) {
      ssize_t w = ::send(sock, up.data() + up_off, up.size() - up_off, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w > 0) up_off += static_cast<size_t>(w);
      else if (w < 0 && errno != EAGAIN && errno != EINTR) up_off = up.size();  // sbshd left: see below
    }
    if ((pf[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      ssize_t n = ::recv(sock, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0) return ok_status();
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        if (errno == ECONNRESET) return ok_status();
        return make_error(ipc::errc::io, fmt::format("reading from sbshd: {}", std::strerror(errno)));
      }
      // out_fd may have been made non-blocking by whoever shares it: write_all waits.
      if (write_all(out_fd, std::string_view(buf, static_cast<size_t>(n))) != 0) return ok_status();  // the client left
    }
  }
}

}  // namespace sbsh::client
