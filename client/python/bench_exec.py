"""Round trip of exec("true") through the Python binding, next to a minimal Python driver of
a persistent bash over pipes.

sbsh:   one kept Client, c.exec("true", session="bench") and its full ExecResult; and the
        bare C call (sbsh_exec through ctypes), to show what the binding itself costs.
driver: one bash --noprofile --norc on pipes; write b"true; echo MARK$?\\n", read to the
        marker (os.write / os.read, no buffering layer).

Both are measured in the same run, alternating in blocks, after a warm-up; the table gives
medians (and p90) over N iterations each. sbshd is started on a private socket and stopped
afterwards.

Usage: SBSH_LIB=.../libsbsh.so SBSH_BIN_DIR=.../bin /usr/bin/python3 bench_exec.py [N]
"""
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
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sbsh  # noqa: E402


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
        c = sbsh.Client(os.path.join(tmp, "run", "sbshd.sock"), autostart=False)
        bash = MarkerDriver()
        # The C ABI call alone, through ctypes, without building an ExecResult: what the
        # binding itself adds is the difference to the first row.
        L = c._lib
        opts = sbsh._ExecOpts()
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
        times = {k: [] for k in cases}
        done = 0
        while done < n:  # alternate in blocks so that drifts of the machine hit both alike
            k = min(block, n - done)
            for name, fn in cases.items():
                t = times[name]
                for _ in range(k):
                    t0 = time.perf_counter_ns()
                    fn()
                    t.append(time.perf_counter_ns() - t0)
            done += k
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
    print(f'exec("true") round trip, {n} iterations each after {warmup} warm-up, '
          f"python {sys.version.split()[0]}, libsbsh {sbsh.version()}")
    rows = [
        ('sbsh: Client.exec("true")', f"{s_med:.3f} ms", f"{s_p90:.3f} ms"),
        ("sbsh: sbsh_exec via ctypes only", f"{c_med:.3f} ms", f"{c_p90:.3f} ms"),
        ("python marker driver of bash", f"{b_med:.3f} ms", f"{b_p90:.3f} ms"),
        ("ratio Client.exec / driver", f"{s_med / b_med:.2f}x", f"{s_p90 / b_p90:.2f}x"),
        ("binding's own cost", f"{(s_med - c_med) * 1000:.0f} us", ""),
    ]
    print(f"| {'':31} | {'median':>9} | {'p90':>9} |")
    print(f"| {'-' * 31} | {'-' * 9} | {'-' * 9} |")
    for name, med, p90 in rows:
        print(f"| {name:31} | {med:>9} | {p90:>9} |")


if __name__ == "__main__":
    main()
