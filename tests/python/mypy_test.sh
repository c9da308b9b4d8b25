#!/usr/bin/env bash
# mypy --strict (Debian's mypy) over the Python package as built (with its generated
# sbsh/_records.py), its examples and its build backend.
# Usage: mypy_test.sh PACKAGE_DIR (the build's python/, a copy of python)
set -euo pipefail
pkg=$(cd "$1" && pwd)
command -v mypy >/dev/null || { echo "FAIL: mypy not found: apt-get install mypy (scripts/deps.sh --test)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[[ -e $pkg/sbsh/_records.py ]] || { echo "FAIL: $pkg/sbsh/_records.py is missing: build the target sbsh_python"; exit 1; }
cd "$pkg"
MYPYPATH=. mypy --strict --no-incremental --cache-dir "$tmp" sbsh examples backend/sbsh_build.py
