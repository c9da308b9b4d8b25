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
 * the builtin does not catch the jump (no setjmp of its own) but leaves an unwind-protect,
 * which bash runs on the way. It reports the status and writes the builtin's name into the
 * script bash reads, so the reader loop calls it again. Bash's own errors that abandon a
 * command (an arithmetic error in an assignment, say) take the same road.
 *
 * The builtin's name has a space in it ("__sbsh serve"): a function cannot be named so, so no
 * user function can stand in its place when bash reads that name back from its script.
 */
#include <config.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loadables.h"
#include "array.h"
#include "execute_cmd.h"
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

#define BUILTIN_NAME "__sbsh serve"

/* One received run: its header, strings and descriptors. */
struct run {
  struct sbsh_run_header h;
  char *cwd;   /* xmalloc'd, NUL-terminated, or NULL */
  char *text;  /* xmalloc'd, NUL-terminated; evalstring frees it */
  int in, out, err, keep_out, keep_err;
};

static int serving;           /* inside the serve loop */
static int in_command;        /* a command's descriptors are on 0, 1 and 2 */
static uint64_t current_seq;  /* the run being served */
static int keep_out = -1, keep_err = -1;
static volatile sig_atomic_t got_sigint;
static ino_t channel_ino;
static pid_t shell_pid; /* the session's shell, where the builtin was loaded */
static dev_t channel_dev;

static int same_socket(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && st.st_ino == channel_ino && st.st_dev == channel_dev;
}

/* The channel, checked: a command may have closed or replaced fd SBSH_CHANNEL_FD (exec
 * 254>&-). The backup restores it; with both gone the shell cannot report and ends. */
static int channel(void) {
  if (same_socket(SBSH_CHANNEL_FD)) {
    if (!same_socket(SBSH_CHANNEL_BACKUP_FD)) dup3(SBSH_CHANNEL_FD, SBSH_CHANNEL_BACKUP_FD, O_CLOEXEC);
    return SBSH_CHANNEL_FD;
  }
  if (same_socket(SBSH_CHANNEL_BACKUP_FD) && dup3(SBSH_CHANNEL_BACKUP_FD, SBSH_CHANNEL_FD, O_CLOEXEC) >= 0)
    return SBSH_CHANNEL_FD;
  fprintf(stderr, "sbsh: a command closed the shell's channel to sbshd (descriptors %d and %d); the shell ends\n",
          SBSH_CHANNEL_FD, SBSH_CHANNEL_BACKUP_FD);
  fflush(stderr);
  _exit(125);
}

static void send_msg(uint16_t type, uint64_t seq, int value, int sig, uint32_t flags, int err) {
  struct sbsh_status_msg m;
  memset(&m, 0, sizeof m);
  m.magic = SBSH_CHANNEL_MAGIC;
  m.version = SBSH_CHANNEL_VERSION;
  m.type = type;
  m.seq = seq;
  m.exit_value = value;
  m.exit_signal = sig;
  m.flags = flags;
  m.err = err;
  m.pid = getpid();
  int fd = channel();
  while (send(fd, &m, sizeof m, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
  /* A send that fails otherwise means sbshd's end is gone with every copy of it (the wrapper
   * holds one while waiting for the next sbshd): the next recv reads end-of-file. */
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
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    close(null);
  }
  if (keep_out >= 0) close(keep_out);
  if (keep_err >= 0) close(keep_err);
  keep_out = keep_err = -1;
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
  send_msg(SBSH_MSG_STATUS, current_seq, value, sig, flags, 0);
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

/* Runs when bash unwinds past the builtin: a throw to its top level (SIGINT, or one of bash's
 * errors that abandon a command). */
static void unwound(void *unused) {
  (void)unused;
  if (!serving) return;
  /* As bash's reader loop will: a discarded command leaves a non-zero status. */
  int value = last_command_exit_value != 0 ? last_command_exit_value : EXECUTION_FAILURE;
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

/* One message from the channel. Returns 1 with a run or a sync in *r, 0 at end-of-file (sbshd
 * and every copy of its end are gone), -1 for a malformed message (answered already). */
static int receive(struct run *r) {
  static char buf[sizeof(struct sbsh_run_header) + SBSH_CHANNEL_MAX_CWD + SBSH_CHANNEL_INLINE_TEXT];
  union {
    struct cmsghdr align;
    char bytes[CMSG_SPACE(8 * sizeof(int))];
  } control;
  memset(r, 0, sizeof *r);
  r->in = r->out = r->err = r->keep_out = r->keep_err = -1;
  for (;;) {
    struct iovec iov = {buf, sizeof buf};
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control.bytes;
    mh.msg_controllen = sizeof control.bytes;
    ssize_t n = recvmsg(channel(), &mh, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) {
      CLRINTERRUPT; /* a stray SIGINT while idle: nothing runs */
      got_sigint = 0;
      continue;
    }
    if (n <= 0) return 0;
    int fds[8], nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < k && nfds < 8; ++i) memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      }
    const struct sbsh_run_header *h = (const struct sbsh_run_header *)buf;
    int bad = (size_t)n < sizeof *h || h->magic != SBSH_CHANNEL_MAGIC || h->version != SBSH_CHANNEL_VERSION ||
              (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
    if (!bad) r->h = *h;
    if (!bad && h->type == SBSH_MSG_SYNC) {
      for (int i = 0; i < nfds; ++i) close(fds[i]);
      return 1;
    }
    int want = 2 + ((h->flags & SBSH_RUN_STDIN) ? 1 : 0) + ((h->flags & SBSH_RUN_KEEPERS) ? 2 : 0) +
               ((h->flags & SBSH_RUN_TEXT_MEMFD) ? 1 : 0);
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
    send_msg(SBSH_MSG_STATUS, current_seq, 0, 0, SBSH_STATUS_NOT_RUN, SBSH_ERR_BAD_MESSAGE);
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

static void run_command(struct run *r) {
  current_seq = r->h.seq;
  if (r->cwd != NULL) {
    int e = check_cwd(r->cwd);
    if (e != 0) {
      discard_run(r);
      send_msg(SBSH_MSG_STATUS, current_seq, last_command_exit_value, 0, SBSH_STATUS_NOT_RUN, e);
      return;
    }
    xfree(r->cwd);
    r->cwd = NULL;
  }
  flush_std();
  int null = -1;
  if (r->in < 0) r->in = null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  dup2(r->in, 0);
  dup2(r->out, 1);
  dup2(r->err, 2);
  close_quietly(&r->in);
  close_quietly(&r->out);
  close_quietly(&r->err);
  (void)null;
  /* At fixed numbers, for the wrapper to find them (ipc/shell_channel.h). */
  if (r->keep_out >= 0 && dup3(r->keep_out, SBSH_KEEP_OUT_FD, O_CLOEXEC) >= 0) keep_out = SBSH_KEEP_OUT_FD;
  if (r->keep_err >= 0 && dup3(r->keep_err, SBSH_KEEP_ERR_FD, O_CLOEXEC) >= 0) keep_err = SBSH_KEEP_ERR_FD;
  close_quietly(&r->keep_out);
  close_quietly(&r->keep_err);
  in_command = 1;

  CLRINTERRUPT;
  got_sigint = 0;
  last_command_exit_signal = 0;
  ensure_sigint_trapped();
  set_signal_handler(SIGINT, command_sigint);

  char *text = r->text;
  r->text = NULL;
  int value = evalstring(text, "bash", SEVAL_NOHIST | SEVAL_RESETLINE);
  /* Reached only when the text ran to its end (a throw to the top level goes to unwound). */
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

/* A background process's outer subshell (daemon/proc_table.cpp) holds its status pipe and
 * keeps track of everything the process starts. "keep" makes it a child subreaper before it
 * starts the command, so every process the command starts stays in its tree (an orphan comes
 * back to it, even one that called setsid); "reap" then waits until every one of them has
 * ended. Refused in the session's shell itself, where either would break the session. */
static int keeper(const char *what) {
  if (getpid() == shell_pid) {
    builtin_error("sbsh's own builtin: commands cannot call it");
    return EX_USAGE;
  }
  if (strcmp(what, "keep") == 0) return prctl(PR_SET_CHILD_SUBREAPER, 1) == 0 ? EXECUTION_SUCCESS : EXECUTION_FAILURE;
  for (;;) { /* bash's own SIGCHLD handler may reap some of them first: only ECHILD counts */
    int st;
    if (waitpid(-1, &st, 0) < 0 && errno == ECHILD) return EXECUTION_SUCCESS;
  }
}

static int serve_builtin(WORD_LIST *list) {
  if (list != NULL && list->word != NULL && (strcmp(list->word->word, "keep") == 0 || strcmp(list->word->word, "reap") == 0))
    return keeper(list->word->word);
  if (serving) {
    builtin_error("sbsh's own builtin: commands cannot call it");
    return EX_USAGE;
  }
  serving = 1;
  begin_unwind_frame("sbsh");
  add_unwind_protect(unwound, NULL);
  idle_signals();
  static int greeted;
  if (!greeted) {
    greeted = 1;
    settle_in();
    send_msg(SBSH_MSG_READY, 0, 0, 0, 0, 0);
  }
  for (;;) {
    struct run r;
    int got = receive(&r);
    if (got == 0) break;
    if (got < 0) continue;
    if (r.h.type == SBSH_MSG_SYNC) {
      send_msg(SBSH_MSG_SYNCED, r.h.seq, last_command_exit_value, 0, 0, 0);
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
