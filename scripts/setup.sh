#!/usr/bin/env bash
# Install everything dnsstudy needs on Debian 12, from apt, PyPI, crates.io
# and the Go module proxy. Idempotent: a second run changes nothing.
# Run as root from anywhere: bash scripts/setup.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

GECKODRIVER_VERSION=0.37.1   # crates.io; Debian does not package geckodriver
APT_PACKAGES=(
  firefox-esr            # the browser under study (ESR, pinned by Debian 12's release)
  libnss3-tools          # certutil: profiles that trust the lab CA
  unbound                # lab resolvers: Do53, DoT, DoH (built with libnghttp2)
  stubby                 # DoT stub for the DoT arm
  nginx                  # lab web servers, HTTP/2
  redis-server           # the broker of crawls across vantage points (`dnsstudy broker up`)
  getdns-utils libgetdns-dev libcurl4-openssl-dev libssl-dev   # the resolution timer (timer/)
  iproute2 iptables nftables procps util-linux      # namespaces, NFQUEUE, loss, proofs, sysctl, setpriv
  passwd                 # useradd: the unprivileged browser account
  dnsutils knot-dnsutils curl tcpdump openssl ca-certificates  # checks: dig, kdig, curl
  ethtool iperf3         # link emulation: offloads off; TCP throughput in `net check`
  python3 python3-venv python3-dev gcc make pkg-config
)

log() { printf 'setup: %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: run as root (it installs Debian packages)" >&2
  exit 1
fi

# --- Debian packages --------------------------------------------------------
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
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

# Debian starts its own Redis on 6379 when the package is installed; the tool runs its own (password, AOF,
# its account) on 6380 only when asked, so the system one is stopped and left off.
if systemctl is-enabled redis-server >/dev/null 2>&1; then
  systemctl disable --now redis-server >/dev/null 2>&1 || true
fi
service redis-server stop >/dev/null 2>&1 || true   # without systemd: the init script's pidfile, not ours

# --- toolchains (preinstalled on this machine kind; Debian 12's are too old) --
for dir in /usr/local/go/bin "$HOME/.cargo/bin" /root/.cargo/bin; do
  [ -d "$dir" ] && PATH="$PATH:$dir"
done
export PATH
command -v go >/dev/null || { echo "setup.sh: Go >= 1.22 not found (expected in /usr/local/go/bin)" >&2; exit 1; }
command -v cargo >/dev/null || { echo "setup.sh: cargo not found (expected in ~/.cargo/bin, from rustup)" >&2; exit 1; }

mkdir -p build/bin
# The helpers run as the unprivileged account dnsstudy-helper, which may not be
# able to enter the checkout (a clone under /root): they are built into
# /opt/dnsstudy/bin (root's, world-readable), and build/bin links to them.
HELPERS=/opt/dnsstudy/bin
mkdir -p "$HELPERS"

# --- the NFQUEUE delayer (Go, modules pinned by delayer/go.sum) -------------
log "building $HELPERS/nfqdelay"
(cd delayer && GOFLAGS=-mod=readonly go build -trimpath -o "$HELPERS/nfqdelay" .)

# --- the resolution timers: C (getdns, libcurl) and Go (quic-go) ------------
log "building $HELPERS/dnstimer"
make -s -C timer OUT="$HELPERS"
# quictimer (DoQ, DoH3) and the lab's DoQ/DoH3 front, AdGuard dnsproxy, both
# pinned by timer/quic/go.sum (dnsproxy is a `tool` of that module).
log "building $HELPERS/quictimer and $HELPERS/dnsproxy"
(cd timer/quic && GOFLAGS=-mod=readonly go build -trimpath -o "$HELPERS/quictimer" . \
  && GOFLAGS=-mod=readonly go build -trimpath -o "$HELPERS/dnsproxy" github.com/AdguardTeam/dnsproxy)
for program in nfqdelay dnstimer quictimer dnsproxy; do
  ln -sfn "$HELPERS/$program" "build/bin/$program"
done

# --- geckodriver (crates.io, pinned) -----------------------------------------
# Installed outside the checkout: it runs as the browser account, which may
# not be able to enter the checkout's directories (e.g. a clone under /root).
GECKODRIVER_ROOT=/opt/dnsstudy/geckodriver-$GECKODRIVER_VERSION
# The version is read into a variable first: `geckodriver --version | grep -q`
# under pipefail fails at random when grep exits before geckodriver has
# written its last line (SIGPIPE).
installed="$("$GECKODRIVER_ROOT/bin/geckodriver" --version 2>/dev/null || true)"
if [[ "$installed" != "geckodriver $GECKODRIVER_VERSION"* ]]; then
  log "cargo install geckodriver $GECKODRIVER_VERSION (about 2 minutes)"
  # --force: a binary left by an interrupted install is replaced, not an error.
  cargo install geckodriver --version "$GECKODRIVER_VERSION" --locked --force \
    --root "$GECKODRIVER_ROOT" --quiet
else
  log "geckodriver $GECKODRIVER_VERSION present"
fi
chmod -R a+rX /opt/dnsstudy
ln -sfn "$GECKODRIVER_ROOT/bin/geckodriver" build/bin/geckodriver

# --- the browser account: Firefox and geckodriver never run as root ---------
if ! id -u dnsstudy-browser >/dev/null 2>&1; then
  log "creating system user dnsstudy-browser"
  useradd --system --user-group --home-dir /var/lib/dnsstudy-browser --create-home \
    --shell /usr/sbin/nologin dnsstudy-browser
fi
# --- the helpers' account: Stubby, dnsproxy, the timers, the delayer, tcpdump --
if ! id -u dnsstudy-helper >/dev/null 2>&1; then
  log "creating system user dnsstudy-helper"
  useradd --system --user-group --home-dir /nonexistent --no-create-home \
    --shell /usr/sbin/nologin dnsstudy-helper
fi

# --- Python: a project-local virtual environment with pinned packages -------
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  /usr/bin/python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .

log "done: $(.venv/bin/dnsstudy --version)"
