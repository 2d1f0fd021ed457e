"""The replay archive (docs/replay.md): recorded pages with their DNS, one compressed file per site.

A directory holds `archive.json` (format name, version, the sites with
their files and SHA-256) and `sites/<site>.json.gz`: one site's exchanges
(method, URL, status, headers, body, HTTP version, the server's wait) and
the DNS of every hostname it used (CNAME chain, A and AAAA with TTLs), and
the names on each hostname's server certificate (version 2), and what a HAR
import changed (version 3): requests that failed in the original, bodies
made up because the HAR held none, headers HTTP cannot carry; each hostname's
HTTPS records (version 4, RFC 9460), or that none were asked.
Loading checks everything and fails with one line naming the file and what
is wrong: a truncated or corrupt file, an unknown version, a missing body.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import zlib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, urlsplit

from harness.durable import write_durably
from harness.errors import HarnessError

FORMAT = "dnsstudy-replay-archive"
VERSION = 4
#: Versions this dnsstudy reads: 1 has no certificate names, 2 no import notes and no failed or filled
#: exchanges, 3 no HTTPS records (docs/replay.md).
READS = (1, 2, 3, 4)
INDEX = "archive.json"


@dataclass(frozen=True)
class Exchange:
    """One request and its response, as the server sent it (body still content-encoded)."""

    method: str
    url: str
    status: int
    http_version: str  # "HTTP/1.0", "HTTP/1.1", "HTTP/2.0" or "HTTP/3"
    request_headers: list[tuple[str, str]]
    response_headers: list[tuple[str, str]]
    body: bytes
    wait_ms: float  # from the request's end to the response's first byte: the server's think time
    # Status 0: the request failed in the original, with this error (the HAR's, e.g. net::ERR_CONNECTION_RESET);
    # the replay fails it too, closing the connection or stream without an answer.
    failure: str = ""
    filled: bool = False  # the body was made up at import (--fill-missing-bodies): the HAR held none

    # Cached (a frozen dataclass keeps them in its __dict__): a lab's plan asks each exchange's host and scheme
    # several times, and parsing the URL was a fifth of `lab up`'s Python time on a 6,000-exchange archive.
    @cached_property
    def parts(self) -> SplitResult:
        """The URL, split."""
        return urlsplit(self.url)

    @property
    def host(self) -> str:
        return (self.parts.hostname or "").lower()

    @property
    def scheme(self) -> str:
        """The URL's scheme: http or https."""
        return self.parts.scheme.lower() or "https"


@dataclass(frozen=True)
class DnsAnswer:
    """What a resolver answered for one hostname: its CNAME chain, then the addresses at the chain's end."""

    name: str
    chain: list[tuple[str, int]] = field(default_factory=list)  # (CNAME target, TTL of the CNAME pointing to it)
    a: list[str] = field(default_factory=list)
    a_ttl: int = 300
    aaaa: list[str] = field(default_factory=list)
    aaaa_ttl: int = 300
    synthesized: bool = False  # made up at import (a HAR has no DNS), not recorded
    # The HTTPS records (RFC 9460) of the chain's end, as dnspython prints them (version 4). None: not asked
    # (an archive before version 4, a HAR import) or not answered (SERVFAIL, timeout); []: asked, none.
    https: list[str] | None = None
    https_ttl: int = 0

    @property
    def canonical(self) -> str:
        """The name that owns the addresses (the chain's last target, or the name itself)."""
        return self.chain[-1][0] if self.chain else self.name


@dataclass(frozen=True)
class SiteRecord:
    """One site's page: its URL, every exchange in the order it ended, the DNS of each hostname."""

    site: str
    url: str
    source: str  # "recorded" (dnsstudy record) or "har" (dnsstudy archive import)
    exchanges: list[Exchange]
    dns: dict[str, DnsAnswer]
    # hostname -> the DNS names on the certificate its server showed (none: not recorded, as in a HAR)
    certificates: dict[str, list[str]] = field(default_factory=dict)
    # What a HAR import changed (version 3), counts by kind: "dropped_headers" (names that are not HTTP
    # tokens), "split_headers" (values joined by newlines, split), "failed_requests" (status 0),
    # "filled_bodies" (made up, the HAR had none)
    notes: dict[str, int] = field(default_factory=dict)

    @property
    def filled(self) -> bool:
        """True when some of its bodies were made up at import, not recorded."""
        return any(e.filled for e in self.exchanges)

    @property
    def hostnames(self) -> list[str]:
        return sorted({e.host for e in self.exchanges})

    @property
    def body_bytes(self) -> int:
        return sum(len(e.body) for e in self.exchanges)


def shared_addresses(dns: dict[str, DnsAnswer]) -> dict[str, list[str]]:
    """Address -> the hostnames resolving to it, for addresses two or more hostnames shared."""
    by_address: dict[str, set[str]] = {}
    for name, answer in dns.items():
        for address in answer.a + answer.aaaa:
            by_address.setdefault(address, set()).add(name)
    return {a: sorted(names) for a, names in sorted(by_address.items()) if len(names) > 1}


# -- writing ------------------------------------------------------------


def _exchange_json(e: Exchange) -> dict:
    return (
        {
            "method": e.method,
            "url": e.url,
            "status": e.status,
            "http_version": e.http_version,
            "request_headers": [list(h) for h in e.request_headers],
            "response_headers": [list(h) for h in e.response_headers],
            "body": base64.b64encode(e.body).decode(),
            "wait_ms": round(e.wait_ms, 3),
        }
        | ({"failure": e.failure} if e.failure else {})
        | ({"filled": True} if e.filled else {})
    )


def _dns_json(d: DnsAnswer) -> dict:
    return {
        "chain": [list(c) for c in d.chain],
        "a": d.a,
        "a_ttl": d.a_ttl,
        "aaaa": d.aaaa,
        "aaaa_ttl": d.aaaa_ttl,
        "synthesized": d.synthesized,
    } | ({"https": d.https, "https_ttl": d.https_ttl} if d.https is not None else {})


def write_site(directory: Path, record: SiteRecord) -> None:
    """Add (or replace) one site's entry in the archive at ``directory``, creating the archive if needed."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sites").mkdir(exist_ok=True)
    doc = {
        "site": record.site,
        "url": record.url,
        "source": record.source,
        "exchanges": [_exchange_json(e) for e in record.exchanges],
        "dns": {name: _dns_json(d) for name, d in sorted(record.dns.items())},
        "certificates": {host: names for host, names in sorted(record.certificates.items())},
        "import": {kind: n for kind, n in sorted(record.notes.items()) if n},
    }
    # Level 1: most of a page is already compressed (images, fonts); level 6 took 0.23 of 0.64 s of a 300-entry
    # HAR import under the profiler, and the import's median 0.82 s against 0.53 s (benchmarks/har_import.py)
    data = gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), compresslevel=1, mtime=0)
    relative = f"sites/{record.site}.json.gz"
    write_durably(data, directory / relative)
    index: dict[str, Any] = {"format": FORMAT, "version": VERSION}
    if (directory / INDEX).exists():
        index = _read_index(directory) | {"version": VERSION}  # a site of an earlier version reads as one of 4
    sites = [s for s in index.get("sites", []) if s["site"] != record.site]
    sites.append({"site": record.site, "file": relative, "sha256": hashlib.sha256(data).hexdigest()})
    index["sites"] = sorted(sites, key=lambda s: s["site"])
    write_durably((json.dumps(index, indent=1) + "\n").encode(), directory / INDEX)


# -- reading ------------------------------------------------------------


def _read_index(directory: Path) -> dict:
    path = directory / INDEX
    if not path.is_file():
        raise HarnessError(f"{directory} is not a replay archive: {INDEX} is missing")
    try:
        index = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise HarnessError(f"{path}: not JSON ({exc})") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise HarnessError(f"{path}: not a {FORMAT} index (format {index.get('format')!r})")
    if index.get("version") not in READS:
        readable = " and ".join(str(v) for v in READS)
        version = index.get("version")
        raise HarnessError(f"{path}: format version {version!r} is unknown (this dnsstudy reads {readable})")
    if not isinstance(index.get("sites", []), list):
        raise HarnessError(f"{path}: 'sites' must be a list")
    return index


class Archive:
    """A replay archive on disk: its index read at once, each site loaded (and checked) on demand."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.index = _read_index(self.directory)
        self.entries = {s["site"]: s for s in self.index.get("sites", [])}

    @property
    def sites(self) -> list[str]:
        return sorted(self.entries)

    def load(self, site: str) -> SiteRecord:
        """One site's record; a one-line error names the file if it is truncated, corrupt or incomplete."""
        entry = self.entries.get(site)
        if entry is None:
            raise HarnessError(f"{self.directory}: site '{site}' is not in the archive")
        path = self.directory / entry["file"]
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise HarnessError(f"{path}: cannot read ({exc.strerror})") from None
        if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
            raise HarnessError(f"{path}: corrupt or truncated (its SHA-256 differs from {INDEX}'s)")
        try:
            doc = json.loads(gzip.decompress(data))
        except (EOFError, OSError, zlib.error, ValueError) as exc:
            raise HarnessError(f"{path}: corrupt or truncated ({exc})") from None
        return _site_from(doc, path)

    def load_all(self) -> list[SiteRecord]:
        return [self.load(site) for site in self.sites]


def _site_from(doc: dict, path: Path) -> SiteRecord:
    try:
        exchanges = [_exchange_from(e, i, path) for i, e in enumerate(doc["exchanges"])]
        dns = {name: _dns_from(name, d) for name, d in doc["dns"].items()}
        certificates = {str(h): [str(n) for n in names] for h, names in doc.get("certificates", {}).items()}
        notes = {str(k): int(n) for k, n in doc.get("import", {}).items()}
        return SiteRecord(doc["site"], doc["url"], doc["source"], exchanges, dns, certificates, notes)
    except KeyError as exc:
        raise HarnessError(f"{path}: key {exc} is missing") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise HarnessError(f"{path}: malformed entry ({exc})") from None


def _exchange_from(e: dict, i: int, path: Path) -> Exchange:
    if e.get("body") is None:
        raise HarnessError(f"{path}: exchange {i} ({e.get('method')} {e.get('url')}) has no body")
    return Exchange(
        method=str(e["method"]),
        url=str(e["url"]),
        status=int(e["status"]),
        http_version=str(e["http_version"]),
        request_headers=[(str(k), str(v)) for k, v in e["request_headers"]],
        response_headers=[(str(k), str(v)) for k, v in e["response_headers"]],
        body=base64.b64decode(e["body"], validate=True),
        wait_ms=float(e["wait_ms"]),
        failure=str(e.get("failure", "")),
        filled=bool(e.get("filled", False)),
    )


def _dns_from(name: str, d: dict) -> DnsAnswer:
    return DnsAnswer(
        name=name,
        chain=[(str(t), int(ttl)) for t, ttl in d["chain"]],
        a=[str(a) for a in d["a"]],
        a_ttl=int(d["a_ttl"]),
        aaaa=[str(a) for a in d["aaaa"]],
        aaaa_ttl=int(d["aaaa_ttl"]),
        synthesized=bool(d["synthesized"]),
        # absent: not asked (before version 4, a HAR import), never "none" made up
        https=None if d.get("https") is None else [str(r) for r in d["https"]],
        https_ttl=int(d.get("https_ttl", 0)),
    )
