"""The records sbsh returns: frozen, slotted dataclasses, one per thing sbshd reports.

Times are Unix time in seconds (float), durations seconds unless a name says `_ms`; output
is bytes, exactly as the command wrote it, with `.text` helpers that decode UTF-8 (invalid
bytes become U+FFFD).
"""
from __future__ import annotations

import base64
import os
import signal as _signal
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping, Optional, Sequence, Tuple

__all__ = [
    "STDOUT", "STDERR", "OutputChunk", "ExecResult", "ProcessInfo", "Logs", "SessionInfo", "SessionDefinition",
    "HistoryEntry", "SessionDetails", "Counters", "DaemonStatus", "FileInfo", "FileEdit", "FileLines", "FileMatch",
    "FileSearch", "PlanCommand", "PlanStage",
    "PlanReason", "PlanReport", "PlanEvent",
]

STDOUT = 1
STDERR = 2


def _decode(b: bytes) -> str:
    return b.decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class OutputChunk:
    """A piece of a command's output as it arrived: stream is STDOUT (1) or STDERR (2)."""
    stream: int
    data: bytes

    @property
    def text(self) -> str:
        return _decode(self.data)


@dataclass(frozen=True, slots=True)
class ExecResult:
    """How one command ended, with its output.

    exit_code is None when no process produced one (see error); signal is the number of the
    signal that ended it (exit_code is then 128 + signal). shell_restarted: the shell ended
    under the command, and the session's state with it. state_lost: the command ran in a
    shell that had replaced the one earlier commands used (state_lost_reason says why).
    ran False: it certainly did not run (no shell took it), so it is safe to send again.
    stdout_omitted / stderr_omitted: bytes left out between the first and last part kept
    (output_limit). running: it still runs (detach_after, or await_command's timeout), under
    command_id. oom_killed: while it ran, the kernel killed a process of the session's for
    memory (its cgroup reached create_session's memory). screen: with tty, what the command's
    terminal showed at its end, as text (a terminal emulator's rendering of its output).
    stdout_bytes / stderr_bytes: what it wrote to each stream so far, the offsets from which
    command_logs gives only what is new."""
    exit_code: Optional[int]
    signal: Optional[int]
    timed_out: bool
    shell_restarted: bool
    cancelled: bool
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    duration: float
    started_at: Optional[float]
    error: str = ""
    ran: bool = True
    generation: int = 0
    state_lost: bool = False
    state_lost_reason: str = ""
    oom_killed: bool = False
    stdout_omitted: int = 0
    stderr_omitted: int = 0
    running: bool = False
    command_id: int = 0
    waiting_for_input: bool = False
    prompt: str = ""
    screen: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0

    @property
    def ok(self) -> bool:
        """The command ran and succeeded: exit code 0, not timed out, not cancelled, its shell
        not lost."""
        return (self.ran and self.exit_code == 0 and not self.timed_out and not self.cancelled
                and not self.shell_restarted)

    @property
    def text(self) -> str:
        """stdout as text (UTF-8; invalid bytes become U+FFFD)."""
        return _decode(self.stdout)

    @property
    def stdout_text(self) -> str:
        return _decode(self.stdout)

    @property
    def stderr_text(self) -> str:
        return _decode(self.stderr)


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """The state of a background process. state: starting, running, exited, killed, failed,
    lost (sbshd stopped while it ran) or not_started (sbshd stopped before it started). pid is also its process group (None before it starts)."""
    id: int
    name: str
    session: str
    command: str
    state: str
    pid: Optional[int]
    exit_code: Optional[int]
    signal: Optional[int]
    started_at: float
    ended_at: Optional[float]
    error: str
    log: str  # its stdout log (stderr: the same with .err)

    @property
    def running(self) -> bool:
        return self.state in ("starting", "running")


@dataclass(frozen=True, slots=True)
class CommandInfo:
    """A command sbshd keeps, detached from its client (`sbsh ps` lists it by %ID): id is the
    number after the %, as await_command takes it. state: queued, running or finished. pid is
    the session's shell, which runs it (None unless running)."""
    id: int
    session: str
    command: str
    state: str
    detached: bool
    pid: Optional[int]
    exit_code: Optional[int]
    signal: Optional[int]
    timed_out: bool
    cancelled: bool
    started_at: Optional[float]
    ended_at: Optional[float]

    @property
    def running(self) -> bool:
        return self.state in ("queued", "running")


@dataclass(frozen=True, slots=True)
class Logs:
    """A background process's logged output (what was not given to on_output too), and its
    state at the end."""
    stdout: bytes
    stderr: bytes
    process: Optional[ProcessInfo]

    @property
    def text(self) -> str:
        return _decode(self.stdout)

    @property
    def stderr_text(self) -> str:
        return _decode(self.stderr)


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session, as `sbsh session ls --json` lists it. state: starting, ready, running,
    restarting, exited or failed; running: the command it runs, if any."""
    name: str
    state: str
    shell_pid: int
    wrapper_pid: int
    restarts: int
    queued: int
    commands: int
    cwd: str
    restart: str
    uptime_ms: int
    started_at: Optional[float]
    running: Optional[str]
    running_ms: Optional[int]
    error: Optional[str]
    implicit: bool


@dataclass(frozen=True, slots=True)
class SessionDefinition:
    """How a session's shells start."""
    cwd: str
    env: Tuple[str, ...]
    init: Tuple[str, ...]
    restart: str
    limits: Tuple[str, ...]
    root: Optional[str]
    snapshot: Optional[str]
    setup: Optional[str] = None      # the setup that built its environment (create_session(setup=))
    setup_keys: Tuple[str, ...] = ()
    sbsh_env: Optional[str] = None   # that environment's directory, its shells' SBSH_ENV
    # What the kernel holds it to (create_session(confine=, ...)): landlock_abi is the Landlock
    # ABI in force (0: not confined); memory_max (bytes), pids_max and cpu_millis (thousandths
    # of a CPU) its cgroup's limits, 0 for none; cgroup that cgroup's directory.
    confine: bool = False
    allow_write: Tuple[str, ...] = ()
    allow_read: Tuple[str, ...] = ()
    read_only: Tuple[str, ...] = ()
    no_network: bool = False
    landlock_abi: int = 0
    memory_max: int = 0
    pids_max: int = 0
    cpu_millis: int = 0
    cgroup: Optional[str] = None


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One of a session's last commands."""
    command: str
    exit_code: Optional[int]
    timed_out: bool
    shell_restarted: bool
    started_at: Optional[float]
    duration_ms: int


@dataclass(frozen=True, slots=True)
class SessionDetails:
    """One session in detail, as `sbsh session show NAME --json`."""
    session: SessionInfo
    definition: SessionDefinition
    history: Tuple[HistoryEntry, ...]
    init_output: str


@dataclass(frozen=True, slots=True)
class Counters:
    """sbshd's counters since it started (sbsh(1), JSON OUTPUT)."""
    commands: int
    failed: int
    timed_out: int
    shell_restarts: int
    bytes_streamed: int
    clients: int


@dataclass(frozen=True, slots=True)
class DaemonStatus:
    """The daemon, as `sbsh status --json`."""
    pid: int
    version: str
    uptime_ms: int
    socket: str
    counters: Counters
    sessions: Tuple[SessionInfo, ...]
    descriptor_limit: int = 0  # sbshd's soft RLIMIT_NOFILE (0 from an sbshd that does not say)
    sessions_supported: int = 0  # the sessions that limit holds, 3 descriptors each


@dataclass(frozen=True, slots=True)
class FileInfo:
    """A file beneath a session's root. type: file, dir, symlink, fifo, socket, char or block;
    mode: the permission bits; target: a symlink's. A path or target that is not UTF-8 is
    what os.fsdecode makes of its bytes (os.fsencode gives them back), so it names the file
    again in read_file and the other calls."""
    path: str
    type: str
    size: int
    mode: int
    mtime: Optional[float]
    target: Optional[str]


@dataclass(frozen=True, slots=True)
class FileEdit:
    """What Client.edit_file did: how many occurrences it replaced, the file's size now, and
    the line (1 the first) where the first replacement starts."""
    path: str
    replacements: int
    size: int
    first_line: int


@dataclass(frozen=True, slots=True)
class FileLines:
    """Lines of a file (Client.read_lines): their exact bytes, newlines included, the numbers
    of the first and last given (end_line is start_line - 1 when none was), how many the file
    has, and whether it goes on past end_line."""
    path: str
    data: bytes
    start_line: int
    end_line: int
    total_lines: int
    truncated: bool

    @property
    def text(self) -> str:
        return _decode(self.data)


@dataclass(frozen=True, slots=True)
class FileMatch:
    """A line that matched (Client.search_files): its file, from the directory searched, its
    number (1 the first), its text (invalid UTF-8 replaced) and its exact bytes."""
    path: str
    line: int
    text: str
    data: bytes


@dataclass(frozen=True, slots=True)
class FileSearch:
    """What Client.search_files found: the matching lines, by file and line; how many files
    it read, how many it left out (not text, or over 16 MiB), whether more lines matched
    than it gives, and dir, the directory the matches' paths are from (the path searched, or
    the directory holding it when it is a file)."""
    matches: Tuple[FileMatch, ...]
    files_searched: int
    files_skipped: int
    truncated: bool
    dir: str


@dataclass(frozen=True, slots=True)
class KeptCopy:
    """A snapshot's copy kept after its session (remove_session's keep_copy, or the session's
    keep_copy_on_failure): where it is, for which session, when it was kept and its size (0
    in what prune_kept_copies returns)."""
    session: str
    path: str
    kept_at: Optional[float]
    size_bytes: int


@dataclass(frozen=True, slots=True)
class EnvironmentInfo:
    """An environment a setup built (create_session's setup), shared by every session with
    its hash: its directory (their SBSH_ENV), the setup and key files it was built from, its
    size, when it was built and last used, and the sessions defined with it now."""
    hash: str
    path: str
    setup: str
    keys: Tuple[str, ...]
    size_bytes: int
    created_at: Optional[float]
    last_used: Optional[float]
    sessions: Tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PlanCommand:
    """One command of a plan's report. status: succeeded, failed, cancelled, not_run or
    skipped. stdout and stderr are the exact bytes kept (the report's _base64 fields when the
    text was not valid UTF-8)."""
    command: str
    cwd: Optional[str]
    env: Tuple[str, ...]
    timeout_ms: Optional[int]
    status: str
    exit_code: Optional[int]
    signal: Optional[int]
    timed_out: bool
    shell_restarted: bool
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    stdout_bytes: int
    stderr_bytes: int
    stdout_file: Optional[str]
    stderr_file: Optional[str]
    duration_ms: Optional[int]
    started_at: Optional[float]
    error: Optional[str]

    @property
    def text(self) -> str:
        return _decode(self.stdout)


@dataclass(frozen=True, slots=True)
class PlanStage:
    """A stage of a plan's report. expect: success or failure; status: passed, failed,
    skipped or cancelled."""
    name: str
    expect: str
    status: str
    commands: Tuple[PlanCommand, ...]


@dataclass(frozen=True, slots=True)
class PlanReason:
    """Why a run did not pass: the stage, the command's index in it, and a message."""
    stage: Optional[str]
    command: Optional[int]
    message: str


@dataclass(frozen=True, slots=True)
class PlanReport:
    """The report of a plan's run (sbsh(1), REPORT). status: passed, failed or cancelled;
    exit_status: what `sbsh run` exits with (0 passed, 1 failed, 130 cancelled, 255 sbsh
    failed: see error)."""
    status: str
    reason: Optional[PlanReason]
    error: Optional[str]
    session: str
    session_kept: bool
    started_at: Optional[float]
    duration_ms: int
    stages: Tuple[PlanStage, ...]
    exit_status: int
    json: str  # the report as sbshd's libsbsh wrote it

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass(frozen=True, slots=True)
class PlanEvent:
    """One event of a running plan (sbsh(1), EVENTS): event is plan_started, stage_started,
    command_started, command_finished, stage_finished or plan_finished. The fields that an
    event does not carry are None; json is the event's line of the event log."""
    event: str
    time: Optional[float]
    stage: Optional[str]
    stage_index: Optional[int]
    index: Optional[int]
    command: Optional[str]
    status: Optional[str]
    exit_code: Optional[int]
    timed_out: Optional[bool]
    json: str


# ---- From the daemon's JSON (private) ---------------------------------------------------------

def unix_time(rfc3339: Optional[str]) -> Optional[float]:
    """"2026-11-22T13:58:50.123Z" as Unix time in seconds."""
    if not rfc3339:
        return None
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def signal_number(name: Optional[str]) -> Optional[int]:
    """"SIGTERM" (or "SIG40") as a number."""
    if name is None:
        return None
    try:
        return int(_signal.Signals[name])
    except KeyError:
        return int(name[3:]) if name[3:].isdigit() else None


def _opt_int(v: Any) -> Optional[int]:
    return None if v is None else int(v)


def _opt_str(v: Any) -> Optional[str]:
    return None if v is None else str(v)


def _strs(v: Any) -> Tuple[str, ...]:
    if isinstance(v, Mapping):
        return tuple(f"{k}={x}" for k, x in v.items())
    return tuple(str(x) for x in (v or ()))


def _name(d: Mapping[str, Any], key: str) -> Optional[str]:
    """A name or path of a listing: from its exact bytes (KEY_base64) when it is not UTF-8."""
    raw = d.get(key + "_base64")
    if raw:
        return os.fsdecode(base64.b64decode(str(raw)))
    return _opt_str(d.get(key))


def _names(d: Mapping[str, Any], key: str) -> Tuple[str, ...]:
    """A list of names: each from its exact bytes (KEY_base64's entry) when it is not UTF-8."""
    texts = [str(x) for x in d.get(key) or ()]
    exact = d.get(key + "_base64") or ()
    return tuple(os.fsdecode(base64.b64decode(str(b))) if b else t
                 for t, b in zip(texts, list(exact) + [None] * (len(texts) - len(exact))))


def session_info(d: Mapping[str, Any]) -> SessionInfo:
    return SessionInfo(name=str(d.get("name", "")), state=str(d.get("state", "")), shell_pid=int(d.get("shell_pid") or 0),
                       wrapper_pid=int(d.get("wrapper_pid") or 0), restarts=int(d.get("restarts") or 0),
                       queued=int(d.get("queued") or 0), commands=int(d.get("commands") or 0),
                       cwd=_name(d, "cwd") or "", restart=str(d.get("restart", "")),
                       uptime_ms=int(d.get("uptime_ms") or 0), started_at=unix_time(d.get("started_at")),
                       running=_opt_str(d.get("running")), running_ms=_opt_int(d.get("running_ms")),
                       error=_opt_str(d.get("error")), implicit=bool(d.get("implicit", False)))


def _confinement(c: Mapping[str, Any]) -> Mapping[str, Any]:
    """SessionDefinition's confinement fields from `definition.confinement`: its rules after
    the root's and TMPDIR's are the added paths, by their access."""
    added: dict[str, list[str]] = {"read-write": [], "read-execute": [], "read-only": []}
    confine = bool(c.get("landlock"))
    for rule in list(c.get("rules") or ())[2 if confine else 0:]:
        added.setdefault(str(rule.get("access", "")), []).append(_name(rule, "path") or "")
    return {"confine": confine, "allow_write": tuple(added["read-write"]), "allow_read": tuple(added["read-execute"]),
            "read_only": tuple(added["read-only"]), "no_network": "net" in (c.get("namespaces") or ()),
            "landlock_abi": int(c.get("landlock_abi") or 0), "memory_max": int(c.get("memory_max") or 0),
            "pids_max": int(c.get("pids_max") or 0), "cpu_millis": int(c.get("cpu_millis") or 0),
            "cgroup": _opt_str(c.get("cgroup"))}


def session_details(d: Mapping[str, Any]) -> SessionDetails:
    de = d.get("definition") or {}
    definition = SessionDefinition(cwd=_name(de, "cwd") or "", env=_strs(de.get("env")), init=_strs(de.get("init")),
                                   restart=str(de.get("restart", "")), limits=_strs(de.get("limits")),
                                   root=_name(de, "root"), snapshot=_name(de, "snapshot"),
                                   setup=_opt_str(de.get("setup")), setup_keys=_names(de, "setup_keys"),
                                   sbsh_env=_opt_str(de.get("sbsh_env")),
                                   **_confinement(de.get("confinement") or {}))
    history = tuple(HistoryEntry(command=str(h.get("command", "")), exit_code=_opt_int(h.get("exit_code")),
                                 timed_out=bool(h.get("timed_out")), shell_restarted=bool(h.get("shell_restarted")),
                                 started_at=unix_time(h.get("started_at")), duration_ms=int(h.get("duration_ms") or 0))
                    for h in d.get("history") or ())
    return SessionDetails(session=session_info(d.get("session") or {}), definition=definition, history=history,
                          init_output=str(d.get("init_output", "")))


def process_info(d: Mapping[str, Any]) -> ProcessInfo:
    return ProcessInfo(id=int(d["id"]), name=str(d.get("name", "")), session=str(d.get("session", "")),
                       command=str(d.get("command", "")), state=str(d.get("state", "")), pid=_opt_int(d.get("pid")),
                       exit_code=_opt_int(d.get("exit_code")), signal=signal_number(d.get("signal")),
                       started_at=unix_time(d.get("started_at")) or 0.0, ended_at=unix_time(d.get("ended_at")),
                       error=str(d.get("error") or ""), log=_name(d, "log") or "")


def command_info(d: Mapping[str, Any]) -> CommandInfo:
    ref = str(d.get("id", ""))
    return CommandInfo(id=int(ref.lstrip("%") or 0), session=str(d.get("session", "")),
                       command=str(d.get("command", "")), state=str(d.get("state", "")),
                       detached=bool(d.get("detached")), pid=_opt_int(d.get("pid")),
                       exit_code=_opt_int(d.get("exit_code")), signal=signal_number(d.get("signal")),
                       timed_out=bool(d.get("timed_out")), cancelled=bool(d.get("cancelled")),
                       started_at=unix_time(d.get("started_at")), ended_at=unix_time(d.get("ended_at")))


def daemon_status(d: Mapping[str, Any]) -> DaemonStatus:
    c = d.get("counters") or {}
    counters = Counters(commands=int(c.get("commands") or 0), failed=int(c.get("failed") or 0),
                        timed_out=int(c.get("timed_out") or 0), shell_restarts=int(c.get("shell_restarts") or 0),
                        bytes_streamed=int(c.get("bytes_streamed") or 0), clients=int(c.get("clients") or 0))
    return DaemonStatus(pid=int(d.get("pid") or 0), version=str(d.get("version", "")),
                        uptime_ms=int(d.get("uptime_ms") or 0), socket=str(d.get("socket", "")), counters=counters,
                        sessions=tuple(session_info(s) for s in d.get("sessions") or ()),
                        descriptor_limit=int(d.get("descriptor_limit") or 0),
                        sessions_supported=int(d.get("sessions_supported") or 0))


def file_info(d: Mapping[str, Any]) -> FileInfo:
    return FileInfo(path=_name(d, "path") or "", type=str(d.get("type", "")), size=int(d.get("size") or 0),
                    mode=int(str(d.get("mode") or "0"), 8), mtime=unix_time(d.get("mtime")),
                    target=_name(d, "target"))


def file_edit(d: Mapping[str, Any]) -> FileEdit:
    return FileEdit(path=_name(d, "path") or "", replacements=int(d.get("replacements") or 0),
                    size=int(d.get("bytes") or 0), first_line=int(d.get("first_line") or 0))


def file_lines(d: Mapping[str, Any], data: bytes) -> FileLines:
    return FileLines(path=_name(d, "path") or "", data=data, start_line=int(d.get("start_line") or 0),
                     end_line=int(d.get("end_line") or 0), total_lines=int(d.get("total_lines") or 0),
                     truncated=bool(d.get("truncated")))


def _match(d: Mapping[str, Any]) -> FileMatch:
    text = str(d.get("text", ""))
    raw = d.get("text_base64")
    return FileMatch(path=_name(d, "path") or "", line=int(d.get("line") or 0), text=text,
                     data=base64.b64decode(str(raw)) if raw else text.encode("utf-8"))


def file_search(d: Mapping[str, Any]) -> FileSearch:
    return FileSearch(matches=tuple(_match(m) for m in sequence_of(d.get("matches"))),
                      files_searched=int(d.get("files_searched") or 0), files_skipped=int(d.get("files_skipped") or 0),
                      truncated=bool(d.get("truncated")), dir=_name(d, "dir") or "")


def kept_copy(d: Mapping[str, Any]) -> KeptCopy:
    return KeptCopy(session=str(d.get("session", "")), path=_name(d, "path") or "",
                    kept_at=unix_time(d.get("kept_at")), size_bytes=int(d.get("size_bytes") or 0))


def environment_info(d: Mapping[str, Any]) -> EnvironmentInfo:
    return EnvironmentInfo(hash=str(d.get("hash", "")), path=_name(d, "path") or "", setup=str(d.get("setup", "")),
                           keys=tuple(str(k) for k in d.get("keys") or ()), size_bytes=int(d.get("size_bytes") or 0),
                           created_at=unix_time(d.get("created_at")), last_used=unix_time(d.get("last_used")),
                           sessions=tuple(str(n) for n in d.get("sessions") or ()))


def _output(d: Mapping[str, Any], key: str) -> bytes:
    raw = d.get(key + "_base64")
    if raw:
        return base64.b64decode(str(raw))
    return str(d.get(key) or "").encode()


def _plan_command(c: Mapping[str, Any]) -> PlanCommand:
    return PlanCommand(command=str(c.get("command", "")), cwd=_opt_str(c.get("cwd")), env=_strs(c.get("env")),
                       timeout_ms=_opt_int(c.get("timeout_ms")), status=str(c.get("status", "")),
                       exit_code=_opt_int(c.get("exit_code")), signal=signal_number(c.get("signal")),
                       timed_out=bool(c.get("timed_out")), shell_restarted=bool(c.get("shell_restarted")),
                       stdout=_output(c, "stdout"), stderr=_output(c, "stderr"),
                       stdout_truncated=bool(c.get("stdout_truncated")),
                       stderr_truncated=bool(c.get("stderr_truncated")),
                       stdout_bytes=int(c.get("stdout_bytes") or 0), stderr_bytes=int(c.get("stderr_bytes") or 0),
                       stdout_file=_opt_str(c.get("stdout_file")), stderr_file=_opt_str(c.get("stderr_file")),
                       duration_ms=_opt_int(c.get("duration_ms")), started_at=unix_time(c.get("started_at")),
                       error=_opt_str(c.get("error")))


def plan_report(d: Mapping[str, Any], exit_status: int, text: str) -> PlanReport:
    r = d.get("reason")
    reason = None if not r else PlanReason(stage=_opt_str(r.get("stage")), command=_opt_int(r.get("command")),
                                           message=str(r.get("message", "")))
    stages = tuple(PlanStage(name=str(s.get("name", "")), expect=str(s.get("expect", "")),
                             status=str(s.get("status", "")),
                             commands=tuple(_plan_command(c) for c in s.get("commands") or ()))
                   for s in d.get("stages") or ())
    return PlanReport(status=str(d.get("status", "")), reason=reason, error=_opt_str(d.get("error")),
                      session=str(d.get("session", "")), session_kept=bool(d.get("session_kept")),
                      started_at=unix_time(d.get("started_at")), duration_ms=int(d.get("duration_ms") or 0),
                      stages=stages, exit_status=exit_status, json=text)


def plan_event(d: Mapping[str, Any], text: str) -> PlanEvent:
    to = d.get("timed_out")
    return PlanEvent(event=str(d.get("event", "")), time=unix_time(d.get("time")), stage=_opt_str(d.get("stage")),
                     stage_index=_opt_int(d.get("stage_index")), index=_opt_int(d.get("index")),
                     command=_opt_str(d.get("command")), status=_opt_str(d.get("status")),
                     exit_code=_opt_int(d.get("exit_code")), timed_out=None if to is None else bool(to), json=text)


def sequence_of(v: Any) -> Sequence[Mapping[str, Any]]:
    return list(v) if isinstance(v, list) else []
