/* The C ABI (sbsh.h), from C: leases of a session's shell (sbsh_lease_*). Commands run on a
 * lease with exact bytes and status, the shell's state carried to and from execs, the
 * connection refusing other requests while it is held, the ends of a lease (release, free,
 * another client's exec, the connection's close), the refusal over a dial command, and the
 * arguments that are refused. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi.h"

/* A lease of session on c, or NULL (a failed check). */
static sbsh_lease* lease_of(sbsh_conn* c, const char* session) {
  sbsh_lease* l = NULL;
  if (!CHECK(sbsh_lease_new(c, session, &l) == SBSH_OK && l != NULL)) {
    fprintf(stderr, "  sbsh_lease_new: %s (%s)\n", sbsh_last_error(c), sbsh_last_error_code(c));
    return NULL;
  }
  return l;
}

/* Runs cmd on the lease and checks its exact stdout, empty stderr and exit code 0. */
static void expect_lease_run(sbsh_lease* l, sbsh_conn* c, const char* cmd, const char* want, const char* file,
                             int line) {
  sbsh_result* r = NULL;
  int rc = sbsh_lease_run(l, cmd, 0, &r);
  if (!check(rc == SBSH_OK && r != NULL, file, line, "sbsh_lease_run succeeds")) {
    fprintf(stderr, "  '%s': %s (%s)\n", cmd, sbsh_last_error(c), sbsh_last_error_code(c));
    return;
  }
  size_t n = 0, en = 0;
  const char* out = sbsh_result_stdout(r, &n);
  const char* err = sbsh_result_stderr(r, &en);
  check_bytes(out, n, want, strlen(want), file, line);
  check_bytes(err, en, "", 0, file, line);
  check(sbsh_result_has_exit_code(r) && sbsh_result_exit_code(r) == 0 && sbsh_result_ok(r), file, line, "exit code 0");
  sbsh_result_free(r);
}
#define EXPECT_LEASE_RUN(l, c, cmd, want) expect_lease_run((l), (c), (cmd), (want), __FILE__, __LINE__)

/* A run on an ended lease: no result, SBSH_ERR_IO with code "eof", the connection intact. */
static void expect_lease_over(sbsh_lease* l, sbsh_conn* c, const char* file, int line) {
  sbsh_result* r = NULL;
  int rc = sbsh_lease_run(l, "echo never", 0, &r);
  check(rc == SBSH_ERR_IO && r == NULL, file, line, "a run on an ended lease is SBSH_ERR_IO");
  check(strcmp(sbsh_last_error_code(c), "eof") == 0, file, line, "its code is eof");
  check(contains(sbsh_last_error(c), "lease has ended"), file, line, "its message says the lease ended");
  check(sbsh_lease_held(l) == 0, file, line, "not held");
}
#define EXPECT_LEASE_OVER(l, c) expect_lease_over((l), (c), __FILE__, __LINE__)

static void test_lease_runs(sbsh_conn* c, sbsh_conn* a) {
  note("lease: state carried, exact bytes and status, the connection refused meanwhile");
  EXPECT_STDOUT(c, "c-lease", "cd /; X=from-exec", "");
  char shell[32], err[32];
  CHECK(run_in(c, "c-lease", "echo $$", shell, sizeof shell, err, sizeof err) == 0);
  sbsh_lease* l = lease_of(a, "c-lease");
  if (l == NULL) return;
  CHECK(sbsh_lease_held(l) == 1);
  CHECK(sbsh_lease_shell_pid(l) == atol(shell) && sbsh_lease_generation(l) > 0);
  EXPECT_LEASE_RUN(l, a, "echo $X; pwd", "from-exec\n/\n"); /* the exec's state */
  EXPECT_LEASE_RUN(l, a, "cd /tmp; X=5", "");
  EXPECT_LEASE_RUN(l, a, "echo $X; pwd", "5\n/tmp\n");
  char pid[32];
  snprintf(pid, sizeof pid, "%ld\n", (long)sbsh_lease_shell_pid(l));
  EXPECT_LEASE_RUN(l, a, "echo $$", pid); /* the session's own shell */

  int64_t before = now_ms();
  sbsh_result* r = NULL;
  CHECK(sbsh_lease_run(l, "printf 'a\\0b\\377\\n'; printf 'e\\0rr' >&2; (exit 7)", 0, &r) == SBSH_OK && r != NULL);
  if (r != NULL) {
    size_t n = 0;
    const char* out = sbsh_result_stdout(r, &n);
    CHECK_BYTES(out, n, "a\0b\377\n", 5);
    out = sbsh_result_stderr(r, &n);
    CHECK_BYTES(out, n, "e\0rr", 4);
    CHECK(sbsh_result_has_exit_code(r) == 1 && sbsh_result_exit_code(r) == 7 && sbsh_result_signal(r) == 0);
    CHECK(!sbsh_result_ok(r) && sbsh_result_ran(r) == 1);
    CHECK(!sbsh_result_timed_out(r) && !sbsh_result_cancelled(r) && !sbsh_result_shell_restarted(r));
    CHECK(sbsh_result_stdout_bytes(r) == 5 && sbsh_result_stderr_bytes(r) == 4);
    CHECK(!sbsh_result_stdout_truncated(r) && sbsh_result_stdout_omitted(r) == 0);
    CHECK(sbsh_result_duration_us(r) > 0 && sbsh_result_duration_us(r) < 10 * 1000 * 1000);
    CHECK(sbsh_result_started_at_ms(r) >= before - 2000 && sbsh_result_started_at_ms(r) <= now_ms() + 2000);
    CHECK(sbsh_result_generation(r) == sbsh_lease_generation(l));
    sbsh_result_free(r);
    r = NULL;
  }
  /* Ended by a signal: the signal, and 128+N as its status. */
  CHECK(sbsh_lease_run(l, "sh -c 'kill -TERM $$'", 0, &r) == SBSH_OK && r != NULL);
  if (r != NULL) {
    CHECK(sbsh_result_signal(r) == SIGTERM && sbsh_result_exit_code(r) == 128 + SIGTERM);
    sbsh_result_free(r);
    r = NULL;
  }
  /* A timeout goes with the command; one that has not passed changes nothing. */
  CHECK(sbsh_lease_run(l, "echo in-time", 30000, &r) == SBSH_OK && r != NULL);
  if (r != NULL) {
    size_t n = 0;
    const char* out = sbsh_result_stdout(r, &n);
    CHECK_BYTES(out, n, "in-time\n", 8);
    CHECK(sbsh_result_exit_code(r) == 0 && !sbsh_result_timed_out(r));
    sbsh_result_free(r);
    r = NULL;
  }
  /* One that passes: sbshd stops the command, and the result says so. */
  CHECK(sbsh_lease_run(l, "echo before; sleep 60; echo never", 300, &r) == SBSH_OK && r != NULL);
  if (r != NULL) {
    size_t n = 0;
    const char* out = sbsh_result_stdout(r, &n);
    CHECK_BYTES(out, n, "before\n", 7);
    CHECK(sbsh_result_timed_out(r));
    sbsh_result_free(r);
    r = NULL;
  }
  /* A text longer than one message goes in a memfd, whole. */
  size_t big_len = 300000;
  char* big = malloc(big_len + 1);
  if (CHECK(big != NULL)) {
    memset(big, '#', big_len);
    memcpy(big, "echo big\n", 9);
    memcpy(big + big_len - 12, "\necho end-$X", 12);
    big[big_len] = '\0';
    EXPECT_LEASE_RUN(l, a, big, "big\nend-5\n");
    free(big);
  }

  /* While it is held, its connection serves nothing else, and says why. */
  sbsh_exec_opts o;
  sbsh_exec_opts_init(&o);
  o.session = "c-lease";
  o.command = "true";
  CHECK(sbsh_exec(a, &o, &r) == SBSH_ERR_INVALID && r == NULL);
  CHECK(strcmp(sbsh_last_error_code(a), "usage") == 0 && contains(sbsh_last_error(a), "sbsh_lease_release"));
  sbsh_lease* second = NULL;
  CHECK(sbsh_lease_new(a, "c-lease", &second) == SBSH_ERR_INVALID && second == NULL);
  EXPECT_LEASE_RUN(l, a, "echo still", "still\n"); /* the refusals left the lease as it was */

  /* Released: the state stays with the session, the connection serves again. */
  CHECK(sbsh_lease_release(l) == SBSH_OK && sbsh_lease_held(l) == 0);
  CHECK(sbsh_lease_release(l) == SBSH_OK); /* twice: nothing to do */
  EXPECT_LEASE_OVER(l, a);
  EXPECT_STDOUT(c, "c-lease", "echo $X $PWD", "5 /tmp\n");
  EXPECT_STDOUT(a, "c-lease", "echo served", "served\n");
  sbsh_lease_free(l);
}

static void test_lease_ends(sbsh_conn* c, sbsh_conn* a) {
  note("lease: ended by another client's exec, freed while held, its connection closed");
  /* Another client's exec queued on the session ends the lease: it runs once the lease is
   * over, and the lease's next run says so. */
  sbsh_lease* l = lease_of(a, "c-lease");
  if (l == NULL) return;
  EXPECT_LEASE_RUN(l, a, "Y=6", "");
  EXPECT_STDOUT(c, "c-lease", "echo $Y", "6\n");
  EXPECT_LEASE_OVER(l, a);
  /* Until it is released the connection is still the lease's; then it serves again. */
  sbsh_exec_opts o;
  sbsh_exec_opts_init(&o);
  o.session = "c-lease";
  o.command = "true";
  sbsh_result* r = NULL;
  CHECK(sbsh_exec(a, &o, &r) == SBSH_ERR_INVALID && strcmp(sbsh_last_error_code(a), "usage") == 0);
  CHECK(sbsh_lease_release(l) == SBSH_OK);
  EXPECT_STDOUT(a, "c-lease", "echo after-$Y", "after-6\n");
  sbsh_lease_free(l);

  /* Freed while held: released, the connection and the session free at once. */
  l = lease_of(a, "c-lease");
  if (l == NULL) return;
  EXPECT_LEASE_RUN(l, a, "Z=7", "");
  sbsh_lease_free(l);
  EXPECT_STDOUT(a, "c-lease", "echo a-$Z", "a-7\n");
  int64_t t0 = now_ms();
  EXPECT_STDOUT(c, "c-lease", "echo c-$Z", "c-7\n");
  CHECK(now_ms() - t0 < 5000);

  /* The connection closed under a held lease: it released the lease; the handle only frees. */
  sbsh_conn* b = NULL;
  if (!CHECK(sbsh_connect(sock, 0, &b) == SBSH_OK)) return;
  l = lease_of(b, "c-lease");
  if (l == NULL) {
    sbsh_close(b);
    return;
  }
  sbsh_close(b);
  CHECK(sbsh_lease_held(l) == 0 && sbsh_lease_shell_pid(l) > 0);
  CHECK(sbsh_lease_run(l, "echo never", 0, &r) == SBSH_ERR_INVALID && r == NULL);
  CHECK(contains(sbsh_last_error(NULL), "sbsh_close"));
  CHECK(sbsh_lease_release(l) == SBSH_ERR_INVALID);
  sbsh_lease_free(l);
  EXPECT_STDOUT(c, "c-lease", "echo $X", "5\n");
}

static void test_lease_refusals(sbsh_conn* c, sbsh_conn* a) {
  note("lease: refused requests and invalid arguments");
  sbsh_lease* l = NULL;
  CHECK(sbsh_lease_new(NULL, "c-lease", &l) == SBSH_ERR_INVALID && l == NULL);
  CHECK(contains(sbsh_last_error(NULL), "connection handle is NULL"));
  CHECK(sbsh_lease_new(a, "c-lease", NULL) == SBSH_ERR_INVALID && contains(sbsh_last_error(a), "out is NULL"));
  CHECK(sbsh_lease_new(a, "no-such-lease", &l) == SBSH_ERR_NOT_FOUND && l == NULL);
  CHECK(strcmp(sbsh_last_error_code(a), "no_such_session") == 0 && contains(sbsh_last_error(a), "no-such-lease"));
  CHECK(sbsh_lease_new(a, "bad name", &l) == SBSH_ERR_REFUSED && l == NULL);
  CHECK(strcmp(sbsh_last_error_code(a), "invalid_session_name") == 0);

  sbsh_result* r = NULL;
  CHECK(sbsh_lease_run(NULL, "true", 0, &r) == SBSH_ERR_INVALID && r == NULL);
  CHECK(contains(sbsh_last_error(NULL), "sbsh_lease_run: the lease handle is NULL"));
  CHECK(sbsh_lease_release(NULL) == SBSH_ERR_INVALID);
  CHECK(sbsh_lease_held(NULL) == 0 && sbsh_lease_shell_pid(NULL) == 0 && sbsh_lease_generation(NULL) == 0);
  sbsh_lease_free(NULL);

  l = lease_of(a, "c-lease");
  if (l != NULL) {
    CHECK(sbsh_lease_run(l, NULL, 0, &r) == SBSH_ERR_INVALID && contains(sbsh_last_error(a), "command"));
    CHECK(sbsh_lease_run(l, "true", 0, NULL) == SBSH_ERR_INVALID);
    CHECK(sbsh_lease_run(l, "true", -1, &r) == SBSH_ERR_INVALID && r == NULL);
    CHECK(contains(sbsh_last_error(a), "timeout_ms must not be negative"));
    EXPECT_LEASE_RUN(l, a, "echo fine", "fine\n"); /* none of that ended it */
    sbsh_lease_free(l);
  }
  EXPECT_STDOUT(c, "c-lease", "echo ok", "ok\n");

  /* Through a dial command no descriptor passes: refused, saying what to do instead. */
  const char* argv[] = {SBSH_BIN_DIR "/sbsh", "-S", sock, "--no-autostart", "dial-stdio", NULL};
  sbsh_conn* d = NULL;
  if (!CHECK(sbsh_connect_dial(argv, &d) == SBSH_OK)) return;
  l = NULL;
  CHECK(sbsh_lease_new(d, "c-lease", &l) == SBSH_ERR_REFUSED && l == NULL);
  CHECK(strcmp(sbsh_last_error_code(d), "not_supported") == 0 && contains(sbsh_last_error(d), "exec"));
  EXPECT_STDOUT(d, "c-lease", "echo dialled-$X", "dialled-5\n"); /* the refusal left it usable */
  sbsh_close(d);
}

void test_lease(sbsh_conn* c) {
  sbsh_conn* a = NULL;
  if (!CHECK(sbsh_connect(sock, 0, &a) == SBSH_OK)) return;
  test_lease_runs(c, a);
  test_lease_ends(c, a);
  test_lease_refusals(c, a);
  sbsh_close(a);
}
