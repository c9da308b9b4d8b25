// sbsh start: a background process from a session's state, logged to files; prints its id.
#include <cstdio>
#include <memory>

#include "cli/cli.h"

namespace sbsh::cli {

namespace {

struct start_args {
  client::start_options o;
  std::vector<std::string> words;
};

int run_start(const global_opts& g, start_args& a) {
  if (a.words.empty()) return fail("start needs a command, e.g. sbsh start --name web 'npm run dev'");
  for (size_t k = 0; k < a.words.size(); ++k) a.o.command += (k > 0 ? " " : "") + a.words[k];
  auto conn = connect(g);
  if (!conn) return fail(conn.err().message);
  auto p = conn->start(a.o);
  if (!p) return fail(p.err().message);
  std::printf("%llu\n", static_cast<unsigned long long>(p->id));
  return 0;
}

}  // namespace

runner declare_start(command_line& cl) {
  auto a = std::make_shared<start_args>();
  cl.describe(
      "Runs COMMAND in a subshell of the session's shell (its directory, variables and functions as they are "
      "when its turn comes), in a process group of its own, with stdin /dev/null. Its stdout and stderr go to "
      "capped log files ('sbsh logs'). It outlives this client and restarts of the session's shell; 'session "
      "rm' and 'shutdown' end it. Prints the process id.");
  add_session_option(cl, a->o.session);
  cl.option("--name", "NAME",
            "a name to use instead of the id in logs, kill and wait: letters, digits and ._-+@:, not only digits, "
            "not that of a running process",
            a->o.name);
  cl.option("-C,--cwd", "DIR", "run in DIR; in a session with a root, DIR is taken from the root and must stay beneath it",
            a->o.cwd, check_not_empty("a directory"));
  cl.repeated("-e,--env", "NAME=VALUE", "set a variable for this process; repeatable", a->o.env, check_assignment);
  cl.words("COMMAND", a->words);
  return [a](const global_opts& g) { return run_start(g, *a); };
}

}  // namespace sbsh::cli
