#!/bin/sh
# Writes sbsh's bash and zsh completions into DIR, each whole or not at all (a build step:
# cli/CMakeLists.txt). Usage: write_completions.sh SBSH DIR
set -eu
sbsh=$1
dir=$2
"$sbsh" completion bash >"$dir/sbsh.bash.tmp"
"$sbsh" completion zsh >"$dir/_sbsh.tmp"
mv "$dir/sbsh.bash.tmp" "$dir/sbsh.bash"
mv "$dir/_sbsh.tmp" "$dir/_sbsh"
