# shellcheck shell=bash
# A Docker engine and a python base image for the end-to-end scripts (scripts/container-e2e,
# scripts/act-e2e), sourced, not run. One copy of the start-up, so both test the image the
# same way.
#
# With a Docker engine already reachable (GitHub's ubuntu-latest), that engine and the default
# base (the Dockerfile's ARG BASE_IMAGE, python:3.12-slim, or $E2E_BASE_IMAGE). Without one (the
# project's CI machine: no engine, no registry), as root: a private dockerd (its data kept in
# $CACHE/docker so rebuilds reuse layers; stopped by engine_down) and a base image made from
# Debian packages with debootstrap (the rootfs cached in $CACHE), with the machine's certificate
# authorities copied in on every run, and tagged under the Dockerfile's default base name too
# (so a build that passes no BASE_IMAGE, as act's and GitHub's do, finds it without a registry).
#
# The caller sets WORK (a fresh temporary directory, removed by the caller) and CACHE, defines
# log MESSAGE and die MESSAGE, calls engine_up, and calls engine_down from its EXIT trap. After
# engine_up: DOCKER is the client command (an array), DOCKER_HOST_URI the engine's address (empty
# for the engine already running), BASE the base image's name.

DOCKER=(docker)
DOCKER_HOST_URI=
DOCKERD_PID=
BG_PID=
BASE=

# Long commands run in the background and are waited for, so a signal (a CI timeout) runs the
# cleanup at once instead of after them.
in_background() {
  "$@" &
  BG_PID=$!
  wait "$BG_PID"
  local status=$?
  BG_PID=
  return "$status"
}

engine_dockerfile_base() {
  sed -n 's/^ARG BASE_IMAGE=\([^[:space:]]*\).*/\1/p' "${ROOT:-.}/Dockerfile" | head -1
}

engine_up() {
  if docker info >/dev/null 2>&1; then
    log "using the Docker engine already running"
    BASE=${E2E_BASE_IMAGE:-$(engine_dockerfile_base)}
    DOCKER_HOST_URI=${DOCKER_HOST:-}
    return 0
  fi
  [ "$(id -u)" = 0 ] || die "no Docker engine reachable, and starting one needs root"
  if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
    die "needs dockerd and debootstrap: apt-get install docker.io debootstrap"
  fi
  DOCKER_HOST_URI=unix://$WORK/docker.sock
  DOCKER=(/usr/bin/docker -H "$DOCKER_HOST_URI")  # Debian's client has BuildKit
  mkdir -p "$CACHE"
  exec 9>"$CACHE/lock"
  flock 9  # one private engine per cache directory at a time

  if ! engine_start_dockerd; then
    log "dockerd did not start; clearing its cached data and trying once more"
    tail -5 "$WORK/dockerd.log" || true
    kill "$DOCKERD_PID" 2>/dev/null || true
    wait "$DOCKERD_PID" 2>/dev/null || true
    rm -rf "$CACHE/docker"
    engine_start_dockerd || { tail -20 "$WORK/dockerd.log"; die "dockerd does not start"; }
  fi
  log "private dockerd up (pid $DOCKERD_PID)"

  # A python base from Debian packages (no registry needed), cached.
  local rootfs=$CACHE/rootfs-bookworm mirror stamp default_base
  if [ ! -f "$rootfs/.complete" ]; then
    mirror=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -m1 -v security || true)
    mirror=${mirror:-http://deb.debian.org/debian}
    log "debootstrap bookworm from $mirror"
    rm -rf "$rootfs" "$rootfs.tmp"
    in_background debootstrap --variant=minbase \
      --include=python3,python3-pip,python3-venv,ca-certificates \
      bookworm "$rootfs.tmp" "$mirror" >"$WORK/debootstrap.log" 2>&1 \
      || { tail -20 "$WORK/debootstrap.log"; die "debootstrap failed"; }
    rm -rf "$rootfs.tmp"/usr/share/doc/* "$rootfs.tmp"/usr/share/man/* \
      "$rootfs.tmp"/var/lib/apt/lists/* "$rootfs.tmp"/var/cache/apt/*
    rm -f "$rootfs.tmp"/usr/lib/python3*/EXTERNALLY-MANAGED
    ln -sf python3 "$rootfs.tmp/usr/bin/python"
    touch "$rootfs.tmp/.complete"
    mv "$rootfs.tmp" "$rootfs"
  fi
  # This machine's certificate authorities (HTTPS to PyPI goes through them), every run.
  rm -f "$rootfs"/usr/local/share/ca-certificates/*.crt
  cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/" 2>/dev/null || true
  chroot "$rootfs" update-ca-certificates >/dev/null 2>&1 || die "update-ca-certificates in the base failed"
  stamp=$(cat "$rootfs/.complete" "$rootfs"/etc/ssl/certs/ca-certificates.crt | sha256sum | cut -c1-12)
  BASE=multiturn-eval-localbase:$stamp
  if ! "${DOCKER[@]}" image inspect "$BASE" >/dev/null 2>&1; then
    log "importing the base image"
    tar -C "$rootfs" --exclude=./.complete -c . | "${DOCKER[@]}" import \
      -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      -c 'ENV LANG=C.UTF-8' \
      -c 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
      -c 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
      -c 'ENV REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt' \
      -c 'CMD ["python3"]' - "$BASE" >/dev/null
  fi
  default_base=$(engine_dockerfile_base)
  if [ -n "$default_base" ]; then
    "${DOCKER[@]}" tag "$BASE" "$default_base" || die "cannot tag the base as $default_base"
  fi
}

engine_start_dockerd() {
  dockerd --data-root "$CACHE/docker" --exec-root "$WORK/exec" --pidfile "$WORK/docker.pid" \
    -H "$DOCKER_HOST_URI" >"$WORK/dockerd.log" 2>&1 &
  DOCKERD_PID=$!
  for _ in $(seq 1 120); do
    "${DOCKER[@]}" info >/dev/null 2>&1 && return 0
    kill -0 "$DOCKERD_PID" 2>/dev/null || break
    sleep 0.5
  done
  return 1
}

# Stop what engine_up started (and a background command still running); safe to call twice.
engine_down() {
  if [ -n "$BG_PID" ]; then kill "$BG_PID" 2>/dev/null; wait "$BG_PID" 2>/dev/null; BG_PID=; fi
  if [ -n "$DOCKERD_PID" ]; then
    # dangling images of the last day stay: the build stages act's (classic) builder reuses
    "${DOCKER[@]}" image prune -f --filter until=24h >/dev/null 2>&1
    kill "$DOCKERD_PID" 2>/dev/null
    for _ in $(seq 1 60); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$DOCKERD_PID" 2>/dev/null
    wait "$DOCKERD_PID" 2>/dev/null
    DOCKERD_PID=
  fi
  # dockerd can leave its network namespace mounted under the exec root
  grep -o " $WORK/[^ ]*" /proc/mounts 2>/dev/null | sort -r | while read -r mount; do
    umount -l "$mount" 2>/dev/null
  done
  return 0
}
