"""sbsh: run commands in persistent bash sessions kept by sbshd.

A ctypes binding over libsbsh's C ABI (sbsh.h): the protocol has one implementation, in
libsbsh, for every language, and this package needs nothing beyond Python's standard
library.

    import sbsh
    with sbsh.Client() as c:
        build = c.session("build")
        build.exec("cd /tmp && export X=1")
        r = build.exec("pwd; echo $X", check=True)
        print(r.exit_code, r.text)            # 0 '/tmp\\n1\\n'

    async with sbsh.AsyncClient() as c:
        r = await c.exec("make", session="build", timeout=600)

The modules, by role: client (Client, Session, Process, Lease), aio (AsyncClient,
AsyncSession, AsyncProcess, AsyncLease), types (the records), errors (the exceptions). libsbsh is found through the
`lib` argument, else $SBSH_LIB, else beside this package, else the directory it was
installed in (cmake --install, the Debian package), else the system's loader.
"""
from ._lib import (ERR_INTERNAL, ERR_INVALID, ERR_IO, ERR_NOT_FOUND, ERR_PROTOCOL, ERR_REFUSED, ERR_TIMEOUT,
                   ERR_UNREACHABLE, OK)
from .aio import AsyncClient, AsyncLease, AsyncProcess, AsyncSession
from .client import Canceller, Client, Lease, OutputCallback, Process, Session, version
from .errors import (CommandFailed, CommandNotFound, CommandTimedOut, ConnectionLost, DaemonUnreachable, Error,
                     InvalidArgument, LeaseEnded, LibraryNotFound, NotFound, ProcessNotFound, Refused,
                     SessionNotFound, StateLost, Timeout)
from .types import (STDERR, STDOUT, CommandInfo, Counters, DaemonStatus, EnvironmentInfo, ExecResult, FileEdit,
                    FileInfo, FileLines, FileMatch, FileSearch, HistoryEntry, KeptCopy, Logs, OutputChunk, PlanCommand,
                    PlanEvent, PlanReason, PlanReport, PlanStage, ProcessInfo, SessionDefinition, SessionDetails,
                    SessionInfo)

__version__ = "0.1.0"

__all__ = [
    "Client", "Session", "Process", "Lease", "Canceller", "OutputCallback", "version",
    "AsyncClient", "AsyncSession", "AsyncProcess", "AsyncLease",
    "Error", "DaemonUnreachable", "ConnectionLost", "NotFound", "SessionNotFound", "ProcessNotFound",
    "CommandNotFound", "InvalidArgument", "Refused", "Timeout", "LeaseEnded", "CommandFailed", "CommandTimedOut",
    "StateLost",
    "LibraryNotFound",
    "ExecResult", "OutputChunk", "ProcessInfo", "CommandInfo", "Logs", "SessionInfo", "SessionDefinition", "HistoryEntry",
    "SessionDetails", "Counters", "DaemonStatus", "FileInfo", "FileEdit", "FileLines", "FileMatch", "FileSearch",
    "KeptCopy", "EnvironmentInfo", "PlanCommand",
    "PlanStage", "PlanReason", "PlanReport",
    "PlanEvent", "STDOUT", "STDERR",
    "OK", "ERR_UNREACHABLE", "ERR_REFUSED", "ERR_IO", "ERR_TIMEOUT", "ERR_INVALID", "ERR_INTERNAL", "ERR_PROTOCOL",
    "ERR_NOT_FOUND",
]
