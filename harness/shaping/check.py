"""`net check`: measure the link a place actually has, and judge it against the profile's targets.

RTT and loss per direction come from UDP probes to an echo beyond the
shaper (probes.py: the path's RTT, without what the hosts' scheduling adds;
judged on its median), the bottleneck rate of each shaped direction from a UDP
flow offered above it (rate.py), congestion control as each namespace's
kernel reports it; verdicts.py says what is on target.
"""

from __future__ import annotations

import statistics
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness import netns
from harness.errors import HarnessError
from harness.place import Place
from harness.shaping.link_profile import LinkProfile
from harness.shaping.probes import probe_path, require_probe_peer
from harness.shaping.rate import STALL_S, measure_rates
from harness.shaping.verdicts import link_targets, link_verdicts


@dataclass
class LinkCheck:
    """What was measured, and the profile's targets."""

    profile: str
    backend: str | None
    probes: int
    rtt_mean_ms: float | None  # the path's RTTs (probes.py: what the hosts' scheduling added is taken off)
    rtt_sd_ms: float | None
    uplink_loss_percent: float
    downlink_loss_percent: float
    uplink_lost: int
    downlink_lost: int
    uplink_rate_mbit: float | None
    downlink_rate_mbit: float | None
    congestion_control: dict[str, str]
    rate_tests: dict = field(default_factory=dict)  # per shaped direction: how the rate was measured
    targets: dict = field(default_factory=dict)
    verdicts: dict = field(default_factory=dict)
    problem: str | None = None
    rtt_median_ms: float | None = None  # what the RTT verdict judges
    host_ms: float | None = None  # the mean time the client's and the echo's scheduling added to a probe, taken off

    def to_dict(self) -> dict:
        return asdict(self)

    def rows(self) -> list[tuple[str, str, str, bool | None]]:
        """(measure, measured, target, within target) for a table; None where there is no target."""
        t, v = self.targets, self.verdicts
        return [
            ("RTT median", _show(self.rtt_median_ms, " ms"), _show(t["rtt_mean_ms"], " ms"), v["rtt_within_2ms"]),
            ("RTT mean, SD", f"{_show(self.rtt_mean_ms, ' ms')}, {_show(self.rtt_sd_ms, ' ms')}", "", None),
            ("host delay taken off (mean)", _show(self.host_ms, " ms"), "", None),
            (
                "uplink loss",
                f"{self.uplink_loss_percent:g} % ({self.uplink_lost})",
                _show(t["uplink_loss_percent"], " %"),
                v["uplink_loss_in_95ci"],
            ),
            (
                "downlink loss",
                f"{self.downlink_loss_percent:g} % ({self.downlink_lost})",
                _show(t["downlink_loss_percent"], " %"),
                v["downlink_loss_in_95ci"],
            ),
            (
                "uplink rate",
                _show(self.uplink_rate_mbit, " Mbit/s"),
                _show(t["uplink_rate_mbit"], " Mbit/s"),
                v["uplink_rate_within_5pct"],
            ),
            (
                "downlink rate",
                _show(self.downlink_rate_mbit, " Mbit/s"),
                _show(t["downlink_rate_mbit"], " Mbit/s"),
                v["downlink_rate_within_5pct"],
            ),
        ]

    @property
    def passed(self) -> bool:
        """The link is up and no measurement missed its target."""
        return self.problem is None and not any(v is False for v in self.verdicts.values())


def _show(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:g}{unit}"


def read_sysctl(namespace: str, key: str) -> str:
    """A sysctl's value as ``namespace`` sees it (empty if it cannot be read)."""
    done = subprocess.run(
        netns.command(namespace, ["cat", "/proc/sys/" + key.replace(".", "/")]),
        capture_output=True,
        text=True,
        timeout=10,
    )
    return done.stdout.strip()


def set_congestion_control(place: Place, algorithm: str) -> None:
    """Pin TCP congestion control in the client and server namespaces, or say why not."""
    allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text().split()
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    if algorithm not in available:
        raise HarnessError(
            f"congestion control '{algorithm}' is not in this kernel (available: {', '.join(available)})"
        )
    if algorithm not in allowed:
        raise HarnessError(
            f"congestion control '{algorithm}' is available but not allowed for namespaces: "
            f"add it to net.ipv4.tcp_allowed_congestion_control in the host (allowed: {', '.join(allowed)})"
        )
    peer = require_probe_peer(place)
    for namespace in (peer.client_namespace, peer.server_namespace):
        netns.set_sysctl(namespace, "net.ipv4.tcp_congestion_control", algorithm)


def check_link(
    place: Place,
    profile: LinkProfile,
    backend: str | None,
    probes: int = 300,
    interval: float = 0.01,
    seconds: float = 0.0,
    base_rtt_ms: float = 0.1,
) -> LinkCheck:
    """Measure RTT, loss and bottleneck rate per direction, and judge them against the profile.

    ``seconds`` is the least time a direction's rate is measured over; the test takes longer where the
    rate needs it (docs/network.md).
    """
    if probes < 200:
        raise HarnessError(f"--probes must be at least 200 (got {probes})")
    peer = require_probe_peer(place)
    trip = profile.round_trip()
    # An echo later than three times the longest round trip the profile allows, plus a stall in each of the
    # four user-space stages a probe passes (client loop, uplink delayer, echo, downlink delayer), is lost.
    wait = 3 * (trip["added_rtt_ms"] + 4 * trip["rtt_jitter_ms"]) / 1000 + 4 * STALL_S
    run = probe_path(place, probes, interval, wait)
    rtts, seen, sent = run.rtts, run.seen, run.sent
    up_lost, down_lost = sent - seen, seen - len(rtts)
    rates = measure_rates(peer, profile, seconds) if rtts else {}
    check = LinkCheck(
        profile=profile.name,
        backend=backend,
        probes=sent,
        rtt_mean_ms=round(statistics.fmean(rtts), 3) if rtts else None,
        rtt_sd_ms=round(statistics.stdev(rtts), 3) if len(rtts) > 1 else None,
        rtt_median_ms=round(statistics.median(rtts), 3) if rtts else None,
        host_ms=round(statistics.fmean(run.host), 3) if run.host else None,
        uplink_loss_percent=round(100 * up_lost / sent, 3),
        downlink_loss_percent=round(100 * down_lost / seen, 3) if seen else 100.0,
        uplink_lost=up_lost,
        downlink_lost=down_lost,
        uplink_rate_mbit=rates.get("uplink", {}).get("mbit"),
        downlink_rate_mbit=rates.get("downlink", {}).get("mbit"),
        congestion_control={
            role: read_sysctl(ns, "net.ipv4.tcp_congestion_control")
            for role, ns in (("client", peer.client_namespace), ("server", peer.server_namespace))
        },
        rate_tests=rates,
    )
    if not rtts:
        check.problem = "no probe came back: the link is down (a dead delayer stops its direction)"
    check.targets = link_targets(profile, base_rtt_ms)
    check.verdicts = link_verdicts(check, profile, base_rtt_ms)
    return check


def measure_link(
    place: Place,
    network: str,
    backend: str = "auto",
    probes: int = 300,
    seconds: float = 0.0,
    congestion_control: str | None = None,
) -> LinkCheck:
    """`net check`: apply the profile ``network`` with ``backend``, optionally pin congestion control, measure."""
    from harness.shaping.link_profile import load_link_profile
    from harness.shaping.shaper import Shaper

    shaper = Shaper(place, backend=backend)
    link = load_link_profile(network)
    shaper.apply(link)
    if congestion_control:
        set_congestion_control(place, congestion_control)
    result = check_link(place, link, (shaper.state() or {}).get("backend"), probes=probes, seconds=seconds)
    if result.problem is None and shaper.problem():
        result.problem = shaper.problem()
    return result
