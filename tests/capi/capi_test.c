/* The C ABI (sbsh.h), from C, against a private sbshd.
 *
 * Starts sbshd in the foreground on a socket under a private XDG_RUNTIME_DIR (mode 0700),
 * drives it through libsbsh's C ABI only, then shuts it down and checks that the daemon is
 * gone. Every check is counted; the program exits 1 if any failed. This file: connecting,
 * exec, timeouts and cancels, streaming and stdin, kept commands, errors, the event-loop
 * exec and the daemon's status and shutdown; capi_sessions.c and capi_lease.c the rest. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capi.h"

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
  /* A host URL of a kind sbsh_connect_host does not know, or with a bad name, runs nothing. */
  CHECK(sbsh_connect_host("kubectl://ns/Pod", NULL, 1, &c) == SBSH_ERR_INVALID && c == NULL);
  CHECK(contains(sbsh_last_error(NULL), "invalid host 'kubectl://ns/Pod'"));
  CHECK(sbsh_connect_host("lxc://box", NULL, 1, &c) == SBSH_ERR_INVALID);
  CHECK(contains(sbsh_last_error(NULL), "podman://CONTAINER"));
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
  EXPECT_STDOUT(c, "c-api", "pwd; echo $x; f z", "/tmp\n5\nfn-z\n");

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
  EXPECT_STDOUT(c, "c-api", "pwd; echo $x; echo ${ONE:-unset}", "/tmp\n5\nunset\n");

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
  EXPECT_STDOUT(c, "c-api", "pwd; echo $x", "/tmp\n5\n");

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
  EXPECT_STDOUT(c, "c-api", "pwd; echo $x", "/tmp\n5\n");
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
  /* collect_output (version 4): streamed and kept too, the kept copy cut as without a
   * callback (its first and last half, the bytes between counted). */
  memset(&cap, 0, sizeof cap);
  o.collect_output = 1;
  o.output_limit = 4;
  r = run(c, &o, "printf abcdefgh; printf e1 >&2");
  if (r != NULL) {
    CHECK_BYTES(cap.out, cap.out_len, "abcdefgh", 8);
    size_t n;
    const char* kept = sbsh_result_stdout(r, &n);
    CHECK_BYTES(kept, n, "abgh", 4);
    CHECK(sbsh_result_stdout_omitted(r) == 4 && sbsh_result_stdout_truncated(r) == 1);
    kept = sbsh_result_stderr(r, &n);
    CHECK_BYTES(kept, n, "e1", 2);
    CHECK(sbsh_result_stdout_bytes(r) == 8);
    sbsh_result_free(r);
  }
  o.collect_output = 0;
  o.output_limit = 0;
  o.on_output = NULL;
  o.user = NULL;

  /* stdin: exact bytes, then EOF; without input, a reader gets EOF at once. */
  o.stdin_data = "hello\0world";
  o.stdin_len = 11;
  EXPECT_RUN(c, &o, "cat", "hello\0world", 11);
  o.stdin_data = NULL;
  o.stdin_len = 0;
  EXPECT_STDOUT(c, "c-api", "cat; echo done", "done\n");

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

/* A terminal of the command's own (version 3), and a command that waits for input. */
static void test_terminal(sbsh_conn* c) {
  note("exec with a terminal");
  sbsh_exec_opts o;
  sbsh_exec_opts_init(&o);
  o.session = "capi-tty";
  o.tty = 1;
  o.cols = 100;
  o.rows = 30;
  sbsh_result* r = run(c, &o, "tty; stty size");
  if (r != NULL) {
    size_t n;
    const char* out = sbsh_result_stdout(r, &n);
    CHECK(contains(out, "/dev/pts/") && contains(out, "30 100\r\n"));
    /* The screen: what the terminal showed, rows without their CR. */
    CHECK(contains(sbsh_result_screen(r), "30 100\n") && !contains(sbsh_result_screen(r), "\r"));
    sbsh_result_free(r);
  }
  o.cols = o.rows = 0;
  o.interactive = 1;
  o.detach_after_ms = 30000;
  r = run(c, &o, "read -p 'Your name? ' name");
  if (r != NULL) {
    CHECK(sbsh_result_running(r) == 1 && sbsh_result_waiting_for_input(r) == 1);
    CHECK(strcmp(sbsh_result_prompt(r), "Your name? ") == 0);
    uint64_t id = sbsh_result_command_id(r);
    sbsh_result_free(r);
    r = NULL;
    /* Answered: typed, Enter as a terminal sends it; then only what it wrote after. */
    if (CHECK(sbsh_command_input(c, id, "Ada\r", 4, SBSH_INPUT_TYPED, 10000, &r) == SBSH_OK && r != NULL)) {
      size_t n;
      const char* out = sbsh_result_stdout(r, &n);
      CHECK(sbsh_result_running(r) == 0 && sbsh_result_exit_code(r) == 0);
      CHECK_BYTES(out, n, "Ada\r\n", 5);
      sbsh_result_free(r);
    }
    CHECK(sbsh_command_input(c, id, "x", 1, 0, 0, NULL) == SBSH_ERR_REFUSED &&
          strcmp(sbsh_last_error_code(c), "no_input") == 0);
    CHECK(sbsh_command_input(c, id, "x", 1, 64, 0, NULL) == SBSH_ERR_INVALID);
  }
  sbsh_exec_opts_init(&o);
  o.cols = 80; /* without tty */
  o.command = "true";
  r = NULL;
  CHECK(sbsh_exec(c, &o, &r) == SBSH_ERR_INVALID && r == NULL);
  CHECK(contains(sbsh_last_error(c), "set tty"));
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

  /* A program built against version 1's sbsh.h has a shorter structure: the function it
   * calls writes nothing past it. */
  union {
    sbsh_exec_opts opts;
    unsigned char bytes[sizeof(sbsh_exec_opts)];
  } old;
  memset(&old, 0xab, sizeof old);
  (sbsh_exec_opts_init)(&old.opts); /* the function, not the macro */
  CHECK(old.opts.version == 1 && old.opts.command == NULL && old.opts.stdin_fd == -1 && old.opts.cancel_fd == -1);
  CHECK(old.bytes[offsetof(sbsh_exec_opts, detach_after_ms)] == 0xab && old.bytes[sizeof old - 1] == 0xab);
  old.opts.session = "c-api";
  old.opts.command = "echo v1";
  CHECK(sbsh_exec(c, &old.opts, &r) == SBSH_OK && r != NULL);
  if (r != NULL) {
    size_t n = 0;
    const char* out = sbsh_result_stdout(r, &n);
    CHECK_BYTES(out, n, "v1\n", 3);
    sbsh_result_free(r);
    r = NULL;
  }
  memset(&old, 0xab, sizeof old);
  sbsh_exec_opts_init(&old.opts); /* the macro: this structure's size, this version */
  CHECK(old.opts.version == SBSH_EXEC_OPTS_VERSION && old.opts.detach_after_ms == 0 && old.opts.keep == 0);

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
  EXPECT_STDOUT(c, "c-api", "echo ok", "ok\n");
  CHECK(strcmp(sbsh_last_error(c), "") == 0);
  CHECK(sbsh_session_remove(c, "no-such-session") == SBSH_ERR_NOT_FOUND);
  CHECK(strcmp(sbsh_last_error_code(c), "no_such_session") == 0);
  CHECK(sbsh_wait(c, "no-such-process", 0, NULL) == SBSH_ERR_NOT_FOUND);
}

static void test_status_and_shutdown(sbsh_conn* c) {
  note("status, shutdown");
  EXPECT_STDOUT(c, "c-api", "echo listed", "listed\n"); /* a session to find in the status */
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
  EXPECT_STDOUT(b, "call-b", "echo $PWD $X", "/tmp kept\n");

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
  EXPECT_RUN(c, &o, "cd /tmp; X=kept", "", 0);
  const char* texts[] = {"sleep 30", "sleep 30 | cat", "true; sleep 30; echo never"};
  int bad = 0;
  for (int i = 0; i < 360 && bad < 3; ++i) {
    /* The second half with job control on: each command's processes in a group of their own. */
    if (i == 180) EXPECT_RUN(c, &o, "set -m", "", 0);
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
  test_terminal(c);
  test_exec_call();
  test_cancel_at_start();
  test_errors(c);
  test_sessions(c);
  test_confine(c);
  test_files(c);
  test_processes(c);
  test_plans(c);
  test_request_json(c);
  test_lease(c);
  test_housekeeping(c); /* it prunes the idle sessions the tests above made */
  test_status_and_shutdown(c);

  printf("c abi: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
