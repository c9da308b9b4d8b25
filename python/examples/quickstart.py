"""A session keeps its state between commands; check=True raises on failure."""
import sys

import sbsh


def main() -> int:
    with sbsh.Client() as c:
        work = c.session("example")
        work.exec("cd /tmp && export GREETING=hello", check=True)
        r = work.exec('echo "$GREETING from $PWD"', check=True)
        print(r.text, end="")
        try:
            work.exec("(exit 3)", check=True)
        except sbsh.CommandFailed as e:
            print(f"failed as expected: exit code {e.result.exit_code}")
        proc = work.start("sleep 0.2; echo done")
        info = proc.wait(timeout=10)
        print(f"background process {proc.id} ended with {info.exit_code}: {proc.logs().text!r}")
        work.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
