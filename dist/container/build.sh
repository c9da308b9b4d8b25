#!/usr/bin/env bash
# Builds the sbsh container image (dist/container/Containerfile) with podman, from Debian 12
# and sbsh's own Debian packages only: no container registry is contacted.
#   dist/container/build.sh [--debs DIR] [--tag NAME] [--mirror URL]
# --debs: where sbsh_*.deb and libsbsh0_*.deb are (default: dist/out, made with
#   scripts/package.sh when it has none). --tag: the image's name (default sbsh:VERSION, also
#   tagged sbsh:latest). --mirror: the Debian mirror (default http://deb.debian.org/debian).
# The base is a minimal Debian 12 made by mmdebstrap with the packages' dependencies in it,
# imported as localhost/sbsh-base:bookworm-HASH (HASH: of that list, so a base is made once
# per list), so that the Containerfile's install downloads nothing. podman and mmdebstrap
# are installed with apt when missing, and adapted to a machine whose runtime or limits need
# it (podman-env.sh). Prints the image's name and size at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
debs=dist/out tag="" mirror=http://deb.debian.org/debian
while [[ $# -gt 0 ]]; do
  case $1 in
    --debs) debs=${2:?--debs takes a directory}; shift 2 ;;
    --tag) tag=${2:?--tag takes a name}; shift 2 ;;
    --mirror) mirror=${2:?--mirror takes a URL}; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

sudo=()
[[ $(id -u) -eq 0 ]] || sudo=(sudo)
need=()
command -v podman >/dev/null || need+=(podman crun)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
if [[ ${#need[@]} -gt 0 ]]; then
  echo "build.sh: installing ${need[*]}" >&2
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# shellcheck source=dist/container/podman-env.sh
source dist/container/podman-env.sh
podman_env || { echo "build.sh: podman cannot run a container here: $podman_problem" >&2; exit 1; }
trap podman_env_cleanup EXIT

shopt -s nullglob
pkgs=("$debs"/sbsh_*.deb "$debs"/libsbsh0_*.deb)
if [[ ${#pkgs[@]} -eq 0 && $debs == dist/out ]]; then
  echo "build.sh: no packages in dist/out: building them (scripts/package.sh)" >&2
  OUT=dist/out scripts/package.sh
  pkgs=("$debs"/sbsh_*.deb "$debs"/libsbsh0_*.deb)
fi
[[ ${#pkgs[@]} -eq 2 ]] || {
  echo "build.sh: $debs must hold exactly one sbsh_*.deb and one libsbsh0_*.deb (it holds: ${pkgs[*]:-none})" >&2
  exit 1
}
version=$(dpkg-deb -f "${pkgs[0]}" Version)
latest=""
[[ -n $tag ]] || { tag=sbsh:${version%%-*}; latest=sbsh:latest; }

# The dependencies of both packages, by name (the first of alternatives; versions are those
# of Debian 12, which the packages were built against), but each other.
deps=$(for p in "${pkgs[@]}"; do dpkg-deb -f "$p" Depends; done | tr ',' '\n' |
  sed -e 's/|.*//' -e 's/(.*)//' -e 's/:any//' -e 's/[[:space:]]//g' | grep -v -x -e '' -e sbsh -e libsbsh0 | sort -u)
include=$(echo $deps | tr ' ' ',')
base=localhost/sbsh-base:bookworm-$(echo "$include $mirror" | sha256sum | cut -c1-12)
if ! podman image exists "$base"; then
  echo "build.sh: making $base with mmdebstrap (Debian 12, minbase, $include)" >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"; podman_env_cleanup' EXIT
  mmdebstrap --quiet --variant=minbase --include="$include" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    bookworm "$tmp/rootfs.tar" "$mirror"
  podman import --quiet --change 'CMD ["/bin/bash"]' "$tmp/rootfs.tar" "$base" >/dev/null
  rm -rf "$tmp"
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"; podman_env_cleanup' EXIT
mkdir "$ctx/debs"
cp "${pkgs[@]}" "$ctx/debs/"
# The image the tag named before, if any: dropped below once nothing names it.
old=$(podman image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
# --pull=never: the base is local, and no registry is asked for anything. docker format:
# podman's default OCI format drops HEALTHCHECK.
podman build --quiet --pull=never --format docker --build-arg BASE="$base" \
  -f dist/container/Containerfile -t "$tag" "$ctx" >/dev/null
[[ -z $latest ]] || podman tag "$tag" "$latest"
if [[ -n $old && $old != "$(podman image inspect --format '{{.Id}}' "$tag")" ]]; then
  [[ $(podman image inspect --format '{{len .RepoTags}}' "$old" 2>/dev/null) != 0 ]] || podman rmi "$old" >/dev/null 2>&1 || true
fi
size=$(podman image inspect --format '{{.Size}}' "$tag")
echo "$tag $size"
