// Session definitions: validation, comparison and their msgpack form.
#include "daemon/session_def.h"

#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "common/confine.h"
#include "common/limits.h"
#include "daemon/beneath.h"
#include "ipc/bounds.h"
#include "ipc/protocol.h"
#include "ipc/shell_channel.h"
#include "ipc/text.h"

namespace sbsh::daemon {

std::optional<restart_policy> parse_policy(std::string_view s) {
  if (s == "always") return restart_policy::always;
  if (s == "on-failure") return restart_policy::on_failure;
  if (s == "never") return restart_policy::never;
  return std::nullopt;
}

bool valid_session_name(std::string_view name) {
  if (name.empty() || name.size() > ipc::kSessionNameMax) return false;
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(name[0])) return false;
  return std::ranges::all_of(name.substr(1), [&](char c) { return alnum(c) || c == '.' || c == '_' || c == '-'; });
}

status check_session_name(std::string_view name) {
  if (valid_session_name(name)) return ok_status();
  return make_error(ipc::errc::invalid_session_name,
                    fmt::format("invalid session name '{}': a name is 1 to {} characters, letters, "
                                "digits, '.', '_' or '-', and starts with a letter or digit ({})",
                                ipc::printable(name, 80), ipc::kSessionNameMax, ipc::kSessionNamePattern));
}

namespace {

bool valid_env_name(std::string_view n) {
  if (n.empty()) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    char c = n[i];
    bool ok = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

status check_def(const session_def& d) {
  if (!d.cwd.empty() && d.cwd[0] != '/')
    return make_error(ipc::errc::bad_request, fmt::format("the session directory '{}' must be an absolute path", ipc::printable(d.cwd)));
  for (const auto& e : d.env) {
    if (auto s = check_env_entry(e); !s) return s;
  }
  for (const auto& c : d.init)
    if (c.find('\0') != std::string::npos) return make_error(ipc::errc::bad_request, "an init command contains a NUL byte");
  if (d.init.size() > 64) return make_error(ipc::errc::bad_request, "a session may have at most 64 init commands");
  if (d.timeout_ms > kMaxTimeoutMs)
    return make_error(ipc::errc::bad_request, "the session's default timeout is unreasonably large (over 100 years)");
  if (!d.snapshot.empty() && d.snapshot[0] != '/')
    return make_error(ipc::errc::bad_request,
                      fmt::format("the snapshot source '{}' must be an absolute path", ipc::printable(d.snapshot)));
  if (!d.root.empty() && d.root[0] != '/')
    return make_error(ipc::errc::bad_request, fmt::format("the session root '{}' must be an absolute path", ipc::printable(d.root)));
  if (!d.root.empty() && !d.snapshot.empty())
    return make_error(ipc::errc::bad_request, "a session made from a snapshot has its copy as its root: give either root or snapshot, not both");
  if (!d.root.empty() && !d.cwd.empty() && !path_within(d.cwd, d.root))
    return make_error(ipc::errc::bad_request,
                      fmt::format("the session directory '{}' is outside its root '{}': give a directory inside the root, "
                                  "or leave it out to start in the root",
                                  ipc::printable(d.cwd), ipc::printable(d.root)));
  if (d.snapshot.empty() && (!d.ignore.empty() || d.no_default_ignores || d.gitignore || d.keep_copy_on_failure))
    return make_error(ipc::errc::bad_request,
                      "ignore rules and keeping the copy apply to a session made from a snapshot: give --snapshot DIR too");
  if (d.ignore.size() > 1024) return make_error(ipc::errc::bad_request, "a session may have at most 1024 ignore patterns");
  if (d.setup.empty() && !d.setup_keys.empty())
    return make_error(ipc::errc::bad_request,
                      "setup keys name the files an environment's setup depends on: give the setup too (--setup COMMAND)");
  if (d.setup.find('\0') != std::string::npos)
    return make_error(ipc::errc::bad_request, "the setup command holds a NUL byte, which bash cannot run");
  if (d.setup_keys.size() > 256) return make_error(ipc::errc::bad_request, "a setup may have at most 256 key files");
  for (const auto& k : d.setup_keys)
    if (k.empty() || k.find('\0') != std::string::npos)
      return make_error(ipc::errc::bad_request, "a setup key must name a file (not empty, no NUL byte)");
  if (!d.sbsh_env.empty() && d.sbsh_env[0] != '/')
    return make_error(ipc::errc::bad_request, "a session's environment directory must be an absolute path");
  for (const auto& p : d.ignore)
    if (auto s = check_ignore_pattern(p); !s) return s;
  if (d.confine && d.root.empty() && d.snapshot.empty())
    return make_error(ipc::errc::no_root,
                      "a confined session is confined to its root: give --root DIR or --snapshot DIR too");
  if (!d.confine && (!d.allow_write.empty() || !d.allow_read.empty() || !d.read_only.empty()))
    return make_error(ipc::errc::bad_request,
                      "--allow-write, --allow-read and --read-only add to a confined session's rules: give --confine too");
  for (const auto* list : {&d.allow_write, &d.allow_read, &d.read_only}) {
    if (list->size() > 64) return make_error(ipc::errc::bad_request, "a confined session may have at most 64 paths of each kind");
    for (const auto& p : *list)
      if (p.empty() || p[0] != '/' || p.find('\0') != std::string::npos)
        return make_error(ipc::errc::bad_request,
                          fmt::format("the path '{}' a confined session is allowed must be absolute", ipc::printable(p)));
  }
  if (d.memory_max != 0 && d.memory_max < (4u << 20))
    return make_error(ipc::errc::bad_request,
                      fmt::format("a memory limit of {} bytes is too small for bash itself: give at least 4M",
                                  d.memory_max));
  if (d.pids_max > ipc::kMaxSessionPids)
    return make_error(ipc::errc::bad_request, fmt::format("a limit of {} processes is more than Linux allows ({})",
                                                          d.pids_max, ipc::kMaxSessionPids));
  if (d.cpu_millis != 0 && (d.cpu_millis < ipc::kMinSessionCpuMillis || d.cpu_millis > ipc::kMaxSessionCpuMillis))
    return make_error(ipc::errc::bad_request,
                      fmt::format("a CPU limit of {}.{:03} CPUs is out of range: give from {} to {}", d.cpu_millis / 1000,
                                  d.cpu_millis % 1000, ipc::kMinSessionCpuMillis / 1000.0,
                                  ipc::kMaxSessionCpuMillis / 1000));
  return ok_status();
}

// The most open files the kernel allows a process, even a privileged one.
uint64_t nr_open() {
  std::ifstream f("/proc/sys/fs/nr_open");
  uint64_t n = 0;
  return f >> n && n > 0 ? n : RLIM_INFINITY;
}

// Validates each limit and puts it in canonical form, so that equal definitions compare
// equal. A hard limit above sbshd's own cannot be set without privilege: say so now rather
// than at each start of the shell.
status normalize_limits(std::vector<std::string>& limits) {
  std::vector<int> seen;
  for (auto& l : limits) {
    auto spec = parse_limit(l);
    if (!spec) return spec.err();
    std::string name = l.substr(0, l.find('='));
    if (std::find(seen.begin(), seen.end(), spec->resource) != seen.end())
      return make_error(ipc::errc::bad_request, fmt::format("limit {} is given twice", name));
    seen.push_back(spec->resource);
    rlimit own{};
    if (::geteuid() != 0 && ::getrlimit(spec->resource, &own) == 0 && spec->value.rlim_max > own.rlim_max)
      return make_error(ipc::errc::bad_request,
                        fmt::format("limit {}: the hard limit here is {}; ask for at most that", name,
                                    own.rlim_max == RLIM_INFINITY ? std::string("infinity")
                                                                  : std::to_string(own.rlim_max)));
    if (uint64_t most = nr_open(); spec->resource == RLIMIT_NOFILE && spec->value.rlim_max > most)
      return make_error(ipc::errc::bad_request,
                        fmt::format("limit nofile: the kernel allows at most {} (fs.nr_open)", most));
    l = format_limit(*spec);
  }
  return ok_status();
}

// The user's account, for a client that brings no environment.
std::vector<std::string> login_environment() {
  std::vector<std::string> env;
  passwd pw{};
  passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(::getuid(), &pw, buf, sizeof buf, &found) == 0 && found != nullptr) {
    env.push_back(fmt::format("HOME={}", pw.pw_dir));
    env.push_back(fmt::format("USER={}", pw.pw_name));
    env.push_back(fmt::format("LOGNAME={}", pw.pw_name));
    env.push_back(fmt::format("SHELL={}", pw.pw_shell));
  }
  env.emplace_back("PATH=/usr/local/bin:/usr/bin:/bin");
  return env;
}

status check_environment(const std::vector<std::string>& env) {
  size_t total = 0;
  for (const auto& e : env) {
    total += e.size() + 1;
    auto eq = e.find('=');
    if (eq == 0 || eq == std::string::npos)
      return make_error(ipc::errc::bad_request,
                        fmt::format("the session's environment has an entry without NAME=: '{}'", e.substr(0, 64)));
    if (e.find('\0') != std::string::npos)
      return make_error(ipc::errc::bad_request, "the session's environment has an entry with a NUL byte");
  }
  if (total > kMaxSessionEnv)
    return make_error(ipc::errc::bad_request,
                      fmt::format("the session's environment is {} KiB, over the limit of {} KiB; start sbsh with a "
                                  "smaller environment (env -u NAME ...)",
                                  total >> 10, kMaxSessionEnv >> 10));
  return ok_status();
}

}  // namespace

status check_ignore_pattern(std::string_view p) {
  auto bad = [&](std::string_view why) {
    return make_error(ipc::errc::bad_request, fmt::format("invalid ignore pattern '{}': {}", ipc::printable(p, 128), why));
  };
  if (p.empty() || p == "!" || p == "/" || p == "!/") return bad("it matches nothing; give a name or a glob such as *.log");
  if (p.find_first_of(std::string_view("\n\r\0", 3)) != std::string_view::npos)
    return bad("a pattern is one line, without NUL, CR or LF bytes");
  if (p[0] == '#') return bad("a pattern starting with '#' is a comment; write \\# to match a name starting with '#'");
  if (p.back() == '\\' && (p.size() < 2 || p[p.size() - 2] != '\\'))
    return bad("it ends in a lone backslash, which escapes nothing");
  if (p.size() > 4096) return bad("it is longer than 4096 bytes");
  return ok_status();
}

size_t own_text_size(const session_def& d) {
  size_t n = d.cwd.size() + d.snapshot.size() + d.root.size() + d.setup.size() + d.sbsh_env.size();
  for (const auto* list :
       {&d.env, &d.init, &d.limits, &d.environment, &d.ignore, &d.setup_keys, &d.allow_write, &d.allow_read, &d.read_only})
    for (const auto& s : *list) n += s.size() + 1;
  return n;
}

size_t text_size(const session_def& d) { return own_text_size(d) + (d.environ ? d.environ->bytes : 0); }

result<std::vector<std::string>> session_environment(std::vector<std::string> given) {
  if (given.empty()) return login_environment();
  if (auto s = check_environment(given); !s) return s.err();
  std::vector<std::string> out;
  std::set<std::string> seen;  // the first of two entries for a name wins, as in getenv
  out.reserve(given.size());
  for (auto& e : given) {
    std::string name = e.substr(0, e.find('='));
    if (name == "SBSH_SESSION" || name == "SBSH_ROOT" || name == "SBSH_ENV" || name == "SBSH_BASH" || !seen.insert(std::move(name)).second) continue;
    out.push_back(std::move(e));
  }
  return out;
}

result<session_def> def_from_saved(session_spec spec) {
  session_def d;
  static_cast<session_spec&>(d) = std::move(spec);
  d.name.clear();  // the session table's
  if (auto s = check_environment(d.environment); !s) return s.err();
  if (!parse_policy(d.restart))
    return make_error(ipc::errc::bad_request, fmt::format("restart policy '{}' is not always, on-failure or never",
                                                          ipc::printable(d.restart, 32)));
  if (auto s = check_def(d); !s) return s.err();
  if (auto s = normalize_limits(d.limits); !s) return s.err();
  d.set_environment(std::move(d.environment));
  return d;
}

namespace {

// A root as sbshd keeps it: absolute, every symlink in it resolved, an existing directory; a
// relative cwd beside it is taken from it, and none means the root itself.
status settle_root(session_spec& spec) {
  if (spec.root.empty()) return ok_status();
  if (spec.root[0] != '/' || spec.root.find('\0') != std::string::npos)
    return make_error(ipc::errc::bad_request, fmt::format("the session root '{}' must be an absolute path", ipc::printable(spec.root)));
  char real[PATH_MAX];
  struct stat st {};
  if (::realpath(spec.root.c_str(), real) == nullptr || ::stat(real, &st) != 0)
    return make_error(ipc::errc::bad_directory, fmt::format("the session root '{}' cannot be used: {}", ipc::printable(spec.root),
                                                            std::strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    return make_error(ipc::errc::bad_directory, fmt::format("the session root '{}' is not a directory", ipc::printable(spec.root)));
  spec.root = real;
  if (spec.cwd.empty()) spec.cwd = spec.root;
  else if (spec.cwd[0] != '/') spec.cwd = spec.root + "/" + spec.cwd;
  spec.cwd = std::filesystem::path(spec.cwd).lexically_normal().string();
  if (spec.cwd.size() > 1 && spec.cwd.back() == '/') spec.cwd.pop_back();
  return ok_status();
}

// The path of what descriptor `fd` refers to, as the kernel names it; empty (errno set) when
// it cannot be read.
std::string fd_path(int fd) {
  char buf[PATH_MAX];
  std::string link = fmt::format("/proc/self/fd/{}", fd);
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof buf) return {};
  return {buf, static_cast<size_t>(n)};
}

// A confined session's extra paths must exist when it is defined: each becomes a Landlock
// rule on the object it names when the shell starts, and a missing one would fail every start
// of the session, long after the mistake. Checked at creation only: a path removed later
// fails that start with the wrapper's own reason.
status check_extra_paths(const session_def& d) {
  for (auto [option, list] : {std::pair{"--allow-write", &d.allow_write}, std::pair{"--allow-read", &d.allow_read},
                              std::pair{"--read-only", &d.read_only}})
    for (const auto& p : *list) {
      struct stat st {};
      if (::stat(p.c_str(), &st) != 0)
        return make_error(ipc::errc::bad_directory,
                          fmt::format("{} {}: {}; give a file or directory that exists (or create it first)", option,
                                      ipc::printable(p, 256), std::strerror(errno)));
    }
  return ok_status();
}

}  // namespace

void give_to_confined_shell(const session_def& d, uid_t uid, gid_t gid, std::initializer_list<int> fds) {
  if (!d.confine || ::geteuid() != 0) return;
  // Only pipes: a terminal's ownership is its device's, which is not sbshd's to change.
  struct stat st{};
  for (int fd : fds)
    if (fd >= 0 && ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) (void)::fchown(fd, uid, gid);
}

bool path_within(std::string_view p, std::string_view dir) {
  if (dir == "/") return !p.empty() && p[0] == '/';
  return p.starts_with(dir) && (p.size() == dir.size() || p[dir.size()] == '/');
}

std::vector<confine::rule> own_rules(const session_def& d, const std::string& tmp) {
  using confine::access;
  std::vector<confine::rule> r{{root_of(d), access::read_write}};
  if (!d.confine) return r;
  r.push_back({tmp, access::read_write});
  for (const auto& p : d.allow_write) r.push_back({p, access::read_write});
  for (const auto& p : d.allow_read) r.push_back({p, access::read_exec});
  for (const auto& p : d.read_only) r.push_back({p, access::read_only});
  // What its setup built (a venv, node_modules): its programs run, and nothing changes it,
  // since another session with the same setup may share it.
  if (!d.sbsh_env.empty()) r.push_back({d.sbsh_env, access::read_exec});
  return r;
}

result<std::string> start_dir(std::string_view given, std::string_view base, const session_def& def) {
  if (given.empty()) return std::string();
  const std::string& root = root_of(def);
  if (root.empty()) {
    if (given[0] == '/') return std::string(given);
    if (base.empty() || base[0] != '/')
      return make_error(ipc::errc::bad_request,
                        fmt::format("-C {}: a relative directory needs the session's root or the caller's directory, and "
                                    "this session has no root and the request came without the caller's directory (a "
                                    "remote connection): give an absolute path",
                                    ipc::printable(given, 256)));
    if (given == ".") return std::string(base);
    return fmt::format("{}{}{}", base, base.back() == '/' ? "" : "/", given);
  }
  auto root_fd = beneath::open_root(root);
  if (!root_fd) return root_fd.err();
  // The root where it is now (a snapshot's copy is kept by the path it was made at, which
  // may run through a symlink): an absolute `given` may name it by either path.
  std::string real_root = fd_path(root_fd->get());
  auto rel = beneath::relative(given, root);
  if (!rel && !real_root.empty() && real_root != root) rel = beneath::relative(given, real_root);
  if (!rel) return rel.err();
  auto dir = beneath::open(root_fd->get(), *rel, O_PATH | O_DIRECTORY, 0, given);
  if (!dir) {
    if (ipc::has_code(dir.err(), ipc::errc::outside_root)) return dir.err();
    return make_error(ipc::errc::bad_directory, fmt::format("cannot run in {}", dir.err().message));
  }
  // Where the kernel's lookup ended, as a path from the root of the file system: the shell
  // goes there, not to the text (bash's cd would take ".." after a symlink textually).
  std::string path = fd_path(dir->get());
  if (path.empty())
    return make_error(ipc::errc::bad_directory,
                      fmt::format("cannot run in '{}': {}", ipc::printable(given, 256), std::strerror(errno)));
  if (!path_within(path, real_root.empty() ? root : real_root))  // as the lookup said; checked again by its text
    return make_error(ipc::errc::outside_root,
                      fmt::format("'{}' leads outside the session's root", ipc::printable(given, 256)));
  return path;
}

status check_dir_fields(std::string_view cwd, std::string_view base) {
  if (cwd.find('\0') != std::string_view::npos || base.find('\0') != std::string_view::npos)
    return make_error(ipc::errc::bad_request, "field 'cwd' or 'cwd_base' contains a NUL byte");
  if (cwd.size() > SBSH_CHANNEL_MAX_CWD || base.size() > SBSH_CHANNEL_MAX_CWD)
    return make_error(ipc::errc::bad_request, fmt::format("field 'cwd' or 'cwd_base' is longer than {} bytes", SBSH_CHANNEL_MAX_CWD));
  if (!base.empty() && base[0] != '/')
    return make_error(ipc::errc::bad_request, fmt::format("field 'cwd_base' must be an absolute directory, not '{}'", ipc::printable(base)));
  return ok_status();
}

result<std::string> settle_cwd(std::string_view given, std::string_view base, const session_def& def) {
  auto dir = start_dir(given, base, def);
  if (dir && dir->size() > SBSH_CHANNEL_MAX_CWD)
    return make_error(ipc::errc::bad_request, fmt::format("the directory -C names is longer than {} bytes", SBSH_CHANNEL_MAX_CWD));
  return dir;
}
status check_env_entry(std::string_view e) {
  auto eq = e.find('=');
  if (eq == std::string_view::npos || !valid_env_name(e.substr(0, eq)))
    return make_error(ipc::errc::bad_request, fmt::format("environment entry '{}' must be NAME=VALUE with a NAME of "
                                               "letters, digits and '_' not starting with a digit",
                                               ipc::printable(e, 80)));
  if (e.find('\0') != std::string_view::npos)
    return make_error(ipc::errc::bad_request, "an environment entry contains a NUL byte");
  return ok_status();
}

result<session_def> def_from_request(session_spec spec) {
  if (!spec.snapshot.empty() && !spec.cwd.empty())
    return make_error(ipc::errc::bad_request,
                      "a session made from a snapshot starts in its copy: give either cwd or snapshot, not both");
  if (!spec.snapshot.empty() && !spec.root.empty())
    return make_error(ipc::errc::bad_request,
                      "a session made from a snapshot has its copy as its root: give either root or snapshot, not both");
  if (auto s = settle_root(spec); !s) return s.err();
  spec.special_skipped = 0;  // what the copy finds, not what a client says
  spec.sbsh_env.clear();      // what the setup builds
  spec.landlock_abi = 0;      // what this kernel offers
  spec.cgroup.clear();        // what sbshd makes
  if (spec.confine) {
    std::string why;
    int abi = confine::landlock_abi(&why);
    if (abi == 0) return make_error(ipc::errc::not_supported, fmt::format("cannot confine the session: {}", why));
    if (!confine::user_namespaces(&why))
      return make_error(ipc::errc::not_supported, fmt::format("cannot confine the session: {}", why));
    // Abstract UNIX sockets belong to the network namespace; within the host's, only Landlock
    // from ABI 6 keeps the session from connecting to the host's (a seccomp filter cannot see
    // the address a socket is connected to).
    if (abi < 6 && !spec.no_network)
      return make_error(ipc::errc::not_supported,
                        fmt::format("cannot confine the session with the network: this kernel's Landlock (ABI {}) "
                                    "cannot keep it from the host's abstract UNIX sockets (Linux 6.12 or later "
                                    "can); add --no-network, whose network namespace has none",
                                    abi));
    spec.landlock_abi = static_cast<uint64_t>(abi);
  }
  auto def = def_from_saved(std::move(spec));
  if (!def) return def;
  if (auto s = check_extra_paths(*def); !s) return s.err();
  if (text_size(*def) > ipc::kMaxDefinitionText)
    return make_error(ipc::errc::bad_request,
                      fmt::format("the session's definition holds {} KiB of directory, variables and init commands, "
                                  "more than the {} KiB allowed; put long init commands in a file and source it",
                                  text_size(*def) >> 10, ipc::kMaxDefinitionText >> 10));
  return def;
}

}  // namespace sbsh::daemon
