/* What the C ABI tests share (capi_support.c): counted checks that name the file and line
 * of a failure, the private sbshd they drive, and helpers to run commands through sbsh.h.
 * capi_test.c holds exec, streaming, cancels and the daemon; capi_sessions.c sessions and
 * what they keep, confinement, files, background processes and plans; capi_lease.c leases. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sbsh/sbsh.h"

extern int failed, passed;
/* The private sbshd's directory (its runtime directory, HOME and TMPDIR), socket, state
 * directory and log. */
extern char dir[64], run_dir[128], sock[192], state_dir[128], log_path[128];
extern pid_t daemon_pid;  /* the private sbshd (-1 once it is gone) */

int check(int ok, const char* file, int line, const char* what);
#define CHECK(cond) check((cond) != 0, __FILE__, __LINE__, #cond)
/* Compares raw bytes and prints both sides, escaped, when they differ. */
void check_bytes(const char* got, size_t got_len, const char* want, size_t want_len, const char* file, int line);
#define CHECK_BYTES(got, got_len, want, want_len) check_bytes(got, got_len, want, want_len, __FILE__, __LINE__)
/* Writes bytes to stderr with what is not printable ASCII escaped (\xNN). */
void print_escaped(const char* p, size_t n);
void note(const char* fmt, ...);
int64_t now_ms(void);
void sleep_ms(long ms);

/* Starts sbshd in the foreground on a socket under a private XDG_RUNTIME_DIR (mode 0700);
 * at exit it is killed by its pid and the directory removed. */
void start_daemon(void);

/* 1 when a connection to the socket at path is accepted. */
int socket_accepts(const char* path);

/* Runs cmd with the options *o (a failed call is a failed check); NULL when it failed. */
sbsh_result* run(sbsh_conn* c, sbsh_exec_opts* o, const char* cmd);
/* 1 when a connection to the socket at path is accepted. */
int socket_accepts(const char* path);

/* Runs cmd with the options *o and checks its exact stdout and exit code 0. */
void expect_run(sbsh_conn* c, sbsh_exec_opts* o, const char* cmd, const char* want, size_t want_len,
                const char* file, int line);
#define EXPECT_RUN(c, o, cmd, want, want_len) expect_run((c), (o), (cmd), (want), (want_len), __FILE__, __LINE__)
/* Runs cmd in session and checks its exact stdout and exit code 0. */
void expect_stdout_at(sbsh_conn* c, const char* session, const char* cmd, const char* want, const char* file,
                      int line);
#define EXPECT_STDOUT(c, session, cmd, want) expect_stdout_at((c), (session), (cmd), (want), __FILE__, __LINE__)
/* Runs cmd in session and gives its exit code (-1: none), stdout and stderr (NUL-terminated,
 * cut to the buffers). */
int run_in(sbsh_conn* c, const char* session, const char* cmd, char* out, size_t out_size, char* err,
           size_t err_size);

/* An sbsh_output_fn that keeps what it is given (cut to the buffers) and counts it. */
struct capture {
  char out[4096], err[4096];
  size_t out_len, err_len, calls, total;
  int bad_stream;
};
void capture_output(void* user, int stream, const char* data, size_t len);

int contains(const char* hay, const char* needle);
/* The integer after "key": in a JSON text (first occurrence after `from`), or -1. */
long json_int_after(const char* json, const char* from, const char* key);
/* Polls until no process of group pgid exists (not even a zombie), for up to ms. */
int group_gone_within(pid_t pgid, long ms);
/* A file of one line. */
void write_file(const char* path, const char* text);

/* The checks of capi_sessions.c. */
void test_sessions(sbsh_conn* c);
void test_housekeeping(sbsh_conn* c);
void test_confine(sbsh_conn* c);
void test_files(sbsh_conn* c);
void test_processes(sbsh_conn* c);
void test_plans(sbsh_conn* c);
void test_request_json(sbsh_conn* c);
/* The checks of capi_lease.c. */
void test_lease(sbsh_conn* c);
