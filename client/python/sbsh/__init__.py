"""sbsh: run commands in persistent bash sessions kept by sbshd.

A thin ctypes binding over libsbsh's C ABI (sbsh.h): the protocol has one implementation, in
libsbsh, for every language, and this module needs nothing beyond Python's standard library.

    import sbsh
    with sbsh.Client() as c:
        c.exec("cd /tmp && export X=1", session="work")
        r = c.exec("pwd; echo $X", session="work")
        print(r.exit_code, r.stdout)          # 0 b'/tmp\\n1\\n'

libsbsh.so is found through the `lib` argument, else $SBSH_LIB, else next to this file, else
the system's loader (libsbsh.so.0).

Threads: a Client serves one request at a time. Calls from several threads are serialized
by a lock (the connection is never used by two threads at once); for parallel commands,
open one Client per thread. While a call runs in C, the GIL is released.

Signals: while exec runs in the main thread, signals that have a Python handler (SIGINT
among them, so Ctrl-C) are forwarded to the command, as ssh does; the Python handler then
runs when exec returns (KeyboardInterrupt, for Ctrl-C). wait() without a timeout returns to
Python twice a second, so it can be interrupted too; logs(follow=True) cannot be.
"""
import ctypes
import ctypes.util
import json
import os
import signal as _signal
import threading
from datetime import datetime as _datetime
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

__all__ = [
    "Client", "ExecResult", "Process", "Logs", "Canceller", "Error", "version",
    "OK", "ERR_UNREACHABLE", "ERR_REFUSED", "ERR_IO", "ERR_TIMEOUT", "ERR_INVALID", "ERR_INTERNAL",
    "ERR_PROTOCOL", "ERR_NOT_FOUND", "STDOUT", "STDERR",
]

# Status codes of sbsh.h.
OK = 0
ERR_UNREACHABLE = -1
ERR_REFUSED = -2
ERR_IO = -3
ERR_TIMEOUT = -4
ERR_INVALID = -5
ERR_INTERNAL = -6
ERR_PROTOCOL = -7
ERR_NOT_FOUND = -8

STDOUT, STDERR = 1, 2

OutputCallback = Callable[[int, bytes], None]
EnvLike = Union[Mapping[str, str], Sequence[str], None]


class Error(Exception):
    """A failed request.

    code: one of the ERR_* constants (the negative status of the C ABI).
    message: one line saying what was wrong.
    reason: the machine-readable reason, e.g. "invalid_session_name", "no_such_process",
    "session_exists", "timeout", "unreachable".
    """

    def __init__(self, code: int, message: str, reason: str = ""):
        super().__init__(code, message, reason)
        self.code, self.message, self.reason = code, message, reason

    def __str__(self) -> str:
        return f"{self.message} ({self.reason})" if self.reason else self.message


@dataclass
class ExecResult:
    """How one command ended. exit_code is None when no process produced one (see error);
    signal is the number of the signal that ended it (then exit_code is 128 + signal)."""
    exit_code: Optional[int]
    signal: Optional[int]
    timed_out: bool
    shell_restarted: bool     # the shell ended: the session's state was lost
    cancelled: bool
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    duration: float           # seconds
    started_at: Optional[float]  # Unix time, seconds; None when it never started
    error: str = ""           # why exit_code is None, or other trouble
    ran: bool = True          # False: it certainly did not run (no shell took it): safe to retry
    generation: int = 0       # which shell ran it: changes whenever the session's shell is replaced
    state_lost: bool = False  # the shell was replaced since the session's previous command
    state_lost_reason: str = ""
    stdout_omitted: int = 0   # bytes left out between the first and the last part kept
    stderr_omitted: int = 0
    running: bool = False     # it still runs (detach_after, or await_command's timeout)
    command_id: int = 0       # sbshd's id for a kept command (keep, detach_after); 0: not kept

    @property
    def ok(self) -> bool:
        """The command ran and succeeded: exit code 0, not timed out, not cancelled, its shell
        not lost."""
        return (self.ran and self.exit_code == 0 and not self.timed_out and not self.cancelled
                and not self.shell_restarted)


@dataclass
class Process:
    """A background process."""
    id: int
    name: str
    session: str
    command: str
    state: str                # starting | running | exited | killed | failed | lost
    pid: Optional[int]        # also its process group
    exit_code: Optional[int]
    signal: Optional[int]
    started_at: float         # Unix time, seconds
    ended_at: Optional[float]
    error: str
    log: str                  # its stdout log (stderr: the same with .err)


@dataclass
class Logs:
    """What logs() collected (when no on_output was given), and the process's state."""
    stdout: bytes
    stderr: bytes
    process: Optional[Process]


# ---- Loading libsbsh -------------------------------------------------------------------------

_OUTPUT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t)


class _ExecOpts(ctypes.Structure):
    """sbsh_exec_opts, version 2 (same fields, same order as sbsh.h)."""
    _fields_ = [
        ("version", ctypes.c_uint),
        ("command", ctypes.c_char_p),
        ("session", ctypes.c_char_p),
        ("cwd", ctypes.c_char_p),
        ("env", ctypes.POINTER(ctypes.c_char_p)),
        ("env_count", ctypes.c_size_t),
        ("timeout_ms", ctypes.c_int64),
        ("grace_ms", ctypes.c_int64),
        ("stdin_data", ctypes.c_char_p),
        ("stdin_len", ctypes.c_size_t),
        ("stdin_fd", ctypes.c_int),
        ("on_output", _OUTPUT_FN),
        ("user", ctypes.c_void_p),
        ("stdout_fd", ctypes.c_int),
        ("stderr_fd", ctypes.c_int),
        ("output_limit", ctypes.c_size_t),
        ("cancel_fd", ctypes.c_int),
        ("session_cwd", ctypes.c_char_p),
        ("detach_after_ms", ctypes.c_int64),
        ("keep", ctypes.c_int),
    ]


class _SessionSpec(ctypes.Structure):
    """sbsh_session_spec, version 2 (same fields, same order as sbsh.h)."""
    _fields_ = [
        ("version", ctypes.c_uint),
        ("name", ctypes.c_char_p),
        ("cwd", ctypes.c_char_p),
        ("env", ctypes.POINTER(ctypes.c_char_p)),
        ("env_count", ctypes.c_size_t),
        ("init", ctypes.POINTER(ctypes.c_char_p)),
        ("init_count", ctypes.c_size_t),
        ("restart", ctypes.c_char_p),
        ("limits", ctypes.POINTER(ctypes.c_char_p)),
        ("limit_count", ctypes.c_size_t),
        ("snapshot", ctypes.c_char_p),
        ("root", ctypes.c_char_p),
    ]


_EVENT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t)


class _RunOpts(ctypes.Structure):
    """sbsh_run_opts, version 1 (same fields, same order as sbsh.h)."""
    _fields_ = [
        ("version", ctypes.c_uint),
        ("session", ctypes.c_char_p),
        ("keep_session", ctypes.c_int),
        ("output_limit", ctypes.c_size_t),
        ("artifacts_dir", ctypes.c_char_p),
        ("report_path", ctypes.c_char_p),
        ("events_path", ctypes.c_char_p),
        ("events_fd", ctypes.c_int),
        ("cancel_fd", ctypes.c_int),
        ("on_event", _EVENT_FN),
        ("user", ctypes.c_void_p),
    ]


def _prototypes() -> Dict[str, tuple]:
    P, S, I, I64, U64, SZ = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int64, ctypes.c_uint64,
                             ctypes.c_size_t)
    PP, SA, BUF = ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char)
    return {  # name: (restype, argtypes)
        "sbsh_error_name": (S, [I]),
        "sbsh_last_error": (S, [P]),
        "sbsh_last_error_code": (S, [P]),
        "sbsh_version": (S, []),
        "sbsh_free": (None, [P]),
        "sbsh_connect_ex": (I, [S, I, S, PP]),
        "sbsh_connect_dial": (I, [SA, PP]),
        "sbsh_connect_host": (I, [S, S, I, PP]),
        "sbsh_close": (None, [P]),
        "sbsh_socket_path": (S, [P]),
        "sbsh_canceller_new": (I, [PP]),
        "sbsh_canceller_fd": (I, [P]),
        "sbsh_canceller_cancel": (None, [P]),
        "sbsh_canceller_signal": (None, [P, I]),
        "sbsh_canceller_reset": (None, [P]),
        "sbsh_canceller_free": (None, [P]),
        "sbsh_exec_opts_init": (None, [ctypes.POINTER(_ExecOpts)]),
        "sbsh_exec": (I, [P, ctypes.POINTER(_ExecOpts), PP]),
        "sbsh_result_has_exit_code": (I, [P]),
        "sbsh_result_exit_code": (I, [P]),
        "sbsh_result_signal": (I, [P]),
        "sbsh_result_timed_out": (I, [P]),
        "sbsh_result_cancelled": (I, [P]),
        "sbsh_result_shell_restarted": (I, [P]),
        "sbsh_result_ran": (I, [P]),
        "sbsh_result_stdout": (BUF, [P, ctypes.POINTER(SZ)]),
        "sbsh_result_stderr": (BUF, [P, ctypes.POINTER(SZ)]),
        "sbsh_result_stdout_truncated": (I, [P]),
        "sbsh_result_stderr_truncated": (I, [P]),
        "sbsh_result_stdout_omitted": (U64, [P]),
        "sbsh_result_stderr_omitted": (U64, [P]),
        "sbsh_result_running": (I, [P]),
        "sbsh_result_command_id": (U64, [P]),
        "sbsh_await_command": (I, [P, U64, I64, SZ, PP]),
        "sbsh_kill_command": (I, [P, U64, I, PP]),
        "sbsh_result_duration_us": (U64, [P]),
        "sbsh_result_started_at_ms": (I64, [P]),
        "sbsh_result_generation": (U64, [P]),
        "sbsh_result_state_lost": (I, [P]),
        "sbsh_result_state_lost_reason": (S, [P]),
        "sbsh_result_error": (S, [P]),
        "sbsh_result_free": (None, [P]),
        "sbsh_session_spec_init": (None, [ctypes.POINTER(_SessionSpec)]),
        "sbsh_session_create_spec": (I, [P, ctypes.POINTER(_SessionSpec)]),
        "sbsh_sessions_json": (I, [P, PP]),
        "sbsh_session_show_json": (I, [P, S, PP]),
        "sbsh_session_remove": (I, [P, S]),
        "sbsh_session_restart": (I, [P, S]),
        "sbsh_start": (I, [P, S, S, S, S, SA, SZ, ctypes.POINTER(U64)]),
        "sbsh_processes_json": (I, [P, I, PP]),
        "sbsh_kill": (I, [P, S, I, PP]),
        "sbsh_wait": (I, [P, S, I64, PP]),
        "sbsh_logs": (I, [P, S, I, U64, I, I, _OUTPUT_FN, P, PP]),
        "sbsh_proc_id": (U64, [P]),
        "sbsh_proc_name": (S, [P]),
        "sbsh_proc_session": (S, [P]),
        "sbsh_proc_command": (S, [P]),
        "sbsh_proc_state": (S, [P]),
        "sbsh_proc_pid": (I64, [P]),
        "sbsh_proc_has_exit_code": (I, [P]),
        "sbsh_proc_exit_code": (I, [P]),
        "sbsh_proc_signal": (I, [P]),
        "sbsh_proc_started_at_ms": (I64, [P]),
        "sbsh_proc_ended_at_ms": (I64, [P]),
        "sbsh_proc_error": (S, [P]),
        "sbsh_proc_log_path": (S, [P]),
        "sbsh_proc_free": (None, [P]),
        "sbsh_file_write": (I, [P, S, S, ctypes.c_char_p, SZ, I, I]),
        "sbsh_file_write_fd": (I, [P, S, S, I, I, I, ctypes.POINTER(U64)]),
        "sbsh_file_read": (I, [P, S, S, U64, I64, PP, ctypes.POINTER(SZ)]),
        "sbsh_file_read_fd": (I, [P, S, S, I, U64, I64, ctypes.POINTER(U64)]),
        "sbsh_file_stat_json": (I, [P, S, S, PP]),
        "sbsh_file_list_json": (I, [P, S, S, I, PP]),
        "sbsh_file_remove": (I, [P, S, S, I]),
        "sbsh_file_mkdir": (I, [P, S, S, I]),
        "sbsh_file_move": (I, [P, S, S, S]),
        "sbsh_status_json": (I, [P, PP]),
        "sbsh_shutdown": (I, [P]),
        "sbsh_shutdown_keep_sessions": (I, [P]),
        "sbsh_run_opts_init": (None, [ctypes.POINTER(_RunOpts)]),
        "sbsh_plan_check": (I, [S, SZ, S]),
        "sbsh_run_plan": (I, [P, S, SZ, S, ctypes.POINTER(_RunOpts), PP, ctypes.POINTER(I)]),
        "sbsh_run_plan_file": (I, [P, S, ctypes.POINTER(_RunOpts), PP, ctypes.POINTER(I)]),
    }


_libs: Dict[str, ctypes.CDLL] = {}
_libs_lock = threading.Lock()


def _candidates(lib: Optional[str]) -> List[str]:
    if lib:
        return [lib]
    if os.environ.get("SBSH_LIB"):
        return [os.environ["SBSH_LIB"]]
    here = os.path.dirname(os.path.abspath(__file__))
    out = [p for p in (os.path.join(here, "libsbsh.so"), os.path.join(here, "libsbsh.so.0")) if os.path.exists(p)]
    out.append("libsbsh.so.0")
    found = ctypes.util.find_library("sbsh")
    if found:
        out.append(found)
    return out


def _load(lib: Optional[str] = None) -> ctypes.CDLL:
    """Loads libsbsh once per path and declares every function's prototype."""
    with _libs_lock:
        errors = []
        for path in _candidates(lib):
            if path in _libs:
                return _libs[path]
            try:
                L = ctypes.CDLL(path)
            except OSError as e:
                errors.append(str(e))
                continue
            for name, (res, args) in _prototypes().items():
                try:
                    f = getattr(L, name)
                except AttributeError:
                    raise Error(ERR_INVALID, f"{path} lacks {name}: it is an older libsbsh than this module",
                                "library_mismatch") from None
                f.restype, f.argtypes = res, args
            _libs[path] = L
            return L
        where = "; ".join(errors) or "not found"
        raise Error(ERR_INVALID, f"cannot load libsbsh ({where}): pass lib=, set SBSH_LIB, or install libsbsh",
                    "no_library")


def version(lib: Optional[str] = None) -> str:
    """libsbsh's version, e.g. "0.1.0"."""
    return _load(lib).sbsh_version().decode()


# ---- Helpers ---------------------------------------------------------------------------------

def _enc(s: Union[str, bytes, None]) -> Optional[bytes]:
    if s is None:
        return None
    return s if isinstance(s, bytes) else os.fsencode(s) if isinstance(s, os.PathLike) else str(s).encode()


def _str_array(items: Sequence[Union[str, bytes]]):
    """A char*[] (kept alive by the returned array) and its length."""
    enc = [_enc(x) for x in items]
    return (ctypes.c_char_p * max(1, len(enc)))(*enc), len(enc)


def _env_list(env: EnvLike) -> List[Union[str, bytes]]:
    if env is None:
        return []
    if isinstance(env, Mapping):
        return [f"{k}={v}" for k, v in env.items()]
    if isinstance(env, (str, bytes)):
        raise TypeError("env takes a mapping or a sequence of 'NAME=VALUE' strings, not one string")
    return list(env)


def _ms(seconds: Optional[float], what: str) -> int:
    """Seconds to whole milliseconds (at least 1 for any positive value); None: 0."""
    if seconds is None:
        return 0
    if seconds <= 0:
        raise ValueError(f"{what} must be a positive number of seconds, or None")
    return max(1, int(round(seconds * 1000)))


def _signum(sig: Union[int, str]) -> int:
    if isinstance(sig, str):
        name = sig.upper()
        return int(_signal.Signals[name if name.startswith("SIG") else "SIG" + name])
    return int(sig)


def _take_json(L, out: ctypes.c_void_p) -> Any:
    try:
        return json.loads(ctypes.string_at(out).decode())
    finally:
        L.sbsh_free(out)


def _unix_time(rfc3339: Optional[str]) -> Optional[float]:
    """The listings' times ("2026-11-22T13:58:50.123Z") as Unix time in seconds."""
    if rfc3339 is None:
        return None
    return _datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def _signal_number(name: Optional[str]) -> Optional[int]:
    """The listings' signal names ("SIGTERM", or "SIG40" for one without a name) as numbers."""
    if name is None:
        return None
    try:
        return int(_signal.Signals[name])
    except KeyError:
        return int(name[3:]) if name[3:].isdigit() else None


def _process_from_json(d: Mapping[str, Any]) -> Process:
    return Process(id=d["id"], name=d.get("name", ""), session=d.get("session", ""), command=d.get("command", ""),
                   state=d.get("state", ""), pid=d.get("pid"), exit_code=d.get("exit_code"),
                   signal=_signal_number(d.get("signal")), started_at=_unix_time(d.get("started_at")) or 0.0,
                   ended_at=_unix_time(d.get("ended_at")), error=d.get("error") or "", log=d.get("log", ""))


def _process_from_handle(L, p) -> Process:
    dec = lambda b: b.decode("utf-8", "replace")  # noqa: E731
    pid, ended = L.sbsh_proc_pid(p), L.sbsh_proc_ended_at_ms(p)
    return Process(id=L.sbsh_proc_id(p), name=dec(L.sbsh_proc_name(p)), session=dec(L.sbsh_proc_session(p)),
                   command=dec(L.sbsh_proc_command(p)), state=dec(L.sbsh_proc_state(p)), pid=pid or None,
                   exit_code=L.sbsh_proc_exit_code(p) if L.sbsh_proc_has_exit_code(p) else None,
                   signal=L.sbsh_proc_signal(p) or None, started_at=L.sbsh_proc_started_at_ms(p) / 1e3,
                   ended_at=ended / 1e3 if ended else None, error=dec(L.sbsh_proc_error(p)),
                   log=dec(L.sbsh_proc_log_path(p)))


class _CallbackGuard:
    """Wraps a Python callback for C: an exception in it must not vanish inside ctypes. The
    first one is kept (and `stop` is called, to end the command or run early); it is raised
    once the C call returns. An output callback by default; with c_type and adapt (which
    turns the C arguments after `user` into the Python ones), any other."""

    def __init__(self, fn: Callable[..., None], stop: Optional[Callable[[], None]] = None,
                 c_type: Any = _OUTPUT_FN, adapt: Optional[Callable[..., tuple]] = None):
        self.error: Optional[BaseException] = None
        if adapt is None:
            adapt = lambda stream, data, length: (stream, ctypes.string_at(data, length))  # noqa: E731

        def call(_user, *args):
            if self.error is not None:
                return
            try:
                fn(*adapt(*args))
            except BaseException as e:  # noqa: B902 - KeyboardInterrupt included
                self.error = e
                if stop is not None:
                    stop()
        self.c_fn = c_type(call)

    def reraise(self) -> None:
        if self.error is not None:
            raise self.error


class Canceller:
    """Stops (cancel) or signals (signal) a running exec from another thread. Pass it to
    exec(canceller=...). A request made while no exec runs applies to the next one; reset()
    discards it."""

    def __init__(self, lib: Optional[str] = None):
        self._lib = _load(lib)
        self._h = ctypes.c_void_p()
        rc = self._lib.sbsh_canceller_new(ctypes.byref(self._h))
        if rc != OK:
            raise Error(rc, self._lib.sbsh_last_error(None).decode(), self._lib.sbsh_last_error_code(None).decode())

    def fileno(self) -> int:
        return self._lib.sbsh_canceller_fd(self._h)

    def cancel(self) -> None:
        """Stops the command: SIGTERM to its group, SIGKILL after the grace period."""
        self._lib.sbsh_canceller_cancel(self._h)

    def signal(self, sig: Union[int, str]) -> None:
        """Delivers one signal to the running command."""
        self._lib.sbsh_canceller_signal(self._h, _signum(sig))

    def reset(self) -> None:
        self._lib.sbsh_canceller_reset(self._h)

    def close(self) -> None:
        if self._h:
            self._lib.sbsh_canceller_free(self._h)
            self._h = ctypes.c_void_p()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class _SignalForwarder:
    """While exec runs in the main thread, Python's C-level signal handler writes each
    signal's number to a wakeup descriptor. Pointing it at the pipe that libsbsh reads as
    the exec's cancel_fd forwards the signal to the command (a byte N means: deliver signal
    N), and Python still runs its own handler once exec returns. Used only when no other
    wakeup descriptor is set (asyncio sets one) and only in the main thread."""

    def __init__(self):
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)
        os.set_blocking(self.w, False)

    def drain(self) -> None:
        try:
            while os.read(self.r, 256):
                pass
        except BlockingIOError:
            pass

    def stop_command(self) -> None:
        try:
            os.write(self.w, b"\0")  # 0: stop it (SIGTERM, then SIGKILL)
        except OSError:
            pass

    def install(self) -> Optional[int]:
        """Points the wakeup fd here; returns the previous one (to restore), or None when it
        was not replaced."""
        if threading.current_thread() is not threading.main_thread():
            return None
        try:
            prev = _signal.set_wakeup_fd(self.w)
        except ValueError:
            return None
        if prev != -1:  # someone else's: put it back and do not forward
            _signal.set_wakeup_fd(prev)
            return None
        return prev

    def close(self) -> None:
        for fd in (self.r, self.w):
            try:
                os.close(fd)
            except OSError:
                pass


class _Interruption:
    """How a long call (exec, run_plan) is stopped: through the caller's Canceller, or else
    by the signals that _SignalForwarder forwards while the call runs in C. `fd` goes in the
    call's cancel_fd; `stop()` ends the call early (when a callback raised); `with` covers the
    C call itself, so that the wakeup descriptor is restored as soon as it returns, also when a
    signal's Python handler raises (KeyboardInterrupt) at that moment."""

    def __init__(self, client: "Client", canceller: Optional["Canceller"]):
        self._fwd: Optional[_SignalForwarder] = None
        self._prev: Optional[int] = None
        if canceller is not None:
            self.fd, self.stop = canceller.fileno(), canceller.cancel
            return
        if client._fwd is None:
            client._fwd = _SignalForwarder()
        self._fwd = client._fwd
        self._fwd.drain()
        self.fd, self.stop = self._fwd.r, self._fwd.stop_command

    def __enter__(self) -> "_Interruption":
        self._prev = self._fwd.install() if self._fwd is not None else None
        return self

    def __exit__(self, *exc) -> None:
        if self._prev is not None:
            _signal.set_wakeup_fd(self._prev)
            self._prev = None


# ---- The client ------------------------------------------------------------------------------

class Client:
    """One connection to sbshd.

    socket: the socket path (None: $SBSH_SOCKET, else $XDG_RUNTIME_DIR/sbsh/sbshd.sock, else
    /tmp/sbsh-$UID/sbshd.sock). autostart: start sbshd when none answers. lib: the path of
    libsbsh.so. daemon: the sbshd program to start (None: sbshd on PATH).

    sbshd on another host: host="ssh://[USER@]HOST[:PORT]" (socket and autostart then apply
    over there), or dial=[program, args...] whose stdin and stdout lead to `sbsh dial-stdio`
    where sbshd runs, such as ["kubectl", "exec", "-i", "POD", "--", "sbsh", "dial-stdio"].
    """

    def __init__(self, socket: Optional[str] = None, autostart: bool = True, lib: Optional[str] = None,
                 daemon: Optional[str] = None, host: Optional[str] = None,
                 dial: Optional[Sequence[str]] = None):
        self._lib = _load(lib)
        self._conn = ctypes.c_void_p()
        self._lock = threading.RLock()
        self._depth = 0
        self._fwd: Optional[_SignalForwarder] = None
        if host is not None and dial is not None:
            raise Error(ERR_INVALID, "host and dial both say how to reach sbshd: give one", "usage")
        if dial is not None:
            argv = (ctypes.c_char_p * (len(dial) + 1))(*[_enc(a) for a in dial], None)
            rc = self._lib.sbsh_connect_dial(argv, ctypes.byref(self._conn))
        elif host is not None:
            rc = self._lib.sbsh_connect_host(_enc(host), _enc(socket), int(bool(autostart)), ctypes.byref(self._conn))
        else:
            rc = self._lib.sbsh_connect_ex(_enc(socket), int(bool(autostart)), _enc(daemon), ctypes.byref(self._conn))
        if rc != OK:
            raise self._error(rc, None)

    # -- plumbing --

    def _error(self, rc: int, conn) -> Error:
        L = self._lib
        return Error(rc, L.sbsh_last_error(conn).decode("utf-8", "replace"),
                     L.sbsh_last_error_code(conn).decode("utf-8", "replace"))

    def _call(self, fn, *args) -> None:
        """Calls a C function that takes the connection first; raises Error on failure."""
        rc = fn(self._conn, *args)
        if rc != OK:
            raise self._error(rc, self._conn)

    class _Busy:
        def __init__(self, client: "Client"):
            self.c = client

        def __enter__(self):
            c = self.c
            c._lock.acquire()
            if c._depth > 0:
                c._lock.release()
                raise Error(ERR_INVALID, "an output callback called back into the Client that is running it; "
                            "use another Client", "reentrant_call")
            if not c._conn:
                c._lock.release()
                raise Error(ERR_INVALID, "the Client is closed", "closed")
            c._depth += 1

        def __exit__(self, *exc):
            self.c._depth -= 1
            self.c._lock.release()

    def _busy(self) -> "_Busy":
        return Client._Busy(self)

    def close(self) -> None:
        with self._lock:
            if self._conn:
                self._lib.sbsh_close(self._conn)
                self._conn = ctypes.c_void_p()
            if self._fwd is not None:
                self._fwd.close()
                self._fwd = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @property
    def socket_path(self) -> str:
        return self._lib.sbsh_socket_path(self._conn).decode()

    # -- exec --

    def exec(self, command: Union[str, bytes], session: Optional[str] = None, cwd: Optional[str] = None,
             env: EnvLike = None, timeout: Optional[float] = None,
             stdin: Union[bytes, bytearray, memoryview, str, int, Any, None] = None,
             on_output: Optional[OutputCallback] = None, output_limit: Optional[int] = None,
             canceller: Optional[Canceller] = None, grace: Optional[float] = None,
             detach_after: Optional[float] = None, keep: bool = False) -> ExecResult:
        """Runs one command in a session (None: "default") and waits for it.

        cwd, env (a mapping or "NAME=VALUE" strings): for this command only (a subshell).
        timeout: seconds; the command's process group is stopped when it passes.
        stdin: bytes (or str, UTF-8) to feed, or a file descriptor / object with fileno() to
        read until EOF; None: /dev/null.
        on_output(stream, data): receives output as it arrives (stream STDOUT or STDERR);
        then the result's stdout and stderr are empty. If it raises, the command is stopped
        and the exception is raised here.
        output_limit: bytes kept per stream (default 16 MiB): of a longer stream its first
        and last half, with stdout_omitted counting what was left out.
        canceller: a Canceller to stop the command from another thread.
        keep: sbshd keeps the output and result under result.command_id for an hour
        (await_command, kill_command). detach_after: seconds (implies keep); a command still
        running then goes on in the session and the result has running True, its command_id
        and the output so far.

        Raises Error when the request is refused (bad session name, ...) or the connection
        fails; a command that ran always gives an ExecResult, whatever its exit status.
        """
        L = self._lib
        o = _ExecOpts()
        L.sbsh_exec_opts_init(ctypes.byref(o))
        o.command = _enc(command)
        o.session, o.cwd = _enc(session), _enc(cwd)
        if env:
            env_arr, o.env_count = _str_array(_env_list(env))
            o.env = ctypes.cast(env_arr, ctypes.POINTER(ctypes.c_char_p))
        o.timeout_ms, o.grace_ms = _ms(timeout, "timeout"), _ms(grace, "grace")
        if stdin is not None:
            if isinstance(stdin, (bytes, bytearray, memoryview, str)):
                data = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
                o.stdin_data, o.stdin_len = data, len(data)
            else:
                o.stdin_fd = stdin if isinstance(stdin, int) else stdin.fileno()
        if output_limit is not None:
            if output_limit <= 0:
                raise ValueError("output_limit must be positive")
            o.output_limit = output_limit
        o.detach_after_ms, o.keep = _ms(detach_after, "detach_after"), int(keep)

        with self._busy():
            stop = _Interruption(self, canceller)
            guard = _CallbackGuard(on_output, stop.stop) if on_output is not None else None
            if guard is not None:
                o.on_output = guard.c_fn
            o.cancel_fd = stop.fd
            r = ctypes.c_void_p()
            try:
                with stop:
                    rc = L.sbsh_exec(self._conn, ctypes.byref(o), ctypes.byref(r))
                if rc != OK:
                    raise self._error(rc, self._conn)
                if guard is not None:
                    guard.reraise()
                return self._result(r)
            finally:
                L.sbsh_result_free(r)

    def _result(self, r) -> ExecResult:
        L = self._lib
        n = ctypes.c_size_t()
        out = L.sbsh_result_stdout(r, ctypes.byref(n))
        out = ctypes.string_at(out, n.value) if n.value else b""
        err = L.sbsh_result_stderr(r, ctypes.byref(n))
        err = ctypes.string_at(err, n.value) if n.value else b""
        return ExecResult(
            L.sbsh_result_exit_code(r) if L.sbsh_result_has_exit_code(r) else None,
            L.sbsh_result_signal(r) or None,
            L.sbsh_result_timed_out(r) != 0,
            L.sbsh_result_shell_restarted(r) != 0,
            L.sbsh_result_cancelled(r) != 0,
            out, err,
            L.sbsh_result_stdout_truncated(r) != 0,
            L.sbsh_result_stderr_truncated(r) != 0,
            L.sbsh_result_duration_us(r) / 1e6,
            L.sbsh_result_started_at_ms(r) / 1e3 if L.sbsh_result_started_at_ms(r) else None,
            L.sbsh_result_error(r).decode("utf-8", "replace"),
            L.sbsh_result_ran(r) != 0,
            L.sbsh_result_generation(r),
            L.sbsh_result_state_lost(r) != 0,
            L.sbsh_result_state_lost_reason(r).decode("utf-8", "replace"),
            L.sbsh_result_stdout_omitted(r),
            L.sbsh_result_stderr_omitted(r),
            L.sbsh_result_running(r) != 0,
            L.sbsh_result_command_id(r))

    def await_command(self, command_id: int, timeout: Optional[float] = None,
                      output_limit: Optional[int] = None) -> ExecResult:
        """Waits for a kept command (exec's keep or detach_after) to end, at most timeout
        seconds (None: no limit), and returns its result with its output; running is True,
        with the output so far, when the timeout passed first."""
        return self._kept_call("sbsh_await_command", command_id, _ms(timeout, "timeout"), output_limit or 0)

    def kill_command(self, command_id: int, sig: int = 0) -> ExecResult:
        """Stops a kept command as a timeout does (sig first, SIGTERM when 0; the shell keeps
        its state) and returns its result once it has ended, without its output."""
        return self._kept_call("sbsh_kill_command", command_id, sig)

    def _kept_call(self, fn: str, *args: Any) -> ExecResult:
        r = ctypes.c_void_p()
        with self._busy():
            try:
                rc = getattr(self._lib, fn)(self._conn, *args, ctypes.byref(r))
                if rc != OK:
                    raise self._error(rc, self._conn)
                return self._result(r)
            finally:
                self._lib.sbsh_result_free(r)

    # -- sessions --

    def create_session(self, name: str, cwd: Optional[str] = None, env: EnvLike = None,
                       init: Optional[Sequence[str]] = None, restart: str = "always",
                       limits: Optional[Sequence[str]] = None, snapshot: Optional[str] = None,
                       root: Optional[str] = None) -> None:
        """Defines a session: every new shell of it starts in cwd (None: this process's
        directory) with env and the resource `limits` ("NAME=VALUE" as `sbsh session create
        --limit`, e.g. "nofile=256" or "as=2G"), runs the init commands first, and is
        restarted per `restart` ("always", "on-failure", "never"). With `snapshot` (a
        directory; not with cwd), sbshd first copies it for the session, whose shells start
        in the copy; remove_session deletes it. With `root` (a directory; not with snapshot),
        the session is confined to it: its shells start there (a relative cwd is taken from
        it) with SBSH_ROOT set, and exec's cwd must lie beneath it (a snapshot session's
        root is its copy). The same definition again is a no-op; a
        different one raises Error (reason "session_exists")."""
        spec = _SessionSpec()
        self._lib.sbsh_session_spec_init(ctypes.byref(spec))
        keep = [_str_array(_env_list(env)), _str_array(list(init or [])), _str_array(list(limits or []))]
        spec.name, spec.cwd, spec.restart = _enc(name), _enc(cwd), _enc(restart)
        spec.env, spec.env_count = keep[0]
        spec.init, spec.init_count = keep[1]
        spec.limits, spec.limit_count = keep[2]
        if snapshot is not None:
            spec.snapshot = _enc(snapshot)
        if root is not None:
            spec.root = _enc(root)
        with self._busy():
            self._call(self._lib.sbsh_session_create_spec, ctypes.byref(spec))

    def sessions(self) -> List[Dict[str, Any]]:
        """The sessions, as dicts with the fields of `sbsh session ls --json` (sbsh(1)): name,
        state, shell_pid, wrapper_pid, restarts, queued, commands, cwd, restart, uptime_ms,
        started_at, running, running_ms, error."""
        out = ctypes.c_void_p()
        with self._busy():
            self._call(self._lib.sbsh_sessions_json, ctypes.byref(out))
        return _take_json(self._lib, out)

    def session(self, name: str) -> Dict[str, Any]:
        """One session in detail, as `sbsh session show NAME --json`: session (as in
        sessions()), definition (cwd, env, init, restart, limits), history (the last commands) and
        init_output."""
        out = ctypes.c_void_p()
        with self._busy():
            self._call(self._lib.sbsh_session_show_json, _enc(name), ctypes.byref(out))
        return _take_json(self._lib, out)

    def remove_session(self, name: str) -> None:
        """Removes a session; returns once its shell and wrapper are gone."""
        with self._busy():
            self._call(self._lib.sbsh_session_remove, _enc(name))

    def restart_session(self, name: str) -> None:
        with self._busy():
            self._call(self._lib.sbsh_session_restart, _enc(name))

    # -- background processes --

    def start(self, command: str, session: Optional[str] = None, name: Optional[str] = None,
              cwd: Optional[str] = None, env: EnvLike = None) -> int:
        """Starts a background process; returns its id. Refer to it later by id or name."""
        envs, ne = _str_array(_env_list(env))
        proc_id = ctypes.c_uint64()
        with self._busy():
            self._call(self._lib.sbsh_start, _enc(command), _enc(session), _enc(name), _enc(cwd), envs, ne,
                       ctypes.byref(proc_id))
        return proc_id.value

    def processes(self, include_finished: bool = False) -> List[Process]:
        out = ctypes.c_void_p()
        with self._busy():
            self._call(self._lib.sbsh_processes_json, int(bool(include_finished)), ctypes.byref(out))
        return [_process_from_json(d) for d in _take_json(self._lib, out)]

    def _proc_call(self, fn, *args) -> Process:
        p = ctypes.c_void_p()
        with self._busy():
            self._call(fn, *args, ctypes.byref(p))
        try:
            return _process_from_handle(self._lib, p)
        finally:
            self._lib.sbsh_proc_free(p)

    def kill(self, proc: Union[int, str], signal: Union[int, str] = _signal.SIGTERM) -> Process:
        """Signals the process's whole tree. With SIGTERM or SIGKILL, returns once every process
        of it is gone (SIGTERM escalates to SIGKILL after 2 s); with another signal, once it has
        ended or after 1 s with state "running" if it survived the signal."""
        return self._proc_call(self._lib.sbsh_kill, _enc(str(proc)), _signum(signal))

    def wait(self, proc: Union[int, str], timeout: Optional[float] = None) -> Process:
        """Waits for the process to end and returns its final state. Raises Error with code
        ERR_TIMEOUT when the timeout (seconds) passes first."""
        if timeout is not None:
            return self._proc_call(self._lib.sbsh_wait, _enc(str(proc)), _ms(timeout, "timeout"))
        # Without a limit, wait in slices so that Python's signal handlers (Ctrl-C) run.
        while True:
            try:
                return self._proc_call(self._lib.sbsh_wait, _enc(str(proc)), 500)
            except Error as e:
                if e.code != ERR_TIMEOUT:
                    raise

    def logs(self, proc: Union[int, str], follow: bool = False, tail: int = 0, stdout: bool = True,
             stderr: bool = True, on_output: Optional[OutputCallback] = None,
             canceller: Optional["Canceller"] = None) -> Logs:
        """The process's logged output. follow: keep streaming until it ends, or until
        canceller.cancel() (from another thread; the process goes on). tail: only the last N
        lines of each stream. With on_output(stream, data), chunks go there as they come and
        the returned Logs has empty stdout and stderr."""
        chunks: Dict[int, List[bytes]] = {STDOUT: [], STDERR: []}
        streams = (STDOUT if stdout else 0) | (STDERR if stderr else 0)
        if streams == 0:
            raise ValueError("logs: ask for stdout, stderr or both")
        guard = _CallbackGuard(on_output if on_output is not None else lambda s, d: chunks[s].append(d))
        p = ctypes.c_void_p()
        with self._busy():
            self._call(self._lib.sbsh_logs, _enc(str(proc)), int(bool(follow)), int(tail), streams,
                       canceller.fileno() if canceller is not None else -1, guard.c_fn, None, ctypes.byref(p))
        try:
            process = _process_from_handle(self._lib, p)
        finally:
            self._lib.sbsh_proc_free(p)
        guard.reraise()
        return Logs(b"".join(chunks[STDOUT]), b"".join(chunks[STDERR]), process)

    # -- plans --

    def run_plan(self, plan: Union[Mapping[str, Any], bytes, str, "os.PathLike[str]"], *,
                 session: Optional[str] = None, keep_session: bool = False, output_limit: Optional[int] = None,
                 artifacts: Optional[str] = None, report: Optional[str] = None, events: Optional[str] = None,
                 on_event: Optional[Callable[[Dict[str, Any]], None]] = None,
                 canceller: Optional[Canceller] = None) -> Dict[str, Any]:
        """Runs a plan, as `sbsh run` does, in a new session (sbsh(1), PLANS), and returns the
        report as a dict (sbsh(1), REPORT): "status" is "passed", "failed" or "cancelled".

        plan: a mapping (the plan itself, sent as JSON), bytes (JSON or YAML text), or the
        path of a JSON or YAML file (str or os.PathLike).
        session: the session's name (it must not exist; None: "run-<pid>-<n>"); keep_session
        leaves it when the run ends. output_limit: bytes of each stream kept in the report
        (default 1 MiB). artifacts: a directory for every command's whole output. report,
        events: files for the report and the event log (one JSON object per line).
        on_event(event): each event as a dict, as it happens; if it raises, the run is
        cancelled and the exception raised here once the report is written.
        canceller: cancels the run from another thread (reset() it before it serves again).
        Ctrl-C in the main thread cancels the run too (the report is still written), then
        raises KeyboardInterrupt.

        Raises Error with reason "invalid_plan" (the message names the field) when the plan
        is invalid, "file" when a file cannot be written, and as any request otherwise.
        """
        L = self._lib
        o = _RunOpts()
        L.sbsh_run_opts_init(ctypes.byref(o))
        o.session, o.keep_session = _enc(session), int(bool(keep_session))
        if output_limit is not None:
            if output_limit <= 0:
                raise ValueError("output_limit must be positive")
            o.output_limit = output_limit
        o.artifacts_dir, o.report_path, o.events_path = _enc(artifacts), _enc(report), _enc(events)
        text: Optional[bytes] = None
        fmt: Optional[bytes] = None
        if isinstance(plan, Mapping):
            text, fmt = json.dumps(plan).encode(), b"json"
        elif isinstance(plan, (bytes, bytearray)):
            text = bytes(plan)
        elif not isinstance(plan, (str, os.PathLike)):
            raise TypeError("plan takes a mapping, bytes of JSON or YAML, or the path of a plan file")
        out, status = ctypes.c_void_p(), ctypes.c_int()
        with self._busy():
            stop = _Interruption(self, canceller)
            guard = None
            if on_event is not None:
                guard = _CallbackGuard(on_event, stop.stop, _EVENT_FN,
                                       lambda data, length: (json.loads(ctypes.string_at(data, length)),))
                o.on_event = guard.c_fn
            o.cancel_fd = stop.fd
            with stop:
                if text is not None:
                    rc = L.sbsh_run_plan(self._conn, text, len(text), fmt, ctypes.byref(o), ctypes.byref(out),
                                         ctypes.byref(status))
                else:
                    rc = L.sbsh_run_plan_file(self._conn, _enc(plan), ctypes.byref(o), ctypes.byref(out),
                                              ctypes.byref(status))
            if rc != OK:
                raise self._error(rc, self._conn)
            result = _take_json(L, out)
            if guard is not None:
                guard.reraise()
            return result

    # -- the daemon --

    # -- files beneath a session's root --
    #
    # A session's root is its root directory (create_session(root=...)) or its snapshot's
    # copy. Paths are taken from it, and resolved beneath it: one that leads outside raises
    # Error with reason "outside_root" (naming the path as given, nothing outside), a session
    # without a root "no_root", any other failure "file_failed". Bytes are exact, any size.

    def write_file(self, path: str, data: Union[bytes, str, int, Any], session: Optional[str] = None,
                   mode: Optional[int] = None, parents: bool = True) -> int:
        """Writes data (bytes, str as UTF-8, or a file object or descriptor read to its end) to
        path, whole or not at all; returns the bytes written. mode: the permission bits (None:
        an existing file's, else 0o644); parents: make missing parent directories."""
        m = -1 if mode is None else int(mode)
        with self._busy():
            if isinstance(data, (bytes, bytearray, memoryview, str)):
                raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
                self._call(self._lib.sbsh_file_write, _enc(session), _enc(path), raw, len(raw), m, int(parents))
                return len(raw)
            fd = data if isinstance(data, int) else data.fileno()
            n = ctypes.c_uint64()
            self._call(self._lib.sbsh_file_write_fd, _enc(session), _enc(path), fd, m, int(parents), ctypes.byref(n))
            return n.value

    def read_file(self, path: str, session: Optional[str] = None, offset: int = 0,
                  length: Optional[int] = None) -> bytes:
        """The bytes of path (from offset, at most length of them)."""
        out, n = ctypes.c_void_p(), ctypes.c_size_t()
        with self._busy():
            self._call(self._lib.sbsh_file_read, _enc(session), _enc(path), offset, -1 if length is None else length,
                       ctypes.byref(out), ctypes.byref(n))
        try:
            return ctypes.string_at(out.value, n.value) if n.value else b""
        finally:
            self._lib.sbsh_free(out)

    def read_file_into(self, path: str, into: Union[int, Any], session: Optional[str] = None, offset: int = 0,
                       length: Optional[int] = None) -> int:
        """Copies path's bytes to a file object or descriptor without holding them in memory;
        returns how many."""
        fd = into if isinstance(into, int) else into.fileno()
        if not isinstance(into, int) and hasattr(into, "flush"):
            into.flush()
        n = ctypes.c_uint64()
        with self._busy():
            self._call(self._lib.sbsh_file_read_fd, _enc(session), _enc(path), fd, offset,
                       -1 if length is None else length, ctypes.byref(n))
        return n.value

    def stat_file(self, path: str, session: Optional[str] = None) -> Dict[str, Any]:
        """path, type (file, dir, symlink, fifo, socket, char, block), size, mode (octal text),
        mtime (RFC 3339) and, for a symlink, target."""
        out = ctypes.c_void_p()
        with self._busy():
            self._call(self._lib.sbsh_file_stat_json, _enc(session), _enc(path), ctypes.byref(out))
        return _take_json(self._lib, out)

    def list_files(self, path: str = "", session: Optional[str] = None, recursive: bool = False) -> List[Dict[str, Any]]:
        """A directory's entries (as stat_file describes them), sorted; recursive: all beneath it."""
        out = ctypes.c_void_p()
        with self._busy():
            self._call(self._lib.sbsh_file_list_json, _enc(session), _enc(path), int(recursive), ctypes.byref(out))
        return _take_json(self._lib, out)

    def remove_file(self, path: str, session: Optional[str] = None, recursive: bool = False) -> None:
        with self._busy():
            self._call(self._lib.sbsh_file_remove, _enc(session), _enc(path), int(recursive))

    def make_directory(self, path: str, session: Optional[str] = None, parents: bool = False) -> None:
        with self._busy():
            self._call(self._lib.sbsh_file_mkdir, _enc(session), _enc(path), int(parents))

    def move_file(self, src: str, dst: str, session: Optional[str] = None) -> None:
        with self._busy():
            self._call(self._lib.sbsh_file_move, _enc(session), _enc(src), _enc(dst))

    def status(self) -> Dict[str, Any]:
        """The daemon: pid, version, uptime_ms, socket, counters (commands, failed, timed_out,
        shell_restarts, bytes_streamed, clients: see sbsh(1), JSON OUTPUT), sessions (as
        sessions())."""
        out = ctypes.c_void_p()
        with self._busy():
            self._call(self._lib.sbsh_status_json, ctypes.byref(out))
        return _take_json(self._lib, out)

    def shutdown(self, keep_sessions: bool = False) -> None:
        """Stops sbshd and its sessions; with keep_sessions, the sessions go on running for
        the next sbshd to adopt. The Client cannot be used afterwards (close it)."""
        with self._busy():
            if keep_sessions:
                self._call(self._lib.sbsh_shutdown_keep_sessions)
            else:
                self._call(self._lib.sbsh_shutdown)
