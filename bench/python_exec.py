"""Round trip of exec("true") through the Python package, next to the C library's own in
the same run, and 1,000 concurrent async exec over 100 sessions.

sbsh:   one kept Client, c.exec("true", session="bench") and its full ExecResult; the bare
        C call (sbsh_exec through ctypes), to show what the binding itself costs; and the C
        library called from C (a small program built here against sbsh.h with cc, timing
        each sbsh_exec itself), the figure the Python round trip is held to (goal <= 1.5x).
driver: one bash --noprofile --norc on pipes; write b"true; echo MARK$?\\n", read to the
        marker (os.write / os.read, no buffering layer).
async:  one AsyncClient (max_connections 100) runs 1,000 exec("echo N") at once, spread
        over 100 sessions; each result is checked; throughput and the p50/p99 of each
        call's time from submission to result.

Both round trips are measured in the same run, alternating in blocks, after a warm-up; the
table gives medians (and p90) over N iterations each. sbshd is started on a private socket
and stopped afterwards.

Usage: SBSH_LIB=.../libsbsh.so SBSH_BIN_DIR=.../bin /usr/bin/python3 bench/python_exec.py [N]
"""
import asyncio
import ctypes
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # leave no __pycache__ in the source tree
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the source tree
# The package as the build staged it (BUILD/python: python with its generated module).
BUILD = os.path.dirname(os.path.abspath(os.environ.get("SBSH_BIN_DIR", os.path.join(ROOT, "build", "bin"))))
sys.path.insert(0, os.path.join(BUILD, "python"))
import sbsh  # noqa: E402
from sbsh import _lib  # noqa: E402

C_LOOP = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sbsh/sbsh.h>
/* Times n calls of sbsh_exec("true") in session "bench"; prints one duration (ns) a line. */
int main(int argc, char** argv) {
  sbsh_conn* c;
  if (argc < 3 || sbsh_connect(argv[1], 0, &c) != SBSH_OK) return 2;
  int n = atoi(argv[2]);
  sbsh_exec_opts o;
  sbsh_exec_opts_init(&o);
  o.command = "true";
  o.session = "bench";
  for (int i = 0; i < n; i++) {
    struct timespec a, b;
    sbsh_result* r;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (sbsh_exec(c, &o, &r) != SBSH_OK) return 3;
    sbsh_result_free(r);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%lld\n", (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec));
  }
  sbsh_close(c);
  return 0;
}
"""


def build_c_loop(tmp: str):
    """The C program, or None when no compiler is at hand."""
    lib = os.path.realpath(os.environ["SBSH_LIB"])
    include = os.path.join(ROOT, "client", "include")
    src, exe = os.path.join(tmp, "loop.c"), os.path.join(tmp, "loop")
    with open(src, "w") as f:
        f.write(C_LOOP)
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    subprocess.run([cc, "-O2", "-I", include, src, "-o", exe, lib, "-Wl,-rpath," + os.path.dirname(lib)],
                   check=True)
    return exe


def run_c_loop(exe: str, sock: str, k: int):
    out = subprocess.run([exe, sock, str(k)], check=True, capture_output=True).stdout
    return [int(x) for x in out.split()]


async def concurrent_execs(sock: str, total: int, sessions: int):
    """total exec calls at once over `sessions` sessions; (seconds, per-call latencies)."""
    async with sbsh.AsyncClient(sock, autostart=False, max_connections=sessions) as c:
        await asyncio.gather(*(c.exec("true", session=f"abench-{i}") for i in range(sessions)))

        async def one(i: int) -> float:
            t0 = time.perf_counter()
            r = await c.exec(f"echo {i}", session=f"abench-{i % sessions}")
            if r.stdout != f"{i}\n".encode():
                raise RuntimeError(f"wrong result for {i}: {r}")
            return time.perf_counter() - t0
        t0 = time.perf_counter()
        lat = await asyncio.gather(*(one(i) for i in range(total)))
        elapsed = time.perf_counter() - t0
        for i in range(sessions):
            await c.remove_session(f"abench-{i}")
        return elapsed, sorted(lat)


class MarkerDriver:
    """The baseline: bash on pipes, completion found by a marker in the output."""

    def __init__(self):
        self.p = subprocess.Popen(["bash", "--noprofile", "--norc"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.w, self.r = self.p.stdin.fileno(), self.p.stdout.fileno()

    def run(self, command: bytes) -> bytes:
        os.write(self.w, command + b"; echo MARK$?\n")
        buf = b""
        while True:
            buf += os.read(self.r, 65536)
            i = buf.rfind(b"MARK")
            if i >= 0 and buf.endswith(b"\n"):
                return buf[:i]

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def start_daemon(tmp: str) -> subprocess.Popen:
    run = os.path.join(tmp, "run")
    os.mkdir(run, 0o700)
    sock = os.path.join(run, "sbshd.sock")
    log = open(os.path.join(tmp, "sbshd.log"), "wb")
    d = subprocess.Popen([os.path.join(os.environ["SBSH_BIN_DIR"], "sbshd"), "--socket", sock, "--foreground",
                          "--state-dir", os.path.join(tmp, "state")], stdin=subprocess.DEVNULL, stdout=log,
                         stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while True:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(sock)
            return d
        except OSError:
            if d.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("sbshd did not start")
            time.sleep(0.05)
        finally:
            s.close()


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    warmup = max(100, n // 10)
    block = 100
    tmp = tempfile.mkdtemp(prefix="sbsh-pybench.")
    daemon = start_daemon(tmp)
    try:
        sock = os.path.join(tmp, "run", "sbshd.sock")
        c = sbsh.Client(sock, autostart=False)
        c_loop = build_c_loop(tmp)
        bash = MarkerDriver()
        # The C ABI call alone, through ctypes, without building an ExecResult: what the
        # binding itself adds is the difference to the first row.
        L = c._lib
        opts = _lib.ExecOpts()
        L.sbsh_exec_opts_init(ctypes.byref(opts))
        opts.command, opts.session = b"true", b"bench"

        def c_abi_only():
            r = ctypes.c_void_p()
            if L.sbsh_exec(c._conn, ctypes.byref(opts), ctypes.byref(r)) != 0:
                raise RuntimeError("sbsh_exec failed")
            L.sbsh_result_free(r)
        cases = {
            "sbsh binding": lambda: c.exec("true", session="bench"),
            "c abi only": c_abi_only,
            "marker driver": lambda: bash.run(b"true"),
        }
        assert c.exec("true", session="bench").exit_code == 0 and bash.run(b"echo hi") == b"hi\n"
        for fn in cases.values():
            for _ in range(warmup):
                fn()
        times = {k: [] for k in list(cases) + ["c library"]}
        if c_loop:
            run_c_loop(c_loop, sock, warmup)
        done = 0
        while done < n:  # alternate in blocks so that drifts of the machine hit both alike
            k = min(block, n - done)
            for name, fn in cases.items():
                t = times[name]
                for _ in range(k):
                    t0 = time.perf_counter_ns()
                    fn()
                    t.append(time.perf_counter_ns() - t0)
            if c_loop:
                times["c library"] += run_c_loop(c_loop, sock, k)
            done += k
        a_elapsed, a_lat = asyncio.run(concurrent_execs(sock, 1000, 100))
        c.shutdown()
        c.close()
        bash.close()
    finally:
        if daemon.poll() is None:
            try:
                daemon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        shutil.rmtree(tmp, ignore_errors=True)

    def stats(v):
        v = sorted(v)
        return statistics.median(v) / 1e6, v[int(len(v) * 0.9)] / 1e6

    s_med, s_p90 = stats(times["sbsh binding"])
    c_med, c_p90 = stats(times["c abi only"])
    b_med, b_p90 = stats(times["marker driver"])
    k_med, k_p90 = stats(times["c library"]) if times["c library"] else (float("nan"), float("nan"))
    print(f'exec("true") round trip, {n} iterations each after {warmup} warm-up, '
          f"python {sys.version.split()[0]}, libsbsh {sbsh.version()}")
    rows = [
        ('sbsh: Client.exec("true")', f"{s_med:.3f} ms", f"{s_p90:.3f} ms"),
        ("sbsh: sbsh_exec via ctypes only", f"{c_med:.3f} ms", f"{c_p90:.3f} ms"),
        ("sbsh: sbsh_exec from C", f"{k_med:.3f} ms", f"{k_p90:.3f} ms"),
        ("ratio Client.exec / C library", f"{s_med / k_med:.2f}x", f"{s_p90 / k_p90:.2f}x"),
        ("python marker driver of bash", f"{b_med:.3f} ms", f"{b_p90:.3f} ms"),
        ("ratio Client.exec / driver", f"{s_med / b_med:.2f}x", f"{s_p90 / b_p90:.2f}x"),
        ("binding's own cost", f"{(s_med - c_med) * 1000:.0f} us", ""),
    ]
    print(f"| {'':31} | {'median':>9} | {'p90':>9} |")
    print(f"| {'-' * 31} | {'-' * 9} | {'-' * 9} |")
    for name, med, p90 in rows:
        print(f"| {name:31} | {med:>9} | {p90:>9} |")
    print()
    print(f"AsyncClient: 1000 concurrent exec over 100 sessions (max_connections 100): "
          f"{a_elapsed:.2f} s, {1000 / a_elapsed:.0f} exec/s, per call p50 {a_lat[499] * 1000:.1f} ms, "
          f"p99 {a_lat[989] * 1000:.1f} ms")


if __name__ == "__main__":
    main()
