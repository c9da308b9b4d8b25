"""sbsh: run commands in persistent bash sessions kept by sbshd.

A thin ctypes binding over libsbsh's C ABI (sbsh.h): one implementation of the protocol for
every language, no compiled extension and no package beyond Python itself.

    import sbsh
    with sbsh.Client() as c:
        c.exec("cd /tmp && export X=1", session="work")
        r = c.exec("pwd; echo $X", session="work")
        print(r.exit_code, r.stdout)          # 0 b'/tmp\\n1\\n'
"""
import ctypes
import ctypes.util
import os
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

__all__ = ["Client", "ExecResult", "Error", "Session", "Process"]

_OUTPUT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t)
_PROCESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_char_p,
                               ctypes.c_char_p, ctypes.c_int64, ctypes.c_int, ctypes.c_char_p)
_SESSION_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64)

TIMED_OUT, SHELL_RESTARTED, CANCELLED, STDOUT_TRUNCATED, STDERR_TRUNCATED = 1, 2, 4, 8, 16
ERR_TIMEOUT = -4


class _ExecOpts(ctypes.Structure):
    _fields_ = [
        ("session", ctypes.c_char_p), ("command", ctypes.c_char_p), ("cwd", ctypes.c_char_p),
        ("env", ctypes.POINTER(ctypes.c_char_p)), ("env_count", ctypes.c_size_t),
        ("timeout_ms", ctypes.c_int64), ("stdin_data", ctypes.c_char_p), ("stdin_len", ctypes.c_size_t),
        ("has_stdin", ctypes.c_int), ("on_output", _OUTPUT_FN), ("user", ctypes.c_void_p),
        ("output_limit", ctypes.c_size_t),
    ]


class Error(Exception):
    """A refused request or a lost connection: code (e.g. 'invalid_session_name') and message."""

    def __init__(self, code: str, message: str, status: int = 0):
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.status = code, message, status


@dataclass
class ExecResult:
    exit_code: Optional[int]
    signal: Optional[int]
    timed_out: bool
    shell_restarted: bool
    cancelled: bool
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    duration: float        # seconds
    started_at: float      # Unix time
    error: str


@dataclass
class Process:
    id: int
    name: str
    session: str
    state: str
    pid: int
    exit_code: Optional[int]
    command: str


@dataclass
class Session:
    name: str
    state: str
    shell_pid: int
    wrapper_pid: int


def _load(path: Optional[str]) -> ctypes.CDLL:
    candidates = [path, os.environ.get("SBSH_LIB"),
                  os.path.join(os.path.dirname(__file__), "libsbsh.so"), ctypes.util.find_library("sbsh")]
    for c in candidates:
        if c and (os.path.exists(c) or not os.path.dirname(c)):
            try:
                return ctypes.CDLL(c)
            except OSError:
                continue
    raise Error("no_library", "libsbsh.so not found: pass lib=, set SBSH_LIB, or install sbsh")


def _b(s: Optional[str]) -> Optional[bytes]:
    return None if s is None else s.encode()


def _strs(v: Optional[Sequence[str]]):
    v = list(v or [])
    arr = (ctypes.c_char_p * max(1, len(v)))(*[s.encode() for s in v])
    return arr, len(v)


class Client:
    """One connection to sbshd. Not thread-safe: use one Client per thread."""

    def __init__(self, socket: Optional[str] = None, autostart: bool = True, lib: Optional[str] = None):
        self._lib = _load(lib)
        L = self._lib
        L.sbsh_last_error.restype = ctypes.c_char_p
        L.sbsh_last_error_code.restype = ctypes.c_char_p
        L.sbsh_version.restype = ctypes.c_char_p
        L.sbsh_result_stdout.restype = ctypes.POINTER(ctypes.c_char)
        L.sbsh_result_stderr.restype = ctypes.POINTER(ctypes.c_char)
        L.sbsh_result_error.restype = ctypes.c_char_p
        L.sbsh_result_duration_us.restype = ctypes.c_uint64
        L.sbsh_result_started_at_ms.restype = ctypes.c_int64
        for f in ("sbsh_result_free", "sbsh_close"):
            getattr(L, f).restype = None
        P, S, I, I64, U64 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int64, ctypes.c_uint64
        SA, SZ = ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t
        for name, args in {
            "sbsh_connect": [S, I, ctypes.POINTER(P)], "sbsh_close": [P], "sbsh_last_error": [P],
            "sbsh_last_error_code": [P], "sbsh_exec": [P, ctypes.POINTER(_ExecOpts), ctypes.POINTER(P)],
            "sbsh_result_exit_code": [P, ctypes.POINTER(I)], "sbsh_result_signal": [P], "sbsh_result_flags": [P],
            "sbsh_result_stdout": [P, ctypes.POINTER(SZ)], "sbsh_result_stderr": [P, ctypes.POINTER(SZ)],
            "sbsh_result_duration_us": [P], "sbsh_result_started_at_ms": [P], "sbsh_result_error": [P],
            "sbsh_result_free": [P], "sbsh_session_create": [P, S, S, SA, SZ, SA, SZ, S],
            "sbsh_session_list": [P, _SESSION_FN, P], "sbsh_session_remove": [P, S],
            "sbsh_session_restart": [P, S], "sbsh_start": [P, S, S, S, ctypes.POINTER(U64)],
            "sbsh_kill": [P, S, I], "sbsh_wait": [P, S, I64, ctypes.POINTER(I), ctypes.c_char_p],
            "sbsh_logs": [P, S, I, U64, _OUTPUT_FN, P], "sbsh_shutdown": [P],
            "sbsh_process_list": [P, I, _PROCESS_FN, P],
        }.items():
            getattr(L, name).argtypes = args
        self._conn = ctypes.c_void_p()
        rc = L.sbsh_connect(_b(socket), int(autostart), ctypes.byref(self._conn))
        if rc != 0:
            raise Error("unreachable" if rc == -1 else "io", f"cannot connect to sbshd (status {rc})", rc)

    def close(self) -> None:
        if self._conn:
            self._lib.sbsh_close(self._conn)
            self._conn = ctypes.c_void_p()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check(self, rc: int) -> int:
        if rc < 0:
            L = self._lib
            raise Error(L.sbsh_last_error_code(self._conn).decode(), L.sbsh_last_error(self._conn).decode(), rc)
        return rc

    @property
    def version(self) -> str:
        return self._lib.sbsh_version().decode()

    def exec(self, command: str, session: Optional[str] = None, cwd: Optional[str] = None,
             env: Optional[Sequence[str]] = None, timeout: Optional[float] = None,
             stdin: Optional[bytes] = None,
             on_output: Optional[Callable[[int, bytes], None]] = None) -> ExecResult:
        """Runs one command. on_output(stream, data) gets output as it arrives (stream 1 or 2)."""
        envs, n = _strs(env)
        opts = _ExecOpts(session=_b(session), command=command.encode(), cwd=_b(cwd), env=envs, env_count=n,
                         timeout_ms=int((timeout or 0) * 1000))
        if stdin is not None:
            opts.stdin_data, opts.stdin_len, opts.has_stdin = stdin, len(stdin), 1
        if on_output is not None:
            cb = _OUTPUT_FN(lambda _u, s, d, ln: on_output(s, ctypes.string_at(d, ln)))
            opts.on_output = cb
        r = ctypes.c_void_p()
        self._check(self._lib.sbsh_exec(self._conn, ctypes.byref(opts), ctypes.byref(r)))
        try:
            return self._result(r)
        finally:
            self._lib.sbsh_result_free(r)

    def _result(self, r) -> ExecResult:
        L = self._lib
        code = ctypes.c_int()
        has = L.sbsh_result_exit_code(r, ctypes.byref(code))
        flags = L.sbsh_result_flags(r)
        n = ctypes.c_size_t()
        out = ctypes.string_at(L.sbsh_result_stdout(r, ctypes.byref(n)), n.value)
        err = ctypes.string_at(L.sbsh_result_stderr(r, ctypes.byref(n)), n.value)
        sig = L.sbsh_result_signal(r)
        return ExecResult(code.value if has else None, sig or None, bool(flags & TIMED_OUT),
                          bool(flags & SHELL_RESTARTED), bool(flags & CANCELLED), out, err,
                          bool(flags & STDOUT_TRUNCATED), bool(flags & STDERR_TRUNCATED),
                          L.sbsh_result_duration_us(r) / 1e6, L.sbsh_result_started_at_ms(r) / 1e3,
                          L.sbsh_result_error(r).decode())

    def create_session(self, name: str, cwd: Optional[str] = None, env: Optional[Sequence[str]] = None,
                       init: Optional[Sequence[str]] = None, restart: str = "always") -> None:
        envs, ne = _strs(env)
        inits, ni = _strs(init)
        self._check(self._lib.sbsh_session_create(self._conn, name.encode(), _b(cwd), envs, ne, inits, ni,
                                                  restart.encode()))

    def sessions(self) -> List[Session]:
        out: List[Session] = []
        cb = _SESSION_FN(lambda _u, n, s, sp, wp: out.append(Session(n.decode(), s.decode(), sp, wp)))
        self._check(self._lib.sbsh_session_list(self._conn, cb, None))
        return out

    def remove_session(self, name: str) -> None:
        self._check(self._lib.sbsh_session_remove(self._conn, name.encode()))

    def restart_session(self, name: str) -> None:
        self._check(self._lib.sbsh_session_restart(self._conn, name.encode()))

    def start(self, command: str, session: Optional[str] = None, name: Optional[str] = None) -> int:
        """Starts a background process; returns its id."""
        pid = ctypes.c_uint64()
        self._check(self._lib.sbsh_start(self._conn, _b(session), _b(name), command.encode(), ctypes.byref(pid)))
        return pid.value

    def processes(self, include_finished: bool = False) -> List[Process]:
        out: List[Process] = []

        def add(_u, i, n, s, st, pid, code, cmd):
            out.append(Process(i, n.decode(), s.decode(), st.decode(), pid, None if code < 0 else code, cmd.decode()))
        self._check(self._lib.sbsh_process_list(self._conn, int(include_finished), _PROCESS_FN(add), None))
        return out

    def kill(self, proc, signal: int = 15) -> None:
        self._check(self._lib.sbsh_kill(self._conn, str(proc).encode(), signal))

    def wait(self, proc, timeout: Optional[float] = None):
        """Returns (state, exit_status); raises Error with code 'timeout' if it still runs."""
        code = ctypes.c_int()
        state = ctypes.create_string_buffer(16)
        self._check(self._lib.sbsh_wait(self._conn, str(proc).encode(), int((timeout or 0) * 1000),
                                        ctypes.byref(code), state))
        return state.value.decode(), code.value

    def logs(self, proc, follow: bool = False, tail: int = 0,
             on_output: Optional[Callable[[int, bytes], None]] = None) -> bytes:
        """Returns the process's stdout (and streams both to on_output when given)."""
        chunks: List[bytes] = []

        def sink(_u, s, d, ln):
            data = ctypes.string_at(d, ln)
            if s == 1:
                chunks.append(data)
            if on_output is not None:
                on_output(s, data)
        self._check(self._lib.sbsh_logs(self._conn, str(proc).encode(), int(follow), tail, _OUTPUT_FN(sink), None))
        return b"".join(chunks)

    def shutdown(self) -> None:
        self._check(self._lib.sbsh_shutdown(self._conn))
