// sbsh: the command-line client. Parses the global options, then declares, parses and runs
// the one subcommand given (see cli.h).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include <fmt/format.h>

#include "cli/cli.h"
#include "ipc/protocol.h"

namespace sbsh::cli {

void declare_root(command_line& cl, root_args& a) {
  cl.describe("sbsh runs commands in persistent bash sessions kept by the sbshd daemon.");
  cl.option("-S,--socket", "PATH",
            "daemon socket (default: $SBSH_SOCKET, $XDG_RUNTIME_DIR/sbsh/sbshd.sock, or /tmp/sbsh-$UID/sbshd.sock)",
            a.g.socket, check_not_empty("a socket path"));
  cl.flag("--no-autostart", "fail instead of starting sbshd when none answers (or SBSH_NO_AUTOSTART=1)",
          a.no_autostart);
  cl.option("-H,--host", "URL",
            "use sbshd on another host or in a container: ssh://[USER@]HOST[:PORT], podman://CONTAINER, "
            "docker://CONTAINER or kubectl://[NAMESPACE/]POD[/CONTAINER] (or $SBSH_HOST); -S and --no-autostart "
            "then apply over there",
            a.g.host);
  cl.complete(value_kind::text, {"ssh://", "podman://", "docker://", "kubectl://"});
  cl.option("--dial", "COMMAND",
            "use the sbshd that COMMAND reaches: a shell command line whose stdin and stdout lead to 'sbsh "
            "dial-stdio', e.g. 'kubectl exec -i POD -- sbsh dial-stdio' (or $SBSH_DIAL)",
            a.g.dial);
  cl.flag("--version", "print the version", a.version);
  cl.words("COMMAND", a.rest, "COMMAND [ARGS...]");
  std::vector<command_summary> list;
  for (const auto& c : commands()) list.push_back({c.name, c.summary});
  cl.list_commands(std::move(list));
  cl.footer("Run 'sbsh COMMAND --help' for a command's options.");
}

namespace {

// SBSH_HOST and SBSH_DIAL say how to reach sbshd unless an option does; dial-stdio, the far
// end of both, always serves this host's sbshd.
result<ok_t> settle_transport(const command_line& cl, global_opts& g, std::string_view command) {
  bool host_given = cl.given("--host"), dial_given = cl.given("--dial");
  if (command == "dial-stdio") {
    if (host_given || dial_given)
      return make_error(
          "usage", "dial-stdio is the far end of --host and --dial: it connects to the sbshd of the host it runs on");
    g.host.clear();
    g.dial.clear();
  }
  if (host_given && dial_given)
    return make_error(ipc::errc::usage, "--host and --dial both say how to reach sbshd: give one");
  if (host_given) g.dial.clear();
  if (dial_given) g.host.clear();
  if (!g.host.empty() && !g.dial.empty())
    return make_error(ipc::errc::usage,
                      "SBSH_HOST and SBSH_DIAL are both set: unset one, or choose with --host or --dial");
  if (!g.dial.empty() && cl.given("--socket"))
    return make_error(ipc::errc::usage,
                      "-S names a socket on this host, which --dial does not use; give it in the dial "
                      "command (... sbsh -S PATH dial-stdio)");
  // A bad URL is refused before the command starts, also for one that connects only later
  // (mcp connects at its first tool call).
  if (!g.host.empty())
    if (auto argv = client::host_dial_command(g.host); !argv) return argv.err();
  return ok_t{};
}

// A standard descriptor that was closed (sbsh ... >&-) is taken by /dev/null opened
// read-only: no pipe or socket sbsh opens may land on it (a command's output would go into
// its own pipe), and a write to it still fails, with EBADF, so that output with nowhere to
// go is reported as an error. Reading it gives end-of-file, as the /dev/null a command gets.
void hold_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    int held = ::open("/dev/null", O_RDONLY);  // the lowest free number: fd
    if (held >= 0 && held != fd) ::close(held);
  }
}

// As gnulib's close_stdout: what sbsh printed must have been written. A failure is sbsh's
// (exit 255) with one line on stderr, if stderr still works. A reader that went away is not
// one: SIGPIPE ends sbsh then, as it ends cat.
int check_output(int status) {
  bool flush_failed = std::fflush(stdout) != 0;
  int e = errno;
  if (flush_failed || std::ferror(stdout) != 0) {
    // An earlier write that failed left no errno to tell; a last flush that fails does.
    fail(flush_failed ? fmt::format("write error: {}", std::strerror(e)) : std::string("write error"), "write_error");
    status = kExitFailure;
  }
  if (std::fflush(stderr) != 0 || std::ferror(stderr) != 0) status = kExitFailure;
  return status;
}

int run(int argc, char** argv) {
  root_args a;
  if (const char* v = std::getenv("SBSH_NO_AUTOSTART"); v != nullptr && std::strcmp(v, "1") == 0) a.g.autostart = false;
  if (const char* v = std::getenv("SBSH_HOST"); v != nullptr) a.g.host = v;
  if (const char* v = std::getenv("SBSH_DIAL"); v != nullptr) a.g.dial = v;
  command_line root("sbsh", "");
  declare_root(root, a);
  auto parsed = root.parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed) return fail(parsed.err().message);
  if (*parsed == command_line::outcome::help_printed) return 0;
  if (a.no_autostart) a.g.autostart = false;
  if (a.version) a.rest = {"version"};
  if (a.rest.empty()) {
    std::fputs(root.help().c_str(), stderr);
    return 2;
  }
  if (a.rest[0] == "help") {  // "sbsh help [COMMAND [SUBCOMMAND]]" is "sbsh [COMMAND [SUBCOMMAND]] --help"
    if (a.rest.size() == 1) {
      std::fputs(root.help().c_str(), stdout);
      return 0;
    }
    a.rest.erase(a.rest.begin());
    a.rest.emplace_back("--help");
  }
  if (auto s = settle_transport(root, a.g, a.rest[0]); !s) return fail(s.err().message);
  const command* c = find_command(a.rest[0]);
  if (c == nullptr) return fail(fmt::format("unknown command '{}'; run 'sbsh --help' for the list", a.rest[0]));
  command_line cl(fmt::format("sbsh {}", c->name), c->summary);
  runner run_command = c->declare(cl);
  auto sub = cl.parse(std::vector<std::string>(a.rest.begin() + 1, a.rest.end()));
  if (!sub) return fail(sub.err().message);
  if (*sub == command_line::outcome::help_printed) return 0;
  if (cl.given_to_chosen("--jsonl")) report_failures_as(failure_format::jsonl);
  else if (cl.given_to_chosen("--json")) report_failures_as(failure_format::json);
  return run_command(a.g);
}

}  // namespace
}  // namespace sbsh::cli

// Nothing is thrown on purpose; should something be, sbsh says what and exits 255 (its
// own failure) instead of dumping core.
int main(int argc, char** argv) {
  try {
    sbsh::cli::hold_standard_descriptors();
    return sbsh::cli::check_output(sbsh::cli::run(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sbsh: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "sbsh: internal error\n");
  }
  return 255;
}
