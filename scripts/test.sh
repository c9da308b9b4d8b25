#!/usr/bin/env bash
# The whole test suite, as CI runs it: dependencies, a normal build with -Werror and its
# tests, then an AddressSanitizer + UndefinedBehaviorSanitizer build (clang) and the same
# tests, then that build's fuzz targets for SBSH_FUZZ_SECONDS (default 30) each, then the
# container image under podman; and, beside all of them, clang-tidy over the whole tree
# (scripts/lint.sh) and the image's packages and build.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test

jobs=$(nproc)
# The lint runs from the start at the lowest priority, in a process group of its own: it takes
# the processor time that the builds and the tests leave idle (links, tests waiting on their
# shells) and yields the rest, so that it costs the run only what it cannot fit in. Its report
# and verdict come at the end; if this script stops early, the lint stops with it.
mkdir -p build-lint
setsid nice -n 19 scripts/lint.sh >build-lint/lint.log 2>&1 &
lint_pid=$!
trap 'kill -- "-$lint_pid" 2>/dev/null || true' EXIT
echo "== build (RelWithDebInfo, -Werror)"
# Options are given in full: an earlier demo.sh may have configured build/ without tests.
# The multiarch libdir (lib/x86_64-linux-gnu), as Debian's /usr has it, is what the install
# test then checks, through a prefix of its own and through DESTDIR.
# Line tables only (-g1) instead of full debug information: all a failure's backtrace uses,
# and a third less compile time.
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
scripts/build.sh build -DSBSH_WERROR=ON -DSBSH_TESTS=ON -DSBSH_BENCH=ON -DCMAKE_INSTALL_LIBDIR="lib/$multiarch" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
echo "== tests"
(cd build && ctest --no-tests=error --output-on-failure --timeout 300 -j "$jobs")
# The round trip beside its baselines (docs/benchmarks.md), pinned to one CPU and not, so that
# a change in it shows in every run's log. A figure, never a verdict: the machine's load moves
# both sides alike, and nothing here fails because it was slow.
echo "== round trip (sbsh-bench --quick --only round-trip; pinned to CPU 0, then unpinned)"
taskset -c 0 build/bin/sbsh-bench --quick --only round-trip || echo "(the benchmark could not run pinned)"
build/bin/sbsh-bench --quick --only round-trip || echo "(the benchmark could not run)"
echo "== many clients (sbsh-bench --quick --only clients: 100 clients over 100 sessions)"
build/bin/sbsh-bench --quick --only clients || echo "(the benchmark could not run)"

# The image of dist/container/ (docs/containers.md): its Debian packages, base and image are
# built from here on in the background, at the lowest priority as the lint is, so that they
# take the time the sanitizer build and its tests leave idle; the image is tested at the end.
mkdir -p build-image
rm -f build-image/image
echo "== container image: packages and image built in the background (build-image/build.log)"
setsid nice -n 19 tests/container/image_test.sh --build build-image >build-image/build.log 2>&1 &
image_pid=$!
trap 'kill -- "-$lint_pid" 2>/dev/null || true; kill -- "-$image_pid" 2>/dev/null || true' EXIT

echo "== build (ASan + UBSan, clang, with the fuzz targets)"
# One sanitizer build serves the tests and the fuzz targets: clang (libFuzzer is clang's), the
# libraries instrumented for the fuzzer's coverage as well, which the tests do not notice.
# The normal build above is GCC's, so the tree builds warning-free with both compilers.
scripts/build.sh build-asan -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DSBSH_WERROR=ON \
  -DSBSH_ASAN=ON -DSBSH_UBSAN=ON -DSBSH_FUZZ=ON -DSBSH_TESTS=ON -DSBSH_BENCH=OFF
echo "== tests under ASan + UBSan"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd build-asan && ctest --no-tests=error --output-on-failure --timeout 900 -j "$jobs")
echo "== fuzzing under ASan + UBSan (scripts/fuzz.sh, ${SBSH_FUZZ_SECONDS:-30} s per target)"
scripts/fuzz.sh -B build-asan all "${SBSH_FUZZ_SECONDS:-30}"
echo "== container image (tests/container/image_test.sh; built beside the steps above)"
image_status=0
wait "$image_pid" || image_status=$?
cat build-image/build.log
if ((image_status == 0)); then
  tests/container/image_test.sh build/bin/sbsh "$(cat build-image/image)" || image_status=$?
fi
if ((image_status == 77)); then
  echo "(the container image test was skipped: see the reason above)"
elif ((image_status != 0)); then
  echo "the container image test failed (see above)" >&2
  exit "$image_status"
fi
echo "== lint (clang-tidy, run beside the steps above)"
lint_status=0
wait "$lint_pid" || lint_status=$?
cat build-lint/lint.log
if ((lint_status != 0)); then
  echo "lint failed: fix what clang-tidy reports above (scripts/lint.sh FILE checks one file)" >&2
  exit "$lint_status"
fi
echo "== all tests passed (normal and sanitizer builds, fuzzing, the container image, lint)"
