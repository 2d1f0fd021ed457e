#!/usr/bin/env bash
# Load, on the host, the kernel modules a worker's lab uses: a container cannot load them.
#
#   bash docker/host-modules.sh      # as root, once per boot, before the workers start
#
# HTB and TBF (the link's rate), NFQUEUE through nftables (the user-space delayer), veth (the
# lab's links). A kernel that has them built in has nothing to load: where the kernel has no
# module directory at all (/lib/modules/RELEASE, as on this project's machines), modprobe could
# only fail ("not found in directory"), so the script says so and leaves the kernel alone.
set -euo pipefail

MODULES=(sch_htb sch_tbf nfnetlink_queue nft_queue veth)
release="$(uname -r)"
if [ ! -d "/lib/modules/$release" ]; then
  echo "host-modules: kernel $release has no module directory: nothing to load (what a lab needs must be built in)"
  exit 0
fi
command -v modprobe >/dev/null || { echo "host-modules: modprobe is missing: apt-get install kmod" >&2; exit 1; }
modprobe -a "${MODULES[@]}"
echo "host-modules: loaded ${MODULES[*]}"
