"""The bottleneck rate of each shaped direction, measured with a UDP flow offered above it.

Both directions run at once (their queues are separate); the rate is read
from the kernel's receive timestamps of what comes out of the bottleneck.
docs/network.md says why the rate is measured this way and not with TCP.
"""

from __future__ import annotations

import ipaddress
import select
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import cast

from harness import netns
from harness.place import ProbePeer
from harness.shaping.link_profile import Direction, LinkProfile
from harness.shaping.userspace import TBF
from harness.shaping.verdicts import RATE_TOLERANCE

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
#: ... and queues at most this long before it drops.
_TBF_LATENCY_S = int(str(TBF["latency"]).removesuffix("ms")) / 1000
SEQUENCE = struct.Struct("!I")


@dataclass(frozen=True)
class RatePlan:
    """How one direction's rate is measured: a UDP flow at ``offered_bps`` until warm-up and window have arrived."""

    rate_bps: float  # the profile's rate: what the bottleneck should let through, in frame bits per second
    offered_bps: float
    frame_bits: int
    warmup_s: float  # arrivals this long after the first are not counted
    window_s: float  # then at least this long is
    lead_s: float  # the direction's one-way delay and jitter: when the first frame may arrive
    quiet_s: float = STALL_S  # no arrival for this long after the flow ends: the queue it built has drained

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
        quiet_s=jitter_s + STALL_S,
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

    def drain(self, keep: bool = True) -> int:
        """Read every waiting datagram, keeping (``keep``) the kernel's receive timestamp of each; how many."""
        read = 0
        while True:
            try:
                _, ancillary, _, _ = self.receiver.recvmsg(SEQUENCE.size, socket.CMSG_SPACE(TIMESPEC.size))
            except BlockingIOError:
                return read
            read += 1
            stamp = received_ns(ancillary)
            if stamp is not None and keep:
                self.stamps.append(stamp)


def received_ns(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    """The kernel's receive time (CLOCK_REALTIME, ns) among a datagram's ancillary data (SO_TIMESTAMPNS)."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            seconds, nanoseconds = TIMESPEC.unpack(data[: TIMESPEC.size])
            return seconds * 1_000_000_000 + nanoseconds
    return None


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
    _wait_until_drained(flows)


def _wait_until_drained(flows: list[_Flow]) -> None:
    """Read what the flows left queued in the link until it stops arriving.

    The overload fills each bucket's queue (200 ms of it) by the window's end: left there, it would hold
    back whatever comes next, the first visit of a block or the RTT probes of the next check, by up to that
    much. The queue drains in order at the rate, so a spell with no arrival (the delayer's jitter and a
    stall) means it is empty; the tbf's latency, the delay and a second bound the wait.
    """
    quiet = max(f.plan.quiet_s for f in flows)
    end = time.monotonic() + _TBF_LATENCY_S + max(f.plan.lead_s for f in flows) + quiet + 1.0
    by_socket = {f.receiver.fileno(): f for f in flows}
    while time.monotonic() < end:
        ready = select.select([f.receiver for f in flows], [], [], quiet)[0]
        if not ready or not sum(by_socket[s.fileno()].drain(keep=False) for s in ready):
            return


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
