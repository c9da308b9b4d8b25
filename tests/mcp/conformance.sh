#!/usr/bin/env bash
# The official MCP conformance suite in server mode against `sbsh mcp --http 127.0.0.1:0`:
#   conformance.sh NODE NODE_DIR SBSH_BIN_DIR WORK_DIR
# Every active scenario runs; those in conformance-expected-failures.yml are expected to
# fail (each with its reason there), and the suite fails on any other failure or on an entry
# that passes. sbsh mcp --http requires its token (made in $XDG_RUNTIME_DIR/sbsh/mcp-token),
# and the suite has no option for headers: bearer.mjs, preloaded, adds it to each request.
set -euo pipefail
node=$1 node_dir=$2 bin=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
"$bin/sbsh" mcp --http 127.0.0.1:0 2>"$work/mcp-http.err" &
server=$!
stop() { kill "$server" 2>/dev/null && wait "$server" 2>/dev/null || true; }
trap stop EXIT
url=
for _ in $(seq 1 200); do
  url=$(grep -o 'http://[^ ]*/mcp' "$work/mcp-http.err" || true)
  [[ -n $url ]] && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.05
done
if [[ -z $url ]]; then
  cat "$work/mcp-http.err" >&2
  echo "FAIL: sbsh mcp --http did not print its URL" >&2
  exit 1
fi
token_file=$(sed -n "s/.*TOKEN being the text of \(.*\)$/\1/p" "$work/mcp-http.err")
if [[ ! -r $token_file ]]; then
  cat "$work/mcp-http.err" >&2
  echo "FAIL: sbsh mcp --http did not say where its token is" >&2
  exit 1
fi
export SBSH_MCP_TOKEN=$(<"$token_file") SBSH_UNDICI=$node_dir/node_modules/undici/index.js
cd "$work"
set +e
"$node" --import "$here/bearer.mjs" "$node_dir/node_modules/@modelcontextprotocol/conformance/dist/index.js" \
  server --url "$url" \
  --expected-failures "$here/conformance-expected-failures.yml" >"$work/conformance.out" 2>&1
status=$?
set -e
sed -n '/=== SUMMARY ===/,$p' "$work/conformance.out"
if [[ $status -ne 0 ]]; then
  cat "$work/conformance.out" >&2
  echo "FAIL: the conformance suite exited $status" >&2
fi
exit $status
