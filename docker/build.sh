#!/usr/bin/env bash
# Build the dnsstudy image on this host: the debootstrapped base (docker/base-image.sh)
# and `podman build --isolation=chroot`, which needs no container runtime.
#
#   bash docker/build.sh [TAG]    # default localhost/dnsstudy:VERSION, also tagged :latest and :COMMIT
#
# TAG is the `runtime` stage, the image that is shipped. With DNSSTUDY_TEST_IMAGE=NAME the
# `test` stage (the runtime image plus pytest, ruff, mypy...) is built on it too, as NAME.
#
# The host's CA bundle goes to the build as the secret `ca` (docker/with-ca.sh), so a
# build behind a TLS-intercepting proxy reaches PyPI, crates.io and the Go module proxy.
# Set DNSSTUDY_BASE_IMAGE to build from another base (the official debian:bookworm).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
version="$(sed -n 's/^__version__ = "\(.*\)"/\1/p' harness/__init__.py)"  # the one place the version lives
TAG="${1:-localhost/dnsstudy:$version}"
BASE="${DNSSTUDY_BASE_IMAGE:-localhost/dnsstudy-base:bookworm}"

[ "$BASE" != "localhost/dnsstudy-base:bookworm" ] || bash docker/base-image.sh "$BASE"

secret=()
[ ! -s /etc/ssl/certs/ca-certificates.crt ] || secret=(--secret id=ca,src=/etc/ssl/certs/ca-certificates.crt)
printf 'build: %s from %s\n' "$TAG" "$BASE"
# Also tagged with the commit, so that an upgrade mid-study keeps the image it replaces (docs/deploy.md).
tags=(-t "$TAG" -t "${TAG%:*}:latest")
commit="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || true)"
[ -z "$commit" ] || tags+=(-t "${TAG%:*}:$commit")
build() { podman build --isolation=chroot --layers --build-arg "BASE=$BASE" "${secret[@]}" -f docker/Dockerfile "$@" .; }
size() { echo "$(( $(podman image inspect --format '{{.Size}}' "$1") / 1000000 )) MB"; }
start=$SECONDS
build --target runtime "${tags[@]}"
printf 'build: %s, %s, %d s\n' "$TAG" "$(size "$TAG")" "$(( SECONDS - start ))"
if [ -n "${DNSSTUDY_TEST_IMAGE:-}" ]; then
  build --target test -t "$DNSSTUDY_TEST_IMAGE"
  printf 'build: %s, %s\n' "$DNSSTUDY_TEST_IMAGE" "$(size "$DNSSTUDY_TEST_IMAGE")"
fi
