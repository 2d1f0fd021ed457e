"""HAR 1.2 files with content (a browser's "save all as HAR with content") -> replay archive entries.

A HAR has no DNS: each hostname gets an A record synthesized from the
entry's `serverIPAddress` (so hostnames that shared an address still do),
or a made-up address from 100.64.0.0/10 when the HAR has none; every such
answer is marked `synthesized`. Bodies in a HAR are decoded, so the
response's Content-Encoding and Content-Length headers are dropped.
"""

from __future__ import annotations

import base64
import ipaddress
import json
from pathlib import Path
from urllib.parse import urlsplit

from harness.errors import HarnessError
from harness.replay.archive import DnsAnswer, Exchange, SiteRecord

#: Headers that describe the encoded body a HAR no longer holds, or the connection.
DROPPED = {"content-encoding", "content-length", "transfer-encoding", "connection", "keep-alive"}
SYNTHETIC_POOL = ipaddress.IPv4Network("100.64.0.0/10")
DEFAULT_TTL = 300
HTTP_VERSIONS = {"h2": "HTTP/2.0", "http/2": "HTTP/2.0", "http/2.0": "HTTP/2.0", "h3": "HTTP/2.0"}


def site_of(url: str) -> str:
    """The site a page URL names: its hostname without a leading 'www.'."""
    host = (urlsplit(url).hostname or "").lower()
    return host.removeprefix("www.")


def read_har(path: Path, site: str | None = None) -> SiteRecord:
    """One HAR file -> one site's record; a one-line error names the file and the entry that is wrong."""
    try:
        har = json.loads(path.read_text())
        log = har["log"]
        entries = log["entries"]
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise HarnessError(f"{path}: not a readable HAR ({exc})") from None
    except (KeyError, TypeError):
        raise HarnessError(f"{path}: not a HAR 1.2 file (no log.entries)") from None
    if not entries:
        raise HarnessError(f"{path}: the HAR has no entries")
    url = str(entries[0].get("request", {}).get("url", ""))  # the first entry is the page's document
    exchanges = [_exchange(entry, i, path) for i, entry in enumerate(entries)]
    dns = synthesize_dns(entries)
    return SiteRecord(site or site_of(url), url, "har", exchanges, dns)


def _exchange(entry: dict, i: int, path: Path) -> Exchange:
    try:
        request, response = entry["request"], entry["response"]
        content = response.get("content", {})
        text = content.get("text")
        size = int(content.get("size", 0) or 0)
        if text is None and size > 0:
            raise HarnessError(
                f"{path}: entry {i} ({request['method']} {request['url']}) has no body (save the HAR 'with content')"
            )
        body = _body(text or "", content.get("encoding"))
        version = str(response.get("httpVersion") or request.get("httpVersion") or "HTTP/1.1")
        return Exchange(
            method=request["method"],
            url=request["url"],
            status=int(response["status"]),
            http_version=HTTP_VERSIONS.get(version.lower(), "HTTP/1.1"),
            request_headers=[(h["name"], h["value"]) for h in request.get("headers", [])],
            response_headers=[
                (h["name"], h["value"]) for h in response.get("headers", []) if h["name"].lower() not in DROPPED
            ],
            body=body,
            wait_ms=max(0.0, float(entry.get("timings", {}).get("wait", 0) or 0)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise HarnessError(f"{path}: entry {i} is malformed ({exc})") from None


def _body(text: str, encoding: str | None) -> bytes:
    if encoding == "base64":
        return base64.b64decode(text)
    return text.encode()


def synthesize_dns(entries: list[dict]) -> dict[str, DnsAnswer]:
    """An A record per hostname: the HAR's server address where it has one, else a distinct made-up one."""
    seen: dict[str, str] = {}
    for entry in entries:
        host = (urlsplit(entry["request"]["url"]).hostname or "").lower()
        address = str(entry.get("serverIPAddress") or "").strip("[]")
        if host and host not in seen and _is_ipv4(address):
            seen[host] = address
        elif host:
            seen.setdefault(host, "")
    made_up = (str(a) for a in SYNTHETIC_POOL.hosts())
    return {
        host: DnsAnswer(name=host, a=[address or next(made_up)], a_ttl=DEFAULT_TTL, synthesized=True)
        for host, address in sorted(seen.items())
    }


def _is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True
