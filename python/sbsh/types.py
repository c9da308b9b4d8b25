"""The records sbsh returns: frozen, slotted dataclasses, one per thing sbshd reports.

Times are Unix time in seconds (float), durations seconds unless a name says `_ms`; output
is bytes, exactly as the command wrote it, with `.text` helpers that decode UTF-8 (invalid
bytes become U+FFFD).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

# The records with a field table (ipc/messages.h) are generated from it, with their
# converters from the JSON form, into _records.py by the build (python/gen).
from ._convert import _exact, _name, _opt_int, _opt_str, _strs, sequence_of as sequence_of, signal_number, unix_time
from ._records import CommandInfo as CommandInfo
from ._records import Counters as Counters
from ._records import DaemonStatus as DaemonStatus
from ._records import EnvironmentInfo as EnvironmentInfo
from ._records import FileEdit as FileEdit
from ._records import FileInfo as FileInfo
from ._records import FileMatch as FileMatch
from ._records import FileSearch as FileSearch
from ._records import HistoryEntry as HistoryEntry
from ._records import KeptCopy as KeptCopy
from ._records import ProcessInfo as ProcessInfo
from ._records import SessionDefinition as SessionDefinition
from ._records import SessionDetails as SessionDetails
from ._records import SessionInfo as SessionInfo
from ._records import command_info as command_info
from ._records import daemon_status as daemon_status
from ._records import environment_info as environment_info
from ._records import file_edit as file_edit
from ._records import file_info as file_info
from ._records import file_search as file_search
from ._records import kept_copy as kept_copy
from ._records import process_info as process_info
from ._records import session_details as session_details
from ._records import session_info as session_info

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


def file_lines(d: Mapping[str, Any], data: bytes) -> FileLines:
    return FileLines(path=_name(d, "path") or "", data=data, start_line=int(d.get("start_line") or 0),
                     end_line=int(d.get("end_line") or 0), total_lines=int(d.get("total_lines") or 0),
                     truncated=bool(d.get("truncated")))


def _plan_command(c: Mapping[str, Any]) -> PlanCommand:
    return PlanCommand(command=str(c.get("command", "")), cwd=_opt_str(c.get("cwd")), env=_strs(c.get("env")),
                       timeout_ms=_opt_int(c.get("timeout_ms")), status=str(c.get("status", "")),
                       exit_code=_opt_int(c.get("exit_code")), signal=signal_number(c.get("signal")),
                       timed_out=bool(c.get("timed_out")), shell_restarted=bool(c.get("shell_restarted")),
                       stdout=_exact(c, "stdout"), stderr=_exact(c, "stderr"),
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
