"""Which recorded exchange answers a replayed request, and what it is sent as.

A request is looked up by host, method and path; an exact query string wins,
else the recorded query closest to it (fewest differing parameters, then the
most similar string), as Web Page Replay does, and the match is reported as
fuzzy. No recorded (host, method, path) is a miss. HTML documents get a
script that makes Date and Math.random deterministic, seeded per site.
"""

from __future__ import annotations

import difflib
import email.utils
import gzip
import hashlib
import zlib
from dataclasses import dataclass
from urllib.parse import parse_qsl, urljoin, urlsplit

from harness.replay.archive import Exchange, SiteRecord

#: Response headers never replayed: they describe the recorded connection, the recorded body's framing,
#: or invite the browser elsewhere (alt-svc would send it to HTTP/3, which the lab does not serve).
HOP_HEADERS = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "upgrade",
    "proxy-connection",
    "alt-svc",
    "http2-settings",
}

DETERMINISM = (
    "<script>(function(){var s=%d>>>0;Math.random=function(){s=(s+0x6D2B79F5)>>>0;var t=s;"
    "t=Math.imul(t^(t>>>15),t|1);t^=t+Math.imul(t^(t>>>7),t|61);return((t^(t>>>14))>>>0)/4294967296;};"
    "var O=Date,T=%d,n=O.now.bind(O),b=n();function D(){if(!(this instanceof D))return new O(T+n()-b).toString();"
    "var a=[].slice.call(arguments);return a.length?new(Function.prototype.bind.apply(O,[null].concat(a)))():"
    "new O(T+n()-b);}D.prototype=O.prototype;D.now=function(){return T+n()-b;};D.UTC=O.UTC;D.parse=O.parse;"
    "Date=D;})();</script>"
)


@dataclass(frozen=True)
class Match:
    """The answer to one request: the exchange (None: a miss) and whether its query differed."""

    exchange: Exchange | None
    site: str | None
    fuzzy: bool
    recorded_query: str = ""


def page_urls(record: SiteRecord) -> set[str]:
    """The URLs of the page's own document: its URL and every redirect from it, as recorded."""
    by_url = {e.url: e for e in record.exchanges}
    urls, url = set(), record.url
    while url in by_url and url not in urls:
        urls.add(url)
        location = next((v for k, v in by_url[url].response_headers if k.lower() == "location"), "")
        url = urljoin(url, location) if 300 <= by_url[url].status < 400 and location else ""
    return urls | {record.url}


def site_seed(site: str) -> int:
    """The per-site seed of the determinism script (stable across runs and machines)."""
    return int.from_bytes(hashlib.sha256(site.encode()).digest()[:4], "big")


def _query_distance(a: str, b: str) -> tuple[int, float]:
    pa, pb = set(parse_qsl(a, keep_blank_values=True)), set(parse_qsl(b, keep_blank_values=True))
    return len(pa ^ pb), -difflib.SequenceMatcher(None, a, b).ratio()


class ExchangeIndex:
    """Every exchange of the archive's sites by (host, method, path), each with its query and site."""

    def __init__(self, records: list[SiteRecord]):
        self.by_key: dict[tuple[str, str, str], list[tuple[str, Exchange, str]]] = {}
        for record in records:
            for e in record.exchanges:
                parts = e.parts
                key = ((parts.hostname or "").lower(), e.method.upper(), parts.path or "/")
                self.by_key.setdefault(key, []).append((parts.query, e, record.site))

    def match(self, host: str, method: str, target: str, scheme: str = "https") -> Match:
        """The exchange that answers ``method`` ``target`` (path and query) on ``host`` over ``scheme`` (an
        `http://` URL is answered only by what was recorded over http, as the redirect to https usually is)."""
        parts = urlsplit(target)
        key = (host.split(":")[0].lower(), method.upper(), parts.path or "/")
        candidates = [c for c in self.by_key.get(key, []) if c[1].scheme == scheme]
        if not candidates:
            return Match(None, None, False)
        for query, e, site in candidates:
            if query == parts.query:
                return Match(e, site, False, query)
        query, e, site = min(candidates, key=lambda c: _query_distance(c[0], parts.query))
        return Match(e, site, True, query)


def response_headers(e: Exchange) -> list[tuple[str, str]]:
    """The recorded response headers that a replay sends (names lower-cased, hop-by-hop ones dropped)."""
    return [(k.lower(), v) for k, v in e.response_headers if k.lower() not in HOP_HEADERS and not k.startswith(":")]


def _recorded_ms(e: Exchange) -> int:
    for k, v in e.response_headers:
        if k.lower() == "date":
            parsed = email.utils.parsedate_to_datetime(v) if v else None
            if parsed is not None:
                return int(parsed.timestamp() * 1000)
    return 1_577_836_800_000  # 2020-01-01: any fixed instant keeps the page deterministic


def body_for(e: Exchange, site: str) -> bytes:
    """The body to send: as recorded, with the determinism script in HTML (re-encoded if gzip or deflate)."""
    headers = dict(response_headers(e))
    if "text/html" not in headers.get("content-type", "") or not e.body:
        return e.body
    encoding = headers.get("content-encoding", "identity").strip().lower()
    try:
        html = {"identity": lambda b: b, "gzip": gzip.decompress, "deflate": zlib.decompress}[encoding](e.body)
    except (KeyError, OSError, zlib.error):
        return e.body  # an encoding we cannot open (br): sent as recorded, not made deterministic
    script = (DETERMINISM % (site_seed(site), _recorded_ms(e))).encode()
    at = html.lower().find(b"<head>")
    at = at + len(b"<head>") if at >= 0 else 0
    html = html[:at] + script + html[at:]
    if encoding == "gzip":
        return gzip.compress(html, mtime=0)
    if encoding == "deflate":
        return zlib.compress(html)
    return html
