"""The mitmproxy addon `dnsstudy record` loads: every finished exchange as one JSON line.

It runs inside mitmproxy's own environment (build/mitmproxy-venv), never in
dnsstudy's, and imports nothing of dnsstudy. The line's file is named by
DNSSTUDY_RECORD_OUT. The body is kept as the server sent it (still
content-encoded); the wait is the server's think time, from the request's
last byte to the response's first.
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
        line = {
            "method": request.method,
            "url": request.pretty_url,
            "status": response.status_code,
            "http_version": response.http_version,
            "request_headers": [[k, v] for k, v in request.headers.items(multi=True)],
            "response_headers": [[k, v] for k, v in response.headers.items(multi=True)],
            "body": base64.b64encode(response.raw_content or b"").decode(),
            "wait_ms": max(0.0, (started - ended) * 1000) if started and ended else 0.0,
        }
        self.out.write(json.dumps(line) + "\n")


addons = [Recorder()]
