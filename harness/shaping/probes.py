"""RTT and loss probes: sequence-numbered UDP probes from the client namespace to an echo beyond the shaper.

A probe the echo never saw was lost on the uplink, an echo the client
never got on the downlink: loss is known per direction.

The RTT is the path's, not the hosts': a loaded machine makes a process
wait for a CPU after its datagram has arrived, and that wait is no part of
the link. The client takes each echo's arrival from the kernel's receive
timestamp (SO_TIMESTAMPNS) rather than from when it woke up, and the echo
reports in its reply how long the probe waited in it (from the kernel's
receive timestamp to its reply), which is taken off. What the hosts added
is kept beside the RTTs (docs/network.md has the figures).
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import time
from dataclasses import dataclass, field

from pyroute2 import netns as pyroute_netns

from harness import netns
from harness.errors import HarnessError
from harness.place import Place, ProbePeer
from harness.shaping.rate import SO_TIMESTAMPNS, TIMESPEC, received_ns

ECHO_PORT = 7
PROBE = struct.Struct("!Id")  # sequence number, send time
HELD = struct.Struct("!d")  # what the echo appends: seconds the probe waited in it
ANCILLARY = socket.CMSG_SPACE(TIMESPEC.size)


@dataclass
class ProbeRun:
    """A series of probes: the path's RTT of every echo that came back, and what the hosts added to each."""

    seen: int  # probes the echo saw
    sent: int
    rtts: list[float] = field(default_factory=list)  # ms, kernel send to kernel receive less the echo's wait
    host: list[float] = field(default_factory=list)  # ms the echo's and the client's scheduling added (taken off)


def require_probe_peer(place: Place) -> ProbePeer:
    """The place's probe peer; a one-line HarnessError where it has none (the Internet)."""
    peer = place.probe_peer()
    if peer is None:
        raise HarnessError(f"{place.kind} '{place.name}' has no probe peer: measured link checks need the lab")
    return peer


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
                s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                s.bind((address, ECHO_PORT))
                os.write(ready_w, b"1")
                while True:
                    readable = select.select([s.fileno(), stop_r], [], [])[0]
                    if s.fileno() in readable:
                        data, ancillary, _, peer = s.recvmsg(64, ANCILLARY)
                        seen += 1
                        arrived = received_ns(ancillary)
                        held = time.time() - arrived / 1e9 if arrived is not None else 0.0
                        s.sendto(data[: PROBE.size] + HELD.pack(held), peer)
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
    run = probe_path(place, probes, interval, wait)
    return run.rtts, run.seen, run.sent


def probe_path(place: Place, probes: int, interval: float, wait: float) -> ProbeRun:
    """Send ``probes`` probes ``interval`` s apart to the echo; what came back, within ``wait`` s of the last."""
    peer = require_probe_peer(place)
    pid, report, stop = _echo(peer.server_namespace, peer.address)
    run = ProbeRun(seen=0, sent=probes)
    try:
        with netns.entered(peer.client_namespace):
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                s.setblocking(False)
                _send_and_receive(s, (peer.address, ECHO_PORT), run, interval, wait)
    finally:
        try:
            os.write(stop, b"1")
        except BrokenPipeError:
            pass  # the echo is gone already: its report says what it saw, or nothing
        os.close(stop)
        run.seen = json.loads(os.read(report, 4096) or b'{"seen": 0}')["seen"]
        os.close(report)
        os.waitpid(pid, 0)
    return run


def _send_and_receive(s: socket.socket, echo: tuple[str, int], run: ProbeRun, interval: float, wait: float) -> None:
    """Send the run's probes on schedule and take in the echoes until all are back or ``wait`` s after the last."""
    sent_at: dict[int, float] = {}  # sequence number -> send time, Unix seconds like the kernel's timestamps
    next_send = time.monotonic()
    deadline = None
    seq = 0
    while True:
        now = time.monotonic()
        if seq < run.sent and now >= next_send:
            sent_at[seq] = time.time()
            s.sendto(PROBE.pack(seq, now), echo)
            seq += 1
            next_send += interval
            if seq == run.sent:
                deadline = now + wait
        if deadline is not None and (now >= deadline or len(run.rtts) == run.sent):
            return
        wake = next_send if seq < run.sent or deadline is None else deadline  # next probe due, or the end
        if select.select([s], [], [], max(0.0, wake - now))[0]:
            data, ancillary, _, _ = s.recvmsg(64, ANCILLARY)
            woke = time.time()
            got, _ = PROBE.unpack(data[: PROBE.size])
            if got not in sent_at:
                continue
            stamp = received_ns(ancillary)
            arrived = stamp / 1e9 if stamp is not None else woke
            held = HELD.unpack_from(data, PROBE.size)[0] if len(data) >= PROBE.size + HELD.size else 0.0
            run.rtts.append((arrived - sent_at.pop(got) - held) * 1000)
            run.host.append((woke - arrived + held) * 1000)
