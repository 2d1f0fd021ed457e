"""`net check`: measure the link a place actually has, to set beside the profile's targets.

RTT: UDP probes from the client namespace to an echo in the server
namespace (sequence-numbered, so loss is known per direction: a probe the
echo never saw was lost on the uplink, an echo the client never got on the
downlink). Rate: the bottleneck rate of each shaped direction, from a UDP
flow offered above it and the kernel's receive timestamps of what comes
out (both directions at once: their queues are separate). Congestion
control: as each namespace's kernel reports it. docs/network.md says why
the rate is measured this way and not with TCP.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import select
import socket
import statistics
import struct
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import cast

from pyroute2 import netns as pyroute_netns

from harness import netns
from harness.errors import HarnessError
from harness.place import Place, ProbePeer
from harness.shaping.profile import Direction, LinkProfile
from harness.shaping.userspace import TBF

ECHO_PORT = 7
PROBE = struct.Struct("!Id")  # sequence number, send time

#: The rate verdict: the measured bottleneck rate lies within 5 % of the profile's (issue 13).
RATE_TOLERANCE = 0.05
#: The error the rate test allows itself, a fifth of the tolerance: a right link reads well inside the
#: tolerance, and a link off by twice the tolerance well outside it.
RATE_PRECISION = RATE_TOLERANCE / 5
#: How far the offered load exceeds the rate once the configured loss has taken its share. Four times the
#: tolerance: a link with no bottleneck, or a faster one, passes the whole flow and reads 20 % high, off
#: target even when the datagrams of a 3G window (100, 2.1 % loss) lose three standard deviations more than
#: configured (1.2 * (1 - 0.064) / (1 - 0.021) = 1.15).
RATE_OVERLOAD = 4 * RATE_TOLERANCE
#: Frames in a rate window at least. A shaper may release frames in clumps (a late timer, a token bucket
#: with tokens to spend), which can put an end of the window up to a frame's time off: with 1 / precision
#: frames that moves the result by at most the precision. This is what makes the test longer at low rates.
WINDOW_FRAMES = round(1 / RATE_PRECISION)
#: How much sending time the bottleneck may lose at once. Its qdisc timer runs in a softirq that a busy
#: machine delays, and the token bucket makes up a delay only as far as its burst reaches (5.5 ms at
#: 22.1 Mbit/s). A window lasts long enough that one such slip inside it and a late last arrival stay
#: within the precision: 2 * 5 ms / 1 % = 1 s. (Single slips seen cost up to 3.5 ms. Sustained contention
#: makes the emulated link itself slower, by up to 3 % seen at 22.1 Mbit/s with the load average at 4 on
#: 2 cores: that is the link being off, and the check says so once it passes the tolerance.)
TIMER_SLIP_S = 0.005
#: The longest the flow may stop reaching the bottleneck at the window's start: the sending loop (Python)
#: or the user-space delayer descheduled on a busy machine. The warm-up builds a queue that outlasts it;
#: the queue then grows by the overload through the window (up to the bucket's 200 ms), so later stalls
#: may be longer. The sender's worst lateness is in the record (`late_ms`): mostly under 40 ms with the
#: load average at 3 on 2 cores, up to 100 ms at 4, when the same stalls slow the bucket too (above).
STALL_S = 0.05
#: What a UDP datagram's frame carries besides its payload: the Ethernet header (a veth hands its qdisc
#: the frame without preamble or FCS, and that length is what tbf counts), the IP and the UDP header.
ETHERNET_HEADER = 14
IP_HEADER = {4: 20, 6: 40}
UDP_HEADER = 8
# Linux socket options the socket module does not name (include/uapi/asm-generic/socket.h, linux/in.h, in6.h).
SO_TIMESTAMPNS = 35
SO_RCVBUFFORCE = 33
IP_MTU = 14
IPV6_MTU = 24
TIMESPEC = struct.Struct("@qq")
#: The shaper's token bucket lets this much through at line rate after an idle spell (both backends).
TBF_BURST_BYTES = cast(int, TBF["burst"])
SEQUENCE = struct.Struct("!I")


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
    uplink_rate_mbit: float | None
    downlink_rate_mbit: float | None
    congestion_control: dict[str, str]
    rate_tests: dict = field(default_factory=dict)  # per shaped direction: how the rate was measured
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


def _echo(namespace: str, address: str) -> tuple[int, int, int]:
    """Fork an echo into the server namespace; returns (pid, read end of its report, write end of its stop).

    The echo answers until told to stop (a byte, or the parent's end closing), then reports how many
    probes it saw.
    """
    read_fd, write_fd = os.pipe()
    ready_r, ready_w = os.pipe()
    stop_r, stop_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        for fd in (read_fd, ready_r, stop_w):
            os.close(fd)
        seen = 0
        try:
            pyroute_netns.setns(namespace, flags=0)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.bind((address, ECHO_PORT))
                os.write(ready_w, b"1")
                while True:
                    readable = select.select([s.fileno(), stop_r], [], [])[0]
                    if s.fileno() in readable:
                        data, peer = s.recvfrom(64)
                        seen += 1
                        s.sendto(data, peer)
                    elif stop_r in readable:
                        break
            os.write(write_fd, json.dumps({"seen": seen}).encode())
        finally:
            os._exit(0)
    for fd in (write_fd, ready_w, stop_r):
        os.close(fd)
    if not select.select([ready_r], [], [], 5)[0]:
        os.close(stop_w)
        raise HarnessError("the UDP echo in the server namespace did not start")
    os.close(ready_r)
    return pid, read_fd, stop_w


def probe_rtt(place: Place, probes: int, interval: float, wait: float) -> tuple[list[float], int, int]:
    """(RTTs in ms, probes the echo saw, probes sent). Waits ``wait`` s after the last probe, less if all came back."""
    peer = _peer(place)
    target = peer.address  # the echo uses port 7
    pid, report, stop = _echo(peer.server_namespace, target)
    rtts: list[float] = []
    try:
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
                    if deadline is not None and (now >= deadline or len(rtts) == probes):
                        break
                    wake = next_send if seq < probes or deadline is None else deadline  # next probe due, or the end
                    timeout = max(0.0, wake - now)
                    if select.select([s], [], [], timeout)[0]:
                        data = s.recv(64)
                        got, _ = PROBE.unpack(data[: PROBE.size])
                        if got in sent_at:
                            rtts.append((time.monotonic() - sent_at.pop(got)) * 1000)
    finally:
        try:
            os.write(stop, b"1")
        except BrokenPipeError:
            pass  # the echo is gone already: its report says what it saw, or nothing
        os.close(stop)
        seen = json.loads(os.read(report, 4096) or b'{"seen": 0}')["seen"]
        os.close(report)
        os.waitpid(pid, 0)
    return rtts, seen, probes


@dataclass(frozen=True)
class RatePlan:
    """How one direction's rate is measured: a UDP flow at ``offered_bps`` until warm-up and window have arrived."""

    rate_bps: float  # the profile's rate: what the bottleneck should let through, in frame bits per second
    offered_bps: float
    frame_bits: int
    warmup_s: float  # arrivals this long after the first are not counted
    window_s: float  # then at least this long is
    lead_s: float  # the direction's one-way delay and jitter: when the first frame may arrive

    @property
    def span_s(self) -> float:
        """How long after the first arrival the flow is done."""
        return self.warmup_s + self.window_s

    @property
    def give_up_s(self) -> float:
        """When, after its start, a flow stops waiting for its window: the flow may begin as late again as it
        lasts (a sender or delayer stalled at the start); a link that passes nothing reaches this."""
        return self.lead_s + 2 * self.span_s


def plan_rate(direction: Direction, frame_bits: int, least_window_s: float = 0.0) -> RatePlan | None:
    """The rate test for one direction of a profile, or None where the profile sets no rate.

    The flow is offered (1 + overload) times the rate after the configured loss: loss acts before the rate
    limit in both backends, so what reaches the bottleneck overloads it by exactly the overload. The
    warm-up drains the token bucket's burst (during which more than the rate comes out) and then builds
    a queue that outlasts the delayer's jitter and a stalled sender, both at the overload's pace; the
    window holds enough frames, and lasts long enough, for the precision. All of it scales with 1 / rate
    (the bytes the test needs are the same at every rate) except the parts that are times by nature.
    """
    if not direction.rate_mbit:
        return None
    rate = direction.rate_mbit * 1e6
    kept = 1 - direction.loss_percent / 100
    jitter_s = 4 * direction.jitter_ms / 1000  # the bound the RTT probes' wait uses too
    return RatePlan(
        rate_bps=rate,
        offered_bps=(1 + RATE_OVERLOAD) * rate / max(kept, RATE_PRECISION),  # loss of 100 %: nothing to overload
        frame_bits=frame_bits,
        warmup_s=(8 * TBF_BURST_BYTES / rate + jitter_s + STALL_S) / RATE_OVERLOAD,
        window_s=max(least_window_s, WINDOW_FRAMES * frame_bits / rate, 2 * TIMER_SLIP_S / RATE_PRECISION),
        lead_s=direction.delay_ms / 1000 + jitter_s,
    )


@dataclass(frozen=True)
class RateResult:
    """The bottleneck rate over a window of arrivals, in frame bits per second."""

    bps: float
    window_s: float
    frames: int
    deviation_s: float  # the largest distance of an arrival in the window from evenly spaced departures


def bottleneck_rate(stamps_ns: list[int], frame_bits: int, warmup_s: float) -> RateResult | None:
    """The rate at which frames of ``frame_bits`` arrived after ``warmup_s``, or None if fewer than two did.

    Between the first and the last arrival of the window the bottleneck sent one frame per gap: counting
    gaps, not arrivals, leaves no frame's worth of rounding.
    """
    if not stamps_ns:
        return None
    stamps = sorted(stamps_ns)
    start = stamps[0] + warmup_s * 1e9
    window = [t for t in stamps if t >= start]
    if len(window) < 2 or window[-1] == window[0]:
        return None
    frames = len(window) - 1
    seconds = (window[-1] - window[0]) / 1e9
    spacing = seconds / frames
    deviation = max(abs((t - window[0]) / 1e9 - i * spacing) for i, t in enumerate(window))
    return RateResult(bps=frames * frame_bits / seconds, window_s=seconds, frames=frames, deviation_s=deviation)


@dataclass
class _Flow:
    """One direction's UDP flow while it runs: a paced sender and a receiver that keeps kernel timestamps.

    The sender keeps the bottleneck overloaded until the receiver has seen warm-up and window go by, so
    the window is whole even when the flow started late.
    """

    plan: RatePlan
    sender: socket.socket
    receiver: socket.socket
    datagram: bytearray
    start: float = 0.0
    sent: int = 0
    late_s: float = 0.0  # how far the sender fell behind its schedule at worst
    stamps: list[int] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return len(self.stamps) > 1 and self.stamps[-1] - self.stamps[0] >= self.plan.span_s * 1e9

    def next_due(self, now: float) -> float | None:
        """When the next datagram is due; None once the flow is done or has given up."""
        if self.done or now - self.start >= self.plan.give_up_s:
            return None
        return self.start + self.sent * self.plan.frame_bits / self.plan.offered_bps

    def send_due(self, now: float) -> None:
        """Send every datagram whose time has come (a late loop catches up: the queue absorbs the burst)."""
        due = self.next_due(now)
        while due is not None and due <= now:
            SEQUENCE.pack_into(self.datagram, 0, self.sent)
            try:
                self.sender.send(self.datagram)
            except BlockingIOError:
                return  # the socket is full: try again on the next turn
            self.late_s = max(self.late_s, now - due)
            self.sent += 1
            due = self.next_due(now)

    def drain(self) -> None:
        """Read every waiting datagram, keeping the kernel's receive timestamp of each."""
        while True:
            try:
                _, ancillary, _, _ = self.receiver.recvmsg(SEQUENCE.size, socket.CMSG_SPACE(TIMESPEC.size))
            except BlockingIOError:
                return
            for level, kind, data in ancillary:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    seconds, nanoseconds = TIMESPEC.unpack(data[: TIMESPEC.size])
                    self.stamps.append(seconds * 1_000_000_000 + nanoseconds)


def _socket(namespace: str, family: socket.AddressFamily) -> socket.socket:
    """A non-blocking UDP socket of ``namespace`` that timestamps what it receives."""
    with netns.entered(namespace):
        s = socket.socket(family, socket.SOCK_DGRAM)
    s.setblocking(False)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    return s


def _frame_bits(s: socket.socket, version: int) -> int:
    """Bits on the wire of a datagram that fills the path MTU (the size of the data packets a page load sends)."""
    mtu = s.getsockopt(*((socket.IPPROTO_IP, IP_MTU) if version == 4 else (socket.IPPROTO_IPV6, IPV6_MTU)))
    return 8 * (mtu + ETHERNET_HEADER)


def measure_rates(peer: ProbePeer, profile: LinkProfile, least_window_s: float = 0.0) -> dict[str, dict]:
    """Measure the bottleneck rate of every shaped direction at once; {direction: what was measured}."""
    version = ipaddress.ip_address(peer.address).version
    family = socket.AF_INET if version == 4 else socket.AF_INET6
    server = _socket(peer.server_namespace, family)
    client = _socket(peer.client_namespace, family)
    try:
        server.bind((peer.address, 0))
        client.connect(server.getsockname())
        server.connect(client.getsockname())
        frame_bits = _frame_bits(client, version)
        payload = frame_bits // 8 - ETHERNET_HEADER - IP_HEADER[version] - UDP_HEADER
        flows: dict[str, _Flow] = {}
        for name, direction, sender, receiver in (
            ("uplink", profile.uplink, client, server),
            ("downlink", profile.downlink, server, client),
        ):
            plan = plan_rate(direction, frame_bits, least_window_s)
            if plan is not None:
                # A second of arrivals at twice their size (the kernel charges each skb's true size).
                receiver.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, int(2 * plan.offered_bps / 8))
                flows[name] = _Flow(plan, sender, receiver, bytearray(payload))
        _run(list(flows.values()))
    finally:
        client.close()
        server.close()
    return {name: _summary(flow) for name, flow in flows.items()}


def _run(flows: list[_Flow]) -> None:
    """Drive every flow's sender on its schedule and drain its receiver, until every flow is done or gave up."""
    if not flows:
        return
    start = time.monotonic()
    for flow in flows:
        flow.start = start
    end = start + max(f.plan.give_up_s for f in flows)
    by_socket = {f.receiver.fileno(): f for f in flows}
    while True:
        now = time.monotonic()
        for flow in flows:
            flow.send_due(now)
        dues = [d for d in (f.next_due(now) for f in flows) if d is not None]
        if not dues or now >= end:
            break
        timeout = max(0.0, min(dues) - time.monotonic())
        for s in select.select([f.receiver for f in flows], [], [], timeout)[0]:
            by_socket[s.fileno()].drain()
    for flow in flows:
        flow.drain()


def _summary(flow: _Flow) -> dict:
    """What a flow measured, for the check's record."""
    plan = flow.plan
    result = bottleneck_rate(flow.stamps, plan.frame_bits, plan.warmup_s)
    return {
        "mbit": None if result is None else round(result.bps / 1e6, 4),
        "offered_mbit": round(plan.offered_bps / 1e6, 4),
        "frame_bytes": plan.frame_bits // 8,
        "sent": flow.sent,
        "received": len(flow.stamps),
        "warmup_s": round(plan.warmup_s, 3),
        "window_s": None if result is None else round(result.window_s, 3),
        "window_frames": None if result is None else result.frames,
        "deviation_ms": None if result is None else round(result.deviation_s * 1000, 3),
        "late_ms": round(flow.late_s * 1000, 3),
    }


def binomial_interval(lost: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval for a loss proportion, in percent.

    Exact, not Wilson: with a few lost probes in 200 Wilson's coverage dips below its level (at 4G's 0.5 %
    it flags a healthy link 8 % of the time); the exact interval's false alarms stay under 5 %. Solved by
    bisection on the binomial tails here: scipy's would add about 70 MiB to every crawl process.
    """
    if n == 0:
        return (0.0, 100.0)
    tail = (1 - confidence) / 2
    # The lower bound is the p where P(X >= lost) = tail, the upper where P(X <= lost) = tail.
    low = 0.0 if lost == 0 else _solve(lambda p: 1 - tail - _binomial_cdf(lost - 1, n, p))
    high = 1.0 if lost == n else _solve(lambda p: tail - _binomial_cdf(lost, n, p))
    return (100 * low, 100 * high)  # unrounded: rounding could move a bound across the target


def _binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), 0 < p < 1, summed in log space."""
    log_p, log_q, log_n = math.log(p), math.log1p(-p), math.lgamma(n + 1)
    return min(
        1.0,
        sum(
            math.exp(log_n - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q)
            for i in range(k + 1)
        ),
    )


def _solve(f: Callable[[float], float]) -> float:
    """The root in (0, 1) of f, which goes from negative to positive: bisection to 1e-12."""
    lo, hi = 1e-15, 1 - 1e-15
    while hi - lo > 1e-12:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if f(mid) > 0 else (mid, hi)
    return (lo + hi) / 2


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
    peer = _peer(place)
    trip = profile.round_trip()
    # An echo later than three times the longest round trip the profile allows, plus a stall in each of the
    # four user-space stages a probe passes (client loop, uplink delayer, echo, downlink delayer), is lost.
    wait = 3 * (trip["added_rtt_ms"] + 4 * trip["rtt_jitter_ms"]) / 1000 + 4 * STALL_S
    rtts, seen, sent = probe_rtt(place, probes, interval, wait)
    up_lost, down_lost = sent - seen, seen - len(rtts)
    rates = measure_rates(peer, profile, seconds) if rtts else {}
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
    up, down = profile.uplink, profile.downlink
    check.targets = {
        "rtt_mean_ms": round(base_rtt_ms + trip["added_rtt_ms"], 3),
        "uplink_loss_percent": up.loss_percent,
        "downlink_loss_percent": down.loss_percent,
        "uplink_rate_mbit": up.rate_mbit,
        "downlink_rate_mbit": down.rate_mbit,
    }
    check.verdicts = {
        "rtt_within_2ms": check.rtt_mean_ms is not None
        and abs(check.rtt_mean_ms - check.targets["rtt_mean_ms"]) <= 2.0,
        "uplink_loss_in_95ci": _within(up.loss_percent, binomial_interval(up_lost, sent)),
        "downlink_loss_in_95ci": _within(down.loss_percent, binomial_interval(down_lost, seen)),
        "uplink_rate_within_5pct": rate_ok(check.uplink_rate_mbit, up.rate_mbit),
        "downlink_rate_within_5pct": rate_ok(check.downlink_rate_mbit, down.rate_mbit),
    }
    return check


def _within(target: float, interval: tuple[float, float]) -> bool:
    return interval[0] <= target <= interval[1]


def rate_ok(measured: float | None, target: float | None) -> bool | None:
    """Within the tolerance of the target; None where there is no target, False where nothing was measured."""
    if target is None:
        return None
    return measured is not None and abs(measured - target) <= RATE_TOLERANCE * target


def measure_link(
    place: Place,
    network: str,
    backend: str = "auto",
    probes: int = 300,
    seconds: float = 0.0,
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
