/* The sbsh builtin: a loadable bash builtin that serves a session's commands from inside its
 * bash. sbsh-wrapper starts bash with a script whose one line loads this file (`enable -f`)
 * and calls the builtin, which then loops: one recvmsg on the shell channel
 * (ipc/shell_channel.h) brings a command's text and descriptors, they are put on fds 0, 1 and
 * 2, bash's own evalstring() runs the text at the shell's top level (every kind of state
 * persists, as at an interactive prompt), and the status goes back on the channel, a
 * close-on-exec socket that no command's process inherits.
 *
 * Interrupts. To stop a command's text (a timeout, a cancel, Ctrl-C on a shell loop) sbsh
 * sends the shell SIGINT. During a command, SIGINT is handled by bash's own interactive
 * handler, with a trap set on it, so bash's QUIT check throws to its top level and abandons
 * the rest of the text, as an interactive shell returns to its prompt. bash has unwound
 * everything by the time the jump lands in its reader loop, this builtin's frames included:
 * the builtin's own jump target (below) passes that jump on, and an unwind-protect, which
 * bash runs on the way, does the work. It reports the status and writes the builtin's name
 * into the script bash reads, so the reader loop calls it again. Bash's own errors that
 * abandon a command (an arithmetic error in an assignment, say) take the same road.
 *
 * An interrupt can land between bash's fork of a command's process and its wait for it; bash
 * then throws with that process still listed in its pipeline under construction, and the next
 * command would wait for it, take its status and print its "Terminated". The builtin has bash
 * forget that pipeline before it reports the interrupted command
 * (forget_interrupted_pipeline()).
 *
 * An interrupt can also land after the builtin has read a run and before SIGINT is the
 * command's, where the builtin drops it as it drops a stray one between commands (a SIGINT
 * says nothing of which command it was meant for). sbshd therefore sends an interrupt message
 * on the channel ahead of each such SIGINT, and the builtin looks for one once its handler is
 * in place (interrupted_before_start()): then nothing of the text runs.
 *
 * Errors an interactive shell survives. bash runs the builtin's script as a non-interactive
 * shell, in which an unbound variable under `set -u`, `${X:?}`, an error in a special builtin
 * in posix mode or a failed `exec` end the shell. At a prompt bash reports them and carries
 * on, and so must a session. The builtin sets its own jump target on bash's `top_level` around
 * each command: the fatal jumps that bash's string parser passes on (FORCE_EOF, ERREXIT,
 * EXITPROG) land there once bash has unwound the command, and end the command instead of the
 * shell, with bash's message already written and bash's status. A failure under `set -e`
 * (ERREXIT) ends the command too, not the shell: where a prompt would exit, a session ends
 * the command text with the failing status, as the end of a script would, and keeps its
 * state (`set -e` included), since agents run `set -euo pipefail` in sessions they mean to
 * keep. `exit` (EXITBLTIN) goes on to bash's reader loop and ends the shell; so does every
 * jump in a child process. A failed `exec` never ends the shell (execfail is kept on, as an
 * interactive shell ignores it).
 *
 * Job notices. With job control on (`set -m`, so that every job has a process group of its
 * own), bash prints "[1]+  Terminated ..." for a background job when it next reads a line or
 * waits, whichever command that is. Every job a command finds in the table when it starts was
 * started by an earlier command: it is marked as notified, and given a cleanup function
 * (bash calls it when it marks the job dead, after clearing that mark) that marks it again,
 * so that nothing of it reaches this command's output. Within a command, bash without job
 * control (a script, `bash -c`) says nothing of a background job that SIGTERM, SIGINT, SIGPIPE
 * or a trapped signal ended, where job control adds "[1]+  Terminated": bash's waitpid() goes
 * through the builtin (its entry in bash's GOT, replaced when the builtin loads), which gives
 * such a job the same cleanup function as it is reaped, before bash can print anything of it.
 *
 * The builtin's name has a space in it ("__sbsh serve"): a function cannot be named so, so no
 * user function can stand in its place when bash reads that name back from its script.
 */
#include <config.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loadables.h"
#include "array.h"
#include "bashjmp.h"
#include "execute_cmd.h"
#include "jobs.h"
#include "subst.h"
#include "variables.h"
#include "quit.h"
#include "sig.h"
#include "unwind_prot.h"
#include "version.h"

#include "ipc/shell_channel.h"

/* Bash functions and variables without a public header. */
extern int signal_is_trapped(int);
extern void set_signal(int, char *);
extern char *dist_version;
extern int wait_intr_flag;
extern struct builtin *builtin_address_internal(char *, int);
extern int wait_signal_received;
/* Without a header in bash-builtins (flags.h, trap.h, jobs.c, execute_cmd.c, shopt.def). */
extern int no_exit_on_failed_exec;
extern int expand_aliases, expaliases_flag;
extern int shell_tty;
extern int job_control;
extern int running_trap;
extern int parse_and_execute_level;
extern int executing_command_builtin;
extern void run_trap_cleanup(int);
extern int change_flag(int, int);
#ifndef FLAG_ON
#define FLAG_ON '-' /* flags.h */
#endif

#define BUILTIN_NAME "__sbsh serve"

/* One received run: its header, strings and descriptors. */
struct run {
  struct sbsh_run_header h;
  char *cwd;   /* xmalloc'd, NUL-terminated, or NULL */
  char *text;  /* xmalloc'd, NUL-terminated; evalstring frees it */
  int in, out, err, keep_out, keep_err;
  int lent[3]; /* SBSH_RUN_LENT, or -1 */
};

/* ---- A terminal of the command's own (exec --tty, SBSH_RUN_TTY) ----------------------------
 * The terminal on 0, 1 and 2 becomes the shell's controlling terminal for the command: for
 * that the shell leads a process session of its own, which it does from its first such
 * command on (its parent, the wrapper, leads the session the shell started in, so the shell
 * leads no process group and setsid() succeeds). While the command runs, bash's job control
 * has the terminal as an interactive shell's (shell_tty): each foreground job gets it with
 * tcsetpgrp(), so the terminal's Ctrl-C reaches that job, and bash takes it back when the job
 * is done. After the command the shell lets go of it (TIOCNOTTY), so that the next command's
 * terminal can be taken, and nothing of a plain command sees one. */
extern pid_t terminal_pgrp; /* jobs.c: the terminal's foreground group as bash last set it */

static int tty_fd = -1;        /* the command's terminal while the shell holds it */
static dev_t tty_rdev;
static pid_t saved_terminal_pgrp;
static int saved_in_background;
static int term_was_set;       /* TERM was unset or dumb: this builtin set it for the command */
static const char tty_term[] = "xterm-256color";

/* Makes the terminal on fd 0 the shell's controlling terminal; -1 when it cannot. */
static int take_terminal(void) {
  if (getsid(0) != getpid() && setsid() < 0) return -1;
  shell_pgrp = getpgrp();
  if (ioctl(0, TIOCSCTTY, 0) < 0) return -1;
  struct stat st;
  tty_fd = fcntl(0, F_DUPFD_CLOEXEC, 10);
  if (tty_fd < 0 || fstat(tty_fd, &st) != 0) return -1;
  tty_rdev = st.st_rdev;
  SHELL_VAR *term = find_variable("TERM");
  const char *value = term != NULL ? get_variable_value(term) : NULL;
  term_was_set = value == NULL || *value == '\0' || strcmp(value, "dumb") == 0;
  if (term_was_set) {
    term = bind_variable("TERM", (char *)tty_term, 0);
    if (term != NULL) VSETATTR(term, att_exported);
    array_needs_making = 1;
  }
  return 0;
}

/* Hands the terminal to bash's job control: called after before_command(). */
static void terminal_to_jobs(void) {
  if (tty_fd < 0) return;
  shell_tty = tty_fd;
  saved_terminal_pgrp = terminal_pgrp;
  saved_in_background = running_in_background;
  terminal_pgrp = shell_pgrp;
  running_in_background = 0;
}

/* Lets go of the command's terminal. A session leader that does sends SIGHUP (and SIGCONT) to
 * the terminal's foreground group: the terminal goes back to the shell's own group first, and
 * the shell ignores SIGHUP meanwhile. */
static void leave_terminal(void) {
  if (tty_fd < 0) return;
  struct stat st;
  /* A failed exec re-initializes job control, which closes shell_tty: our copy, then. */
  int fd = fstat(tty_fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == tty_rdev ? tty_fd : -1;
  if (fd < 0) {
    tty_fd = -1;
    fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
  }
  struct sigaction ignore, old_hup, old_ttou;
  memset(&ignore, 0, sizeof ignore);
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGHUP, &ignore, &old_hup);
  sigaction(SIGTTOU, &ignore, &old_ttou);
  if (fd >= 0) {
    tcsetpgrp(fd, getpgrp());
    ioctl(fd, TIOCNOTTY);
    close(fd);
  }
  sigaction(SIGTTOU, &old_ttou, NULL);
  sigaction(SIGHUP, &old_hup, NULL);
  tty_fd = -1;
  shell_tty = -1;
  terminal_pgrp = saved_terminal_pgrp;
  running_in_background = saved_in_background;
  if (term_was_set) {
    SHELL_VAR *term = find_variable("TERM");
    const char *value = term != NULL ? get_variable_value(term) : NULL;
    if (value != NULL && strcmp(value, tty_term) == 0) unbind_variable("TERM");
    term_was_set = 0;
  }
}

static int serving;           /* inside the serve loop */
static int in_command;        /* a command's descriptors are on 0, 1 and 2 */
static uint64_t current_seq;  /* the run being served */
static uint64_t current_nonce; /* its nonce, which its status repeats (ipc/shell_channel.h) */
static int keep_out = -1, keep_err = -1;
/* 0, 1 and 2 are the /dev/null release_descriptors() put there, and no text of the user's
 * has run since: a command without stdin needs no new /dev/null on 0. Cleared wherever
 * channel_trusted is. */
static int std_are_null;
static int lent_fd[3] = {-1, -1, -1}; /* a run's lent descriptors while its text runs */
static const char *const lent_names[3] = {"__sbsh_lent_out", "__sbsh_lent_err", "__sbsh_lent_status"};
static volatile sig_atomic_t got_sigint;
/* What stopping the command ended: the wait status of the last foreground process reaped
 * after sbsh's interrupt arrived (see stopped_value()). */
static volatile sig_atomic_t stopped_seen;
static volatile int stopped_status;
static pid_t shell_pid;       /* the shell's own pid: a child of it never ends a command */
static ino_t channel_ino;
static dev_t channel_dev;

static int same_socket(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && st.st_ino == channel_ino && st.st_dev == channel_dev;
}

/* Whether channel() found both descriptors right and no text of the user's has run since:
 * only a command (or a trap) in this process can close or replace them, so the checks between
 * two commands are not made again. Cleared wherever bash may run the user's text. */
static int channel_trusted;

/* The lease (ipc/shell_channel.h) while one is held on SBSH_LEASE_FD: its seq and nonce, which
 * lease_ended repeats, and its socket's identity, checked as the channel's is (lease_trusted is
 * cleared with channel_trusted). */
static int leased, lease_trusted;
static uint64_t lease_seq, lease_nonce;
static ino_t lease_ino;
static dev_t lease_dev;
/* The run being served came on the lease: its status goes back there. */
static int run_from_lease;
/* The lease's record page (ipc/shell_channel.h), mapped while the lease is held; with
 * SBSH_LEASE_MARK_PIDS, ns_last_pid on SBSH_LAST_PID_FD (its identity kept, as the lease's). */
static struct sbsh_record_page *page;
static int mark_pids;
static ino_t last_pid_ino;
static dev_t last_pid_dev;
/* The records read count for which a records message was sent: one per count. */
static uint64_t nudged_at = UINT64_MAX;

/* The channel, checked: a command may have closed or replaced fd SBSH_CHANNEL_FD (exec
 * 254>&-). The backup restores it; with both gone the shell cannot report and ends. */
static int channel(void) {
  if (channel_trusted) return SBSH_CHANNEL_FD;
  if (same_socket(SBSH_CHANNEL_FD)) {
    if (!same_socket(SBSH_CHANNEL_BACKUP_FD)) dup3(SBSH_CHANNEL_FD, SBSH_CHANNEL_BACKUP_FD, O_CLOEXEC);
    channel_trusted = 1;
    return SBSH_CHANNEL_FD;
  }
  if (same_socket(SBSH_CHANNEL_BACKUP_FD) && dup3(SBSH_CHANNEL_BACKUP_FD, SBSH_CHANNEL_FD, O_CLOEXEC) >= 0) {
    channel_trusted = 1;
    return SBSH_CHANNEL_FD;
  }
  fprintf(stderr, "sbsh: a command closed the shell's channel to sbshd (descriptors %d and %d); the shell ends\n",
          SBSH_CHANNEL_FD, SBSH_CHANNEL_BACKUP_FD);
  fflush(stderr);
  _exit(125);
}

/* A msghdr over `iov` (n of them) and `control` (len bytes, or NULL). */
static struct msghdr msg_over(struct iovec *iov, size_t n, void *control, size_t len) {
  struct msghdr mh;
  memset(&mh, 0, sizeof mh);
  mh.msg_iov = iov;
  mh.msg_iovlen = n;
  mh.msg_control = control;
  mh.msg_controllen = len;
  return mh;
}

/* A message of the builtin's (ipc/shell_channel.h) with its header filled in; the shell's pid
 * is what it was at load (getpid() here would be a call in a signal handler). */
static struct sbsh_status_msg new_msg(uint16_t type, uint64_t seq) {
  struct sbsh_status_msg m;
  memset(&m, 0, sizeof m);
  m.magic = SBSH_CHANNEL_MAGIC;
  m.version = SBSH_CHANNEL_VERSION;
  m.type = type;
  m.seq = seq;
  m.pid = shell_pid;
  return m;
}

/* The $PWD the shell last sent sbshd with a status (NULL: none yet, or a new sbshd asked). */
static char *said_pwd;

static int lease_fd(void);
static void end_lease(void);

static uint32_t record_end(uint64_t seq, int value, int sig, uint32_t flags);

static void send_msg(uint16_t type, uint64_t seq, uint64_t nonce, int value, int sig, uint32_t flags, int err) {
  /* Only the shell speaks for its commands: a child that would (it never should) says nothing. */
  if (getpid() != shell_pid) return;
  /* sbshd learns of a leased run's end from the page, before its holder does. */
  if (type == SBSH_MSG_STATUS && run_from_lease && page != NULL) flags |= record_end(seq, value, sig, flags);
  /* A run that came on the lease is answered there while the lease lasts; sbshd gets the rest. */
  int fd = type == SBSH_MSG_STATUS && run_from_lease && lease_fd() >= 0 ? SBSH_LEASE_FD : channel();
  /* sbshd cannot read /proc/PID/cwd of this undumpable shell unless it is root: a status says
   * where the shell is when that changed. */
  const char *pwd = type == SBSH_MSG_STATUS ? get_string_value("PWD") : NULL;
  size_t pwd_len = pwd != NULL ? strlen(pwd) : 0;
  if (pwd_len == 0 || pwd_len > SBSH_CHANNEL_MAX_CWD || (said_pwd != NULL && strcmp(said_pwd, pwd) == 0)) pwd_len = 0;
  if (pwd_len > 0) {
    flags |= SBSH_STATUS_CWD;
    xfree(said_pwd);
    said_pwd = savestring(pwd);
  }
  struct sbsh_status_msg m = new_msg(type, seq);
  m.exit_value = value;
  m.exit_signal = sig;
  m.flags = flags;
  m.err = err;
  m.nonce = nonce;
  struct iovec iov[2] = {{&m, sizeof m}, {(void *)pwd, pwd_len}};
  struct msghdr mh = msg_over(iov, 2, NULL, 0);
  while (sendmsg(fd, &mh, MSG_NOSIGNAL) < 0) {
    if (errno == EINTR) continue;
    if (fd != SBSH_LEASE_FD) break;
    /* The lease's holder is gone: the lease ends, and sbshd gets the status on the channel. */
    end_lease();
    fd = channel();
  }
  /* A send that fails otherwise means sbshd's end is gone with every copy of it (the wrapper
   * holds one while waiting for the next sbshd): the next recv reads end-of-file. */
}

static int is_lease(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && st.st_ino == lease_ino && st.st_dev == lease_dev;
}

/* ---- The record page (ipc/shell_channel.h) --------------------------------------------- */

static uint64_t monotonic_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* A since mark (daemon's procs::since_mark): the last pid given and the boot clock's tick. */
static void since_mark(int64_t *last_pid, uint64_t *ticks) {
  static long hz;
  if (hz <= 0) hz = sysconf(_SC_CLK_TCK);
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  *ticks = (uint64_t)ts.tv_sec * (uint64_t)hz + (uint64_t)ts.tv_nsec / (1000000000u / (uint64_t)hz);
  *last_pid = 0;
  if (!mark_pids) return;
  /* A command may have closed or replaced the descriptor (it can only blur the marks of its
   * own shell's later commands): what it reads is taken only as a pid, else "unknown". Not
   * checked by identity, which would cost a system call for every command. */
  char buf[24];
  ssize_t n = pread(SBSH_LAST_PID_FD, buf, sizeof buf - 1, 0);
  if (n <= 0) return;
  buf[n] = '\0';
  char *end = NULL;
  long long pid = strtoll(buf, &end, 10);
  if (end != buf && (*end == '\n' || *end == '\0') && pid > 0 && pid <= 4194304 /* PID_MAX_LIMIT */)
    *last_pid = pid;
}

/* Copies the start of `text` (len bytes) into `to` and says how much it took. */
static uint32_t text_start(char *to, const char *text, uint64_t len) {
  uint32_t n = len < SBSH_RECORD_TEXT ? (uint32_t)len : SBSH_RECORD_TEXT;
  if (text != NULL) memcpy(to, text, n);
  return text != NULL ? n : 0;
}

/* A leased run starts: the page shows it running, with its deadline. */
static void record_start(const struct run *r) {
  struct sbsh_record_page *p = page;
  uint64_t c = p->changes;
  __atomic_store_n(&p->changes, c + 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  p->run_seq = r->h.seq;
  since_mark(&p->since_pid, &p->since_ticks);
  p->started_us = monotonic_us();
  p->deadline_us = r->h.timeout_ms > 0 ? p->started_us + (uint64_t)r->h.timeout_ms * 1000u : 0;
  p->full_len = r->h.text_len;
  p->text_len = text_start(p->text, r->text, r->h.text_len);
  __atomic_store_n(&p->changes, c + 2, __ATOMIC_RELEASE);
}

/* A leased run ends with this status: its record goes into the ring, the page shows no run,
 * and sbshd is told when the ring fills faster than it reads. Returns the flags sbshd asks to
 * add to the status (it stopped the run). */
static uint32_t record_end(uint64_t seq, int value, int sig, uint32_t flags) {
  struct sbsh_record_page *p = page;
  uint32_t stopped = __atomic_load_n(&p->stop_seq, __ATOMIC_ACQUIRE) == seq ? p->stop_flags : 0;
  stopped &= SBSH_STATUS_TIMED_OUT | SBSH_STATUS_CANCELLED;
  uint64_t n = p->ended;
  struct sbsh_record *e = &p->ring[n % SBSH_RECORD_RING];
  const struct sbsh_record *before = n > 0 ? &p->ring[(n - 1) % SBSH_RECORD_RING] : NULL;
  uint64_t failed = before != NULL ? before->failed_total : 0;
  uint64_t timed_out = before != NULL ? before->timed_out_total : 0;
  /* 0 while the slot is written: sbshd drops a record whose seq changed as it copied it. */
  __atomic_store_n(&e->seq, 0, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  e->exit_value = value;
  e->exit_signal = sig;
  e->flags = flags | stopped;
  e->failed_total = failed + (value != 0);
  e->timed_out_total = timed_out + ((e->flags & SBSH_STATUS_TIMED_OUT) != 0);
  e->started_us = p->run_seq == seq ? p->started_us : 0;
  e->ended_us = monotonic_us();
  e->full_len = p->run_seq == seq ? p->full_len : 0;
  e->text_len = p->run_seq == seq ? p->text_len : 0;
  memcpy(e->text, p->text, e->text_len);
  __atomic_store_n(&e->seq, seq, __ATOMIC_RELEASE);
  __atomic_store_n(&p->ended, n + 1, __ATOMIC_RELEASE);
  uint64_t c = p->changes;
  __atomic_store_n(&p->changes, c + 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  p->run_seq = 0;
  __atomic_store_n(&p->changes, c + 2, __ATOMIC_RELEASE);
  uint64_t read = __atomic_load_n(&p->read, __ATOMIC_ACQUIRE);
  if (n + 1 - read >= SBSH_RECORD_RING / 2 && read != nudged_at) {
    nudged_at = read;
    send_msg(SBSH_MSG_RECORDS, seq, 0, 0, 0, 0, 0);
  }
  return stopped;
}

/* Maps the page a lease message carried (its memfd `fd`, closed here); NULL when it is not
 * one (wrong size or header). */
static struct sbsh_record_page *map_page(int fd) {
  struct stat st;
  void *m = MAP_FAILED;
  if (fstat(fd, &st) == 0 && (size_t)st.st_size == sizeof(struct sbsh_record_page))
    m = mmap(NULL, sizeof(struct sbsh_record_page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return NULL;
  struct sbsh_record_page *p = m;
  if (p->magic != SBSH_RECORD_MAGIC || p->version != SBSH_CHANNEL_VERSION) {
    munmap(m, sizeof *p);
    return NULL;
  }
  return p;
}

static void unmap_page(void) {
  if (page != NULL) munmap(page, sizeof *page);
  page = NULL;
}

/* The runs its holder sent on the lease that the shell has not read: each is answered there
 * as not run (SBSH_ERR_LEASE_ENDED), once the socket's reading side is shut, so that a run
 * sent later fails at its sender. The holder then knows of every run whether it ran. */
static void refuse_unread_runs(void) {
  shutdown(SBSH_LEASE_FD, SHUT_RD);
  for (;;) {
    struct sbsh_run_header h;
    union {
      struct cmsghdr align;
      char bytes[CMSG_SPACE(12 * sizeof(int))];
    } control;
    struct iovec iov = {&h, sizeof h};
    struct msghdr mh = msg_over(&iov, 1, control.bytes, sizeof control.bytes);
    ssize_t n = recvmsg(SBSH_LEASE_FD, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
          int fd;
          memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
          close(fd);
        }
    if ((size_t)n < sizeof h || h.magic != SBSH_CHANNEL_MAGIC || h.type != SBSH_MSG_RUN) continue;
    struct sbsh_status_msg m = new_msg(SBSH_MSG_STATUS, h.seq);
    m.exit_value = last_command_exit_value;
    m.flags = SBSH_STATUS_NOT_RUN;
    m.err = SBSH_ERR_LEASE_ENDED;
    m.nonce = h.nonce;
    struct iovec out = {&m, sizeof m};
    struct msghdr om = msg_over(&out, 1, NULL, 0);
    while (sendmsg(SBSH_LEASE_FD, &om, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EINTR) {
    }
  }
}

/* Ends the lease held, if any, and tells sbshd. */
static void end_lease(void) {
  if (!leased) return;
  if (is_lease(SBSH_LEASE_FD)) {
    refuse_unread_runs();
    close(SBSH_LEASE_FD);
  }
  struct stat st;
  if (mark_pids && fstat(SBSH_LAST_PID_FD, &st) == 0 && st.st_ino == last_pid_ino && st.st_dev == last_pid_dev)
    close(SBSH_LAST_PID_FD);
  mark_pids = 0;
  unmap_page();
  leased = lease_trusted = run_from_lease = 0;
  /* sbshd did not see the statuses sent on the lease: the next one says where the shell is. */
  xfree(said_pwd);
  said_pwd = NULL;
  send_msg(SBSH_MSG_LEASE_ENDED, lease_seq, lease_nonce, 0, 0, 0, 0);
}

/* SBSH_LEASE_FD while a lease is held and the descriptor is still its socket (a command may
 * have closed or replaced it: the lease then ends), else -1. */
static int lease_fd(void) {
  if (!leased) return -1;
  if (lease_trusted) return SBSH_LEASE_FD;
  if (is_lease(SBSH_LEASE_FD)) {
    lease_trusted = 1;
    return SBSH_LEASE_FD;
  }
  end_lease();
  return -1;
}

/* Takes the lease a lease message carried (its socket `fd` and its page's memfd `page_fd`,
 * both closed here) and answers. */
static void take_lease(const struct sbsh_run_header *h, int fd, int page_fd) {
  end_lease();
  struct stat st;
  page = map_page(page_fd);
  if (page != NULL && dup3(fd, SBSH_LEASE_FD, O_CLOEXEC) >= 0 && fstat(SBSH_LEASE_FD, &st) == 0) {
    lease_ino = st.st_ino;
    lease_dev = st.st_dev;
    leased = lease_trusted = 1;
  } else {
    unmap_page();
  }
  close(fd);
  if (leased && (h->flags & SBSH_LEASE_MARK_PIDS)) {
    int last = open("/proc/sys/kernel/ns_last_pid", O_RDONLY | O_CLOEXEC);
    if (last >= 0 && dup3(last, SBSH_LAST_PID_FD, O_CLOEXEC) >= 0 && fstat(SBSH_LAST_PID_FD, &st) == 0) {
      last_pid_ino = st.st_ino;
      last_pid_dev = st.st_dev;
      mark_pids = 1;
    }
    if (last >= 0) close(last);
  }
  nudged_at = UINT64_MAX;
  lease_seq = h->seq;
  lease_nonce = h->nonce;
  /* A descriptor the shell may not have (a session's --limit nofile): no lease. */
  send_msg(leased ? SBSH_MSG_LEASED : SBSH_MSG_LEASE_ENDED, h->seq, h->nonce, 0, 0, 0, 0);
}

static void noop_handler(int sig) { (void)sig; }

/* SIGINT during a command: what bash's interactive handler does (interrupt_state, which
 * bash's QUIT checks turn into a throw to the top level; an interruptible `wait` returns),
 * but without marking the SIGINT trap pending: bash runs pending traps between commands and
 * clears the interrupt when it runs the SIGINT trap, so a loop of builtins would go on. */
static void command_sigint(int sig) {
  got_sigint = 1;
  if (interrupt_state == 0) ADDINTERRUPT;
  if (wait_intr_flag) {
    last_command_exit_value = 128 + sig;
    wait_signal_received = sig;
  }
}

/* A throw to the top level becomes the command's end only when SIGINT is trapped (else a
 * non-interactive bash exits): keep a trap on it, the session's own if it has one. */
static void ensure_sigint_trapped(void) {
  if (!signal_is_trapped(SIGINT)) {
    char colon[] = ":";
    set_signal(SIGINT, colon);
  }
}

static void flush_std(void) {
  fflush(stdout);
  clearerr(stdout);
  fflush(stderr);
  clearerr(stderr);
}

/* Puts /dev/null back on 0, 1 and 2 and lets go of the command's descriptors, so that its
 * pipes reach end-of-file once its own processes are done with them. */
static void release_descriptors(void) {
  flush_std();
  leave_terminal();
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0 && null <= 2) {
    /* The command closed one of them (exec 0<&-): /dev/null took its number, and closing it
     * below would leave it closed for every later command. */
    int high = fcntl(null, F_DUPFD_CLOEXEC, 3);
    close(null);
    null = high;
  }
  if (null >= 0) {
    std_are_null = dup2(null, 0) == 0 && dup2(null, 1) == 1 && dup2(null, 2) == 2;
    close(null);
  }
  if (keep_out >= 0) close(keep_out);
  if (keep_err >= 0) close(keep_err);
  keep_out = keep_err = -1;
  for (int i = 0; i < 3; ++i)
    if (lent_fd[i] >= 0) {
      close(lent_fd[i]);
      lent_fd[i] = -1;
      unbind_variable(lent_names[i]);
    }
  in_command = 0;
}

/* Between commands a stray SIGINT (one sent as a command ended) must not stop the next one. */
static void idle_signals(void) {
  set_signal_handler(SIGINT, noop_handler);
  got_sigint = 0;
  CLRINTERRUPT;
}

/* `enable -n '__sbsh serve'` would leave bash unable to call the builtin again after a throw
 * to its top level: it is sbsh's own, so it is enabled again after every command. */
static void stay_enabled(void) {
  struct builtin *b = builtin_address_internal(BUILTIN_NAME, 1);
  if (b != NULL) b->flags |= BUILTIN_ENABLED;
}

static void report(int value, uint32_t flags) {
  stay_enabled();
  int sig = 0;
  /* last_command_exit_signal is set whenever bash waits for a foreground job, and cleared
   * before each run: a signal is reported only when it is what the status says. */
  if (last_command_exit_signal > 0 && value == 128 + last_command_exit_signal) {
    sig = last_command_exit_signal;
    flags |= SBSH_STATUS_SIGNALED;
  }
  send_msg(SBSH_MSG_STATUS, current_seq, current_nonce, value, sig, flags, 0);
}

/* The script bash reads (fd 255, a pipe) gets the builtin's name again, for its reader loop
 * to call it after a throw to the top level. The pipe is opened anew for writing through
 * /proc: no descriptor of ours is left for a command to close. */
static void rearm(void) {
  static const char line[] = "'" BUILTIN_NAME "'\n";
  int fd = open("/proc/self/fd/255", O_WRONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return; /* the shell then reads end-of-file and ends: sbshd sees it exit */
  ssize_t n = write(fd, line, sizeof line - 1);
  (void)n;
  close(fd);
}

static int stopped_value(int value);

/* bash's pipeline under construction (jobs.c): the processes forked for the command being
 * run that are not yet a job. Exported by bash, not declared by its headers. */
extern PROCESS *the_pipeline;

/* After an interrupt threw the command to the top level: see "An interrupt can land between"
 * above. bash forgets the pipeline it was building, as its start_pipeline() discards a
 * leftover one: with its process group, which the next command's processes would otherwise
 * try to join (setpgid fails: it is gone). A process of it still running is sbsh's to stop
 * (its signals reach every process the command started); bash reaps it without a word. */
static void forget_interrupted_pipeline(void) {
  if (the_pipeline != NULL) {
    cleanup_the_pipeline();
    if (pipeline_pgrp != shell_pgrp) pipeline_pgrp = 0;
  }
  stop_making_children();
}

/* Runs when bash unwinds past the builtin: a throw to its top level (SIGINT, or one of bash's
 * errors that abandon a command). */
static void unwound(void *unused) {
  (void)unused;
  if (!serving || getpid() != shell_pid) return;
  /* As bash's reader loop will: a discarded command leaves a non-zero status. */
  int value = last_command_exit_value != 0 ? last_command_exit_value : EXECUTION_FAILURE;
  if (got_sigint && in_command && getpid() == shell_pid) forget_interrupted_pipeline();
  if (got_sigint) value = stopped_value(value);
  uint32_t flags = got_sigint ? SBSH_STATUS_INTERRUPTED : 0;
  if (in_command) {
    (void)channel();
    release_descriptors();
    report(value, flags);
  }
  idle_signals();
  serving = 0;
  rearm();
}

static void close_quietly(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void discard_run(struct run *r) {
  close_quietly(&r->in);
  close_quietly(&r->out);
  close_quietly(&r->err);
  close_quietly(&r->keep_out);
  close_quietly(&r->keep_err);
  for (int i = 0; i < 3; ++i) close_quietly(&r->lent[i]);
  if (r->cwd) xfree(r->cwd);
  if (r->text) xfree(r->text);
  r->cwd = r->text = NULL;
}

/* Reads `len` bytes of a memfd into a new string. */
static char *read_memfd(int fd, uint32_t len) {
  char *s = xmalloc((size_t)len + 1);
  size_t got = 0;
  while (got < len) {
    ssize_t n = pread(fd, s + got, len - got, (off_t)got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      xfree(s);
      return NULL;
    }
    got += (size_t)n;
  }
  s[len] = '\0';
  if (memchr(s, '\0', len) != NULL) {
    xfree(s);
    return NULL;
  }
  return s;
}

/* One message from the channel, or a run from the lease while one is held (sbshd's messages
 * first). Returns 1 with a run or a sync in *r, 0 at end-of-file (sbshd and every copy of its
 * end are gone), -1 for a malformed message (answered already). */
static int receive(struct run *r) {
  static char buf[sizeof(struct sbsh_run_header) + SBSH_CHANNEL_MAX_CWD + SBSH_CHANNEL_INLINE_TEXT];
  union {
    struct cmsghdr align;
    char bytes[CMSG_SPACE(12 * sizeof(int))];
  } control;
  memset(r, 0, sizeof *r);
  r->in = r->out = r->err = r->keep_out = r->keep_err = -1;
  r->lent[0] = r->lent[1] = r->lent[2] = -1;
  for (;;) {
    struct iovec iov = {buf, sizeof buf};
    struct msghdr mh = msg_over(&iov, 1, control.bytes, sizeof control.bytes);
    int from = channel();
    if (lease_fd() >= 0) {
      struct pollfd pf[2] = {{from, POLLIN, 0}, {SBSH_LEASE_FD, POLLIN, 0}};
      int ready = poll(pf, 2, -1);
      if (ready < 0 && errno == EINTR) {
        CLRINTERRUPT; /* a stray SIGINT while idle: nothing runs */
        got_sigint = 0;
        continue;
      }
      if (ready > 0 && pf[0].revents == 0) {
        if ((pf[1].revents & POLLIN) == 0) {
          end_lease(); /* its other end is closed */
          continue;
        }
        from = SBSH_LEASE_FD;
      }
    }
    ssize_t n = recvmsg(from, &mh, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) {
      CLRINTERRUPT; /* a stray SIGINT while idle: nothing runs */
      got_sigint = 0;
      continue;
    }
    if (n <= 0 && from == SBSH_LEASE_FD) {
      end_lease();
      continue;
    }
    if (n <= 0) return 0;
    run_from_lease = from == SBSH_LEASE_FD;
    int fds[12], nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < k && nfds < 12; ++i) memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      }
    const struct sbsh_run_header *h = (const struct sbsh_run_header *)buf;
    int bad = (size_t)n < sizeof *h || h->magic != SBSH_CHANNEL_MAGIC || h->version != SBSH_CHANNEL_VERSION ||
              (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
    if (!bad) r->h = *h;
    if (!bad && h->type == SBSH_MSG_INTERRUPT) {
      /* For a run already answered: its command ended before the interrupt could stop it. */
      for (int i = 0; i < nfds; ++i) close(fds[i]);
      continue;
    }
    if (!bad && h->type == SBSH_MSG_SYNC && !run_from_lease) {
      for (int i = 0; i < nfds; ++i) close(fds[i]);
      return 1;
    }
    /* sbshd's alone: a lease's holder can neither pass the lease on nor end it by asking. */
    if (!bad && !run_from_lease && h->type == SBSH_MSG_LEASE && nfds == 2) {
      take_lease(h, fds[0], fds[1]);
      continue;
    }
    if (!bad && !run_from_lease && h->type == SBSH_MSG_LEASE_END && nfds == 0) {
      end_lease();
      continue;
    }
    int want = 2 + ((h->flags & SBSH_RUN_STDIN) ? 1 : 0) + ((h->flags & SBSH_RUN_KEEPERS) ? 2 : 0) +
               ((h->flags & SBSH_RUN_TEXT_MEMFD) ? 1 : 0) + ((h->flags & SBSH_RUN_LENT) ? 3 : 0);
    size_t inline_text = (h->flags & SBSH_RUN_TEXT_MEMFD) ? 0 : h->text_len;
    bad = bad || h->type != SBSH_MSG_RUN || nfds != want || h->cwd_len > SBSH_CHANNEL_MAX_CWD ||
          (size_t)n != sizeof *h + h->cwd_len + inline_text;
    if (!bad) {
      int k = 0;
      r->in = (h->flags & SBSH_RUN_STDIN) ? fds[k++] : -1;
      r->out = fds[k++];
      r->err = fds[k++];
      if (h->flags & SBSH_RUN_KEEPERS) {
        r->keep_out = fds[k++];
        r->keep_err = fds[k++];
      }
      if (h->flags & SBSH_RUN_LENT) /* last, after the text's memfd */
        for (int i = 0; i < 3; ++i) r->lent[i] = fds[nfds - 3 + i];
      const char *p = buf + sizeof *h;
      if (h->cwd_len > 0) {
        r->cwd = xmalloc(h->cwd_len + 1);
        memcpy(r->cwd, p, h->cwd_len);
        r->cwd[h->cwd_len] = '\0';
        bad = memchr(r->cwd, '\0', h->cwd_len) != NULL;
      }
      if (h->flags & SBSH_RUN_TEXT_MEMFD) {
        r->text = read_memfd(fds[k], h->text_len);
        close(fds[k]);
      } else {
        r->text = xmalloc(h->text_len + 1);
        memcpy(r->text, p + h->cwd_len, h->text_len);
        r->text[h->text_len] = '\0';
        if (memchr(r->text, '\0', h->text_len) != NULL) {
          xfree(r->text);
          r->text = NULL;
        }
      }
      bad = bad || r->text == NULL;
    } else {
      for (int i = 0; i < nfds; ++i) close(fds[i]);
    }
    if (!bad) return 1;
    discard_run(r);
    current_seq = ((size_t)n >= sizeof *h) ? h->seq : 0;
    current_nonce = ((size_t)n >= sizeof *h) ? h->nonce : 0;
    send_msg(SBSH_MSG_STATUS, current_seq, current_nonce, 0, 0, SBSH_STATUS_NOT_RUN, SBSH_ERR_BAD_MESSAGE);
    return -1;
  }
}

/* The directory a command runs in (exec -C) must exist: checked here, in the shell's own
 * directory, so that nothing of a command meant for it runs anywhere else. */
static int check_cwd(const char *cwd) {
  struct stat st;
  if (stat(cwd, &st) != 0) return errno;
  return S_ISDIR(st.st_mode) ? 0 : SBSH_ERR_NOT_A_DIR;
}

/* Notices of background jobs (see "Job notices" above). bash clears a job's notified mark
 * whenever the job changes state, then calls the job's cleanup function once it is dead: that
 * function marks it notified again, before bash can print anything of it. */
static void quiet_when_dead(PTR_T job) { ((JOB *)job)->flags |= J_NOTIFIED; }

static void quiet_job(JOB *j) {
  if (j->j_cleanup == NULL) {
    j->j_cleanup = quiet_when_dead;
    j->cleanarg = (PTR_T)j;
  }
}

static pid_t (*bash_waitpid)(pid_t, int *, int);

/* The last process of a job's pipeline (a circular list). */
static PROCESS *last_process(JOB *j) {
  PROCESS *last = j->pipe;
  while (last->next != j->pipe) last = last->next;
  return last;
}

static void quiet_notice(pid_t pid, int status) {
  if (!job_control || !WIFSIGNALED(status)) return;
  int sig = WTERMSIG(status);
  /* Other signals ("Killed", "Segmentation fault") bash reports with or without job control. */
  if (sig != SIGINT && sig != SIGTERM && sig != SIGPIPE && !signal_is_trapped(sig)) return;
  for (int i = 0; jobs != NULL && i < js.j_jobslots; ++i) {
    JOB *j = jobs[i];
    if (j == NULL || j->pipe == NULL || (j->flags & J_FOREGROUND)) continue;
    if (last_process(j)->pid == pid) {
      quiet_job(j);
      return;
    }
  }
}

/* Whether `pid` is the last process of a foreground job: the one whose status bash takes as
 * the job's. */
static int ends_foreground_job(pid_t pid) {
  for (int i = 0; jobs != NULL && i < js.j_jobslots; ++i) {
    JOB *j = jobs[i];
    if (j != NULL && j->pipe != NULL && (j->flags & J_FOREGROUND) && last_process(j)->pid == pid) return 1;
  }
  return 0;
}

/* bash calls it with SIGCHLD blocked or from its SIGCHLD handler: the job table is its own. */
static pid_t sbsh_waitpid(pid_t pid, int *status, int options) {
  pid_t r = bash_waitpid(pid, status, options);
  if (r > 0 && status != NULL) {
    quiet_notice(r, *status);
    if (got_sigint && in_command && getpid() == shell_pid && (WIFEXITED(*status) || WIFSIGNALED(*status)) &&
        ends_foreground_job(r)) {
      stopped_status = *status;
      stopped_seen = 1;
    }
  }
  return r;
}

/* The status of a command that sbsh's interrupt stopped. bash turns any status below 128 into
 * 130 as it throws to its top level, though the signal that stopped the command's process was
 * the timeout's or the cancel's (TERM, say), and the process may have ended by itself on it
 * (`trap 'exit 5' TERM`): what that process gave is what happened. Without one (a loop of
 * builtins, stopped by the interrupt itself), bash's value stands. */
static int stopped_value(int value) {
  if (!stopped_seen) return value;
  int st = stopped_status;
  last_command_exit_signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

struct got_slot {
  const char *name;
  void **slot;
  int in_relro;
};

/* The GOT slot of a function the program (the first object, bash) calls through its PLT. */
static int find_got_slot(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  struct got_slot *g = data;
  ElfW(Addr) base = info->dlpi_addr;
  const ElfW(Dyn) *dyn = NULL;
  ElfW(Addr) relro = 0, relro_end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(base + ph->p_vaddr);
    if (ph->p_type == PT_GNU_RELRO) {
      relro = base + ph->p_vaddr;
      relro_end = relro + ph->p_memsz;
    }
  }
  const ElfW(Sym) *symtab = NULL;
  const char *strtab = NULL;
  const ElfW(Rela) *jmprel = NULL;
  size_t pltrelsz = 0;
  int rela = 0;
  /* glibc has made the pointers absolute in place; an offset is made so here. */
#define ABS(p) ((p) < base ? (p) + base : (p))
  for (; dyn != NULL && dyn->d_tag != DT_NULL; ++dyn) {
    if (dyn->d_tag == DT_SYMTAB) symtab = (const ElfW(Sym) *)ABS(dyn->d_un.d_ptr);
    if (dyn->d_tag == DT_STRTAB) strtab = (const char *)ABS(dyn->d_un.d_ptr);
    if (dyn->d_tag == DT_JMPREL) jmprel = (const ElfW(Rela) *)ABS(dyn->d_un.d_ptr);
    if (dyn->d_tag == DT_PLTRELSZ) pltrelsz = dyn->d_un.d_val;
    if (dyn->d_tag == DT_PLTREL) rela = dyn->d_un.d_val == DT_RELA;
  }
#undef ABS
  if (symtab == NULL || strtab == NULL || jmprel == NULL || !rela) return 1;
  for (size_t i = 0; i < pltrelsz / sizeof *jmprel; ++i) {
#if __WORDSIZE == 64
    size_t sym = ELF64_R_SYM(jmprel[i].r_info);
#else
    size_t sym = ELF32_R_SYM(jmprel[i].r_info);
#endif
    if (strcmp(strtab + symtab[sym].st_name, g->name) == 0) {
      g->slot = (void **)(base + jmprel[i].r_offset);
      g->in_relro = (ElfW(Addr))g->slot >= relro && (ElfW(Addr))g->slot < relro_end;
      break;
    }
  }
  return 1; /* the program only */
}

/* Points bash's GOT slot of `name` at `hook` and returns what it held, or NULL when the slot
 * is not found (another build of bash), in which case bash goes on as it is. */
static void *hook_got(const char *name, void *hook) {
  struct got_slot g = {name, NULL, 0};
  dl_iterate_phdr(find_got_slot, &g);
  if (g.slot == NULL || *g.slot == NULL) return NULL;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  void *start = (void *)((uintptr_t)g.slot & ~(page - 1));
  if (g.in_relro && mprotect(start, page, PROT_READ | PROT_WRITE) != 0) return NULL;
  void *was = *g.slot;
  *g.slot = hook;
  if (g.in_relro) mprotect(start, page, PROT_READ);
  return was;
}

/* Without the slot, notices are as bash prints them. */
static void hook_waitpid(void) {
  if (bash_waitpid != NULL) return;
  bash_waitpid = (pid_t(*)(pid_t, int *, int))hook_got("waitpid", (void *)sbsh_waitpid);
}

/* Errors under `set -e` that bash ends the shell for without a jump. report_error(), which
 * reports an unbound variable under `set -u`, a bad substitution or `${X:?}`, calls
 * exit_shell() at once when errexit is on, where the same error without `set -e` jumps to the
 * top level (and the builtin ends the command). exit_shell() begins with fflush(stdout),
 * before it runs the EXIT trap or anything else: called from there while a command runs and
 * the shell is not on its way out through `exit`, the builtin ends the command instead, as
 * bash's expansion code would have (exp_jump_to_top_level), with report_error()'s status. */
extern void undo_partial_redirects(void);
extern void set_pipestatus_from_exit(int);
extern int assigning_in_environment;
static int (*bash_fflush)(FILE *);
static uintptr_t exit_shell_at;
static int leaving; /* an `exit` (or another end of the shell) is on its way to bash's loop */

static int sbsh_fflush(FILE *f) {
  uintptr_t from = (uintptr_t)__builtin_return_address(0);
  if (f == stdout && exit_shell_at != 0 && from > exit_shell_at && from < exit_shell_at + 64 && in_command &&
      serving && !leaving && getpid() == shell_pid) {
    set_pipestatus_from_exit(last_command_exit_value);
    if (expanding_redir) undo_partial_redirects();
    expanding_redir = 0;
    assigning_in_environment = 0;
    jump_to_top_level(ERREXIT);
  }
  return bash_fflush(f);
}

static void hook_exit_on_error(void) {
  if (bash_fflush != NULL) return;
  exit_shell_at = (uintptr_t)dlsym(RTLD_DEFAULT, "exit_shell");
  if (exit_shell_at != 0) bash_fflush = (int (*)(FILE *))hook_got("fflush", (void *)sbsh_fflush);
  if (bash_fflush == NULL) exit_shell_at = 0;
}

/* Every job in the table now was started by an earlier command: none of its notices
 * ("[1]+  Terminated ...", "Killed") may reach this command's output, whether it ended
 * already or ends while this command runs. `jobs` lists it and `kill %1` and `wait %1` find
 * it while it runs; once it has ended it leaves the table without a word (`wait PID` still
 * reads its status), as at a prompt where its notice was printed before the next command. */
static void forget_earlier_jobs(void) {
  if (jobs == NULL || js.j_njobs == 0) return;
  sigset_t chld, old;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &old);
  for (int i = 0; jobs != NULL && i < js.j_jobslots; ++i)
    if (jobs[i] != NULL) {
      jobs[i]->flags |= J_NOTIFIED;
      quiet_job(jobs[i]);
    }
  sigprocmask(SIG_SETMASK, &old, NULL);
}

/* bash's counters that a jump out of a command can leave raised; the builtin runs each
 * command at the shell's top level, where they are what they were when it was called. */
struct levels {
  int executing_builtin, executing_command_builtin, evalnest, sourcenest, sourcelevel;
};
static struct levels top_levels;

/* A failed exec re-initializes job control as a non-interactive shell's: off, and its
 * descriptor (shell_tty, fd 2 in this shell) closed first, which would close the command's
 * stderr. With no descriptor of its own, nothing is closed; after the command, job control
 * is put back on if the failed exec turned it off. */
static void before_command(void) {
  leaving = 0;
  shell_tty = -1;
  no_exit_on_failed_exec = 1;
  top_levels.executing_builtin = executing_builtin;
  top_levels.executing_command_builtin = executing_command_builtin;
  top_levels.evalnest = evalnest;
  top_levels.sourcenest = sourcenest;
  top_levels.sourcelevel = sourcelevel;
}

static void after_command(int jobs_were_on) {
  if (shell_tty != -1) {
    shell_tty = -1;
    if (jobs_were_on && !job_control) change_flag('m', FLAG_ON);
  }
}

/* What an interactive bash does before reading its next command after an error abandoned
 * one (sig.c's top_level_cleanup), but for the unwind-protects: bash's string parser has run
 * those of the command already, and the rest belong to this builtin's own call. */
static void clean_up_after_error(void) {
  while (parse_and_execute_level > 0) parse_and_execute_cleanup(-1);
  if (running_trap > 0) {
    run_trap_cleanup(running_trap - 1);
    running_trap = 0;
  }
  unlink_fifo_list();
  loop_level = continuing = breaking = funcnest = 0;
  executing_list = comsub_ignore_return = return_catch_flag = wait_intr_flag = 0;
  if (variable_context != 0) reset_local_contexts();
  executing_builtin = top_levels.executing_builtin;
  executing_command_builtin = top_levels.executing_command_builtin;
  evalnest = top_levels.evalnest;
  sourcenest = top_levels.sourcenest;
  sourcelevel = top_levels.sourcelevel;
  restore_sigmask();
}

/* Whether a jump that would end a non-interactive shell ends only the command: an error that
 * an interactive shell reports and survives, or a failure under `set -e`. `exit` (EXITBLTIN)
 * and a fatal signal (SIGEXIT) end the shell. */
static int survivable(int code) {
  switch (code) {
    case FORCE_EOF: /* an expansion error: set -u, ${X:?}, a bad substitution in posix mode */
    case DISCARD:
    case EXITPROG: /* `.` of a missing file in posix mode */
      return 1;
    case ERREXIT: /* a special builtin's error in posix mode, or a failure under set -e */
      return 1;
    default:
      return 0;
  }
}

/* Whether sbshd asked for the current run to be stopped before its command started (see
 * the interrupt message in ipc/shell_channel.h). Called once SIGINT is the command's: an
 * interrupt asked for after this look comes with a SIGINT that command_sigint() takes. Only
 * interrupt messages are taken off the channel; anything else stays for the serve loop. */
static int interrupted_before_start(void) {
  int asked = 0;
  for (;;) {
    struct sbsh_run_header h;
    ssize_t n = recv(channel(), &h, sizeof h, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n != (ssize_t)sizeof h || h.magic != SBSH_CHANNEL_MAGIC || h.version != SBSH_CHANNEL_VERSION ||
        h.type != SBSH_MSG_INTERRUPT)
      return asked;
    while (recv(channel(), &h, sizeof h, MSG_DONTWAIT) < 0 && errno == EINTR) {
    }
    if (h.seq == current_seq) asked = 1;
  }
}

/* Runs a command's text with bash's evalstring() under a jump target of the builtin's own
 * (see "Errors an interactive shell survives" above). */
static int eval_at_top_level(char *text) {
  procenv_t outer;
  COPY_PROCENV(top_level, outer);
  int value;
  int code = setjmp_nosigs(top_level);
  if (code == 0) {
    channel_trusted = lease_trusted = std_are_null = 0;
    value = evalstring(text, "bash", SEVAL_NOHIST | SEVAL_RESETLINE);
  } else if (getpid() != shell_pid || !serving || !survivable(code)) {
    /* A child of the shell (it ends as bash ends it), a throw that bash has already unwound
     * past this builtin (unwound() reported it), or the end of the shell: where the jump was
     * going without this target. */
    COPY_PROCENV(outer, top_level);
    if (getpid() == shell_pid) leaving = 1;
    jump_to_top_level(code);
  } else {
    clean_up_after_error();
    /* As bash's reader loop does after a discarded command: the status is not 0. */
    value = last_command_exit_value = last_command_exit_value != 0 ? last_command_exit_value : EXECUTION_FAILURE;
  }
  COPY_PROCENV(outer, top_level);
  return value;
}

static void run_command(struct run *r) {
  current_seq = r->h.seq;
  current_nonce = r->h.nonce;
  if (run_from_lease && page != NULL) record_start(r);
  if (r->cwd != NULL) {
    int e = check_cwd(r->cwd);
    if (e != 0) {
      discard_run(r);
      send_msg(SBSH_MSG_STATUS, current_seq, current_nonce, last_command_exit_value, 0, SBSH_STATUS_NOT_RUN, e);
      return;
    }
    xfree(r->cwd);
    r->cwd = NULL;
  }
  flush_std();
  if (r->in < 0 && !std_are_null) r->in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (r->in >= 0) dup2(r->in, 0);
  dup2(r->out, 1);
  dup2(r->err, 2);
  std_are_null = 0;
  close_quietly(&r->in);
  close_quietly(&r->out);
  close_quietly(&r->err);
  if ((r->h.flags & SBSH_RUN_TTY) && take_terminal() != 0) {
    int e = errno;
    discard_run(r);
    release_descriptors();
    send_msg(SBSH_MSG_STATUS, current_seq, current_nonce, last_command_exit_value, 0, SBSH_STATUS_NOT_RUN,
             e == 0 ? SBSH_ERR_NO_TERMINAL : e);
    return;
  }
  /* At fixed numbers, for the wrapper to find them (ipc/shell_channel.h). */
  if (r->keep_out >= 0 && dup3(r->keep_out, SBSH_KEEP_OUT_FD, O_CLOEXEC) >= 0) keep_out = SBSH_KEEP_OUT_FD;
  if (r->keep_err >= 0 && dup3(r->keep_err, SBSH_KEEP_ERR_FD, O_CLOEXEC) >= 0) keep_err = SBSH_KEEP_ERR_FD;
  close_quietly(&r->keep_out);
  close_quietly(&r->keep_err);
  for (int i = 0; i < 3 && r->lent[i] >= 0; ++i) {
    /* Out of the way of the user's descriptors, as low as the session's nofile limit needs. */
    lent_fd[i] = fcntl(r->lent[i], F_DUPFD_CLOEXEC, SBSH_LENT_FD);
    if (lent_fd[i] < 0) lent_fd[i] = fcntl(r->lent[i], F_DUPFD_CLOEXEC, 10);
    char number[16];
    snprintf(number, sizeof number, "%d", lent_fd[i]);
    bind_variable(lent_names[i], number, 0);
  }
  for (int i = 0; i < 3; ++i) close_quietly(&r->lent[i]);
  in_command = 1;

  CLRINTERRUPT;
  got_sigint = 0;
  stopped_seen = 0;
  last_command_exit_signal = 0;
  ensure_sigint_trapped();
  set_signal_handler(SIGINT, command_sigint);

  forget_earlier_jobs();
  before_command();
  terminal_to_jobs();
  int jobs_were_on = job_control;
  char *text = r->text;
  r->text = NULL;
  int value;
  if (interrupted_before_start()) {
    /* Nothing of the text runs, as if the SIGINT had come as it started. */
    xfree(text);
    got_sigint = 1;
    value = last_command_exit_value = 128 + SIGINT;
  } else {
    value = eval_at_top_level(text);
  }
  /* Reached when the text ended, by itself or by an error that a prompt survives (a throw to
   * the top level on SIGINT goes to unwound). */
  after_command(jobs_were_on);
  uint32_t flags = got_sigint ? SBSH_STATUS_INTERRUPTED : 0;
  (void)channel(); /* checked while the command's stderr can still say what went wrong */
  release_descriptors();
  idle_signals();
  report(value, flags);
}

/* The first call: the shell drops what it was started with (the script's first descriptor,
 * whose copy it reads; stderr, the wrapper's pipe for messages of a failed start) and looks
 * like a shell that reads its commands from its input: $0 is "bash", BASH_SOURCE is empty. */
static void settle_in(void) {
  struct stat a, b;
  if (fstat(SBSH_SCRIPT_FD, &a) == 0 && fstat(255, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev)
    close(SBSH_SCRIPT_FD);
  release_descriptors();
  /* Aliases are expanded as at a prompt: one defined by a command works in the next. */
  expand_aliases = expaliases_flag = 1;
  xfree(dollar_vars[0]);
  dollar_vars[0] = savestring("bash");
  static char *const stacks[] = {"BASH_SOURCE", "BASH_LINENO"};
  for (size_t i = 0; i < sizeof stacks / sizeof stacks[0]; ++i) {
    SHELL_VAR *v;
    ARRAY *a;
    GET_ARRAY_FROM_VAR(stacks[i], v, a);
    if (a != NULL && array_num_elements(a) > 0) array_pop(a);
  }
}

/* SIGKILL to each child of process `of` but `spare`; returns how many were sent. */
static int kill_children(pid_t of, pid_t spare) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)of, (int)of);
  FILE *f = fopen(path, "re");
  if (f == NULL) return 0;
  int sent = 0;
  long pid;
  while (fscanf(f, "%ld", &pid) == 1)
    if (pid > 1 && pid != spare && kill((pid_t)pid, SIGKILL) == 0) ++sent;
  fclose(f);
  return sent;
}

/* A background process's outer subshell (daemon/proc_table.cpp) holds its status pipe and
 * keeps track of everything the process starts. "keep" makes it a child subreaper before it
 * starts the command, so every process the command starts stays in its tree (an orphan comes
 * back to it, even one that called setsid); "reap" then waits until every one of them has
 * ended. Refused in the session's shell itself, where either would break the session.
 *
 * The keeper survives the signals sent to its process group and a restart of the session's
 * shell: sbshd reads the status pipe (fd 3 of the keeper) and ends the tree with its session,
 * and the session's wrapper holds a copy of the read end for the next sbshd. When every read
 * end has closed (sbshd and that wrapper were both killed), nothing can reach the tree any
 * more: the keeper then kills it, round after round until none is left, as the wrapper would
 * have. "keep" starts a watcher for that while the command runs: a child of the keeper that
 * ignores every signal but SIGKILL, dies with the keeper (PR_SET_PDEATHSIG) and waits for the
 * pipe's error; "reap" ends the watcher and watches the pipe itself while it waits. When
 * nobody reads the pipe by the time "keep" returns, it says so (SBSH_KEEPER_UNREAD), and the
 * keeper leaves without starting the command. */
static pid_t watcher_pid;

/* Waits until the status pipe has no reader, or `timeout` (NULL: none) passes, or a signal
 * that `mask` lets through arrives. Returns 1 when it has no reader. */
static int unread(int fd, const struct timespec *timeout, const sigset_t *mask) {
  struct pollfd pf = {fd, 0, 0}; /* a pipe's write end reports POLLERR once no reader is left */
  return ppoll(&pf, 1, timeout, mask) > 0 && (pf.revents & POLLERR);
}

static void start_watcher(void) {
  struct stat st;
  if (fstat(SBSH_KEEPER_STATUS_FD, &st) != 0 || !S_ISFIFO(st.st_mode)) return;
  pid_t keeper = getpid();
  pid_t w = fork();
  if (w != 0) {
    watcher_pid = w > 0 ? w : 0;
    return;
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != keeper) _exit(0);
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_IGN);
  /* Nothing else of the keeper's: its log pipes must reach end-of-file with the process. */
  syscall(SYS_close_range, 0, SBSH_KEEPER_STATUS_FD - 1, 0);
  syscall(SYS_close_range, SBSH_KEEPER_STATUS_FD + 1, ~0U, 0);
  while (!unread(SBSH_KEEPER_STATUS_FD, NULL, NULL)) {
  }
  /* Until the keeper ends (this process with it) or its "reap" takes over (and kills this
   * one): the keeper may have no child at one moment and start the command the next. */
  for (;;) usleep(kill_children(keeper, getpid()) > 0 ? 20 * 1000 : 50 * 1000);
}

static int keeper(const char *what) {
  if (getpid() == shell_pid) {
    builtin_error("sbsh's own builtin: commands cannot call it");
    return EX_USAGE;
  }
  if (strcmp(what, "keep") == 0) {
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) return EXECUTION_FAILURE;
    start_watcher();
    /* Nobody can read the status already (sbshd gave the process up, or it and the wrapper
     * are gone): the command must not start. Later, the watcher ends what it starts. */
    struct timespec no_wait = {0, 0};
    return unread(SBSH_KEEPER_STATUS_FD, &no_wait, NULL) ? SBSH_KEEPER_UNREAD : EXECUTION_SUCCESS;
  }
  if (watcher_pid > 0) kill(watcher_pid, SIGKILL);
  struct stat st;
  int watch = fstat(SBSH_KEEPER_STATUS_FD, &st) == 0 && S_ISFIFO(st.st_mode);
  int orphaned = 0;
  /* SIGCHLD is let through only inside ppoll(): one that comes between the check for
   * children and the wait cannot be missed. */
  sigset_t chld, before, waiting;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &before);
  waiting = before;
  sigdelset(&waiting, SIGCHLD);
  for (;;) {
    /* bash's own SIGCHLD handler may reap some of them first: only ECHILD counts */
    int status;
    pid_t r = waitpid(-1, &status, WNOHANG);
    if (r < 0 && errno == ECHILD) break;
    if (r > 0 || (r < 0 && errno == EINTR)) continue;
    if (orphaned) kill_children(getpid(), 0);
    struct timespec again = {0, 100 * 1000 * 1000};
    if (orphaned || !watch) ppoll(NULL, 0, orphaned ? &again : NULL, &waiting);
    else orphaned = unread(SBSH_KEEPER_STATUS_FD, NULL, &waiting);
  }
  sigprocmask(SIG_SETMASK, &before, NULL);
  return EXECUTION_SUCCESS;
}

static int serve_builtin(WORD_LIST *list) {
  if (list != NULL && list->word != NULL && (strcmp(list->word->word, "keep") == 0 || strcmp(list->word->word, "reap") == 0))
    return keeper(list->word->word);
  if (serving) {
    builtin_error("sbsh's own builtin: commands cannot call it");
    return EX_USAGE;
  }
  serving = 1;
  channel_trusted = lease_trusted = std_are_null = 0; /* bash ran traps, or a command, since the builtin last served */
  begin_unwind_frame("sbsh");
  add_unwind_protect(unwound, NULL);
  idle_signals();
  static int greeted;
  if (!greeted) {
    greeted = 1;
    settle_in();
    send_msg(SBSH_MSG_READY, 0, 0, 0, 0, SBSH_SERVES_INTERRUPTS | SBSH_SERVES_LEASES, 0);
  }
  for (;;) {
    struct run r;
    int got = receive(&r);
    if (got == 0) break;
    if (got < 0) continue;
    if (r.h.type == SBSH_MSG_SYNC) {
      /* A new sbshd: it learns where the shell is with the next status. */
      xfree(said_pwd);
      said_pwd = NULL;
      send_msg(SBSH_MSG_SYNCED, r.h.seq, r.h.nonce, last_command_exit_value, 0,
               SBSH_SERVES_INTERRUPTS | SBSH_SERVES_LEASES, 0);
      continue;
    }
    run_command(&r);
    discard_run(&r);
  }
  /* sbshd has gone and nobody holds its end for the next one: the session is over. */
  discard_unwind_frame("sbsh");
  serving = 0;
  exit_shell(last_command_exit_value);
  return EXECUTION_SUCCESS;
}

/* The channel is the shell's alone (ipc/shell_channel.h): every process bash forks (a
 * subshell, a background job, a command before it execs) closes its copies at once, so none
 * can read the next run or write a status. Async-signal-safe: it runs in the child of fork(). */
static void close_channel_in_child(void) {
  if (same_socket(SBSH_CHANNEL_FD)) close(SBSH_CHANNEL_FD);
  if (same_socket(SBSH_CHANNEL_BACKUP_FD)) close(SBSH_CHANNEL_BACKUP_FD);
  if (leased && is_lease(SBSH_LEASE_FD)) close(SBSH_LEASE_FD);
  /* No command may write the record page sbshd reads. */
  if (page != NULL) {
    munmap(page, sizeof *page);
    page = NULL;
  }
}

/* SBSH_LEND_SIGNAL: sends the wrapper, which holds sbshd's end of the channel while no sbshd
 * does, the read ends of the running command's pipes (ipc/shell_channel.h, keepers), which
 * it drains until the next sbshd comes. Async-signal-safe; nothing when no command runs. */
static void lend_keepers(int sig) {
  (void)sig;
  int saved = errno;
  if (getpid() == shell_pid && keep_out >= 0 && keep_err >= 0) {
    struct sbsh_status_msg m = new_msg(SBSH_MSG_KEEPERS, current_seq);
    int fds[2] = {keep_out, keep_err};
    union {
      struct cmsghdr align;
      char bytes[CMSG_SPACE(sizeof fds)];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {&m, sizeof m};
    struct msghdr mh = msg_over(&iov, 1, control.bytes, sizeof control.bytes);
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    (void)sendmsg(SBSH_CHANNEL_FD, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  errno = saved;
}

/* Refuses, to the shell and everything it starts, the calls that reach into the shell: taking
 * a descriptor from the channel's range of any process (pidfd_getfd of SBSH_KEEP_ERR_FD up to
 * SBSH_CHANNEL_FD, and bash's script, 255, beside them), and ptrace or process_vm_readv and
 * _writev aimed at the shell's pid. Only the low 32 bits of an argument count, as the kernel
 * reads a pid or a descriptor. The calls of every ABI this machine runs are covered (a 32-bit
 * program's too); a call of an ABI the filter does not know goes through. Returns 0 or an
 * errno value: EACCES when this process may not install a filter (neither no_new_privs nor
 * CAP_SYS_ADMIN). */
static int deny_reaching_in(pid_t shell) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == NULL) return ENOMEM;
  int e = -seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0); /* no_new_privs would stop sudo */
  if (e == 0) e = -seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ALLOW);
  const uint32_t arches[] = {SCMP_ARCH_X86, SCMP_ARCH_X32, SCMP_ARCH_ARM};
  for (size_t i = 0; e == 0 && i < sizeof arches / sizeof arches[0]; ++i)
    if (seccomp_arch_exist(ctx, arches[i]) == -EEXIST) (void)seccomp_arch_add(ctx, arches[i]);
  const uint64_t low = 0xffffffffu, pid = (uint32_t)shell;
  const uint32_t no = SCMP_ACT_ERRNO(EPERM);
  if (e == 0) e = -seccomp_rule_add(ctx, no, SCMP_SYS(pidfd_getfd), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, low & ~3u, 252));
  if (e == 0) e = -seccomp_rule_add(ctx, no, SCMP_SYS(pidfd_getfd), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, low, 251));
  if (e == 0) e = -seccomp_rule_add(ctx, no, SCMP_SYS(ptrace), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, low, pid));
  if (e == 0) e = -seccomp_rule_add(ctx, no, SCMP_SYS(process_vm_readv), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, low, pid));
  if (e == 0) e = -seccomp_rule_add(ctx, no, SCMP_SYS(process_vm_writev), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, low, pid));
  if (e == 0) e = -seccomp_load(ctx);
  seccomp_release(ctx);
  return e;
}

/* No command may take the channel from the shell (pidfd_getfd), trace it (ptrace) or read its
 * memory (/proc/PID/mem, process_vm_readv), where the nonce of the running command lives.
 * - The shell is made undumpable: the kernel then refuses all of these to a process without
 *   CAP_SYS_PTRACE over it, which is every command of a user other than root, and every
 *   command of a confined shell (a user namespace without capabilities). So the wrapper
 *   cannot take the running command's pipes either: the shell lends them on
 *   SBSH_LEND_SIGNAL (lend_keepers).
 * - A seccomp filter refuses them by name where one may be installed without no_new_privs
 *   (root, which holds CAP_SYS_PTRACE) or where no_new_privs is set already (a confined
 *   shell); a plain shell of another user gets none (no_new_privs would stop setuid programs
 *   such as sudo), and needs none. A root command can still write the shell's memory through
 *   /proc/PID/mem: only a confined session holds against root's commands. */
static void guard_shell(void) {
  pthread_atfork(NULL, NULL, close_channel_in_child);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = lend_keepers;
  sa.sa_flags = SA_RESTART;
  sigfillset(&sa.sa_mask);
  sigaction(SBSH_LEND_SIGNAL, &sa, NULL);
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;
  if (geteuid() != 0 && !nnp) return; /* no filter without no_new_privs */
  int e = deny_reaching_in(getpid());
  if (e != 0) fprintf(stderr, "sbsh: cannot keep commands from reaching into the shell (seccomp): %s\n", strerror(e));
}

/* Refuses a bash of another major.minor version than the headers it was built with: the
 * structures it shares with bash would not match. */
#define EXPORTED __attribute__((visibility("default")))

EXPORTED int __sbsh_builtin_load(char *name) {
  (void)name;
  if (strcmp(dist_version, DISTVERSION) != 0) {
    fprintf(stderr, "sbsh: this bash is version %s; sbsh's builtin was built for bash %s\n", dist_version, DISTVERSION);
    return 0;
  }
  struct stat st;
  if (fstat(SBSH_CHANNEL_FD, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    fprintf(stderr, "sbsh: no channel to sbshd on descriptor %d\n", SBSH_CHANNEL_FD);
    return 0;
  }
  channel_ino = st.st_ino;
  shell_pid = getpid();
  channel_dev = st.st_dev;
  fcntl(SBSH_CHANNEL_FD, F_SETFD, FD_CLOEXEC);
  dup3(SBSH_CHANNEL_FD, SBSH_CHANNEL_BACKUP_FD, O_CLOEXEC);
  guard_shell();
  hook_waitpid();
  hook_exit_on_error();
  /* Never unloaded while its loop runs (enable -d would unmap the code under it). */
  Dl_info self;
  if (dladdr((void *)serve_builtin, &self) != 0 && self.dli_fname != NULL)
    dlopen(self.dli_fname, RTLD_NOW | RTLD_NODELETE | RTLD_NOLOAD);
  return 1;
}

static char *serve_doc[] = {"Serves sbsh's commands in this shell (sbsh's own; not for use).", NULL};

EXPORTED struct builtin __sbsh_struct = {
    BUILTIN_NAME, serve_builtin, BUILTIN_ENABLED, serve_doc, BUILTIN_NAME, NULL,
};
