#!/usr/bin/env bash
# The container image of dist/container/ under a real podman, driven from this host through
# `sbsh -H podman://`: commands whose state persists across calls, `sbsh status` as the health
# check, sbshd as PID 1 (killed inside, another adopts its sessions; the whole container
# killed, the restart policy brings it back with its sessions' definitions), and a stop with
# SIGTERM that ends every process within the grace period. Prints the image's size, the start
# time to the first answered command and the round trip through -H podman:// beside the
# local socket's.
#   tests/container/image_test.sh --build DIR     the packages and the image, from this tree
#   tests/container/image_test.sh SBSH [IMAGE]     the test
# --build makes the Debian packages of this tree afresh (scripts/package.sh, nocheck: the
# install test runs with the other tests) in DIR/debs, builds the image from them with
# dist/container/build.sh as sbsh:test, and writes its name to DIR/image; scripts/test.sh
# runs it in the background, beside the sanitizer build. SBSH: the sbsh program on this
# side. IMAGE: the image to test (default: DIR/image's, after a --build into a temporary
# directory). Both exit 77 (skipped), saying why, where podman cannot run a container (not
# installed, in a chroot, no cgroups).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAIL: $*"; failed=1; }
failed=0
ms() { date +%s%3N; }

command -v podman >/dev/null || skip "podman is not installed (apt-get install podman crun; scripts/deps.sh --test does)"
# shellcheck source=dist/container/podman-env.sh
source "$src/dist/container/podman-env.sh"
podman_env || skip "podman cannot run a container here: $podman_problem"

build_image() {  # DIR
  local dir t
  dir=$(realpath "$1")
  t=$(ms)
  rm -rf "$dir/debs"
  mkdir -p "$dir/debs"
  (cd "$src" && OUT=$dir/debs DEB_BUILD_OPTIONS="nocheck ${DEB_BUILD_OPTIONS:-}" scripts/package.sh >"$dir/package.log" 2>&1) ||
    { tail -30 "$dir/package.log"; echo "FAIL: scripts/package.sh failed (its log: $dir/package.log)"; return 1; }
  echo "packages built in $(( ($(ms) - t) / 1000 )) s"
  t=$(ms)
  out=$("$src/dist/container/build.sh" --debs "$dir/debs" --tag sbsh:test) || { echo "FAIL: dist/container/build.sh failed"; return 1; }
  echo "image built in $(( ($(ms) - t) / 1000 )) s: $out"
  echo "${out%% *}" >"$dir/image"
}
if [[ ${1:-} == --build ]]; then
  trap podman_env_cleanup EXIT
  build_image "${2:?usage: image_test.sh --build DIR}"
  exit
fi

sbsh=$(realpath "${1:?usage: image_test.sh SBSH [IMAGE] | --build DIR}")
image=${2:-}
name=sbsh-image-test-$$
volume=$name-state
work=""
api=$(mktemp -u --tmpdir sbsh-image-test-api.XXXXXX.sock)
api_pid=""
cleanup() {
  [[ -z $api_pid ]] || { kill "$api_pid" 2>/dev/null; wait "$api_pid" 2>/dev/null; }
  rm -f "$api"
  podman rm -f -v -t 0 "$name" "$name-confined" >/dev/null 2>&1 || true
  podman volume rm -f "$volume" >/dev/null 2>&1 || true
  [[ -z $work ]] || rm -rf "$work"
  podman_env_cleanup
}
trap cleanup EXIT
if [[ -z $image ]]; then
  work=$(mktemp -d)
  build_image "$work"
  image=$(cat "$work/image")
fi
size=$(podman image inspect --format '{{.Size}}' "$image")
echo "image $image: $((size / 1024 / 1024)) MiB"
[[ $(podman image inspect --format '{{json .Config.Healthcheck.Test}}' "$image") == '["CMD","sbsh","status"]' ]] ||
  fail "the image's health check is not sbsh status"

host() { "$sbsh" -H "podman://$name" "$@"; }
# Waits until `sbsh -H podman://` answers (at most $1 seconds).
await_answer() {
  local deadline=$(( $(date +%s) + $1 ))
  until host exec -s probe true >/dev/null 2>&1; do
    (( $(date +%s) < deadline )) || return 1
    sleep 0.05
  done
}
daemon_pid() {  # the sbshd PID 1 started (not PID 1 itself), as the container sees it
  podman exec "$name" sh -c 'for p in /proc/[0-9]*; do
    [ "${p#/proc/}" != 1 ] && [ "$(cat $p/comm 2>/dev/null)" = sbshd ] && echo "${p#/proc/}"; done; true'
}

echo "== start"
t=$(ms)
# The image's health check runs on a timer only where podman has systemd; here it is run by
# hand (podman healthcheck run), which runs the same check.
podman run -d --name "$name" --restart=on-failure --stop-timeout 10 --health-interval=disable \
  -v "$volume:/var/lib/sbsh" "$image" >/dev/null
await_answer 30 || { podman logs "$name"; echo "FAIL: no answer through -H podman:// within 30 s"; exit 1; }
echo "start to the first answered command: $(( $(ms) - t )) ms"
[[ $(podman exec "$name" cat /proc/1/cmdline | tr '\0' ' ') == "sbshd --foreground " ]] || fail "PID 1 is not sbshd --foreground"

echo "== state persists across calls"
host exec -s t 'cd /tmp && export V=kept && f() { echo fn; }' || fail "exec through podman:// failed"
out=$(host exec -s t 'echo "$PWD $V $(f)"; echo $$')
[[ ${out%$'\n'*} == "/tmp kept fn" ]] || fail "state not kept: '$out'"
shell=${out##*$'\n'}
set +e
host exec -s t '(exit 7)'
[[ $? == 7 ]] || fail "the exit code did not come through"
set -e
host start -s t --name sleeper 'trap "" TERM; sleep 1000' >/dev/null || fail "start failed"

# docker://, where a docker client is at hand: through podman's Docker-compatible API, on a
# socket of this test's own.
if command -v docker >/dev/null; then
  echo "== docker:// through podman's Docker API"
  podman system service --time=0 "unix://$api" >/dev/null 2>&1 &
  api_pid=$!
  deadline=$(( $(date +%s) + 20 ))
  until [[ -S $api ]] || (( $(date +%s) > deadline )); do sleep 0.1; done
  out=$(DOCKER_HOST=unix://$api "$sbsh" -H "docker://$name" exec -s t 'echo "$PWD $V"' 2>&1) || true
  [[ $out == "/tmp kept" ]] || fail "docker:// did not reach the same session: '$out'"
  kill "$api_pid"
  wait "$api_pid" 2>/dev/null || true
  api_pid=""
else
  echo "(no docker client here: docker:// is checked with a stand-in only, tests/functional/remote_test.cpp)"
fi

echo "== health check"
podman healthcheck run "$name" || fail "podman healthcheck run: unhealthy while sbshd runs"
host status >/dev/null || fail "sbsh status through podman:// failed"

echo "== confinement: refused with the reason by default, given with /proc unmasked"
# (The refusal comes with the session's create or its first command: its shell cannot start.)
out=$(host session create c --root /home/sbsh --confine 2>&1 && host exec -s c true 2>&1) &&
  fail "--confine was not refused under a masked /proc"
[[ $out == *"mounting the shell's /proc"* ]] || fail "--confine refused without the reason: $out"
host session rm c >/dev/null 2>&1 || true
[[ $(host session create nonet --no-network && host exec -s nonet 'grep -c : /proc/net/dev') == 1 ]] ||
  fail "--no-network: the session sees more than loopback"
podman run -d --name "$name-confined" --health-interval=disable --security-opt 'unmask=/proc/*' "$image" >/dev/null
confined() { "$sbsh" -H "podman://$name-confined" "$@"; }
deadline=$(( $(date +%s) + 30 ))
until confined status >/dev/null 2>&1 || (( $(date +%s) > deadline )); do sleep 0.1; done
confined session create c --root /home/sbsh --confine >/dev/null || fail "--confine with /proc unmasked failed"
[[ $(confined exec -s c 'echo $$') == 1 ]] || fail "a confined shell is not the init of its own PID namespace"
podman rm -f -v -t 0 "$name-confined" >/dev/null 2>&1

echo "== PID 1 ignores kill -9 from inside; sbshd killed, another adopts its sessions"
podman exec "$name" sh -c "kill -9 1" 2>/dev/null || true
sleep 0.2
[[ $(podman inspect --format '{{.State.Running}}' "$name") == true ]] || fail "kill -9 1 inside ended the container"
old=$(daemon_pid)
[[ -n $old ]] || fail "no sbshd besides PID 1"
t=$(ms)
podman exec "$name" sh -c "kill -9 $old"
await_answer 20 || fail "no sbshd answered within 20 s of kill -9 of $old"
echo "sbshd killed to a new one answering: $(( $(ms) - t )) ms (one podman exec of it included)"
new=$(daemon_pid)
[[ -n $new && $new != "$old" ]] || fail "sbshd was not started again ($old, then '$new')"
out=$(host exec -s t 'echo "$PWD $V"; echo $$')
[[ $out == "/tmp kept"$'\n'"$shell" ]] || fail "the session was not adopted: '$out' (shell $shell)"
host ps --json | grep -q '"state":"running"' || fail "the background process was not adopted: $(host ps)"
podman exec "$name" sh -c 'grep -l "^State:.*Z" /proc/[0-9]*/status 2>/dev/null' | grep -q . && fail "zombies in the container"
[[ $(podman inspect --format '{{.RestartCount}}' "$name") == 0 ]] || fail "the container was restarted"

echo "== round trip (exec true, 100 calls)"
n=100
t=$(ms)
for ((i = 0; i < n; i++)); do host exec -s t true; done
remote=$(( ($(ms) - t) * 1000 / n ))
local_us=$(podman exec "$name" bash -c "s=\$(date +%s%6N); for ((i = 0; i < $n; i++)); do sbsh exec -s t true; done; echo \$(( (\$(date +%s%6N) - s) / $n ))")
echo "round trip: $remote us through -H podman://, $local_us us on the local socket inside the container"
# One connection through podman:// for many commands (the Python binding over libsbsh, when
# this build has it): the exec is paid once.
build=$(dirname "$(dirname "$sbsh")")
lib=$build/client/libsbsh.so.0
if [[ -e $lib ]] && command -v python3 >/dev/null; then
  kept=$(SBSH_LIB=$lib PYTHONPATH=$build/python python3 -c '
import sbsh, sys, time
with sbsh.Client(host="podman://" + sys.argv[1]) as c:
    c.exec("true", session="t")
    t = time.monotonic()
    for _ in range(200):
        c.exec("true", session="t")
    print(int((time.monotonic() - t) / 200 * 1e6))' "$name")
  echo "round trip on one connection: $kept us through -H podman:// (Python, libsbsh)"
fi

echo "== memory (proportional set size, as the container's processes share it)"
pss() {  # of the processes in the container (all of them, or those whose comm is $1)
  podman exec "$name" sh -c 'total=0; for p in /proc/[0-9]*; do
    [ -z "$1" ] || [ "$(cat $p/comm 2>/dev/null)" = "$1" ] || continue
    v=$(sed -n "s/^Pss: *\([0-9]*\) kB/\1/p" $p/smaps_rollup 2>/dev/null); total=$((total + ${v:-0})); done
    echo $total' sh "${1:-}"
}
before=$(pss)
for ((i = 0; i < 20; i++)); do host exec -s "m$i" true; done
after=$(pss)
echo "memory: sbshd $(pss sbshd) KiB (PID 1 and the daemon); $(( (after - before) / 20 )) KiB more per idle session"

echo "== the container killed: the restart policy starts it again"
kill -9 "$(podman inspect --format '{{.State.Pid}}' "$name")"
deadline=$(( $(date +%s) + 60 ))
until [[ $(podman inspect --format '{{.RestartCount}}' "$name") -ge 1 ]] && await_answer 5; do
  (( $(date +%s) < deadline )) || { fail "not restarted within 60 s"; break; }
  sleep 0.2
done
host session ls | grep -q '^t ' || fail "the session's definition did not survive in the volume: $(host session ls)"
# The first command may be told that the shell's state was lost; the next runs in a new one.
host exec -s t true >/dev/null 2>&1 || true
out=$(host exec -s t 'echo ${V:-fresh}' 2>&1) || true
[[ $out == fresh ]] || fail "a new container's shell: '$out'"

echo "== stop: SIGTERM ends every process within the grace period"
host start -s t --name sleeper2 'trap "" TERM; sleep 1000' >/dev/null
host exec -s other 'sleep 1000 & disown; echo started' >/dev/null
t=$(ms)
podman stop -t 10 "$name" >/dev/null
stop_ms=$(( $(ms) - t ))
code=$(podman inspect --format '{{.State.ExitCode}}' "$name")
echo "stopped in $stop_ms ms, exit status $code"
[[ $code == 0 ]] || fail "sbshd did not exit cleanly on SIGTERM (status $code): $(podman logs --tail 5 "$name" 2>&1)"
(( stop_ms < 10000 )) || fail "the stop took the whole grace period"

if (( failed )); then
  echo "== log of the container"
  podman logs --tail 40 "$name" 2>&1 || true
  exit 1
fi
echo "PASS"
