"""`net check`: measure the link a place actually has, to set beside the profile's targets.

RTT: UDP probes from the client namespace to an echo in the server
namespace (sequence-numbered, so loss is known per direction: a probe the
echo never saw was lost on the uplink, an echo the client never got on the
downlink). Throughput: iperf3, one TCP flow per direction. Congestion
control: as each namespace's kernel reports it.
"""

from __future__ import annotations

import json
import math
import os
import select
import socket
import statistics
import struct
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pyroute2 import netns as pyroute_netns

from harness import netns
from harness.errors import HarnessError, require_program
from harness.place import Place, ProbePeer
from harness.shaping.profile import LinkProfile

ECHO_PORT = 7
#: TCP payload per full Ethernet frame (MSS 1448 with timestamps, 1514 bytes on the wire):
#: the most goodput a shaped rate can give.
GOODPUT_SHARE = 1448 / 1514
IPERF_PORT = 5201
PROBE = struct.Struct("!Id")  # sequence number, send time


@dataclass
class LinkCheck:
    """What was measured, and the profile's targets."""

    profile: str
    backend: str | None
    probes: int
    rtt_mean_ms: float | None
    rtt_sd_ms: float | None
    uplink_loss_percent: float
    downlink_loss_percent: float
    uplink_lost: int
    downlink_lost: int
    uplink_mbit: float | None
    downlink_mbit: float | None
    congestion_control: dict[str, str]
    targets: dict = field(default_factory=dict)
    verdicts: dict = field(default_factory=dict)
    problem: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def rows(self) -> list[tuple[str, str, str, bool | None]]:
        """(measure, measured, target, within target) for a table; None where there is no target."""
        t, v = self.targets, self.verdicts
        return [
            ("RTT mean", _show(self.rtt_mean_ms, " ms"), _show(t["rtt_mean_ms"], " ms"), v["rtt_within_2ms"]),
            ("RTT SD", _show(self.rtt_sd_ms, " ms"), "", None),
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
                "uplink TCP",
                _show(self.uplink_mbit, " Mbit/s"),
                _show(t["uplink_mbit"], " Mbit/s"),
                v["uplink_rate_within_5pct"],
            ),
            (
                "downlink TCP",
                _show(self.downlink_mbit, " Mbit/s"),
                _show(t["downlink_mbit"], " Mbit/s"),
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
    done = subprocess.run(
        netns.command(namespace, ["cat", "/proc/sys/" + key.replace(".", "/")]),
        capture_output=True,
        text=True,
        timeout=10,
    )
    return done.stdout.strip()


def _peer(place: Place) -> ProbePeer:
    peer = place.probe_peer()
    if peer is None:
        raise HarnessError(f"{place.kind} '{place.name}' has no probe peer: measured link checks need the lab")
    return peer


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
    peer = _peer(place)
    for namespace in (peer.client_namespace, peer.server_namespace):
        netns.set_sysctl(namespace, "net.ipv4.tcp_congestion_control", algorithm)


def _echo(namespace: str, address: str, idle: float) -> tuple[int, int]:
    """Fork an echo into the server namespace; returns (pid, read end of its report pipe)."""
    read_fd, write_fd = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        os.close(ready_r)
        seen = 0
        try:
            pyroute_netns.setns(namespace, flags=0)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.bind((address, ECHO_PORT))
                os.write(ready_w, b"1")
                last = time.monotonic()
                while time.monotonic() - last < idle:
                    if select.select([s], [], [], 0.1)[0]:
                        data, peer = s.recvfrom(64)
                        seen += 1
                        last = time.monotonic()
                        s.sendto(data, peer)
            os.write(write_fd, json.dumps({"seen": seen}).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    os.close(ready_w)
    if not select.select([ready_r], [], [], 5)[0]:
        raise HarnessError("the UDP echo in the server namespace did not start")
    os.close(ready_r)
    return pid, read_fd


def probe_rtt(place: Place, probes: int, interval: float, wait: float) -> tuple[list[float], int, int]:
    """(RTTs in ms, probes the echo saw, probes sent)."""
    peer = _peer(place)
    target = peer.address  # the echo uses port 7
    pid, report = _echo(peer.server_namespace, target, idle=max(2.0, wait + 1.0))
    rtts: list[float] = []
    with netns.entered(peer.client_namespace):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.setblocking(False)
            sent_at: dict[int, float] = {}
            next_send = time.monotonic()
            deadline = None
            seq = 0
            while True:
                now = time.monotonic()
                if seq < probes and now >= next_send:
                    sent_at[seq] = now
                    s.sendto(PROBE.pack(seq, now), (target, ECHO_PORT))
                    seq += 1
                    next_send += interval
                    if seq == probes:
                        deadline = now + wait
                if deadline is not None and now >= deadline:
                    break
                wake = next_send if seq < probes or deadline is None else deadline  # next probe due, or the end
                timeout = max(0.0, wake - now)
                if select.select([s], [], [], timeout)[0]:
                    data = s.recv(64)
                    got, _ = PROBE.unpack(data[: PROBE.size])
                    if got in sent_at:
                        rtts.append((time.monotonic() - sent_at.pop(got)) * 1000)
    os.waitpid(pid, 0)
    seen = json.loads(os.read(report, 4096) or b'{"seen": 0}')["seen"]
    os.close(report)
    return rtts, seen, probes


def iperf(peer: ProbePeer, direction: str, seconds: float) -> float | None:
    """TCP goodput in Mbit/s, one flow; uplink = client sends."""
    require_program("iperf3", "iperf3")
    server_ns, client_ns, address = peer.server_namespace, peer.client_namespace, peer.address
    server = subprocess.Popen(
        netns.command(server_ns, ["iperf3", "-s", "-B", address, "-p", str(IPERF_PORT)]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        if netns.wait_tcp(server_ns, [(address, IPERF_PORT)], timeout=5):
            return None
        argv = [
            "iperf3",
            "-c",
            address,
            "-p",
            str(IPERF_PORT),
            "-t",
            str(max(1, round(seconds))),
            "-O",
            "1",
            "-J",
        ]  # -O 1: omit slow start
        if direction == "downlink":
            argv.append("-R")
        done = subprocess.run(netns.command(client_ns, argv), capture_output=True, text=True, timeout=seconds + 30)
        try:
            result = json.loads(done.stdout)
            return round(result["end"]["sum_received"]["bits_per_second"] / 1e6, 3)
        except (ValueError, KeyError):
            return None
    finally:
        server.kill()  # not one-off (-1): our readiness probe would count as its one client
        server.wait()


def binomial_interval(lost: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson 95 % interval for a loss proportion, in percent."""
    if n == 0:
        return (0.0, 100.0)
    p = lost / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (round(100 * max(0.0, centre - half), 3), round(100 * min(1.0, centre + half), 3))


def check_link(
    place: Place,
    profile: LinkProfile,
    backend: str | None,
    probes: int = 300,
    interval: float = 0.01,
    seconds: float = 5.0,
    base_rtt_ms: float = 0.1,
) -> LinkCheck:
    """Measure RTT, loss per direction and TCP goodput per direction, and judge them against the profile."""
    if probes < 200:
        raise HarnessError(f"--probes must be at least 200 (got {probes})")
    peer = _peer(place)
    trip = profile.round_trip()
    wait = max(1.0, 3 * (trip["added_rtt_ms"] + 4 * trip["rtt_jitter_ms"]) / 1000)
    rtts, seen, sent = probe_rtt(place, probes, interval, wait)
    up_lost, down_lost = sent - seen, seen - len(rtts)
    check = LinkCheck(
        profile=profile.name,
        backend=backend,
        probes=sent,
        rtt_mean_ms=round(statistics.fmean(rtts), 3) if rtts else None,
        rtt_sd_ms=round(statistics.stdev(rtts), 3) if len(rtts) > 1 else None,
        uplink_loss_percent=round(100 * up_lost / sent, 3),
        downlink_loss_percent=round(100 * down_lost / seen, 3) if seen else 100.0,
        uplink_lost=up_lost,
        downlink_lost=down_lost,
        uplink_mbit=iperf(peer, "uplink", seconds) if rtts else None,
        downlink_mbit=iperf(peer, "downlink", seconds) if rtts else None,
        congestion_control={
            role: read_sysctl(ns, "net.ipv4.tcp_congestion_control")
            for role, ns in (("client", peer.client_namespace), ("server", peer.server_namespace))
        },
    )
    if not rtts:
        check.problem = "no probe came back: the link is down (a dead delayer stops its direction)"
    up, down = profile.uplink, profile.downlink
    check.targets = {
        "rtt_mean_ms": round(base_rtt_ms + trip["added_rtt_ms"], 3),
        "uplink_loss_percent": up.loss_percent,
        "downlink_loss_percent": down.loss_percent,
        "uplink_mbit": _goodput(up.rate_mbit),
        "downlink_mbit": _goodput(down.rate_mbit),
    }
    check.verdicts = {
        "rtt_within_2ms": check.rtt_mean_ms is not None
        and abs(check.rtt_mean_ms - check.targets["rtt_mean_ms"]) <= 2.0,
        "uplink_loss_in_95ci": _within(up.loss_percent, binomial_interval(up_lost, sent)),
        "downlink_loss_in_95ci": _within(down.loss_percent, binomial_interval(down_lost, seen)),
        "uplink_rate_within_5pct": _rate_ok(check.uplink_mbit, check.targets["uplink_mbit"]),
        "downlink_rate_within_5pct": _rate_ok(check.downlink_mbit, check.targets["downlink_mbit"]),
    }
    return check


def _goodput(rate_mbit: float | None) -> float | None:
    return round(rate_mbit * GOODPUT_SHARE, 3) if rate_mbit else None


def _within(target: float, interval: tuple[float, float]) -> bool:
    return interval[0] <= target <= interval[1]


def _rate_ok(measured: float | None, target: float | None) -> bool | None:
    if target is None or measured is None:
        return None if target is None else False
    return abs(measured - target) <= 0.05 * target


def measure_link(
    place: Place,
    network: str,
    backend: str = "auto",
    probes: int = 300,
    seconds: float = 5.0,
    congestion_control: str | None = None,
) -> LinkCheck:
    """`net check`: apply the profile ``network`` with ``backend``, optionally pin congestion control, measure."""
    from harness.shaping.profile import load_link_profile
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
