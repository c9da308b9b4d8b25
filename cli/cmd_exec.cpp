// sbsh exec: run one command in a session, streaming its output, and exit with its status.
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/cli.h"
#include "cli/jsonl.h"
#include "client/json.h"
#include "ipc/text.h"

namespace sbsh::cli {

namespace {

struct exec_args {
  client::exec_options o;
  std::vector<std::string> words;
  std::string file;  // -f: the command is this file's text ("-": stdin's)
  bool json = false;
  bool jsonl = false;
  uint64_t output_limit = client::exec_options{}.output_limit;
};

// The caller's terminal in raw mode while a --tty command runs, as ssh -t and docker exec -it
// have it: every key, Ctrl-C included, goes to the command's terminal, which echoes and
// interprets it; put back as it was when the command ends.
class raw_terminal {
 public:
  explicit raw_terminal(int fd) : fd_(fd) {
    if (::tcgetattr(fd_, &saved_) != 0) return;
    termios raw = saved_;
    ::cfmakeraw(&raw);
    on_ = ::tcsetattr(fd_, TCSADRAIN, &raw) == 0;
  }
  ~raw_terminal() {
    if (on_) ::tcsetattr(fd_, TCSADRAIN, &saved_);
  }
  raw_terminal(const raw_terminal&) = delete;
  raw_terminal& operator=(const raw_terminal&) = delete;

 private:
  int fd_;
  termios saved_{};
  bool on_ = false;
};

// --tty's size when --cols and --rows do not give it: the caller's terminal's, else 0 (sbshd's
// default, 80 by 24).
void size_from_caller(client::exec_options& o) {
  winsize w{};
  for (int fd : {1, 0, 2})
    if (::ioctl(fd, TIOCGWINSZ, &w) == 0 && w.ws_col > 0 && w.ws_row > 0) {
      if (o.cols == 0) o.cols = w.ws_col;
      if (o.rows == 0) o.rows = w.ws_row;
      return;
    }
}

int run_exec(const global_opts& g, exec_args& a) {
  auto& o = a.o;
  bool json = a.json || a.jsonl;
  if (a.json && a.jsonl) return fail("--json prints one object at the end, --jsonl a line per event: give one");
  o.output_limit = a.output_limit;
  // A machine reader's result may be cut to its head and tail: the whole stays with sbshd.
  o.keep = json;
  if (!a.file.empty()) {
    if (!a.words.empty())
      return fail(fmt::format("give -f {} or COMMAND words, not both: with -f the command is the file's text, and "
                              "the words would not be its arguments (set them in the script: set -- ARGS)",
                              a.file));
    auto text = read_script(a.file);
    if (!text) return fail(text.err().message);
    o.command = std::move(*text);
  } else if (a.words.empty()) {
    return fail("exec needs a command, e.g. sbsh exec -s build 'make test', or -f FILE");
  }
  for (size_t k = 0; k < a.words.size(); ++k) {
    if (k > 0) o.command += ' ';
    o.command += a.words[k];
  }
  if (!o.tty && (o.cols != 0 || o.rows != 0)) return fail("--cols and --rows size the terminal of --tty: add --tty");
  if (o.tty) size_from_caller(o);
  // Forward stdin when it is not a terminal, as ssh does; otherwise the command gets /dev/null.
  // With -f -, stdin was the script: the command gets /dev/null. With --tty, a terminal's
  // keys are forwarded too, through it in raw mode.
  bool stdin_tty = ::isatty(0) != 0;
  if (a.file != "-" && ::fcntl(0, F_GETFD) != -1 && (!stdin_tty || o.tty)) o.stdin_fd = 0;
  // --interactive keeps the command's input open: /dev/null is not forwarded, since its end
  // would close it.
  struct stat in{};
  if (o.interactive && (::fstat(0, &in) != 0 || (S_ISCHR(in.st_mode) && !stdin_tty))) o.stdin_fd = -1;
  std::optional<raw_terminal> raw;
  if (o.tty && stdin_tty && o.stdin_fd == 0 && !json) raw.emplace(0);
  if (!json) {
    o.stdout_fd = 1;
    o.stderr_fd = 2;
  }
  o.signal_fd = forward_signals_to_command();

  auto conn = connect(g);
  if (!conn) return fail(conn.err());
  std::optional<jsonl_writer> events;
  if (a.jsonl) {
    events.emplace(o.session, o.output_limit);
    o.on_started = [&events](const client::exec_start& s) { events->started(s); };
    o.on_output = [&events](client::stream w, std::string_view d) { events->chunk(w, d); };
  }
  auto r = conn->exec(o);
  if (!r) return fail(r.err());
  warn_state_lost(o.session, *r);
  if (r->running && r->waiting_for_input) {
    std::string id = client::command_ref(r->command_id);
    std::fflush(stdout);
    std::fprintf(stderr,
                 "\nsbsh: %s waits for input (its last line: %s); it goes on in session %s: 'sbsh input %s TEXT' "
                 "answers it, 'sbsh wait %s' gives its result, 'sbsh kill %s' stops it\n",
                 id.c_str(), ipc::printable(r->prompt, 120).c_str(), (o.session.empty() ? "default" : o.session.c_str()),
                 id.c_str(), id.c_str(), id.c_str());
  } else if (r->running) {
    std::string id = client::command_ref(r->command_id);
    std::fflush(stdout);
    std::fprintf(stderr,
                 "sbsh: still running after %s, as %s; it goes on in session %s: 'sbsh wait %s' for its result, "
                 "'sbsh logs -f %s' for its output, 'sbsh kill %s' to stop it\n",
                 human_duration(static_cast<uint64_t>(o.detach_after.count())).c_str(), id.c_str(), (o.session.empty() ? "default" : o.session.c_str()),
                 id.c_str(), id.c_str(), id.c_str());
  }
  if (events) {
    events->finished(o.command, *r);
  } else if (json) {
    print_exec_json(o.session, o.command, *r);
  } else {
    std::fflush(stdout);
    explain_result(o.session, o.timeout, *r);
  }
  return exec_exit_status(*r);
}

}  // namespace

runner declare_exec(command_line& cl) {
  auto a = std::make_shared<exec_args>();
  cl.describe(
      "Runs COMMAND (its words joined with spaces) at the top level of the session's shell, so cd, variables, "
      "functions, aliases, options and traps persist to the next exec. Output is streamed live; stdin is "
      "forwarded when it is not a terminal, else the command gets /dev/null. Options are read only before "
      "COMMAND, whose own options pass through as they are.");
  add_session_option(cl, a->o.session);
  cl.option("-C,--cwd", "DIR", "run in DIR, in a subshell (changes do not persist); in a session with a root, DIR is taken from "
            "the root and must stay beneath it", a->o.cwd,
            check_not_empty("a directory"));
  cl.repeated("-e,--env", "NAME=VALUE", "set a variable for this command only (subshell); repeatable", a->o.env,
              check_assignment);
  cl.duration("-t,--timeout", "DURATION",
              "stop the command after DURATION (500ms, 30s, 5m, 1h, or seconds; default: the session's, from "
              "session create --timeout, else none)",
              a->o.timeout, "a timeout of zero would stop the command at once; omit -t for the session's default");
  cl.option("-f,--file", "FILE",
            "run FILE's text as the command, as if given as COMMAND, with no limit of the kernel's on arguments "
            "(- reads it from stdin, and the command then gets /dev/null)",
            a->file, check_not_empty("a file, or - for stdin"));
  cl.duration("--detach-after", "DURATION",
              "if the command still runs after DURATION, exit 254 and leave it running in the session (its output "
              "and result kept as %ID: sbsh wait, logs, kill)",
              a->o.detach_after, "a zero --detach-after would detach every command at once; omit it to wait");
  cl.flag("--tty", "give the command a terminal of its own (a pseudo-terminal) as its controlling terminal, stdin, "
          "stdout and stderr, stderr merged into stdout as on any terminal, TERM set if the session has none; stdin "
          "is typed into it (a terminal's keys in raw mode, Ctrl-C included); it still runs at the top level", a->o.tty);
  cl.flag("--interactive", "keep the command's stdin open for input (a pipe, or --tty's terminal), also after "
          "--detach-after; sbsh then sees when it waits for input, and --detach-after returns as soon as it does",
          a->o.interactive);
  cl.number("--cols", "N", "with --tty, the terminal's width (default: the caller's terminal's, else 80)", a->o.cols,
            "a width in columns", 1, 10000);
  cl.number("--rows", "N", "with --tty, the terminal's height (default: the caller's terminal's, else 24)", a->o.rows,
            "a height in rows", 1, 10000);
  cl.flag("--json", "print one JSON object with the result instead of streaming", a->json);
  cl.flag("--jsonl", "print JSON lines as it runs: started, stdout and stderr chunks, finished", a->jsonl);
  cl.number("--output-limit", "N",
            "with --json or --jsonl, keep at most N bytes per stream: the first and last N/2 (default 16777216)", a->output_limit,
            "a number of bytes", 0, std::numeric_limits<size_t>::max());
  cl.words("COMMAND", a->words);
  cl.footer(
      "Exit status: the command's; 128+N if signal N ended it; 124 on timeout; 254 if --detach-after left it running; "
      "255 if sbsh failed.");
  return [a](const global_opts& g) { return run_exec(g, *a); };
}

}  // namespace sbsh::cli
