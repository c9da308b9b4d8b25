/* sbsh.h: the C ABI of libsbsh, for C programs and for foreign-function interfaces
 * (Python's ctypes and cffi, Node's ffi, ...). Plain C99; link with -lsbsh.
 *
 * It wraps the C++ API of <sbsh/client.h>: one implementation of the protocol serves every
 * language. Example:
 *
 *     sbsh_conn* c;
 *     if (sbsh_connect(NULL, 1, &c) != SBSH_OK) { fputs(sbsh_last_error(NULL), stderr); ... }
 *     sbsh_exec_opts o;
 *     sbsh_exec_opts_init(&o);
 *     o.session = "build";
 *     o.command = "cd web && npm test";
 *     sbsh_result* r;
 *     if (sbsh_exec(c, &o, &r) == SBSH_OK) {
 *       size_t n;
 *       const char* out = sbsh_result_stdout(r, &n);
 *       ... sbsh_result_exit_code(r) ...
 *       sbsh_result_free(r);
 *     }
 *     sbsh_close(c);
 *
 * CONVENTIONS
 *
 * Status. Every function that can fail returns SBSH_OK (0) or a negative SBSH_ERR_* code.
 * Out-parameters are written only on success.
 *
 * Errors. After a failure, sbsh_last_error(conn) is a one-line message a user can act on and
 * sbsh_last_error_code(conn) a machine-readable reason ("invalid_session_name",
 * "no_such_process", "unreachable", ...). Both are kept per connection handle (the most
 * recent call on that handle: "" after a call that succeeded) and, in addition, per thread:
 * with conn == NULL they describe the most recent failing call made by the calling thread on
 * any handle, which is the only way to learn why sbsh_connect failed. The returned strings
 * stay valid until the next call on the same handle (or, for NULL, the next call on the
 * same thread).
 *
 * Memory. Handles returned through out-parameters (sbsh_conn, sbsh_result, sbsh_proc,
 * sbsh_canceller, sbsh_lease) are owned by the caller and released with their *_free /
 * sbsh_close function; each accepts NULL. Strings and byte buffers returned by getters
 * belong to the handle and live as long as it does. JSON strings returned through `char**`
 * are allocated with malloc and released with sbsh_free.
 *
 * Strings are NUL-terminated UTF-8 unless a length goes with them; output bytes are raw
 * (any byte, NULs included) and always come with their length. A path, name or other
 * argument given as a C string ends at its first NUL: a binding whose strings carry their
 * length (Python's) must refuse one holding a NUL rather than pass it cut short (the Python
 * package raises ValueError). A path is its bytes, UTF-8 or not. Data given with a length
 * (stdin_data, sbsh_file_write's bytes, a plan's text) may hold any byte.
 *
 * Threads. A connection runs one request at a time and is not thread-safe: use one
 * connection per thread (or guard one with a lock). Different connections may be used from
 * different threads at once. sbsh_version, sbsh_error_name, sbsh_last_error(NULL) and the
 * sbsh_canceller functions are thread-safe; sbsh_canceller_cancel and sbsh_canceller_signal
 * are also async-signal-safe.
 *
 * Callbacks run on the calling thread, inside the call that was given them, and must not
 * call back into the same connection. No C++ exception ever leaves this library.
 *
 * Signals. While an exec feeds a command's stdin or copies its output to a descriptor, the
 * calling thread blocks SIGPIPE, so that a command which closes its stdin early does not
 * kill the caller; the mask is restored before sbsh_exec returns.
 *
 * Stability: this ABI is stable within libsbsh.so.0. Structures passed in carry a version
 * field set by their *_init function so that fields can be added without breaking callers.
 */
#ifndef SBSH_H
#define SBSH_H

#include <stddef.h>
#include <stdint.h>

#include "export.h"

/* A C header: C has typedef, not `using` (clang-tidy checks it as C++). */
/* NOLINTBEGIN(modernize-use-using) */
#ifdef __cplusplus
extern "C" {
#endif

/* The handles: opaque, created and released only by the functions below. */
typedef struct sbsh_conn sbsh_conn;           /* a connection to sbshd */
typedef struct sbsh_result sbsh_result;       /* how one exec ended, with its output */
typedef struct sbsh_proc sbsh_proc;           /* the state of one background process */
typedef struct sbsh_canceller sbsh_canceller; /* stops a running exec from elsewhere */
typedef struct sbsh_exec_call sbsh_exec_call; /* an exec driven by the caller's event loop */
typedef struct sbsh_lease sbsh_lease;         /* a session's shell, leased to one connection */

/* ---- Status codes ----------------------------------------------------------------------- */

enum {
  SBSH_OK = 0,
  SBSH_ERR_UNREACHABLE = -1, /* no daemon answers and none could be started (or autostart off) */
  SBSH_ERR_REFUSED = -2,     /* sbshd refused the request: bad session name, session exists
                                with another definition, session failed, shutting down, ... */
  SBSH_ERR_IO = -3,          /* the connection failed or sbshd went away; the handle is now
                                unusable: close it and connect again (from sbsh_lease_run:
                                the lease ended, and only the lease is unusable) */
  SBSH_ERR_TIMEOUT = -4,     /* sbsh_wait: the timeout passed while the process still runs */
  SBSH_ERR_INVALID = -5,     /* an argument was invalid (NULL where one is needed, a negative
                                timeout, an uninitialized options structure, ...) */
  SBSH_ERR_INTERNAL = -6,    /* out of memory, or a bug in libsbsh */
  SBSH_ERR_PROTOCOL = -7,    /* sbshd spoke a protocol version or message libsbsh does not
                                understand; the handle is now unusable */
  SBSH_ERR_NOT_FOUND = -8,   /* no such session, background process, kept command or environment */
  SBSH_PENDING = 1           /* sbsh_exec_call_step: the command has not ended yet */
};

/* A short name for a status code: "ok", "unreachable", "refused", "io", "timeout", "invalid",
 * "internal", "protocol", "not_found", "pending"; "unknown" for anything else. Static storage. */
SBSH_API const char* sbsh_error_name(int status);

/* Describes the most recent call on `conn` ("" if it succeeded); conn NULL: the most recent
 * failing call of the calling thread. Never NULL. See CONVENTIONS above. */
SBSH_API const char* sbsh_last_error(const sbsh_conn* conn);
SBSH_API const char* sbsh_last_error_code(const sbsh_conn* conn);

/* The library's version, e.g. "0.1.0". Static storage. */
SBSH_API const char* sbsh_version(void);

/* Releases a string returned through a `char**` out-parameter. NULL is allowed. */
SBSH_API void sbsh_free(void* p);

/* ---- Connections -------------------------------------------------------------------------- */

/* Connects to sbshd and performs the handshake.
 * socket_path: NULL or "" for the default ($SBSH_SOCKET, else $XDG_RUNTIME_DIR/sbsh/sbshd.sock,
 *   else /tmp/sbsh-$UID/sbshd.sock).
 * autostart: non-zero to start sbshd when none answers (race-free between many callers). The
 *   daemon program is sbshd beside the running executable, else sbshd on PATH (for an
 *   interpreter such as python3, that means PATH); sbsh_connect_ex names it.
 * On success *out is a new handle, to be released with sbsh_close. On failure, the reason is
 * in sbsh_last_error(NULL). */
SBSH_API int sbsh_connect(const char* socket_path, int autostart, sbsh_conn** out);

/* As sbsh_connect, with the path of the daemon program to start (NULL or "": as above). */
SBSH_API int sbsh_connect_ex(const char* socket_path, int autostart, const char* daemon_path, sbsh_conn** out);

/* Connects through a program instead of a socket, to a sbshd that may run on another host:
 * argv (NULL-terminated; argv[0] is looked up on PATH) must lead, through its stdin and
 * stdout, to `sbsh dial-stdio` where that sbshd runs, e.g.
 *   {"kubectl", "exec", "-i", "POD", "--", "sbsh", "dial-stdio", NULL}.
 * The program runs in a process group of its own with the caller's stderr and is ended by
 * sbsh_close. Over it, output travels in frames (descriptors cannot cross) and this process's
 * directory is never a default (a new session starts in the far user's home). */
SBSH_API int sbsh_connect_dial(const char* const* argv, sbsh_conn** out);

/* Connects to sbshd on another host or in a container, as `sbsh -H URL` does. url:
 * "ssh://[USER@]HOST[:PORT]" (ssh in batch mode: it must not need to ask for a password),
 * "podman://CONTAINER", "docker://CONTAINER" (the engine's `exec -i`) or
 * "kubectl://[NAMESPACE/]POD[/CONTAINER]" (`kubectl exec -i`). remote_socket (NULL or "": the
 * far user's default) and autostart apply over there, where `sbsh` must be on the user's
 * PATH. A malformed url is SBSH_ERR_INVALID, with the reason in sbsh_last_error. */
SBSH_API int sbsh_connect_host(const char* url, const char* remote_socket, int autostart, sbsh_conn** out);

/* Closes the connection and frees the handle. NULL is allowed. Running background processes
 * and sessions are not affected. A lease held on it is released first; its handle still
 * needs sbsh_lease_free. */
SBSH_API void sbsh_close(sbsh_conn* conn);

/* The socket path this handle is connected to, or the command line of its dial program
 * (owned by the handle; "" for NULL). */
SBSH_API const char* sbsh_socket_path(const sbsh_conn* conn);

/* The connected socket, for callers that multiplex (-1 for NULL). Do not read or write it. */
SBSH_API int sbsh_fd(const sbsh_conn* conn);

/* ---- Cancelling a running exec ------------------------------------------------------------ */

/* A canceller stops or signals a running exec from another thread or a signal handler: put
 * sbsh_canceller_fd(c) in sbsh_exec_opts.cancel_fd, then call sbsh_canceller_cancel(c) (stop
 * the command: SIGTERM to its process group, SIGKILL after the grace period, a shell restart
 * for a builtin; the result reports cancelled) or sbsh_canceller_signal(c, SIGINT) (deliver one
 * signal). A request made while no exec is running waits in the canceller for the next exec
 * that uses it; sbsh_canceller_reset discards such leftovers. One canceller may serve many
 * execs in turn. */
SBSH_API int sbsh_canceller_new(sbsh_canceller** out);
SBSH_API int sbsh_canceller_fd(const sbsh_canceller* c);
SBSH_API void sbsh_canceller_cancel(const sbsh_canceller* c);
SBSH_API void sbsh_canceller_signal(const sbsh_canceller* c, int sig);
SBSH_API void sbsh_canceller_reset(const sbsh_canceller* c);
SBSH_API void sbsh_canceller_free(sbsh_canceller* c);

/* ---- Exec ------------------------------------------------------------------------------- */

/* Output callback: stream is 1 (stdout) or 2 (stderr); data holds len raw bytes and is not
 * NUL-terminated; it is valid only during the call. */
typedef void (*sbsh_output_fn)(void* user, int stream, const char* data, size_t len);

#define SBSH_EXEC_OPTS_VERSION 4

typedef struct sbsh_exec_opts {
  unsigned int version;       /* SBSH_EXEC_OPTS_VERSION (set by sbsh_exec_opts_init) */
  const char* command;        /* required: shell text, run at the session shell's top level */
  const char* session;        /* NULL: "default" (created on first use) */
  const char* cwd;            /* non-NULL: run in a subshell in this directory (not kept) */
  const char* const* env;     /* env_count "NAME=VALUE" entries for this command only
                                 (a subshell, like cwd) */
  size_t env_count;
  int64_t timeout_ms;         /* 0: none. When it passes, the command's process group is
                                 stopped and the result reports timed_out */
  int64_t grace_ms;           /* 0: the daemon's default delay from SIGTERM to SIGKILL */
  /* Standard input: stdin_data non-NULL: exactly these stdin_len bytes, then EOF (len 0:
   * immediate EOF). Else stdin_fd >= 0: everything read from that descriptor until EOF.
   * Else /dev/null. */
  const char* stdin_data;
  size_t stdin_len;
  int stdin_fd;               /* -1 (default): none */
  /* Output: with on_output set, every chunk is passed to it as it arrives and nothing is
   * kept in the result (unless collect_output, version 4). Else with stdout_fd / stderr_fd >= 0, that stream is copied to the
   * descriptor (splice(2) where possible) and not kept. Else it is kept in the result, up
   * to output_limit bytes per stream: of a longer stream, its first and last half (cut
   * between UTF-8 characters), the bytes between them counted (sbsh_result_stdout_omitted). */
  sbsh_output_fn on_output;
  void* user;                 /* passed to on_output */
  int stdout_fd;              /* -1 (default): keep in the result */
  int stderr_fd;              /* -1 (default): keep in the result */
  size_t output_limit;        /* 0: 16 MiB per stream */
  int cancel_fd;              /* -1 (default), or sbsh_canceller_fd() of a canceller */
  const char* session_cwd;    /* where the session starts if this exec creates it
                                 (NULL: the caller's current directory) */
  /* Version 2. keep non-zero: sbshd keeps the command's output and result under its id
   * (sbsh_result_command_id) for an hour after it ends: sbsh_await_command and
   * sbsh_kill_command reach it. detach_after_ms > 0 (implies keep): when the command has not
   * ended by then, sbsh_exec returns with sbsh_result_running 1, its id and the output so
   * far, and the command goes on at the session's top level (sbsh(1), exec --detach-after). */
  int64_t detach_after_ms;
  int keep;
  /* Version 3. tty non-zero: a pseudo-terminal as the command's controlling terminal, stdin,
   * stdout and stderr (its output, stderr merged, comes as stdout; stdin is typed into it,
   * its end a Ctrl-D); cols and rows its size (0: 80 by 24, at most 10000). interactive
   * non-zero: its stdin stays open, also after detach_after_ms, and sbshd watches whether
   * it waits for input: detach_after_ms then returns as soon as it does
   * (sbsh_result_waiting_for_input, sbsh_result_prompt). sbsh(1), exec --tty and
   * --interactive. */
  int tty;
  unsigned int cols, rows;
  int interactive;
  /* Version 4. collect_output non-zero, with on_output: the output is kept in the result
   * too, as it is without on_output (output_limit, its first and last half). */
  int collect_output;
} sbsh_exec_opts;

/* Fills *opts with the defaults (every pointer NULL, every descriptor -1, numbers 0) and
 * sets its version. Call it before setting fields; a zeroed structure is refused.
 * sbsh_exec_opts_init is a macro that passes the size of the caller's structure to
 * sbsh_exec_opts_init_size, which writes only that many bytes and sets the newest version
 * that fits in them: a binding that lays the structure out itself calls the function with
 * its own size. The function sbsh_exec_opts_init (what a program built against a sbsh.h of
 * version 1 calls) writes version 1's structure only. */
SBSH_API void sbsh_exec_opts_init(sbsh_exec_opts* opts);
SBSH_API void sbsh_exec_opts_init_size(sbsh_exec_opts* opts, size_t size);
#define sbsh_exec_opts_init(opts) sbsh_exec_opts_init_size((opts), sizeof *(opts))

/* Runs one command in a session and waits for it to end.
 * SBSH_OK means the request ran: *out is a result handle (release it with
 * sbsh_result_free) that says how the command ended, which may be a failure of the command
 * (a non-zero exit code, a timeout, a lost shell). A negative status means no result: the
 * request was refused (bad session name, ...) or the connection failed; *out is untouched. */
SBSH_API int sbsh_exec(sbsh_conn* conn, const sbsh_exec_opts* opts, sbsh_result** out);

/* A kept command, by its id: waits for it to end, at most timeout_ms (0: no limit), and
 * gives its result with its kept output (at most output_limit bytes per stream, kept as
 * sbsh_exec keeps them; 0: 16 MiB), or with sbsh_result_running 1 and the output so far when
 * the timeout passed first. SBSH_ERR_NOT_FOUND once sbshd has forgotten it. */
SBSH_API int sbsh_await_command(sbsh_conn* conn, uint64_t command_id, int64_t timeout_ms, size_t output_limit,
                                sbsh_result** out);
/* Stops a kept command as a timeout does (sig first, SIGTERM when 0; SIGKILL after the
 * grace period; the shell keeps its state) and gives its result once it has ended (without
 * its output: sbsh_await_command gives that). */
SBSH_API int sbsh_kill_command(sbsh_conn* conn, uint64_t command_id, int sig, sbsh_result** out);
/* Passes a kept command's output, from its start, to fn (stream 1: stdout, 2: stderr); with
 * follow non-zero, then what it writes until it ends (cancel_fd: -1, or sbsh_canceller_fd()
 * of a canceller that ends the follow early). streams: 1 stdout only, 2 stderr only, 0 or 3
 * both. *out (out may be NULL) gets its result without output, sbsh_result_running 1 when
 * it has not ended. */
SBSH_API int sbsh_command_logs(sbsh_conn* conn, uint64_t command_id, int follow, int streams, int cancel_fd,
                               sbsh_output_fn fn, void* user, sbsh_result** out);
/* Input for a kept command whose input is open (sbsh_exec_opts' tty or interactive, left
 * running by detach_after_ms): len bytes of data are typed into its terminal or written to its
 * stdin as it reads them (any size). flags: SBSH_INPUT_TYPED (keys as a person types them: an
 * Enter is CR, made LF on a pipe), SBSH_INPUT_EOF (then end its input: Ctrl-D on a terminal),
 * SBSH_INPUT_NO_WAIT (return once the input is in). Otherwise waits until it ends, waits for
 * input again, or timeout_ms (0: no limit) passes, and *out (out may be NULL) gets its state
 * with only the output it wrote after the input (sbsh_result_running,
 * sbsh_result_waiting_for_input, sbsh_result_prompt, or how it ended). SBSH_ERR_REFUSED with
 * code "no_input" when it takes no input (sbsh_last_error says why). */
enum { SBSH_INPUT_TYPED = 1, SBSH_INPUT_EOF = 2, SBSH_INPUT_NO_WAIT = 4 };
SBSH_API int sbsh_command_input(sbsh_conn* conn, uint64_t command_id, const void* data, size_t len, int flags,
                                int64_t timeout_ms, sbsh_result** out);
/* sbsh_command_logs from offsets: only what the command wrote after stdout_offset bytes of
 * stdout and stderr_offset bytes of stderr, such as an earlier result's
 * sbsh_result_stdout_bytes and sbsh_result_stderr_bytes (what is new since). */
SBSH_API int sbsh_command_logs_since(sbsh_conn* conn, uint64_t command_id, uint64_t stdout_offset,
                                     uint64_t stderr_offset, int follow, int streams, int cancel_fd,
                                     sbsh_output_fn fn, void* user, sbsh_result** out);

/* An exec for callers that run an event loop (asyncio, libuv, epoll): the same request as
 * sbsh_exec, driven without blocking. sbsh_exec_start sends it and returns at once with a
 * call handle. sbsh_exec_call_fd(call) is a descriptor (owned by the call) that becomes
 * readable when there is work: then call sbsh_exec_call_step(call, &r), which does what can
 * be done without waiting and returns SBSH_PENDING while the command runs, SBSH_OK with *out
 * the result once it has ended, or a negative status as sbsh_exec would. Callbacks
 * (on_output) run inside sbsh_exec_call_step; cancel_fd works as for sbsh_exec (a byte
 * written to it makes the descriptor readable). The connection serves nothing else until the
 * call has ended; sbsh_exec_call_free releases the call (NULL allowed), and releasing one
 * that has not ended leaves the connection unusable (SBSH_ERR_IO): close it. One thread at
 * a time per call, as for its connection. */
SBSH_API int sbsh_exec_start(sbsh_conn* conn, const sbsh_exec_opts* opts, sbsh_exec_call** out);
SBSH_API int sbsh_exec_call_fd(const sbsh_exec_call* call); /* -1 for NULL */
SBSH_API int sbsh_exec_call_step(sbsh_exec_call* call, sbsh_result** out);
SBSH_API void sbsh_exec_call_free(sbsh_exec_call* call);

/* 1 when a process produced an exit status (then sbsh_result_exit_code is it), else 0 (see
 * sbsh_result_signal and sbsh_result_error). sbsh never invents an exit code. */
SBSH_API int sbsh_result_has_exit_code(const sbsh_result* r);
SBSH_API int sbsh_result_exit_code(const sbsh_result* r);       /* -1 when there is none */
SBSH_API int sbsh_result_signal(const sbsh_result* r);          /* the signal that ended it; 0: none
                                                                   (exit code 137 alone is no signal) */
SBSH_API int sbsh_result_timed_out(const sbsh_result* r);       /* 1: stopped by timeout_ms */
SBSH_API int sbsh_result_cancelled(const sbsh_result* r);       /* 1: stopped by a canceller */
SBSH_API int sbsh_result_shell_restarted(const sbsh_result* r); /* 1: the shell ended; the session's
                                                                   state (cwd, variables) was lost */
/* 0: the command certainly did not run (no shell took it), so it is safe to send again;
 * 1: a shell took it (it may still have been cut short). */
SBSH_API int sbsh_result_ran(const sbsh_result* r);
/* The output kept in the result: a pointer to *len raw bytes (followed by a NUL that is not
 * counted, for convenience; the bytes themselves may contain NULs). Owned by r. */
SBSH_API const char* sbsh_result_stdout(const sbsh_result* r, size_t* len);
SBSH_API const char* sbsh_result_stderr(const sbsh_result* r, size_t* len);
SBSH_API int sbsh_result_stdout_truncated(const sbsh_result* r);
SBSH_API int sbsh_result_stderr_truncated(const sbsh_result* r);
/* Bytes left out between the first and the last part kept (output_limit). */
SBSH_API uint64_t sbsh_result_stdout_omitted(const sbsh_result* r);
SBSH_API uint64_t sbsh_result_stderr_omitted(const sbsh_result* r);
/* 1: the command still runs (detach_after_ms passed, or sbsh_await_command's timeout): its
 * exit status is not known yet. */
SBSH_API int sbsh_result_running(const sbsh_result* r);
/* 1 when the command went on (running) because it waits for input (sbsh_exec_opts' tty or
 * interactive), and the last line it printed (its prompt; "" when none): valid until the
 * result is freed. */
SBSH_API int sbsh_result_waiting_for_input(const sbsh_result* r);
SBSH_API const char* sbsh_result_prompt(const sbsh_result* r);
/* With sbsh_exec_opts' tty: what the command's terminal showed at its end, as text (a
 * terminal emulator's rendering of its output); "" otherwise. Valid until the result is
 * freed. */
SBSH_API const char* sbsh_result_screen(const sbsh_result* r);
/* The bytes the command wrote to each stream so far (what the result holds plus what was
 * left out, or all a kept command wrote): the offsets for sbsh_command_logs_since. */
SBSH_API uint64_t sbsh_result_stdout_bytes(const sbsh_result* r);
SBSH_API uint64_t sbsh_result_stderr_bytes(const sbsh_result* r);
/* sbshd's id for a kept command (keep, detach_after_ms), as sbsh(1) writes it after '%'; 0
 * when it is not kept. */
SBSH_API uint64_t sbsh_result_command_id(const sbsh_result* r);
SBSH_API uint64_t sbsh_result_duration_us(const sbsh_result* r);
SBSH_API int64_t sbsh_result_started_at_ms(const sbsh_result* r); /* Unix time, milliseconds; 0: never started */
/* Which shell ran it: a number that changes whenever the session's shell is replaced. */
SBSH_API uint64_t sbsh_result_generation(const sbsh_result* r);
/* 1: the session's shell was replaced since its previous command (it was killed, crashed or
 * restarted): this command ran without the state the earlier ones left; the reason says
 * what happened (owned by r; "" when the state was not lost). */
SBSH_API int sbsh_result_state_lost(const sbsh_result* r);
SBSH_API const char* sbsh_result_state_lost_reason(const sbsh_result* r);
/* 1: while the command ran, the kernel killed a process of the session's for memory (its
 * cgroup reached sbsh_session_spec.memory_max); the command's own status shows whether it
 * was the one. */
SBSH_API int sbsh_result_oom_killed(const sbsh_result* r);
/* 1: the command ran and succeeded: exit code 0, not stopped, its shell not lost. */
SBSH_API int sbsh_result_ok(const sbsh_result* r);
/* Why there is no exit code, or other trouble worth reporting; "" when none. Owned by r. */
SBSH_API const char* sbsh_result_error(const sbsh_result* r);
SBSH_API void sbsh_result_free(sbsh_result* r);

/* ---- Sessions --------------------------------------------------------------------------- */

/* Defines a session: every new shell of it starts in cwd (NULL: the caller's directory), with
 * the env_count "NAME=VALUE" entries of env, and runs the init_count commands of init first.
 * restart: "always" (NULL), "on-failure" or "never". Creating an existing session with the
 * same definition does nothing; with a different one it is refused (code "session_exists"). */
SBSH_API int sbsh_session_create(sbsh_conn* conn, const char* name, const char* cwd, const char* const* env,
                        size_t env_count, const char* const* init, size_t init_count, const char* restart);
/* The same, with the limit_count resource limits of limits ("NAME=VALUE", as
 * `sbsh session create --limit`, sbsh(1)) set on every shell of the session. */
SBSH_API int sbsh_session_create_limited(sbsh_conn* conn, const char* name, const char* cwd, const char* const* env,
                                size_t env_count, const char* const* init, size_t init_count, const char* restart,
                                const char* const* limits, size_t limit_count);

#define SBSH_SESSION_SPEC_VERSION 4

/* A session's whole definition, for sbsh_session_create_spec; fields that later versions
 * add go at the end. */
typedef struct sbsh_session_spec {
  unsigned int version;       /* SBSH_SESSION_SPEC_VERSION (set by sbsh_session_spec_init) */
  const char* name;           /* required */
  const char* cwd;            /* NULL: the caller's directory (not with snapshot) */
  const char* const* env;     /* env_count "NAME=VALUE" entries */
  size_t env_count;
  const char* const* init;    /* init_count commands run in every new shell first */
  size_t init_count;
  const char* restart;        /* NULL: "always"; or "on-failure", "never" */
  const char* const* limits;  /* limit_count resource limits, as sbsh_session_create_limited */
  size_t limit_count;
  /* NULL, or an absolute directory that sbshd copies for the session before its first
   * shell starts (`sbsh session create --snapshot`, sbsh(1)): every shell starts in the
   * copy, which sbsh_session_remove deletes. The call returns once the copy is made. */
  const char* snapshot;
  /* Version 2. NULL, or the directory the session is confined to (`sbsh session create
   * --root`, sbsh(1)): its shells start there (a relative cwd is taken from it) with
   * SBSH_ROOT set, and sbsh_exec's cwd must name a directory beneath it. Not with snapshot,
   * whose copy is the session's root. */
  const char* root;
  /* Version 3. NULL, or a setup that builds the session's environment once, shared by every
   * session with the same setup and key files (`sbsh session create --setup`, sbsh(1)):
   * its shells get SBSH_ENV. When the environment is not built yet the setup runs before
   * the call returns; a failed one fails it with code "setup_failed" and a message holding
   * its status and the end of its output. setup_keys: setup_key_count files or directories
   * (relative: to the session's directory) whose contents are part of the key; a directory
   * counts as its files' relative paths, executable bits and bytes, less what a snapshot
   * leaves out (node_modules, .git). */
  const char* setup;
  const char* const* setup_keys;
  size_t setup_key_count;
  /* Version 4. confine non-zero: the kernel confines the session (`sbsh session create
   * --confine`, sbsh(1)): its shell and all it starts may read and write beneath its root
   * (root or snapshot is required) and a private TMPDIR, read and run the system's programs,
   * and reach nothing else; it is the init of a PID namespace of its own, so all it starts
   * ends with it. allow_write, allow_read (read and run) and read_only (read) add
   * allow_write_count, ... absolute paths to those rules (only with confine: without it,
   * or with a relative path, the call fails with SBSH_ERR_INVALID). no_network non-zero: a
   * network namespace with only loopback. A kernel without Landlock or namespaces refuses
   * with SBSH_ERR_REFUSED and sbsh_last_error_code() "not_supported", saying what it lacks.
   * memory_max (bytes, swap included), pids_max (processes) and cpu_millis (thousandths of
   * a CPU: 1500 is one and a half), 0 for none: limits of a cgroup of the session's own,
   * where sbshd has a cgroup v2 delegated to it with those controllers; elsewhere refused
   * ("not_supported", naming what is missing). sbsh_session_show_json reads all of this back
   * under definition.confinement, with the Landlock ABI in force and the session's cgroup. */
  int confine;
  const char* const* allow_write;
  size_t allow_write_count;
  const char* const* allow_read;
  size_t allow_read_count;
  const char* const* read_only;
  size_t read_only_count;
  int no_network;
  uint64_t memory_max;
  uint64_t pids_max;
  uint64_t cpu_millis;
} sbsh_session_spec;

/* Fills *spec with the defaults (every pointer NULL, counts 0) and sets its version.
 * sbsh_session_spec_init is a macro that tells the library the size of the caller's
 * structure, so that a program built against an older sbsh.h (a smaller structure) never has
 * more written than it has: the function of that name, which programs built before the
 * macro call, fills only version 1's fields and sets version 1. Bindings that load the
 * library (ctypes, ffi) call sbsh_session_spec_init_size with the size of their structure. */
SBSH_API void sbsh_session_spec_init_size(sbsh_session_spec* spec, size_t size);
SBSH_API void sbsh_session_spec_init(sbsh_session_spec* spec);
#define sbsh_session_spec_init(spec) sbsh_session_spec_init_size((spec), sizeof *(spec))
/* Defines a session as *spec says; otherwise as sbsh_session_create. */
SBSH_API int sbsh_session_create_spec(sbsh_conn* conn, const sbsh_session_spec* spec);
/* The same; while the spec's setup runs (when its environment is not built yet), on_output
 * (when not NULL) gets what the setup writes as it comes, stream 1 (stdout) or 2 (stderr),
 * on the calling thread, as exec's on_output does. */
SBSH_API int sbsh_session_create_spec_output(sbsh_conn* conn, const sbsh_session_spec* spec, sbsh_output_fn on_output,
                                             void* user);

/* Listings are JSON, in exactly the form `sbsh ... --json` prints (JSON OUTPUT in sbsh(1)),
 * so that fields can be added without changing the ABI. Times are RFC 3339 UTC strings,
 * signals names such as "SIGTERM"; text that is not valid UTF-8 has its invalid bytes
 * replaced by U+FFFD. Each document is malloc'd: release it with sbsh_free.
 *
 * The sessions, as `sbsh session ls --json`: an array of
 *   {"name", "state" (starting|ready|running|restarting|exited|failed), "shell_pid",
 *    "wrapper_pid", "restarts", "queued", "commands", "cwd", "restart", "uptime_ms",
 *    "started_at" (or null), "running" (command text or null), "running_ms" (or null),
 *    "error" (or null)} */
SBSH_API int sbsh_sessions_json(sbsh_conn* conn, char** json_out);

/* One session in detail, as `sbsh session show NAME --json`: {"session" (as above),
 * "definition" {"cwd", "env", "init", "restart", "limits", "root", ..., and for a session
 * the kernel confines "confinement" {"landlock", "landlock_abi", "rules", "namespaces",
 * "limits", "memory_max", "pids_max", "cpu_millis", "cgroup"}}, "history" (the last commands, oldest first:
 * {"command", "exit_code" (or null), "timed_out", "shell_restarted", "started_at",
 * "duration_ms"}), "init_output"}. */
SBSH_API int sbsh_session_show_json(sbsh_conn* conn, const char* name, char** json_out);

/* Removes a session; returns once nothing of it is left (its shell and wrapper are gone). */
SBSH_API int sbsh_session_remove(sbsh_conn* conn, const char* name);
/* The same, leaving the session's snapshot copy in place (`sbsh session rm --keep-copy`; a
 * session without a snapshot is refused). *path_out (path_out may be NULL) gets where the
 * copy was kept; release it with sbsh_free. */
SBSH_API int sbsh_session_remove_keep_copy(sbsh_conn* conn, const char* name, char** path_out);

/* Restarts a session's shell (its state is lost; the definition is kept). */
SBSH_API int sbsh_session_restart(sbsh_conn* conn, const char* name);

/* Removes every session made implicitly (an exec or start naming a session that did not
 * exist) that has been idle for at least idle_ms, as `sbsh session prune --idle`; returns
 * once they are gone. *json_out (json_out may be NULL) gets their names as a JSON array. */
SBSH_API int sbsh_session_prune(sbsh_conn* conn, int64_t idle_ms, char** json_out);

/* The snapshot copies kept after their sessions, oldest first, as `sbsh session ls --kept
 * --json`: an array of {"session", "path", "kept_at", "size_bytes"}. */
SBSH_API int sbsh_kept_copies_json(sbsh_conn* conn, char** json_out);
/* Deletes every kept copy; returns once they are gone. *json_out (json_out may be NULL)
 * gets those deleted, as above without "size_bytes". */
SBSH_API int sbsh_kept_copies_prune(sbsh_conn* conn, char** json_out);

/* ---- Environments ---------------------------------------------------------------------- */

/* The environments setups built (sbsh_session_spec's setup), most recently used first, as
 * `sbsh env ls --json`: an array of {"hash", "path", "setup", "keys", "size_bytes",
 * "created_at", "last_used", "sessions"}. */
SBSH_API int sbsh_environments_json(sbsh_conn* conn, char** json_out);
/* Deletes the environment hash. While a session is defined with it, it is refused
 * (sbsh_last_error_code() "env_in_use") unless force is non-zero. */
SBSH_API int sbsh_environment_remove(sbsh_conn* conn, const char* hash, int force);
/* Deletes the environments no session uses: all of them; with keep >= 0 all but the keep
 * most recently used; with older_than_ms > 0 only those unused for that long (both given:
 * either one keeps an environment). keep -1 and older_than_ms 0: no such bound. Returns once
 * they are gone; *json_out (json_out may be NULL) gets them, as sbsh_environments_json. */
SBSH_API int sbsh_environments_prune(sbsh_conn* conn, int64_t keep, int64_t older_than_ms, char** json_out);

/* ---- Background processes ----------------------------------------------------------------- */

/* Processes are named by their id ("7") or by the name given at start. */

/* Starts command as a background process of session (NULL: "default"), optionally named
 * (name NULL: none), in cwd (NULL: the session's directory) with env_count "NAME=VALUE" entries
 * for it only. Its output goes to log files (see sbsh_logs). *id_out (may be NULL) gets its id. */
SBSH_API int sbsh_start(sbsh_conn* conn, const char* command, const char* session, const char* name, const char* cwd,
               const char* const* env, size_t env_count, uint64_t* id_out);

/* The process table, as the "processes" of `sbsh ps --json` (JSON; see sbsh_sessions_json):
 * an array of
 *   {"id", "name", "session", "command", "state" (starting|running|exited|killed|failed|lost|not_started),
 *    "pid" and "pgid" (the same; null before it starts), "exit_code" (or null), "signal"
 *    (name or null), "started_at", "ended_at" (null while it runs), "error" (or null),
 *    "log" (path of its stdout log; stderr: the same with .err)}
 * include_finished: non-zero to include processes that have ended. */
SBSH_API int sbsh_processes_json(sbsh_conn* conn, int include_finished, char** json_out);

/* The commands sbshd keeps that run detached from any client (sbsh_exec_opts detach_after_ms),
 * as the "commands" of `sbsh ps --json`: an array of
 *   {"id" ("%N", as sbsh_await_command's command_id N), "session", "command", "state"
 *    (queued|running|finished), "detached" (bool), "pid" (the session's shell, which runs it;
 *    null unless running), "exit_code" (or null), "signal" (name or null), "timed_out",
 *    "cancelled" (bool), "started_at", "ended_at" (or null)}
 * include_finished: non-zero to list every command kept, those that have ended too. */
SBSH_API int sbsh_commands_json(sbsh_conn* conn, int include_finished, char** json_out);

/* Sends signal to the process's whole tree. For a terminating signal (SIGTERM, SIGKILL, ...)
 * it returns once the process has ended (SIGTERM escalates to SIGKILL after 2 s).
 * *out (out may be NULL) gets the process's state afterwards; release it with sbsh_proc_free. */
SBSH_API int sbsh_kill(sbsh_conn* conn, const char* proc, int signal, sbsh_proc** out);

/* Waits for the process to end (timeout_ms 0: no limit). SBSH_ERR_TIMEOUT when the timeout
 * passes first (the process keeps running). *out (out may be NULL) gets its final state. */
SBSH_API int sbsh_wait(sbsh_conn* conn, const char* proc, int64_t timeout_ms, sbsh_proc** out);

/* Streams the process's logs to fn (stream 1: stdout, 2: stderr).
 * follow: non-zero to keep streaming until the process ends. tail: only the last N lines of
 * each stream (0: everything kept). streams: 1 stdout only, 2 stderr only, 0 or 3 both.
 * cancel_fd: -1, or sbsh_canceller_fd() of a canceller whose sbsh_canceller_cancel() ends a
 * follow early (sbsh_logs then returns SBSH_OK as at the end; the process goes on).
 * *out (out may be NULL) gets the process's state at the end. */
SBSH_API int sbsh_logs(sbsh_conn* conn, const char* proc, int follow, uint64_t tail, int streams, int cancel_fd,
              sbsh_output_fn fn, void* user, sbsh_proc** out);

/* Getters of a process handle. Strings are owned by p. */
SBSH_API uint64_t sbsh_proc_id(const sbsh_proc* p);
SBSH_API const char* sbsh_proc_name(const sbsh_proc* p);     /* "" when unnamed */
SBSH_API const char* sbsh_proc_session(const sbsh_proc* p);
SBSH_API const char* sbsh_proc_command(const sbsh_proc* p);
SBSH_API const char* sbsh_proc_state(const sbsh_proc* p); /* starting|running|exited|killed|failed|lost|not_started */
SBSH_API int64_t sbsh_proc_pid(const sbsh_proc* p);          /* also its process group; 0 before start */
SBSH_API int sbsh_proc_has_exit_code(const sbsh_proc* p);
SBSH_API int sbsh_proc_exit_code(const sbsh_proc* p);        /* -1 when there is none */
SBSH_API int sbsh_proc_signal(const sbsh_proc* p);           /* 0: none */
SBSH_API int64_t sbsh_proc_started_at_ms(const sbsh_proc* p);
SBSH_API int64_t sbsh_proc_ended_at_ms(const sbsh_proc* p);  /* 0 while it runs */
SBSH_API const char* sbsh_proc_error(const sbsh_proc* p);    /* "" when none */
SBSH_API const char* sbsh_proc_log_path(const sbsh_proc* p);
SBSH_API void sbsh_proc_free(sbsh_proc* p);

/* ---- Files beneath a session's root ------------------------------------------------------ */

/* What `sbsh file` does (sbsh(1)): files beneath the root of `session` (NULL: "default"), its
 * --root directory or its snapshot's copy. A path is taken from the root (an absolute one only
 * if it lies beneath it) and resolved beneath it: one that leads outside is refused with
 * SBSH_ERR_REFUSED and sbsh_last_error_code() "outside_root" (the message names the path as
 * given and nothing outside); a write beneath what a confined session may only read gives
 * "read_only"; a session without a root gives "no_root"; a failure ("no such
 * file", "is a directory", "not a regular file", ...) "file_failed". Bytes are exact and no
 * size is too large: on a local connection the open file itself is passed, through a dial
 * command the bytes go in chunks. */

/* Writes in_fd's bytes, to its end, to path, whole or not at all (a new file beside it,
 * renamed over it). mode: the permission bits, or -1 to keep an existing file's (a new one
 * gets 0644). parents: non-zero to make missing parent directories. *written (may be NULL)
 * gets the bytes the file holds. */
SBSH_API int sbsh_file_write_fd(sbsh_conn* conn, const char* session, const char* path, int in_fd, int mode,
                                int parents, uint64_t* written);
/* The same with len bytes at data. */
SBSH_API int sbsh_file_write(sbsh_conn* conn, const char* session, const char* path, const void* data, size_t len,
                             int mode, int parents);
/* Copies path's bytes from offset, at most length of them (-1: to the end), to out_fd;
 * *copied (may be NULL) gets how many. */
SBSH_API int sbsh_file_read_fd(sbsh_conn* conn, const char* session, const char* path, int out_fd, uint64_t offset,
                               int64_t length, uint64_t* copied);
/* The same into memory: *data_out is malloc'd (sbsh_free), *len_out its length; a NUL
 * follows it, not counted. */
SBSH_API int sbsh_file_read(sbsh_conn* conn, const char* session, const char* path, uint64_t offset, int64_t length,
                            char** data_out, size_t* len_out);
/* One entry as `sbsh file stat --json` prints it: {"path", "type" (file, dir, symlink, fifo,
 * socket, char, block), "size", "mode" (octal text), "mtime" (RFC 3339), "target" (symlinks),
 * and "path_base64" / "target_base64", the exact bytes of a path or target that is not valid
 * UTF-8 (only then: its text has U+FFFD in their place)}; and a directory's entries ("" or NULL: the root's), recursive: all beneath it, as an array
 * of them (`sbsh file ls --json`). malloc'd: release with sbsh_free. */
SBSH_API int sbsh_file_stat_json(sbsh_conn* conn, const char* session, const char* path, char** json_out);
SBSH_API int sbsh_file_list_json(sbsh_conn* conn, const char* session, const char* path, int recursive,
                                 char** json_out);
/* Removes a file, a symlink or an empty directory (recursive: a directory and all in it);
 * never the root. */
SBSH_API int sbsh_file_remove(sbsh_conn* conn, const char* session, const char* path, int recursive);
/* Makes a directory (parents: and its missing parents; an existing one is then no error). */
SBSH_API int sbsh_file_mkdir(sbsh_conn* conn, const char* session, const char* path, int parents);
/* Renames from to to, both beneath the root. */
SBSH_API int sbsh_file_move(sbsh_conn* conn, const char* session, const char* from, const char* to);

/* The operations of `sbsh file edit`, `file read --lines`, `file search` and `file ls
 * --depth` (sbsh(1)), on the same requests: edit, lines and search read each file whole, at
 * most 16 MiB (a larger one gives "file_failed"). Each *json_out (may be NULL where said) is
 * malloc'd: release with sbsh_free. */

/* Replaces old_len bytes at old_text (not empty) with new_len bytes at new_text, exactly,
 * in path, which is written whole (as sbsh_file_write) and keeps its mode. The old text must
 * occur exactly once unless replace_all; otherwise nothing changes and the call fails with
 * SBSH_ERR_REFUSED, sbsh_last_error_code() "no_match" (0 times) or "not_unique" (the message
 * says how many). *json_out (may be NULL) gets {"path", "replacements", "bytes" (the file's
 * size now), "first_line" (where the first replacement starts)}. */
SBSH_API int sbsh_file_edit(sbsh_conn* conn, const char* session, const char* path, const void* old_text,
                            size_t old_len, const void* new_text, size_t new_len, int replace_all, char** json_out);
/* Lines of path: from line (1 the first; negative counts from the end: -20 for the last 20;
 * 0 is SBSH_ERR_INVALID), count of them (-1: to the end). *data_out gets their exact bytes,
 * newlines included (malloc'd, a NUL after them, not counted in *len_out); both may be NULL
 * together. *json_out (may be NULL) gets {"path", "bytes", "content", "encoding" (utf-8, or
 * base64 when the bytes are not UTF-8), "truncated" (the file goes on), "start_line",
 * "end_line", "total_lines"}, as `sbsh file read --lines --json`. */
SBSH_API int sbsh_file_read_lines(sbsh_conn* conn, const char* session, const char* path, int64_t line, int64_t count,
                                  char** data_out, size_t* len_out, char** json_out);
/* The lines matching pattern, a POSIX extended regular expression (one that is not gives
 * SBSH_ERR_INVALID), in the files beneath dir (NULL or "": the root; a file: that one alone)
 * whose name matches glob (NULL: all), ignore_case non-zero to match regardless of case;
 * leaving out what a snapshot leaves out by default (.git, node_modules, ...), files with a
 * NUL byte and files over 16 MiB. *json_out gets {"matches": [{"path", "line", "text"}],
 * "files_searched", "files_skipped", "truncated", "dir" (the directory the paths are from:
 * dir, or the one holding it when it is a file)}, as `sbsh file search --json`. */
SBSH_API int sbsh_file_search_json(sbsh_conn* conn, const char* session, const char* pattern, const char* dir,
                                   const char* glob, int ignore_case, char** json_out);
/* As sbsh_file_list_json, depth levels beneath path (1: its own entries; 0 is
 * SBSH_ERR_INVALID), as `sbsh file ls --depth`. */
SBSH_API int sbsh_file_list_depth_json(sbsh_conn* conn, const char* session, const char* path, uint64_t depth,
                                       char** json_out);

/* ---- The daemon ------------------------------------------------------------------------- */

/* The daemon's status, as `sbsh status --json`:
 *   {"pid", "version", "uptime_ms", "socket", "sessions": [as sbsh_sessions_json]} */
SBSH_API int sbsh_status_json(sbsh_conn* conn, char** json_out);

/* Asks sbshd to stop: its sessions end and it exits. The connection is unusable afterwards;
 * close it. */
SBSH_API int sbsh_shutdown(sbsh_conn* conn);

/* Asks sbshd to stop but to leave its sessions (their shells, any running command, and their
 * background processes with their logs) running, for the next sbshd on the same socket to adopt (sbshd(8), ADOPTION). */
SBSH_API int sbsh_shutdown_keep_sessions(sbsh_conn* conn);

/* ---- Any request (since SBSH_0.2) --------------------------------------------------------- */

/* Sends any request of sbsh-protocol(7) that sbshd answers with one reply, written as a JSON
 * object: {"type": NAME, FIELD: VALUE...}, NAME the request's name ("session_show") and its
 * fields as the protocol's MESSAGES section lists them ({"type": "session_show", "name":
 * "build"}). The request is checked against its declaration before anything is sent: text
 * that is not JSON, an unknown type, a field the request does not have, a value of the wrong
 * type or a required field missing is SBSH_ERR_INVALID (code "usage"), and the message names
 * it. *reply_json gets the reply's JSON form, to release with sbsh_free: {} when sbshd
 * answered ok, else the reply's fields in the form of the *_json functions ({"sessions":
 * [...]} for session_list, as sbsh_sessions_json's elements). A refusal is its error, as for
 * the other calls. The requests whose answer is more than one reply or carries descriptors
 * (exec, session_create, the logs, file_read, file_write, file_list and the like) are
 * SBSH_ERR_INVALID here: each has its own function. */
SBSH_API int sbsh_request_json(sbsh_conn* conn, const char* request_json, char** reply_json);

/* ---- Leases (since SBSH_0.2) -------------------------------------------------------------- */

/* A lease of a session's shell (docs/architecture.md, "The direct path"): commands go from
 * this process to the shell and back on a socket of their own, not through sbshd, each with
 * fresh pipes: exact stdout and stderr, and the status the shell sends (checked to come from
 * it). The shell's state (directory, variables) carries to and from the session's other
 * commands. While a lease is held its connection serves nothing else: any other call on it
 * fails with SBSH_ERR_INVALID (code "usage") until the lease is released; use another
 * connection for the rest. A lease ends with sbsh_lease_release (or sbsh_lease_free, or
 * sbsh_close of its connection), when its connection closes, when the session's shell
 * ends, and when any other request is queued on the session (another client's exec, an
 * sbsh start, ...): its next sbsh_lease_run then fails with SBSH_ERR_IO and code "eof", the
 * command not run (unless the lease ended while it ran, which the message says). Only the
 * lease is done then: release it and the connection serves again (an exec runs the command
 * through sbshd, behind the others; a new lease may be asked for).
 *
 * Errors of the lease's calls are recorded on its connection (sbsh_last_error(conn)) and on
 * the calling thread. A lease is used from one thread at a time, as its connection. */

/* Asks sbshd for a lease of session's shell (NULL: "default"), granted once the commands
 * queued before it have run; *out is the lease, to release with sbsh_lease_free. Refused:
 * a session that does not exist (SBSH_ERR_NOT_FOUND, code "no_such_session"); a connection
 * through a dial command or a host (sbsh_connect_dial, sbsh_connect_host: no descriptor
 * passes; SBSH_ERR_REFUSED, code "not_supported"), a shell that takes no leases (an older
 * builtin), or a confined session of an sbshd that runs as root; a connection that holds a
 * lease already (SBSH_ERR_INVALID, code "usage"). */
SBSH_API int sbsh_lease_new(sbsh_conn* conn, const char* session, sbsh_lease** out);

/* Runs command at the shell's top level, stdin /dev/null, and waits for it to end: *out is
 * its result (release it with sbsh_result_free), read with the sbsh_result_* getters as an
 * exec's: the whole stdout and stderr, exactly (no output limit), its exit code or signal,
 * sbsh_result_timed_out and sbsh_result_cancelled. timeout_ms: 0 for none, else passed to
 * the shell with the command, for sbshd to stop it as it stops an exec that times out. A
 * negative status means no result: SBSH_ERR_IO with code "eof" when the lease has ended (see
 * above), SBSH_ERR_PROTOCOL when the lease's socket carried something that is not the
 * shell's status (the lease is dropped), SBSH_ERR_INVALID for a NULL argument, a negative
 * timeout or a lease whose connection was closed. */
SBSH_API int sbsh_lease_run(sbsh_lease* lease, const char* command, int64_t timeout_ms, sbsh_result** out);

/* Ends the lease and waits for sbshd to say so; the connection then serves other requests
 * again. SBSH_OK too when the lease had ended already (also when another request ended it)
 * or was released before; a failure is the connection's (SBSH_ERR_IO: close it). */
SBSH_API int sbsh_lease_release(sbsh_lease* lease);

/* 1 from sbsh_lease_new until it is released or a run found it ended; else 0 (and for NULL). */
SBSH_API int sbsh_lease_held(const sbsh_lease* lease);
/* The session's shell that runs the lease's commands, as this process sees its pid (0 for
 * NULL); and which shell it is, as sbsh_result_generation numbers them. Both stay after the
 * lease's end. */
SBSH_API int64_t sbsh_lease_shell_pid(const sbsh_lease* lease);
SBSH_API uint64_t sbsh_lease_generation(const sbsh_lease* lease);

/* Releases the lease if it is held (as sbsh_lease_release, its failure recorded on the
 * connection) and frees the handle. NULL is allowed. A lease whose connection was closed
 * (sbsh_close released it) is only freed. */
SBSH_API void sbsh_lease_free(sbsh_lease* lease);

/* ---- Plans -------------------------------------------------------------------------------- */

/* A plan is staged commands run in one fresh session, with a report and a live event log:
 * what `sbsh run PLAN` does (sbsh(1): PLANS for the format, REPORT and EVENTS for the two JSON
 * documents, which are the same here). */

/* Event callback: json holds len bytes, one event (a JSON object, exactly a line of the event
 * log without its newline), NUL-terminated, valid only during the call. */
typedef void (*sbsh_event_fn)(void* user, const char* json, size_t len);

#define SBSH_RUN_OPTS_VERSION 1

typedef struct sbsh_run_opts {
  unsigned int version;       /* SBSH_RUN_OPTS_VERSION (set by sbsh_run_opts_init) */
  const char* session;        /* NULL: a new name, "run-<pid>-<n>"; a session of the name given
                                 must not exist (a run starts from a fresh shell) */
  int keep_session;           /* non-zero: leave the session when the run ends */
  size_t output_limit;        /* bytes of each stream kept in the report, per command; 0: 1 MiB */
  const char* artifacts_dir;  /* non-NULL: each command's whole stdout and stderr go to
                                 DIR/<stage>/<n>.stdout and .stderr as they arrive */
  const char* report_path;    /* non-NULL: the report is written there when the run ends */
  const char* events_path;    /* non-NULL: the event log, one JSON object per line, as it happens */
  int events_fd;              /* -1 (default), or a descriptor that also gets the event log */
  int cancel_fd;              /* -1 (default), or a descriptor (sbsh_canceller_fd()) on which a
                                 readable byte cancels the run: the running command is stopped,
                                 the run ends "cancelled", and the report is still written. The
                                 byte is not read: sbsh_canceller_reset clears it before the
                                 canceller serves again. */
  sbsh_event_fn on_event;     /* NULL, or called with each event after the event log has it */
  void* user;                 /* passed to on_event */
} sbsh_run_opts;

/* Fills *opts with the defaults (pointers NULL, descriptors -1, numbers 0) and sets its
 * version. */
SBSH_API void sbsh_run_opts_init(sbsh_run_opts* opts);

/* Checks a plan without running it: plan_len bytes of JSON or YAML; format NULL (JSON when it
 * starts with '{', else YAML), "json" or "yaml". SBSH_OK, or SBSH_ERR_INVALID with
 * sbsh_last_error(NULL) naming the field ("stages[1].commands[0].timeout: ...") and
 * sbsh_last_error_code(NULL) "invalid_plan". */
SBSH_API int sbsh_plan_check(const char* plan, size_t plan_len, const char* format);

/* Runs a plan (as sbsh_plan_check reads it) in a new session of conn.
 * SBSH_OK: the run took place, whatever its outcome. *report_json (if report_json is not NULL)
 * is the report, malloc'd (sbsh_free), and *exit_status (if not NULL) what `sbsh run` would
 * exit with: 0 every stage met its expectation, 1 one did not, 130 cancelled, 255 sbsh failed
 * during the run (the report's "error" says how).
 * SBSH_ERR_INVALID: nothing ran: the plan is invalid (code "invalid_plan"), or a file could
 * not be created (code "file"). Other negative statuses: as for any request (the session
 * name given is taken: code "session_exists"). */
SBSH_API int sbsh_run_plan(sbsh_conn* conn, const char* plan, size_t plan_len, const char* format, const sbsh_run_opts* opts,
                  char** report_json, int* exit_status);

/* The same with the plan read from a file: JSON for *.json, YAML for *.yaml and *.yml, else
 * detected as above; "-" is standard input. */
SBSH_API int sbsh_run_plan_file(sbsh_conn* conn, const char* path, const sbsh_run_opts* opts, char** report_json,
                       int* exit_status);

#ifdef __cplusplus
}
#endif
/* NOLINTEND(modernize-use-using) */

#endif /* SBSH_H */
