"""RTT and loss probes: sequence-numbered UDP probes from the client namespace to an echo beyond the shaper.

A probe the echo never saw was lost on the uplink, an echo the client
never got on the downlink: loss is known per direction.
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import time

from pyroute2 import netns as pyroute_netns

from harness import netns
from harness.errors import HarnessError
from harness.place import Place, ProbePeer

ECHO_PORT = 7
PROBE = struct.Struct("!Id")  # sequence number, send time


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
    peer = require_probe_peer(place)
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
