"""The exceptions of sbsh: one tree under Error, so that a caller catches as narrowly as it
needs to.

    Error                         any failure of a request (code, reason, message)
    ├── DaemonUnreachable         no sbshd answers (and none could be started)
    │   └── ConnectionLost        the connection failed or sbshd went away mid-request
    ├── NotFound
    │   ├── SessionNotFound       no session of that name
    │   ├── ProcessNotFound       no background process of that id or name
    │   └── CommandNotFound       no kept command of that id
    ├── InvalidArgument           an argument, a session name or a plan is not valid
    ├── Refused                   sbshd refused the request for another reason (session_exists,
    │                             outside_root, shutting_down, ...: see `reason`)
    ├── Timeout (also TimeoutError)  a wait's deadline passed first
    ├── LeaseEnded                a lease's run: the lease is over (released, or ended by
    │                             another request queued on its session); the command did not run
    ├── CommandFailed             exec(check=True): the command did not succeed (.result)
    │   ├── CommandTimedOut (also Timeout)   ... because its timeout passed
    │   └── StateLost             ... because its shell was lost: it ran without the session's state
    └── LibraryNotFound           libsbsh could not be loaded

`code` is the C ABI's status (sbsh.h: ERR_*), `reason` the machine-readable reason
("invalid_session_name", "no_such_process", "session_exists", ...: sbsh-protocol(7),
ERROR CODES), `message` one line saying what was wrong and how to fix it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Type

if TYPE_CHECKING:
    from .types import ExecResult

__all__ = [
    "Error", "DaemonUnreachable", "ConnectionLost", "NotFound", "SessionNotFound", "ProcessNotFound",
    "CommandNotFound", "InvalidArgument", "Refused", "Timeout", "LeaseEnded", "CommandFailed", "CommandTimedOut",
    "StateLost", "LibraryNotFound",
]


class Error(Exception):
    """A failed request. code: the C ABI's status (one of sbsh.ERR_*); reason: the
    machine-readable reason; message: one line a user can act on."""

    def __init__(self, message: str, *, code: int = -6, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.message} ({self.reason})" if self.reason else self.message


class DaemonUnreachable(Error):
    """No sbshd answers on the socket, and none could be started (or autostart was off)."""


class ConnectionLost(DaemonUnreachable):
    """The connection failed or sbshd went away during the request; the client must be
    closed and a new one connected."""


class NotFound(Error):
    """No such session, background process or kept command."""


class SessionNotFound(NotFound):
    """No session of that name."""


class ProcessNotFound(NotFound):
    """No background process of that id or name."""


class CommandNotFound(NotFound):
    """No kept command of that id (never kept, expired, or sbshd restarted since)."""


class InvalidArgument(Error):
    """An argument is not valid: a session name, a timeout, a plan (the message names the
    field), a missing value."""


class Refused(Error):
    """sbshd refused the request; `reason` says why (session_exists, session_failed,
    outside_root, no_root, file_failed, shutting_down, ...)."""


class Timeout(Error, TimeoutError):
    """The deadline passed first (a process still runs after wait's timeout)."""


class LeaseEnded(Error):
    """Lease.run: the lease is over, so the command was not run (unless the message says the
    lease ended while it ran: then it may have run in part). It was released, or sbshd ended
    it because another request was queued on its session (another client's exec, a start,
    ...), or its shell ended. Only the lease is done: release it (a `with` block does) and
    the Client serves again; run the command with exec, or ask for a new lease. reason:
    "eof", or "protocol" when its socket carried something other than the shell's status,
    or "released" for a lease released here."""


class CommandFailed(Error):
    """exec(check=True): the command ran and did not succeed. `result` is its ExecResult,
    with its exit code and output."""

    def __init__(self, message: str, result: "ExecResult", *, code: int = 0, reason: str = "command_failed") -> None:
        super().__init__(message, code=code, reason=reason)
        self.result = result


class CommandTimedOut(CommandFailed, Timeout):
    """exec(check=True): the command's timeout passed and it was stopped."""


class StateLost(CommandFailed):
    """exec(check=True): the command's shell was lost (it died under the command, or had been
    replaced since the session's previous command), so the session's state (directory,
    variables) is not what earlier commands left."""


class LibraryNotFound(Error):
    """libsbsh could not be loaded (pass lib=, set SBSH_LIB, or install libsbsh), or it is
    older than this package."""


_BY_REASON: Dict[str, Type[Error]] = {
    "no_such_session": SessionNotFound,
    "no_such_process": ProcessNotFound,
    "no_such_command": CommandNotFound,
    "invalid_session_name": InvalidArgument,
    "bad_request": InvalidArgument,
    "bad_directory": InvalidArgument,
    "invalid_plan": InvalidArgument,
    "invalid_argument": InvalidArgument,
    "usage": InvalidArgument,
    "too_large": InvalidArgument,
    "timeout": Timeout,
}

_BY_CODE: Dict[int, Type[Error]] = {
    -1: DaemonUnreachable,  # ERR_UNREACHABLE
    -2: Refused,            # ERR_REFUSED
    -3: ConnectionLost,     # ERR_IO
    -4: Timeout,            # ERR_TIMEOUT
    -5: InvalidArgument,    # ERR_INVALID
    -6: Error,              # ERR_INTERNAL
    -7: ConnectionLost,     # ERR_PROTOCOL
    -8: NotFound,           # ERR_NOT_FOUND
}


def error_for(code: int, message: str, reason: str) -> Error:
    """The exception for a C ABI status and the reason that came with it."""
    cls: Type[Error] = Error
    if code in (-1, -3, -7):  # the connection itself: whatever the reason
        cls = _BY_CODE[code]
    else:
        cls = _BY_REASON.get(reason) or _BY_CODE.get(code) or Error
    return cls(message or reason or f"libsbsh failed with status {code}", code=code, reason=reason)
