#!/usr/bin/env bash
# Install everything dnsstudy needs on Debian 12, from apt, PyPI, crates.io
# and the Go module proxy. Idempotent: a second run changes nothing.
# Run as root from anywhere:
#   bash scripts/setup.sh            # every step, in order (a host, and CI)
#   bash scripts/setup.sh STEP...    # some of: packages toolchains helpers geckodriver accounts venv mitmproxy project
# docker/Dockerfile runs the steps its stages need, so a host and an image are set up alike.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

GECKODRIVER_VERSION=0.37.1   # crates.io; Debian does not package geckodriver
STEPS=(packages toolchains helpers geckodriver accounts venv mitmproxy project)

log() { printf 'setup: %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: run as root (it installs Debian packages)" >&2
  exit 1
fi

# Package names from the lists in scripts/packages/, without their comments.
package_list() { sed -e 's/#.*//' "$@" | tr -s ' \t' '\n' | sed '/^$/d'; }

step_packages() {
  local missing=() pkg status
  for pkg in $(package_list scripts/packages/runtime.txt scripts/packages/chromium.txt scripts/packages/build.txt scripts/packages/host.txt); do
    status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
    [ "$status" = "install ok installed" ] || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    log "Debian packages present"
  fi
  # Debian starts its own Redis on 6379 when the package is installed; the tool runs its own (password,
  # AOF, its account) on 6380 only when asked, so the system one is stopped and left off.
  if systemctl is-enabled redis-server >/dev/null 2>&1; then
    systemctl disable --now redis-server >/dev/null 2>&1 || true
  fi
  service redis-server stop >/dev/null 2>&1 || true   # without systemd: the init script's pidfile, not ours
}

# --- toolchains (preinstalled on this machine kind; Debian 12's are too old) --
step_toolchains() {
  local dir
  for dir in /usr/local/go/bin "$HOME/.cargo/bin" /root/.cargo/bin; do
    [ -d "$dir" ] && PATH="$PATH:$dir"
  done
  export PATH
  command -v go >/dev/null || { echo "setup.sh: Go >= 1.22 not found (expected in /usr/local/go/bin)" >&2; exit 1; }
  command -v cargo >/dev/null || { echo "setup.sh: cargo not found (expected in ~/.cargo/bin, from rustup)" >&2; exit 1; }
}

# The helpers run as the unprivileged account dnsstudy-helper, which may not be
# able to enter the checkout (a clone under /root): they are built into
# /opt/dnsstudy/bin (root's, world-readable), and build/bin links to them.
HELPERS=/opt/dnsstudy/bin

step_helpers() {
  local program
  step_toolchains
  mkdir -p build/bin "$HELPERS"
  # the NFQUEUE delayer (Go, modules pinned by delayer/go.sum)
  log "building $HELPERS/nfqdelay"
  (cd delayer && GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -trimpath -o "$HELPERS/nfqdelay" .)
  # the resolution timers: C (getdns, libcurl) and Go (quic-go)
  log "building $HELPERS/dnstimer"
  make -s -C timer OUT="$HELPERS"
  # quictimer (DoQ, DoH3) and the lab's DoQ/DoH3 front, AdGuard dnsproxy, both
  # pinned by timer/quic/go.sum (dnsproxy is a `tool` of that module).
  log "building $HELPERS/quictimer and $HELPERS/dnsproxy"
  (cd timer/quic && GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -trimpath -o "$HELPERS/quictimer" . \
    && GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -trimpath -o "$HELPERS/dnsproxy" github.com/AdguardTeam/dnsproxy)
  # the lab web's HTTP/3 front (Go, quic-go's http3; modules pinned by h3front/go.sum), docs/web.md
  # and h3fetch, benchmarks/h3_front.py's client (same module)
  log "building $HELPERS/h3front and $HELPERS/h3fetch"
  (cd h3front && GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -trimpath -o "$HELPERS/h3front" . \
    && GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -trimpath -o "$HELPERS/h3fetch" ./fetch)
  for program in nfqdelay dnstimer quictimer dnsproxy h3front h3fetch; do
    ln -sfn "$HELPERS/$program" "build/bin/$program"
  done
  chmod -R a+rX /opt/dnsstudy
}

# geckodriver (crates.io, pinned), installed outside the checkout: it runs as the
# browser account, which may not be able to enter the checkout's directories.
step_geckodriver() {
  local root=/opt/dnsstudy/geckodriver-$GECKODRIVER_VERSION installed
  # The version is read into a variable first: `geckodriver --version | grep -q`
  # under pipefail fails at random when grep exits before geckodriver has
  # written its last line (SIGPIPE).
  installed="$("$root/bin/geckodriver" --version 2>/dev/null || true)"
  if [[ "$installed" != "geckodriver $GECKODRIVER_VERSION"* ]]; then
    step_toolchains
    log "cargo install geckodriver $GECKODRIVER_VERSION (about 2 minutes)"
    # --force: a binary left by an interrupted install is replaced, not an error.
    cargo install geckodriver --version "$GECKODRIVER_VERSION" --locked --force \
      --root "$root" --quiet
  else
    log "geckodriver $GECKODRIVER_VERSION present"
  fi
  chmod -R a+rX /opt/dnsstudy
  mkdir -p build/bin
  ln -sfn "$root/bin/geckodriver" build/bin/geckodriver
}

# Firefox and geckodriver run as dnsstudy-browser; Stubby, dnsproxy, the timers,
# the delayer and tcpdump as dnsstudy-helper. Neither is ever root.
step_accounts() {
  if ! id -u dnsstudy-browser >/dev/null 2>&1; then
    log "creating system user dnsstudy-browser"
    useradd --system --user-group --home-dir /var/lib/dnsstudy-browser --create-home \
      --shell /usr/sbin/nologin dnsstudy-browser
  fi
  if ! id -u dnsstudy-helper >/dev/null 2>&1; then
    log "creating system user dnsstudy-helper"
    useradd --system --user-group --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin dnsstudy-helper
  fi
}

# Python: a project-local virtual environment from the one lock (requirements*.txt only,
# so that an image caches it apart from the source): its development half, which includes
# the run-time half, unless DNSSTUDY_REQUIREMENTS names another (the image: requirements.txt)...
step_venv() {
  local lock="${DNSSTUDY_REQUIREMENTS:-requirements-dev.txt}"
  if [ ! -x .venv/bin/python ]; then
    log "creating .venv"
    /usr/bin/python3 -m venv .venv
  fi
  .venv/bin/python -m pip install -q --disable-pip-version-check -r "$lock"
}

# mitmproxy for 'dnsstudy record', in an environment of its own: its pins clash with ours
# (scripts/mitmproxy-requirements.txt is its lock). World-readable: mitmdump runs as the helper account.
step_mitmproxy() {
  if [ ! -x build/mitmproxy-venv/bin/python ]; then
    log "creating build/mitmproxy-venv"
    mkdir -p build
    /usr/bin/python3 -m venv build/mitmproxy-venv
  fi
  build/mitmproxy-venv/bin/python -m pip install -q --disable-pip-version-check \
    -r scripts/mitmproxy-requirements.txt
  chmod -R a+rX build/mitmproxy-venv
}

# ...and the project itself, installed in place.
step_project() {
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
  log "done: $(.venv/bin/dnsstudy --version)"
}

[ "$#" -gt 0 ] || set -- "${STEPS[@]}"
for step in "$@"; do
  [[ " ${STEPS[*]} " == *" $step "* ]] || { echo "setup.sh: unknown step '$step' (steps: ${STEPS[*]})" >&2; exit 2; }
done
for step in "$@"; do
  "step_$step"
done
