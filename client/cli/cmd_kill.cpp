// sbsh kill: signal a background process's group and every descendant.
#include <signal.h>

#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "client/cli/cli.h"
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
  return make_error("usage", fmt::format("unknown signal or option '{}'; give a signal as -TERM, -9 or -s TERM, "
                                         "and put '--' before an ID that starts with '-'",
                                         word));
}

int run_kill(const global_opts& g, const kill_args& a) {
  if (a.id.empty()) return fail("kill needs a process ID or name; 'sbsh ps' lists them");
  auto conn = connect(g, true);
  if (!conn) return fail(conn.err().message);
  int sig = *ipc::signal_from_name(a.signal);
  auto p = conn->kill(a.id, sig);
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
      "saying that it still runs. Prints how the process ended, or that the signal was sent.");
  cl.option("-s,--signal", "SIGNAL",
            "the signal, by name (TERM, SIGKILL) or number (default TERM); -SIGNAL, as "
            "in kill -9 ID or kill -KILL ID, says the same",
            a->signal, check_signal);
  cl.read_dash_words(signal_word);
  cl.argument("ID", a->id);
  return [a](const global_opts& g) { return run_kill(g, *a); };
}

}  // namespace sbsh::cli
