#!/usr/bin/env python3
"""Fails when two modules of one folder include each other.

A module is a header and the sources named after it: daemon/files.h and daemon/files.cpp; a
source without a header of its own belongs to the header whose name its own begins with
(daemon/server_clients.cpp to daemon/server.h). Module A uses module B when a file of A
includes B's header; A and B include each other when each uses the other. Such a pair is one
piece in two files: neither can be read, tested or changed alone. KNOWN lists the pairs still
to be taken apart (none now); the check fails on any other pair, and on a listed pair that is
gone (take it off the list).

  scripts/include_pairs.py [--list] [ROOT]

With --list it prints every pair and fails on none. scripts/lint.sh runs it.
"""
import os
import re
import sys

KNOWN: set[tuple[str, str]] = set()

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
FOLDERS = ("common", "ipc", "daemon", "wrapper", "client", "plans", "mcp", "cli", "shell")


def pairs(root):
    found = set()
    for folder in FOLDERS:
        uses = {}
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in names:
                if not name.endswith((".h", ".c", ".cpp")):
                    continue
                path = os.path.join(dirpath, name)
                module = os.path.splitext(os.path.relpath(path, root))[0]
                with open(path, encoding="utf-8", errors="replace") as f:
                    included = [os.path.splitext(i)[0] for i in INCLUDE.findall(f.read())]
                included = [i for i in included if i.startswith(folder + "/")]
                if not name.endswith(".h") and not os.path.exists(os.path.join(root, module + ".h")):
                    owners = [i for i in included if module.startswith(i + "_")]
                    if owners:
                        module = max(owners, key=len)
                uses.setdefault(module, set()).update(i for i in included if i != module)
        for a, used in uses.items():
            found.update((a, b) for b in used if a < b and a in uses.get(b, ()))
    return found


def main(argv):
    listing = "--list" in argv
    args = [a for a in argv if a != "--list"]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    found = pairs(root)
    if listing:
        for a, b in sorted(found):
            print(f"{a} <-> {b}")
        return 0
    failed = False
    for a, b in sorted(found - KNOWN):
        print(f"include_pairs: {a} and {b} include each other: let one of them see the other only "
              f"through an interface of its own, as daemon/shell_port.h does",
              file=sys.stderr)
        failed = True
    for a, b in sorted(KNOWN - found):
        print(f"include_pairs: {a} and {b} no longer include each other: take them off KNOWN in "
              f"scripts/include_pairs.py", file=sys.stderr)
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
