#!/usr/bin/env bash
# Builds sbsh and shows its main job: a session that keeps its directory, variables and
# functions across separate `sbsh exec` calls, a timeout that really stops the command, and
# exact exit codes. Runs against a private daemon that it starts and stops itself.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh build -DSBSH_TESTS=OFF -DSBSH_BENCH=OFF >/dev/null
sbsh=$PWD/build/bin/sbsh

tmp=$(mktemp -d)
export XDG_RUNTIME_DIR=$tmp/run SBSH_STATE_DIR=$tmp/state
mkdir -m 700 -p "$XDG_RUNTIME_DIR"
trap '"$sbsh" shutdown; rm -rf "$tmp"' EXIT

# Prints the command as a user would type it, runs it, and shows its exit code.
run() {
  local opts=()
  while [[ $1 == -* ]]; do opts+=("$1" "$2"); shift 2; done
  printf "\n$ sbsh exec -s demo %s'%s'\n" "${opts[*]:+${opts[*]} }" "$*"
  set +e
  "$sbsh" exec -s demo "${opts[@]}" "$@"
  local rc=$?
  set -e
  printf '[exit code %d]\n' "$rc"
}

echo "sbsh demo: every line below is a separate sbsh process; the shell persists in sbshd."
run 'mkdir -p /tmp/sbsh-demo && cd /tmp/sbsh-demo && export GREETING=hello && counter=1'
run 'greet() { echo "$GREETING from $(pwd), call $counter"; counter=$((counter+1)); }'
run 'greet; greet'
run 'pwd; echo "counter is now $counter"'
run 'echo to stderr >&2; exit 3'
run 'echo "a new shell after exit: cwd=$(pwd) GREETING=${GREETING:-unset}"'
run 'sh -c "kill -TERM \$\$"'
run -t 1s 'sleep 30'
run 'echo "the session is still usable: $(date +%T)"'
echo
"$sbsh" status
