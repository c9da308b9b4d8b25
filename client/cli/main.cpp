// sbsh: the command-line client. Parses global options and runs a subcommand from the table.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "client/cli/cli.h"

namespace sbsh::cli {

namespace {

constexpr command kCommands[] = {
    {"exec", cmd_exec, "run a command in a session and exit with its exit code",
     "usage: sbsh exec [-s SESSION] [-C DIR] [-e NAME=VALUE]... [-t DURATION] [--json] [--] COMMAND...\n"
     "\n"
     "Runs COMMAND (its words joined with spaces) at the top level of the session's shell, so\n"
     "cd, variables, functions, aliases, options and traps persist to the next exec. Output is\n"
     "streamed live; stdin is forwarded when it is not a terminal, else the command gets /dev/null.\n"
     "\n"
     "  -s, --session NAME     session to use (default: default); created on first use\n"
     "  -C, --cwd DIR          run in DIR, in a subshell (changes do not persist)\n"
     "  -e, --env NAME=VALUE   set a variable for this command only (subshell); repeatable\n"
     "  -t, --timeout DURATION stop the command after DURATION (500ms, 30s, 5m, 1h, or seconds)\n"
     "      --json             print one JSON object with the result instead of streaming\n"
     "      --output-limit N   with --json, keep at most N bytes per stream (default 16777216)\n"
     "\n"
     "Exit status: the command's; 128+N if signal N ended it; 124 on timeout; 255 if sbsh failed.\n"},
    {"run", cmd_run, "run a plan of staged commands in a fresh session; write a report",
     "usage: sbsh run [--report FILE|-] [--events FILE|-] [--artifacts DIR] [--keep-session] [-s NAME]\n"
     "                [--output-limit N] [-q] PLAN\n"
     "\n"
     "Runs the stages of PLAN (a JSON or YAML file; - reads stdin) in order in one new session,\n"
     "so state carries from command to command, and stops at the first stage that does not meet\n"
     "its expectation (expect: success, the default, or failure); later stages are skipped. The\n"
     "session is removed at the end. Ctrl-C or SIGTERM stops the running command and cancels the\n"
     "run; the report is still written. Progress goes to stderr. See sbsh(1), PLANS.\n"
     "\n"
     "      --report FILE|-    write the report (JSON) there when the run ends; default: stdout,\n"
     "                         unless the events go there\n"
     "      --events FILE|-    write the events there as they happen, one JSON object per line\n"
     "      --artifacts DIR    write each command's whole stdout and stderr to\n"
     "                         DIR/STAGE/N.stdout and .stderr (N from 0)\n"
     "      --output-limit N   keep at most N bytes of each stream in the report (default 1048576)\n"
     "      --keep-session     leave the session for inspection; its name is printed on stderr\n"
     "  -s, --session NAME     name the session (it must not exist; default run-PID-N)\n"
     "  -q, --quiet            no progress on stderr\n"
     "\n"
     "Exit status: 0 when every stage met its expectation, 1 when one did not, 130 when\n"
     "cancelled, 255 for an invalid plan or a failure of sbsh itself.\n"},
    {"session", cmd_session, "create, list, show, remove or restart sessions",
     "usage: sbsh session create NAME [-C DIR | --snapshot DIR] [-e NAME=VALUE]... [--init COMMAND]...\n"
     "                           [--restart POLICY] [--limit NAME=VALUE]...\n"
     "       sbsh session ls [--json]\n"
     "       sbsh session show NAME [--json]\n"
     "       sbsh session rm NAME\n"
     "       sbsh session restart NAME\n"
     "\n"
     "create defines a session: every new shell of it starts in DIR with the variables given,\n"
     "runs the --init commands before any other command, and is restarted after it dies as\n"
     "POLICY says (always, on-failure or never; default always). --limit sets a resource limit\n"
     "of the shell and so of every command: NAME is as, core, cpu, data, fsize, memlock, nofile,\n"
     "nproc or stack; VALUE is SOFT:HARD or one value for both, a number (bytes with K, M, G or T;\n"
     "cpu seconds with s, m or h) or infinity. --snapshot copies DIR (cp -a) for the session\n"
     "first, and returns once the copy is made: every shell then starts in the copy, which is\n"
     "the session's own until 'session rm' deletes it; DIR itself is never changed. Creating a\n"
     "session that exists with the same definition does nothing; with another it is an error.\n"
     "show prints the definition, state, pids, restarts, current directory, the last commands\n"
     "with their exit codes and durations, and the output of the last start's init commands.\n"
     "rm ends the shell and every process the session started, and forgets the session.\n"
     "restart ends the shell and starts a new one (also after the session failed or exited).\n"},
    {"start", cmd_start, "start a background process from a session's state; prints its id",
     "usage: sbsh start [-s SESSION] [--name NAME] [-C DIR] [-e NAME=VALUE]... [--] COMMAND...\n"
     "\n"
     "Runs COMMAND in a subshell of the session's shell (its directory, variables and functions as\n"
     "they are when its turn comes), in a process group of its own, with stdin /dev/null. Its stdout\n"
     "and stderr go to capped log files ('sbsh logs'). It outlives this client and restarts of the\n"
     "session's shell; 'session rm' and 'shutdown' end it. Prints the process id.\n"},
    {"logs", cmd_logs, "show a background process's output",
     "usage: sbsh logs [-f|--follow] [-n|--tail N] [--stdout|--stderr] ID\n"
     "\n"
     "Prints what the process wrote (stdout to stdout, stderr to stderr). -f keeps printing as it\n"
     "writes and ends when it ends; --tail N starts with the last N lines of each stream.\n"},
    {"kill", cmd_kill, "signal a background process and its whole tree",
     "usage: sbsh kill [-SIGNAL|-s|--signal SIGNAL] ID\n"
     "\n"
     "Sends SIGNAL (default TERM) to the process's group and every descendant, including those that\n"
     "called setsid. TERM is followed by KILL after 2 s if the process is still there. For a\n"
     "terminating signal, returns once the process has ended.\n"},
    {"wait", cmd_wait, "wait for a background process and exit with its exit code",
     "usage: sbsh wait [-t|--timeout DURATION] ID\n"
     "\n"
     "Exit status: the process's; 128+N if signal N ended it; 124 if DURATION passed first; 255 if\n"
     "its status is unknown (lost when sbshd restarted, or it failed to start).\n"},
    {"ps", cmd_ps, "list sessions with their pids, states and running commands",
     "usage: sbsh ps [-a] [--json]\n\nLists each session (state, wrapper and shell pids, restarts, uptime,\n"
     "queue length, current directory, the running command and how long it has run), then the\n"
     "running background processes; -a includes finished ones.\n"},
    {"attach", cmd_attach, "use a session interactively",
     "usage: sbsh attach [-s SESSION]\n"
     "\n"
     "Runs each line you type in the session, with live output. The prompt shows the session and\n"
     "its directory; lines are edited with the usual keys and kept in a history. Ctrl-C interrupts\n"
     "the running command, not sbsh; Ctrl-D leaves. When stdin is not a terminal, its lines are\n"
     "run in order and the exit status is the last command's.\n"},
    {"status", cmd_status, "show the daemon and its sessions",
     "usage: sbsh status [--json]\n\nShows sbshd's pid, version, uptime and its sessions.\n"},
    {"shutdown", cmd_shutdown, "stop the daemon, its sessions and everything they started",
     "usage: sbsh shutdown [--keep-sessions]\n"
     "\n"
     "Stops sbshd; every session's shell and its processes end. Waits until it is gone.\n"
     "\n"
     "  --keep-sessions  leave the sessions running (their shells, their state, a running command)\n"
     "                   for the next sbshd on this socket to adopt, as when upgrading sbshd; a\n"
     "                   command in flight goes on, but its result is lost; background\n"
     "                   processes go on too, with their logs (see sbshd(8), ADOPTION)\n"},
    {"dial-stdio", cmd_dial_stdio, "relay stdin and stdout to sbshd (the far end of --host and --dial)",
     "usage: sbsh [-S PATH] [--no-autostart] dial-stdio\n"
     "\n"
     "Connects to this host's sbshd (starting it as usual) and copies bytes between it and stdin\n"
     "and stdout until sbshd closes the connection. It is what 'sbsh --host ssh://HOST' runs on\n"
     "HOST through ssh, and what a --dial command such as 'kubectl exec -i POD -- sbsh dial-stdio'\n"
     "must reach. sbshd checks its uid like any local client's.\n"},
    {"version", cmd_version, "print the version", "usage: sbsh version\n"},
};

void print_main_usage(FILE* f) {
  std::fputs(
      "usage: sbsh [-S|--socket PATH] [--no-autostart] [-H|--host URL | --dial COMMAND] COMMAND [ARGS...]\n"
      "\n"
      "sbsh runs commands in persistent bash sessions kept by the sbshd daemon.\n"
      "\n"
      "Commands:\n",
      f);
  for (const auto& c : kCommands) std::fprintf(f, "  %-10.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                                               static_cast<int>(c.summary.size()), c.summary.data());
  std::fputs(
      "\n"
      "Options:\n"
      "  -S, --socket PATH   daemon socket (default: $SBSH_SOCKET, $XDG_RUNTIME_DIR/sbsh/sbshd.sock,\n"
      "                      or /tmp/sbsh-$UID/sbshd.sock)\n"
      "      --no-autostart  fail instead of starting sbshd when none answers (or SBSH_NO_AUTOSTART=1)\n"
      "  -H, --host URL      use sbshd on another host through ssh: ssh://[USER@]HOST[:PORT] (or\n"
      "                      $SBSH_HOST); -S and --no-autostart then apply over there\n"
      "      --dial COMMAND  use the sbshd that COMMAND reaches: a shell command line whose stdin and\n"
      "                      stdout lead to 'sbsh dial-stdio', e.g. 'kubectl exec -i POD -- sbsh\n"
      "                      dial-stdio' (or $SBSH_DIAL)\n"
      "\n"
      "Run 'sbsh COMMAND --help' for a command's options.\n",
      f);
}

}  // namespace

const command* find_command(std::string_view name) {
  for (const auto& c : kCommands)
    if (c.name == name) return &c;
  return nullptr;
}

int print_usage(const command& c) {
  std::fwrite(c.usage.data(), 1, c.usage.size(), stdout);
  return 0;
}

namespace {
int g_signal_pipe[2] = {-1, -1};
// SIGINT and SIGQUIT go to the command, as a terminal sends them; SIGTERM and SIGHUP ask sbsh
// to end, so the whole command stops (the rest of its text included), with that signal first
// (exec_options::signal_fd).
void queue_signal(int sig) {
  unsigned char b = static_cast<unsigned char>(sig == SIGTERM || sig == SIGHUP ? 128 + sig : sig);
  ssize_t r = ::write(g_signal_pipe[1], &b, 1);
  (void)r;
}
}  // namespace

int forward_signals_to_command() {
  if (g_signal_pipe[0] < 0 && ::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
  struct sigaction sa{};
  sa.sa_handler = queue_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::sigaction(s, &sa, nullptr);
  // Signals that arrived while no command ran (attach's prompt) are not for the next one.
  unsigned char stale[64];
  while (::read(g_signal_pipe[0], stale, sizeof stale) > 0) {
  }
  return g_signal_pipe[0];
}

int fail(std::string_view message) {
  std::string line = fmt::format("sbsh: {}\n", message);
  std::fwrite(line.data(), 1, line.size(), stderr);
  return kExitFailure;
}

bool take_option(const args& a, size_t& i, std::string_view short_name, std::string_view long_name,
                 std::string_view* value, std::string* error) {
  std::string_view arg = a[i];
  auto need_next = [&](std::string_view shown) {
    if (i + 1 >= a.size()) {
      *error = fmt::format("option {} needs a value", shown);
      return true;
    }
    *value = a[++i];
    return true;
  };
  if (!short_name.empty() && arg == short_name) return need_next(short_name);
  if (!short_name.empty() && arg.size() > short_name.size() && arg.substr(0, short_name.size()) == short_name &&
      short_name.size() == 2) {
    *value = arg.substr(2);
    return true;
  }
  if (!long_name.empty() && arg == long_name) return need_next(long_name);
  if (!long_name.empty() && arg.size() > long_name.size() + 1 && arg.substr(0, long_name.size()) == long_name &&
      arg[long_name.size()] == '=') {
    *value = arg.substr(long_name.size() + 1);
    return true;
  }
  return false;
}

result<client::connection> connect(const global_opts& g, bool autostart) {
  client::connect_options o;
  o.wait_for_welcome = false;  // each command makes one request: it follows the hello at once
  if (!g.dial.empty()) {
    o.dial_command = {"/bin/sh", "-c", g.dial};
  } else if (!g.host.empty()) {
    auto argv = client::ssh_dial_command(g.host, g.socket, autostart && g.autostart);
    if (!argv) return argv.err();
    o.dial_command = std::move(*argv);
  } else {
    o.socket_path = g.socket;
    o.autostart = autostart && g.autostart;
  }
  return client::connection::connect(o);
}

}  // namespace sbsh::cli

int main(int argc, char** argv) {
  using namespace sbsh::cli;
  global_opts g;
  if (const char* v = std::getenv("SBSH_NO_AUTOSTART"); v != nullptr && std::strcmp(v, "1") == 0) g.autostart = false;
  if (const char* v = std::getenv("SBSH_HOST"); v != nullptr) g.host = v;
  if (const char* v = std::getenv("SBSH_DIAL"); v != nullptr) g.dial = v;
  bool host_given = false, dial_given = false, socket_given = false;
  args a(argv + 1, argv + argc);
  size_t i = 0;
  std::string err;
  for (; i < a.size(); ++i) {
    std::string_view v;
    if (take_option(a, i, "-S", "--socket", &v, &err)) {
      if (!err.empty()) return fail(err);
      g.socket = std::string(v);
      socket_given = true;
    } else if (take_option(a, i, "-H", "--host", &v, &err)) {
      if (!err.empty()) return fail(err);
      g.host = std::string(v);
      host_given = true;
    } else if (take_option(a, i, "", "--dial", &v, &err)) {
      if (!err.empty()) return fail(err);
      g.dial = std::string(v);
      dial_given = true;
    } else if (a[i] == "--no-autostart") {
      g.autostart = false;
    } else if (a[i] == "-h" || a[i] == "--help" || a[i] == "help") {
      if (a[i] == "help" && i + 1 < a.size()) {
        if (const auto* c = find_command(a[i + 1])) return print_usage(*c);
        return fail(fmt::format("unknown command '{}'; run 'sbsh --help' for the list", a[i + 1]));
      }
      print_main_usage(stdout);
      return 0;
    } else if (a[i] == "--version") {
      return cmd_version(g, {});
    } else if (!a[i].empty() && a[i][0] == '-') {
      return fail(fmt::format("unknown option '{}'; run 'sbsh --help' for the options", a[i]));
    } else {
      break;
    }
  }
  if (i >= a.size()) {
    print_main_usage(stderr);
    return 2;
  }
  if (a[i] == "dial-stdio") {
    // The far end: it serves this host's sbshd whatever SBSH_HOST or SBSH_DIAL say here.
    if (host_given || dial_given)
      return fail("dial-stdio is the far end of --host and --dial: it connects to the sbshd of the host it runs on");
    g.host.clear();
    g.dial.clear();
  }
  // An option given here wins over the other's variable; two given here conflict.
  if (host_given && dial_given) return fail("--host and --dial both say how to reach sbshd: give one");
  if (host_given) g.dial.clear();
  if (dial_given) g.host.clear();
  if (!g.host.empty() && !g.dial.empty())
    return fail("SBSH_HOST and SBSH_DIAL are both set: unset one, or choose with --host or --dial");
  if (!g.dial.empty() && socket_given)
    return fail("-S names a socket on this host, which --dial does not use; give it in the dial command "
                "(... sbsh -S PATH dial-stdio)");
  const auto* c = find_command(a[i]);
  if (c == nullptr) return fail(fmt::format("unknown command '{}'; run 'sbsh --help' for the list", a[i]));
  args rest(a.begin() + static_cast<std::ptrdiff_t>(i) + 1, a.end());
  return c->run(g, rest);
}
