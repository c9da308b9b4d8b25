#!/usr/bin/env bash
# Installs sbsh's build and test dependencies from Debian's packages when any is missing.
# Safe to run repeatedly: it does nothing when everything is present. `deps.sh --test` also
# installs what only the test suite needs.
set -euo pipefail

packages=(
  g++ make cmake ninja-build pkg-config
  libuv1-dev libmsgpack-cxx-dev libspdlog-dev libfmt-dev libgtest-dev libcli11-dev
  libedit-dev libbsd-dev libmd-dev libseccomp-dev libncurses-dev libsystemd-dev bash-builtins nlohmann-json3-dev libyaml-dev libhttp-parser-dev libvterm-dev
  bash procps groff-base man-db python3 git
  mypy python3-venv python3-pip  # the Python package's tests
  rsync  # the baseline of the snapshot benchmark
  clang libclang-rt-14-dev
)
# npm installs the official MCP clients and conformance suite that the tests drive (any npm
# will do: one that came with a Node.js from elsewhere too).
if [[ ${1:-} == --test ]] && ! command -v npm >/dev/null; then packages+=(npm); fi
# The lint (scripts/lint.sh) that the test command runs; a pager the interactive tests drive.
if [[ ${1:-} == --test ]]; then packages+=(clang-tidy less); fi
# The container tests: the Kubernetes manifests parsed (python3-yaml); the image built from
# the Debian packages (dpkg-dev, lintian; mmdebstrap for its base) and run under podman (crun,
# and runc for the machines whose cgroup layout crun 1.8 refuses).
if [[ ${1:-} == --test ]]; then packages+=(python3-yaml dpkg-dev lintian mmdebstrap podman crun runc); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "sbsh: installing missing packages: ${missing[*]}" >&2
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then
    sudo=(sudo)
  else
    echo "sbsh: run as root: apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
