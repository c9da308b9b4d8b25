"""The Python binding against a real sbshd on a private socket."""
import os
import shutil
import tempfile
import unittest

import sbsh


class BindingTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sbsh-py.")
        os.mkdir(os.path.join(self.dir, "run"), 0o700)
        os.environ["SBSH_STATE_DIR"] = os.path.join(self.dir, "state")
        os.environ["HOME"] = self.dir
        # libsbsh finds sbshd beside the program that runs it; here that is python3, so say where.
        self.sock = os.path.join(self.dir, "run", "sbsh.sock")
        os.system(f"{os.environ['SBSH_BIN_DIR']}/sbshd --socket {self.sock} --state-dir {self.dir}/state")
        self.c = sbsh.Client(self.sock, autostart=False)

    def tearDown(self):
        self.c.shutdown()
        self.c.close()
        shutil.rmtree(self.dir)

    def test_state_persists_and_bytes_are_exact(self):
        self.assertEqual(self.c.exec("cd /tmp; f() { echo fn; }", session="py").exit_code, 0)
        r = self.c.exec("pwd; f; printf 'a\\0b\\xff'; echo e >&2; exit 3", session="py")
        self.assertEqual(r.exit_code, 3)
        self.assertEqual(r.stdout, b"/tmp\nfn\na\0b\xff")
        self.assertEqual(r.stderr, b"e\n")
        self.assertTrue(r.shell_restarted)

    def test_timeout_stdin_streaming(self):
        r = self.c.exec("sleep 5", timeout=0.2)
        self.assertTrue(r.timed_out)
        self.assertEqual(self.c.exec("cat", stdin=b"in\0put").stdout, b"in\0put")
        seen = []
        r = self.c.exec("echo one; echo two >&2", on_output=lambda s, d: seen.append((s, d)))
        self.assertIn((1, b"one\n"), seen)
        self.assertIn((2, b"two\n"), seen)
        self.assertEqual(r.stdout, b"")

    def test_sessions_and_processes(self):
        self.c.create_session("made", cwd="/tmp", init=["Z=zz"], restart="on-failure")
        self.assertIn("made", [s.name for s in self.c.sessions()])
        pid = self.c.start("echo $Z; exit 6", session="made", name="job")
        self.assertGreater(pid, 0)
        self.assertEqual(self.c.wait("job", timeout=10), ("exited", 6))
        done = [p for p in self.c.processes(include_finished=True) if p.name == "job"]
        self.assertEqual((done[0].state, done[0].exit_code, done[0].session), ("exited", 6, "made"))
        self.assertEqual(self.c.logs("job"), b"zz\n")
        self.c.start("sleep 100", session="made", name="long")
        with self.assertRaises(sbsh.Error) as e:
            self.c.wait("long", timeout=0.1)
        self.assertEqual(e.exception.code, "timeout")
        self.c.kill("long")
        self.assertEqual(self.c.wait("long", timeout=5)[0], "killed")
        self.c.remove_session("made")
        self.assertNotIn("made", [s.name for s in self.c.sessions()])

    def test_errors_name_what_was_wrong(self):
        with self.assertRaises(sbsh.Error) as e:
            self.c.exec("true", session="bad name")
        self.assertEqual(e.exception.code, "invalid_session_name")


if __name__ == "__main__":
    unittest.main()
