"""The kernel backend: netem for delay, jitter and loss, with tbf under it for rate (pyroute2)."""

from __future__ import annotations

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from harness.daemons import Daemon
from harness.errors import HarnessError
from harness.shaping.backend import ShapingBackend
from harness.shaping.link_profile import LinkProfile
from harness.shaping.userspace import TBF, tbf_replace

NETEM_LIMIT = 10_000  # packets; netem's default (1000) drops at 22 Mbit/s with 150 ms of delay


def netem_available(namespace: str, ifname: str) -> bool:
    """Probe the kernel: can a netem qdisc be added here? (Leaves the interface as it was.)"""
    with IPRoute(netns=namespace) as ipr:
        index = ipr.link_lookup(ifname=ifname)[0]
        try:
            ipr.tc("add", "netem", index, 0xFFF00000, delay=1000)
        except NetlinkError:
            return False  # ENOENT: sch_netem is not in this kernel
        ipr.tc("del", index=index, handle=0xFFF00000)
        return True


class NetemBackend(ShapingBackend):
    name = "netem"

    def apply(self, profile: LinkProfile) -> list[Daemon]:
        ns = self.point.namespace
        with IPRoute(netns=ns) as ipr:
            for _, egress, _, d in self.point.directions(profile):
                index = ipr.link_lookup(ifname=egress)[0]
                if not (d.delay_ms or d.jitter_ms or d.loss_percent):
                    tbf_replace(ns, egress, d.rate_mbit)
                    continue
                try:
                    ipr.tc(
                        "replace",
                        "netem",
                        index,
                        0x10000,
                        delay=int(d.delay_ms * 1000),
                        jitter=int(d.jitter_ms * 1000),
                        loss=d.loss_percent,
                        limit=NETEM_LIMIT,
                    )
                    if d.rate_mbit:
                        ipr.tc(
                            "replace",
                            "tbf",
                            index,
                            0x100000,
                            parent=0x10001,
                            rate=f"{int(d.rate_mbit * 1000)}kbit",
                            **TBF,
                        )
                except NetlinkError as exc:
                    raise HarnessError(f"netem on {egress} in {ns} failed ({exc}); use --backend userspace") from exc
        return []

    def clear(self) -> None:
        for _, egress, _, _ in self.point.directions(LinkProfile(description="-", source="-")):
            tbf_replace(self.point.namespace, egress, None)  # deleting the root removes netem and its child
