#!/usr/bin/env bash
# docker/compose.yaml on a podman host: Debian's docker-compose against podman's Docker-compatible API.
# Run it where you would run `docker compose`, with the same arguments:
#
#   cd docker && bash podman-compose.sh up -d       # then: ps, logs -f coordinator, down, ...
#
# For the length of the command it:
# - uses the project's podman configuration, docker/containers.conf (runc, cgroupfs), unless
#   CONTAINERS_CONF names another; nothing under /etc changes;
# - serves podman's API on a socket of its own (`podman system service`) and points docker-compose at it;
# - runs the health checks of compose containers every 2 s. podman runs them from systemd timers;
#   without systemd (containers, many CI runners) none runs and `depends_on: {condition:
#   service_healthy}` waits forever. Where systemd runs them too, a check run twice is harmless.
# The containers do not need the script once started: conmon keeps them and their restart policy.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$HERE/containers.conf}"
for tool in podman docker-compose; do
  command -v "$tool" >/dev/null || { echo "podman-compose.sh: $tool is missing: run scripts/setup.sh" >&2; exit 1; }
done

run="$(mktemp -d /tmp/dnsstudy-podman.XXXXXX)"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$run"
}
trap cleanup EXIT

podman system service --time=0 "unix://$run/podman.sock" 2>"$run/service.log" &
pids+=($!)
for _ in $(seq 100); do [ -S "$run/podman.sock" ] && break; sleep 0.1; done
[ -S "$run/podman.sock" ] || { cat "$run/service.log" >&2; echo "podman-compose.sh: podman's API did not start" >&2; exit 1; }
export DOCKER_HOST="unix://$run/podman.sock"

health_checks() {
  local id
  while sleep 2; do
    for id in $(podman ps -q --filter label=com.docker.compose.project --filter health=starting 2>/dev/null); do
      podman healthcheck run "$id" >/dev/null 2>&1 || true
    done
  done
}
health_checks &
pids+=($!)

status=0
docker-compose "$@" || status=$?
exit "$status"
