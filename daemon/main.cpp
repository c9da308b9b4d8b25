// sbshd: the sbsh daemon. Parses options and calls run_or_die(); see daemon.cpp.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "common/duration.h"
#include "daemon/daemon.h"

namespace {

// A size in MiB such as 64 or 0.5, from option `name`; false (and a message) when invalid.
bool parse_mib(const char* name, const std::string& text, uint64_t* bytes) {
  char* end = nullptr;
  double mib = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(mib > 0) || mib > 1024 * 1024) {
    std::fprintf(stderr, "sbshd: %s takes a number of MiB, such as 64 or 0.5, not '%s'\n", name, text.c_str());
    return false;
  }
  *bytes = static_cast<uint64_t>(mib * 1024 * 1024);
  return true;
}

// --env-cap: bytes, with K, M, G or T (powers of 1024); 0 for no cap.
bool parse_size(const char* name, const std::string& text, uint64_t* bytes) {
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
  if (end == text.c_str() || *end != '\0' || shift < 0 || !(n >= 0) || n * static_cast<double>(1ull << shift) > 1e18) {
    std::fprintf(stderr, "sbshd: %s takes a size such as 10G, 512M or 0 (no cap), not '%s'\n", name, text.c_str());
    return false;
  }
  *bytes = static_cast<uint64_t>(n * static_cast<double>(1ull << shift));
  return true;
}

}  // namespace

static int unguarded_main(int argc, char** argv) {
  sbsh::daemon::run_options o;
  CLI::App app{"sbshd: keeps persistent bash sessions and runs commands in them for sbsh clients"};
  app.add_option("--socket", o.socket_path, "Unix socket to listen on (default: see sbshd(8))");
  app.add_option("--state-dir", o.state_dir, "Directory for state and logs");
  app.add_flag("--foreground", o.foreground, "Stay attached to the terminal; log to stderr");
  app.add_option("--log-level", o.log.level, "trace, debug, info, warn, error, critical or off")
      ->capture_default_str();
  app.add_option("--log-format", o.log.format, "text or json")->capture_default_str();
  std::string log_size = "10";
  app.add_option("--log-size", log_size,
                 "MiB that STATE/sbshd.log (without --foreground) may reach before it is rotated")
      ->capture_default_str();
  app.add_option("--log-files", o.log.files, "Rotated sbshd.log files kept (sbshd.1.log, ...)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--wrapper", o.wrapper_path, "Path of sbsh-wrapper (default: beside sbshd)");
  std::string health = "10s";
  app.add_option("--health-interval", health,
                 "How often each wrapper is pinged; one that does not answer within it is restarted (0: never)")
      ->capture_default_str();
  std::string log_cap = "64";
  app.add_option("--log-cap", log_cap, "MiB of each background process stream kept in its log")->capture_default_str();
  app.add_option("--spare-wrappers", o.spare_wrappers,
                 "Wrappers kept started ahead of need, so that a new session does not wait for one (0: none)")
      ->check(CLI::Range(0, 16))
      ->capture_default_str();
  std::string env_cap = "10G";
  app.add_option("--env-cap", env_cap,
                 "Size that all environments built by session setups may reach together; the least recently used "
                 "that no session uses are deleted to stay within it (0: no cap)")
      ->capture_default_str();
  std::string adopt = "10m";
  app.add_option("--adopt-timeout", adopt,
                 "How long sessions outlive sbshd when it stops without ending them, waiting for the next "
                 "sbshd to adopt them (0: they end with sbshd)")
      ->capture_default_str();
  std::string idle_expiry = "24h";
  app.add_option("--idle-expiry", idle_expiry,
                 "How long a session made by 'exec -s' or 'start -s' may stay idle before it is removed "
                 "('never': kept until removed)")
      ->capture_default_str();
  // Bounds that tests lower to reach them quickly (not for users: see bounds.h).
  app.add_option("--max-clients", o.max_clients)->group("")->check(CLI::Range(1, 1 << 20));
  app.add_option("--stalled-client-ms", o.stalled_client_ms)->group("")->check(CLI::Range(1, 1 << 30));
  app.add_option("--keep-finished", o.keep_finished)->group("")->check(CLI::Range(1, 1 << 20));
  app.set_version_flag("--version", "sbshd " SBSH_VERSION);
  CLI11_PARSE(app, argc, argv);
  auto interval = sbsh::parse_duration(health);
  if (!interval) {
    std::fprintf(stderr, "sbshd: --health-interval: %s\n", interval.err().message.c_str());
    return 2;
  }
  o.health_interval_ms = static_cast<uint64_t>(interval->count());
  auto adopt_timeout = sbsh::parse_duration(adopt);
  if (!adopt_timeout) {
    std::fprintf(stderr, "sbshd: --adopt-timeout: %s\n", adopt_timeout.err().message.c_str());
    return 2;
  }
  o.adopt_timeout_ms = static_cast<uint64_t>(adopt_timeout->count());
  if (idle_expiry == "never") {
    o.idle_expiry_ms = 0;
  } else {
    auto expiry = sbsh::parse_duration(idle_expiry);
    if (!expiry || expiry->count() <= 0) {
      std::fprintf(stderr, "sbshd: --idle-expiry takes a duration such as 24h or 30m, or 'never'%s%s\n",
                   expiry ? "" : ": ", expiry ? "" : expiry.err().message.c_str());
      return 2;
    }
    o.idle_expiry_ms = static_cast<uint64_t>(expiry->count());
  }
  if (!parse_mib("--log-cap", log_cap, &o.log_cap) || !parse_mib("--log-size", log_size, &o.log.max_bytes)) return 2;
  if (!parse_size("--env-cap", env_cap, &o.env_cap)) return 2;
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
