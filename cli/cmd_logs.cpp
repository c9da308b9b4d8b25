// sbsh logs: what a background process wrote, and with -f what it goes on writing.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/cli.h"
#include "client/json.h"
#include "ipc/fd.h"

namespace sbsh::cli {

namespace {

struct logs_args {
  client::logs_options o;
  std::string id, since;
  bool only_out = false, only_err = false, screen = false;
};

// --since OFFSET: "N" (stdout) or "N:M" (stdout and stderr), as next_offset gives it.
bool parse_since(std::string_view text, client::logs_options& o) {
  auto number = [](std::string_view s, uint64_t& out) {
    if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string_view::npos) return false;
    out = std::stoull(std::string(s));
    return true;
  };
  size_t colon = text.find(':');
  if (!number(text.substr(0, colon), o.stdout_offset)) return false;
  return colon == std::string_view::npos || number(text.substr(colon + 1), o.stderr_offset);
}

int run_logs(const global_opts& g, logs_args& a) {
  if (a.id.empty()) return fail("logs needs a process ID or name ('sbsh ps -a' lists them), or a command's %ID");
  auto cmd = client::parse_command_ref(a.id);
  if (cmd && a.o.tail > 0) return fail("-n is for background processes; a command's %ID gives its whole output");
  if (a.screen) {
    if (!cmd) return fail("--screen is for a command's %ID run with exec --tty");
    if (a.o.follow || !a.since.empty() || a.only_out || a.only_err)
      return fail("--screen prints the terminal's screen alone: give it without -f, --since, --stdout or --stderr");
    auto conn = connect(g);
    if (!conn) return fail(conn.err().message);
    client::logs_options o;
    o.out = o.err = false;
    auto r = conn->command_logs(*cmd, o, [](client::stream, std::string_view) {});
    if (!r) return fail(r.err().message);
    if (r->screen.empty())
      return fail(fmt::format("command {} has no terminal (it did not run with exec --tty), or shows nothing", a.id));
    return write_all(1, r->screen) == 0 ? 0 : fail("write error");
  }
  if (!a.since.empty()) {
    if (!cmd)
      return fail("--since is for a command's %ID (exec --detach-after, --json); for a background process use -n");
    if (!parse_since(a.since, a.o))
      return fail(fmt::format("--since {}: give N or N:M, the offsets after which to print stdout and stderr, as "
                              "a result's next_offset says (--json)",
                              a.since));
  }
  if (a.only_out || a.only_err) {
    a.o.out = a.only_out;
    a.o.err = a.only_err;
  }
  auto conn = connect(g);
  if (!conn) return fail(conn.err().message);
  // Output that cannot be written ends a follow and is an error, as for cat. (A reader that
  // went away raises SIGPIPE, which ends sbsh as it ends cat.)
  client::canceller stop;
  a.o.cancel_fd = stop.fd();
  int write_errno = 0;
  auto sink = [&](client::stream s, std::string_view d) {
    if (write_errno != 0) return;
    write_errno = write_all(s == client::stream::err ? 2 : 1, d);
    if (write_errno != 0) stop.cancel();
  };
  auto failed = [](const auto& r) { return r ? std::optional<error>() : std::optional<error>(r.err()); };
  auto e = cmd ? failed(conn->command_logs(*cmd, a.o, sink)) : failed(conn->logs(a.id, a.o, sink));
  if (e) return fail(e->message);
  if (write_errno != 0) return fail(fmt::format("write error: {}", std::strerror(write_errno)));
  return 0;
}

}  // namespace

runner declare_logs(command_line& cl) {
  auto a = std::make_shared<logs_args>();
  cl.describe(
      "Prints what the background process, or the command exec kept (%ID: exec --detach-after, --json), wrote: its "
      "stdout to stdout, its stderr to stderr.");
  cl.flag("-f,--follow", "keep printing as it writes, and end when it ends", a->o.follow);
  cl.number("-n,--tail", "N", "start with the last N lines of each stream", a->o.tail, "a number of lines", 1,
            std::numeric_limits<uint64_t>::max());
  cl.option("--since", "OFFSET",
            "a command's (%ID) output only after OFFSET: N or N:M bytes of stdout and stderr, as a result's "
            "next_offset gives it (--json), so that nothing is printed twice",
            a->since);
  cl.flag("--screen", "a command's (%ID, exec --tty): what its terminal shows, as text (now, or at its end)",
          a->screen);
  cl.flag("--stdout", "only its stdout", a->only_out);
  cl.flag("--stderr", "only its stderr", a->only_err);
  cl.argument("ID", a->id);
  cl.complete(value_kind::process);
  return [a](const global_opts& g) { return run_logs(g, *a); };
}

}  // namespace sbsh::cli
