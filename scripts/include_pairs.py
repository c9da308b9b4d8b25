#!/usr/bin/env python3
"""Fails when two modules of one folder include each other, or a room includes one above it.

A module is a header and the sources named after it: daemon/files.h and daemon/files.cpp; a
source without a header of its own belongs to the header whose name its own begins with
(daemon/server_clients.cpp to daemon/server.h). Module A uses module B when a file of A
includes B's header; A and B include each other when each uses the other. Such a pair is one
piece in two files: neither can be read, tested or changed alone. KNOWN lists the pairs still
to be taken apart (none now); the check fails on any other pair, and on a listed pair that is
gone (take it off the list).

  scripts/include_pairs.py [--list] [ROOT]

The rooms (folders, the client's products each a room of its own) stand on floors, FLOORS
below: a room may include its own headers and those of rooms on lower floors only, so that
no arrow points up or sideways and the rooms make no circle. A new folder is given a floor
here before its first file is included.

With --list it prints every pair and the rooms by floor, and fails on none. scripts/lint.sh
runs it.
"""
import os
import re
import sys

KNOWN: set[tuple[str, str]] = set()

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
FOLDERS = ("common", "ipc", "uv", "daemon", "wrapper", "client", "plans", "mcp", "cli", "python", "shell")

# Each room's floor. The longest matching prefix names a file's room; "sbsh/..." is the
# client library's public header (client/include/sbsh).
FLOORS = {
    "ipc": 0,          # the protocol: messages, frames, descriptors
    "common": 1,       # what sbshd, the wrapper and the client share beside the protocol
    "shell": 1,        # the bash builtin
    "uv": 1,           # the libuv toolkit of sbshd and sbsh mcp
    "wrapper": 2,      # sbsh-wrapper
    "daemon": 2,       # sbshd
    "client": 2,       # libsbsh: the client library and its C ABI
    "plans": 3,        # plans (sbsh run), on the client library; part of libsbsh.so
    "mcp": 3,          # sbsh mcp, the MCP server
    "python": 3,       # the Python package and its generator (sbsh-pygen)
    "cli": 4,          # the sbsh CLI
    "bench": 5,        # sbsh-bench
    "tests": 5,
}


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


def room_of(path):
    if path.startswith("sbsh/"):
        path = "client/include/" + path
    rooms = [r for r in FLOORS if path == r or path.startswith(r + "/")]
    return max(rooms, key=len) if rooms else None


def upward(root):
    """Includes of a room on the same floor or above: (file, included, why)."""
    found = []
    for folder in sorted({r.split("/")[0] for r in FLOORS}):
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                if not name.endswith((".h", ".c", ".cpp")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                room = room_of(rel)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for inc in INCLUDE.findall(f.read()):
                        other = room_of(inc)
                        if other is None or other == room or FLOORS[other] < FLOORS[room]:
                            continue
                        found.append((rel, inc, f"{room} (floor {FLOORS[room]}) includes {other} "
                                                f"(floor {FLOORS[other]})"))
    return found


def main(argv):
    listing = "--list" in argv
    args = [a for a in argv if a != "--list"]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    found = pairs(root)
    if listing:
        for a, b in sorted(found):
            print(f"{a} <-> {b}")
        for floor in sorted(set(FLOORS.values())):
            print(f"floor {floor}: " + ", ".join(r for r in FLOORS if FLOORS[r] == floor))
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
    for rel, inc, why in upward(root):
        print(f"include_pairs: {rel} includes \"{inc}\": {why}; a room sees only the floors below "
              f"it (FLOORS in scripts/include_pairs.py): move what both need down a floor",
              file=sys.stderr)
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
