/* The C ABI (sbsh.h) from C, against a daemon it auto-starts on a private socket. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbsh/sbsh.h"

static int failed = 0, passed = 0;
#define CHECK(cond)                                                   \
  do {                                                                \
    if (cond) {                                                       \
      ++passed;                                                       \
    } else {                                                          \
      ++failed;                                                       \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
    }                                                                 \
  } while (0)

static size_t streamed = 0;
static void count_output(void* user, int stream, const char* data, size_t len) {
  (void)data;
  if (stream == 1) *(size_t*)user += len;
}
static void count_sessions(void* user, const char* name, const char* state, int64_t shell, int64_t wrapper) {
  (void)state;
  if (strcmp(name, "c-api") == 0 && shell > 0 && wrapper > 0) ++*(int*)user;
}
static void find_job(void* user, uint64_t id, const char* name, const char* session, const char* state,
                     int64_t pid, int exit_code, const char* command) {
  (void)id; (void)session; (void)pid; (void)command;
  if (strcmp(name, "job") == 0 && strcmp(state, "exited") == 0 && exit_code == 4) ++*(int*)user;
}
static char logs[256];
static void keep_logs(void* user, int stream, const char* data, size_t len) {
  (void)user;
  if (stream == 1 && strlen(logs) + len < sizeof logs) strncat(logs, data, len);
}

static sbsh_result* run(sbsh_conn* c, sbsh_exec_opts* o, const char* cmd) {
  sbsh_result* r = NULL;
  o->command = cmd;
  int rc = sbsh_exec(c, o, &r);
  CHECK(rc == SBSH_OK);
  return r;
}

int main(void) {
  char tmpl[] = "/tmp/sbsh-capi.XXXXXX";
  char* dir = mkdtemp(tmpl);
  char run_dir[256], sock[256], state[256];
  snprintf(run_dir, sizeof run_dir, "%s/run", dir);
  snprintf(sock, sizeof sock, "%s/run/sbsh.sock", dir);
  snprintf(state, sizeof state, "%s/state", dir);
  mkdir(run_dir, 0700);
  setenv("SBSH_STATE_DIR", state, 1);
  setenv("HOME", dir, 1);

  sbsh_conn* c = NULL;
  CHECK(sbsh_connect(sock, 1, &c) == SBSH_OK);
  if (c == NULL) return 1;
  CHECK(strlen(sbsh_version()) > 0);

  sbsh_exec_opts o;
  memset(&o, 0, sizeof o);
  o.session = "c-api";
  sbsh_result* r = run(c, &o, "cd /tmp; x=5");
  int code = -1;
  CHECK(sbsh_result_exit_code(r, &code) == 1 && code == 0);
  sbsh_result_free(r);

  r = run(c, &o, "pwd; echo $x; printf 'a\\0b'; echo err >&2; exit 0");
  size_t len = 0;
  const char* out = sbsh_result_stdout(r, &len);
  CHECK(len == 10 && memcmp(out, "/tmp\n5\na\0b", 10) == 0);
  CHECK(strcmp(sbsh_result_stderr(r, &len), "err\n") == 0);
  CHECK(sbsh_result_flags(r) & SBSH_SHELL_RESTARTED);
  sbsh_result_free(r);

  o.timeout_ms = 200;
  r = run(c, &o, "sleep 5");
  CHECK(sbsh_result_flags(r) & SBSH_TIMED_OUT);
  CHECK(sbsh_result_signal(r) == SIGTERM);
  sbsh_result_free(r);
  o.timeout_ms = 0;

  o.has_stdin = 1;
  o.stdin_data = "hello";
  o.stdin_len = 5;
  r = run(c, &o, "cat");
  CHECK(strcmp(sbsh_result_stdout(r, &len), "hello") == 0);
  sbsh_result_free(r);
  o.has_stdin = 0;

  o.on_output = count_output;
  o.user = &streamed;
  r = run(c, &o, "head -c 100000 /dev/zero");
  CHECK(streamed == 100000);
  sbsh_result_stdout(r, &len);
  CHECK(len == 0);
  sbsh_result_free(r);
  o.on_output = NULL;

  sbsh_exec_opts bad;
  memset(&bad, 0, sizeof bad);
  bad.session = "bad name";
  bad.command = "true";
  r = NULL;
  CHECK(sbsh_exec(c, &bad, &r) == SBSH_ERR_REFUSED && r == NULL);
  CHECK(strcmp(sbsh_last_error_code(c), "invalid_session_name") == 0);
  CHECK(strstr(sbsh_last_error(c), "bad name") != NULL);

  const char* init[] = {"Y=from-init"};
  CHECK(sbsh_session_create(c, "made", "/tmp", NULL, 0, init, 1, "on-failure") == SBSH_OK);
  int seen = 0;
  CHECK(sbsh_session_list(c, count_sessions, &seen) == SBSH_OK && seen == 1);

  uint64_t id = 0;
  CHECK(sbsh_start(c, "made", "job", "echo $Y; exit 4", &id) == SBSH_OK && id > 0);
  char st[16];
  CHECK(sbsh_wait(c, "job", 10000, &code, st) == SBSH_OK && code == 4 && strcmp(st, "exited") == 0);
  CHECK(sbsh_logs(c, "job", 0, 0, keep_logs, NULL) == SBSH_OK && strcmp(logs, "from-init\n") == 0);
  int jobs = 0;
  CHECK(sbsh_process_list(c, 1, find_job, &jobs) == SBSH_OK && jobs == 1);
  CHECK(sbsh_start(c, "made", "long", "sleep 100", &id) == SBSH_OK);
  CHECK(sbsh_wait(c, "long", 100, &code, st) == SBSH_ERR_TIMEOUT);
  CHECK(sbsh_kill(c, "long", SIGTERM) == SBSH_OK);
  CHECK(sbsh_wait(c, "long", 5000, &code, st) == SBSH_OK && strcmp(st, "killed") == 0);
  CHECK(sbsh_session_remove(c, "made") == SBSH_OK);
  CHECK(sbsh_session_restart(c, "made") == SBSH_ERR_REFUSED);

  CHECK(sbsh_shutdown(c) == SBSH_OK);
  sbsh_close(c);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  printf("c abi: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
