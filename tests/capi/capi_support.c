/* The C ABI tests' shared part: counted checks, the private sbshd and helpers (capi.h). */
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

#include "capi.h"

#ifndef SBSH_BIN_DIR
#error "SBSH_BIN_DIR must name the directory of sbshd"
#endif

extern char** environ;

int failed = 0, passed = 0;

int check(int ok, const char* file, int line, const char* what) {
  if (ok) {
    ++passed;
  } else {
    ++failed;
    fprintf(stderr, "%s:%d: CHECK(%s) failed\n", file, line, what);
  }
  return ok;
}

/* Compares raw bytes and prints both sides, escaped, when they differ. */
void print_escaped(const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = (unsigned char)p[i];
    if (c >= 0x20 && c < 0x7f && c != '\\') fputc(c, stderr);
    else fprintf(stderr, "\\x%02x", c);
  }
}
void check_bytes(const char* got, size_t got_len, const char* want, size_t want_len, const char* file, int line) {
  if (got_len == want_len && memcmp(got, want, want_len) == 0) {
    ++passed;
    return;
  }
  ++failed;
  fprintf(stderr, "%s:%d: bytes differ\n  got  (%zu): ", file, line, got_len);
  print_escaped(got, got_len);
  fprintf(stderr, "\n  want (%zu): ", want_len);
  print_escaped(want, want_len);
  fputc('\n', stderr);
}

void note(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("-- ", stdout);
  vprintf(fmt, ap);
  fputc('\n', stdout);
  va_end(ap);
  fflush(stdout);
}

int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- The private daemon ---------------------------------------------------------------- */

char dir[64], run_dir[128], sock[192], state_dir[128], log_path[128];
pid_t daemon_pid = -1;

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

int socket_accepts(const char* path) {
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

void start_daemon(void) {
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

sbsh_result* run(sbsh_conn* c, sbsh_exec_opts* o, const char* cmd) {
  sbsh_result* r = NULL;
  o->command = cmd;
  int rc = sbsh_exec(c, o, &r);
  if (!CHECK(rc == SBSH_OK && r != NULL))
    fprintf(stderr, "  exec '%s': %d %s: %s\n", cmd, rc, sbsh_last_error_code(c), sbsh_last_error(c));
  return r;
}

/* Runs cmd with the options *o and checks its exact stdout and exit code 0. */
void expect_run(sbsh_conn* c, sbsh_exec_opts* o, const char* cmd, const char* want, size_t want_len,
                const char* file, int line) {
  sbsh_result* r = run(c, o, cmd);
  if (r == NULL) return;
  size_t n;
  const char* out = sbsh_result_stdout(r, &n);
  check_bytes(out, n, want, want_len, file, line);
  if (!check(sbsh_result_exit_code(r) == 0, file, line, "exit code 0")) {
    size_t en;
    const char* err = sbsh_result_stderr(r, &en);
    fprintf(stderr, "  '%s' exited %d: %.*s %s\n", cmd, sbsh_result_exit_code(r), (int)en, err,
            sbsh_result_error(r));
  }
  sbsh_result_free(r);
}

/* Runs cmd in session and checks its exact stdout and exit code 0. */
void expect_stdout_at(sbsh_conn* c, const char* session, const char* cmd, const char* want, const char* file,
                     int line) {
  sbsh_exec_opts o;
  sbsh_exec_opts_init(&o);
  o.session = session;
  expect_run(c, &o, cmd, want, strlen(want), file, line);
}

void capture_output(void* user, int stream, const char* data, size_t len) {
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

int contains(const char* hay, const char* needle) { return hay != NULL && strstr(hay, needle) != NULL; }

/* The integer after "key": in a JSON text (first occurrence after `from`), or -1. */
long json_int_after(const char* json, const char* from, const char* key) {
  const char* p = from != NULL ? strstr(json, from) : json;
  if (p == NULL || (p = strstr(p, key)) == NULL) return -1;
  p += strlen(key);
  return strtol(p, NULL, 10);
}

/* Polls until no process of group pgid exists (not even a zombie), for up to ms. */
int group_gone_within(pid_t pgid, long ms) {
  for (long waited = 0;; waited += 20) {
    if (kill(-pgid, 0) == -1 && errno == ESRCH) return 1;
    if (waited >= ms) return 0;
    sleep_ms(20);
  }
}

/* A file of one line, for the tests below. */
void write_file(const char* path, const char* text) {
  FILE* f = fopen(path, "w");
  CHECK(f != NULL && fputs(text, f) >= 0 && fclose(f) == 0);
}

/* Runs cmd in session and gives its exit code (-1: none), stdout and stderr (NUL-terminated,
 * cut to the buffers). */
int run_in(sbsh_conn* c, const char* session, const char* cmd, char* out, size_t out_size, char* err,
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
