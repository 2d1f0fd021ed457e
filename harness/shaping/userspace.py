"""The fallback backend for kernels without sch_netem.

rate: tbf on the egress interface; loss: nftables random drop on the
forward path; delay and jitter: the project's NFQUEUE delayer (delayer/),
one per direction, fed by iptables (nft's own `queue` statement is missing
on some kernels, the xt NFQUEUE target is not). There is no queue bypass:
if a delayer dies, its direction stops, and `net check` sees it.
"""

from __future__ import annotations

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from harness import netns
from harness.accounts import NFQUEUE, helper, helper_dir
from harness.daemons import Daemon
from harness.errors import HarnessError
from harness.paths import built_program
from harness.shaping.backend import ShapingBackend
from harness.shaping.link_profile import LinkProfile

TABLE = "dnsstudy_shaping"
CHAIN = "DNSSTUDY_SHAPING"
QUEUES = {"uplink": 200, "downlink": 201}
LOSS_SCALE = 1_000_000  # numgen modulus: loss resolution 0.0001 %
TBF = dict(burst=15 * 1024, latency="200ms")
DELAYER = "nfqdelay"  # the delay and jitter program, one per shaped direction


def tbf_replace(namespace: str, ifname: str, rate_mbit: float | None) -> None:
    """Put a tbf of ``rate_mbit`` at the interface's root, or remove the root qdisc (None)."""
    with IPRoute(netns=namespace) as ipr:
        index = ipr.link_lookup(ifname=ifname)[0]
        if rate_mbit is None:
            try:
                ipr.tc("del", index=index, root=True)
            except NetlinkError:
                pass  # nothing there
            return
        ipr.tc("replace", "tbf", index, 0x10000, rate=f"{int(rate_mbit * 1000)}kbit", **TBF)


class UserspaceBackend(ShapingBackend):
    name = "userspace"

    def apply(self, profile: LinkProfile) -> list[Daemon]:
        ns, run = self.point.namespace, self.point.run_dir
        daemons = []
        drops = []
        for direction, egress, ingress, d in self.point.directions(profile):
            tbf_replace(ns, egress, d.rate_mbit)
            if d.loss_percent:
                threshold = round(d.loss_percent / 100 * LOSS_SCALE)
                drops.append(
                    f'    iifname "{ingress}" meta protocol {{ ip, ip6 }} numgen random mod {LOSS_SCALE} '
                    f"< {threshold} counter name {direction}_dropped drop"
                )
            if d.delay_ms or d.jitter_ms:
                queue = QUEUES[direction]
                _iptables(ns, ["-t", "mangle", "-A", CHAIN, "-i", ingress, "-j", "NFQUEUE", "--queue-num", str(queue)])
                account = helper()  # it reads packets off the wire: unprivileged, keeping only NFQUEUE
                daemon = Daemon(
                    name=f"shaper-{direction}",
                    namespace=ns,
                    argv=account.run_as(
                        [
                            account.program(built_program(DELAYER)),
                            f"-queue={queue}",
                            f"-delay={int(d.delay_ms * 1000)}us",
                            f"-jitter={int(d.jitter_ms * 1000)}us",
                            "-dist=uniform",
                            f"-stats={helper_dir(run) / f'shaper-{direction}.json'}",
                        ],
                        keep=(NFQUEUE,),
                    ),
                    log=str(run / "logs" / f"shaper-{direction}.log"),
                    addresses=[],
                )
                daemon.start()
                daemons.append(daemon)
        counters = "".join(f"  counter {name}_dropped {{ }}\n" for name in QUEUES)
        script = (
            f"table inet {TABLE}\ndelete table inet {TABLE}\ntable inet {TABLE} {{\n{counters}"
            f"  chain forward {{\n    type filter hook forward priority -10; policy accept;\n"
            + "\n".join(drops)
            + "\n  }\n}\n"
        )
        netns.nft(ns, ["-f", "-"], script)
        return daemons

    def clear(self) -> None:
        ns = self.point.namespace
        for _, egress, _, _ in self.point.directions(LinkProfile(description="-", source="-")):
            tbf_replace(ns, egress, None)
        netns.run(ns, ["nft", "delete", "table", "inet", TABLE], check=False)
        # Our chain, jumped to from FORWARD, holds the NFQUEUE rules: flush it, keep the jump.
        if netns.run(ns, ["iptables", "-w", "-t", "mangle", "-L", CHAIN, "-n"], check=False).returncode != 0:
            _iptables(ns, ["-t", "mangle", "-N", CHAIN])
            _iptables(ns, ["-t", "mangle", "-A", "FORWARD", "-j", CHAIN])
        _iptables(ns, ["-t", "mangle", "-F", CHAIN])


def _iptables(namespace: str, args: list[str]) -> None:
    done = netns.run(namespace, ["iptables", "-w", *args], check=False)
    if done.returncode != 0:
        raise HarnessError(f"iptables in {namespace} refused {' '.join(args)}: {done.stderr.strip()}")
