"""The package's typed surface against a real, private sbshd: each exception where it is
documented, check=True, the Session and Process handles, and the AsyncClient (concurrency,
streaming, and cancellation that stops the command and keeps the session's state).

Environment: as test_sbsh.py (whose PrivateDaemon it uses).
"""
import asyncio
import concurrent.futures
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import sbsh

# A python3 this test starts loads libsbsh too: with a sanitized one it needs the runtimes
# that test_sbsh (imported first, whichever module unittest loads first) takes out of the
# environment of the other programs (sbshd, bash).
from test_sbsh import PYTHON_PRELOAD, DaemonTestCase, PrivateDaemon, pid_gone  # noqa: E402


def wait_for_file(path, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                text = f.read()
            if text.endswith("\n"):
                return text
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"{path} did not appear")


class NoThreads(concurrent.futures.Executor):
    """An executor that refuses work: in its place, it shows that a call took no thread."""

    def submit(self, fn, /, *args, **kwargs):
        raise AssertionError(f"{fn} was given to a worker thread")


def gone_within(pid, seconds):
    deadline = time.monotonic() + seconds
    while not pid_gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


class ApiTest(DaemonTestCase):

    # -- errors --

    def test_each_exception_where_documented(self):
        with self.assertRaises(sbsh.DaemonUnreachable) as e:
            sbsh.Client(os.path.join(self.d.run_dir, "nothing.sock"), autostart=False)
        self.assertEqual(e.exception.code, sbsh.ERR_UNREACHABLE)
        with self.assertRaises(sbsh.LibraryNotFound) as e:
            sbsh.Client(self.d.sock, autostart=False, lib=os.path.join(self.d.dir, "no-libsbsh.so"))
        self.assertIn("no-libsbsh.so", str(e.exception))
        with self.assertRaises(sbsh.SessionNotFound) as e:
            self.c.remove_session("api-never-made")
        self.assertEqual(e.exception.reason, "no_such_session")
        with self.assertRaises(sbsh.SessionNotFound):
            self.c.session_details("api-never-made")
        with self.assertRaises(sbsh.ProcessNotFound):
            self.c.wait("api-no-such-process")
        with self.assertRaises(sbsh.ProcessNotFound):
            self.c.process("api-no-such-process")
        with self.assertRaises(sbsh.CommandNotFound):
            self.c.await_command(987654321)
        with self.assertRaises(sbsh.InvalidArgument) as e:
            self.c.exec("true", session="bad name")
        self.assertEqual(e.exception.reason, "invalid_session_name")
        with self.assertRaises(sbsh.InvalidArgument) as e:
            self.c.run_plan({"stages": [{"name": "a", "commands": [{"run": "x", "timeout": "soon"}]}]})
        self.assertEqual(e.exception.reason, "invalid_plan")
        self.c.create_session("api-exists", cwd="/tmp")
        with self.assertRaises(sbsh.Refused) as e:
            self.c.create_session("api-exists", cwd="/")
        self.assertEqual(e.exception.reason, "session_exists")
        self.c.remove_session("api-exists")
        p = self.c.start("sleep 30", session="api-errors")
        with self.assertRaises(TimeoutError) as e:
            p.wait(timeout=0.2)
        self.assertIsInstance(e.exception, sbsh.Timeout)
        self.assertEqual(p.kill().state, "killed")
        # All of them are sbsh.Error; the connection survives every refusal.
        self.assertTrue(issubclass(sbsh.Timeout, sbsh.Error) and issubclass(sbsh.CommandFailed, sbsh.Error))
        self.assertEqual(self.c.exec("echo fine").stdout, b"fine\n")

    def test_the_connection_lost(self):
        d = PrivateDaemon()
        try:
            c = sbsh.Client(d.sock, autostart=False)
            c.shutdown()
            with self.assertRaises(sbsh.ConnectionLost) as e:
                c.status()
            self.assertIsInstance(e.exception, sbsh.DaemonUnreachable)
            self.assertEqual(e.exception.code, sbsh.ERR_IO)
            c.close()
            self.assertEqual(d.proc.wait(timeout=30), 0)
        finally:
            d.stop()

    def test_check(self):
        r = self.c.exec("echo ok", session="api-check", check=True)
        self.assertEqual((r.exit_code, r.text), (0, "ok\n"))
        with self.assertRaises(sbsh.CommandFailed) as e:
            self.c.exec("echo out; echo err >&2; (exit 3)", session="api-check", check=True)
        self.assertEqual((e.exception.result.exit_code, e.exception.result.stdout, e.exception.result.stderr_text),
                         (3, b"out\n", "err\n"))
        self.assertIn("exited with 3", str(e.exception))
        with self.assertRaises(sbsh.CommandTimedOut) as e:
            self.c.exec("sleep 30", session="api-check", timeout=0.2, check=True)
        self.assertIsInstance(e.exception, TimeoutError)
        self.assertIsInstance(e.exception, sbsh.CommandFailed)
        self.assertTrue(e.exception.result.timed_out)
        with self.assertRaises(sbsh.StateLost) as e:
            self.c.exec("exit 0", session="api-check", check=True)
        self.assertTrue(e.exception.result.shell_restarted)
        self.assertIsInstance(e.exception, sbsh.CommandFailed)
        # Without check, the same results come back.
        self.assertEqual(self.c.exec("(exit 3)", session="api-check").exit_code, 3)

    # -- records and handles --

    def test_records_are_frozen(self):
        r = self.c.exec("printf 'a\\377'", session="api-rec")
        self.assertEqual(r.text, "a\ufffd")
        with self.assertRaises(AttributeError):
            r.exit_code = 1
        self.assertFalse(hasattr(r, "__dict__"))  # slotted
        info = [s for s in self.c.sessions() if s.name == "api-rec"][0]
        self.assertIsInstance(info, sbsh.SessionInfo)
        self.assertIsInstance(self.c.status(), sbsh.DaemonStatus)
        self.c.remove_session("api-rec")

    def test_session_handle(self):
        with self.c.session("api-handle") as s:
            s.exec("cd /tmp && export H=1", check=True)
            self.assertEqual(s.exec("echo $PWD $H", check=True).text, "/tmp 1\n")
            self.assertEqual(s.details().history[-1].command, "echo $PWD $H")
            s.restart()
            self.assertEqual(s.exec("echo ${H:-gone}").text, "gone\n")
            p = s.start("echo from-bg")
            self.assertEqual(p.wait(timeout=10).exit_code, 0)
            self.assertEqual(p.logs().stdout, b"from-bg\n")
        self.assertNotIn("api-handle", [x.name for x in self.c.sessions()])  # the block removed it
        made = self.c.create_session("api-made", cwd="/tmp")
        self.assertEqual(made.exec("pwd").text, "/tmp\n")
        made.remove()

    def test_process_handle(self):
        p = self.c.start("for i in 1 2 3; do echo $i; sleep 0.05; done; exit 4", session="api-proc", name="api-ticker")
        seen = []
        logs = p.follow(on_output=lambda s, d: seen.append(d))
        self.assertEqual((b"".join(seen), logs.stdout, logs.process.exit_code), (b"1\n2\n3\n", b"1\n2\n3\n", 4))
        self.assertEqual(p.wait().exit_code, 4)
        self.assertEqual(self.c.process("api-ticker").id, p.id)
        long = self.c.start("sleep 30", session="api-proc")
        pid = long.info().pid
        self.assertTrue(long.kill("KILL").state == "killed")
        self.assertTrue(gone_within(pid, 5))

    def test_process_wait_after_the_starting_program_exited(self):
        # Another program starts it and exits; this one takes it up by id and waits.
        starter = ("import sbsh, sys\n"
                   "with sbsh.Client(sys.argv[1], autostart=False) as c:\n"
                   "    print(c.start('sleep 0.5; exit 5', session='api-orphan').id)\n")
        env = dict(self.d.env)
        if PYTHON_PRELOAD:
            env.update(LD_PRELOAD=PYTHON_PRELOAD, ASAN_OPTIONS="detect_leaks=0:abort_on_error=1")
        out = subprocess.run([sys.executable, "-c", starter, self.d.sock], check=True, capture_output=True,
                             env=env, timeout=60)
        proc_id = int(out.stdout)
        p = self.c.process(proc_id)
        info = p.wait(timeout=20)
        self.assertEqual((info.id, info.state, info.exit_code), (proc_id, "exited", 5))

    # -- confinement --

    def test_confined_session_reads_its_root_and_nothing_beside_it(self):
        with tempfile.TemporaryDirectory(dir=self.d.dir) as top:
            root, secret = os.path.join(top, "root"), os.path.join(top, "secret")
            os.mkdir(root)
            with open(os.path.join(root, "inside"), "w") as f:
                f.write("inside\n")
            with open(secret, "w") as f:
                f.write("secret\n")
            try:
                s = self.c.create_session("api-box", root=root, confine=True, no_network=True)
            except sbsh.Refused as e:
                if e.reason == "not_supported":
                    self.skipTest(str(e))
                raise
            try:
                r = s.exec("cat inside")
                self.assertEqual((r.exit_code, r.stdout, r.oom_killed), (0, b"inside\n", False))
                r = s.exec(f"cat {secret}")
                self.assertNotEqual(r.exit_code, 0)
                self.assertEqual(r.stdout, b"")
                self.assertIn("No such file or directory", r.stderr_text)  # outside its view
                d = s.details().definition
                self.assertTrue(d.confine and d.no_network)
                self.assertGreaterEqual(d.landlock_abi, 1)
                self.assertEqual((d.allow_write, d.read_only, d.memory_max, d.cgroup), ((), (), 0, None))
            finally:
                s.remove()
            # A path added read-only: the secret can be read, not written.
            os.mkdir(os.path.join(top, "out"))
            s = self.c.create_session("api-box2", root=root, confine=True, read_only=[secret],
                                      allow_write=[os.path.join(top, "out")])
            try:
                self.assertEqual(s.exec(f"cat {secret}").stdout, b"secret\n")
                self.assertNotEqual(s.exec(f"echo x >> {secret}").exit_code, 0)
                d = s.details().definition
                self.assertEqual((d.read_only, d.allow_write, d.no_network), ((secret,), (os.path.join(top, "out"),),
                                                                              False))
            finally:
                s.remove()

    def test_confinement_arguments_are_checked(self):
        with self.assertRaises(sbsh.InvalidArgument) as e:
            self.c.create_session("api-bad", root="/tmp", allow_write=["/tmp/x"])
        self.assertIn("confine=True", str(e.exception))
        with self.assertRaises(sbsh.InvalidArgument) as e:
            self.c.create_session("api-bad", root="/tmp", confine=True, allow_read=["relative/dir"])
        self.assertIn("must be absolute", str(e.exception))
        with self.assertRaises(sbsh.InvalidArgument):
            self.c.create_session("api-bad", memory="512M")  # type: ignore[arg-type]
        with self.assertRaises(sbsh.InvalidArgument):
            self.c.create_session("api-bad", cpu=0)
        with self.assertRaises(sbsh.InvalidArgument):
            self.c.create_session("api-bad", pids=2**64)
        with self.assertRaises(sbsh.InvalidArgument) as e:
            self.c.create_session("api-bad", confine=True)
        self.assertIn("set root or snapshot too", str(e.exception))
        self.assertNotIn("api-bad", [x.name for x in self.c.sessions()])

    # -- what reaches libsbsh as a C string --

    def test_a_nul_in_any_path_name_or_argument_raises_value_error(self):
        # A C string ends at its first NUL: cut there, "in.txt\0/../../../etc/passwd" named
        # in.txt. Every binding refuses it before anything is sent.
        root = os.path.join(self.d.dir, "api-nul")
        os.makedirs(root)
        with open(os.path.join(root, "in.txt"), "w") as f:
            f.write("inside\n")
        self.c.create_session("api-nul", root=root)
        evil = "in.txt\x00/../../../etc/passwd"
        calls = {
            "read_file": lambda: self.c.read_file(evil, session="api-nul"),
            "read_file bytes": lambda: self.c.read_file(evil.encode(), session="api-nul"),
            "read_file_into": lambda: self.c.read_file_into(evil, 1, session="api-nul"),
            "write_file": lambda: self.c.write_file(evil, b"x", session="api-nul"),
            "stat_file": lambda: self.c.stat_file(evil, session="api-nul"),
            "list_files": lambda: self.c.list_files("sub\x00", session="api-nul"),
            "remove_file": lambda: self.c.remove_file(evil, session="api-nul"),
            "make_directory": lambda: self.c.make_directory("d\x00x", session="api-nul"),
            "move_file from": lambda: self.c.move_file(evil, "moved", session="api-nul"),
            "move_file to": lambda: self.c.move_file("in.txt", "moved\x00x", session="api-nul"),
            "session": lambda: self.c.read_file("in.txt", session="api-nul\x00x"),
            "exec command": lambda: self.c.exec("echo ran\x00; rm in.txt", session="api-nul"),
            "exec cwd": lambda: self.c.exec("pwd", session="api-nul", cwd="/tmp\x00x"),
            "exec env": lambda: self.c.exec("true", session="api-nul", env={"A": "1\x002"}),
            "start": lambda: self.c.start("sleep 1\x00x", session="api-nul"),
            "start name": lambda: self.c.start("true", session="api-nul", name="p\x00x"),
            "create_session root": lambda: self.c.create_session("api-nul2", root=root + "\x00x"),
            "create_session init": lambda: self.c.create_session("api-nul2", init=["true\x00x"]),
            "remove_session": lambda: self.c.remove_session("api-nul\x00x"),
            "wait": lambda: self.c.wait("p\x00x"),
            "run_plan path": lambda: self.c.run_plan(os.path.join(root, "plan.yaml\x00x")),
            "run_plan report": lambda: self.c.run_plan({"stages": []}, report="r\x00x"),
            "client socket": lambda: sbsh.Client(self.d.sock + "\x00x", autostart=False),
        }
        for what, call in calls.items():
            with self.subTest(what):
                with self.assertRaises(ValueError) as e:
                    call()
                self.assertIn("NUL byte", str(e.exception))
        with open(os.path.join(root, "in.txt")) as f:
            self.assertEqual(f.read(), "inside\n")
        self.assertEqual(sorted(os.listdir(root)), ["in.txt"])
        self.assertNotIn("api-nul2", [x.name for x in self.c.sessions()])
        self.assertEqual(self.c.read_file("in.txt", session="api-nul"), b"inside\n")  # the client still serves
        self.c.remove_session("api-nul")

    def test_file_names_that_are_not_utf8_pass_as_bytes_or_as_os_fsdecode_gives_them(self):
        root = os.fsencode(os.path.realpath(self.d.dir)) + b"/api-bytes-\xff"
        os.makedirs(root + b"/d\xe9")
        with open(root + b"/caf\xe9.txt", "wb") as f:
            f.write(b"latin-1 name\n")
        name = b"caf\xe9.txt"
        self.c.create_session("api-bytes", root=root, cwd=os.fsdecode(root + b"/d\xe9"))
        self.assertEqual(self.c.read_file(name, session="api-bytes"), b"latin-1 name\n")
        self.assertEqual(self.c.read_file(os.fsdecode(name), session="api-bytes"), b"latin-1 name\n")
        self.assertEqual(self.c.stat_file(root + b"/" + name, session="api-bytes").size, 13)
        self.assertEqual(self.c.write_file(b"new-\xfe", b"written\n", session="api-bytes"), 8)
        with open(root + b"/new-\xfe", "rb") as f:
            self.assertEqual(f.read(), b"written\n")
        # A listing gives such a name as os.fsdecode makes it, which names the file again.
        listed = {e.path: e for e in self.c.list_files(session="api-bytes")}
        self.assertIn(os.fsdecode(name), listed)
        self.assertIn(os.fsdecode(b"new-\xfe"), listed)
        self.assertEqual(self.c.read_file(listed[os.fsdecode(name)].path, session="api-bytes"), b"latin-1 name\n")
        self.c.move_file(os.fsdecode(b"new-\xfe"), b"d\xe9/moved-\xfd", session="api-bytes")
        self.assertTrue(os.path.exists(root + b"/d\xe9/moved-\xfd"))
        r = self.c.exec("pwd; cat moved-*", session="api-bytes", cwd=root + b"/d\xe9", check=True)
        self.assertEqual(r.stdout, root + b"/d\xe9\nwritten\n")
        r = self.c.exec(b"ls ../caf\xe9.txt", session="api-bytes", check=True)  # the session's own cwd
        self.assertEqual(r.stdout, b"../caf\xe9.txt\n")
        # The session's own paths come back as os.fsdecode makes their bytes, in its listing
        # and its definition alike.
        info = {x.name: x for x in self.c.sessions()}["api-bytes"]
        self.assertEqual(os.fsencode(info.cwd), root + b"/d\xe9")
        definition = self.c.session_details("api-bytes").definition
        self.assertEqual(os.fsencode(definition.cwd), root + b"/d\xe9")
        self.assertEqual(os.fsencode(definition.root or ""), root)
        self.c.remove_file(b"d\xe9/moved-\xfd", session="api-bytes")
        self.c.remove_session("api-bytes")

    def test_a_terminal_and_a_command_waiting_for_input(self):
        r = self.c.exec("tty; stty size; read -p 'Name? ' name; echo \"hi $name\"", session="api-tty", tty=True,
                        cols=90, rows=20, stdin=b"Ada\n", check=True)
        self.assertIn(b"/dev/pts/", r.stdout)
        self.assertIn(b"20 90\r\n", r.stdout)
        self.assertIn(b"hi Ada\r\n", r.stdout)
        # The prompt, then the answer read from the input typed ahead. Where the terminal echoes
        # that input depends on when it reached the terminal (before `stty size` prints, or after).
        self.assertIn("20 90\n", r.screen)
        self.assertTrue(r.screen.endswith("Name? hi Ada\n"), r.screen)
        self.assertEqual(self.c.exec("echo $name", session="api-tty").stdout, b"Ada\n")
        r = self.c.exec("read -p 'Continue? ' answer", session="api-tty", tty=True, interactive=True,
                        detach_after=30)
        self.assertTrue(r.running and r.waiting_for_input)
        self.assertEqual(r.prompt, "Continue? ")
        a = self.c.send_input(r.command_id, "yes", enter=True, timeout=10)
        self.assertEqual((a.running, a.exit_code, a.stdout), (False, 0, b"yes\r\n"))
        self.assertEqual(self.c.exec("echo $answer", session="api-tty").stdout, b"yes\n")
        with self.assertRaises(sbsh.Refused) as refused:
            self.c.send_input(r.command_id, "again")
        self.assertEqual(refused.exception.reason, "no_input")
        with self.assertRaises(ValueError):
            self.c.exec("true", tty=True, cols=10001)

    def test_a_memory_limit_reaches_sbshd(self):
        # Made where sbshd has a cgroup v2 delegated to it, else refused with the reason.
        try:
            s = self.c.create_session("api-mem", memory=256 << 20, pids=64, cpu=0.5)
        except sbsh.Refused as e:
            self.assertEqual(e.reason, "not_supported")
            self.assertRegex(str(e), "memory|cgroup")
            return
        try:
            d = s.details().definition
            self.assertEqual((d.memory_max, d.pids_max, d.cpu_millis), (256 << 20, 64, 500))
            self.assertEqual(s.exec("echo ok").text, "ok\n")
        finally:
            s.remove()


class HousekeepingTest(DaemonTestCase):
    """What sessions leave behind, on a daemon of its own: prune reaches every idle session
    made implicitly."""

    def test_idle_sessions_are_pruned(self):
        self.c.exec("true", session="py-implicit", check=True)
        self.c.create_session("py-defined", cwd=self.d.dir)
        self.assertEqual(self.c.prune_sessions(idle=3600), [])
        self.assertEqual(self.c.prune_sessions(), ["py-implicit"])
        names = [s.name for s in self.c.sessions()]
        self.assertIn("py-defined", names)
        self.assertNotIn("py-implicit", names)
        with self.assertRaises(ValueError):
            self.c.prune_sessions(idle=-1)
        self.c.remove_session("py-defined")

    def test_a_kept_copy_is_listed_and_pruned(self):
        src = tempfile.mkdtemp(dir=self.d.dir)
        with open(os.path.join(src, "f"), "w") as f:
            f.write("kept\n")
        self.c.create_session("py-snap", snapshot=src)
        self.c.create_session("py-plain", cwd=src)
        with self.assertRaises(sbsh.InvalidArgument) as err:
            self.c.remove_session("py-plain", keep_copy=True)
        self.assertIn("not made from a snapshot", str(err.exception))
        self.c.remove_session("py-plain")
        kept = self.c.remove_session("py-snap", keep_copy=True)
        self.assertTrue(os.path.isfile(os.path.join(kept, "f")))
        copies = self.c.kept_copies()
        self.assertEqual([(k.session, k.path) for k in copies], [("py-snap", kept)])
        self.assertGreater(copies[0].size_bytes, 0)
        self.assertLess(abs(copies[0].kept_at - time.time()), 60)
        self.assertEqual([k.path for k in self.c.prune_kept_copies()], [kept])
        self.assertFalse(os.path.exists(kept))
        self.assertEqual(self.c.kept_copies(), [])

    def test_an_environment_is_listed_refused_while_used_and_pruned(self):
        src = tempfile.mkdtemp(dir=self.d.dir)
        setup = 'echo py > "$SBSH_ENV/mark"'
        self.c.create_session("py-env", cwd=src, setup=setup)
        envs = self.c.environments()
        self.assertEqual([(e.sessions, e.setup) for e in envs], [(("py-env",), setup)])
        e = envs[0]
        self.assertTrue(os.path.isfile(os.path.join(e.path, "mark")))
        self.assertGreater(e.size_bytes, 0)
        with self.assertRaises(sbsh.Refused) as err:
            self.c.remove_environment(e.hash)
        self.assertEqual(err.exception.reason, "env_in_use")
        self.c.remove_session("py-env")
        self.assertEqual(self.c.prune_environments(older_than=3600), [])
        self.assertEqual([x.hash for x in self.c.prune_environments(keep=0)], [e.hash])
        self.assertFalse(os.path.exists(e.path))
        with self.assertRaises(sbsh.NotFound):
            self.c.remove_environment(e.hash)
        with self.assertRaises(ValueError):
            self.c.prune_environments(keep=-1)

    def test_a_kept_commands_logs(self):
        r = self.c.exec("echo out; echo err >&2", session="py-logs", keep=True)
        got = []
        logs = self.c.command_logs(r.command_id, on_output=lambda stream, data: got.append((stream, data)))
        self.assertEqual((logs.stdout, logs.stderr, logs.exit_code, logs.running), (b"out\n", b"err\n", 0, False))
        self.assertEqual(b"".join(d for s, d in got if s == sbsh.STDERR), b"err\n")
        self.assertEqual((logs.stdout_bytes, logs.stderr_bytes, r.stdout_bytes), (4, 4, 4))
        only = self.c.command_logs(r.command_id, follow=True, stdout=False)
        self.assertEqual((only.stdout, only.stderr), (b"", b"err\n"))
        since = self.c.command_logs(r.command_id, stdout_offset=1, stderr_offset=3)
        self.assertEqual((since.stdout, since.stderr), (b"ut\n", b"\n"))
        with self.assertRaises(ValueError):
            self.c.command_logs(r.command_id, stdout_offset=-1)
        with self.assertRaises(sbsh.CommandNotFound):
            self.c.command_logs(987654321)
        self.c.remove_session("py-logs")


class AsyncTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = PrivateDaemon()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def run_async(self, coro):
        return asyncio.run(asyncio.wait_for(coro, 60))

    def test_a_waiting_command_is_answered_from_asyncio(self):
        async def main():
            async with sbsh.AsyncClient(self.d.sock, autostart=False) as c:
                r = await c.exec("""python3 -c 'n = input("Name? "); print("hi " + n)'""", session="aio-in",
                                 interactive=True, detach_after=30)
                a = await c.send_input(r.command_id, "Ada", enter=True, timeout=10)
                await c.remove_session("aio-in")
                return r, a
        r, a = self.run_async(main())
        self.assertTrue(r.waiting_for_input)
        self.assertEqual(r.prompt, "Name? ")
        self.assertEqual((a.running, a.exit_code, a.stdout), (False, 0, b"hi Ada\n"))

    def test_generated_methods_reach_sbshd_through_the_generic_call(self):
        # restart_session, session_details and sessions are generated (sbsh/_requests.py,
        # from the requests' declarations) and go through sbsh_request_json.
        from sbsh import _requests
        for name in ("restart_session", "session_details", "sessions", "environments", "remove_environment"):
            self.assertIs(getattr(sbsh.Client, name), getattr(_requests._Requests, name))
            self.assertIs(getattr(sbsh.AsyncClient, name), getattr(_requests._AsyncRequests, name))

        async def main():
            async with sbsh.AsyncClient(self.d.sock, autostart=False) as c:
                await c.exec("export MARK=kept", session="aio-gen", check=True)
                before = await c.session_details("aio-gen")
                self.assertEqual((await c.session_details(b"aio-gen")).session.name, "aio-gen")  # bytes, as before
                await c.restart_session("aio-gen")
                after = await c.exec("echo ${MARK:-gone}", session="aio-gen")
                names = [s.name for s in await c.sessions()]
                with self.assertRaises(sbsh.SessionNotFound):
                    await c.restart_session("aio-never-made")
                await c.remove_session("aio-gen")
                return before, after, names
        before, after, names = self.run_async(main())
        self.assertEqual((before.session.name, before.history[-1].command), ("aio-gen", "export MARK=kept"))
        # A new shell: the variable went with the old one, and the result says so.
        self.assertEqual((after.stdout, after.state_lost), (b"gone\n", True))
        self.assertIn("aio-gen", names)

    def test_concurrent_exec_over_sessions_is_exact(self):
        async def main():
            async with sbsh.AsyncClient(self.d.sock, autostart=False, max_connections=10) as c:
                # Ten at once open the ten connections (on worker threads: connecting blocks).
                await asyncio.gather(*(c.exec(f"export S={n}; cd /tmp", session=f"aio-{n}", check=True)
                                       for n in range(10)))
                # From then on, exec takes no thread: the event loop drives every command.
                pool, c._pool = c._pool, NoThreads()
                t0 = time.monotonic()
                try:
                    rs = await asyncio.gather(*(c.exec(f"echo $S-{i}; echo e{i} >&2; sleep 0.2; (exit {i % 7})",
                                                       session=f"aio-{i % 10}") for i in range(50)))
                finally:
                    c._pool = pool
                elapsed = time.monotonic() - t0
                for n in range(10):
                    await c.remove_session(f"aio-{n}")
                return rs, elapsed
        rs, elapsed = self.run_async(main())
        for i, r in enumerate(rs):
            self.assertEqual((r.stdout, r.stderr, r.exit_code), (f"{i % 10}-{i}\n".encode(), f"e{i}\n".encode(), i % 7))
        # Five 0.2 s commands per session, the ten sessions at once: serially it takes 10 s.
        self.assertLess(elapsed, 8)

    def test_cancelled_task_stops_the_command_and_keeps_the_state(self):
        pidfile = os.path.join(tempfile.mkdtemp(dir=self.d.dir), "pid")

        async def main():
            async with sbsh.AsyncClient(self.d.sock, autostart=False) as c:
                await c.exec("cd /tmp && KEPT=yes", session="aio-cancel", check=True)
                task = asyncio.ensure_future(c.exec(f"sh -c 'echo $$ > {pidfile}; exec sleep 30'",
                                                    session="aio-cancel"))
                pid = int(await asyncio.get_running_loop().run_in_executor(None, wait_for_file, pidfile))
                t0 = time.monotonic()
                task.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await task
                self.assertLess(time.monotonic() - t0, 10)
                self.assertTrue(gone_within(pid, 5), f"the command's process {pid} is still there")
                r = await c.exec("echo $PWD $KEPT", session="aio-cancel")
                self.assertEqual((r.text, r.state_lost, r.shell_restarted), ("/tmp yes\n", False, False))
                await c.remove_session("aio-cancel")
        self.run_async(main())

    def test_a_lease_from_asyncio(self):
        async def main():
            async with sbsh.AsyncClient(self.d.sock, autostart=False, max_connections=2) as c:
                await c.exec("cd / && X=1", session="aio-lease", check=True)
                async with await c.lease("aio-lease") as lease:
                    self.assertIsInstance(lease, sbsh.AsyncLease)
                    self.assertTrue(lease.held)
                    self.assertGreater(lease.shell_pid, 1)
                    await lease.run("cd /tmp; X=5", check=True)
                    r = await lease.run("echo $X; pwd; printf 'e\\0' >&2; (exit 4)", timeout=30)
                    self.assertEqual((r.stdout, r.stderr, r.exit_code), (b"5\n/tmp\n", b"e\0", 4))
                    # The lease keeps its connection: the pool's other one serves the rest.
                    other = await c.exec("echo other", session="aio-lease-other")
                    self.assertEqual(other.stdout, b"other\n")
                    # A cancelled run ends with its command; the lease goes on.
                    task = asyncio.ensure_future(lease.run("sleep 0.3; Y=after-cancel"))
                    await asyncio.sleep(0.05)
                    task.cancel()
                    with self.assertRaises(asyncio.CancelledError):
                        await task
                    self.assertEqual((await lease.run("echo $Y")).stdout, b"after-cancel\n")
                    # A request queued on the session ends the lease.
                    self.assertEqual((await c.exec("echo $X", session="aio-lease")).stdout, b"5\n")
                    with self.assertRaises(sbsh.LeaseEnded):
                        await lease.run("echo never")
                    self.assertFalse(lease.held)
                self.assertFalse(lease.held)
                with self.assertRaises(sbsh.LeaseEnded):
                    await lease.run("true")
                # Its connection is back in the pool: two execs at once still get one each.
                rs = await asyncio.gather(c.exec("echo $X", session="aio-lease"),
                                          c.exec("echo o", session="aio-lease-other"))
                self.assertEqual([x.stdout for x in rs], [b"5\n", b"o\n"])
                self.assertLessEqual(len(c._all), 2)
                # Closing the AsyncClient releases a held lease; release() afterwards is quiet.
                held = await c.session("aio-lease").lease()
                self.assertEqual((await held.run("echo $X")).stdout, b"5\n")
                await c.remove_session("aio-lease-other")
            await held.release()
            self.assertFalse(held.held)
            async with sbsh.AsyncClient(self.d.sock, autostart=False) as c:
                self.assertEqual((await c.exec("echo $X", session="aio-lease")).stdout, b"5\n")
                await c.remove_session("aio-lease")
        self.run_async(main())

    def test_housekeeping_and_a_followed_command(self):
        async def main():
            async with sbsh.AsyncClient(self.d.sock, autostart=False) as c:
                r = await c.exec("echo one; sleep 0.3; echo two", session="aio-kept", detach_after=0.1)
                self.assertTrue(r.running)
                chunks = [x async for x in c.follow_command(r.command_id)]
                self.assertEqual(b"".join(x.data for x in chunks), b"one\ntwo\n")
                logs = await c.command_logs(r.command_id)
                self.assertEqual((logs.stdout, logs.exit_code), (b"one\ntwo\n", 0))
                self.assertEqual(await c.kept_copies(), [])
                self.assertEqual(await c.prune_kept_copies(), [])
                self.assertEqual(await c.environments(), [])
                self.assertEqual(await c.prune_environments(), [])
                self.assertIn("aio-kept", await c.prune_sessions())
        self.run_async(main())

    def test_stream_plan_and_process(self):
        async def main():
            async with sbsh.AsyncClient(self.d.sock, autostart=False) as c:
                items = [x async for x in c.exec_stream("echo a; sleep 0.1; echo b >&2; exit 2", session="aio-s")]
                chunks, result = items[:-1], items[-1]
                self.assertTrue(all(isinstance(x, sbsh.OutputChunk) for x in chunks))
                self.assertEqual(b"".join(x.data for x in chunks if x.stream == sbsh.STDOUT), b"a\n")
                self.assertEqual(b"".join(x.data for x in chunks if x.stream == sbsh.STDERR), b"b\n")
                self.assertEqual((result.exit_code, result.stdout, result.stderr), (2, b"a\n", b"b\n"))

                plan = {"stages": [{"name": "one", "commands": ["echo p"]}]}
                got = [x async for x in c.run_plan_stream(plan)]
                self.assertEqual([e.event for e in got[:-1]], ["plan_started", "stage_started", "command_started",
                                                               "command_finished", "stage_finished",
                                                               "plan_finished"])
                self.assertIsInstance(got[-1], sbsh.PlanReport)
                self.assertEqual((got[-1].status, got[-1].stages[0].commands[0].stdout), ("passed", b"p\n"))

                p = await c.session("aio-s").start("echo 1; sleep 0.1; echo 2; exit 3")
                out = b"".join([x.data async for x in p.follow()])
                self.assertEqual(out, b"1\n2\n")
                self.assertEqual((await p.wait(timeout=10)).exit_code, 3)
                with self.assertRaises(sbsh.SessionNotFound):
                    await c.remove_session("aio-never-made")
                await c.remove_session("aio-s")
        self.run_async(main())

    def test_file_operations(self):
        async def main():
            root = tempfile.mkdtemp(dir=self.d.dir)
            with open(os.path.join(root, "t.txt"), "wb") as f:
                f.write(b"a\nb\nc\n")
            async with sbsh.AsyncClient(self.d.sock, autostart=False) as c:
                await c.create_session("aio-ops", root=root)
                done = await c.edit_file("t.txt", "b\n", "B\nB2\n", session="aio-ops")
                self.assertEqual((done.replacements, done.size, done.first_line), (1, 9, 2))
                with open(os.path.join(root, "t.txt"), "rb") as f:
                    self.assertEqual(f.read(), b"a\nB\nB2\nc\n")
                lines = await c.read_lines("t.txt", 2, 2, session="aio-ops")
                self.assertEqual((lines.data, lines.end_line, lines.total_lines), (b"B\nB2\n", 3, 4))
                found = await c.search_files("^B", session="aio-ops")
                self.assertEqual([(m.path, m.line, m.text) for m in found.matches], [("t.txt", 2, "B"), ("t.txt", 3, "B2")])
                self.assertEqual([e.path for e in await c.list_files(session="aio-ops", depth=1)], ["t.txt"])
                with self.assertRaises(sbsh.Refused):
                    await c.edit_file("t.txt", "zzz", "y", session="aio-ops")
                await c.remove_session("aio-ops")
        self.run_async(main())


if __name__ == "__main__":
    unittest.main()
