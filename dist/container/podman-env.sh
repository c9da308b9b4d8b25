# Sourced by build.sh and tests/container/image_test.sh: can podman run a container here, and
# if Debian's defaults cannot, what makes it able to? `podman_env` returns 0 when a container
# runs, having exported CONTAINERS_CONF (a containers.conf of its own) when the defaults
# needed changing; else 1, with the reason in $podman_problem. Two things it knows to change,
# both seen on virtual machines that run as root without every capability:
#  - crun 1.8 (Debian 12) refuses a hybrid cgroup layout whose cgroup v2 has controllers
#    ("cgroups in hybrid mode not supported"): runc, installed with apt, runs there;
#  - podman sets RLIMIT_NOFILE and RLIMIT_NPROC to its defaults (1048576) in the container,
#    which a root without CAP_SYS_RESOURCE cannot raise to: the limits are taken from this
#    shell instead (nproc at most 32768, which such runtimes were seen to take).
podman_problem=""
podman_env() {
  local probe lib err conf
  probe=$(mktemp -d)
  mkdir -p "$probe/bin"
  cp /bin/true "$probe/bin/"
  for lib in $(ldd /bin/true | grep -o '/[^ ]*'); do mkdir -p "$probe$(dirname "$lib")" && cp "$lib" "$probe$lib"; done
  if err=$(timeout 60 podman run --rm --network=none --rootfs "$probe" /bin/true 2>&1); then
    rm -rf "$probe"
    return 0
  fi
  conf=$(mktemp --tmpdir --suffix=-containers.conf)
  local first=$err limits="" runtime="" nproc tries
  nproc=$(ulimit -Hu)
  [[ $nproc == unlimited || $nproc -gt 32768 ]] && nproc=32768
  for tries in 1 2 3; do
    [[ $err == *setrlimit* || $err == *"rlimit type"* ]] &&
      limits="default_ulimits = [\"nofile=$(ulimit -Hn):$(ulimit -Hn)\", \"nproc=$nproc:$nproc\"]"
    if [[ $err == *"hybrid mode"* && -z $runtime ]]; then
      if ! command -v runc >/dev/null; then
        echo "podman_env: crun cannot run here (${err//$'\n'/ }): installing runc" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends runc >/dev/null 2>&1 || true
      fi
      runtime='runtime = "runc"'
    fi
    printf '[containers]\n%s\n[engine]\n%s\n' "$limits" "$runtime" >"$conf"
    if err=$(CONTAINERS_CONF=$conf timeout 60 podman run --rm --network=none --rootfs "$probe" /bin/true 2>&1); then
      rm -rf "$probe"
      export CONTAINERS_CONF=$conf
      echo "podman_env: podman's defaults cannot run a container here (${first//$'\n'/ }); using $conf:" >&2
      grep . "$conf" | sed 's/^/  /' >&2
      return 0
    fi
  done
  rm -rf "$probe" "$conf"
  podman_problem="${first//$'\n'/ }; with the runtime and limits adapted: ${err//$'\n'/ }"
  return 1
}

# Removes the containers.conf podman_env made, if it made one.
podman_env_cleanup() {
  [[ ${CONTAINERS_CONF:-} == "${TMPDIR:-/tmp}"/tmp.*-containers.conf ]] && rm -f "$CONTAINERS_CONF"
  return 0
}
