#!/usr/bin/env bash
# Builds sbsh's Debian packages with the Debian tools (debian/, dpkg-buildpackage) and checks
# them with lintian: sbsh, libsbsh0, libsbsh-dev, python3-sbsh, and the -dbgsym packages
# with their debug symbols. Missing tools and build dependencies are installed with apt.
#   OUT=DIR scripts/package.sh        (default OUT: dist/out)
# The build runs in a copy of the source tree in dist/deb/ (dpkg-buildpackage writes next to
# it), so the tree itself is left as it was; the copy's path stays the same from one run to
# the next, so that ccache (PATH=/usr/lib/ccache:$PATH) can serve a rebuild. lintian's
# errors fail the script; its other tags are shown.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
out=${OUT:-dist/out}
mkdir -p "$out"
out=$(cd "$out" && pwd)

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "package.sh: run as root, or install sudo" >&2; exit 1; }
  sudo=(sudo)
fi
apt_install() {
  echo "package.sh: installing $*" >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
missing=()
for p in dpkg-dev lintian; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  "${sudo[@]}" apt-get update -qq
  apt_install "${missing[@]}"
fi
if ! dpkg-checkbuilddeps debian/control 2>/dev/null; then
  echo "package.sh: installing the build dependencies of debian/control" >&2
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -qq --no-install-recommends "$src" >/dev/null
fi

version=$(dpkg-parsechangelog -S Version)
tmp=$src/dist/deb
rm -rf "$tmp"
tree=$tmp/sbsh-${version%%-*}
mkdir -p "$tree"
# The files git knows of (committed or not, ignored ones left out); every file but the
# build directories when this is not a git checkout.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
    xargs -0 cp --parents -t "$tree"
else
  tar -c --exclude='./build*' --exclude=./dist/out --exclude=./dist/deb --exclude='./obj-*' . | tar -x -C "$tree"
fi

echo "== dpkg-buildpackage ($version)"
(cd "$tree" && DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-parallel=$(nproc)}" dpkg-buildpackage -us -uc -b)

changes=$(ls "$tmp"/sbsh_*.changes)
echo "== lintian"
lintian --info --display-info --fail-on error "$changes"

find "$tmp" -maxdepth 1 -type f \( -name '*.deb' -o -name '*.changes' -o -name '*.buildinfo' \) -exec cp -t "$out" {} +
echo "== packages in $out"
(cd "$out" && ls -1 ./*"_${version}_"*.deb)
