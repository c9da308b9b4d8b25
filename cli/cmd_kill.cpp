// sbsh kill: signal a background process's group and every descendant.
#include <signal.h>

#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli/cli.h"
#include "client/json.h"
#include "client/request.h"
#include "ipc/protocol.h"
#include "ipc/text.h"

namespace sbsh::cli {

namespace {

struct kill_args {
  std::string signal = "TERM", id;
};

std::string check_signal(std::string_view option, const std::string& v) {
  if (ipc::signal_from_name(v)) return "";
  return fmt::format("{}: unknown signal '{}'; use a name such as TERM, KILL, INT or a number", option, v);
}

// "-9", "-KILL", "-SIGKILL", "-kill": the signal, as kill(1) takes it. Only before "--":
// after it, "-5" is an ID.
result<std::string> signal_word(std::string_view word) {
  if (ipc::signal_from_name(word.substr(1))) return fmt::format("--signal={}", word.substr(1));
  return make_error(ipc::errc::usage,
                    fmt::format("unknown signal or option '{}'; give a signal as -TERM, -9 or -s TERM, "
                                "and put '--' before an ID that starts with '-'",
                                word));
}

// A command exec kept (%ID): stopped as a timeout stops one, the shell keeping its state.
int kill_command(client::connection& conn, const kill_args& a, uint64_t id, int sig) {
  auto r = conn.kill_command(id, sig);
  if (!r) return fail(r.err().message);
  std::string how = r->signal      ? fmt::format("killed by {}", ipc::signal_name(*r->signal))
                    : r->exit_code ? fmt::format("exited with status {}", *r->exit_code)
                    : !r->error.empty() ? r->error
                                        : "ended";
  std::printf("command %s has ended: %s\n", a.id.c_str(), how.c_str());
  return 0;
}

int run_kill(const global_opts& g, const kill_args& a) {
  if (a.id.empty()) return fail("kill needs a process ID or name ('sbsh ps' lists them), or a command's %ID");
  auto conn = connect(g);
  if (!conn) return fail(conn.err().message);
  int sig = *ipc::signal_from_name(a.signal);
  if (auto cmd = client::parse_command_ref(a.id)) return kill_command(*conn, a, *cmd, sig);
  auto p =
      client::request<ipc::msg::proc_info>(*conn, ipc::msg::proc_kill{{0, a.id}, {sig}}, &ipc::msg::proc_info::proc);
  if (!p) return fail(p.err().message);
  std::string who = p->name.empty() ? fmt::format("process {}", p->id) : fmt::format("process {} ({})", p->id, p->name);
  if (p->state == "running" || p->state == "starting") {
    std::printf("sent %s to %s; it is still running\n", ipc::signal_name(sig).c_str(), who.c_str());
    return 0;
  }
  std::string how = p->state == "exited" && p->exit_code ? fmt::format("exited with status {}", *p->exit_code)
                    : p->signal                         ? fmt::format("{} by {}", p->state, ipc::signal_name(*p->signal))
                                                        : p->state;
  std::printf("%s has ended: %s\n", who.c_str(), how.c_str());
  return 0;
}

}  // namespace

runner declare_kill(command_line& cl) {
  auto a = std::make_shared<kill_args>();
  cl.describe(
      "Sends SIGNAL to every process of the background process: its group and everything it started, including "
      "processes that called setsid. With TERM (the default) or KILL, returns once every one of them is gone; "
      "TERM is followed by KILL after 2 s. With another signal, returns when the process ends of it, or after 1 s "
      "saying that it still runs. Prints how the process ended, or that the signal was sent. A command exec kept "
      "(%ID: exec --detach-after) is stopped as a timeout stops one: SIGNAL, then KILL after 2 s, and the session's "
      "shell keeps its state.");
  cl.option("-s,--signal", "SIGNAL",
            "the signal, by name (TERM, SIGKILL) or number (default TERM); -SIGNAL, as "
            "in kill -9 ID or kill -KILL ID, says the same",
            a->signal, check_signal);
  cl.complete(value_kind::text, {"TERM", "KILL", "INT", "HUP", "QUIT", "USR1", "USR2", "STOP", "CONT"});
  cl.read_dash_words(signal_word, {"-TERM", "-KILL", "-INT", "-HUP"});
  cl.argument("ID", a->id);
  cl.complete(value_kind::process);
  return [a](const global_opts& g) { return run_kill(g, *a); };
}

}  // namespace sbsh::cli
