#!/usr/bin/env bash
# Configures and builds sbsh into DIR (default: build) with any extra CMake arguments.
#   scripts/build.sh [DIR] [-DSBSH_ASAN=ON ...]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$dir" --parallel "$(nproc)"
