"""The mitmproxy addon `dnsstudy record` loads: every finished exchange as one JSON line.

It runs inside mitmproxy's own environment (build/mitmproxy-venv), never in
dnsstudy's, and imports nothing of dnsstudy. The line's file is named by
DNSSTUDY_RECORD_OUT. The body is kept as the server sent it (still
content-encoded). The wait estimates the server's think time: from the
request's last byte to the response's first, less one round trip to the
server (its TCP handshake), which the replayed response travels again.
Under HTTP/2 it also holds the time the response queued behind others on
the connection and in the proxy (docs/replay.md). The DNS names of the
certificate the server showed decide, in a replay, which hostnames one
connection may carry.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any


class Recorder:
    """Appends one line per response to DNSSTUDY_RECORD_OUT, flushed at once."""

    def __init__(self) -> None:
        self.out = open(os.environ["DNSSTUDY_RECORD_OUT"], "a", buffering=1)  # noqa: SIM115 -- open for the run

    def response(self, flow: Any) -> None:
        request, response = flow.request, flow.response
        started, ended = response.timestamp_start, request.timestamp_end
        server = flow.server_conn
        rtt = 0.0
        if server is not None and server.timestamp_tcp_setup and server.timestamp_start:
            rtt = server.timestamp_tcp_setup - server.timestamp_start
        line = {
            "method": request.method,
            "url": request.pretty_url,
            "status": response.status_code,
            "http_version": response.http_version,
            "request_headers": [[k, v] for k, v in request.headers.items(multi=True)],
            "response_headers": [[k, v] for k, v in response.headers.items(multi=True)],
            "body": base64.b64encode(response.raw_content or b"").decode(),
            "wait_ms": max(0.0, (started - ended - rtt) * 1000) if started and ended else 0.0,
            "ttfb_ms": max(0.0, (started - ended) * 1000) if started and ended else 0.0,
            "cert_names": _certificate_names(server),
        }
        self.out.write(json.dumps(line) + "\n")


def _certificate_names(server: Any) -> list[str]:
    """The DNS names (subject alternative names) of the server's own certificate; none without TLS."""
    chain = getattr(server, "certificate_list", None) or []
    if not chain:
        return []
    return [str(n.value) for n in chain[0].altnames if type(n).__name__ == "DNSName"]


addons = [Recorder()]
