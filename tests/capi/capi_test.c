/* The C ABI (sbsh.h), from C, against a private sbshd.
 *
 * Starts sbshd in the foreground on a socket under a private XDG_RUNTIME_DIR (mode 0700),
 * drives it through libsbsh's C ABI only, then shuts it down and checks that the daemon is
 * gone. Every check is counted; the program exits 1 if any failed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sbsh/sbsh.h"

#ifndef SBSH_BIN_DIR
#error "SBSH_BIN_DIR must name the directory of sbshd"
#endif

extern char** environ;

static int failed = 0, passed = 0;

#define CHECK(cond) check((cond) != 0, __LINE__, #cond)
static int check(int ok, int line, const char* what) {
  if (ok) {
    ++passed;
  } else {
    ++failed;
    fprintf(stderr, "capi_test.c:%d: CHECK(%s) failed\n", line, what);
  }
  return ok;
}

/* Compares raw bytes and prints both sides, escaped, when they differ. */
#define CHECK_BYTES(got, got_len, want, want_len) check_bytes(got, got_len, want, want_len, __LINE__)
static void print_escaped(const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = (unsigned char)p[i];
    if (c >= 0x20 && c < 0x7f && c != '\\') fputc(c, stderr);
    else fprintf(stderr, "\\x%02x", c);
  }
}
static void check_bytes(const char* got, size_t got_len, const char* want, size_t want_len, int line) {
  if (got_len == want_len && memcmp(got, want, want_len) == 0) {
    ++passed;
    return;
  }
  ++failed;
  fprintf(stderr, "capi_test.c:%d: bytes differ\n  got  (%zu): ", line, got_len);
  print_escaped(got, got_len);
  fprintf(stderr, "\n  want (%zu): ", want_len);
  print_escaped(want, want_len);
  fputc('\n', stderr);
}

static void note(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("-- ", stdout);
  vprintf(fmt, ap);
  fputc('\n', stdout);
  va_end(ap);
  fflush(stdout);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- The private daemon ---------------------------------------------------------------- */

static char dir[64], run_dir[128], sock[192], state_dir[128], log_path[128];
static pid_t daemon_pid = -1;

static int remove_entry(const char* path, const struct stat* st, int flag, struct FTW* ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

/* On any exit: the daemon must not outlive the test. It is our child, killed by its pid. */
static void cleanup(void) {
  if (daemon_pid > 0) {
    kill(daemon_pid, SIGKILL);
    waitpid(daemon_pid, NULL, 0);
    daemon_pid = -1;
  }
  if (dir[0] != '\0') nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int socket_accepts(const char* path) {
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  size_t len = strlen(path);
  if (len >= sizeof a.sun_path) {
    fprintf(stderr, "socket path too long (%zu bytes, at most %zu): %s\n", len, sizeof a.sun_path - 1, path);
    exit(1);
  }
  memcpy(a.sun_path, path, len + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int ok = fd >= 0 && connect(fd, (struct sockaddr*)&a, sizeof a) == 0;
  if (fd >= 0) close(fd);
  return ok;
}

static void start_daemon(void) {
  snprintf(dir, sizeof dir, "/tmp/sbsh-capi.XXXXXX");
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    exit(1);
  }
  atexit(cleanup);
  snprintf(run_dir, sizeof run_dir, "%s/run", dir);
  snprintf(state_dir, sizeof state_dir, "%s/state", dir);
  snprintf(log_path, sizeof log_path, "%s/sbshd.log", dir);
  snprintf(sock, sizeof sock, "%s/sbsh/sbshd.sock", run_dir);
  if (mkdir(run_dir, 0700) != 0) {
    perror("mkdir");
    exit(1);
  }
  setenv("XDG_RUNTIME_DIR", run_dir, 1);
  setenv("HOME", dir, 1);
  setenv("TMPDIR", dir, 1);
  setenv("SBSH_STATE_DIR", state_dir, 1);
  unsetenv("SBSH_SOCKET");

  const char* exe = SBSH_BIN_DIR "/sbshd";
  char* argv[] = {"sbshd", "--socket", sock, "--foreground", "--state-dir", state_dir, NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  int rc = posix_spawn(&daemon_pid, exe, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    fprintf(stderr, "cannot start %s: %s\n", exe, strerror(rc));
    exit(1);
  }
  for (int i = 0; i < 600; ++i) { /* up to 30 s: sanitizer builds start slowly */
    if (socket_accepts(sock)) return;
    int st;
    if (waitpid(daemon_pid, &st, WNOHANG) == daemon_pid) {
      fprintf(stderr, "sbshd exited at start (status %d); see %s\n", st, log_path);
      daemon_pid = -1;
      exit(1);
    }
    sleep_ms(50);
  }
  fprintf(stderr, "sbshd did not accept connections on %s\n", sock);
  exit(1);
}

/* ---- Helpers --------------------------------------------------------------------------- */

static sbsh_result* run(sbsh_conn* c, sbsh_exec_opts* o, const char* cmd) {
  sbsh_result* r = NULL;
  o->command = cmd;
  int rc = sbsh_exec(c, o, &r);
  if (!CHECK(rc == SBSH_OK && r != NULL))
    fprintf(stderr, "  exec '%s': %d %s: %s\n", cmd, rc, sbsh_last_error_code(c), sbsh_last_error(c));
  return r;
}

/* Runs cmd with the options *o and checks its exact stdout and exit code 0. */
static void expect_run(sbsh_conn* c, sbsh_exec_opts* o, const char* cmd, const char* want, size_t want_len,
                       int line) {
  sbsh_result* r = run(c, o, cmd);
  if (r == NULL) return;
  size_t n;
  const char* out = sbsh_result_stdout(r, &n);
  check_bytes(out, n, want, want_len, line);
  if (!check(sbsh_result_exit_code(r) == 0, line, "exit code 0")) {
    size_t en;
    const char* err = sbsh_result_stderr(r, &en);
    fprintf(stderr, "  '%s' exited %d: %.*s %s\n", cmd, sbsh_result_exit_code(r), (int)en, err,
            sbsh_result_error(r));
  }
  sbsh_result_free(r);
}
#define EXPECT_RUN(c, o, cmd, want, want_len) expect_run((c), (o), (cmd), (want), (want_len), __LINE__)

/* Runs cmd in session and checks its exact stdout and exit code 0. */
static void expect_stdout(sbsh_conn* c, const char* session, const char* cmd, const char* want, int line) {
  sbsh_exec_opts o;
  sbsh_exec_opts_init(&o);
  o.session = session;
  expect_run(c, &o, cmd, want, strlen(want), line);
}

struct capture {
  char out[4096], err[4096];
  size_t out_len, err_len, calls, total;
  int bad_stream;
};
static void capture_output(void* user, int stream, const char* data, size_t len) {
  struct capture* cap = user;
  ++cap->calls;
  cap->total += len;
  char* buf = stream == 1 ? cap->out : cap->err;
  size_t* n = stream == 1 ? &cap->out_len : &cap->err_len;
  if (stream != 1 && stream != 2) ++cap->bad_stream;
  size_t room = sizeof cap->out - *n;
  memcpy(buf + *n, data, len < room ? len : room);
  *n += len < room ? len : room;
}

static int contains(const char* hay, const char* needle) { return hay != NULL && strstr(hay, needle) != NULL; }

/* The integer after "key": in a JSON text (first occurrence after `from`), or -1. */
static long json_int_after(const char* json, const char* from, const char* key) {
  const char* p = from != NULL ? strstr(json, from) : json;
  if (p == NULL || (p = strstr(p, key)) == NULL) return -1;
  p += strlen(key);
  return strtol(p, NULL, 10);
}

/* Polls until no process of group pgid exists (not even a zombie), for up to ms. */
static int group_gone_within(pid_t pgid, long ms) {
  for (long waited = 0;; waited += 20) {
    if (kill(-pgid, 0) == -1 && errno == ESRCH) return 1;
    if (waited >= ms) return 0;
    sleep_ms(20);
  }
}

/* ---- The checks ------------------------------------------------------------------------- */

static void test_connect_errors(void) {
  note("connect errors");
  sbsh_conn* c = NULL;
  char missing[256];
  snprintf(missing, sizeof missing, "%s/nothing-here.sock", run_dir);
  CHECK(sbsh_connect(missing, 0, &c) == SBSH_ERR_UNREACHABLE && c == NULL);
  CHECK(strcmp(sbsh_last_error_code(NULL), "unreachable") == 0);
  CHECK(contains(sbsh_last_error(NULL), "nothing-here.sock"));
  CHECK(strcmp(sbsh_error_name(SBSH_ERR_UNREACHABLE), "unreachable") == 0);
  CHECK(sbsh_connect(NULL, 0, NULL) == SBSH_ERR_INVALID);
  CHECK(sbsh_exec(NULL, NULL, NULL) == SBSH_ERR_INVALID && strlen(sbsh_last_error(NULL)) > 0);
}

static void test_exec(sbsh_conn* c) {
  note("exec: state, exact bytes, exit codes");
  sbsh_exec_opts o;
  sbsh_exec_opts_init(&o);
  o.session = "c-api";
  sbsh_result* r = run(c, &o, "cd /tmp && x=5 && f() { echo \"fn-$1\"; }");
  if (r != NULL) {
    CHECK(sbsh_result_has_exit_code(r) && sbsh_result_exit_code(r) == 0);
    sbsh_result_free(r);
  }
  expect_stdout(c, "c-api", "pwd; echo $x; f z", "/tmp\n5\nfn-z\n", __LINE__);

  int64_t before = now_ms();
  r = run(c, &o, "printf 'a\\0b\\377\\n'; printf 'e\\0rr' >&2; (exit 7)");
  if (r != NULL) {
    size_t n;
    const char* out = sbsh_result_stdout(r, &n);
    CHECK_BYTES(out, n, "a\0b\377\n", 5);
    out = sbsh_result_stderr(r, &n);
    CHECK_BYTES(out, n, "e\0rr", 4);
    CHECK(sbsh_result_has_exit_code(r) == 1 && sbsh_result_exit_code(r) == 7);
    CHECK(sbsh_result_signal(r) == 0);
    CHECK(!sbsh_result_timed_out(r) && !sbsh_result_cancelled(r) && !sbsh_result_shell_restarted(r));
    CHECK(sbsh_result_ran(r) == 1);
    CHECK(!sbsh_result_stdout_truncated(r) && !sbsh_result_stderr_truncated(r));
    CHECK(sbsh_result_duration_us(r) > 0 && sbsh_result_duration_us(r) < 10 * 1000 * 1000);
    CHECK(sbsh_result_started_at_ms(r) >= before - 2000 && sbsh_result_started_at_ms(r) <= now_ms() + 2000);
    CHECK(strcmp(sbsh_result_error(r), "") == 0);
    sbsh_result_free(r);
  }

  /* cwd and env apply to one command only (a subshell). */
  const char* env[] = {"ONE=1", "TWO=two words"};
  o.cwd = "/";
  o.env = env;
  o.env_count = 2;
  EXPECT_RUN(c, &o, "pwd; echo \"$ONE $TWO\"; x=changed", "/\n1 two words\n", 14);
  o.cwd = NULL;
  o.env = NULL;
  o.env_count = 0;
  expect_stdout(c, "c-api", "pwd; echo $x; echo ${ONE:-unset}", "/tmp\n5\nunset\n", __LINE__);

  /* A command killed by a signal: the signal, and 128+N as its exit status. */
  r = run(c, &o, "sh -c 'kill -TERM $$'");
  if (r != NULL) {
    CHECK(sbsh_result_signal(r) == SIGTERM);
    CHECK(sbsh_result_exit_code(r) == 128 + SIGTERM);
    sbsh_result_free(r);
  }
}

static void test_timeout_and_cancel(sbsh_conn* c) {
  note("exec: timeout, cancel");
  sbsh_exec_opts o;
  sbsh_exec_opts_init(&o);
  o.session = "c-api";
  o.timeout_ms = 300;
  int64_t t0 = now_ms();
  sbsh_result* r = run(c, &o, "sleep 30");
  if (r != NULL) {
    CHECK(sbsh_result_timed_out(r) == 1);
    CHECK(sbsh_result_signal(r) == SIGTERM);
    CHECK(now_ms() - t0 < 10000);
    CHECK(!sbsh_result_shell_restarted(r));
    sbsh_result_free(r);
  }
  /* The session survived the timeout with its state. */
  expect_stdout(c, "c-api", "pwd; echo $x", "/tmp\n5\n", __LINE__);

  sbsh_canceller* k = NULL;
  CHECK(sbsh_canceller_new(&k) == SBSH_OK && sbsh_canceller_fd(k) >= 0);
  o.timeout_ms = 0;
  o.cancel_fd = sbsh_canceller_fd(k);
  /* A cancel made before the exec is waiting in the canceller: the next exec stops at once. */
  sbsh_canceller_cancel(k);
  t0 = now_ms();
  r = run(c, &o, "sleep 30");
  if (r != NULL) {
    CHECK(sbsh_result_cancelled(r) == 1);
    CHECK(now_ms() - t0 < 10000);
    sbsh_result_free(r);
  }
  /* A cancel stops the whole text: what follows the stopped command never runs, and the
   * session keeps its state. */
  sbsh_canceller_cancel(k);
  r = run(c, &o, "sleep 30; echo after");
  if (r != NULL) {
    size_t n = 0;
    sbsh_result_stdout(r, &n);
    CHECK(sbsh_result_cancelled(r) == 1 && n == 0 && sbsh_result_ok(r) == 0);
    CHECK(sbsh_result_exit_code(r) != 0);
    sbsh_result_free(r);
  }
  o.cancel_fd = -1;
  expect_stdout(c, "c-api", "pwd; echo $x", "/tmp\n5\n", __LINE__);
  o.cancel_fd = sbsh_canceller_fd(k);
  /* reset discards a leftover request. */
  sbsh_canceller_cancel(k);
  sbsh_canceller_reset(k);
  r = run(c, &o, "true");
  if (r != NULL) {
    CHECK(sbsh_result_cancelled(r) == 0 && sbsh_result_exit_code(r) == 0);
    sbsh_result_free(r);
  }
  sbsh_canceller_free(k);
}

/* A shell lost between commands: the next result says the state was lost, once, and carries
 * a new generation. */
static void test_state_lost(sbsh_conn* c) {
  note("exec: a shell lost between commands");
  sbsh_exec_opts o;
  sbsh_exec_opts_init(&o);
  o.session = "c-lost";
  sbsh_result* r = run(c, &o, "echo $$");
  if (r == NULL) return;
  CHECK(sbsh_result_ok(r) == 1 && sbsh_result_state_lost(r) == 0);
  uint64_t gen = sbsh_result_generation(r);
  long shell = strtol(sbsh_result_stdout(r, NULL), NULL, 10);
  sbsh_result_free(r);
  CHECK(shell > 1 && kill((pid_t)shell, SIGKILL) == 0);
  /* The new shell may take a moment to start: the next command waits for it. A command that
   * reached the shell before sbshd knew it was gone reports the loss itself (shell_restarted),
   * and then the next one does not report it again. */
  int reported = 0;
  for (int tries = 0; tries < 200; ++tries) {
    r = run(c, &o, "true");
    if (r == NULL) return;
    if (!sbsh_result_shell_restarted(r)) break;
    reported = 1;
    sbsh_result_free(r);
    r = NULL;
  }
  CHECK(r != NULL);
  if (r == NULL) return;
  CHECK(sbsh_result_generation(r) != gen);
  if (reported) {
    CHECK(sbsh_result_state_lost(r) == 0);
  } else {
    CHECK(sbsh_result_state_lost(r) == 1);
    CHECK(strstr(sbsh_result_state_lost_reason(r), "signal 9") != NULL);
  }
  sbsh_result_free(r);
  r = run(c, &o, "true");
  if (r != NULL) {
    CHECK(sbsh_result_state_lost(r) == 0);
    sbsh_result_free(r);
  }
}

static void test_streaming_and_stdin(sbsh_conn* c) {
  note("exec: streaming, stdin, limits");
  sbsh_exec_opts o;
  sbsh_exec_opts_init(&o);
  o.session = "c-api";
  struct capture cap;
  memset(&cap, 0, sizeof cap);
  o.on_output = capture_output;
  o.user = &cap;
  sbsh_result* r = run(c, &o, "printf 'o1\\0'; printf 'e1' >&2; sleep 0.1; printf 'o2'");
  if (r != NULL) {
    CHECK_BYTES(cap.out, cap.out_len, "o1\0o2", 5);
    CHECK_BYTES(cap.err, cap.err_len, "e1", 2);
    CHECK(cap.bad_stream == 0 && cap.calls >= 2);
    size_t n;
    sbsh_result_stdout(r, &n);
    CHECK(n == 0); /* streamed, not kept */
    CHECK(sbsh_result_exit_code(r) == 0);
    sbsh_result_free(r);
  }
  memset(&cap, 0, sizeof cap);
  r = run(c, &o, "head -c 300000 /dev/zero");
  if (r != NULL) {
    CHECK(cap.total == 300000);
    sbsh_result_free(r);
  }
  o.on_output = NULL;
  o.user = NULL;

  /* stdin: exact bytes, then EOF; without input, a reader gets EOF at once. */
  o.stdin_data = "hello\0world";
  o.stdin_len = 11;
  EXPECT_RUN(c, &o, "cat", "hello\0world", 11);
  o.stdin_data = NULL;
  o.stdin_len = 0;
  expect_stdout(c, "c-api", "cat; echo done", "done\n", __LINE__);

  /* stdin from a descriptor, until EOF. */
  int p[2];
  if (CHECK(pipe(p) == 0)) {
    CHECK(write(p[1], "from fd", 7) == 7);
    close(p[1]);
    o.stdin_fd = p[0];
    EXPECT_RUN(c, &o, "cat", "from fd", 7);
    close(p[0]);
    o.stdin_fd = -1;
  }

  /* A command that stops reading early must not kill us with SIGPIPE: once it ends, the
   * shell closes the pipe while libsbsh may still be writing the rest. (A race: try a few
   * times; without the library's guard this process dies of SIGPIPE most of the time.) */
  size_t big = 20u << 20;
  char* data = malloc(big);
  if (CHECK(data != NULL)) {
    memset(data, 'x', big);
    o.stdin_data = data;
    o.stdin_len = big;
    for (int i = 0; i < 5; ++i) EXPECT_RUN(c, &o, "head -c 5 | wc -c", "5\n", 2);
    free(data);
    o.stdin_data = NULL;
    o.stdin_len = 0;
  }

  /* Output past the limit is dropped and reported. */
  o.output_limit = 1000;
  r = run(c, &o, "head -c 5000 /dev/zero; echo e >&2");
  if (r != NULL) {
    size_t n;
    sbsh_result_stdout(r, &n);
    CHECK(n == 1000 && sbsh_result_stdout_truncated(r) == 1 && sbsh_result_stdout_omitted(r) == 4000);
    sbsh_result_stderr(r, &n);
    CHECK(n == 2 && sbsh_result_stderr_truncated(r) == 0 && sbsh_result_stderr_omitted(r) == 0);
    sbsh_result_free(r);
  }
}

/* A command that outlives the call: detached, awaited, and another one killed. */
static void test_detached(sbsh_conn* c) {
  sbsh_exec_opts o;
  sbsh_exec_opts_init(&o);
  o.session = "capi-detach";
  o.detach_after_ms = 200;
  sbsh_result* r = run(c, &o, "echo first; sleep 1; echo second");
  if (r == NULL) return;
  uint64_t id = sbsh_result_command_id(r);
  CHECK(sbsh_result_running(r) == 1 && id != 0 && sbsh_result_has_exit_code(r) == 0);
  sbsh_result_free(r);
  r = NULL;
  if (CHECK(sbsh_await_command(c, id, 0, 0, &r) == SBSH_OK && r != NULL)) {
    size_t n;
    const char* out = sbsh_result_stdout(r, &n);
    CHECK(sbsh_result_running(r) == 0 && sbsh_result_exit_code(r) == 0);
    CHECK(n == 13 && memcmp(out, "first\nsecond\n", 13) == 0);
    sbsh_result_free(r);
  }
  r = run(c, &o, "sleep 30");
  if (r == NULL) return;
  id = sbsh_result_command_id(r);
  CHECK(sbsh_result_running(r) == 1);
  sbsh_result_free(r);
  r = NULL;
  if (CHECK(sbsh_kill_command(c, id, 0, &r) == SBSH_OK && r != NULL)) {
    CHECK(sbsh_result_cancelled(r) == 1 && sbsh_result_running(r) == 0);
    sbsh_result_free(r);
  }
  r = NULL;
  CHECK(sbsh_await_command(c, 987654321, 0, 0, &r) == SBSH_ERR_NOT_FOUND && r == NULL);
}

static void test_errors(sbsh_conn* c) {
  note("errors: refused, invalid, not found");
  sbsh_exec_opts o;
  sbsh_exec_opts_init(&o);
  o.session = "bad name";
  o.command = "true";
  sbsh_result* r = NULL;
  CHECK(sbsh_exec(c, &o, &r) == SBSH_ERR_REFUSED && r == NULL);
  CHECK(strcmp(sbsh_last_error_code(c), "invalid_session_name") == 0);
  CHECK(contains(sbsh_last_error(c), "bad name"));
  CHECK(strcmp(sbsh_last_error_code(NULL), "invalid_session_name") == 0); /* per thread too */

  sbsh_exec_opts zeroed;
  memset(&zeroed, 0, sizeof zeroed);
  zeroed.command = "true";
  CHECK(sbsh_exec(c, &zeroed, &r) == SBSH_ERR_INVALID && r == NULL);
  CHECK(contains(sbsh_last_error(c), "sbsh_exec_opts_init"));
  sbsh_exec_opts_init(&o);
  o.timeout_ms = -1;
  o.command = "true";
  CHECK(sbsh_exec(c, &o, &r) == SBSH_ERR_INVALID);
  o.timeout_ms = 0;
  const char* bad_env[] = {"A=1", NULL};
  o.env = bad_env;
  o.env_count = 2;
  CHECK(sbsh_exec(c, &o, &r) == SBSH_ERR_INVALID && contains(sbsh_last_error(c), "env[1]"));

  /* The connection still works after refusals, and a success clears the message. */
  expect_stdout(c, "c-api", "echo ok", "ok\n", __LINE__);
  CHECK(strcmp(sbsh_last_error(c), "") == 0);
  CHECK(sbsh_session_remove(c, "no-such-session") == SBSH_ERR_NOT_FOUND);
  CHECK(strcmp(sbsh_last_error_code(c), "no_such_session") == 0);
  CHECK(sbsh_wait(c, "no-such-process", 0, NULL) == SBSH_ERR_NOT_FOUND);
}

static void test_sessions(sbsh_conn* c) {
  note("sessions: create, list, show, restart, remove");
  const char* env[] = {"Z=zz"};
  const char* init[] = {"Y=from-init", "cd /"};
  CHECK(sbsh_session_create(c, "made", "/tmp", env, 1, init, 2, "on-failure") == SBSH_OK);
  CHECK(sbsh_session_create(c, "made", "/tmp", env, 1, init, 2, "on-failure") == SBSH_OK); /* same: no-op */
  CHECK(sbsh_session_create(c, "made", "/var", env, 1, init, 2, "on-failure") == SBSH_ERR_REFUSED);
  CHECK(strcmp(sbsh_last_error_code(c), "session_exists") == 0);
  expect_stdout(c, "made", "echo $Y $Z; pwd", "from-init zz\n/\n", __LINE__);

  char* json = NULL;
  CHECK(sbsh_sessions_json(c, &json) == SBSH_OK && json != NULL && json[0] == '[');
  CHECK(contains(json, "\"name\":\"made\"") && contains(json, "\"name\":\"c-api\""));
  CHECK(contains(json, "\"restart\":\"on-failure\""));
  sbsh_free(json);
  json = NULL;
  CHECK(sbsh_session_show_json(c, "made", &json) == SBSH_OK);
  CHECK(contains(json, "\"init\":[\"Y=from-init\",\"cd /\"]") && contains(json, "\"env\":[\"Z=zz\"]"));
  CHECK(contains(json, "\"command\":\"echo $Y $Z; pwd\""));
  sbsh_free(json);

  const char* limits[] = {"nofile=48", "fsize=1M:2M"};
  CHECK(sbsh_session_create_limited(c, "capped", NULL, NULL, 0, NULL, 0, NULL, limits, 2) == SBSH_OK);
  expect_stdout(c, "capped", "ulimit -n; ulimit -Sf; ulimit -Hf", "48\n1024\n2048\n", __LINE__);
  const char* bad[] = {"nofile=many"};
  CHECK(sbsh_session_create_limited(c, "capped2", NULL, NULL, 0, NULL, 0, NULL, bad, 1) == SBSH_ERR_REFUSED);
  CHECK(strcmp(sbsh_last_error_code(c), "bad_request") == 0 && contains(sbsh_last_error(c), "limit nofile"));

  /* A session made from a snapshot copy, through the versioned spec. */
  char src[sizeof dir + 16], copy[sizeof state_dir + 32], want[sizeof copy + 16];
  snprintf(src, sizeof src, "%s/snapsrc", dir);
  snprintf(copy, sizeof copy, "%s/snapshots/snap", state_dir);
  snprintf(want, sizeof want, "orig\n%s\n", copy);
  CHECK(mkdir(src, 0700) == 0);
  char path[sizeof src + 8];
  snprintf(path, sizeof path, "%s/f", src);
  FILE* f = fopen(path, "w");
  CHECK(f != NULL && fputs("orig\n", f) >= 0 && fclose(f) == 0);
  sbsh_session_spec spec;
  sbsh_session_spec_init(&spec);
  spec.name = "snap";
  spec.snapshot = src;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_OK);
  expect_stdout(c, "snap", "cat f; pwd; echo changed > f", want, __LINE__);
  char line[16] = "";
  f = fopen(path, "r");
  CHECK(f != NULL && fgets(line, sizeof line, f) != NULL && strcmp(line, "orig\n") == 0);
  fclose(f);
  spec.version = 0;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_ERR_INVALID && contains(sbsh_last_error(c), "sbsh_session_spec_init"));
  CHECK(sbsh_session_remove(c, "snap") == SBSH_OK);
  CHECK(access(copy, F_OK) != 0 && errno == ENOENT);

  /* A session with a root: its shells start there with SBSH_ROOT; exec's cwd stays beneath it. */
  char real[4096], rooted[2 * sizeof real + 8];
  CHECK(realpath(src, real) != NULL);
  sbsh_session_spec_init(&spec);
  spec.name = "rooted";
  spec.root = src;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_OK);
  snprintf(rooted, sizeof rooted, "%s %s\n", real, real);
  expect_stdout(c, "rooted", "echo \"$(pwd) $SBSH_ROOT\"", rooted, __LINE__);
  {
    sbsh_exec_opts ro;
    sbsh_exec_opts_init(&ro);
    ro.session = "rooted";
    ro.cwd = "..";
    ro.command = "true";
    sbsh_result* rr = NULL;
    CHECK(sbsh_exec(c, &ro, &rr) == SBSH_ERR_REFUSED && rr == NULL);
    CHECK(strcmp(sbsh_last_error_code(c), "outside_root") == 0 && contains(sbsh_last_error(c), "'..'"));
  }
  CHECK(sbsh_session_remove(c, "rooted") == SBSH_OK);

  /* A setup builds the session's environment (SBSH_ENV) before the call returns; a failed one
   * says why. */
  sbsh_session_spec_init(&spec);
  spec.name = "envd";
  spec.cwd = src;
  spec.setup = "echo built > \"$SBSH_ENV/mark\"";
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_OK);
  expect_stdout(c, "envd", "cat \"$SBSH_ENV/mark\"", "built\n", __LINE__);
  CHECK(sbsh_session_remove(c, "envd") == SBSH_OK);
  spec.name = "envbad";
  spec.setup = "echo cannot >&2; exit 5";
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_ERR_REFUSED);
  CHECK(strcmp(sbsh_last_error_code(c), "setup_failed") == 0 && contains(sbsh_last_error(c), "cannot"));

  expect_stdout(c, "made", "W=set; echo $W", "set\n", __LINE__);
  CHECK(sbsh_session_restart(c, "made") == SBSH_OK);
  expect_stdout(c, "made", "echo ${W:-gone} $Y", "gone from-init\n", __LINE__);

  /* A session that ended and is not restarted runs nothing, and its results say so. */
  CHECK(sbsh_session_create(c, "never", NULL, NULL, 0, NULL, 0, "never") == SBSH_OK);
  sbsh_exec_opts o;
  sbsh_exec_opts_init(&o);
  o.session = "never";
  sbsh_result* r = run(c, &o, "exit 0");
  if (r != NULL) {
    CHECK(sbsh_result_ran(r) == 1 && sbsh_result_shell_restarted(r) == 1);
    sbsh_result_free(r);
  }
  r = run(c, &o, "echo no");
  if (r != NULL) {
    CHECK(sbsh_result_ran(r) == 0 && sbsh_result_has_exit_code(r) == 0);
    CHECK(contains(sbsh_result_error(r), "restart"));
    sbsh_result_free(r);
  }
  CHECK(sbsh_session_remove(c, "never") == SBSH_OK);

  CHECK(sbsh_session_remove(c, "made") == SBSH_OK);
  json = NULL;
  CHECK(sbsh_sessions_json(c, &json) == SBSH_OK && !contains(json, "\"name\":\"made\""));
  sbsh_free(json);
  CHECK(sbsh_session_remove(c, "made") == SBSH_ERR_NOT_FOUND);
}

/* A file of one line, for the tests below. */
static void write_file(const char* path, const char* text) {
  FILE* f = fopen(path, "w");
  CHECK(f != NULL && fputs(text, f) >= 0 && fclose(f) == 0);
}

/* Runs cmd in session and gives its exit code (-1: none), stdout and stderr (NUL-terminated,
 * cut to the buffers). */
static int run_in(sbsh_conn* c, const char* session, const char* cmd, char* out, size_t out_size, char* err,
                  size_t err_size) {
  sbsh_exec_opts o;
  sbsh_exec_opts_init(&o);
  o.session = session;
  sbsh_result* r = run(c, &o, cmd);
  out[0] = err[0] = '\0';
  if (r == NULL) return -1;
  size_t n;
  const char* p = sbsh_result_stdout(r, &n);
  snprintf(out, out_size, "%.*s", (int)n, p);
  p = sbsh_result_stderr(r, &n);
  snprintf(err, err_size, "%.*s", (int)n, p);
  int code = sbsh_result_exit_code(r);
  CHECK(sbsh_result_oom_killed(r) == 0);
  sbsh_result_free(r);
  return code;
}

/* Sessions the kernel confines, through spec version 4: a confined one reads its root and
 * not a file beside it; no_network and the cgroup limits reach sbshd and read back; what is
 * wrong is refused before anything is asked of sbshd; an older version's fields are all
 * that is read or written. */
static void test_confine(sbsh_conn* c) {
  note("confinement: spec version 4");
  char root[sizeof dir + 16], secret[sizeof dir + 16], path[sizeof root + 16], cmd[sizeof secret + 16];
  char out[256], err[512];
  snprintf(root, sizeof root, "%s/box", dir);
  snprintf(secret, sizeof secret, "%s/secret", dir);
  CHECK(mkdir(root, 0700) == 0);
  snprintf(path, sizeof path, "%s/inside", root);
  write_file(path, "inside\n");
  write_file(secret, "secret\n");
  snprintf(cmd, sizeof cmd, "cat %s", secret);

  /* An older version's structure is filled only as far as it goes, and its fields are all
   * that is read: version 3 with confine set past its end makes an unconfined session. */
  union {
    sbsh_session_spec spec;
    unsigned char bytes[sizeof(sbsh_session_spec)];
  } old;
  memset(&old, 0xab, sizeof old);
  sbsh_session_spec_init_size(&old.spec, offsetof(sbsh_session_spec, confine));
  CHECK(old.spec.version == 3 && old.spec.name == NULL && old.spec.setup_key_count == 0);
  CHECK(old.bytes[offsetof(sbsh_session_spec, confine)] == 0xab && old.bytes[sizeof old - 1] == 0xab);
  memset(&old, 0xab, sizeof old);
  (sbsh_session_spec_init)(&old.spec); /* the function programs built before the macro call */
  CHECK(old.spec.version == 1 && old.spec.snapshot == NULL && old.bytes[offsetof(sbsh_session_spec, root)] == 0xab);
  sbsh_session_spec spec;
  sbsh_session_spec_init(&spec);
  CHECK(spec.version == SBSH_SESSION_SPEC_VERSION && spec.version == 4 && spec.confine == 0 && spec.cpu_millis == 0);
  spec.name = "v3";
  spec.root = root;
  spec.version = 3;
  spec.confine = 1;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_OK);
  CHECK(run_in(c, "v3", cmd, out, sizeof out, err, sizeof err) == 0 && strcmp(out, "secret\n") == 0);
  CHECK(sbsh_session_remove(c, "v3") == SBSH_OK);

  sbsh_session_spec_init(&spec);
  spec.name = "box";
  spec.root = root;
  spec.confine = 1;
  int rc = sbsh_session_create_spec(c, &spec);
  if (rc == SBSH_ERR_REFUSED && strcmp(sbsh_last_error_code(c), "not_supported") == 0) {
    note("confinement skipped: %s", sbsh_last_error(c));
    return;
  }
  if (!CHECK(rc == SBSH_OK)) {
    fprintf(stderr, "  create box: %s\n", sbsh_last_error(c));
    return;
  }
  CHECK(run_in(c, "box", "cat inside", out, sizeof out, err, sizeof err) == 0 && strcmp(out, "inside\n") == 0);
  CHECK(run_in(c, "box", cmd, out, sizeof out, err, sizeof err) != 0 && out[0] == '\0');
  if (!CHECK(contains(err, "Permission denied"))) fprintf(stderr, "  stderr: %s\n", err);
  char* json = NULL;
  CHECK(sbsh_session_show_json(c, "box", &json) == SBSH_OK);
  CHECK(json_int_after(json, "\"confinement\"", "\"landlock_abi\":") >= 1);
  CHECK(contains(json, "\"namespaces\":[\"pid\"]"));
  sbsh_free(json);
  CHECK(sbsh_session_remove(c, "box") == SBSH_OK);

  /* Paths added to the rules: read-only here, so the secret beside the root can be read. */
  const char* ro[] = {secret};
  sbsh_session_spec_init(&spec);
  spec.name = "box2";
  spec.root = root;
  spec.confine = 1;
  spec.read_only = ro;
  spec.read_only_count = 1;
  spec.no_network = 1;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_OK);
  CHECK(run_in(c, "box2", cmd, out, sizeof out, err, sizeof err) == 0 && strcmp(out, "secret\n") == 0);
  json = NULL;
  CHECK(sbsh_session_show_json(c, "box2", &json) == SBSH_OK);
  CHECK(contains(json, "\"access\":\"read-only\"") && contains(json, "\"namespaces\":[\"pid\",\"net\"]"));
  sbsh_free(json);
  CHECK(sbsh_session_remove(c, "box2") == SBSH_OK);

  /* A memory limit reaches sbshd: made where a cgroup v2 is delegated to it, else refused
   * with the reason. */
  sbsh_session_spec_init(&spec);
  spec.name = "capped-mem";
  spec.memory_max = 256u << 20;
  rc = sbsh_session_create_spec(c, &spec);
  if (rc == SBSH_OK) {
    json = NULL;
    CHECK(sbsh_session_show_json(c, "capped-mem", &json) == SBSH_OK);
    CHECK(json_int_after(json, "\"confinement\"", "\"memory_max\":") == 256L << 20);
    sbsh_free(json);
    CHECK(sbsh_session_remove(c, "capped-mem") == SBSH_OK);
  } else {
    CHECK(rc == SBSH_ERR_REFUSED && strcmp(sbsh_last_error_code(c), "not_supported") == 0);
    if (!CHECK(contains(sbsh_last_error(c), "memory") || contains(sbsh_last_error(c), "cgroup")))
      fprintf(stderr, "  memory refused: %s\n", sbsh_last_error(c));
  }

  /* What is wrong is refused, saying what. */
  const char* relative[] = {"out"};
  sbsh_session_spec_init(&spec);
  spec.name = "bad";
  spec.root = root;
  spec.allow_write = relative;
  spec.allow_write_count = 1;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_ERR_INVALID && contains(sbsh_last_error(c), "set confine too"));
  spec.confine = 1;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_ERR_INVALID && contains(sbsh_last_error(c), "'out'") &&
        contains(sbsh_last_error(c), "must be absolute"));
  spec.allow_write_count = 0;
  spec.root = NULL;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_ERR_INVALID && contains(sbsh_last_error(c), "set root or snapshot"));
}

static void test_files(sbsh_conn* c) {
  note("files beneath a session's root: write, read, stat, list, move, remove, confinement");
  char src[sizeof dir + 16], copy[sizeof state_dir + 32], path[sizeof copy + 32];
  snprintf(src, sizeof src, "%s/filesrc", dir);
  snprintf(copy, sizeof copy, "%s/snapshots/files", state_dir);
  CHECK(mkdir(src, 0700) == 0);
  sbsh_session_spec spec;
  sbsh_session_spec_init(&spec);
  spec.name = "files";
  spec.snapshot = src;
  CHECK(sbsh_session_create_spec(c, &spec) == SBSH_OK);

  static const char bytes[] = {'a', '\0', (char)0xff, '\n', 'z'};
  CHECK(sbsh_file_write(c, "files", "d/one", bytes, sizeof bytes, 0600, 1) == SBSH_OK);
  char* data = NULL;
  size_t len = 0;
  CHECK(sbsh_file_read(c, "files", "d/one", 0, -1, &data, &len) == SBSH_OK);
  check_bytes(data, len, bytes, sizeof bytes, __LINE__);
  sbsh_free(data);
  CHECK(sbsh_file_read(c, "files", "d/one", 1, 2, &data, &len) == SBSH_OK);
  check_bytes(data, len, bytes + 1, 2, __LINE__);
  sbsh_free(data);
  struct stat st;
  snprintf(path, sizeof path, "%s/d/one", copy);
  CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600);

  /* Through descriptors: a pipe in, a file out. */
  int p[2];
  CHECK(pipe(p) == 0);
  CHECK(write(p[1], "piped\n", 6) == 6);
  close(p[1]);
  uint64_t n = 0;
  CHECK(sbsh_file_write_fd(c, "files", "two", p[0], -1, 0, &n) == SBSH_OK && n == 6);
  close(p[0]);
  char out_path[sizeof dir + 16];
  snprintf(out_path, sizeof out_path, "%s/two.out", dir);
  int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(out >= 0 && sbsh_file_read_fd(c, "files", "two", out, 0, -1, &n) == SBSH_OK && n == 6);
  close(out);
  char line[16] = "";
  FILE* f = fopen(out_path, "r");
  CHECK(f != NULL && fgets(line, sizeof line, f) != NULL && strcmp(line, "piped\n") == 0);
  if (f != NULL) fclose(f);

  char* json = NULL;
  CHECK(sbsh_file_stat_json(c, "files", "d/one", &json) == SBSH_OK);
  CHECK(contains(json, "\"type\":\"file\"") && contains(json, "\"size\":5") && contains(json, "\"mode\":\"0600\""));
  sbsh_free(json);
  CHECK(sbsh_file_mkdir(c, "files", "e/f", 1) == SBSH_OK);
  CHECK(sbsh_file_move(c, "files", "two", "e/f/two") == SBSH_OK);
  json = NULL;
  CHECK(sbsh_file_list_json(c, "files", NULL, 1, &json) == SBSH_OK);
  CHECK(contains(json, "\"path\":\"e/f/two\"") && contains(json, "\"path\":\"d/one\"") && !contains(json, "\"path\":\"two\""));
  sbsh_free(json);
  CHECK(sbsh_file_remove(c, "files", "e", 0) == SBSH_ERR_REFUSED);
  CHECK(strcmp(sbsh_last_error_code(c), "file_failed") == 0);
  CHECK(sbsh_file_remove(c, "files", "e", 1) == SBSH_OK);

  CHECK(sbsh_file_read(c, "files", "../../../etc/passwd", 0, -1, &data, &len) == SBSH_ERR_REFUSED);
  CHECK(strcmp(sbsh_last_error_code(c), "outside_root") == 0 && contains(sbsh_last_error(c), "'../../../etc/passwd'"));
  CHECK(sbsh_file_write(c, "files", "/etc/sbsh-must-not-exist", "x", 1, -1, 1) == SBSH_ERR_REFUSED);
  CHECK(strcmp(sbsh_last_error_code(c), "outside_root") == 0);
  CHECK(access("/etc/sbsh-must-not-exist", F_OK) != 0);
  CHECK(sbsh_file_read(c, "c-api", "x", 0, -1, &data, &len) == SBSH_ERR_REFUSED);
  CHECK(strcmp(sbsh_last_error_code(c), "no_root") == 0);
  CHECK(sbsh_file_read(c, "files", NULL, 0, -1, &data, &len) == SBSH_ERR_INVALID);
  CHECK(sbsh_session_remove(c, "files") == SBSH_OK);
}

static void test_processes(sbsh_conn* c) {
  note("background processes: start, wait, logs, list, kill");
  uint64_t id = 0;
  CHECK(sbsh_start(c, "echo out-$P; echo err >&2; exit 4", "c-api", "job", NULL, (const char* []){"P=p"}, 1, &id) ==
            SBSH_OK &&
        id > 0);
  sbsh_proc* p = NULL;
  CHECK(sbsh_wait(c, "job", 10000, &p) == SBSH_OK && p != NULL);
  if (p != NULL) {
    CHECK(sbsh_proc_id(p) == id && strcmp(sbsh_proc_name(p), "job") == 0);
    CHECK(strcmp(sbsh_proc_state(p), "exited") == 0);
    CHECK(sbsh_proc_has_exit_code(p) && sbsh_proc_exit_code(p) == 4 && sbsh_proc_signal(p) == 0);
    CHECK(strcmp(sbsh_proc_session(p), "c-api") == 0);
    CHECK(sbsh_proc_ended_at_ms(p) >= sbsh_proc_started_at_ms(p) && sbsh_proc_started_at_ms(p) > 0);
    CHECK(strlen(sbsh_proc_log_path(p)) > 0);
    sbsh_proc_free(p);
  }
  struct capture cap;
  memset(&cap, 0, sizeof cap);
  CHECK(sbsh_logs(c, "job", 0, 0, 0, -1, capture_output, &cap, NULL) == SBSH_OK);
  CHECK_BYTES(cap.out, cap.out_len, "out-p\n", 6);
  CHECK_BYTES(cap.err, cap.err_len, "err\n", 4);
  memset(&cap, 0, sizeof cap);
  char idstr[32];
  snprintf(idstr, sizeof idstr, "%llu", (unsigned long long)id);
  CHECK(sbsh_logs(c, idstr, 0, 0, 2, -1, capture_output, &cap, NULL) == SBSH_OK); /* by id, stderr only */
  CHECK(cap.out_len == 0);
  CHECK_BYTES(cap.err, cap.err_len, "err\n", 4);

  char* json = NULL;
  CHECK(sbsh_processes_json(c, 1, &json) == SBSH_OK && contains(json, "\"name\":\"job\""));
  CHECK(contains(json, "\"exit_code\":4"));
  sbsh_free(json);
  json = NULL;
  CHECK(sbsh_processes_json(c, 0, &json) == SBSH_OK && !contains(json, "\"name\":\"job\""));
  sbsh_free(json);

  /* logs --follow streams until the process ends. */
  CHECK(sbsh_start(c, "for i in 1 2 3; do echo $i; sleep 0.1; done", "c-api", "ticker", NULL, NULL, 0, NULL) ==
        SBSH_OK);
  memset(&cap, 0, sizeof cap);
  p = NULL;
  CHECK(sbsh_logs(c, "ticker", 1, 0, 0, -1, capture_output, &cap, &p) == SBSH_OK);
  CHECK_BYTES(cap.out, cap.out_len, "1\n2\n3\n", 6);
  CHECK(p != NULL && strcmp(sbsh_proc_state(p), "exited") == 0);
  sbsh_proc_free(p);

  /* A process tree: a timeout of wait leaves it running; kill ends all of it. */
  CHECK(sbsh_start(c, "sleep 100 & sleep 100; wait", "c-api", "long", NULL, NULL, 0, NULL) == SBSH_OK);
  /* A follow ends early through a canceller (here, one asked before): the process goes on. */
  sbsh_canceller* k = NULL;
  CHECK(sbsh_canceller_new(&k) == SBSH_OK);
  sbsh_canceller_cancel(k);
  p = NULL;
  int64_t t0 = now_ms();
  CHECK(sbsh_logs(c, "long", 1, 0, 0, sbsh_canceller_fd(k), capture_output, &cap, &p) == SBSH_OK);
  CHECK(now_ms() - t0 < 10000);
  CHECK(p != NULL && strcmp(sbsh_proc_state(p), "running") == 0);
  sbsh_proc_free(p);
  sbsh_canceller_free(k);
  p = (sbsh_proc*)1;
  CHECK(sbsh_wait(c, "long", 200, &p) == SBSH_ERR_TIMEOUT && p == (sbsh_proc*)1);
  CHECK(strcmp(sbsh_last_error_code(c), "timeout") == 0);
  json = NULL;
  CHECK(sbsh_processes_json(c, 0, &json) == SBSH_OK);
  long pid = json != NULL ? json_int_after(json, "\"name\":\"long\"", "\"pid\":") : -1;
  sbsh_free(json);
  CHECK(pid > 1 && kill((pid_t)-pid, 0) == 0);
  p = NULL;
  CHECK(sbsh_kill(c, "long", SIGTERM, &p) == SBSH_OK && p != NULL);
  if (p != NULL) {
    CHECK(strcmp(sbsh_proc_state(p), "killed") == 0 && sbsh_proc_signal(p) == SIGTERM);
    CHECK(sbsh_proc_pid(p) == pid);
    sbsh_proc_free(p);
  }
  /* The whole group goes: kill returns when the leader has ended; its children were
   * signalled with it and are reaped by the wrapper (a subreaper) moments later. */
  if (pid > 1) CHECK(group_gone_within((pid_t)pid, 5000));
}

struct events {
  int count, finished, unterminated;
};
static void count_event(void* user, const char* json, size_t len) {
  struct events* ev = user;
  ++ev->count;
  if (json[len] != '\0' || json[0] != '{' || json[len - 1] != '}') ++ev->unterminated;
  if (strstr(json, "\"event\":\"plan_finished\"") != NULL) ++ev->finished;
}

static char* read_whole(const char* path) {
  static char buf[65536];
  FILE* f = fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return buf;
}

static void test_plans(sbsh_conn* c) {
  note("plans: run, report, events, invalid plans, cancel");
  const char* plan =
      "{\"stages\": [{\"name\": \"a\", \"commands\": [\"export P=1\", \"echo $P\"]},"
      " {\"name\": \"b\", \"expect\": \"failure\", \"commands\": [\"(exit 3)\"]}]}";
  char report_path[256], events_path[256];
  snprintf(report_path, sizeof report_path, "%s/report.json", dir);
  snprintf(events_path, sizeof events_path, "%s/events.jsonl", dir);
  sbsh_run_opts o;
  sbsh_run_opts_init(&o);
  CHECK(o.version == SBSH_RUN_OPTS_VERSION && o.events_fd == -1 && o.cancel_fd == -1);
  struct events ev = {0, 0, 0};
  o.on_event = count_event;
  o.user = &ev;
  o.report_path = report_path;
  o.events_path = events_path;
  char* report = NULL;
  int status = -1;
  if (!CHECK(sbsh_run_plan(c, plan, strlen(plan), NULL, &o, &report, &status) == SBSH_OK && report != NULL)) {
    fprintf(stderr, "  run_plan: %s\n", sbsh_last_error(c));
    return;
  }
  CHECK(status == 0);
  CHECK(contains(report, "\"status\":\"passed\""));
  CHECK(contains(report, "\"stdout\":\"1\\n\""));  /* state carried from one command to the next */
  CHECK(json_int_after(report, "\"(exit 3)\"", "\"exit_code\":") == 3);
  /* plan, 2 stages x (start, finish), 3 commands x (start, finish), plan: 12 events. */
  CHECK(ev.count == 12 && ev.finished == 1 && ev.unterminated == 0);
  char* saved = read_whole(report_path);
  CHECK(saved != NULL && strncmp(saved, report, strlen(report)) == 0 && saved[strlen(report)] == '\n');
  saved = read_whole(events_path);
  CHECK(saved != NULL && contains(saved, "{\"event\":\"plan_started\"") && contains(saved, "\"event\":\"plan_finished\""));
  sbsh_free(report);

  /* YAML, and a stage that does not meet its expectation: status 1. */
  const char* yaml = "stages:\n  - {name: s, commands: ['false', 'true']}\n";
  sbsh_run_opts_init(&o);
  report = NULL;
  CHECK(sbsh_run_plan(c, yaml, strlen(yaml), "yaml", &o, &report, &status) == SBSH_OK && status == 1);
  CHECK(contains(report, "\"status\":\"failed\"") && contains(report, "\"status\":\"skipped\""));
  sbsh_free(report);

  /* Invalid plans: nothing runs, and the message names the field. */
  const char* bad = "stages:\n  - {name: a, commands: [x]}\n  - {name: b, commands: [{run: make, timeout: 10 minutes}]}\n";
  CHECK(sbsh_plan_check(bad, strlen(bad), NULL) == SBSH_ERR_INVALID);
  CHECK(strcmp(sbsh_last_error_code(NULL), "invalid_plan") == 0);
  CHECK(contains(sbsh_last_error(NULL), "stages[1].commands[0].timeout: \"10 minutes\" is not a duration"));
  CHECK(sbsh_plan_check(plan, strlen(plan), "json") == SBSH_OK);
  CHECK(sbsh_plan_check(plan, strlen(plan), "xml") == SBSH_ERR_INVALID);
  report = NULL;
  CHECK(sbsh_run_plan(c, bad, strlen(bad), NULL, &o, &report, &status) == SBSH_ERR_INVALID && report == NULL);
  CHECK(contains(sbsh_last_error(c), "stages[1].commands[0].timeout"));
  sbsh_run_opts zeroed;
  memset(&zeroed, 0, sizeof zeroed);
  CHECK(sbsh_run_plan(c, plan, strlen(plan), NULL, &zeroed, NULL, NULL) == SBSH_ERR_INVALID);
  CHECK(contains(sbsh_last_error(c), "sbsh_run_opts_init"));

  /* From a file, with a canceller that was cancelled before: nothing runs, the report says
   * cancelled, and the status is 130. */
  char plan_path[256];
  snprintf(plan_path, sizeof plan_path, "%s/plan.yaml", dir);
  FILE* f = fopen(plan_path, "w");
  if (!CHECK(f != NULL)) return;
  fputs("stages: [{name: s, commands: ['touch never']}]\n", f);
  fclose(f);
  sbsh_canceller* k = NULL;
  CHECK(sbsh_canceller_new(&k) == SBSH_OK);
  sbsh_canceller_cancel(k);
  o.cancel_fd = sbsh_canceller_fd(k);
  report = NULL;
  CHECK(sbsh_run_plan_file(c, plan_path, &o, &report, &status) == SBSH_OK && status == 130);
  CHECK(contains(report, "\"status\":\"cancelled\""));
  sbsh_free(report);
  sbsh_canceller_free(k);
  o.cancel_fd = -1;
  snprintf(plan_path, sizeof plan_path, "%s/no-such-plan.yaml", dir);
  CHECK(sbsh_run_plan_file(c, plan_path, &o, NULL, NULL) == SBSH_ERR_INVALID);
  CHECK(strcmp(sbsh_last_error_code(c), "file") == 0 && contains(sbsh_last_error(c), "no-such-plan.yaml"));
  /* The connection serves on. */
  expect_stdout(c, "after-plans", "echo after", "after\n", __LINE__);
}

static void test_status_and_shutdown(sbsh_conn* c) {
  note("status, shutdown");
  char* json = NULL;
  CHECK(sbsh_status_json(c, &json) == SBSH_OK);
  CHECK(json_int_after(json, NULL, "\"pid\":") == (long)daemon_pid);
  CHECK(contains(json, "\"version\":\"") && contains(json, sock));
  CHECK(json_int_after(json, "\"counters\":", "\"commands\":") > 0); /* the commands run above */
  CHECK(json_int_after(json, "\"counters\":", "\"clients\":") >= 1);
  long shell = json != NULL ? json_int_after(json, "\"name\":\"c-api\"", "\"shell_pid\":") : -1;
  sbsh_free(json);
  CHECK(shell > 1 && kill((pid_t)shell, 0) == 0);

  CHECK(sbsh_shutdown(c) == SBSH_OK);
  CHECK(sbsh_status_json(c, &json) == SBSH_ERR_IO); /* the handle is done */
  sbsh_close(c);
  int st = 0;
  pid_t got = 0;
  for (int i = 0; i < 600 && got == 0; ++i) {
    got = waitpid(daemon_pid, &st, WNOHANG);
    if (got == 0) sleep_ms(50);
  }
  CHECK(got == daemon_pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  if (got == daemon_pid) {
    CHECK(kill(daemon_pid, 0) == -1 && errno == ESRCH);
    daemon_pid = -1;
  }
  /* The sessions' shells went with it. */
  for (int i = 0; i < 100 && shell > 1 && kill((pid_t)shell, 0) == 0; ++i) sleep_ms(50);
  if (shell > 1) CHECK(kill((pid_t)shell, 0) == -1 && errno == ESRCH);
  CHECK(!socket_accepts(sock));
}

/* Steps an exec_call until it ends, waiting on its descriptor; counts the SBSH_PENDINGs. */
static int drive(sbsh_exec_call* call, sbsh_result** r, int* pendings) {
  for (;;) {
    struct pollfd pf = {sbsh_exec_call_fd(call), POLLIN, 0};
    if (poll(&pf, 1, 20000) != 1) return -100; /* nothing for 20 s: a hang */
    int rc = sbsh_exec_call_step(call, r);
    if (rc != SBSH_PENDING) return rc;
    ++*pendings;
  }
}

/* sbsh_exec_start: two commands at once from one thread, each on its own connection, driven
 * by poll(2) on their descriptors; a cancel through cancel_fd; an abandoned call. */
static void test_exec_call(void) {
  sbsh_conn *a = NULL, *b = NULL, *d = NULL;
  if (!CHECK(sbsh_connect(sock, 0, &a) == SBSH_OK && sbsh_connect(sock, 0, &b) == SBSH_OK &&
             sbsh_connect(sock, 0, &d) == SBSH_OK))
    return;
  CHECK(strcmp(sbsh_error_name(SBSH_PENDING), "pending") == 0);
  CHECK(sbsh_exec_call_fd(NULL) == -1);
  sbsh_exec_opts oa, ob;
  sbsh_exec_opts_init(&oa);
  sbsh_exec_opts_init(&ob);
  oa.session = "call-a";
  oa.command = "sleep 1; echo A; printf 'e\\0' >&2; (exit 3)";
  struct capture cap = {0};
  oa.on_output = capture_output;
  oa.user = &cap;
  ob.session = "call-b";
  ob.command = "cd /tmp; X=kept; echo B";
  sbsh_exec_call *ca = NULL, *cb = NULL;
  int64_t t0 = now_ms();
  CHECK(sbsh_exec_start(a, &oa, &ca) == SBSH_OK && ca != NULL && sbsh_exec_call_fd(ca) >= 0);
  CHECK(sbsh_exec_start(b, &ob, &cb) == SBSH_OK && cb != NULL);
  sbsh_result *ra = NULL, *rb = NULL;
  int pend_a = 0, pend_b = 0;
  /* b's short command ends while a's still sleeps: nothing waited for a. */
  CHECK(drive(cb, &rb, &pend_b) == SBSH_OK && rb != NULL);
  CHECK(sbsh_exec_call_step(ca, &ra) == SBSH_PENDING);
  CHECK(drive(ca, &ra, &pend_a) == SBSH_OK && ra != NULL);
  CHECK(now_ms() - t0 >= 1000);
  if (ra != NULL) {
    CHECK(sbsh_result_exit_code(ra) == 3);
    CHECK_BYTES(cap.out, cap.out_len, "A\n", 2);
    CHECK_BYTES(cap.err, cap.err_len, "e\0", 2);
  }
  if (rb != NULL) {
    size_t n;
    const char* out = sbsh_result_stdout(rb, &n);
    CHECK(sbsh_result_exit_code(rb) == 0);
    CHECK_BYTES(out, n, "B\n", 2);
  }
  sbsh_result_free(ra);
  sbsh_result_free(rb);
  /* A step after the end is refused; the connection serves the next request. */
  CHECK(sbsh_exec_call_step(ca, &ra) == SBSH_ERR_INVALID);
  sbsh_exec_call_free(ca);
  sbsh_exec_call_free(cb);

  /* Cancelled through cancel_fd: the command stops, the session keeps its state. */
  sbsh_canceller* k = NULL;
  CHECK(sbsh_canceller_new(&k) == SBSH_OK);
  /* Once it runs (a cancel that races the command's start is another case). */
  char started[256], started_cmd[320];
  snprintf(started, sizeof started, "%s/call-b-started", dir);
  snprintf(started_cmd, sizeof started_cmd, "touch '%s'; sleep 30", started);
  ob.command = started_cmd;
  ob.cancel_fd = sbsh_canceller_fd(k);
  t0 = now_ms();
  CHECK(sbsh_exec_start(b, &ob, &cb) == SBSH_OK);
  CHECK(sbsh_exec_call_step(cb, &rb) == SBSH_PENDING);
  for (int i = 0; i < 2000 && access(started, F_OK) != 0; ++i) usleep(10000);
  CHECK(access(started, F_OK) == 0);
  sbsh_canceller_cancel(k);
  pend_b = 0;
  CHECK(drive(cb, &rb, &pend_b) == SBSH_OK && rb != NULL);
  if (rb != NULL) CHECK(sbsh_result_cancelled(rb) == 1 && !sbsh_result_shell_restarted(rb));
  CHECK(now_ms() - t0 < 10000);
  sbsh_result_free(rb);
  sbsh_exec_call_free(cb);
  sbsh_canceller_free(k);
  expect_stdout(b, "call-b", "echo $PWD $X", "/tmp kept\n", __LINE__);

  /* Abandoned before its end: the connection is unusable from then on, and says why. */
  ob.command = "sleep 0.2";
  ob.cancel_fd = -1;
  CHECK(sbsh_exec_start(d, &ob, &cb) == SBSH_OK);
  sbsh_exec_call_free(cb);
  sbsh_exec_opts od;
  sbsh_exec_opts_init(&od);
  od.command = "true";
  sbsh_result* rd = NULL;
  CHECK(sbsh_exec(d, &od, &rd) == SBSH_ERR_IO && contains(sbsh_last_error(d), "abandoned"));
  sbsh_close(a);
  sbsh_close(b);
  sbsh_close(d);
}

/* Busy-waits `us` microseconds: finer than a sleep, to land a cancel at a chosen moment. */
static void spin_us(long us) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do clock_gettime(CLOCK_MONOTONIC, &b);
  while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

/* A cancel at every moment of a command's start: before the shell has it, as bash forks its
 * process, between the fork and bash's wait for it, while it runs. Whichever it meets, the
 * command ends cancelled and nothing of it reaches the next command (its status, bash's
 * "Terminated", its process group). */
static void test_cancel_at_start(void) {
  note("exec: a cancel at every moment of a command's start");
  sbsh_conn* c = NULL;
  sbsh_canceller* k = NULL;
  if (!CHECK(sbsh_connect(sock, 0, &c) == SBSH_OK && sbsh_canceller_new(&k) == SBSH_OK)) return;
  sbsh_exec_opts o;
  sbsh_exec_opts_init(&o);
  o.session = "cancel-race";
  expect_run(c, &o, "cd /tmp; X=kept", "", 0, __LINE__);
  const char* texts[] = {"sleep 30", "sleep 30 | cat", "true; sleep 30; echo never"};
  int bad = 0;
  for (int i = 0; i < 360 && bad < 3; ++i) {
    /* The second half with job control on: each command's processes in a group of their own. */
    if (i == 180) expect_run(c, &o, "set -m", "", 0, __LINE__);
    sbsh_exec_opts oc = o;
    oc.command = texts[i % 3];
    oc.cancel_fd = sbsh_canceller_fd(k);
    sbsh_exec_call* call = NULL;
    sbsh_result* r = NULL;
    if (!CHECK(sbsh_exec_start(c, &oc, &call) == SBSH_OK)) break;
    spin_us((i * 37) % 1500); /* 0 to 1.5 ms, spread over the start */
    sbsh_canceller_cancel(k);
    int pend = 0;
    int rc = drive(call, &r, &pend);
    sbsh_exec_call_free(call);
    sbsh_canceller_reset(k);
    if (!CHECK(rc == SBSH_OK && r != NULL && sbsh_result_cancelled(r) == 1)) ++bad;
    size_t n = 0;
    const char* out = r != NULL ? sbsh_result_stdout(r, &n) : NULL;
    if (!CHECK(n == 0)) {
      fprintf(stderr, "  cancelled '%s' wrote: ", oc.command);
      print_escaped(out, n);
      fputc('\n', stderr);
    }
    sbsh_result_free(r);
    r = run(c, &o, "echo $PWD $X");
    if (r == NULL) break;
    size_t on = 0, en = 0;
    out = sbsh_result_stdout(r, &on);
    const char* err = sbsh_result_stderr(r, &en);
    if (!CHECK(sbsh_result_exit_code(r) == 0 && en == 0 && on == 10 && memcmp(out, "/tmp kept\n", 10) == 0)) {
      ++bad;
      fprintf(stderr, "  after a cancel of '%s' %ld us in: exit %d, stderr ", oc.command, (long)((i * 37) % 1500),
             sbsh_result_exit_code(r));
      print_escaped(err, en);
      fputc('\n', stderr);
    }
    sbsh_result_free(r);
  }
  sbsh_canceller_free(k);
  sbsh_close(c);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  start_daemon();
  test_connect_errors();

  CHECK(strlen(sbsh_version()) > 0);
  sbsh_conn* c = NULL;
  /* NULL: the default path, $XDG_RUNTIME_DIR/sbsh/sbshd.sock, where our daemon listens. */
  if (!CHECK(sbsh_connect(NULL, 0, &c) == SBSH_OK && c != NULL)) {
    fprintf(stderr, "connect: %s\n", sbsh_last_error(NULL));
    return 1;
  }
  CHECK(strcmp(sbsh_socket_path(c), sock) == 0 && sbsh_fd(c) >= 0);

  test_exec(c);
  test_timeout_and_cancel(c);
  test_state_lost(c);
  test_streaming_and_stdin(c);
  test_detached(c);
  test_exec_call();
  test_cancel_at_start();
  test_errors(c);
  test_sessions(c);
  test_confine(c);
  test_files(c);
  test_processes(c);
  test_plans(c);
  test_status_and_shutdown(c);

  printf("c abi: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
