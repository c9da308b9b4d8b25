#!/usr/bin/env bash
# Installs sbsh into a temporary prefix, then builds a small program against the installed
# libsbsh twice (with pkg-config and with find_package), and runs both against a daemon
# started from the installed binaries. Usage: install_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
daemon_pid=""
cleanup() {
  [[ -n $daemon_pid ]] && kill -KILL "$daemon_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null

for f in bin/sbsh bin/sbshd bin/sbsh-wrapper include/sbsh/client.h include/sbsh/ipc/result.h include/sbsh/ipc/records.h \
         lib/libsbsh.a lib/pkgconfig/sbsh.pc lib/cmake/sbsh/sbshConfig.cmake \
         share/bash-completion/completions/sbsh share/zsh/vendor-completions/_sbsh; do
  [[ -e $prefix/$f ]] || { echo "missing after install: $f"; exit 1; }
done
ls "$prefix"/lib/libsbsh.so* >/dev/null || { echo "missing after install: lib/libsbsh.so"; exit 1; }

# The systemd user units start the sbshd installed beside them.
units=$prefix/lib/systemd/user
grep -qx "ExecStart=$prefix/bin/sbshd --foreground" "$units/sbshd.service" ||
  { echo "sbshd.service does not start $prefix/bin/sbshd:"; grep ExecStart "$units/sbshd.service"; exit 1; }
grep -qx "ListenStream=%t/sbsh/sbshd.sock" "$units/sbshd.socket" || { echo "sbshd.socket listens elsewhere"; exit 1; }
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify --man=no "$units/sbshd.socket" "$units/sbshd.service"
fi

mkdir -p "$tmp/run" "$tmp/state" "$tmp/proj"
chmod 700 "$tmp/run"
export XDG_RUNTIME_DIR=$tmp/run SBSH_STATE_DIR=$tmp/state HOME=$tmp
sock=$tmp/run/sbsh/sbshd.sock
"$prefix/bin/sbshd" --socket "$sock" --foreground 2>"$tmp/sbshd.log" &
daemon_pid=$!
for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done

cat >"$tmp/proj/main.cpp" <<'CPP'
// Uses the installed libsbsh: a session keeps its directory between two execs.
#include <sbsh/client.h>
#include <cstdio>
int main(int argc, char** argv) {
  sbsh::client::connect_options co;
  co.socket_path = argv[1];
  co.autostart = false;
  auto c = sbsh::client::connection::connect(co);
  if (!c) { std::fprintf(stderr, "connect: %s\n", c.err().message.c_str()); return 1; }
  sbsh::client::exec_options o;
  o.session = "install-test";
  o.command = "cd /tmp";
  if (auto r = c->exec(o); !r || r->exit_code != 0) return 2;
  o.command = "pwd; exit 3";
  auto r = c->exec(o);
  if (!r) { std::fprintf(stderr, "exec: %s\n", r.err().message.c_str()); return 3; }
  std::fputs(r->stdout_data.c_str(), stdout);
  return r->exit_code.value_or(100);
}
CPP
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
g++ -std=c++20 "$tmp/proj/main.cpp" -o "$tmp/with-pkgconfig" $(pkg-config --cflags --libs sbsh) -Wl,-rpath,"$prefix/lib"
set +e
out=$("$tmp/with-pkgconfig" "$sock"); rc=$?
set -e
[[ $rc == 3 && $out == /tmp ]] || { echo "pkg-config build: rc=$rc out=$out"; exit 1; }

cat >"$tmp/proj/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.22)
project(uses_sbsh CXX)
find_package(sbsh REQUIRED)
add_executable(with-cmake main.cpp)
target_link_libraries(with-cmake PRIVATE sbsh::sbsh)
CMAKE
cmake -S "$tmp/proj" -B "$tmp/proj/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/proj/build" >/dev/null
set +e
out=$("$tmp/proj/build/with-cmake" "$sock"); rc=$?
set -e
[[ $rc == 3 && $out == /tmp ]] || { echo "find_package build: rc=$rc out=$out"; exit 1; }

"$prefix/bin/sbsh" --socket "$sock" shutdown
wait "$daemon_pid" || true
daemon_pid=""
echo "install test: 2 passed, 0 failed"
