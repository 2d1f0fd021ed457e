#!/usr/bin/env bash
# Build the dnsstudy image on this host: the debootstrapped base (docker/base-image.sh)
# and `podman build --isolation=chroot`, which needs no container runtime.
#
#   bash docker/build.sh [--browsers firefox,chromium|firefox] [TAG]
#
# --browsers firefox,chromium (the default) builds the `runtime` stage, Firefox and Chromium,
# tagged localhost/dnsstudy:VERSION, :latest and :COMMIT. --browsers firefox builds the
# `runtime-firefox` stage, Firefox alone, tagged localhost/dnsstudy:VERSION-firefox, :firefox
# and :COMMIT-firefox. The two share every layer but Chromium's, the last: the second one
# built takes seconds. TAG replaces the first tag; the others keep its repository.
# With DNSSTUDY_TEST_IMAGE=NAME the `test` stage (the runtime image plus pytest, ruff, mypy...)
# is built on the default image too, as NAME.
#
# The host's CA bundle goes to the build as the secret `ca` (docker/with-ca.sh), so a
# build behind a TLS-intercepting proxy reaches PyPI, crates.io and the Go module proxy.
# Set DNSSTUDY_BASE_IMAGE to build from another base (the official debian:bookworm).
set -euo pipefail

usage() { echo "usage: bash docker/build.sh [--browsers firefox,chromium|firefox] [TAG]" >&2; exit 2; }

browsers=firefox,chromium
while [ $# -gt 0 ]; do
  case "$1" in
    --browsers) [ $# -ge 2 ] || usage; browsers="$2"; shift 2 ;;
    --browsers=*) browsers="${1#*=}"; shift ;;
    -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) echo "build.sh: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -le 1 ] || usage
case "$browsers" in
  firefox,chromium|chromium,firefox) target=runtime; suffix="" ;;
  firefox) target=runtime-firefox; suffix="-firefox" ;;
  *) echo "build.sh: --browsers $browsers: an image holds firefox,chromium (the default) or firefox" >&2; exit 2 ;;
esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
version="$(sed -n 's/^__version__ = "\(.*\)"/\1/p' harness/__init__.py)"  # the one place the version lives
TAG="${1:-localhost/dnsstudy:$version$suffix}"
BASE="${DNSSTUDY_BASE_IMAGE:-localhost/dnsstudy-base:bookworm}"

[ "$BASE" != "localhost/dnsstudy-base:bookworm" ] || bash docker/base-image.sh "$BASE"

secret=()
[ ! -s /etc/ssl/certs/ca-certificates.crt ] || secret=(--secret id=ca,src=/etc/ssl/certs/ca-certificates.crt)
printf 'build: %s (%s) from %s\n' "$TAG" "$browsers" "$BASE"
# The browsers' "latest", and the commit, so that an upgrade mid-study keeps the image it replaces (docs/deploy.md).
repo="${TAG%:*}"
latest="$repo:latest"
[ -z "$suffix" ] || latest="$repo:${suffix#-}"
tags=(-t "$TAG" -t "$latest")
commit="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || true)"
[ -z "$commit" ] || tags+=(-t "$repo:$commit$suffix")
build() { podman build --isolation=chroot --layers --build-arg "BASE=$BASE" "${secret[@]}" -f docker/Dockerfile "$@" .; }
size() { echo "$(( $(podman image inspect --format '{{.Size}}' "$1") / 1000000 )) MB"; }
start=$SECONDS
build --target "$target" "${tags[@]}"
printf 'build: %s (%s), %s, %d s\n' "$TAG" "$browsers" "$(size "$TAG")" "$(( SECONDS - start ))"
if [ -n "${DNSSTUDY_TEST_IMAGE:-}" ]; then
  [ "$target" = runtime ] || { echo "build.sh: the test stage is built on the default image (both browsers)" >&2; exit 2; }
  build --target test -t "$DNSSTUDY_TEST_IMAGE"
  printf 'build: %s, %s\n' "$DNSSTUDY_TEST_IMAGE" "$(size "$DNSSTUDY_TEST_IMAGE")"
fi
