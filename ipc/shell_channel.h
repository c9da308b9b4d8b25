/* The shell channel: what sbshd and the sbsh builtin inside a session's bash say to each other
 * for every command. It is a SOCK_SEQPACKET socketpair, so each message arrives whole or not
 * at all and a message can carry descriptors (SCM_RIGHTS) with it.
 *
 * This is sbsh's own internal channel, not the client protocol: both ends are built from this
 * tree and start together (the builtin refuses a peer of another version), so it is a plain C
 * struct, readable by the builtin's C and by sbshd's C++ alike, native byte order.
 *
 *   sbshd -> bash   run:    header, then cwd_len bytes of a directory to check (may be 0), then
 *                           text_len bytes of command text (unless it comes in a memfd);
 *                           descriptors, in this order: [stdin] stdout stderr [keep_out keep_err]
 *                           [text memfd] [lent 1..3], as the flags say.
 *                   sync:   header only; answered with `synced` once every earlier run has
 *                           been answered (a new sbshd that adopted the shell learns which
 *                           statuses are its own).
 *                   interrupt: header only; the run `seq` is to stop. Sent before sbshd has
 *                           the wrapper send the shell SIGINT, to a builtin that said it reads
 *                           it (SBSH_SERVES_INTERRUPTS): a SIGINT that reaches the shell
 *                           between its reading of the run and the start of the command is
 *                           indistinguishable from a stray one and is dropped, so the builtin
 *                           looks for this message once its SIGINT handler is in place, and
 *                           then runs nothing of the text. Read at any other time (the run
 *                           has ended), it is stale and dropped.
 *                   lease:  header and two descriptors: a SOCK_SEQPACKET socket, the shell's
 *                           end of a lease (docs/architecture.md, "The direct path"), and a
 *                           memfd holding its record page (struct sbsh_record_page, below),
 *                           sent to a builtin that said it serves them (SBSH_SERVES_LEASES).
 *                           Until the lease ends the builtin also takes runs on it, from
 *                           whoever holds the other end, answers each there and records each
 *                           in the page; everything else still comes on the channel. Answered
 *                           with `leased` (its seq and nonce). A lease held already ends first
 *                           (lease_ended). Flags: SBSH_LEASE_MARK_PIDS.
 *                   lease_end: header only: the lease ends between two commands (a run read
 *                           from it already is served first). Answered with `lease_ended`, or
 *                           with nothing when no lease is held. However a lease ends, the
 *                           builtin first shuts the reading side of its socket (a run its
 *                           holder sends after that fails at the sender, EPIPE) and answers
 *                           each run still queued on it with a NOT_RUN status whose err is
 *                           SBSH_ERR_LEASE_ENDED: its holder knows of every run whether it ran.
 *   bash -> sbshd   ready:  the builtin is loaded and serving (once per shell, seq 0).
 *                   status: one per run, with the run's seq and nonce.
 *                   synced: the answer to a sync, with its seq and nonce.
 *                   keepers: the read ends of the running command's stdout and stderr
 *                           (SBSH_KEEP_*_FD, two descriptors), sent when the shell gets
 *                           SBSH_LEND_SIGNAL: for the wrapper, which holds sbshd's end while
 *                           no sbshd does and drains them (it cannot take them itself: the
 *                           shell is undumpable). sbshd drops one it reads.
 *                   leased: the answer to lease, with its seq and nonce.
 *                   records: header only: the page's ring of ended runs is half full and
 *                           sbshd has not read it since (it reads it by itself every few
 *                           milliseconds; this is for a holder running commands faster).
 *                   lease_ended: the lease whose seq and nonce it repeats is over: sbshd
 *                           asked (lease_end), its other end was closed, or a command closed
 *                           or replaced SBSH_LEASE_FD. A status the builtin could not send on
 *                           the lease comes on the channel instead.
 *
 * Only the shell may speak for its commands. sbshd reads each message's sender from the kernel
 * (SO_PASSCRED: a pid no process can forge) and takes only the shell's; and each run and sync
 * carries a nonce, a random number drawn for it that its answer must repeat, which a command
 * cannot know (it lives in the shell's memory, which no command may read: the builtin makes
 * the shell undumpable). A message that fails either check means the channel has been reached
 * by something else: sbshd then trusts nothing more from it and replaces the shell. Every
 * process the shell forks closes its copies of the channel (a background job never holds it).
 */
#ifndef SBSH_IPC_SHELL_CHANNEL_H
#define SBSH_IPC_SHELL_CHANNEL_H

#include <stdint.h>  // NOLINT(modernize-deprecated-headers): a C header, the builtin reads it too

#define SBSH_CHANNEL_MAGIC 0x48534253u /* "SBSH" */
/* Bump this when any struct or meaning below changes: both ends are checked at start. */
#define SBSH_CHANNEL_VERSION 2u

/* Texts up to this size travel in the message itself; longer ones in a memfd. */
#define SBSH_CHANNEL_INLINE_TEXT 49152u /* 48 KiB */
/* The largest directory name that travels with a run. */
#define SBSH_CHANNEL_MAX_CWD 4096u

/* Descriptor numbers the builtin keeps in the shell: high, close-on-exec, out of the way of
 * bash's own (which start at 10) and of the script it reads (255). */
#define SBSH_CHANNEL_FD 254
#define SBSH_CHANNEL_BACKUP_FD 253
/* The read ends of a running command's stdout and stderr pipes (SBSH_RUN_KEEPERS), held by
 * the shell so that nothing the command writes meets a pipe without a reader while sbshd
 * restarts; the wrapper gets copies (a keepers message) and drains them while no sbshd is
 * there. */
#define SBSH_KEEP_OUT_FD 252
#define SBSH_KEEP_ERR_FD 251
/* The shell's end of a lease while one is held. */
#define SBSH_LEASE_FD 250
/* /proc/sys/kernel/ns_last_pid, kept open while a lease is held, for each run's since mark. */
#define SBSH_LAST_PID_FD 249
/* The script bash reads its builtin's name from, given to it as /dev/fd/3 (bash then reads it
 * through a descriptor of its own, 255). */
#define SBSH_SCRIPT_FD 3
/* A background process's keeper (daemon/proc_table.cpp): its status pipe is its descriptor
 * SBSH_KEEPER_STATUS_FD, and "'__sbsh serve' keep" answers SBSH_KEEPER_UNREAD when nobody reads
 * that pipe any more (then the keeper leaves without starting the command). */
#define SBSH_KEEPER_STATUS_FD 3
/* Where a run's lent descriptors go while its text runs (SBSH_RUN_LENT), or from 10 up when
 * the shell may not have descriptors that high (a session's --limit nofile). */
#define SBSH_LENT_FD 246
#define SBSH_KEEPER_UNREAD 3

enum sbsh_channel_type {
  SBSH_MSG_RUN = 1,
  SBSH_MSG_SYNC = 2,
  SBSH_MSG_INTERRUPT = 3,
  SBSH_MSG_LEASE = 4,
  SBSH_MSG_LEASE_END = 5,
  SBSH_MSG_READY = 10,
  SBSH_MSG_STATUS = 11,
  SBSH_MSG_SYNCED = 12,
  SBSH_MSG_KEEPERS = 13,
  SBSH_MSG_LEASED = 14,
  SBSH_MSG_LEASE_ENDED = 15,
  SBSH_MSG_RECORDS = 16,
};

/* The signal that has the builtin send a keepers message (a real-time signal bash leaves
 * alone; only the wrapper sends it, to the shell alone). */
#define SBSH_LEND_SIGNAL 62

/* Flags of a run. */
enum sbsh_run_flags {
  SBSH_RUN_STDIN = 1u << 0,      /* a stdin descriptor comes first; else /dev/null */
  SBSH_RUN_KEEPERS = 1u << 1,    /* read ends of stdout and stderr, held while the command runs */
  SBSH_RUN_TEXT_MEMFD = 1u << 2, /* the text is in a memfd (its first text_len bytes) */
  SBSH_RUN_INTERNAL = 1u << 3,   /* sbshd's own (init commands, claims): nothing changes */
  SBSH_RUN_LENT = 1u << 4,       /* three descriptors for the text (a background process's
                                    stdout, stderr and status pipes), whose numbers the shell
                                    variables __sbsh_lent_out, __sbsh_lent_err and
                                    __sbsh_lent_status hold while it runs: the text redirects
                                    from them, which needs no path (/proc/SBSHD/fd/N is not in
                                    a confined shell's view) */
  SBSH_RUN_TTY = 1u << 5,        /* stdin, stdout and stderr are a terminal's (exec --tty),
                                    which the text gets as its controlling terminal: the
                                    shell leads a process session of its own from then on,
                                    gives the terminal to each foreground job as an
                                    interactive shell does, and lets go of it afterwards */
};

/* Flags of a status. */
enum sbsh_status_flags {
  SBSH_STATUS_INTERRUPTED = 1u << 0, /* SIGINT stopped the text: the rest of it did not run */
  SBSH_STATUS_NOT_RUN = 1u << 1,     /* nothing of the text ran; err says why */
  SBSH_STATUS_SIGNALED = 1u << 2,    /* exit_signal is the signal that ended the last command */
  SBSH_STATUS_CWD = 1u << 3,         /* the shell's $PWD follows the struct (the rest of the
                                        message, at most SBSH_CHANNEL_MAX_CWD bytes): sent when it
                                        changed since the shell last said (sbshd cannot read
                                        /proc/PID/cwd of an undumpable shell unless it is root) */
  SBSH_STATUS_TIMED_OUT = 1u << 4,   /* a run on a lease: sbshd stopped it, its timeout passed */
  SBSH_STATUS_CANCELLED = 1u << 5,   /* a run on a lease: sbshd stopped it for another client */
};

/* Flags of ready and synced: what the builtin understands (a builtin of an earlier sbsh, in
 * a shell a newer sbshd adopted, sends none). */
enum sbsh_serves_flags {
  SBSH_SERVES_INTERRUPTS = 1u << 0, /* interrupt messages */
  /* 1u << 1 meant leases without a record page: such a builtin is given none */
  SBSH_SERVES_LEASES = 1u << 2, /* lease (with its record page) and lease_end messages */
};

/* Flags of a lease message. */
enum sbsh_lease_flags {
  SBSH_LEASE_MARK_PIDS = 1u << 0, /* the shell sees sbshd's process ids (no pid namespace of its
                                     own): each run's since mark takes the last pid given */
};
/* Why a run was not run (err of a NOT_RUN status; errno values otherwise). */
#define SBSH_ERR_BAD_MESSAGE (-1) /* malformed run: wrong size, descriptors or version */
#define SBSH_ERR_NOT_A_DIR (-2)   /* the directory to check exists but is not a directory */
#define SBSH_ERR_NO_TERMINAL (-3) /* the shell could not make the terminal its controlling one */
#define SBSH_ERR_LEASE_ENDED (-4) /* a run on a lease that ended before the shell read it */

struct sbsh_run_header {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  uint64_t seq;
  uint32_t flags;
  uint32_t text_len;
  uint32_t cwd_len;
  uint32_t timeout_ms; /* a run on a lease: sbshd stops it once this has passed (0: never) */
  uint64_t nonce; /* run, sync, lease: repeated by the status, synced or leased that answers it */
};

struct sbsh_status_msg {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  uint64_t seq;
  int32_t exit_value; /* $? after the text, as the next command sees it */
  int32_t exit_signal; /* with SBSH_STATUS_SIGNALED */
  uint32_t flags;
  int32_t err;
  int64_t pid; /* ready: the shell's pid */
  uint64_t nonce; /* status, synced, leased, lease_ended: the answered message's (the lease's) */
};

/* The record page of a lease: memory sbshd makes (a sealed memfd of exactly this size, sent
 * with the lease message) and both map, in which the builtin writes each run it serves on the
 * lease, so that sbshd knows every command's start and end without a message for each
 * (docs/architecture.md, "The direct path"). sbshd reads it every few milliseconds and
 * whenever it needs the truth (a timeout, a cancel, `sbsh ps`, the lease's end). Every process
 * the shell forks unmaps it, so no command can write it; sbshd still checks every field it
 * reads (a page that fails says something else wrote it, and the shell is replaced).
 *
 * The running run is written under `changes`, a sequence count: odd while the builtin writes,
 * so that a reader that saw the same even count before and after copying has a whole picture.
 * An ended run goes into ring[ended % SBSH_RECORD_RING] (its seq 0 while the slot is written,
 * its own once written), then `ended` grows by one: a reader copies the records it has not
 * read (from `read`, which it alone writes) and drops those the builtin wrote over meanwhile
 * (a seq that was 0 or changed as it copied, or `ended` more than the ring's size past). */
#define SBSH_RECORD_TEXT 256u
#define SBSH_RECORD_RING 64u
#define SBSH_RECORD_MAGIC 0x44524253u /* "SBRD" */

struct sbsh_record {
  uint64_t seq;        /* the run's, as its holder numbered it */
  int32_t exit_value;  /* as the status said */
  int32_t exit_signal; /* with SBSH_STATUS_SIGNALED */
  uint32_t flags;      /* the status's */
  uint32_t text_len;   /* bytes of text[] used, at most SBSH_RECORD_TEXT */
  uint64_t full_len;   /* the whole text's length */
  uint64_t started_us; /* CLOCK_MONOTONIC */
  uint64_t ended_us;
  /* Of the lease's runs up to and including this one, how many exited other than 0, and how
   * many sbshd stopped for their timeout: sbshd counts exactly what it did not read too (runs
   * written over before it read them). */
  uint64_t failed_total;
  uint64_t timed_out_total;
  char text[SBSH_RECORD_TEXT]; /* the text's start */
};

struct sbsh_record_page {
  uint32_t magic;   /* SBSH_RECORD_MAGIC, written by sbshd */
  uint16_t version; /* SBSH_CHANNEL_VERSION */
  uint16_t reserved;
  /* The running run, written by the builtin: run_seq 0 between runs. */
  uint64_t changes;
  uint64_t run_seq;
  int64_t since_pid;     /* its since mark: the last pid given when it started (0: unknown) */
  uint64_t since_ticks;  /* and CLOCK_BOOTTIME then, in clock ticks */
  uint64_t started_us;   /* CLOCK_MONOTONIC */
  uint64_t deadline_us;  /* when sbshd is to stop it (0: never) */
  uint32_t text_len;
  uint32_t reserved2;
  uint64_t full_len;
  char text[SBSH_RECORD_TEXT];
  /* Ended runs, written by the builtin. */
  uint64_t ended;
  /* Written by sbshd. */
  uint64_t read;       /* records read */
  uint64_t stop_seq;   /* a run sbshd stopped, and why: the builtin adds stop_flags to its status */
  uint32_t stop_flags; /* SBSH_STATUS_TIMED_OUT or SBSH_STATUS_CANCELLED */
  uint32_t reserved3;
  struct sbsh_record ring[SBSH_RECORD_RING];
};

#endif /* SBSH_IPC_SHELL_CHANNEL_H */
