"""The synchronous client: Client (one connection to sbshd), and the handles it gives out,
Session, Process and Lease.

Threads: a Client serves one request at a time. Calls from several threads are serialized
by a lock (the connection is never used by two threads at once); for parallel commands open
one Client per thread, or use sbsh.AsyncClient. While a call runs in C, the GIL is released.

Signals: while exec runs in the main thread, signals that have a Python handler (SIGINT
among them, so Ctrl-C) are forwarded to the command, as ssh does; the Python handler then
runs when exec returns (KeyboardInterrupt, for Ctrl-C). wait() without a timeout returns to
Python twice a second, so it can be interrupted too.
"""
from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import signal as _signal
import threading
from types import TracebackType
from typing import IO, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Type, Union

from . import _lib
from ._lib import EnvLike, PathArg
from ._requests import _Requests
from .errors import (CommandFailed, CommandTimedOut, Error, InvalidArgument, LeaseEnded, ProcessNotFound, StateLost,
                     Timeout)
from .types import (STDERR, STDOUT, CommandInfo, DaemonStatus, EnvironmentInfo, ExecResult, FileEdit, FileInfo,
                    FileLines, FileSearch, Logs, PlanEvent, PlanReport, ProcessInfo, SessionDetails, command_info,
                    daemon_status, environment_info, file_edit, file_info, file_lines, file_search, plan_event,
                    plan_report, process_info, sequence_of)

__all__ = ["Client", "Session", "Process", "Lease", "Canceller", "version", "OutputCallback"]

OutputCallback = Callable[[int, bytes], None]
"""on_output(stream, data): stream is STDOUT (1) or STDERR (2)."""
StdinLike = Union[bytes, bytearray, memoryview, str, int, IO[bytes], IO[str], None]
ProcRef = Union["Process", int, str]
PlanLike = Union[Mapping[str, Any], bytes, str, "os.PathLike[str]"]


def version(lib: Optional[str] = None) -> str:
    """libsbsh's version, e.g. "0.1.0"."""
    return _lib.text(_lib.load(lib).sbsh_version())


class _CallbackGuard:
    """Wraps a Python callback for C: an exception in it must not vanish inside ctypes. The
    first one is kept (and `stop` is called, to end the command or run early); it is raised
    once the C call returns. An output callback by default; with c_type and adapt (which
    turns the C arguments after `user` into the Python ones), any other."""

    def __init__(self, fn: Callable[..., None], stop: Optional[Callable[[], None]] = None,
                 c_type: Any = _lib.OUTPUT_FN, adapt: Optional[Callable[..., Tuple[Any, ...]]] = None) -> None:
        self.error: Optional[BaseException] = None
        def output(stream: int, data: Any, length: int) -> Tuple[int, bytes]:
            return stream, ctypes.string_at(data, length)
        conv: Callable[..., Tuple[Any, ...]] = output
        if adapt is not None:
            conv = adapt

        def call(_user: Any, *args: Any) -> None:
            if self.error is not None:
                return
            try:
                fn(*conv(*args))
            except BaseException as e:  # KeyboardInterrupt included
                self.error = e
                if stop is not None:
                    stop()
        self.c_fn = c_type(call)

    def reraise(self) -> None:
        if self.error is not None:
            raise self.error


class Canceller:
    """Stops (cancel) or signals (signal) a running exec, plan or log follow from another
    thread. Pass it as canceller=. A request made while nothing runs applies to the next call
    that uses it; reset() discards it. Close it (or use `with`) when done."""

    def __init__(self, lib: Optional[str] = None) -> None:
        self._lib = _lib.load(lib)
        self._h = ctypes.c_void_p()
        rc = int(self._lib.sbsh_canceller_new(ctypes.byref(self._h)))
        if rc != _lib.OK:
            raise _lib.last_error(self._lib, rc, None)

    def fileno(self) -> int:
        return int(self._lib.sbsh_canceller_fd(self._h))

    def cancel(self) -> None:
        """Stops the command: SIGTERM to its group, SIGKILL after the grace period."""
        self._lib.sbsh_canceller_cancel(self._h)

    def signal(self, sig: Union[int, str]) -> None:
        """Delivers one signal to the running command."""
        self._lib.sbsh_canceller_signal(self._h, _lib.signum(sig))

    def reset(self) -> None:
        self._lib.sbsh_canceller_reset(self._h)

    def close(self) -> None:
        if self._h:
            self._lib.sbsh_canceller_free(self._h)
            self._h = ctypes.c_void_p()

    def __enter__(self) -> "Canceller":
        return self

    def __exit__(self, t: Optional[Type[BaseException]], e: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()


class _SignalForwarder:
    """While exec runs in the main thread, Python's C-level signal handler writes each
    signal's number to a wakeup descriptor. Pointing it at the pipe that libsbsh reads as
    the exec's cancel_fd forwards the signal to the command (a byte N means: deliver signal
    N), and Python still runs its own handler once exec returns. Used only when no other
    wakeup descriptor is set (asyncio sets one) and only in the main thread."""

    def __init__(self) -> None:
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
    C call itself, so that the wakeup descriptor is restored as soon as it returns."""

    def __init__(self, client: "Client", canceller: Optional[Canceller]) -> None:
        self._fwd: Optional[_SignalForwarder] = None
        self._prev: Optional[int] = None
        self.fd: int
        self.stop: Callable[[], None]
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

    def __exit__(self, *exc: object) -> None:
        if self._prev is not None:
            _signal.set_wakeup_fd(self._prev)
            self._prev = None


def _proc_ref(proc: ProcRef) -> bytes:
    ref = _lib.enc(str(proc.id) if isinstance(proc, Process) else str(proc) if isinstance(proc, int) else proc)
    assert ref is not None
    return ref


def check_result(command: Union[str, bytes], r: ExecResult) -> ExecResult:
    """Raises what exec(check=True) raises for a result that is not a success."""
    if r.running:
        return r
    what = command if isinstance(command, str) else command.decode("utf-8", "replace")
    if len(what) > 80:
        what = what[:77] + "..."
    if r.timed_out:
        raise CommandTimedOut(f"{what!r} timed out after {r.duration:.3f} s", r, reason="timed_out")
    if r.shell_restarted or r.state_lost:
        why = r.state_lost_reason or r.error or "the shell ended"
        raise StateLost(f"{what!r} ran without the session's state: {why}", r, reason="state_lost")
    if not r.ok:
        if r.cancelled:
            how = "was cancelled"
        elif r.signal:
            how = f"was killed by signal {r.signal}"
        elif r.exit_code is not None:
            how = f"exited with {r.exit_code}"
        else:
            how = f"did not run: {r.error or 'no exit code'}"
        raise CommandFailed(f"{what!r} {how}", r, reason="command_failed")
    return r


def _collector(what: str, stdout: bool, stderr: bool, on_output: Optional[OutputCallback]
               ) -> Tuple[Dict[int, List[bytes]], int, "_CallbackGuard"]:
    """For logs and command_logs: the chunks of each stream, the streams asked for (1, 2 or
    3) and the callback that keeps chunks and passes them to on_output."""
    chunks: Dict[int, List[bytes]] = {STDOUT: [], STDERR: []}
    streams = (STDOUT if stdout else 0) | (STDERR if stderr else 0)
    if streams == 0:
        raise ValueError(f"{what}: ask for stdout, stderr or both")

    def both(stream: int, data: bytes) -> None:
        chunks[STDERR if stream == STDERR else STDOUT].append(data)
        if on_output is not None:
            on_output(stream, data)
    return chunks, streams, _CallbackGuard(both)


class Client(_Requests):
    """One connection to sbshd.

    socket: the socket path (None: $SBSH_SOCKET, else $XDG_RUNTIME_DIR/sbsh/sbshd.sock, else
    /tmp/sbsh-$UID/sbshd.sock). autostart: start sbshd when none answers. lib: the path of
    libsbsh.so. daemon: the sbshd program to start (None: sbshd on PATH).

    sbshd on another host or in a container: host= as `sbsh -H` takes it,
    "ssh://[USER@]HOST[:PORT]", "podman://CONTAINER", "docker://CONTAINER" or
    "kubectl://[NAMESPACE/]POD[/CONTAINER]" (socket and autostart then apply over there; a
    malformed one raises InvalidArgument), or dial=[program, args...] whose stdin and stdout
    lead to `sbsh dial-stdio` where sbshd runs, such as ["lxc", "exec", "box", "--", "sbsh",
    "dial-stdio"].

    Raises DaemonUnreachable when no sbshd answers. Close it with close() or a `with` block.
    """

    def __init__(self, socket: Optional[PathArg] = None, autostart: bool = True, lib: Optional[str] = None,
                 daemon: Optional[PathArg] = None, host: Optional[str] = None,
                 dial: Optional[Sequence[str]] = None) -> None:
        self._lib = _lib.load(lib)
        self._conn = ctypes.c_void_p()
        self._lock = threading.RLock()
        self._depth = 0
        self._fwd: Optional[_SignalForwarder] = None
        if host is not None and dial is not None:
            raise InvalidArgument("host and dial both say how to reach sbshd: give one", code=_lib.ERR_INVALID,
                                  reason="usage")
        if dial is not None:
            argv = (ctypes.c_char_p * (len(dial) + 1))(*[_lib.enc(a) for a in dial], None)
            rc = int(self._lib.sbsh_connect_dial(argv, ctypes.byref(self._conn)))
        elif host is not None:
            rc = int(self._lib.sbsh_connect_host(_lib.enc(host), _lib.enc(socket), int(bool(autostart)),
                                                 ctypes.byref(self._conn)))
        else:
            rc = int(self._lib.sbsh_connect_ex(_lib.enc(socket), int(bool(autostart)), _lib.enc(daemon),
                                               ctypes.byref(self._conn)))
        if rc != _lib.OK:
            raise _lib.last_error(self._lib, rc, None)

    # -- plumbing --

    def _call(self, fn: Any, *args: Any) -> None:
        """Calls a C function that takes the connection first; raises on failure."""
        rc = int(fn(self._conn, *args))
        if rc != _lib.OK:
            raise _lib.last_error(self._lib, rc, self._conn)

    class _Busy:
        def __init__(self, client: "Client") -> None:
            self.c = client

        def __enter__(self) -> None:
            c = self.c
            c._lock.acquire()
            if c._depth > 0:
                c._lock.release()
                raise InvalidArgument("a callback called back into the Client that is running it; use another Client",
                                      code=_lib.ERR_INVALID, reason="reentrant_call")
            if not c._conn:
                c._lock.release()
                raise InvalidArgument("the Client is closed", code=_lib.ERR_INVALID, reason="closed")
            c._depth += 1

        def __exit__(self, *exc: object) -> None:
            self.c._depth -= 1
            self.c._lock.release()

    def _busy(self) -> "Client._Busy":
        return Client._Busy(self)

    def _json(self, fn: Any, *args: Any) -> Any:
        out = ctypes.c_void_p()
        with self._busy():
            self._call(fn, *args, ctypes.byref(out))
        return json.loads(_lib.take_string(self._lib, out))

    def _request(self, request: Dict[str, Any]) -> Dict[str, Any]:
        """Sends a request through the generic call (sbsh_request_json); its reply's JSON form.
        A name given as bytes or a path-like object goes as its text (os.fsdecode), as the
        C functions took it."""
        def text(v: Any) -> str:
            if isinstance(v, (bytes, os.PathLike)):
                return os.fsdecode(v)
            raise TypeError(f"{type(v).__name__} is not an argument of a request")
        reply = self._json(self._lib.sbsh_request_json, json.dumps(request, default=text).encode())
        return reply if isinstance(reply, dict) else {}

    def close(self) -> None:
        """Closes the connection (sessions and processes go on). Safe to call twice."""
        with self._lock:
            if self._conn:
                self._lib.sbsh_close(self._conn)
                self._conn = ctypes.c_void_p()
            if self._fwd is not None:
                self._fwd.close()
                self._fwd = None

    @property
    def closed(self) -> bool:
        return not self._conn

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, t: Optional[Type[BaseException]], e: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()

    @property
    def socket_path(self) -> str:
        return _lib.text(self._lib.sbsh_socket_path(self._conn))

    @property
    def library_path(self) -> str:
        """Where libsbsh was loaded from."""
        return _lib.loaded_path(self._lib)

    # -- exec --

    def exec(self, command: Union[str, bytes], session: Optional[str] = None, *, cwd: Optional[PathArg] = None,
             env: EnvLike = None, timeout: Optional[float] = None, stdin: StdinLike = None,
             on_output: Optional[OutputCallback] = None, output_limit: Optional[int] = None,
             canceller: Optional[Canceller] = None, grace: Optional[float] = None,
             detach_after: Optional[float] = None, keep: bool = False, check: bool = False, tty: bool = False,
             cols: int = 0, rows: int = 0, interactive: bool = False) -> ExecResult:
        """Runs one command in a session (None: "default", created on first use) and waits
        for it.

        cwd, env (a mapping or "NAME=VALUE" strings): for this command only (a subshell).
        timeout: seconds; the command's process group is stopped when it passes.
        stdin: bytes (or str, UTF-8) to feed, or a file descriptor / object with fileno() to
        read until EOF; None: /dev/null.
        on_output(stream, data): receives output as it arrives (stream STDOUT or STDERR); the
        result keeps it too. If it raises, the command is stopped and the exception raised here.
        output_limit: bytes kept per stream (default 16 MiB): of a longer stream its first and
        last half, with stdout_omitted counting what was left out.
        canceller: a Canceller to stop the command from another thread.
        keep: sbshd keeps the output and result under result.command_id for an hour
        (await_command, kill_command). detach_after: seconds (implies keep); a command still
        running then goes on in the session and the result has running True, its command_id
        and the output so far.
        tty: a pseudo-terminal (cols by rows; 0: 80 by 24) as the command's controlling
        terminal, stdin, stdout and stderr: its output, stderr merged, is stdout; stdin is
        typed into it. interactive: its stdin stays open, also after detach_after, and with
        detach_after the result comes as soon as it waits for input (waiting_for_input, with
        prompt: the last line it printed), as the kernel says.
        check: raise CommandFailed (with the result) when the command did not succeed, as
        subprocess.run does: CommandTimedOut on a timeout, StateLost when it ran without the
        session's state (its shell was lost), CommandFailed otherwise.

        Raises InvalidArgument (bad session name, ...), Refused, DaemonUnreachable when the
        request itself fails; without check, a command that ran always gives an ExecResult,
        whatever its exit status.
        """
        L = self._lib
        o, keep_alive = self._exec_opts(command, session, cwd, env, timeout, stdin, output_limit, grace, detach_after,
                                        keep, tty=tty, cols=cols, rows=rows, interactive=interactive)
        with self._busy():
            stop = _Interruption(self, canceller)
            guard = None
            if on_output is not None:
                # Passed on, and kept in the result too (as without a callback).
                guard = _CallbackGuard(on_output, stop.stop)
                o.on_output, o.collect_output = guard.c_fn, 1
            o.cancel_fd = stop.fd
            r = ctypes.c_void_p()
            try:
                with stop:
                    rc = int(L.sbsh_exec(self._conn, ctypes.byref(o), ctypes.byref(r)))
                if rc != _lib.OK:
                    raise _lib.last_error(L, rc, self._conn)
                if guard is not None:
                    guard.reraise()
                res = self._result(r)
            finally:
                L.sbsh_result_free(r)
        del keep_alive
        return check_result(command, res) if check else res

    def _exec_opts(self, command: Union[str, bytes], session: Optional[str], cwd: Optional[PathArg], env: EnvLike,
                   timeout: Optional[float], stdin: StdinLike, output_limit: Optional[int], grace: Optional[float],
                   detach_after: Optional[float], keep: bool, *, tty: bool = False, cols: int = 0, rows: int = 0,
                   interactive: bool = False) -> Tuple[Any, List[Any]]:
        """sbsh_exec_opts for these arguments, and what must outlive the call they go to."""
        o = _lib.ExecOpts()
        self._lib.sbsh_exec_opts_init_size(ctypes.byref(o), ctypes.sizeof(o))
        o.command = _lib.enc(command)
        o.session, o.cwd = _lib.enc(session), _lib.enc(cwd)
        keep_alive: List[Any] = []
        if env:
            env_arr, o.env_count = _lib.str_array(_lib.env_list(env))
            keep_alive.append(env_arr)
            o.env = ctypes.cast(env_arr, ctypes.POINTER(ctypes.c_char_p))
        o.timeout_ms, o.grace_ms = _lib.ms(timeout, "timeout"), _lib.ms(grace, "grace")
        if stdin is not None:
            if isinstance(stdin, (bytes, bytearray, memoryview, str)):
                data = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
                keep_alive.append(data)
                o.stdin_data, o.stdin_len = data, len(data)
            else:
                o.stdin_fd = stdin if isinstance(stdin, int) else stdin.fileno()
        if output_limit is not None:
            if output_limit <= 0:
                raise ValueError("output_limit must be positive")
            o.output_limit = output_limit
        o.detach_after_ms, o.keep = _lib.ms(detach_after, "detach_after"), int(keep)
        if not 0 <= cols <= 10000 or not 0 <= rows <= 10000:
            raise ValueError("cols and rows must be from 1 to 10000 (0: 80 by 24)")
        o.tty, o.cols, o.rows, o.interactive = int(tty), cols, rows, int(interactive)
        return o, keep_alive

    def _result(self, r: ctypes.c_void_p) -> ExecResult:
        L = self._lib
        n = ctypes.c_size_t()
        p = L.sbsh_result_stdout(r, ctypes.byref(n))
        out = ctypes.string_at(p, n.value) if n.value else b""
        p = L.sbsh_result_stderr(r, ctypes.byref(n))
        err = ctypes.string_at(p, n.value) if n.value else b""
        started = int(L.sbsh_result_started_at_ms(r))
        return ExecResult(
            exit_code=int(L.sbsh_result_exit_code(r)) if L.sbsh_result_has_exit_code(r) else None,
            signal=int(L.sbsh_result_signal(r)) or None,
            timed_out=L.sbsh_result_timed_out(r) != 0,
            shell_restarted=L.sbsh_result_shell_restarted(r) != 0,
            cancelled=L.sbsh_result_cancelled(r) != 0,
            stdout=out, stderr=err,
            stdout_truncated=L.sbsh_result_stdout_truncated(r) != 0,
            stderr_truncated=L.sbsh_result_stderr_truncated(r) != 0,
            duration=int(L.sbsh_result_duration_us(r)) / 1e6,
            started_at=started / 1e3 if started else None,
            error=_lib.text(L.sbsh_result_error(r)),
            ran=L.sbsh_result_ran(r) != 0,
            generation=int(L.sbsh_result_generation(r)),
            state_lost=L.sbsh_result_state_lost(r) != 0,
            state_lost_reason=_lib.text(L.sbsh_result_state_lost_reason(r)),
            oom_killed=L.sbsh_result_oom_killed(r) != 0,
            stdout_omitted=int(L.sbsh_result_stdout_omitted(r)),
            stderr_omitted=int(L.sbsh_result_stderr_omitted(r)),
            running=L.sbsh_result_running(r) != 0,
            command_id=int(L.sbsh_result_command_id(r)),
            waiting_for_input=L.sbsh_result_waiting_for_input(r) != 0,
            prompt=_lib.text(L.sbsh_result_prompt(r)),
            screen=_lib.text(L.sbsh_result_screen(r)),
            stdout_bytes=int(L.sbsh_result_stdout_bytes(r)),
            stderr_bytes=int(L.sbsh_result_stderr_bytes(r)))

    def await_command(self, command_id: int, timeout: Optional[float] = None,
                      output_limit: Optional[int] = None) -> ExecResult:
        """Waits for a kept command (exec's keep or detach_after) to end, at most timeout
        seconds (None: no limit), and returns its result with its output; running is True,
        with the output so far, when the timeout passed first. CommandNotFound once sbshd has
        forgotten it."""
        return self._kept_call(self._lib.sbsh_await_command, command_id, _lib.ms(timeout, "timeout"),
                               output_limit or 0)

    def kill_command(self, command_id: int, sig: Union[int, str] = 0) -> ExecResult:
        """Stops a kept command as a timeout does (sig first, SIGTERM when 0; the shell keeps
        its state) and returns its result once it has ended, without its output."""
        return self._kept_call(self._lib.sbsh_kill_command, command_id, _lib.signum(sig))

    def command_logs(self, command_id: int, follow: bool = False, stdout: bool = True, stderr: bool = True,
                     on_output: Optional[OutputCallback] = None,
                     canceller: Optional[Canceller] = None, stdout_offset: int = 0,
                     stderr_offset: int = 0) -> ExecResult:
        """A kept command's output from its start (or only what follows stdout_offset and
        stderr_offset bytes, such as an earlier result's stdout_bytes and stderr_bytes: what
        is new since); with follow, then what it writes until it ends, or until
        canceller.cancel() (from another thread; the command goes on). on_output(stream, data)
        gets chunks as they come. Returns its result with that output; running is True when
        it has not ended. CommandNotFound once sbshd has forgotten it."""
        for name, offset in (("stdout_offset", stdout_offset), ("stderr_offset", stderr_offset)):
            if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset < 1 << 64:
                raise ValueError(f"command_logs: {name} must be a byte offset (an int from 0), not {offset!r}")
        chunks, streams, guard = _collector("command_logs", stdout, stderr, on_output)
        r = ctypes.c_void_p()
        with self._busy():
            try:
                self._call(self._lib.sbsh_command_logs_since, command_id, stdout_offset, stderr_offset,
                           int(bool(follow)), streams,
                           canceller.fileno() if canceller is not None else -1, guard.c_fn, None, ctypes.byref(r))
                result = self._result(r)
            finally:
                self._lib.sbsh_result_free(r)
        guard.reraise()
        return dataclasses.replace(result, stdout=b"".join(chunks[STDOUT]), stderr=b"".join(chunks[STDERR]))

    def send_input(self, command_id: int, data: Union[str, bytes] = b"", enter: bool = False, eof: bool = False,
                   wait: bool = True, timeout: Optional[float] = None) -> ExecResult:
        """Input for a kept command whose input is open (exec with tty or interactive, left
        running by detach_after): a str is typed as keys (UTF-8; "\\r" is Enter, made "\\n"
        on a pipe as a terminal would), bytes are sent as they are; enter then adds Enter, eof
        ends its input (Ctrl-D on a terminal). Unless wait is False, waits until it ends, waits
        for input again, or timeout seconds pass, and returns its state with only the output
        it wrote after the input: running, waiting_for_input and prompt, or how it ended.
        Refused (reason "no_input") when it takes no input."""
        if not isinstance(data, (str, bytes)):
            raise TypeError(f"send_input: data must be str or bytes, not {type(data).__name__}")
        typed = isinstance(data, str) or enter
        raw = data.encode() if isinstance(data, str) else bytes(data)
        if enter:
            raw += b"\r"
        flags = (1 if typed else 0) | (2 if eof else 0) | (0 if wait else 4)
        return self._kept_call(self._lib.sbsh_command_input, command_id, raw, len(raw), flags,
                               _lib.ms(timeout, "timeout"))

    def _kept_call(self, fn: Any, *args: Any) -> ExecResult:
        r = ctypes.c_void_p()
        with self._busy():
            try:
                self._call(fn, *args, ctypes.byref(r))
                return self._result(r)
            finally:
                self._lib.sbsh_result_free(r)

    # -- leases --

    def lease(self, session: Optional[str] = None) -> "Lease":
        """A lease of the session's shell (None: "default"), granted once the commands queued
        before it have run: Lease.run then runs commands on the shell directly, not through
        sbshd (see Lease). While it is held this Client serves nothing else (another call
        raises InvalidArgument, reason "usage"): release it, or use it in a `with` block.

        Raises SessionNotFound for a session that does not exist, Refused (reason
        "not_supported") over host= or dial= (the lease's socket cannot pass through a dial
        command) and for a shell that takes no leases, InvalidArgument when this Client holds
        a lease already.
        """
        name = session if session is not None else "default"
        h = ctypes.c_void_p()
        with self._busy():
            self._call(self._lib.sbsh_lease_new, _lib.enc(name), ctypes.byref(h))
        return Lease(self, name, h)

    # -- sessions --

    def session(self, name: str) -> "Session":
        """A handle on the session `name` (nothing is asked of sbshd: a session is created
        by its first command, or by create_session)."""
        return Session(self, name)

    def create_session(self, name: str, cwd: Optional[PathArg] = None, env: EnvLike = None,
                       init: Optional[Sequence[str]] = None, restart: str = "always",
                       limits: Optional[Sequence[str]] = None, snapshot: Optional[PathArg] = None,
                       root: Optional[PathArg] = None, setup: Optional[str] = None,
                       setup_keys: Optional[Sequence[PathArg]] = None, *, confine: bool = False,
                       allow_write: Optional[Sequence[PathArg]] = None, allow_read: Optional[Sequence[PathArg]] = None,
                       read_only: Optional[Sequence[PathArg]] = None, no_network: bool = False,
                       memory: Optional[int] = None, pids: Optional[int] = None,
                       cpu: Optional[float] = None,
                       on_setup_output: Optional[Callable[[int, bytes], None]] = None) -> "Session":
        """Defines a session and returns its handle: every new shell of it starts in cwd
        (None: this process's directory) with env and the resource `limits` ("NAME=VALUE" as
        `sbsh session create --limit`, e.g. "nofile=256" or "as=2G"), runs the init commands
        first, and is restarted per `restart` ("always", "on-failure", "never"). With
        `snapshot` (a directory; not with cwd), sbshd first copies it for the session, whose
        shells start in the copy; remove deletes it. With `root` (a directory; not with
        snapshot), the session is confined to it. With `setup` (bash text) the session gets an
        environment built once and shared by content: its shells find it in SBSH_ENV, keyed by
        the setup, the contents of the `setup_keys` (files, or directories as
        their trees less what a snapshot leaves out; relative to the session's directory) and the bash; when none is built yet the setup runs first, and a failed
        one raises Refused (reason "setup_failed") with its status and the end of its output.
        While the setup runs, on_setup_output(stream, data) gets what it writes as it comes
        (stream 1 or 2, data bytes), as exec's on_output does. The same definition again is a
        no-op; a different one raises Refused (reason
        "session_exists").

        With `confine` (and a root or snapshot) the kernel confines the session (sbsh(1),
        session create --confine): its shell and all it starts may read and write beneath
        the root and a private TMPDIR, read and run the system's programs, and nothing else;
        `allow_write`, `allow_read` (read and run) and `read_only` add absolute paths. A
        session with `no_network` has only its own loopback. `memory` (bytes, an int),
        `pids` (processes) and `cpu` (CPUs, e.g. 0.5) limit it through a cgroup of its own
        where sbshd has cgroup v2 delegated to it. What the system cannot do raises Refused
        (reason "not_supported") saying what is missing; session_details(name).definition
        reads it all back, with the Landlock ABI in force (landlock_abi)."""
        lists = {"allow_write": allow_write, "allow_read": allow_read, "read_only": read_only}
        for key, paths in lists.items():
            if isinstance(paths, (str, bytes)):
                raise TypeError(f"{key} takes a sequence of paths, not one string")
            if paths and not confine:
                raise InvalidArgument(f"{key} adds to a confined session's rules: pass confine=True too",
                                      code=_lib.ERR_INVALID, reason="usage")
            for p in paths or ():
                if not os.fsencode(p).startswith(b"/"):
                    raise InvalidArgument(f"{key}: the path {p!r} a confined session is allowed must be absolute "
                                          f"(os.path.abspath gives one)", code=_lib.ERR_INVALID, reason="usage")
        counts = {"memory": memory, "pids": pids}
        for key, n in counts.items():
            if n is not None and (isinstance(n, bool) or not isinstance(n, int) or not 0 < n < 2**63):
                raise InvalidArgument(f"{key} takes a positive int ({'bytes' if key == 'memory' else 'processes'}), "
                                      f"not {n!r}", code=_lib.ERR_INVALID, reason="usage")
        cpu_millis = 0
        if cpu is not None:
            if isinstance(cpu, bool) or not isinstance(cpu, (int, float)) or not 0 < cpu <= 1e6:
                raise InvalidArgument(f"cpu takes a positive number of CPUs such as 0.5 or 2, not {cpu!r}",
                                      code=_lib.ERR_INVALID, reason="usage")
            cpu_millis = max(1, round(cpu * 1000))
        spec = _lib.SessionSpec()
        self._lib.sbsh_session_spec_init_size(ctypes.byref(spec), ctypes.sizeof(spec))
        keep = [_lib.str_array(_lib.env_list(env)), _lib.str_array(list(init or [])),
                _lib.str_array(list(limits or [])), _lib.str_array(list(setup_keys or [])),
                _lib.str_array(list(allow_write or ())), _lib.str_array(list(allow_read or ())),
                _lib.str_array(list(read_only or ()))]
        spec.name, spec.cwd, spec.restart = _lib.enc(name), _lib.enc(cwd), _lib.enc(restart)
        spec.env, spec.env_count = keep[0]
        spec.init, spec.init_count = keep[1]
        spec.limits, spec.limit_count = keep[2]
        if snapshot is not None:
            spec.snapshot = _lib.enc(snapshot)
        if root is not None:
            spec.root = _lib.enc(root)
        if setup is not None:
            spec.setup = _lib.enc(setup)
        spec.setup_keys, spec.setup_key_count = keep[3]
        spec.confine, spec.no_network = int(bool(confine)), int(bool(no_network))
        spec.allow_write, spec.allow_write_count = keep[4]
        spec.allow_read, spec.allow_read_count = keep[5]
        spec.read_only, spec.read_only_count = keep[6]
        spec.memory_max, spec.pids_max, spec.cpu_millis = memory or 0, pids or 0, cpu_millis
        with self._busy():
            if on_setup_output is None:
                self._call(self._lib.sbsh_session_create_spec, ctypes.byref(spec))
            else:
                guard = _CallbackGuard(on_setup_output)
                self._call(self._lib.sbsh_session_create_spec_output, ctypes.byref(spec), guard.c_fn, None)
                guard.reraise()
        return Session(self, name)

    def remove_session(self, name: str, keep_copy: bool = False) -> Optional[str]:
        """Removes a session; returns once its shell and wrapper are gone. keep_copy leaves
        its snapshot's copy in place (a session without one: InvalidArgument) and returns
        where it is; otherwise None."""
        if not keep_copy:
            with self._busy():
                self._call(self._lib.sbsh_session_remove, _lib.enc(name))
            return None
        out = ctypes.c_void_p()
        with self._busy():
            self._call(self._lib.sbsh_session_remove_keep_copy, _lib.enc(name), ctypes.byref(out))
        return _lib.take_string(self._lib, out)

    def prune_sessions(self, idle: float = 0) -> List[str]:
        """Removes every session made implicitly (an exec or start naming a session that did
        not exist) that has been idle for at least `idle` seconds; returns their names once
        they are gone."""
        if idle < 0:
            raise ValueError("idle must not be negative")
        return [str(n) for n in self._json(self._lib.sbsh_session_prune, int(round(idle * 1000))) or ()]

    # -- environments --

    def prune_environments(self, keep: Optional[int] = None,
                           older_than: Optional[float] = None) -> List[EnvironmentInfo]:
        """Deletes the environments no session uses: all of them; with keep, all but the keep
        most recently used; with older_than, only those unused for that many seconds (both:
        either one keeps an environment). Returns them once they are gone."""
        if keep is not None and keep < 0:
            raise ValueError("keep must be a count of environments, or None")
        older_ms = _lib.ms(older_than, "older_than")
        return [environment_info(d) for d in
                sequence_of(self._json(self._lib.sbsh_environments_prune, -1 if keep is None else keep, older_ms))]

    # -- background processes --

    def start(self, command: str, session: Optional[str] = None, name: Optional[str] = None,
              cwd: Optional[PathArg] = None, env: EnvLike = None) -> "Process":
        """Starts a background process in a session and returns its handle. Its output goes
        to log files (Process.logs, Process.follow); it outlives this Client."""
        envs, ne = _lib.str_array(_lib.env_list(env))
        proc_id = ctypes.c_uint64()
        with self._busy():
            self._call(self._lib.sbsh_start, _lib.enc(command), _lib.enc(session), _lib.enc(name), _lib.enc(cwd),
                       envs, ne, ctypes.byref(proc_id))
        return Process(self, int(proc_id.value), name or "")

    def process(self, proc: Union[int, str]) -> "Process":
        """A handle on a background process by id or name, also one another program started.
        ProcessNotFound when there is none."""
        for p in self.processes(include_finished=True):
            if (isinstance(proc, int) and p.id == proc) or (isinstance(proc, str) and proc in (p.name, str(p.id))):
                return Process(self, p.id, p.name)
        raise ProcessNotFound(f"no background process {proc}", code=_lib.ERR_NOT_FOUND, reason="no_such_process")

    def processes(self, include_finished: bool = False) -> List[ProcessInfo]:
        """The background processes (with include_finished, also those that ended)."""
        return [process_info(d) for d in
                sequence_of(self._json(self._lib.sbsh_processes_json, int(bool(include_finished))))]

    def commands(self, include_finished: bool = False) -> List[CommandInfo]:
        """The commands sbshd keeps that run detached from any client (exec's detach_after), as
        `sbsh ps` lists them; with include_finished, every command kept, those ended too."""
        return [command_info(d) for d in
                sequence_of(self._json(self._lib.sbsh_commands_json, int(bool(include_finished))))]

    def _proc_call(self, fn: Any, *args: Any) -> ProcessInfo:
        p = ctypes.c_void_p()
        with self._busy():
            self._call(fn, *args, ctypes.byref(p))
        try:
            return self._proc_info(p)
        finally:
            self._lib.sbsh_proc_free(p)

    def _proc_info(self, p: ctypes.c_void_p) -> ProcessInfo:
        L, t = self._lib, _lib.text
        pid, ended = int(L.sbsh_proc_pid(p)), int(L.sbsh_proc_ended_at_ms(p))
        return ProcessInfo(id=int(L.sbsh_proc_id(p)), name=t(L.sbsh_proc_name(p)), session=t(L.sbsh_proc_session(p)),
                           command=t(L.sbsh_proc_command(p)), state=t(L.sbsh_proc_state(p)), pid=pid or None,
                           exit_code=int(L.sbsh_proc_exit_code(p)) if L.sbsh_proc_has_exit_code(p) else None,
                           signal=int(L.sbsh_proc_signal(p)) or None,
                           started_at=int(L.sbsh_proc_started_at_ms(p)) / 1e3,
                           ended_at=ended / 1e3 if ended else None, error=t(L.sbsh_proc_error(p)),
                           log=t(L.sbsh_proc_log_path(p)))

    def kill(self, proc: ProcRef, signal: Union[int, str] = _signal.SIGTERM) -> ProcessInfo:
        """Signals the process's whole tree. With SIGTERM or SIGKILL, returns once every process
        of it is gone (SIGTERM escalates to SIGKILL after 2 s); with another signal, once it has
        ended or after 1 s with state "running" if it survived the signal."""
        return self._proc_call(self._lib.sbsh_kill, _proc_ref(proc), _lib.signum(signal))

    def wait(self, proc: ProcRef, timeout: Optional[float] = None) -> ProcessInfo:
        """Waits for the process to end and returns its final state. Raises Timeout when the
        timeout (seconds) passes first (the process goes on)."""
        ref = _proc_ref(proc)
        if timeout is not None:
            return self._proc_call(self._lib.sbsh_wait, ref, _lib.ms(timeout, "timeout"))
        # Without a limit, wait in slices so that Python's signal handlers (Ctrl-C) run.
        while True:
            try:
                return self._proc_call(self._lib.sbsh_wait, ref, 500)
            except Timeout:
                pass

    def logs(self, proc: ProcRef, follow: bool = False, tail: int = 0, stdout: bool = True,
             stderr: bool = True, on_output: Optional[OutputCallback] = None,
             canceller: Optional[Canceller] = None) -> Logs:
        """The process's logged output. follow: keep streaming until it ends, or until
        canceller.cancel() (from another thread; the process goes on). tail: only the last N
        lines of each stream. on_output(stream, data) gets chunks as they come; the returned
        Logs has them too."""
        chunks, streams, guard = _collector("logs", stdout, stderr, on_output)
        p = ctypes.c_void_p()
        with self._busy():
            self._call(self._lib.sbsh_logs, _proc_ref(proc), int(bool(follow)), int(tail), streams,
                       canceller.fileno() if canceller is not None else -1, guard.c_fn, None, ctypes.byref(p))
        try:
            info = self._proc_info(p)
        finally:
            self._lib.sbsh_proc_free(p)
        guard.reraise()
        return Logs(b"".join(chunks[STDOUT]), b"".join(chunks[STDERR]), info)

    # -- plans --

    def run_plan(self, plan: PlanLike, *, session: Optional[str] = None, keep_session: bool = False,
                 output_limit: Optional[int] = None, artifacts: Optional[PathArg] = None, report: Optional[PathArg] = None,
                 events: Optional[PathArg] = None, on_event: Optional[Callable[[PlanEvent], None]] = None,
                 canceller: Optional[Canceller] = None) -> PlanReport:
        """Runs a plan, as `sbsh run` does, in a new session (sbsh(1), PLANS), and returns its
        report: status "passed", "failed" or "cancelled".

        plan: a mapping (the plan itself, sent as JSON), bytes (JSON or YAML text), or the
        path of a JSON or YAML file (str or os.PathLike).
        session: the session's name (it must not exist; None: "run-<pid>-<n>"); keep_session
        leaves it when the run ends. output_limit: bytes of each stream kept in the report
        (default 1 MiB). artifacts: a directory for every command's whole output. report,
        events: files for the report and the event log (one JSON object per line).
        on_event(event): each PlanEvent as it happens; if it raises, the run is cancelled and
        the exception raised here once the report is written.
        canceller: cancels the run from another thread (reset() it before it serves again).
        Ctrl-C in the main thread cancels the run too (the report is still written), then
        raises KeyboardInterrupt.

        Raises InvalidArgument with reason "invalid_plan" (the message names the field) when
        the plan is invalid, "file" when a file cannot be written; Refused with
        "session_exists" when the session exists.
        """
        L = self._lib
        o = _lib.RunOpts()
        L.sbsh_run_opts_init(ctypes.byref(o))
        o.session, o.keep_session = _lib.enc(session), int(bool(keep_session))
        if output_limit is not None:
            if output_limit <= 0:
                raise ValueError("output_limit must be positive")
            o.output_limit = output_limit
        o.artifacts_dir, o.report_path, o.events_path = _lib.enc(artifacts), _lib.enc(report), _lib.enc(events)
        text: Optional[bytes] = None
        fmt: Optional[bytes] = None
        path: Optional[bytes] = None
        if isinstance(plan, Mapping):
            text, fmt = json.dumps(plan).encode(), b"json"
        elif isinstance(plan, (bytes, bytearray)):
            text = bytes(plan)
        elif isinstance(plan, (str, os.PathLike)):
            path = _lib.enc(plan)
        else:
            raise TypeError("plan takes a mapping, bytes of JSON or YAML, or the path of a plan file")
        out, status = ctypes.c_void_p(), ctypes.c_int()
        with self._busy():
            stop = _Interruption(self, canceller)
            guard = None
            if on_event is not None:
                def adapt(data: Any, length: int) -> Tuple[PlanEvent]:
                    line = ctypes.string_at(data, length).decode("utf-8", "replace")
                    return (plan_event(json.loads(line), line),)
                guard = _CallbackGuard(on_event, stop.stop, _lib.EVENT_FN, adapt)
                o.on_event = guard.c_fn
            o.cancel_fd = stop.fd
            with stop:
                if text is not None:
                    rc = int(L.sbsh_run_plan(self._conn, text, len(text), fmt, ctypes.byref(o), ctypes.byref(out),
                                             ctypes.byref(status)))
                else:
                    rc = int(L.sbsh_run_plan_file(self._conn, path, ctypes.byref(o), ctypes.byref(out),
                                                  ctypes.byref(status)))
            if rc != _lib.OK:
                raise _lib.last_error(L, rc, self._conn)
            doc = _lib.take_string(L, out)
            if guard is not None:
                guard.reraise()
            return plan_report(json.loads(doc), int(status.value), doc)

    # -- files beneath a session's root --
    #
    # A session's root is its root directory (create_session(root=...)) or its snapshot's
    # copy. Paths are taken from it, and resolved beneath it: one that leads outside raises
    # Refused with reason "outside_root" (naming the path as given, nothing outside), a write
    # beneath what a confined session may only read "read_only", a
    # session without a root "no_root", any other failure "file_failed". Bytes are exact.

    def write_file(self, path: PathArg, data: Union[bytes, bytearray, memoryview, str, int, IO[bytes]],
                   session: Optional[str] = None, mode: Optional[int] = None, parents: bool = True) -> int:
        """Writes data (bytes, str as UTF-8, or a file object or descriptor read to its end) to
        path, whole or not at all; returns the bytes written. mode: the permission bits (None:
        an existing file's, else 0o644); parents: make missing parent directories."""
        m = -1 if mode is None else int(mode)
        with self._busy():
            if isinstance(data, (bytes, bytearray, memoryview, str)):
                raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
                self._call(self._lib.sbsh_file_write, _lib.enc(session), _lib.enc(path), raw, len(raw), m,
                           int(parents))
                return len(raw)
            fd = data if isinstance(data, int) else data.fileno()
            n = ctypes.c_uint64()
            self._call(self._lib.sbsh_file_write_fd, _lib.enc(session), _lib.enc(path), fd, m, int(parents),
                       ctypes.byref(n))
            return int(n.value)

    def read_file(self, path: PathArg, session: Optional[str] = None, offset: int = 0,
                  length: Optional[int] = None) -> bytes:
        """The bytes of path (from offset, at most length of them)."""
        out, n = ctypes.c_void_p(), ctypes.c_size_t()
        with self._busy():
            self._call(self._lib.sbsh_file_read, _lib.enc(session), _lib.enc(path), offset,
                       -1 if length is None else length, ctypes.byref(out), ctypes.byref(n))
        try:
            return ctypes.string_at(out.value, n.value) if n.value and out.value else b""
        finally:
            self._lib.sbsh_free(out)

    def read_file_into(self, path: PathArg, into: Union[int, IO[bytes]], session: Optional[str] = None, offset: int = 0,
                       length: Optional[int] = None) -> int:
        """Copies path's bytes to a file object or descriptor without holding them in memory;
        returns how many."""
        if isinstance(into, int):
            fd = into
        else:
            into.flush()
            fd = into.fileno()
        n = ctypes.c_uint64()
        with self._busy():
            self._call(self._lib.sbsh_file_read_fd, _lib.enc(session), _lib.enc(path), fd, offset,
                       -1 if length is None else length, ctypes.byref(n))
        return int(n.value)

    def stat_file(self, path: PathArg, session: Optional[str] = None) -> FileInfo:
        """What path is: type, size, mode, mtime and a symlink's target."""
        return file_info(self._json(self._lib.sbsh_file_stat_json, _lib.enc(session), _lib.enc(path)))

    def list_files(self, path: PathArg = "", session: Optional[str] = None, recursive: bool = False,
                   depth: Optional[int] = None) -> List[FileInfo]:
        """A directory's entries, sorted; recursive: all beneath it; depth: that many levels
        beneath it (1: its own entries), as `sbsh file ls --depth`."""
        if depth is not None:
            if recursive:
                raise ValueError("list_files: give recursive (all levels) or depth (that many), not both")
            if depth < 1:
                raise ValueError(f"list_files: depth is a number of levels, 1 or more, not {depth}")
            return [file_info(d) for d in sequence_of(self._json(self._lib.sbsh_file_list_depth_json,
                                                                  _lib.enc(session), _lib.enc(path), depth))]
        return [file_info(d) for d in sequence_of(self._json(self._lib.sbsh_file_list_json, _lib.enc(session),
                                                              _lib.enc(path), int(recursive)))]

    # The operations of `sbsh file edit`, `file read --lines` and `file search`: each reads
    # files whole, at most 16 MiB (a larger one raises Refused, reason "file_failed").

    def edit_file(self, path: PathArg, old: Union[str, bytes], new: Union[str, bytes], session: Optional[str] = None,
                  replace_all: bool = False) -> FileEdit:
        """Replaces the text old (str as UTF-8, or bytes), exactly as in the file, with new,
        writing the file whole; it keeps its mode. old must occur exactly once unless
        replace_all: otherwise nothing changes and Refused is raised with reason "no_match"
        (0 times) or "not_unique" (the message says how many)."""
        old_b = old.encode("utf-8") if isinstance(old, str) else bytes(old)
        new_b = new.encode("utf-8") if isinstance(new, str) else bytes(new)
        if not old_b:
            raise ValueError("edit_file: old is empty: give the text to replace")
        return file_edit(self._json(self._lib.sbsh_file_edit, _lib.enc(session), _lib.enc(path), old_b, len(old_b),
                                    new_b, len(new_b), int(replace_all)))

    def read_lines(self, path: PathArg, line: int = 1, count: Optional[int] = None,
                   session: Optional[str] = None) -> FileLines:
        """Lines of path, from line (1 the first; negative counts from the end: -20 for the
        last 20), count of them (None: to the end), with their numbers and the file's."""
        if line == 0:
            raise ValueError("read_lines: line counts from 1, or from the end when negative; not 0")
        if count is not None and count < 0:
            raise ValueError(f"read_lines: count is a number of lines, 0 or more, not {count}")
        data, n, doc = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_void_p()
        with self._busy():
            self._call(self._lib.sbsh_file_read_lines, _lib.enc(session), _lib.enc(path), line,
                       -1 if count is None else count, ctypes.byref(data), ctypes.byref(n), ctypes.byref(doc))
        try:
            raw = ctypes.string_at(data.value, n.value) if n.value and data.value else b""
        finally:
            self._lib.sbsh_free(data)
        return file_lines(json.loads(_lib.take_string(self._lib, doc)), raw)

    def search_files(self, pattern: str, path: PathArg = "", session: Optional[str] = None,
                     glob: Optional[str] = None, ignore_case: bool = False) -> FileSearch:
        """The lines matching pattern, a POSIX extended regular expression (InvalidArgument
        when it is not one), in the files beneath path (default: the root; a file: that one)
        whose name matches glob ("*.py"); leaves out what a snapshot leaves out by default
        (.git, node_modules, ...), files that are not text and files over 16 MiB."""
        if not pattern:
            raise ValueError("search_files: pattern is empty: give a regular expression")
        return file_search(self._json(self._lib.sbsh_file_search_json, _lib.enc(session), _lib.enc(pattern),
                                      _lib.enc(path), _lib.enc(glob), int(ignore_case)))

    def remove_file(self, path: PathArg, session: Optional[str] = None, recursive: bool = False) -> None:
        with self._busy():
            self._call(self._lib.sbsh_file_remove, _lib.enc(session), _lib.enc(path), int(recursive))

    def make_directory(self, path: PathArg, session: Optional[str] = None, parents: bool = False) -> None:
        with self._busy():
            self._call(self._lib.sbsh_file_mkdir, _lib.enc(session), _lib.enc(path), int(parents))

    def move_file(self, src: PathArg, dst: PathArg, session: Optional[str] = None) -> None:
        with self._busy():
            self._call(self._lib.sbsh_file_move, _lib.enc(session), _lib.enc(src), _lib.enc(dst))

    # -- the daemon --

    def status(self) -> DaemonStatus:
        """The daemon: pid, version, uptime, socket, counters and sessions."""
        return daemon_status(self._json(self._lib.sbsh_status_json))

    def shutdown(self, keep_sessions: bool = False) -> None:
        """Stops sbshd and its sessions; with keep_sessions, the sessions go on running for
        the next sbshd to adopt. The Client cannot be used afterwards (close it)."""
        with self._busy():
            if keep_sessions:
                self._call(self._lib.sbsh_shutdown_keep_sessions)
            else:
                self._call(self._lib.sbsh_shutdown)


class Session:
    """A handle on one named session of a Client. `with client.session("build") as s:`
    removes the session when the block ends; without `with`, it stays (sessions outlive
    clients: that is what they are for)."""

    def __init__(self, client: Client, name: str) -> None:
        self.client = client
        self.name = name

    def __repr__(self) -> str:
        return f"Session({self.name!r})"

    def exec(self, command: Union[str, bytes], **kwargs: Any) -> ExecResult:
        """Client.exec in this session (same keyword arguments)."""
        return self.client.exec(command, self.name, **kwargs)

    def lease(self) -> "Lease":
        """Client.lease of this session's shell."""
        return self.client.lease(self.name)

    def start(self, command: str, name: Optional[str] = None, cwd: Optional[PathArg] = None,
              env: EnvLike = None) -> "Process":
        """Starts a background process in this session."""
        return self.client.start(command, self.name, name, cwd, env)

    def restart(self) -> None:
        """Replaces the shell (its state is lost; the definition is kept)."""
        self.client.restart_session(self.name)

    def remove(self) -> None:
        """Removes the session: its shell, wrapper and background processes end."""
        self.client.remove_session(self.name)

    def details(self) -> SessionDetails:
        return self.client.session_details(self.name)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, t: Optional[Type[BaseException]], e: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.remove()


class Process:
    """A handle on a background process (Client.start, Session.start, Client.process). The
    process is sbshd's, not this handle's: it goes on when the handle or its Client is gone,
    and any other Client can take it up again by id (Client.process)."""

    def __init__(self, client: Client, proc_id: int, name: str = "") -> None:
        self.client = client
        self.id = proc_id
        self.name = name

    def __repr__(self) -> str:
        return f"Process(id={self.id}, name={self.name!r})"

    def info(self) -> ProcessInfo:
        """Its state now."""
        for p in self.client.processes(include_finished=True):
            if p.id == self.id:
                return p
        raise ProcessNotFound(f"no background process {self.id}", code=_lib.ERR_NOT_FOUND, reason="no_such_process")

    def wait(self, timeout: Optional[float] = None) -> ProcessInfo:
        """Waits for it to end; its final state, with exit_code. Timeout when timeout passes
        first."""
        return self.client.wait(self.id, timeout)

    def kill(self, signal: Union[int, str] = _signal.SIGTERM) -> ProcessInfo:
        """Signals its whole tree (see Client.kill)."""
        return self.client.kill(self.id, signal)

    def logs(self, tail: int = 0, stdout: bool = True, stderr: bool = True) -> Logs:
        """What it has written so far (tail: the last N lines of each stream)."""
        return self.client.logs(self.id, tail=tail, stdout=stdout, stderr=stderr)

    def follow(self, on_output: Optional[OutputCallback] = None, canceller: Optional[Canceller] = None) -> Logs:
        """Streams its output to on_output(stream, data) until it ends (or canceller.cancel()),
        and returns all of it with its final state."""
        return self.client.logs(self.id, follow=True, on_output=on_output, canceller=canceller)


class Lease:
    """A lease of a session's shell (Client.lease; docs/architecture.md, "The direct path"):
    each run goes from this process to the shell and back on a socket of its own, not through
    sbshd, with fresh pipes: exact stdout and stderr, and the status the shell sends (checked
    to come from it). The shell's state (directory, variables) carries to and from the
    session's other commands.

        with client.lease("build") as lease:
            lease.run("cd /tmp; X=5")
            r = lease.run("echo $X; pwd")      # r.stdout == b"5\\n/tmp\\n"

    Its Client serves nothing else while it is held. It ends with release() (or the end of
    the `with` block, or the Client's close), and when sbshd ends it: another request queued
    on its session (another client's exec, a start, ...) or its shell's end. The next run then
    raises LeaseEnded, and after release() the Client serves again. A run cannot be stopped
    from this process (Ctrl-C waits for it; timeout= is sbshd's to enforce); the output is
    kept whole (no output_limit).
    """

    def __init__(self, client: Client, session: str, handle: ctypes.c_void_p) -> None:
        self.client = client
        self.session = session
        self._h = handle
        L = client._lib
        self._shell_pid = int(L.sbsh_lease_shell_pid(handle))
        self._generation = int(L.sbsh_lease_generation(handle))

    def __repr__(self) -> str:
        return f"Lease(session={self.session!r}, shell_pid={self._shell_pid}, held={self.held})"

    @property
    def held(self) -> bool:
        """True until it is released, or a run found that sbshd ended it."""
        return bool(self._h) and bool(self.client._conn) and self.client._lib.sbsh_lease_held(self._h) != 0

    @property
    def shell_pid(self) -> int:
        """The session's shell that runs its commands."""
        return self._shell_pid

    @property
    def generation(self) -> int:
        """Which shell of the session it is (as ExecResult.generation numbers them)."""
        return self._generation

    def run(self, command: Union[str, bytes], timeout: Optional[float] = None, *, check: bool = False) -> ExecResult:
        """Runs command at the shell's top level, stdin /dev/null, and waits for it: its
        ExecResult, as exec gives one (exact stdout and stderr, exit_code, signal, timed_out,
        cancelled). timeout: seconds, passed with the command for sbshd to stop it as it
        stops an exec that times out. check: raise as exec(check=True) does.

        Raises LeaseEnded when the lease is over (the command did not run), ValueError for a
        command holding a NUL byte or a timeout that is not positive.
        """
        L = self.client._lib
        text = _lib.enc(command)
        timeout_ms = _lib.ms(timeout, "timeout")
        r = ctypes.c_void_p()
        if not self._h:
            raise self._released()
        with self.client._busy():
            if not self._h:  # released by another thread meanwhile
                raise self._released()
            try:
                rc = int(L.sbsh_lease_run(self._h, text, timeout_ms, ctypes.byref(r)))
                if rc != _lib.OK:
                    raise self._error(rc)
                res = self.client._result(r)
            finally:
                L.sbsh_result_free(r)
        return check_result(command, res) if check else res

    @staticmethod
    def _released() -> LeaseEnded:
        return LeaseEnded("the lease was released: ask for another (Client.lease), or run the command with exec",
                          code=_lib.ERR_INVALID, reason="released")

    def _error(self, rc: int) -> Error:
        err = _lib.last_error(self.client._lib, rc, self.client._conn)
        if err.reason in ("eof", "protocol"):  # the lease's socket, not the connection
            return LeaseEnded(err.message, code=rc, reason=err.reason)
        if rc in (_lib.ERR_IO, _lib.ERR_PROTOCOL):  # a pipe or poll of this process failed
            return Error(err.message, code=rc, reason=err.reason)
        return err

    def release(self) -> None:
        """Ends the lease and waits for sbshd to say so; the Client then serves other requests
        again. Safe to call twice, after sbshd ended it, and after the Client was closed
        (which released it). Raises ConnectionLost when the connection failed."""
        c = self.client
        L = c._lib
        with c._lock:
            h, self._h = self._h, ctypes.c_void_p()
            if not h:
                return
            try:
                if c._conn:
                    rc = int(L.sbsh_lease_release(h))
                    if rc != _lib.OK:
                        raise _lib.last_error(L, rc, c._conn)
            finally:
                L.sbsh_lease_free(h)

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, t: Optional[Type[BaseException]], e: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.release()
