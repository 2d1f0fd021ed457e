"""Server think time measured apart from the page load: each GET again, alone, on a warm connection.

Through the recording proxy a response's first byte also waits behind the
other responses of its HTTP/2 connection and behind the proxy itself, so the
proxy's wait overstates the server's think time (docs/replay.md). Once the
page is recorded, each GET is asked again straight from the place's client
namespace, one at a time on a kept-alive HTTP/1.1 connection per hostname:
its time to first byte, less the round trip (the fastest of three TCP
connects), is the wait the archive keeps. Where that fails, the proxy's
wait stays.
"""

from __future__ import annotations

import socket
import ssl
import time
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from harness import netns
from harness.replay.archive import DnsAnswer, Exchange


def _rtt_ms(address: str, port: int) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        with socket.create_connection((address, port), timeout=5):
            best = min(best, (time.perf_counter() - start) * 1000)
    return best


def _ttfb_ms(client: httpx.Client, e: Exchange, address: str) -> float:
    parts = urlsplit(e.url)
    target = f"{parts.scheme}://{address}:{parts.port or 443}{parts.path or '/'}" + (
        f"?{parts.query}" if parts.query else ""
    )
    headers = {"host": parts.netloc, "accept": "*/*", "accept-encoding": "identity"}
    extensions = {"sni_hostname": parts.hostname or ""}
    start = time.perf_counter()
    with client.stream("GET", target, headers=headers, extensions=extensions) as response:
        first = (time.perf_counter() - start) * 1000
        response.read()
    return first


def measure_waits(
    namespace: str, exchanges: list[Exchange], dns: dict[str, DnsAnswer], ca: Path | None
) -> list[Exchange]:
    """``exchanges`` with each HTTPS GET's wait measured again, alone (the proxy's wait kept where that fails)."""
    context = ssl.create_default_context(cafile=str(ca)) if ca else ssl.create_default_context()
    measured: dict[int, float] = {}
    with netns.entered(namespace):
        for host in sorted({e.host for e in exchanges}):
            answer = dns.get(host)
            if answer is None or not answer.a:
                continue
            mine = [(i, e) for i, e in enumerate(exchanges) if e.host == host and e.method == "GET"]
            mine = [(i, e) for i, e in mine if urlsplit(e.url).scheme == "https"]
            try:
                rtt = _rtt_ms(answer.a[0], 443)
                with httpx.Client(verify=context, timeout=10) as client:
                    _ttfb_ms(client, mine[0][1], answer.a[0])  # the connection, up and warm
                    for i, e in mine:
                        measured[i] = max(0.0, _ttfb_ms(client, e, answer.a[0]) - rtt)
            except (OSError, httpx.HTTPError, IndexError):
                continue  # this host keeps the proxy's waits
    return [replace(e, wait_ms=round(measured[i], 3)) if i in measured else e for i, e in enumerate(exchanges)]
