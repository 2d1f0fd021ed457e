"""Packet captures in a namespace, to check the timer against the wire.

tcpdump writes the capture; `tcpdump -r -tt` reads it back as text, from
which the DNS exchanges are taken: Do53 queries matched to answers by port
and ID, and, on a TLS connection, each run of client data packets followed by
server data packets.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness import netns
from harness.errors import HarnessError

_UDP = re.compile(r"^(\d+\.\d+) .*IP (\S+)\.(\d+) > (\S+)\.(\d+): (\d+)\S* (?:.*?\? (\S+) )?")
_TCP = re.compile(r"^(\d+\.\d+) .*IP (\S+)\.(\d+) > (\S+)\.(\d+): Flags \[[^\]]*\].* length (\d+)")


@contextmanager
def capture(namespace: str, path: Path, bpf: list[str]) -> Iterator[Path]:
    """Capture packets matching ``bpf`` in ``namespace`` into ``path`` while the block runs.

    ``--immediate-mode``: otherwise packets wait in the kernel's ring and are lost when tcpdump stops.
    ``-Z root``: Debian's tcpdump otherwise drops to its own user, which cannot write into private temp dirs.
    """
    proc = subprocess.Popen(netns.command(namespace, ["tcpdump", "-i", "any", "-n", "--immediate-mode", "-U", "-Z", "root",
                                                       "-w", str(path), *bpf]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        seen = []
        while proc.stderr and len(seen) < 5:  # e.g. "data link type LINUX_SLL2", then "listening on any"
            seen.append(proc.stderr.readline().strip())
            if "listening" in seen[-1] or not seen[-1]:
                break
        if not seen or "listening" not in seen[-1]:
            raise HarnessError(f"tcpdump did not start: {' / '.join(seen)}")
        yield path
        time.sleep(0.2)  # let the last packets reach the file
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _lines(pcap: Path) -> list[str]:
    out = subprocess.run(["tcpdump", "-r", str(pcap), "-n", "-tt"], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def do53_wire_us(pcap: Path) -> dict[str, int]:
    """Query name -> microseconds from the query leaving to its answer arriving (first answer per name)."""
    sent: dict[tuple[str, str], tuple[float, str]] = {}
    durations: dict[str, int] = {}
    for line in _lines(pcap):
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
    start: float   # first client data packet
    end: float     # last server data packet before the client sends again

    @property
    def us(self) -> int:
        return round((self.end - self.start) * 1e6)


def tcp_exchanges(pcap: Path, server_port: int) -> list[Exchange]:
    """Request/response exchanges on TCP connections to ``server_port``, in time order.

    A TLS handshake shows up as exchanges too; with one query in flight at a
    time, the last N exchanges are the last N queries.
    """
    exchanges: list[Exchange] = []
    start = end = None
    for line in _lines(pcap):
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
