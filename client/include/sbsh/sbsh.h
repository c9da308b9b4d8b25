/* sbsh.h: the C ABI of libsbsh, for C programs and foreign-function interfaces.
 *
 * Conventions: functions return SBSH_OK (0) or a negative SBSH_ERR_* code; after a failure,
 * sbsh_last_error(conn) and sbsh_last_error_code(conn) describe it (valid until the next
 * call on that connection). Strings are UTF-8 and NUL-terminated unless a length is given.
 * Memory returned by a getter belongs to the object it came from. A connection is not
 * thread-safe: use one per thread. Callbacks run on the calling thread, inside the call.
 * This ABI is stable within a major version (libsbsh.so.0). */
#ifndef SBSH_H
#define SBSH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  SBSH_OK = 0,
  SBSH_ERR_UNREACHABLE = -1, /* no daemon, and it could not be started */
  SBSH_ERR_REFUSED = -2,     /* sbshd refused the request (see the code and message) */
  SBSH_ERR_IO = -3,          /* the connection failed */
  SBSH_ERR_TIMEOUT = -4,     /* sbsh_wait: the process still runs */
  SBSH_ERR_INVALID = -5,     /* an argument was invalid (NULL where one is needed) */
  SBSH_ERR_INTERNAL = -6
};

/* Result flags (sbsh_result_flags). */
enum {
  SBSH_TIMED_OUT = 1,
  SBSH_SHELL_RESTARTED = 2,
  SBSH_CANCELLED = 4,
  SBSH_STDOUT_TRUNCATED = 8,
  SBSH_STDERR_TRUNCATED = 16
};

typedef struct sbsh_conn sbsh_conn;
typedef struct sbsh_result sbsh_result;

/* Output callback: stream is 1 (stdout) or 2 (stderr); data is not NUL-terminated. */
typedef void (*sbsh_output_fn)(void* user, int stream, const char* data, size_t len);

/* socket_path NULL: the default ($SBSH_SOCKET, $XDG_RUNTIME_DIR/sbsh/sbshd.sock, ...).
 * autostart non-zero: start sbshd when none answers. *out is set on success only. */
int sbsh_connect(const char* socket_path, int autostart, sbsh_conn** out);
void sbsh_close(sbsh_conn* conn);
const char* sbsh_last_error(const sbsh_conn* conn);
const char* sbsh_last_error_code(const sbsh_conn* conn);
const char* sbsh_version(void);

typedef struct sbsh_exec_opts {
  const char* session;            /* NULL: "default" */
  const char* command;            /* required */
  const char* cwd;                /* NULL: the session's state; else a subshell in cwd */
  const char* const* env;         /* NAME=VALUE entries for this command only */
  size_t env_count;
  int64_t timeout_ms;             /* 0: none */
  const char* stdin_data;         /* with has_stdin: these bytes are the command's stdin */
  size_t stdin_len;
  int has_stdin;                  /* 0: stdin is /dev/null */
  sbsh_output_fn on_output;       /* non-NULL: output is streamed here, not kept */
  void* user;
  size_t output_limit;            /* 0: 16 MiB per stream kept in the result */
} sbsh_exec_opts;

/* Runs one command. *out must be freed with sbsh_result_free. */
int sbsh_exec(sbsh_conn* conn, const sbsh_exec_opts* opts, sbsh_result** out);
/* Returns 1 and sets *code when a process produced an exit status, else 0. */
int sbsh_result_exit_code(const sbsh_result* r, int* code);
int sbsh_result_signal(const sbsh_result* r); /* 0: none */
int sbsh_result_flags(const sbsh_result* r);
const char* sbsh_result_stdout(const sbsh_result* r, size_t* len);
const char* sbsh_result_stderr(const sbsh_result* r, size_t* len);
uint64_t sbsh_result_duration_us(const sbsh_result* r);
int64_t sbsh_result_started_at_ms(const sbsh_result* r);
const char* sbsh_result_error(const sbsh_result* r); /* "" when none */
void sbsh_result_free(sbsh_result* r);

/* Sessions. restart: "always", "on-failure", "never" (NULL: always). cwd NULL: caller's. */
int sbsh_session_create(sbsh_conn* conn, const char* name, const char* cwd, const char* const* env,
                        size_t env_count, const char* const* init, size_t init_count, const char* restart);
typedef void (*sbsh_session_fn)(void* user, const char* name, const char* state, int64_t shell_pid,
                                int64_t wrapper_pid);
int sbsh_session_list(sbsh_conn* conn, sbsh_session_fn fn, void* user);
int sbsh_session_remove(sbsh_conn* conn, const char* name);
int sbsh_session_restart(sbsh_conn* conn, const char* name);

/* Background processes, named by id ("7") or name. */
int sbsh_start(sbsh_conn* conn, const char* session, const char* name, const char* command, uint64_t* id_out);
int sbsh_kill(sbsh_conn* conn, const char* proc, int signal);
/* Waits (timeout_ms 0: forever); *state_out gets e.g. "exited", "killed", "lost" (16 bytes). */
int sbsh_wait(sbsh_conn* conn, const char* proc, int64_t timeout_ms, int* exit_code_out, char state_out[16]);
int sbsh_logs(sbsh_conn* conn, const char* proc, int follow, uint64_t tail, sbsh_output_fn fn, void* user);
/* The process table: fn gets each process; exit_code is -1 when there is none. */
typedef void (*sbsh_process_fn)(void* user, uint64_t id, const char* name, const char* session, const char* state,
                                int64_t pid, int exit_code, const char* command);
int sbsh_process_list(sbsh_conn* conn, int include_finished, sbsh_process_fn fn, void* user);

int sbsh_shutdown(sbsh_conn* conn);

#ifdef __cplusplus
}
#endif

#endif
