#!/usr/bin/env bash
# mypy --strict (Debian's mypy) over the Python package, its examples and its build backend.
# Usage: mypy_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
command -v mypy >/dev/null || { echo "FAIL: mypy not found: apt-get install mypy (scripts/deps.sh --test)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$src/python"
MYPYPATH=. mypy --strict --no-incremental --cache-dir "$tmp" sbsh examples backend/sbsh_build.py
