// sbsh attach: use a session interactively. Each line runs in the session with live output;
// the prompt shows the session and its current directory. On a terminal, lines are edited
// with libedit (history in the state directory); Ctrl-C goes to the running command, not
// to sbsh, or at the prompt clears the line; Ctrl-D leaves. With another stdin, lines are read and run in order, and the
// exit status is the last command's.
#include <editline/readline.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/cli.h"
#include "common/paths.h"
#include "ipc/protocol.h"

namespace sbsh::cli {

namespace {

// Ctrl-C at the prompt clears the line and shows a new prompt, as bash does. The terminal
// sends SIGINT; its handler notes it and the key read ends the line through libedit's getc
// hook, which libedit's own handlers would not do: they read again after an interrupted
// read, and end the line on a second as at end-of-file, which is Ctrl-D's meaning. SIGINT is
// blocked while libedit works and let in only while the hook waits for a key (ppoll), so a
// Ctrl-C that arrives as libedit draws the prompt is not lost before a read that would block.
volatile sig_atomic_t g_interrupted = 0;
void on_prompt_interrupt(int) { g_interrupted = 1; }
int read_key(FILE*) {
  sigset_t waiting;
  ::pthread_sigmask(SIG_SETMASK, nullptr, &waiting);
  ::sigdelset(&waiting, SIGINT);
  for (;;) {
    pollfd pf{STDIN_FILENO, POLLIN, 0};
    if (::ppoll(&pf, 1, nullptr, &waiting) < 0) {
      if (errno == EINTR && g_interrupted == 0) continue;
      return EOF;  // Ctrl-C (g_interrupted says so), or stdin is unusable
    }
    unsigned char c;
    ssize_t n = ::read(STDIN_FILENO, &c, 1);
    if (n == 1) return c;
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    return EOF;  // end of input
  }
}

std::string prompt_for(client::connection& conn, const std::string& session) {
  std::string cwd = "?";
  if (auto d = conn.show_session(session)) cwd = d->status.cwd;
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0' && cwd.rfind(home, 0) == 0)
    cwd = "~" + cwd.substr(std::strlen(home));
  return fmt::format("[{} {}]$ ", session, cwd);
}

int run_attach(const global_opts& g, const std::string& session) {
  auto conn = connect(g);
  if (!conn) return fail(conn.err().message);

  bool tty = ::isatty(0) != 0;
  std::string history = resolve_state_dir("") + "/attach_history";
  if (tty) {
    rl_catch_signals = 0;
    rl_getc_function = read_key;
    using_history();
    read_history(history.c_str());
  }
  int last = 0;
  for (;;) {
    std::string line;
    if (tty) {
      std::string prompt = prompt_for(*conn, session);
      struct sigaction sa {};
      sa.sa_handler = on_prompt_interrupt;  // at the prompt Ctrl-C must not end sbsh
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = 0;
      ::sigaction(SIGINT, &sa, nullptr);
      sigset_t sigint, before;
      sigemptyset(&sigint);
      sigaddset(&sigint, SIGINT);
      ::pthread_sigmask(SIG_BLOCK, &sigint, &before);
      g_interrupted = 0;
      char* l = readline(prompt.c_str());
      ::pthread_sigmask(SIG_SETMASK, &before, nullptr);  // a Ctrl-C typed since counts too
      if (g_interrupted != 0) {
        std::free(l);
        std::fputs("^C\n", stdout);
        std::fflush(stdout);
        continue;  // Ctrl-C: the line is dropped, a new prompt follows
      }
      if (l == nullptr) {
        std::fputs("\n", stdout);
        break;  // Ctrl-D
      }
      line = l;
      std::free(l);
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      add_history(line.c_str());
    } else if (!std::getline(std::cin, line)) {
      break;
    }
    int signal_fd = forward_signals_to_command();
    client::exec_options o;
    o.session = session;
    o.command = line;
    o.stdout_fd = 1;
    o.stderr_fd = 2;
    o.signal_fd = signal_fd;
    auto r = conn->exec(o);
    if (!r) {
      fail(r.err().message);
      last = kExitFailure;
      if (ipc::has_code(r.err(), ipc::errc::eof) || ipc::has_code(r.err(), ipc::errc::io) ||
          ipc::has_code(r.err(), ipc::errc::write_error))
        break;
      continue;
    }
    last = r->timed_out ? kExitTimeout : r->exit_code.value_or(kExitFailure);
    warn_state_lost(session, *r);
    explain_result(session, o.timeout, *r);
  }
  if (tty) write_history(history.c_str());
  return last;
}

}  // namespace

runner declare_attach(command_line& cl) {
  auto session = std::make_shared<std::string>("default");
  cl.describe(
      "Runs each line you type in the session, with live output. The prompt shows the session and its "
      "directory; lines are edited with the usual keys and kept in a history. Ctrl-C interrupts the running "
      "command, not sbsh, and at the prompt clears the line; Ctrl-D leaves. When stdin is not a terminal, its lines are run in order and the exit "
      "status is the last command's.");
  add_session_option(cl, *session);
  return [session](const global_opts& g) { return run_attach(g, *session); };
}

}  // namespace sbsh::cli
