#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, AddressSanitizer + UndefinedBehaviorSanitizer, in
# build-fuzz/, only the targets and the libraries they need) and runs each for SECONDS:
#   scripts/fuzz.sh [-B DIR] [TARGET|all] [SECONDS]   (default: all, $SBSH_FUZZ_SECONDS or 60)
# With -B, the targets are built in DIR, a build already configured with SBSH_FUZZ=ON (as
# scripts/test.sh configures its sanitizer build, which then serves both).
# Targets: frames (the frame decoder), requests (request handling on a real sbshd loop), plans
# (the plan reader, JSON and YAML);
# tests/fuzz/*_fuzz.cpp say what each covers. Inputs it finds go to build-fuzz/corpus/TARGET
# (the seeds in tests/fuzz/corpus/TARGET stay as they are). A crash, leak, timeout or
# excessive allocation leaves its input in build-fuzz/crashes/ and fails the run; replay it
# with `build-fuzz/bin/fuzz_TARGET FILE` (DIR for build-fuzz with -B). Prints each target's executions and crashes.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build-fuzz
if [[ ${1:-} == -B ]]; then
  dir=$2
  shift 2
  if ! grep -q '^SBSH_FUZZ:BOOL=ON$' "$dir/CMakeCache.txt" 2>/dev/null; then
    echo "fuzz.sh: $dir is not a build configured with -DSBSH_FUZZ=ON (and clang)" >&2
    exit 2
  fi
fi
target=${1:-all}
seconds=${2:-${SBSH_FUZZ_SECONDS:-60}}
case $target in
  all) targets=(frames requests plans) ;;
  frames | requests | plans) targets=("$target") ;;
  *) echo "fuzz.sh: no target '$target'; choose frames, requests, plans or all" >&2; exit 2 ;;
esac
if ! [[ $seconds =~ ^[0-9]+$ ]] || [[ $seconds -eq 0 ]]; then
  echo "fuzz.sh: SECONDS must be a whole number of seconds above 0, not '$seconds'" >&2
  exit 2
fi

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
[[ $dir != build-fuzz ]] ||
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DSBSH_FUZZ=ON -DSBSH_ASAN=ON -DSBSH_UBSAN=ON -DSBSH_TESTS=OFF \
  -DSBSH_BENCH=OFF "${launcher[@]}" >/dev/null
cmake --build "$dir" --parallel "$(nproc)" --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p "$dir/crashes"
# The targets run side by side, each on a core of its own where there are enough.
fuzz_one() {
  local t=$1 rc=0
  mkdir -p "$dir/corpus/$t"
  # -malloc_limit_mb: no single allocation may be as large as a whole frame (kMaxFrame);
  # -rss_limit_mb: nor may all of them add up to much, whatever the input.
  "$dir/bin/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 \
    -malloc_limit_mb=16 -rss_limit_mb=1024 -artifact_prefix="$dir/crashes/$t-" \
    "$dir/corpus/$t" "tests/fuzz/corpus/$t" >"$dir/$t.log" 2>&1 || rc=$?
  echo "$rc" >"$dir/$t.rc"
}
before=$(find "$dir/crashes" -type f | wc -l)
pids=()
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  pids+=($!)
done
wait "${pids[@]}"
failed=0
for t in "${targets[@]}"; do
  log=$dir/$t.log
  rc=$(cat "$dir/$t.rc")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  echo "fuzz $t: ${execs:-0} executions in $seconds s"
  if [[ $rc -ne 0 ]]; then
    tail -n 60 "$log"
    echo "fuzz $t FAILED (exit $rc); its input is in $dir/crashes/, the whole log in $log" >&2
    failed=1
  fi
done
echo "crashes found: $(($(find "$dir/crashes" -type f | wc -l) - before))"
exit $failed
