#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy says which checks and why) over sbsh's C++ sources, using the
# compile commands of a build directory, and fails if it reports anything.
#   scripts/lint.sh [-B DIR] [FILE...]
# With no FILE, every source file the build compiles (tests and benchmarks included when the
# build has them). DIR defaults to build-lint, configured (not built) on each run: without
# precompiled headers (each source must include what it uses), and with each target's
# sources in one unity batch, checked as one: the third-party headers a target's sources
# share are then parsed and matched once, not once per source (nor once per batch of the
# build's, which would be twice as many). A source that the build compiles on its own is
# checked on its own. FILEs given by name are checked one by one (configure a build with
# -DSBSH_UNITY=OFF and pass it with -B to check every source alone).
# Before clang-tidy, scripts/include_pairs.py checks that no two modules of a folder include
# each other (beyond the pairs it lists as still to be taken apart) and that no room includes
# one on its own floor or above (its FLOORS); it takes a second.
set -euo pipefail
cd "$(dirname "$0")/.."
pairs_ok=1
scripts/include_pairs.py || pairs_ok=0
dir=build-lint
if [[ ${1:-} == -B ]]; then
  dir=$2
  shift 2
fi
# build-lint is configured on every run (a few seconds), so that its batches follow the tree's
# sources; a build given with -B is taken as it is.
if [[ $dir == build-lint || ! -f $dir/compile_commands.json ]]; then
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSBSH_TESTS=ON -DSBSH_BENCH=ON -DSBSH_UNITY=ON \
    -DCMAKE_UNITY_BUILD_BATCH_SIZE=0 -DSBSH_PCH=OFF >/dev/null
fi
tidy=$(command -v clang-tidy-14 || command -v clang-tidy)
runner=$(command -v run-clang-tidy-14 || command -v run-clang-tidy)
root=$PWD
if (($# > 0)); then
  files=("$@")
else
  # The sources of this tree only, as the build lists them (not generated or system files),
  # and the unity batches that include them.
  mapfile -t files < <(python3 -c '
import json, os, sys
root, seen = sys.argv[2], set()
for e in json.load(open(sys.argv[1])):
    f = os.path.normpath(os.path.join(e["directory"], e["file"]))
    ours = f.startswith(root + "/") and f.endswith(".cpp") and "/build" not in f[len(root):]
    batch = "/Unity/unity_" in f and f.endswith("_cxx.cxx")
    if (ours or batch) and f not in seen:
        seen.add(f)
        print(f)
' "$dir/compile_commands.json" "$root")
fi
# Files are given as anchored regexes; run-clang-tidy runs one clang-tidy per core and exits
# non-zero when any of them reported a warning or an error.
patterns=()
for f in "${files[@]}"; do
  f=$(realpath "$f")
  patterns+=("^${f//./\\.}\$")
done
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# run-clang-tidy always asks for colour; the log is kept without it, to be searched.
"$runner" -clang-tidy-binary "$tidy" -p "$dir" -quiet -j "$(nproc)" "${patterns[@]}" 2>/dev/null |
  sed -u 's/\x1b\[[0-9;]*m//g' | tee "$log" |
  grep -v 'clang-tidy.* -p=\|^Running\|^[0-9]* warnings\? generated\.\|^Suppressed\|^Use -header-filter' || true
if grep -q ': \(warning\|error\):' "$log"; then
  echo "lint: clang-tidy reported the warnings above" >&2
  exit 1
fi
if ((!pairs_ok)); then
  echo "lint: scripts/include_pairs.py failed (above)" >&2
  exit 1
fi
echo "lint: clean (${#files[@]} files)"
