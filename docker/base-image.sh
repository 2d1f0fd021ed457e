#!/usr/bin/env bash
# Make a Debian bookworm base image with debootstrap and import it into the local
# container storage, for hosts that cannot pull docker.io/library/debian:bookworm.
# The image gets the same apt sources as the official one (bookworm, -updates and
# the security archive), so a build from it installs the same package versions.
#
#   bash docker/base-image.sh [IMAGE]     # default localhost/dnsstudy-base:bookworm
#
# Idempotent: an image already in storage is kept (remove it to make it again).
# Needs root, debootstrap and podman (scripts/setup.sh installs both).
set -euo pipefail

IMAGE="${1:-localhost/dnsstudy-base:bookworm}"
SUITE=bookworm
MIRROR="${DNSSTUDY_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY="${DNSSTUDY_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}"

log() { printf 'base-image: %s\n' "$*"; }

if podman image exists "$IMAGE"; then
  log "$IMAGE present"
  exit 0
fi

work="$(mktemp -d /var/tmp/dnsstudy-base.XXXXXX)"
# --one-file-system: never into what a failed debootstrap left mounted (proc, sys) in the root.
trap 'rm -rf --one-file-system "$work"' EXIT
root="$work/rootfs"

log "debootstrap $SUITE from $MIRROR (about 2 minutes)"
debootstrap --variant=minbase "$SUITE" "$root" "$MIRROR" >"$work/debootstrap.log" 2>&1 \
  || { tail -20 "$work/debootstrap.log" >&2; echo "base-image: debootstrap failed" >&2; exit 1; }

# The official image's sources, in deb822 form; debootstrap wrote only the main suite.
rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
# What an image does not need: apt's caches and the lists debootstrap left.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*

log "importing as $IMAGE"
tar -C "$root" --numeric-owner -c . | podman import --quiet \
  --change 'CMD ["bash"]' --change 'ENV LANG=C.UTF-8' - "$IMAGE" >/dev/null
log "done: $IMAGE ($(podman image inspect --format '{{.Size}}' "$IMAGE") bytes)"
