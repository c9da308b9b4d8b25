"""Round trip of exec("true") through the Python binding on one kept connection, next to a
minimal Python driver of a persistent bash over pipes (write `true; echo MARK$?`, read to
the marker). Usage: SBSH_LIB=.../libsbsh.so SBSH_BIN_DIR=.../bin python3 bench_exec.py [N]"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

import sbsh


def measure(fn, n):
    for _ in range(min(200, n)):
        fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    d = tempfile.mkdtemp(prefix="sbsh-pybench.")
    os.mkdir(os.path.join(d, "run"), 0o700)
    sock = os.path.join(d, "run", "s.sock")
    subprocess.run([os.path.join(os.environ["SBSH_BIN_DIR"], "sbshd"), "--socket", sock, "--state-dir", d + "/st"],
                   check=True)
    c = sbsh.Client(sock, autostart=False)
    bash = subprocess.Popen(["bash", "--noprofile", "--norc"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def driver():
        bash.stdin.write(b"true; echo __MARK__$?\n")
        bash.stdin.flush()
        while not bash.stdout.readline().startswith(b"__MARK__"):
            pass

    s = measure(lambda: c.exec("true", session="bench"), n)
    b = measure(driver, n)
    print(f"python exec('true')   sbsh {s:.3f} ms   marker driver {b:.3f} ms   ratio {s / b:.2f}x   goal <= 1.5x")
    c.shutdown()
    bash.stdin.close()
    bash.wait()


if __name__ == "__main__":
    main()
