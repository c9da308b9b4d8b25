#!/usr/bin/env bash
# The Python package as users get it, against a private sbshd started from the build:
#   1. `cmake --install` puts it under the prefix, and it finds libsbsh there (no SBSH_LIB);
#   2. pip builds and installs it, offline, into a fresh venv without the system's site
#      packages (so without setuptools or wheel: the package's own backend builds it), with
#      and without build isolation, from the build's python/ and from its sdist, leaving the
#      tree as it was; it is used there, sync and async, finding libsbsh through the system's
#      loader;
#   3. the source tree's python, which lacks the generated module, is refused with a
#      message saying where the built package is.
# Usage: package_test.sh SOURCE_DIR BUILD_DIR PYTHON3
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
python=$3
tmp=$(mktemp -d)
daemon_pid=""
cleanup() {
  [[ -n $daemon_pid ]] && kill -KILL "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
unset SBSH_LIB LD_LIBRARY_PATH PYTHONPATH SBSH_SOCKET
export PYTHONDONTWRITEBYTECODE=1 PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1

"$python" -c 'import venv, ensurepip' 2>/dev/null ||
  fail "$python cannot make a venv with pip (apt-get install python3-venv python3-pip)"

mkdir -m 700 "$tmp/run"
sock=$tmp/run/sbshd.sock
export XDG_RUNTIME_DIR=$tmp/run HOME=$tmp TMPDIR=$tmp SBSH_STATE_DIR=$tmp/state
"$build/bin/sbshd" --socket "$sock" --foreground --state-dir "$tmp/state" </dev/null >"$tmp/sbshd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
[[ -S $sock ]] || fail "sbshd did not start: $(cat "$tmp/sbshd.log")"

# --- 1. cmake --install ------------------------------------------------------------------------
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
pydir=$(sed -n 's/^SBSH_PYTHON_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in __init__.py _lib.py _install.py _convert.py _records.py _cabi.py _requests.py types.py errors.py client.py aio.py py.typed; do
  [[ -e $prefix/$pydir/sbsh/$f ]] || fail "cmake --install: no $pydir/sbsh/$f"
done
grep -qF "\"$prefix/$libdir\"" "$prefix/$pydir/sbsh/_install.py" ||
  fail "_install.py does not name $prefix/$libdir: $(cat "$prefix/$pydir/sbsh/_install.py")"
PYTHONPATH=$prefix/$pydir "$python" - "$sock" "$prefix/$libdir" <<'PY' || fail "the package installed by cmake"
import sys
import sbsh
sock, libdir = sys.argv[1:]
with sbsh.Client(sock, autostart=False) as c:
    assert c.library_path.startswith(libdir + "/"), f"libsbsh loaded from {c.library_path!r}, not from {libdir}"
    r = c.exec("cd /tmp && echo installed", session="cmake-install", check=True)
    assert (r.exit_code, r.stdout) == (0, b"installed\n"), r
    c.remove_session("cmake-install")
print("ok: cmake --install: the package finds", c.library_path)
PY

# --- 2. pip into a fresh venv, offline -----------------------------------------------------------
# pip builds in the source tree it is given: give it a copy of the package as the build staged
# it (python with the generated sbsh/_records.py), and see that it stays as it was.
cp -r "$build/python" "$tmp/pkg"
find "$tmp/pkg" -name __pycache__ -prune -o -print | sort >"$tmp/tree.before"
"$python" -m venv "$tmp/venv" || fail "python3 -m venv failed"
pip_install() {
  "$tmp/venv/bin/python" -m pip install --quiet --no-index "$@" >"$tmp/pip.log" 2>&1 ||
    fail "pip install --no-index $*: $(cat "$tmp/pip.log")"
}
"$tmp/venv/bin/python" -c 'import setuptools' 2>/dev/null && "$tmp/venv/bin/python" -c 'import wheel' 2>/dev/null &&
  echo "note: this venv has setuptools and wheel, so the test shows less than it could"
pip_install --no-build-isolation "$tmp/pkg"  # as the README said; Debian 12's venv has no wheel
"$tmp/venv/bin/python" -m pip uninstall --quiet --yes sbsh >/dev/null
pip_install "$tmp/pkg"  # isolated: the backend needs nothing, so nothing is fetched
find "$tmp/pkg" -name __pycache__ -prune -o -print | sort >"$tmp/tree.after"
diff -u "$tmp/tree.before" "$tmp/tree.after" >"$tmp/tree.diff" ||
  fail "pip install wrote into the tree it installed from: $(cat "$tmp/tree.diff")"
# The sdist has what a wheel is built from: one built from it installs too.
mkdir "$tmp/sdist"
(cd "$tmp/pkg" && "$python" -c 'import sys; sys.path.insert(0, "backend"); import sbsh_build
print(sbsh_build.build_sdist(sys.argv[1]))' "$tmp/sdist") >"$tmp/sdist.name" || fail "build_sdist failed"
"$tmp/venv/bin/python" -m pip uninstall --quiet --yes sbsh >/dev/null
pip_install "$tmp/sdist/$(cat "$tmp/sdist.name")"
# On Python 3.10, which has no tomllib, the backend reads pyproject.toml itself: the same.
(cd "$tmp/pkg" && "$python" -c 'import sys, tomllib; sys.path.insert(0, "backend"); import sbsh_build
text = open("pyproject.toml").read()
assert sbsh_build._read_toml_subset(text) == tomllib.loads(text), sbsh_build._read_toml_subset(text)') ||
  fail "the backend's own reader of pyproject.toml differs from tomllib"
# The source tree's python has no _records.py: pip refuses it, saying where the package is.
cp -r "$src/python" "$tmp/src-pkg"
if "$tmp/venv/bin/python" -m pip install --quiet --no-index --no-build-isolation "$tmp/src-pkg" >"$tmp/pip-src.log" 2>&1; then
  fail "pip installed python, which lacks the generated sbsh/_records.py"
fi
grep -q "BUILD/python" "$tmp/pip-src.log" || fail "pip's error does not say where the built package is: $(cat "$tmp/pip-src.log")"
cd "$tmp"  # not the source tree: the installed package must be the one imported
LD_LIBRARY_PATH=$build/client "$tmp/venv/bin/python" - "$sock" "$tmp/venv" <<'PY' || fail "the package installed by pip"
import asyncio
import os
import sys

import sbsh

sock, venv = sys.argv[1:]
pkg = os.path.dirname(sbsh.__file__)
assert pkg.startswith(venv + "/"), f"sbsh imported from {pkg}, not the venv"
assert os.path.exists(os.path.join(pkg, "py.typed")), "no py.typed in the installed package"

with sbsh.Client(sock, autostart=False) as c:
    assert c.library_path == "libsbsh.so.0", c.library_path  # through the loader
    s = c.session("pip-sync")
    s.exec("cd /tmp && X=kept", check=True)
    r = s.exec("echo $PWD $X", check=True)
    assert r.text == "/tmp kept\n", r
    try:
        s.exec("exit 4", check=True)
        raise AssertionError("check=True did not raise")
    except sbsh.CommandFailed as e:
        assert e.result.exit_code == 4, e.result
    s.remove()


async def main() -> None:
    async with sbsh.AsyncClient(sock, autostart=False) as c:
        rs = await asyncio.gather(*(c.exec(f"echo {i}", session=f"pip-async-{i % 3}") for i in range(12)))
        assert [r.text for r in rs] == [f"{i}\n" for i in range(12)], rs
        for i in range(3):
            await c.remove_session(f"pip-async-{i}")

asyncio.run(main())
print("ok: pip install into a venv: sync and async")
PY

"$build/bin/sbsh" -S "$sock" --no-autostart shutdown >/dev/null
wait "$daemon_pid" || true
daemon_pid=""
echo "package test: passed"
