"""Packet captures in a namespace, to check the timer against the wire.

tcpdump writes the capture; `tcpdump -r -tt` reads it back as text, from
which the DNS exchanges are taken: Do53 queries matched to answers by port
and ID, and, on a TLS connection, each run of client data packets followed by
server data packets. The parsers take text lines, so they are tested without
a capture (tests/test_capture_units.py).

A capture must hold every packet of the block, or a test comparing it with
the timer fails for the capture's sake. Three things stand in the way, and
`capture` deals with each:

* tcpdump's kernel ring. With the default snapshot length (256 KiB) and
  ``--immediate-mode`` on ``-i any``, libpcap sizes every ring frame for a
  256 KiB packet, so its 2 MiB buffer holds 8 packets; when tcpdump is off
  the CPU for half a millisecond (a busy 2-core CI machine) the next DNS
  packets are "dropped by kernel" (a CI run once saw 26 of 30 queries). A 2 KiB
  snapshot (every header and DNS question still fits) and a 4 MiB buffer
  give about 2,000 frames; tcpdump's own drop count is checked at the end.
* the start. "listening on" is printed by tcpdump, not proven by the
  kernel: a start marker datagram must reach the file before the block runs.
* the end. An end marker sent after the block, once in the file, shows that
  every packet before it has been written: one socket, one ring, in order.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness import netns
from harness.accounts import helper
from harness.errors import HarnessError

#: UDP ports on the namespace's loopback that the start and end markers go to (nobody listens; unlikely in a test).
MARKER_START, MARKER_END = 47853, 47854
SNAPLEN = 2048  # bytes kept per packet: headers and the DNS question; lengths are still read from the headers
BUFFER_KIB = 4096  # tcpdump -B: kernel ring size
MARKER_TIMEOUT = 10.0  # seconds to wait for a marker to reach the file
TCPDUMP = shutil.which("tcpdump") or "/usr/bin/tcpdump"

_UDP = re.compile(r"^(\d+\.\d+) .*IP6? (\S+)\.(\d+) > (\S+)\.(\d+): (\d+)\S* (?:.*?\? (\S+) )?")
_TCP = re.compile(r"^(\d+\.\d+) .*IP6? (\S+)\.(\d+) > (\S+)\.(\d+): Flags \[[^\]]*\].* length (\d+)")
_MARKER = re.compile(rf" > 127\.0\.0\.1\.({MARKER_START}|{MARKER_END}): UDP")
_DROPPED = re.compile(r"^(\d+) packets? dropped by kernel", re.MULTILINE)


def capture_bpf(bpf: list[str]) -> list[str]:
    """The caller's filter, widened to let the markers through."""
    markers = ["udp", "and", "dst", "host", "127.0.0.1", "and", "dst", "portrange", f"{MARKER_START}-{MARKER_END}"]
    return ["(", *bpf, ")", "or", "(", *markers, ")"] if bpf else []


def is_marker(line: str) -> bool:
    return _MARKER.search(line) is not None


def dropped_by_kernel(stderr: str) -> int:
    """Packets tcpdump reports lost in the kernel ring (its summary on exit); 0 if it says nothing."""
    m = _DROPPED.search(stderr)
    return int(m[1]) if m else 0


@contextmanager
def capture(namespace: str, path: Path, bpf: list[str]) -> Iterator[Path]:
    """Capture packets matching ``bpf`` in ``namespace`` into ``path`` while the block runs.

    On entry tcpdump is capturing (the start marker is in the file); on exit
    every packet of the block is in the file, or HarnessError says why not.
    ``--immediate-mode`` and ``-U``: each packet goes to the file as it
    comes, so the end marker can be waited for. ``-Z``: once the capture
    socket is open, tcpdump becomes the helpers' account before it reads a
    packet; it writes to its standard output, a file we opened (and that
    was not there before: no link is followed).
    """
    argv = [
        "tcpdump",
        "-i",
        "any",
        "-n",
        "--immediate-mode",
        "-U",
        "-Z",
        helper().name,
        "-s",
        str(SNAPLEN),
        "-B",
        str(BUFFER_KIB),
        "-w",
        "-",
        *capture_bpf(bpf),
    ]
    with netns.entered(namespace):  # the socket stays in the namespace after the block
        sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            proc = subprocess.Popen(netns.command(namespace, argv), stdout=out, stderr=subprocess.PIPE, text=True)
        finally:
            os.close(out)
    except BaseException:
        sender.close()
        raise
    try:
        _wait_for_marker(proc, sender, path, MARKER_START)
        yield path
        _wait_for_marker(proc, sender, path, MARKER_END)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=10)
        if lost := dropped_by_kernel(stderr):
            raise HarnessError(f"tcpdump lost {lost} packets in the kernel ring; the capture {path} is incomplete")
    finally:
        sender.close()
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


def _wait_for_marker(proc: subprocess.Popen[str], sender: socket.socket, path: Path, port: int) -> None:
    """Send a marker datagram to ``port`` until tcpdump has written it to ``path``.

    A marker sent before tcpdump's socket exists is simply not captured,
    hence one marker per look at the file; the extra ones are harmless.
    """
    needle = f" > 127.0.0.1.{port}: UDP"
    deadline = time.monotonic() + MARKER_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _, stderr = proc.communicate(timeout=10)
            said = " / ".join(line.strip() for line in stderr.splitlines() if line.strip())
            raise HarnessError(f"tcpdump exited ({proc.returncode}) before capturing: {said}")
        sender.sendto(b"dnsstudy capture marker", ("127.0.0.1", port))
        time.sleep(0.02)
        if path.exists() and any(needle in line for line in _read(path, check=False)):
            return
    raise HarnessError(f"tcpdump did not capture its marker (udp port {port}) within {MARKER_TIMEOUT:.0f} s")


def _read(pcap: Path, check: bool = True) -> list[str]:
    """The capture as tcpdump text, one line per packet, markers included.

    ``check=False`` while tcpdump still writes: a half-written last packet is not an error then.
    """
    account = helper()  # the dissectors parse what came off the wire: never as root
    with open(pcap, "rb") as source:
        out = subprocess.run(
            account.run_as([account.program(TCPDUMP), "-r", "-", "-n", "-tt"]),
            stdin=source,
            capture_output=True,
            text=True,
            check=check,
            timeout=60,
        )
    return out.stdout.splitlines()


def _lines(pcap: Path) -> list[str]:
    """The capture's packets as text lines, without the markers."""
    return [line for line in _read(pcap) if not is_marker(line)]


def do53_wire_us(pcap: Path) -> dict[str, int]:
    """Query name -> microseconds from the query leaving to its answer arriving (first answer per name)."""
    return do53_durations(_lines(pcap))


def do53_durations(lines: Iterable[str]) -> dict[str, int]:
    """``do53_wire_us`` on `tcpdump -n -tt` text lines; a query matches the answer to its port and ID."""
    sent: dict[tuple[str, str], tuple[float, str]] = {}
    durations: dict[str, int] = {}
    for line in lines:
        m = _UDP.match(line)
        if not m:
            continue
        t, src_port, dst_port, qid, name = float(m[1]), m[3], m[5], m[6], m[7]
        if dst_port == "53" and name:
            sent[(src_port, qid)] = (t, name.rstrip("."))
        elif src_port == "53" and (dst_port, qid) in sent:
            start, qname = sent.pop((dst_port, qid))
            durations.setdefault(qname, round((t - start) * 1e6))
    return durations


@dataclass(frozen=True)
class Exchange:
    start: float  # first client data packet
    end: float  # last server data packet before the client sends again

    @property
    def us(self) -> int:
        return round((self.end - self.start) * 1e6)


def tcp_exchanges(pcap: Path, server_port: int) -> list[Exchange]:
    """Request/response exchanges on TCP connections to ``server_port``, in time order.

    A TLS handshake shows up as exchanges too; with one query in flight at a
    time, the last N exchanges are the last N queries.
    """
    return exchanges_from_lines(_lines(pcap), server_port)


def exchanges_from_lines(lines: Iterable[str], server_port: int) -> list[Exchange]:
    """``tcp_exchanges`` on `tcpdump -n -tt` text lines; packets without data (ACKs) are left out."""
    exchanges: list[Exchange] = []
    start = end = None
    for line in lines:
        m = _TCP.match(line)
        if not m or int(m[6]) == 0:
            continue
        t, from_client = float(m[1]), m[5] == str(server_port)
        if from_client:
            if start is not None and end is not None:
                exchanges.append(Exchange(start, end))
                start = end = None
            if start is None:
                start = t
        elif start is not None:
            end = t
    if start is not None and end is not None:
        exchanges.append(Exchange(start, end))
    return exchanges
