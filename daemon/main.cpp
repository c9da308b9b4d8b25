// sbshd: the sbsh daemon. Declares and parses its options as sbsh does (command_line.h),
// then calls run_or_die(); see daemon.cpp.
#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iterator>

#include <fmt/format.h>

#include "common/command_line.h"
#include "common/duration.h"
#include "daemon/daemon.h"
#include "ipc/protocol.h"

namespace {

using sbsh::result;
using sbsh::cli::command_line;
using sbsh::ipc::errc;
using sbsh::ipc::make_error;

// A size in MiB such as 64 or 0.5.
result<uint64_t> read_mib(std::string_view option, const std::string& text) {
  char* end = nullptr;
  double mib = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(mib > 0) || mib > 1024 * 1024)
    return make_error(errc::usage, fmt::format("{} takes a number of MiB, such as 64 or 0.5, not '{}'", option, text));
  return static_cast<uint64_t>(mib * 1024 * 1024);
}

// Bytes, with K, M, G or T (powers of 1024); 0 for no cap.
result<uint64_t> read_size(std::string_view option, const std::string& text) {
  char* end = nullptr;
  double n = std::strtod(text.c_str(), &end);
  int shift = 0;
  if (end != text.c_str() && *end != '\0' && end[1] == '\0') {
    switch (*end) {
      case 'K': case 'k': shift = 10; break;
      case 'M': case 'm': shift = 20; break;
      case 'G': case 'g': shift = 30; break;
      case 'T': case 't': shift = 40; break;
      default: shift = -1;
    }
    ++end;
  }
  if (end == text.c_str() || *end != '\0' || shift < 0 || !(n >= 0) || n * static_cast<double>(1ull << shift) > 1e18)
    return make_error(errc::usage,
                      fmt::format("{} takes a size such as 10G, 512M or 0 (no cap), not '{}'", option, text));
  return static_cast<uint64_t>(n * static_cast<double>(1ull << shift));
}

// A duration in milliseconds (500ms, 30s, 5m, 1h); with `never`, the word never as 0 and
// zero refused.
std::function<result<uint64_t>(std::string_view, const std::string&)> read_ms(bool never) {
  return [never](std::string_view option, const std::string& text) -> result<uint64_t> {
    if (never && text == "never") return uint64_t{0};
    auto d = sbsh::parse_duration(text);
    if (!d) return make_error(errc::usage, fmt::format("{}: {}", option, d.err().message));
    if (never && d->count() == 0)
      return make_error(errc::usage, fmt::format("{} takes a duration such as 24h or 30m, or 'never'", option));
    return static_cast<uint64_t>(d->count());
  };
}

// Who a confined session's shell is outside its user namespace when sbshd runs as root: `name`
// (--confine-user), else nobody. Never root: the shell would own root's files.
sbsh::status settle_confine_user(const std::string& name, sbsh::daemon::run_options& o) {
  if (!name.empty() && ::geteuid() != 0)
    return make_error(errc::usage, "--confine-user applies only when sbshd runs as root: unprivileged, a confined "
                                   "session's shell is sbshd's own user");
  if (::geteuid() != 0) return sbsh::ok_status();
  passwd pw{};
  passwd* found = nullptr;
  char buf[4096];
  const char* who = name.empty() ? "nobody" : name.c_str();
  if (::getpwnam_r(who, &pw, buf, sizeof buf, &found) != 0 || found == nullptr) {
    if (!name.empty()) return make_error(errc::usage, fmt::format("--confine-user: no user '{}' here", name));
    return sbsh::ok_status();  // the default of 65534 (nobody on Linux distributions)
  }
  if (pw.pw_uid == 0 || pw.pw_gid == 0)
    return make_error(errc::usage, fmt::format("--confine-user: '{}' is root or in root's group: name an "
                                               "unprivileged user",
                                               who));
  o.confine_uid = pw.pw_uid;
  o.confine_gid = pw.pw_gid;
  return sbsh::ok_status();
}

void declare(command_line& cl, sbsh::daemon::run_options& o, bool& version, std::string& confine_user) {
  cl.describe(
      "Keeps persistent bash sessions and runs commands in them for sbsh clients. sbsh starts it when none "
      "answers; systemd can too (sbshd.service).");
  cl.option("--socket", "PATH",
            "Unix socket to listen on (default: $SBSH_SOCKET, $XDG_RUNTIME_DIR/sbsh/sbshd.sock, or "
            "/tmp/sbsh-$UID/sbshd.sock)",
            o.socket_path, sbsh::cli::check_not_empty("a socket path"));
  cl.option("--state-dir", "DIR", "directory for state and logs (default: see sbshd(8))", o.state_dir,
            sbsh::cli::check_not_empty("a directory"));
  cl.flag("--foreground", "stay attached to the terminal; log to stderr", o.foreground);
  cl.option("--log-level", "LEVEL", "trace, debug, info, warn, error, critical or off (default: info)", o.log.level,
            sbsh::cli::check_one_of({std::begin(sbsh::daemon::kLogLevels), std::end(sbsh::daemon::kLogLevels)}));
  cl.option("--log-format", "FORMAT", "text or json (default: text)", o.log.format,
            sbsh::cli::check_one_of({std::begin(sbsh::daemon::kLogFormats), std::end(sbsh::daemon::kLogFormats)}));
  cl.converted<uint64_t>("--log-size", "MIB",
                         "MiB that STATE/sbshd.log (without --foreground) may reach before it is rotated (default: 10)",
                         o.log.max_bytes, read_mib);
  cl.number("--log-files", "N", "rotated sbshd.log files kept, sbshd.1.log and on (default: 3)", o.log.files,
            "a number of files", 1, 100);
  cl.option("--wrapper", "PATH", "path of sbsh-wrapper (default: beside sbshd)", o.wrapper_path,
            sbsh::cli::check_not_empty("a path"));
  cl.converted<uint64_t>("--health-interval", "DURATION",
                         "how often each wrapper is pinged; one that does not answer within it is restarted (0: "
                         "never; default: 10s)",
                         o.health_interval_ms, read_ms(false));
  cl.converted<uint64_t>("--log-cap", "MIB", "MiB of each background process stream kept in its log (default: 64)",
                         o.log_cap, read_mib);
  cl.number("--spare-wrappers", "N",
            "wrappers kept started ahead of need, so that a new session does not wait for one (0: none; default: 1)",
            o.spare_wrappers, "a number of wrappers", 0, 16);
  cl.converted<uint64_t>("--env-cap", "SIZE",
                         "size that all environments built by session setups may reach together; the least recently "
                         "used that no session uses are deleted to stay within it (0: no cap; default: 10G)",
                         o.env_cap, read_size);
  cl.converted<uint64_t>("--adopt-timeout", "DURATION",
                         "how long sessions outlive sbshd when it stops without ending them, waiting for the next "
                         "sbshd to adopt them (0: they end with sbshd; default: 10m)",
                         o.adopt_timeout_ms, read_ms(false));
  cl.converted<uint64_t>("--idle-expiry", "DURATION",
                         "how long a session made by 'exec -s' or 'start -s' may stay idle before it is removed "
                         "('never': kept until removed; default: 24h)",
                         o.idle_expiry_ms, read_ms(true));
  cl.option("--confine-user", "NAME",
            "when sbshd runs as root, the user a confined session's shell is outside its user namespace (default: "
            "nobody)",
            confine_user, sbsh::cli::check_not_empty("a user name"));
  cl.flag("--version", "print the version and exit", version);
  // Bounds that tests lower to reach them quickly; without help, they are not listed (bounds.h).
  cl.number("--max-clients", "N", "", o.max_clients, "a number of clients", 1, 1 << 20);
  cl.number("--stalled-client-ms", "MS", "", o.stalled_client_ms, "a number of milliseconds", 1, 1 << 30);
  cl.number("--keep-finished", "N", "", o.keep_finished, "a number of processes", 1, 1 << 20);
  cl.number("--park-after-ms", "MS", "", o.park_after_ms, "a number of milliseconds", 0, 1 << 30);
  cl.number("--stop-at-once", "N", "", o.stop_at_once, "a number of sessions", 1, 1 << 20);
}

}  // namespace

static int unguarded_main(int argc, char** argv) {
  sbsh::daemon::run_options o;
  bool version = false;
  std::string confine_user;
  command_line cl("sbshd", "");
  declare(cl, o, version, confine_user);
  auto parsed = cl.parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed) {
    std::fprintf(stderr, "sbshd: %s\n", parsed.err().message.c_str());
    return 2;
  }
  if (*parsed == command_line::outcome::help_printed) return 0;
  if (version) {
    std::puts("sbshd " SBSH_VERSION);
    return 0;
  }
  if (auto s = settle_confine_user(confine_user, o); !s) {
    std::fprintf(stderr, "sbshd: %s\n", s.err().message.c_str());
    return 2;
  }
  return sbsh::daemon::run_or_die(std::move(o));
}

// Nothing is thrown on purpose; should something be, sbshd says what and exits instead of
// dumping core.
int main(int argc, char** argv) {
  try {
    return unguarded_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sbshd: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "sbshd: internal error\n");
  }
  return 255;
}
