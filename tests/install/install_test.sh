#!/usr/bin/env bash
# Installs sbsh twice, as the build is configured (its libdir may be multiarch, e.g.
# lib/x86_64-linux-gnu): into a temporary prefix with `cmake --install --prefix`, and under
# /usr staged through DESTDIR, as a distribution package is made. Then builds small programs
# against each installed libsbsh, with pkg-config and with find_package, in C and in C++,
# linked against libsbsh.so and statically against libsbsh.a, and runs every one against a
# daemon started from the installed binaries. Usage: install_test.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
daemon_pid=""
cleanup() {
  [[ -n $daemon_pid ]] && kill -KILL "$daemon_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
passed=0
pass() { passed=$((passed + 1)); echo "ok: $*"; }

libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
[[ -n $libdir && $libdir != /* ]] || fail "no relative CMAKE_INSTALL_LIBDIR in $build/CMakeCache.txt"
echo "libdir: $libdir"

# Checks the files of an installation of prefix $2 found at $1 ($1 = $2 unless staged).
check_tree() {
  local root=$1 prefix=$2 f
  for f in bin/sbsh bin/sbshd bin/sbsh-wrapper "$libdir/sbsh/sbsh-builtin.so" include/sbsh/client.h include/sbsh/sbsh.h \
           include/sbsh/export.h include/sbsh/plan.h include/sbsh/ipc/result.h include/sbsh/ipc/records.h "$libdir/libsbsh.a" "$libdir/libsbsh.so" "$libdir/libsbsh.so.0" \
           "$libdir/pkgconfig/sbsh.pc" "$libdir/cmake/sbsh/sbshConfig.cmake" "$libdir/cmake/sbsh/sbshTargets.cmake" \
           share/man/man1/sbsh.1 share/man/man8/sbshd.8 share/man/man7/sbsh-protocol.7 \
           share/bash-completion/completions/sbsh share/zsh/vendor-completions/_sbsh \
           lib/systemd/user/sbshd.service lib/systemd/user/sbshd.socket \
           lib/systemd/system/sbshd@.service lib/systemd/system/sbshd@.socket; do
    [[ -e $root/$f ]] || fail "missing after install under $prefix: $f"
  done
  # The completions are those the build wrote with the sbsh installed beside them.
  cmp -s "$root/share/bash-completion/completions/sbsh" <("$root/bin/sbsh" completion bash) ||
    fail "the installed bash completion is not what 'sbsh completion bash' prints"
  cmp -s "$root/share/zsh/vendor-completions/_sbsh" <("$root/bin/sbsh" completion zsh) ||
    fail "the installed zsh completion is not what 'sbsh completion zsh' prints"
  grep -qx "prefix=$prefix" "$root/$libdir/pkgconfig/sbsh.pc" || fail "sbsh.pc: prefix is not $prefix"
  grep -qx "libdir=\${prefix}/$libdir" "$root/$libdir/pkgconfig/sbsh.pc" || fail "sbsh.pc: libdir is not \${prefix}/$libdir"
  # The units start the sbshd installed beside them.
  local unit
  for unit in user/sbshd.service system/sbshd@.service; do
    grep -qx "ExecStart=$prefix/bin/sbshd --foreground" "$root/lib/systemd/$unit" ||
      fail "$unit does not start $prefix/bin/sbshd: $(grep ExecStart "$root/lib/systemd/$unit")"
  done
  grep -qx "ListenStream=%t/sbsh/sbshd.sock" "$root/lib/systemd/user/sbshd.socket" || fail "sbshd.socket listens elsewhere"
}

# --- 1. a prefix of its own ---------------------------------------------------------------
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
check_tree "$prefix" "$prefix"
if command -v systemd-analyze >/dev/null; then
  # A template is verified through an instance of it.
  mkdir -p "$tmp/units"
  cp "$prefix/lib/systemd/user/sbshd.service" "$prefix/lib/systemd/user/sbshd.socket" "$tmp/units/"
  cp "$prefix/lib/systemd/system/sbshd@.service" "$tmp/units/sbshd@root.service"
  cp "$prefix/lib/systemd/system/sbshd@.socket" "$tmp/units/sbshd@root.socket"
  (cd "$tmp/units" && systemd-analyze verify --man=no ./sbshd.socket ./sbshd.service ./sbshd@root.socket \
    ./sbshd@root.service) || fail "systemd-analyze verify"
fi
pass "cmake --install --prefix $prefix"

# --- 2. /usr, staged through DESTDIR ------------------------------------------------------
stage=$tmp/stage
DESTDIR=$stage cmake --install "$build" --prefix /usr >/dev/null
check_tree "$stage/usr" /usr
[[ $(ls -A "$stage") == usr ]] || fail "DESTDIR install wrote outside /usr: $(ls -A "$stage")"
if grep -rlF "$stage" "$stage" >/dev/null; then
  fail "installed files name the staging directory: $(grep -rlF "$stage" "$stage")"
fi
pass "DESTDIR=... cmake --install --prefix /usr"

# --- a daemon from the installed binaries, and the programs that use it --------------------
mkdir -p "$tmp/run" "$tmp/state"
chmod 700 "$tmp/run"
export XDG_RUNTIME_DIR=$tmp/run SBSH_STATE_DIR=$tmp/state HOME=$tmp
sock=$tmp/run/sbsh/sbshd.sock
"$prefix/bin/sbshd" --socket "$sock" --foreground 2>"$tmp/sbshd.log" &
daemon_pid=$!
for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
[[ -S $sock ]] || fail "sbshd did not start: $(cat "$tmp/sbshd.log")"

# Each program keeps a session's directory between two commands and returns the exit code
# of the second (3), having printed its output (/tmp).
expect_run() {
  local what=$1 program=$2 out rc=0
  out=$(env "${@:3}" "$program" "$sock") || rc=$?
  [[ $rc == 3 && $out == /tmp ]] || fail "$what: rc=$rc out=$out"
  pass "$what"
}
# No libsbsh.so in a program that was to link libsbsh.a.
expect_static() {
  if readelf -d "$2" | grep -q 'NEEDED.*libsbsh'; then fail "$1 needs libsbsh.so: $(readelf -d "$2" | grep NEEDED)"; fi
}

proj=$tmp/proj
mkdir -p "$proj/cxx" "$proj/c"
cp "$here/main.cpp" "$proj/cxx/"
cp "$here/main.c" "$proj/c/"
cat >"$proj/cxx/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.22)
project(uses_sbsh_cxx CXX)
find_package(sbsh 0.1 REQUIRED)
add_executable(with-cmake main.cpp)
target_link_libraries(with-cmake PRIVATE sbsh::sbsh)
add_executable(with-cmake-static main.cpp)
target_link_libraries(with-cmake-static PRIVATE sbsh::sbsh_static)
CMAKE
# A C-only project: nothing in it knows that libsbsh.a is C++ inside.
cat >"$proj/c/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.22)
project(uses_sbsh_c C)
find_package(sbsh REQUIRED)
add_executable(c-with-cmake main.c)
target_link_libraries(c-with-cmake PRIVATE sbsh::sbsh)
add_executable(c-with-cmake-static main.c)
target_link_libraries(c-with-cmake-static PRIVATE sbsh::sbsh_static)
CMAKE

# With the prefix of its own.
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
g++ -std=c++17 "$proj/cxx/main.cpp" -o "$tmp/with-pkgconfig" $(pkg-config --cflags --libs sbsh) \
  -Wl,-rpath,"$prefix/$libdir"
expect_run "prefix: C++, pkg-config" "$tmp/with-pkgconfig"
unset PKG_CONFIG_PATH
cmake -S "$proj/cxx" -B "$tmp/b1" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/b1" >/dev/null
expect_run "prefix: C++, find_package, sbsh::sbsh" "$tmp/b1/with-cmake"
expect_static "prefix: C++, sbsh::sbsh_static" "$tmp/b1/with-cmake-static"
expect_run "prefix: C++, find_package, sbsh::sbsh_static" "$tmp/b1/with-cmake-static"

# With /usr in the staging directory, as a cross build sees a sysroot. The programs that use
# libsbsh.so find it there through LD_LIBRARY_PATH, as it is not installed in /usr.
staged_lib=$stage/usr/$libdir
pc=(env PKG_CONFIG_LIBDIR="$staged_lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage" pkg-config)
[[ $("${pc[@]}" --cflags sbsh) == *"-I$stage/usr/include"* ]] || fail "staged pkg-config --cflags: $("${pc[@]}" --cflags sbsh)"
g++ -std=c++17 "$proj/cxx/main.cpp" -o "$tmp/staged-pkgconfig" $("${pc[@]}" --cflags --libs sbsh)
expect_run "/usr: C++, pkg-config" "$tmp/staged-pkgconfig" LD_LIBRARY_PATH="$staged_lib"
# pkg-config --static gives all that a static link needs, even to a C compiler.
gcc -std=c99 -static "$proj/c/main.c" -o "$tmp/staged-c-static" $("${pc[@]}" --static --cflags --libs sbsh) 2>"$tmp/ld.log" ||
  fail "static C link with pkg-config --static: $(cat "$tmp/ld.log")"
[[ $(readelf -d "$tmp/staged-c-static" | grep -c NEEDED) == 0 ]] || fail "the -static C program is dynamic"
expect_run "/usr: C, pkg-config --static, -static" "$tmp/staged-c-static"
for lang in cxx c; do
  cmake -S "$proj/$lang" -B "$tmp/b-$lang" -DCMAKE_FIND_ROOT_PATH="$stage" >/dev/null
  cmake --build "$tmp/b-$lang" >/dev/null
done
expect_run "/usr: C++, find_package, sbsh::sbsh" "$tmp/b-cxx/with-cmake" LD_LIBRARY_PATH="$staged_lib"
expect_static "/usr: C++, sbsh::sbsh_static" "$tmp/b-cxx/with-cmake-static"
expect_run "/usr: C++, find_package, sbsh::sbsh_static" "$tmp/b-cxx/with-cmake-static"
expect_run "/usr: C, find_package, sbsh::sbsh" "$tmp/b-c/c-with-cmake" LD_LIBRARY_PATH="$staged_lib"
expect_static "/usr: C, sbsh::sbsh_static" "$tmp/b-c/c-with-cmake-static"
expect_run "/usr: C, find_package, sbsh::sbsh_static" "$tmp/b-c/c-with-cmake-static"

"$prefix/bin/sbsh" --socket "$sock" shutdown
wait "$daemon_pid" || true
daemon_pid=""
echo "install test: $passed passed, 0 failed"
