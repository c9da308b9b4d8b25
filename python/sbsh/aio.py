"""The asyncio client: AsyncClient, with the surface of Client, and its handles AsyncSession,
AsyncProcess and AsyncLease.

    async with sbsh.AsyncClient() as c:
        results = await asyncio.gather(*(c.exec("make -j4", session=f"build-{i}") for i in range(8)))
        async for item in c.exec_stream("pytest -x", session="test"):
            ...  # OutputChunk as it arrives, then the ExecResult

How it runs: a connection serves one request at a time, so an AsyncClient keeps a pool of
connections (at most max_connections, opened as concurrency needs them and reused), and
each request borrows one. exec (and exec_stream) needs no thread: libsbsh's
sbsh_exec_start sends the request and the event loop drives the rest through the call's
descriptor (loop.add_reader), so a thousand commands in flight are a thousand descriptors
in one loop. The other requests, which libsbsh offers only as blocking calls (sessions,
processes, plans, files; opening a connection), run on worker threads of the client's own
pool of max_connections threads. Requests beyond max_connections wait their turn. Commands
in one session run one after another in sbshd whatever the client does; commands in
different sessions run at the same time.

Cancellation: cancelling the task that awaits exec (or exec_stream, run_plan, a follow)
stops the command as a Canceller does (SIGTERM to its process group, SIGKILL after the grace
period) and waits for it to end, so that the connection is free again; the session's shell
and its state (directory, variables) are kept. Then CancelledError propagates.
"""
from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import signal as _signal
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import (Any, AsyncIterator, Callable, Dict, List, Optional, Sequence, Type, TypeVar, Union)

from . import _lib
from ._lib import EnvLike, PathArg
from ._requests import _AsyncRequests
from .client import Canceller, Client, Lease, PlanLike, StdinLike, _CallbackGuard, check_result
from .errors import ConnectionLost, LeaseEnded, Timeout
from .types import (CommandInfo, DaemonStatus, EnvironmentInfo, ExecResult, FileEdit, FileInfo, FileLines, FileSearch,
                    Logs, OutputChunk, PlanEvent, PlanReport, ProcessInfo, SessionDetails)

__all__ = ["AsyncClient", "AsyncSession", "AsyncProcess", "AsyncLease"]

T = TypeVar("T")


class _Conn:
    """A pooled connection and the canceller that stops what runs on it. healthy: False once
    a request on it failed in a way that leaves it unusable."""

    def __init__(self, client: Client, canceller: Canceller) -> None:
        self.client = client
        self.canceller = canceller
        self.healthy = True

    def close(self) -> None:
        self.client.close()
        self.canceller.close()


class AsyncClient(_AsyncRequests):
    """Connections to sbshd for asyncio (see the module's documentation).

    socket, autostart, lib, daemon, host, dial: as for Client. max_connections: how many
    requests run at once (each on a connection of its own). Use it in `async with`, or call
    `await connect()` first and `await close()` at the end.
    """

    def __init__(self, socket: Optional[PathArg] = None, autostart: bool = True, lib: Optional[str] = None,
                 daemon: Optional[PathArg] = None, host: Optional[str] = None, dial: Optional[Sequence[str]] = None,
                 max_connections: int = 32) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self._args = (socket, autostart, lib, daemon, host, dial)
        self._lib = lib
        self._max = max_connections
        self._idle: List[_Conn] = []
        self._all: List[_Conn] = []
        self._sem: Optional[asyncio.Semaphore] = None
        self._pool: Optional[ThreadPoolExecutor] = None
        self._closed = False

    # -- the pool --

    def _open(self) -> _Conn:
        socket, autostart, lib, daemon, host, dial = self._args
        client = Client(socket, autostart, lib, daemon, host, dial)
        try:
            return _Conn(client, Canceller(lib))
        except BaseException:
            client.close()
            raise

    def _executor(self) -> ThreadPoolExecutor:
        if self._closed:
            raise RuntimeError("the AsyncClient is closed")
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self._max, thread_name_prefix="sbsh-aio")
            self._sem = asyncio.Semaphore(self._max)
        return self._pool

    async def connect(self) -> "AsyncClient":
        """Opens the first connection, so that DaemonUnreachable comes here if it comes."""
        pool = self._executor()
        if not self._all:
            conn = await asyncio.get_running_loop().run_in_executor(pool, self._open)
            self._all.append(conn)
            self._idle.append(conn)
        return self

    @contextlib.asynccontextmanager
    async def _borrow(self) -> AsyncIterator[_Conn]:
        """A pooled connection for one request (opened when none is idle and fewer than
        max_connections are); it goes back to the pool afterwards unless it failed."""
        pool = self._executor()
        assert self._sem is not None
        loop = asyncio.get_running_loop()
        async with self._sem:
            if self._idle:
                conn = self._idle.pop()
            else:
                opening = loop.run_in_executor(pool, self._open)
                try:
                    conn = await asyncio.shield(opening)
                except asyncio.CancelledError:
                    # The connection still opens in its thread: close it when it has.
                    opening.add_done_callback(_close_when_open)
                    raise
                self._all.append(conn)
            conn.canceller.reset()
            healthy = False
            try:
                yield conn
                healthy = True
            except ConnectionLost:
                raise
            except BaseException:
                healthy = not conn.client.closed and conn.healthy
                raise
            finally:
                if healthy and conn.healthy and not self._closed:
                    self._idle.append(conn)
                else:
                    if conn in self._all:  # close() took them all meanwhile
                        self._all.remove(conn)
                    conn.close()

    async def _run(self, fn: Callable[[Client, Canceller], T], stoppable: bool = True) -> T:
        """Runs fn(client, canceller) on a pooled connection in a worker thread. Cancelled,
        it stops the call through the canceller and waits for it before re-raising."""
        pool = self._executor()
        loop = asyncio.get_running_loop()
        async with self._borrow() as conn:
            fut = loop.run_in_executor(pool, fn, conn.client, conn.canceller)
            return await _finish(fut, conn.canceller.cancel if stoppable else None)

    async def close(self) -> None:
        """Closes every connection (sessions and processes go on)."""
        self._closed = True
        conns, self._all, self._idle = self._all, [], []
        for c in conns:
            c.close()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await asyncio.get_running_loop().run_in_executor(None, pool.shutdown)

    async def __aenter__(self) -> "AsyncClient":
        return await self.connect()

    async def __aexit__(self, t: Optional[Type[BaseException]], e: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        await self.close()

    # -- exec --

    async def exec(self, command: Union[str, bytes], session: Optional[str] = None, *, cwd: Optional[PathArg] = None,
                   env: EnvLike = None, timeout: Optional[float] = None, stdin: StdinLike = None,
                   on_output: Optional[Callable[[int, bytes], None]] = None, output_limit: Optional[int] = None,
                   grace: Optional[float] = None, detach_after: Optional[float] = None, keep: bool = False,
                   check: bool = False, tty: bool = False, cols: int = 0, rows: int = 0,
                   interactive: bool = False) -> ExecResult:
        """Client.exec, awaited. on_output is called on the event loop's thread."""
        loop = asyncio.get_running_loop()
        async with self._borrow() as conn:
            c, L = conn.client, conn.client._lib
            o, keep_alive = c._exec_opts(command, session, cwd, env, timeout, stdin, output_limit, grace,
                                         detach_after, keep, tty=tty, cols=cols, rows=rows, interactive=interactive)
            guard = None
            if on_output is not None:
                # Passed on, and kept in the result too (as without a callback).
                guard = _CallbackGuard(on_output, conn.canceller.cancel)
                o.on_output, o.collect_output = guard.c_fn, 1
            o.cancel_fd = conn.canceller.fileno()
            call = ctypes.c_void_p()
            rc = int(L.sbsh_exec_start(c._conn, ctypes.byref(o), ctypes.byref(call)))
            if rc != _lib.OK:
                raise _lib.last_error(L, rc, c._conn)
            fut: asyncio.Future[ExecResult] = loop.create_future()
            fd = int(L.sbsh_exec_call_fd(call))
            alive: List[Any] = [o, keep_alive, guard]  # the C call refers to these until it ends

            def ready() -> None:
                if fut.done():
                    return
                r = ctypes.c_void_p()
                rc = int(L.sbsh_exec_call_step(call, ctypes.byref(r)))
                if rc == _lib.PENDING:
                    return
                loop.remove_reader(fd)
                try:
                    if rc != _lib.OK:
                        err = _lib.last_error(L, rc, c._conn)
                        if isinstance(err, ConnectionLost):
                            conn.healthy = False
                        fut.set_exception(err)
                    elif guard is not None and guard.error is not None:
                        fut.set_exception(guard.error)
                    else:
                        fut.set_result(c._result(r))
                except BaseException as e:  # nothing may escape into the event loop
                    fut.set_exception(e)
                finally:
                    L.sbsh_result_free(r)
                    L.sbsh_exec_call_free(call)
                    alive.clear()
            loop.add_reader(fd, ready)
            res = await _finish(fut, conn.canceller.cancel)
        return check_result(command, res) if check else res

    async def exec_stream(self, command: Union[str, bytes], session: Optional[str] = None,
                          **kwargs: Any) -> AsyncIterator[Union[OutputChunk, ExecResult]]:
        """Runs a command and yields its output as it arrives (OutputChunk), then its
        ExecResult (which has the output too). Keyword arguments as exec's."""
        if "on_output" in kwargs:
            raise TypeError("exec_stream yields the output: it takes no on_output")
        queue: asyncio.Queue[OutputChunk] = asyncio.Queue()
        task = asyncio.ensure_future(self.exec(command, session, on_output=lambda s, d: queue.put_nowait(
            OutputChunk(s, d)), **kwargs))
        async for item in _drain(queue, task):
            yield item

    async def await_command(self, command_id: int, timeout: Optional[float] = None,
                            output_limit: Optional[int] = None) -> ExecResult:
        return await self._run(lambda c, k: c.await_command(command_id, timeout, output_limit), stoppable=False)

    async def send_input(self, command_id: int, data: Union[str, bytes] = b"", enter: bool = False,
                         eof: bool = False, wait: bool = True, timeout: Optional[float] = None) -> ExecResult:
        """Client.send_input, awaited."""
        return await self._run(lambda c, k: c.send_input(command_id, data, enter=enter, eof=eof, wait=wait,
                                                         timeout=timeout), stoppable=False)

    async def kill_command(self, command_id: int, sig: Union[int, str] = 0) -> ExecResult:
        return await self._run(lambda c, k: c.kill_command(command_id, sig), stoppable=False)

    async def command_logs(self, command_id: int, stdout: bool = True, stderr: bool = True,
                           stdout_offset: int = 0, stderr_offset: int = 0) -> ExecResult:
        """Client.command_logs without follow, awaited: the output so far (after the offsets,
        when given) and the result."""
        return await self._run(lambda c, k: c.command_logs(command_id, stdout=stdout, stderr=stderr,
                                                           stdout_offset=stdout_offset,
                                                           stderr_offset=stderr_offset),
                               stoppable=False)

    async def follow_command(self, command_id: int) -> AsyncIterator[OutputChunk]:
        """Yields a kept command's output (from the start) until it ends. Leaving the loop
        early stops the following, not the command."""
        async for chunk in self._follow(lambda c, k, relay: c.command_logs(command_id, follow=True, canceller=k,
                                                                           on_output=relay)):
            yield chunk

    # -- leases --

    async def lease(self, session: Optional[str] = None) -> "AsyncLease":
        """Client.lease, awaited. The lease keeps one of the pool's connections until it is
        released (release(), or `async with await c.lease("s") as lease:`); each run takes a
        worker thread while it runs."""
        lease = AsyncLease(self)
        await lease._acquire(session)
        return lease

    # -- sessions --

    def session(self, name: str) -> "AsyncSession":
        """A handle on the session `name` (nothing is asked of sbshd)."""
        return AsyncSession(self, name)

    async def create_session(self, name: str, cwd: Optional[PathArg] = None, env: EnvLike = None,
                             init: Optional[Sequence[str]] = None, restart: str = "always",
                             limits: Optional[Sequence[str]] = None, snapshot: Optional[PathArg] = None,
                             root: Optional[PathArg] = None, setup: Optional[str] = None,
                             setup_keys: Optional[Sequence[PathArg]] = None, *, confine: bool = False,
                             allow_write: Optional[Sequence[PathArg]] = None,
                             allow_read: Optional[Sequence[PathArg]] = None,
                             read_only: Optional[Sequence[PathArg]] = None, no_network: bool = False,
                             memory: Optional[int] = None, pids: Optional[int] = None,
                             cpu: Optional[float] = None,
                             on_setup_output: Optional[Callable[[int, bytes], None]] = None) -> "AsyncSession":
        """Client.create_session, awaited. on_setup_output is called on the event loop's thread."""
        loop = asyncio.get_running_loop()
        relay: Optional[Callable[[int, bytes], None]] = None
        if on_setup_output is not None:
            told = on_setup_output

            def relay(stream: int, data: bytes) -> None:
                loop.call_soon_threadsafe(told, stream, data)
        await self._run(lambda c, k: c.create_session(name, cwd, env, init, restart, limits, snapshot, root,
                                                      setup, setup_keys, confine=confine, allow_write=allow_write,
                                                      allow_read=allow_read, read_only=read_only,
                                                      no_network=no_network, memory=memory, pids=pids, cpu=cpu,
                                                      on_setup_output=relay),
                        stoppable=False)
        return AsyncSession(self, name)

    async def remove_session(self, name: str, keep_copy: bool = False) -> Optional[str]:
        return await self._run(lambda c, k: c.remove_session(name, keep_copy), stoppable=False)

    async def prune_sessions(self, idle: float = 0) -> List[str]:
        return await self._run(lambda c, k: c.prune_sessions(idle), stoppable=False)

    # -- environments --

    async def prune_environments(self, keep: Optional[int] = None,
                                 older_than: Optional[float] = None) -> List[EnvironmentInfo]:
        return await self._run(lambda c, k: c.prune_environments(keep, older_than), stoppable=False)

    # -- background processes --

    async def start(self, command: str, session: Optional[str] = None, name: Optional[str] = None,
                    cwd: Optional[PathArg] = None, env: EnvLike = None) -> "AsyncProcess":
        p = await self._run(lambda c, k: c.start(command, session, name, cwd, env), stoppable=False)
        return AsyncProcess(self, p.id, p.name)

    async def process(self, proc: Union[int, str]) -> "AsyncProcess":
        p = await self._run(lambda c, k: c.process(proc), stoppable=False)
        return AsyncProcess(self, p.id, p.name)

    async def processes(self, include_finished: bool = False) -> List[ProcessInfo]:
        return await self._run(lambda c, k: c.processes(include_finished), stoppable=False)

    async def commands(self, include_finished: bool = False) -> List[CommandInfo]:
        return await self._run(lambda c, k: c.commands(include_finished), stoppable=False)

    async def kill(self, proc: Union[int, str], signal: Union[int, str] = _signal.SIGTERM) -> ProcessInfo:
        return await self._run(lambda c, k: c.kill(proc, signal), stoppable=False)

    async def wait(self, proc: Union[int, str], timeout: Optional[float] = None) -> ProcessInfo:
        """Client.wait, awaited; cancellable (it waits in slices of half a second)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            left = 0.5 if deadline is None else min(0.5, deadline - loop.time())
            if left <= 0:
                raise Timeout(f"process {proc} still runs after {timeout} s", code=-4, reason="timeout")
            try:
                return await self._run(lambda c, k: c.wait(proc, left), stoppable=False)
            except Timeout:
                continue

    async def logs(self, proc: Union[int, str], tail: int = 0, stdout: bool = True, stderr: bool = True) -> Logs:
        return await self._run(lambda c, k: c.logs(proc, tail=tail, stdout=stdout, stderr=stderr), stoppable=False)

    async def follow(self, proc: Union[int, str]) -> AsyncIterator[OutputChunk]:
        """Yields the process's output (from the start) until it ends. Leaving the loop early
        stops the following, not the process."""
        async for chunk in self._follow(lambda c, k, relay: c.logs(proc, follow=True, canceller=k, on_output=relay)):
            yield chunk

    async def _follow(self, call: Callable[[Client, Canceller, Callable[[int, bytes], None]], object]
                      ) -> AsyncIterator[OutputChunk]:
        """The chunks that call(client, canceller, relay) passes to relay, as they come."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[OutputChunk] = asyncio.Queue()

        def relay(stream: int, data: bytes) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, OutputChunk(stream, data))

        task = asyncio.ensure_future(self._run(lambda c, k: call(c, k, relay)))
        async for item in _drain(queue, task):
            if isinstance(item, OutputChunk):
                yield item

    # -- plans --

    async def run_plan(self, plan: PlanLike, *, session: Optional[str] = None, keep_session: bool = False,
                       output_limit: Optional[int] = None, artifacts: Optional[PathArg] = None,
                       report: Optional[PathArg] = None, events: Optional[PathArg] = None,
                       on_event: Optional[Callable[[PlanEvent], None]] = None) -> PlanReport:
        """Client.run_plan, awaited; on_event is called on the event loop's thread. Cancelled,
        the run is cancelled (its report still written) before CancelledError propagates."""
        loop = asyncio.get_running_loop()
        relay: Optional[Callable[[PlanEvent], None]] = None
        if on_event is not None:
            user_fn = on_event

            def relay_fn(ev: PlanEvent) -> None:
                loop.call_soon_threadsafe(user_fn, ev)
            relay = relay_fn
        return await self._run(lambda c, k: c.run_plan(plan, session=session, keep_session=keep_session,
                                                       output_limit=output_limit, artifacts=artifacts, report=report,
                                                       events=events, on_event=relay, canceller=k))

    async def run_plan_stream(self, plan: PlanLike, **kwargs: Any) -> AsyncIterator[Union[PlanEvent, PlanReport]]:
        """Runs a plan and yields its events as they happen, then its PlanReport. Keyword
        arguments as run_plan's."""
        if "on_event" in kwargs:
            raise TypeError("run_plan_stream yields the events: it takes no on_event")
        queue: asyncio.Queue[PlanEvent] = asyncio.Queue()
        task = asyncio.ensure_future(self.run_plan(plan, on_event=queue.put_nowait, **kwargs))
        async for item in _drain(queue, task):
            yield item

    # -- files and the daemon --

    async def write_file(self, path: PathArg, data: Union[bytes, str], session: Optional[str] = None,
                         mode: Optional[int] = None, parents: bool = True) -> int:
        return await self._run(lambda c, k: c.write_file(path, data, session, mode, parents), stoppable=False)

    async def read_file(self, path: PathArg, session: Optional[str] = None, offset: int = 0,
                        length: Optional[int] = None) -> bytes:
        return await self._run(lambda c, k: c.read_file(path, session, offset, length), stoppable=False)

    async def stat_file(self, path: PathArg, session: Optional[str] = None) -> FileInfo:
        return await self._run(lambda c, k: c.stat_file(path, session), stoppable=False)

    async def list_files(self, path: PathArg = "", session: Optional[str] = None,
                         recursive: bool = False, depth: Optional[int] = None) -> List[FileInfo]:
        return await self._run(lambda c, k: c.list_files(path, session, recursive, depth), stoppable=False)

    async def edit_file(self, path: PathArg, old: Union[str, bytes], new: Union[str, bytes],
                        session: Optional[str] = None, replace_all: bool = False) -> FileEdit:
        return await self._run(lambda c, k: c.edit_file(path, old, new, session, replace_all), stoppable=False)

    async def read_lines(self, path: PathArg, line: int = 1, count: Optional[int] = None,
                         session: Optional[str] = None) -> FileLines:
        return await self._run(lambda c, k: c.read_lines(path, line, count, session), stoppable=False)

    async def search_files(self, pattern: str, path: PathArg = "", session: Optional[str] = None,
                           glob: Optional[str] = None, ignore_case: bool = False) -> FileSearch:
        return await self._run(lambda c, k: c.search_files(pattern, path, session, glob, ignore_case),
                               stoppable=False)

    async def remove_file(self, path: PathArg, session: Optional[str] = None, recursive: bool = False) -> None:
        await self._run(lambda c, k: c.remove_file(path, session, recursive), stoppable=False)

    async def make_directory(self, path: PathArg, session: Optional[str] = None, parents: bool = False) -> None:
        await self._run(lambda c, k: c.make_directory(path, session, parents), stoppable=False)

    async def move_file(self, src: PathArg, dst: PathArg, session: Optional[str] = None) -> None:
        await self._run(lambda c, k: c.move_file(src, dst, session), stoppable=False)

    async def status(self) -> DaemonStatus:
        return await self._run(lambda c, k: c.status(), stoppable=False)

    async def shutdown(self, keep_sessions: bool = False) -> None:
        """Client.shutdown, awaited; the AsyncClient is closed afterwards."""
        try:
            await self._run(lambda c, k: c.shutdown(keep_sessions), stoppable=False)
        finally:
            await self.close()


async def _finish(fut: "asyncio.Future[T]", stop: Optional[Callable[[], None]]) -> T:
    """Awaits fut. Cancelled, calls stop() and still waits for fut (the call must end before
    its connection serves again), then re-raises the cancellation."""
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        if fut.cancelled():
            raise
        if stop is not None:
            stop()
        while not fut.done():
            try:
                await asyncio.shield(fut)
            except asyncio.CancelledError:
                continue
            except BaseException:
                break
        if not fut.cancelled():
            fut.exception()  # retrieved: it goes with the cancellation
        raise


def _close_when_open(f: "asyncio.Future[_Conn]") -> None:
    if not f.cancelled() and f.exception() is None:
        f.result().close()


async def _drain(queue: "asyncio.Queue[Any]", task: "asyncio.Future[T]") -> AsyncIterator[Any]:
    """Yields what arrives in queue while task runs, then what is left in it, then task's
    result. Leaving early cancels task (and waits for it)."""
    try:
        while not task.done():
            get = asyncio.ensure_future(queue.get())
            try:
                await asyncio.wait({get, task}, return_when=asyncio.FIRST_COMPLETED)
            except BaseException:
                get.cancel()
                raise
            if get.done():
                yield get.result()
            else:
                get.cancel()
        # The callbacks that filled the queue ran before the task could finish.
        while not queue.empty():
            yield queue.get_nowait()
        yield task.result()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


class AsyncLease:
    """A lease of a session's shell for asyncio (AsyncClient.lease): Lease's methods,
    awaited, on a connection of the pool kept for it until it is released.

        async with await c.lease("build") as lease:
            await lease.run("cd /tmp; X=5")
            r = await lease.run("echo $X")

    Cancelling a task that awaits run waits for the command to end (a lease's run cannot be
    stopped from the client) and then raises CancelledError; the lease stays usable.
    """

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self._stack = contextlib.AsyncExitStack()
        self._conn: Optional[_Conn] = None
        self._lease: Optional[Lease] = None
        self._running = 0

    async def _acquire(self, session: Optional[str]) -> None:
        loop = asyncio.get_running_loop()
        conn = await self._stack.enter_async_context(self.client._borrow())
        fut = loop.run_in_executor(self.client._executor(), conn.client.lease, session)
        try:
            lease: Lease = await _finish(fut, None)
        except BaseException as e:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                fut.result().release()  # granted as the task was cancelled: one round trip
            await self._stack.__aexit__(type(e), e, e.__traceback__)
            raise
        self._lease, self._conn = lease, conn

    def __repr__(self) -> str:
        return f"AsyncLease({self._lease!r})"

    @property
    def session(self) -> str:
        return self._lease.session if self._lease is not None else ""

    @property
    def held(self) -> bool:
        """True until it is released, or a run found that sbshd ended it."""
        if self._lease is None:
            return False
        return self._running > 0 or self._lease.held

    @property
    def shell_pid(self) -> int:
        return self._lease.shell_pid if self._lease is not None else 0

    @property
    def generation(self) -> int:
        return self._lease.generation if self._lease is not None else 0

    async def run(self, command: Union[str, bytes], timeout: Optional[float] = None, *,
                  check: bool = False) -> ExecResult:
        """Lease.run, awaited."""
        lease = self._lease
        if lease is None:
            raise LeaseEnded("the lease was released: ask for another (AsyncClient.lease), or run the command with "
                             "exec", code=_lib.ERR_INVALID, reason="released")
        loop = asyncio.get_running_loop()
        self._running += 1
        try:
            fut = loop.run_in_executor(self.client._executor(), functools.partial(lease.run, command, timeout,
                                                                                  check=check))
            return await _finish(fut, None)
        finally:
            self._running -= 1

    async def release(self) -> None:
        """Lease.release, awaited; the connection goes back to the pool. Safe to call twice."""
        lease, self._lease = self._lease, None
        if lease is None:
            return
        try:
            if self.client._closed:
                lease.release()  # its Client was closed, which released it: only frees it
            else:
                await _finish(asyncio.get_running_loop().run_in_executor(self.client._executor(), lease.release),
                              None)
        except BaseException as e:
            if isinstance(e, ConnectionLost) and self._conn is not None:
                self._conn.healthy = False
            await self._stack.__aexit__(type(e), e, e.__traceback__)
            raise
        await self._stack.aclose()

    async def __aenter__(self) -> "AsyncLease":
        return self

    async def __aexit__(self, t: Optional[Type[BaseException]], e: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        await self.release()


class AsyncSession:
    """A handle on one named session of an AsyncClient. `async with` removes the session when
    the block ends; without it, the session stays."""

    def __init__(self, client: AsyncClient, name: str) -> None:
        self.client = client
        self.name = name

    def __repr__(self) -> str:
        return f"AsyncSession({self.name!r})"

    async def exec(self, command: Union[str, bytes], **kwargs: Any) -> ExecResult:
        return await self.client.exec(command, self.name, **kwargs)

    def exec_stream(self, command: Union[str, bytes], **kwargs: Any) -> AsyncIterator[Union[OutputChunk, ExecResult]]:
        return self.client.exec_stream(command, self.name, **kwargs)

    async def lease(self) -> AsyncLease:
        """AsyncClient.lease of this session's shell."""
        return await self.client.lease(self.name)

    async def start(self, command: str, name: Optional[str] = None, cwd: Optional[PathArg] = None,
                    env: EnvLike = None) -> "AsyncProcess":
        return await self.client.start(command, self.name, name, cwd, env)

    async def restart(self) -> None:
        await self.client.restart_session(self.name)

    async def remove(self) -> None:
        await self.client.remove_session(self.name)

    async def details(self) -> SessionDetails:
        return await self.client.session_details(self.name)

    async def __aenter__(self) -> "AsyncSession":
        return self

    async def __aexit__(self, t: Optional[Type[BaseException]], e: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        await self.remove()


class AsyncProcess:
    """A handle on a background process, for asyncio (see Process)."""

    def __init__(self, client: AsyncClient, proc_id: int, name: str = "") -> None:
        self.client = client
        self.id = proc_id
        self.name = name

    def __repr__(self) -> str:
        return f"AsyncProcess(id={self.id}, name={self.name!r})"

    async def wait(self, timeout: Optional[float] = None) -> ProcessInfo:
        return await self.client.wait(self.id, timeout)

    async def kill(self, signal: Union[int, str] = _signal.SIGTERM) -> ProcessInfo:
        return await self.client.kill(self.id, signal)

    async def logs(self, tail: int = 0, stdout: bool = True, stderr: bool = True) -> Logs:
        return await self.client.logs(self.id, tail, stdout, stderr)

    def follow(self) -> AsyncIterator[OutputChunk]:
        return self.client.follow(self.id)
