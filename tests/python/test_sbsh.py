"""The Python binding (python/sbsh) against a real, private sbshd.

Environment: SBSH_LIB (libsbsh.so), SBSH_BIN_DIR (where sbshd is), PYTHONPATH (the module).
With a libsbsh built with sanitizers, LD_PRELOAD holds their runtimes for this python3 only:
it is dropped here so that the programs the tests start (sbshd, bash) do not inherit it.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import sbsh  # importing does not load libsbsh yet

# Kept for a python3 that a test starts: it loads libsbsh too, and needs them.
PYTHON_PRELOAD = os.environ.pop("LD_PRELOAD", None)
if PYTHON_PRELOAD is not None:
    # The sanitized programs the tests start check everything, leaks included.
    os.environ["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=1"

BIN_DIR = os.environ.get("SBSH_BIN_DIR", "")


def socket_accepts(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def pid_gone(pid):
    """True when pid does not exist or is a zombie (nobody may reap an orphan here)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before, or while, it was read
        return True


def group_gone_within(pgid, seconds):
    deadline = time.monotonic() + seconds
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


class PrivateDaemon:
    """sbshd in the foreground on a socket under a private XDG_RUNTIME_DIR (mode 0700)."""

    def __init__(self, reuse=None):
        self.dir = reuse.dir if reuse else tempfile.mkdtemp(prefix="sbsh-py.")
        self.run_dir = os.path.join(self.dir, "run")
        if not reuse:
            os.mkdir(self.run_dir, 0o700)
        self.sock = os.path.join(self.run_dir, "sbsh", "sbshd.sock")
        self.state = os.path.join(self.dir, "state")
        self.env = dict(os.environ, XDG_RUNTIME_DIR=self.run_dir, HOME=self.dir, TMPDIR=self.dir,
                        SBSH_STATE_DIR=self.state)
        self.env.pop("SBSH_SOCKET", None)
        self.log_path = os.path.join(self.dir, "sbshd.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [os.path.join(BIN_DIR, "sbshd"), "--socket", self.sock, "--foreground", "--state-dir", self.state],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + 30
        while not socket_accepts(self.sock):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"sbshd did not start: {self.log()}")
            time.sleep(0.05)

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            # A shutdown ends the sessions; a killed sbshd would leave them to be adopted.
            try:
                with sbsh.Client(self.sock, autostart=False) as c:
                    c.shutdown()
                self.proc.wait(timeout=20)
            except (sbsh.Error, subprocess.TimeoutExpired):
                pass
        if self.proc.poll() is None:
            self.proc.kill()  # our own child, by its pid
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class DaemonTestCase(unittest.TestCase):
    """A private sbshd for the class, and a client of it for each test."""
    @classmethod
    def setUpClass(cls):
        cls.d = PrivateDaemon()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def setUp(self):
        self.c = sbsh.Client(self.d.sock, autostart=False)

    def tearDown(self):
        self.c.close()


class BindingTest(DaemonTestCase):

    def test_state_persists_and_bytes_are_exact(self):
        r = self.c.exec("cd /tmp && X=5 && f() { echo \"fn-$1\"; }", session="py")
        self.assertEqual((r.exit_code, r.signal, r.error), (0, None, ""))
        r = self.c.exec("pwd; echo $X; f z", session="py")
        self.assertEqual(r.stdout, b"/tmp\n5\nfn-z\n")
        before = time.time()
        r = self.c.exec("printf 'a\\0b\\377\\n'; printf 'e\\0rr' >&2; (exit 7)", session="py")
        self.assertEqual(r.stdout, b"a\0b\xff\n")
        self.assertEqual(r.stderr, b"e\0rr")
        self.assertEqual(r.exit_code, 7)
        self.assertFalse(r.ok)
        self.assertFalse(r.timed_out or r.cancelled or r.shell_restarted)
        self.assertFalse(r.stdout_truncated or r.stderr_truncated)
        self.assertGreater(r.duration, 0)
        self.assertLess(abs(r.started_at - before), 5)

    def test_exit_ends_the_shell_and_says_so(self):
        self.c.exec("Y=kept", session="py-exit")
        r = self.c.exec("exit 3", session="py-exit")
        self.assertEqual(r.exit_code, 3)
        self.assertTrue(r.shell_restarted)
        self.assertTrue(r.ran)
        self.assertEqual(self.c.exec("echo ${Y:-lost}", session="py-exit").stdout, b"lost\n")

    def test_a_command_that_never_ran_says_so(self):
        self.c.create_session("py-never", restart="never")
        self.c.exec("exit 0", session="py-never")
        r = self.c.exec("echo no", session="py-never")
        self.assertFalse(r.ran)
        self.assertIsNone(r.exit_code)
        self.assertIn("restart", r.error)

    def test_cwd_and_env_apply_to_one_command(self):
        self.c.exec("cd /tmp", session="py-env")
        r = self.c.exec('pwd; echo "$A $B"', session="py-env", cwd="/", env={"A": "1", "B": "two words"})
        self.assertEqual(r.stdout, b"/\n1 two words\n")
        r = self.c.exec("pwd; echo ${A:-unset}", session="py-env", env=["C=3"])
        self.assertEqual(r.stdout, b"/tmp\nunset\n")

    def test_timeout_stops_the_command_and_keeps_the_session(self):
        self.c.exec("Z=still-here", session="py-timeout")
        t0 = time.monotonic()
        r = self.c.exec("sleep 30", session="py-timeout", timeout=0.3)
        self.assertTrue(r.timed_out)
        self.assertEqual(r.signal, signal.SIGTERM)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(self.c.exec("echo $Z", session="py-timeout").stdout, b"still-here\n")

    def test_stdin(self):
        self.assertEqual(self.c.exec("cat", stdin=b"in\0put").stdout, b"in\0put")
        self.assertEqual(self.c.exec("cat", stdin="text").stdout, b"text")
        self.assertEqual(self.c.exec("cat; echo done").stdout, b"done\n")  # no input: EOF at once
        r, w = os.pipe()
        os.write(w, b"from a pipe")
        os.close(w)
        try:
            self.assertEqual(self.c.exec("cat", stdin=r).stdout, b"from a pipe")
        finally:
            os.close(r)
        # A command that stops reading early: the rest is dropped, nobody dies of SIGPIPE.
        # (Python ignores SIGPIPE itself; the C test checks that libsbsh does not need that.)
        for _ in range(3):
            r = self.c.exec("head -c 5 | wc -c", stdin=b"x" * (20 << 20))
            self.assertEqual((r.exit_code, r.stdout), (0, b"5\n"))

    def test_streaming(self):
        seen = []
        r = self.c.exec("printf 'o1\\0'; printf 'e1' >&2; sleep 0.1; printf o2",
                        on_output=lambda s, d: seen.append((s, d)))
        self.assertEqual(b"".join(d for s, d in seen if s == sbsh.STDOUT), b"o1\0o2")
        self.assertEqual(b"".join(d for s, d in seen if s == sbsh.STDERR), b"e1")
        # The result keeps what was streamed, too.
        self.assertEqual((r.stdout, r.stderr, r.exit_code), (b"o1\0o2", b"e1", 0))

    def test_output_limit(self):
        r = self.c.exec("head -c 5000 /dev/zero; echo end", output_limit=1000)
        self.assertEqual(len(r.stdout), 1000)
        self.assertTrue(r.stdout_truncated)
        self.assertEqual(r.stdout_omitted, 5004 - 1000)
        self.assertTrue(r.stdout.endswith(b"\0end\n"))

    def test_a_detached_command_is_awaited_and_killed(self):
        r = self.c.exec("echo first; sleep 1; cd /; echo second", session="py-detach", detach_after=0.2)
        self.assertTrue(r.running)
        self.assertIsNone(r.exit_code)
        self.assertEqual(r.stdout, b"first\n")
        done = self.c.await_command(r.command_id)
        self.assertFalse(done.running)
        self.assertEqual((done.exit_code, done.stdout), (0, b"first\nsecond\n"))
        self.assertEqual(self.c.exec("pwd", session="py-detach").stdout, b"/\n")
        slow = self.c.exec("sleep 30", session="py-detach", detach_after=0.2)
        listed = [k for k in self.c.commands() if k.session == "py-detach"]
        self.assertEqual([(k.id, k.state, k.session, k.command) for k in listed],
                         [(slow.command_id, "running", "py-detach", "sleep 30")])
        self.assertTrue(listed[0].running and listed[0].detached and listed[0].pid)
        killed = self.c.kill_command(slow.command_id)
        self.assertTrue(killed.cancelled)
        self.assertEqual([k for k in self.c.commands() if k.session == "py-detach"], [])
        ended = [k for k in self.c.commands(include_finished=True) if k.id == slow.command_id]
        self.assertEqual([(k.state, k.cancelled) for k in ended], [("finished", True)])
        with self.assertRaises(sbsh.Error):
            self.c.await_command(987654321)

    def test_callback_exception_stops_the_command(self):
        def boom(stream, data):
            raise ValueError("stop here")
        t0 = time.monotonic()
        with self.assertRaises(ValueError):
            self.c.exec("echo first; sleep 30", session="py-cb", on_output=boom)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(self.c.exec("echo after", session="py-cb").stdout, b"after\n")

    def test_callback_may_not_reenter_the_client(self):
        errors = []

        def reenter(stream, data):
            try:
                self.c.exec("true")
            except sbsh.Error as e:
                errors.append(e)
        self.c.exec("echo x", on_output=reenter)
        self.assertEqual([e.reason for e in errors], ["reentrant_call"])

    def test_canceller_from_another_thread(self):
        self.c.exec("V=kept", session="py-cancel")
        k = sbsh.Canceller()
        threading.Timer(0.3, k.cancel).start()
        t0 = time.monotonic()
        r = self.c.exec("sleep 30; echo after", session="py-cancel", canceller=k)
        self.assertTrue(r.cancelled)
        self.assertFalse(r.ok)
        self.assertEqual(r.stdout, b"")  # the rest of the text did not run
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(self.c.exec("echo $V", session="py-cancel").stdout, b"kept\n")
        k.close()

    def test_ok_only_for_a_success(self):
        self.assertTrue(self.c.exec("true", session="py-ok").ok)
        self.assertFalse(self.c.exec("sleep 5", session="py-ok", timeout=0.2).ok)
        lost = self.c.exec("exit 0", session="py-ok")
        self.assertEqual(lost.exit_code, 0)
        self.assertTrue(lost.shell_restarted)
        self.assertFalse(lost.ok)
        self.c.create_session("py-ok-never", restart="never")
        self.c.exec("exit 0", session="py-ok-never")
        never = self.c.exec("true", session="py-ok-never")
        self.assertFalse(never.ran)
        self.assertFalse(never.ok)
        self.assertIsNone(never.started_at)

    def test_a_shell_lost_between_commands_is_reported(self):
        r = self.c.exec("echo $$", session="py-lost")
        gen = r.generation
        os.kill(int(r.stdout), signal.SIGKILL)
        deadline = time.monotonic() + 20
        reported = False  # a command that met the dying shell reports the loss itself
        while True:
            r = self.c.exec("true", session="py-lost")
            if not r.shell_restarted or time.monotonic() > deadline:
                break
            reported = True
        if reported:
            self.assertFalse(r.state_lost)
        else:
            self.assertTrue(r.state_lost)
            self.assertIn("signal 9", r.state_lost_reason)
        self.assertNotEqual(r.generation, gen)
        self.assertFalse(self.c.exec("true", session="py-lost").state_lost)

    def test_ctrl_c_is_forwarded_to_the_command(self):
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        with self.assertRaises(KeyboardInterrupt):
            self.c.exec("sleep 30", session="py-int")
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(self.c.exec("echo usable", session="py-int").stdout, b"usable\n")

    def test_errors_name_what_was_wrong(self):
        with self.assertRaises(sbsh.Error) as e:
            self.c.exec("true", session="bad name")
        self.assertEqual((e.exception.code, e.exception.reason), (sbsh.ERR_REFUSED, "invalid_session_name"))
        self.assertIn("bad name", e.exception.message)
        self.assertEqual(self.c.exec("echo fine").stdout, b"fine\n")  # the connection is still good
        with self.assertRaises(sbsh.Error) as e:
            self.c.remove_session("never-made")
        self.assertEqual(e.exception.code, sbsh.ERR_NOT_FOUND)
        with self.assertRaises(ValueError):
            self.c.exec("true", timeout=-1)
        with self.assertRaises(sbsh.Error) as e:
            sbsh.Client(os.path.join(self.d.run_dir, "nothing.sock"), autostart=False)
        self.assertEqual(e.exception.code, sbsh.ERR_UNREACHABLE)
        self.assertIn("nothing.sock", e.exception.message)

    def test_default_socket_and_context_manager(self):
        old = {k: os.environ.get(k) for k in ("XDG_RUNTIME_DIR", "SBSH_SOCKET")}
        os.environ["XDG_RUNTIME_DIR"] = self.d.run_dir
        os.environ.pop("SBSH_SOCKET", None)
        try:
            with sbsh.Client(autostart=False) as c:
                self.assertEqual(c.socket_path, self.d.sock)
                self.assertEqual(c.exec("echo hi").stdout, b"hi\n")
            with self.assertRaises(sbsh.Error):
                c.exec("true")  # closed
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.assertTrue(sbsh.version())

    def test_through_a_dial_command(self):
        far = [os.path.join(BIN_DIR, "sbsh"), "-S", self.d.sock, "--no-autostart", "dial-stdio"]
        with sbsh.Client(dial=far) as c:
            c.exec("cd /tmp && W=far", session="py-dial")
            chunks = []
            r = c.exec("echo $PWD $W; cat; printf 'e\\377' >&2", session="py-dial", stdin=b"in\0put\n",
                       on_output=lambda s, d: chunks.append((s, d)))
            self.assertEqual(r.exit_code, 0)
            self.assertEqual(b"".join(d for s, d in chunks if s == sbsh.STDOUT), b"/tmp far\nin\0put\n")
            self.assertEqual(b"".join(d for s, d in chunks if s == sbsh.STDERR), b"e\xff")
            self.assertIn("dial-stdio", c.socket_path)
        # The same session, seen from a local client.
        self.assertEqual(self.c.exec("echo $W", session="py-dial").stdout, b"far\n")
        with self.assertRaises(sbsh.Error) as e:
            sbsh.Client(dial=["sh", "-c", "echo cannot reach it >&2; exit 5"])
        self.assertEqual(e.exception.code, sbsh.ERR_UNREACHABLE)
        self.assertIn("exit status 5", str(e.exception))
        with self.assertRaises(sbsh.Error) as e:
            sbsh.Client(host="ftp://far")
        self.assertIn("invalid host", str(e.exception))
        for url, why in (("kubectl://ns/Pod", "pod's name"), ("podman://-it", "letter or digit")):
            with self.assertRaises(sbsh.InvalidArgument) as e:
                sbsh.Client(host=url)
            self.assertIn("invalid host '%s'" % url, str(e.exception))
            self.assertIn(why, str(e.exception))

    def test_session_limits(self):
        self.c.create_session("capped", limits=["nofile=32", "as=4G:infinity"])
        self.assertEqual(self.c.exec("ulimit -n; ulimit -Sv", session="capped").stdout, b"32\n4194304\n")
        self.assertEqual(self.c.session_details("capped").definition.limits,
                         ("nofile=32:32", "as=4294967296:infinity"))
        with self.assertRaises(sbsh.Error) as e:
            self.c.create_session("capped2", limits=["nofile=lots"])
        self.assertEqual(e.exception.reason, "bad_request")
        self.assertIn("limit nofile: 'lots'", str(e.exception))

    def test_run_plan(self):
        d = tempfile.mkdtemp(dir=self.d.dir)
        events = []
        plan = {"session": {"cwd": d}, "timeout": "30s", "stages": [
            {"name": "setup", "commands": ["export V=1", {"run": "echo $V $J", "env": {"J": 2}}]},
            {"name": "xfail", "expect": "failure", "commands": ["echo no >&2; (exit 4)"]}]}
        report, art = os.path.join(d, "r.json"), os.path.join(d, "art")
        rep = self.c.run_plan(plan, on_event=events.append, report=report, artifacts=art)
        self.assertEqual((rep.status, rep.reason, rep.error, rep.exit_status), ("passed", None, None, 0))
        self.assertEqual(rep.stages[0].commands[1].stdout, b"1 2\n")  # state carried
        self.assertEqual(rep.stages[1].commands[0].exit_code, 4)
        self.assertEqual(rep.stages[1].status, "passed")
        self.assertEqual([e.event for e in events],
                         ["plan_started", "stage_started", "command_started", "command_finished", "command_started",
                          "command_finished", "stage_finished", "stage_started", "command_started",
                          "command_finished", "stage_finished", "plan_finished"])
        with open(report) as f:
            self.assertEqual(json.load(f), json.loads(rep.json))
        with open(os.path.join(art, "xfail", "0.stderr"), "rb") as f:
            self.assertEqual(f.read(), b"no\n")
        self.assertNotIn(rep.session, [s.name for s in self.c.sessions()])

        # YAML text, a plan file, and a session name of one's choosing, kept.
        yaml = b"stages:\n  - {name: s, commands: ['echo yaml']}\n"
        self.assertEqual(self.c.run_plan(yaml).stages[0].commands[0].stdout, b"yaml\n")
        path = os.path.join(d, "p.yaml")
        with open(path, "wb") as f:
            f.write(yaml)
        rep = self.c.run_plan(path, session="py-plan", keep_session=True)
        self.assertEqual((rep.status, rep.session, rep.session_kept), ("passed", "py-plan", True))
        self.c.remove_session("py-plan")

        with self.assertRaises(sbsh.Error) as e:
            self.c.run_plan({"stages": [{"name": "a", "commands": [{"run": "x", "timeout": "10 minutes"}]}]})
        self.assertEqual((e.exception.code, e.exception.reason), (sbsh.ERR_INVALID, "invalid_plan"))
        self.assertIn('stages[0].commands[0].timeout: "10 minutes" is not a duration', e.exception.message)
        with self.assertRaises(TypeError):
            self.c.run_plan(42)

    def test_run_plan_is_cancelled_by_a_canceller_ctrl_c_or_a_failing_callback(self):
        d = tempfile.mkdtemp(dir=self.d.dir)
        plan = {"stages": [{"name": "long", "commands": ["sleep 30", f"touch {d}/never"]}]}

        def on_start(action):
            return lambda e: action() if e.event == "command_started" else None

        k = sbsh.Canceller()
        rep = self.c.run_plan(plan, on_event=on_start(k.cancel), canceller=k)
        self.assertEqual((rep.status, rep.exit_status), ("cancelled", 130))
        self.assertEqual([c.status for c in rep.stages[0].commands], ["cancelled", "skipped"])
        k.close()

        report = os.path.join(d, "int.json")
        with self.assertRaises(KeyboardInterrupt):
            self.c.run_plan(plan, on_event=on_start(lambda: os.kill(os.getpid(), signal.SIGINT)), report=report)
        with open(report) as f:
            self.assertEqual(json.load(f)["status"], "cancelled")

        def boom():
            raise ValueError("boom")
        report = os.path.join(d, "boom.json")
        with self.assertRaises(ValueError):
            self.c.run_plan(plan, on_event=on_start(boom), report=report)
        with open(report) as f:
            self.assertEqual(json.load(f)["stages"][0]["commands"][0]["status"], "cancelled")
        self.assertFalse(os.path.exists(os.path.join(d, "never")))
        self.assertEqual(self.c.exec("echo usable").stdout, b"usable\n")

    def test_session_from_a_snapshot(self):
        src = os.path.join(self.d.dir, "py-src")
        os.makedirs(src)
        with open(os.path.join(src, "f"), "w") as f:
            f.write("orig\n")
        old = os.getcwd()
        os.chdir(self.d.dir)
        try:
            self.c.create_session("py-snap", snapshot="py-src")  # relative to this process
        finally:
            os.chdir(old)
        copy = os.path.join(self.d.state, "snapshots", "py-snap")
        r = self.c.exec("cat f; pwd; echo changed > f", session="py-snap")
        self.assertEqual(r.stdout, b"orig\n" + copy.encode() + b"\n")
        with open(os.path.join(src, "f")) as f:
            self.assertEqual(f.read(), "orig\n")
        self.assertEqual(self.c.session_details("py-snap").definition.snapshot, src)
        with self.assertRaises(sbsh.Error) as e:
            self.c.create_session("py-snap2", snapshot=os.path.join(src, "f"))
        self.assertEqual(e.exception.reason, "bad_request")
        self.assertIn("not a directory", str(e.exception))
        self.c.remove_session("py-snap")
        self.assertFalse(os.path.exists(copy))
        # A root: the shells start there with SBSH_ROOT, and exec's cwd stays beneath it.
        root = os.path.realpath(src)
        self.c.create_session("py-root", root=src)
        r = self.c.exec('echo "$(pwd) $SBSH_ROOT"', session="py-root")
        self.assertEqual(r.stdout, (root + " " + root + "\n").encode())
        self.assertEqual(self.c.session_details("py-root").definition.root, root)
        with self.assertRaises(sbsh.Error) as e:
            self.c.exec("true", session="py-root", cwd="..")
        self.assertEqual(e.exception.reason, "outside_root")
        self.c.remove_session("py-root")

    def test_setup_builds_a_shared_environment_once(self):
        proj = os.path.join(self.d.dir, "py-env")
        os.makedirs(proj)
        with open(os.path.join(proj, "reqs.txt"), "w") as f:
            f.write("one\n")
        runs = os.path.join(self.d.dir, "py-env-runs")
        setup = 'echo run >> %s; cp reqs.txt "$SBSH_ENV/tool"; echo building; echo warned >&2' % runs
        seen = []
        self.c.create_session("py-env1", cwd=proj, setup=setup, setup_keys=["reqs.txt"],
                              on_setup_output=lambda stream, data: seen.append((stream, data)))
        self.assertEqual(b"".join(d for s, d in seen if s == 1), b"building\n")
        self.assertEqual(b"".join(d for s, d in seen if s == 2), b"warned\n")
        seen.clear()  # built already: nothing runs, nothing is said
        self.c.create_session("py-env2", cwd=proj, setup=setup, setup_keys=["reqs.txt"],
                              on_setup_output=lambda stream, data: seen.append((stream, data)))
        self.assertEqual(seen, [])
        with open(runs) as f:
            self.assertEqual(f.read(), "run\n")
        r1 = self.c.exec('cat "$SBSH_ENV/tool"; echo "$SBSH_ENV"', session="py-env1")
        r2 = self.c.exec('echo "$SBSH_ENV"', session="py-env2")
        self.assertEqual(r1.stdout.decode().splitlines()[0], "one")
        self.assertEqual(r1.stdout.decode().splitlines()[1], r2.stdout.decode().strip())
        d = self.c.session_details("py-env1").definition
        self.assertEqual((d.setup, d.setup_keys, d.sbsh_env), (setup, ("reqs.txt",), r2.stdout.decode().strip()))
        with self.assertRaises(sbsh.Error) as e:
            self.c.create_session("py-env3", cwd=proj, setup="echo broken >&2; exit 4")
        self.assertEqual(e.exception.reason, "setup_failed")
        self.assertIn("status 4", str(e.exception))
        self.assertIn("broken", str(e.exception))
        self.c.remove_session("py-env1")
        self.c.remove_session("py-env2")

    def test_files_beneath_a_sessions_root(self):
        src = os.path.join(self.d.dir, "py-files")
        os.makedirs(src)
        self.c.create_session("py-files", snapshot=src)
        copy = os.path.join(self.d.state, "snapshots", "py-files")
        data = bytes(range(256)) * 16
        self.assertEqual(self.c.write_file("in/data.bin", data, session="py-files", mode=0o600), len(data))
        self.assertEqual(self.c.read_file("in/data.bin", session="py-files"), data)
        self.assertEqual(self.c.read_file("in/data.bin", session="py-files", offset=256, length=3), b"\x00\x01\x02")
        self.assertEqual(os.stat(os.path.join(copy, "in/data.bin")).st_mode & 0o7777, 0o600)
        r, w = os.pipe()
        os.write(w, b"from a pipe\n")
        os.close(w)
        self.assertEqual(self.c.write_file("piped", r, session="py-files"), 12)
        os.close(r)
        out = os.path.join(self.d.dir, "piped.out")
        with open(out, "wb") as f:
            self.assertEqual(self.c.read_file_into("piped", f, session="py-files"), 12)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), b"from a pipe\n")
        r = self.c.exec("cat piped", session="py-files")
        self.assertEqual(r.stdout, b"from a pipe\n")
        self.assertEqual(self.c.stat_file("in/data.bin", session="py-files").size, len(data))
        self.assertEqual(self.c.stat_file("in/data.bin", session="py-files").mode, 0o600)
        self.c.make_directory("a/b", session="py-files", parents=True)
        self.c.move_file("piped", "a/b/piped", session="py-files")
        paths = [e.path for e in self.c.list_files(session="py-files", recursive=True)]
        self.assertEqual(paths, ["a", "a/b", "a/b/piped", "in", "in/data.bin"])
        self.c.remove_file("a", session="py-files", recursive=True)
        self.assertFalse(os.path.exists(os.path.join(copy, "a")))
        with self.assertRaises(sbsh.Error) as e:
            self.c.read_file("../../../etc/passwd", session="py-files")
        self.assertEqual(e.exception.reason, "outside_root")
        self.assertIn("'../../../etc/passwd' leads outside", str(e.exception))
        self.c.remove_session("py-files")

    def test_file_operations_edit_lines_search_and_depth(self):
        root = os.path.join(self.d.dir, "py-ops")
        os.makedirs(os.path.join(root, "src", "deep"))
        with open(os.path.join(root, "src", "app.py"), "wb") as f:
            f.write(b"def f():\n    return 1\n\ndef g():\n    return 1\n")
        with open(os.path.join(root, "src", "deep", "n.txt"), "wb") as f:
            f.write(b"no\nRETURN here\n")
        self.c.create_session("py-ops", root=root)
        app = os.path.join(root, "src", "app.py")

        def content():
            with open(app, "rb") as f:
                return f.read()
        before = content()
        with self.assertRaises(sbsh.Refused) as e:
            self.c.edit_file("src/app.py", "return 1", "return 2", session="py-ops")
        self.assertEqual(e.exception.reason, "not_unique")
        self.assertIn("occurs 2 times", str(e.exception))
        with self.assertRaises(sbsh.Refused) as e:
            self.c.edit_file("src/app.py", "return 9", "return 2", session="py-ops")
        self.assertEqual(e.exception.reason, "no_match")
        self.assertEqual(content(), before)
        done = self.c.edit_file("src/app.py", "def g():\n    return 1", b"def g():\n    return 2", session="py-ops")
        self.assertEqual(done, sbsh.FileEdit(path="src/app.py", replacements=1, size=45, first_line=4))
        self.assertEqual(content(), b"def f():\n    return 1\n\ndef g():\n    return 2\n")
        done = self.c.edit_file("src/app.py", "return", "yield", session="py-ops", replace_all=True)
        self.assertEqual(done.replacements, 2)
        self.assertEqual(content(), b"def f():\n    yield 1\n\ndef g():\n    yield 2\n")
        with self.assertRaises(ValueError):
            self.c.edit_file("src/app.py", "", "x", session="py-ops")

        lines = self.c.read_lines("src/app.py", 2, 2, session="py-ops")
        self.assertEqual((lines.data, lines.start_line, lines.end_line, lines.total_lines, lines.truncated),
                         (b"    yield 1\n\n", 2, 3, 5, True))
        tail = self.c.read_lines("src/app.py", -1, session="py-ops")
        self.assertEqual((tail.text, tail.start_line, tail.truncated), ("    yield 2\n", 5, False))
        with self.assertRaises(ValueError):
            self.c.read_lines("src/app.py", 0, session="py-ops")

        found = self.c.search_files("(yield|return) [0-9]|RETURN", session="py-ops")
        self.assertEqual([(m.path, m.line, m.text) for m in found.matches],
                         [("src/app.py", 2, "    yield 1"), ("src/app.py", 5, "    yield 2"),
                          ("src/deep/n.txt", 2, "RETURN here")])
        found = self.c.search_files("return", "src", session="py-ops", ignore_case=True, glob="*.txt")
        self.assertEqual([(m.path, m.line, m.data) for m in found.matches], [("deep/n.txt", 2, b"RETURN here")])
        self.assertEqual((found.files_searched, found.files_skipped, found.truncated, found.dir), (1, 0, False, "src"))
        found = self.c.search_files("RETURN", "src/deep/n.txt", session="py-ops")
        self.assertEqual(([(m.path, m.line) for m in found.matches], found.dir), ([("n.txt", 2)], "src/deep"))
        with self.assertRaises(sbsh.InvalidArgument):
            self.c.search_files("(", session="py-ops")

        self.assertEqual([e.path for e in self.c.list_files("src", session="py-ops", depth=1)], ["app.py", "deep"])
        self.assertEqual([e.path for e in self.c.list_files(session="py-ops", depth=2)], ["src", "src/app.py",
                                                                                         "src/deep"])
        with self.assertRaises(ValueError):
            self.c.list_files(session="py-ops", depth=0)
        self.c.remove_session("py-ops")

    def test_sessions(self):
        self.c.create_session("made", cwd="/tmp", env={"Z": "zz"}, init=["Y=from-init"], restart="on-failure")
        self.c.create_session("made", cwd="/tmp", env={"Z": "zz"}, init=["Y=from-init"], restart="on-failure")
        with self.assertRaises(sbsh.Error) as e:
            self.c.create_session("made", cwd="/var")
        self.assertEqual(e.exception.reason, "session_exists")
        self.assertEqual(self.c.exec("echo $Y $Z; pwd", session="made").stdout, b"from-init zz\n/tmp\n")
        made = [s for s in self.c.sessions() if s.name == "made"]
        self.assertEqual(len(made), 1)
        self.assertEqual(made[0].restart, "on-failure")
        self.assertGreater(made[0].shell_pid, 0)
        detail = self.c.session_details("made")
        self.assertEqual(detail.definition.init, ("Y=from-init",))
        self.assertEqual((detail.session.name, detail.session.state), ("made", "ready"))
        self.assertEqual(detail.history[-1].command, "echo $Y $Z; pwd")
        self.c.exec("W=1", session="made")
        self.c.restart_session("made")
        self.assertEqual(self.c.exec("echo ${W:-gone}", session="made").stdout, b"gone\n")
        self.c.remove_session("made")
        self.assertNotIn("made", [s.name for s in self.c.sessions()])
        st = self.c.status()
        self.assertEqual(st.pid, self.d.proc.pid)
        self.assertEqual(st.socket, self.d.sock)
        # This test's commands, at least; the restart above; this client.
        self.assertGreaterEqual(st.counters.commands, 3)
        self.assertGreaterEqual(st.counters.shell_restarts, 1)
        self.assertGreaterEqual(st.counters.clients, 1)

    def test_background_processes(self):
        pid = self.c.start("echo out-$P; echo err >&2; exit 6", session="py-bg", name="job", env={"P": "p"}).id
        self.assertGreater(pid, 0)
        p = self.c.wait("job", timeout=10)
        self.assertEqual((p.id, p.name, p.state, p.exit_code, p.session), (pid, "job", "exited", 6, "py-bg"))
        done = [p for p in self.c.processes(include_finished=True) if p.name == "job"]
        self.assertEqual((done[0].state, done[0].exit_code), ("exited", 6))
        self.assertLess(abs(done[0].started_at - p.started_at), 0.002)
        self.assertLessEqual(done[0].started_at, done[0].ended_at)
        self.assertLess(abs(done[0].ended_at - time.time()), 60)
        self.assertNotIn("job", [p.name for p in self.c.processes()])
        logs = self.c.logs("job")
        self.assertEqual((logs.stdout, logs.stderr), (b"out-p\n", b"err\n"))
        self.assertEqual(self.c.logs(pid, stderr=False).stdout, b"out-p\n")

        self.c.start("for i in 1 2 3; do echo $i; sleep 0.1; done", session="py-bg", name="ticker")
        seen = []
        logs = self.c.logs("ticker", follow=True, on_output=lambda s, d: seen.append(d))
        self.assertEqual(b"".join(seen), b"1\n2\n3\n")
        self.assertEqual(logs.process.state, "exited")

        # A follow ends early through a Canceller; the process goes on.
        self.c.start("while :; do echo tick; sleep 0.05; done", session="py-bg", name="endless")
        k = sbsh.Canceller()
        seen = []

        def take(stream, data):  # ends the follow once three lines have streamed in
            seen.append(data)
            if len(b"".join(seen)) >= 3 * len(b"tick\n"):
                k.cancel()

        logs = self.c.logs("endless", follow=True, on_output=take, canceller=k)
        self.assertEqual(logs.process.state, "running")
        self.assertGreaterEqual(b"".join(seen).count(b"tick\n"), 3)
        self.assertEqual(self.c.kill("endless", "KILL").state, "killed")

        self.c.start("sleep 100 & sleep 100; wait", session="py-bg", name="long")
        with self.assertRaises(sbsh.Error) as e:
            self.c.wait("long", timeout=0.2)
        self.assertEqual((e.exception.code, e.exception.reason), (sbsh.ERR_TIMEOUT, "timeout"))
        running = [p for p in self.c.processes() if p.name == "long"][0]
        os.killpg(running.pid, 0)  # exists
        p = self.c.kill("long", "TERM")
        self.assertEqual((p.state, p.signal), ("killed", signal.SIGTERM))
        listed = [q for q in self.c.processes(include_finished=True) if q.name == "long"][0]
        self.assertEqual((listed.state, listed.signal), ("killed", signal.SIGTERM))
        # The whole group goes: kill returns when the leader has ended; its children were
        # signalled with it and are reaped by the wrapper (a subreaper) moments later.
        self.assertTrue(group_gone_within(running.pid, 5))
        with self.assertRaises(sbsh.Error) as e:
            self.c.wait("no-such-process")
        self.assertEqual(e.exception.code, sbsh.ERR_NOT_FOUND)


class LeaseTest(DaemonTestCase):
    """Client.lease: runs on a session's shell, not through sbshd."""

    def test_runs_on_a_lease_carry_the_state_with_exact_bytes(self):
        self.c.exec("cd / && X=from-exec", session="py-lease", check=True)
        shell = int(self.c.exec("echo $$", session="py-lease").stdout)
        with self.c.lease("py-lease") as lease:
            self.assertIsInstance(lease, sbsh.Lease)
            self.assertTrue(lease.held)
            self.assertEqual((lease.session, lease.shell_pid), ("py-lease", shell))
            self.assertGreater(lease.generation, 0)
            self.assertEqual(lease.run("echo $X; pwd").stdout, b"from-exec\n/\n")
            r = lease.run("cd /tmp; X=5")
            self.assertEqual((r.exit_code, r.stdout, r.stderr, r.ok), (0, b"", b"", True))
            self.assertEqual(lease.run("echo $X; pwd").stdout, b"5\n/tmp\n")
            r = lease.run(b"printf 'a\\0b\\377\\n'; printf 'e\\0rr' >&2; (exit 7)", timeout=30)
            self.assertIsInstance(r, sbsh.ExecResult)
            self.assertEqual((r.stdout, r.stderr, r.exit_code, r.signal), (b"a\0b\xff\n", b"e\0rr", 7, None))
            self.assertFalse(r.ok or r.timed_out or r.cancelled or r.shell_restarted)
            self.assertEqual((r.stdout_bytes, r.stderr_bytes, r.generation), (5, 4, lease.generation))
            self.assertGreater(r.duration, 0)
            r = lease.run("sh -c 'kill -TERM $$'")
            self.assertEqual((r.signal, r.exit_code), (signal.SIGTERM, 128 + signal.SIGTERM))
            # sbshd stops a run whose timeout passes, and the result says so.
            r = lease.run("echo before; sleep 60; echo never", timeout=0.3)
            self.assertEqual(r.stdout, b"before\n")
            self.assertTrue(r.timed_out)
            self.assertFalse(r.ok)
            with self.assertRaises(sbsh.CommandFailed) as e:
                lease.run("echo out; (exit 3)", check=True)
            self.assertEqual((e.exception.result.exit_code, e.exception.result.stdout), (3, b"out\n"))
            # The Client serves nothing else while the lease is held, and says why.
            with self.assertRaises(sbsh.InvalidArgument) as e:
                self.c.exec("true", session="py-lease")
            self.assertEqual(e.exception.reason, "usage")
            self.assertIn("Lease.release", str(e.exception))
            with self.assertRaises(sbsh.InvalidArgument):
                self.c.lease("py-lease")
            with self.assertRaises(ValueError):
                lease.run("echo a\0b")
            with self.assertRaises(ValueError):
                lease.run("true", timeout=0)
            self.assertEqual(lease.run("echo still-$X").stdout, b"still-5\n")
        self.assertFalse(lease.held)
        with self.assertRaises(sbsh.LeaseEnded) as e:
            lease.run("echo never")
        self.assertEqual(e.exception.reason, "released")
        lease.release()  # twice: nothing to do
        self.assertEqual(self.c.exec("echo $X $PWD", session="py-lease").stdout, b"5 /tmp\n")

    def test_another_clients_exec_ends_the_lease(self):
        self.c.exec("true", session="py-lease-end")
        with sbsh.Client(self.d.sock, autostart=False) as other:
            lease = self.c.lease("py-lease-end")
            lease.run("Y=6", check=True)
            # Queued on the session, the exec ends the lease and runs in the same shell.
            self.assertEqual(other.exec("echo $Y", session="py-lease-end").stdout, b"6\n")
            with self.assertRaises(sbsh.LeaseEnded) as e:
                lease.run("echo never")
            self.assertEqual((e.exception.reason, e.exception.code), ("eof", sbsh.ERR_IO))
            self.assertIn("lease has ended", str(e.exception))
            self.assertFalse(lease.held)
            with self.assertRaises(sbsh.InvalidArgument):  # still the lease's until released
                self.c.exec("true", session="py-lease-end")
            lease.release()
        self.assertEqual(self.c.exec("echo again-$Y", session="py-lease-end").stdout, b"again-6\n")
        # Closing the Client releases its lease; release() afterwards only frees the handle.
        c2 = sbsh.Client(self.d.sock, autostart=False)
        lease = c2.session("py-lease-end").lease()
        self.assertEqual((lease.session, lease.run("echo $Y").stdout), ("py-lease-end", b"6\n"))
        c2.close()
        self.assertFalse(lease.held)
        lease.release()
        with self.assertRaises(sbsh.LeaseEnded):
            lease.run("true")
        self.assertEqual(self.c.exec("echo $Y", session="py-lease-end").stdout, b"6\n")

    def test_lease_refusals(self):
        with self.assertRaises(sbsh.SessionNotFound) as e:
            self.c.lease("py-no-such-lease")
        self.assertIn("py-no-such-lease", str(e.exception))
        with self.assertRaises(sbsh.InvalidArgument):
            self.c.lease("bad name")
        with self.assertRaises(ValueError):
            self.c.lease("a\0b")
        self.c.exec("true")
        with self.c.lease() as lease:  # the default session
            self.assertEqual((lease.session, lease.run("echo d").stdout), ("default", b"d\n"))
        far = [os.path.join(BIN_DIR, "sbsh"), "-S", self.d.sock, "--no-autostart", "dial-stdio"]
        with sbsh.Client(dial=far) as c:
            with self.assertRaises(sbsh.Refused) as e:
                c.lease()
            self.assertEqual(e.exception.reason, "not_supported")
            self.assertEqual(c.exec("echo usable").stdout, b"usable\n")


class ShutdownTest(unittest.TestCase):
    def test_shutdown_ends_the_daemon(self):
        d = PrivateDaemon()
        try:
            c = sbsh.Client(d.sock, autostart=False)
            c.exec("true", session="s")
            shell = [s.shell_pid for s in c.sessions() if s.name == "s"][0]
            c.shutdown()
            with self.assertRaises(sbsh.Error) as e:
                c.status()
            self.assertEqual(e.exception.code, sbsh.ERR_IO)
            c.close()
            self.assertEqual(d.proc.wait(timeout=30), 0)
            with self.assertRaises(ProcessLookupError):
                os.kill(d.proc.pid, 0)
            deadline = time.monotonic() + 5
            while not pid_gone(shell) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertTrue(pid_gone(shell))
        finally:
            d.stop()

    def test_shutdown_keeping_the_sessions_for_the_next_daemon(self):
        d = PrivateDaemon()
        try:
            with sbsh.Client(d.sock, autostart=False) as c:
                c.exec("cd /tmp; kept=yes", session="s")
                shell = [s.shell_pid for s in c.sessions() if s.name == "s"][0]
                c.shutdown(keep_sessions=True)
            self.assertEqual(d.proc.wait(timeout=30), 0)
            self.assertFalse(pid_gone(shell))
            d = PrivateDaemon(reuse=d)  # the next sbshd on the same socket adopts it
            with sbsh.Client(d.sock, autostart=False) as c:
                r = c.exec("echo $PWD $kept", session="s")
                self.assertEqual(r.stdout, b"/tmp yes\n")
                self.assertEqual([s.shell_pid for s in c.sessions() if s.name == "s"], [shell])
        finally:
            d.stop()

    def test_autostart_with_a_named_daemon(self):
        d = tempfile.mkdtemp(prefix="sbsh-py-auto.")
        try:
            run = os.path.join(d, "run")
            os.mkdir(run, 0o700)
            sock = os.path.join(run, "auto.sock")
            os.environ["SBSH_STATE_DIR"] = os.path.join(d, "state")
            with sbsh.Client(sock, autostart=True, daemon=os.path.join(BIN_DIR, "sbshd")) as c:
                pid = c.status().pid
                self.assertEqual(c.exec("echo started").stdout, b"started\n")
                c.shutdown()
            deadline = time.monotonic() + 30
            while not pid_gone(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertTrue(pid_gone(pid))
        finally:
            os.environ.pop("SBSH_STATE_DIR", None)
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
