"""HAR 1.2 files as browsers and tools write them -> replay archive entries (docs/replay.md, "HAR import").

What each writer does differently is normalised here, at import, into what
HTTP can carry as recorded: a byte-order mark (Fiddler); several Set-Cookie
values joined by newlines in one header (Chrome, WebPageTest); header names
that are not HTTP tokens (dropped, counted in the archive); status 0, a
request that failed in the original (kept, with its error, and failed in the
replay too); HTTP version strings in every spelling (`h2`, `HTTP/2.0`,
`h3`, Firefox's `HTTP/3`, `http/1.1`...). An entry without its body
(Firefox 43's "Response bodies are not included", WebPageTest's size 0, a
Firebug body cut short) is refused in one line naming the file, the entry
and its URL, unless filling was asked for (harness/replay/filler.py).

A HAR has no DNS: each hostname gets an A record synthesized from the
entry's `serverIPAddress` (so hostnames that shared an address still do),
or a made-up address from 100.64.0.0/10 that no other site of the archive
uses; every such answer is marked `synthesized`. Bodies in a HAR are
decoded, so the response's Content-Encoding and Content-Length are dropped.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
from collections import Counter
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from harness.errors import HarnessError
from harness.http_versions import canonical_version
from harness.replay.archive import INDEX, Archive, DnsAnswer, Exchange, SiteRecord, write_site
from harness.replay.filler import filled_body

#: Headers that describe the encoded body a HAR no longer holds, or the connection.
DROPPED = {"content-encoding", "content-length", "transfer-encoding", "connection", "keep-alive"}
SYNTHETIC_POOL = ipaddress.IPv4Network("100.64.0.0/10")
DEFAULT_TTL = 300
#: An HTTP header name (RFC 9110's token); HTTP/2 pseudo-headers (":status") are not headers either.
TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
#: Statuses whose body no browser shows: missing from a HAR (Chrome saves no redirect's), replayed empty.
BODILESS = {204, 304} | set(range(100, 200)) | set(range(300, 400))


@dataclass(frozen=True)
class ImportOptions:
    """How to import: fill bodies the HAR lacks, and the addresses other sites of the archive already use."""

    fill_missing_bodies: bool = False
    taken: frozenset[str] = frozenset()


class HarImport:
    """HAR files added one by one to the archive at ``directory``: one address pool for the whole archive, and a
    site already there refused unless ``replace``."""

    def __init__(self, directory: Path, fill_missing_bodies: bool = False, replace: bool = False):
        self.directory = directory
        self.fill_missing_bodies = fill_missing_bodies
        self.replace = replace
        records = Archive(directory).load_all() if (directory / INDEX).exists() else []
        self.sites = {r.site for r in records}
        self.taken = {a for r in records for d in r.dns.values() for a in d.a}

    def add(self, path: Path, site: str | None = None) -> SiteRecord:
        """Import one HAR and write it into the archive; a one-line error says why one is refused."""
        options = ImportOptions(self.fill_missing_bodies, frozenset(self.taken))
        record = read_har(path, site, options)
        if record.site in self.sites and not self.replace:
            raise HarnessError(f"{path}: site '{record.site}' is already in {self.directory} (--replace replaces it)")
        write_site(self.directory, record)
        self.sites.add(record.site)
        self.taken |= {a for d in record.dns.values() for a in d.a}
        return record


def site_of(url: str) -> str:
    """The site a page URL names: its hostname without a leading 'www.'."""
    host = (urlsplit(url).hostname or "").lower()
    return host.removeprefix("www.")


def read_har(path: Path, site: str | None = None, options: ImportOptions | None = None) -> SiteRecord:
    """One HAR file -> one site's record; a one-line error names the file and the entry that is wrong."""
    options = options or ImportOptions()
    log = _read_log(path)
    entries = log["entries"]
    url = str(entries[0].get("request", {}).get("url", ""))  # the first entry is the page's document
    notes: Counter[str] = Counter()
    saved_without = _no_bodies_comment(log)
    exchanges = [_exchange(entry, i, path, options, notes, saved_without) for i, entry in enumerate(entries)]
    if exchanges[0].failure:  # a visit of it could only fail, and not for any protocol's reason
        raise HarnessError(
            f"{path}: entry 0 ({url}) is the page, and it failed in the original ({exchanges[0].failure})"
        )
    dns = synthesize_dns(entries, options.taken)
    return SiteRecord(site or site_of(url), url, "har", exchanges, dns, notes=dict(notes))


def _read_log(path: Path) -> dict:
    """The HAR's `log`, read with or without a byte-order mark."""
    try:
        har = json.loads(path.read_bytes().decode("utf-8-sig"))
        log = har["log"]
        entries = log["entries"]
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise HarnessError(f"{path}: not a readable HAR ({exc})") from None
    except (KeyError, TypeError):
        raise HarnessError(f"{path}: not a HAR 1.2 file (no log.entries)") from None
    if not isinstance(entries, list) or not entries:
        raise HarnessError(f"{path}: the HAR has no entries")
    return log


def _no_bodies_comment(log: dict) -> str:
    """The writer's own word that it saved no bodies (Firefox 43, on each content: "Response bodies are not
    included."), or ""."""
    contents = [(e.get("response") or {}).get("content") or {} for e in log["entries"][:1]]
    for comment in [log.get("comment"), (log.get("creator") or {}).get("comment")] + [
        c.get("comment") for c in contents
    ]:
        if isinstance(comment, str) and "bod" in comment.lower() and "not" in comment.lower():
            return comment.strip()
    return ""


def _exchange(entry: dict, i: int, path: Path, options: ImportOptions, notes: Counter, saved_without: str) -> Exchange:
    try:
        request, response = entry["request"], entry["response"]
        where = f"{path}: entry {i} ({request['method']} {request['url']})"
        status = int(response.get("status") or 0)  # 0 or -1 (WebPageTest): no response in the original
        failure = _failure(entry) if status <= 0 else ""
        notes["failed_requests"] += bool(failure)
        body, filled = (b"", False) if failure else _body_of(response, where, options, saved_without)
        notes["filled_bodies"] += filled
        return Exchange(
            method=request["method"],
            url=request["url"],
            status=max(0, status),
            http_version=_version(response, request, where),
            request_headers=_headers(request.get("headers", []), set(), notes),
            response_headers=_headers(response.get("headers", []), DROPPED, notes),
            body=body,
            wait_ms=max(0.0, float(entry.get("timings", {}).get("wait", 0) or 0)),
            failure=failure,
            filled=filled,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise HarnessError(f"{path}: entry {i} is malformed ({type(exc).__name__}: {exc})") from None


def _failure(entry: dict) -> str:
    """What a request with status 0 met in the original: the writer's error (Chrome's `_error`), if it kept one."""
    error = entry.get("_error") or entry["response"].get("_error") or entry["response"].get("statusText")
    return str(error).strip() if error else "no response"


def _body_of(response: dict, where: str, options: ImportOptions, saved_without: str) -> tuple[bytes, bool]:
    """The body as recorded, or (with --fill-missing-bodies) a filled one where the HAR lacks it or cut it."""
    content = response.get("content") or {}
    text = content.get("text")
    if text is not None:
        body = _decode(text, content.get("encoding"), where)
        size = _int(content.get("size"))
        if len(body) >= size:
            return body, False
    else:
        body, size = None, _recorded_size(response)
        if size == 0 or _int(response.get("status")) in BODILESS:
            return b"", False  # an empty body, or one no browser shows (a redirect's): nothing is missing
    if not options.fill_missing_bodies:
        what = "has no body" if body is None else f"has a partial body ({len(body)} of {size} bytes)"
        why = f": the HAR says '{saved_without}'" if saved_without else ""
        raise HarnessError(f"{where} {what}{why} (save it with content, or import with --fill-missing-bodies)")
    return filled_body(str(content.get("mimeType") or ""), size), True


def _recorded_size(response: dict) -> int:
    """The size of a body the HAR lacks: the content's, else (WebPageTest writes 0) the body's or its header's."""
    sizes = [(response.get("content") or {}).get("size"), response.get("bodySize")]
    sizes += [h.get("value") for h in response.get("headers", []) if str(h.get("name", "")).lower() == "content-length"]
    return max(_int(s) for s in sizes)


def _int(value: object) -> int:
    """A size or status as a HAR writes it (a number, a string, -1 or nothing for unknown): 0 if unknown."""
    try:
        return max(0, int(str(value).strip()))
    except ValueError:
        return 0


def _decode(text: str, encoding: str | None, where: str) -> bytes:
    if encoding != "base64":
        return text.encode()
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise HarnessError(f"{where}: its body is not valid base64 ({exc})") from None


def _version(response: dict, request: dict, where: str) -> str:
    """The HTTP version the response came over, from any writer's spelling of it: the response's, else the
    request's, else 1.1 (a cached entry, a tool that did not know)."""
    for spelling in (response.get("httpVersion"), request.get("httpVersion")):
        try:
            version = canonical_version(spelling)
        except ValueError as exc:
            raise HarnessError(f"{where}: {exc}") from None
        if version is not None:
            return version
    return "HTTP/1.1"


def _headers(headers: list[dict], dropped: set[str], notes: Counter) -> list[tuple[str, str]]:
    """The headers HTTP can carry as recorded: one value per line (joined Set-Cookie values split), names
    without surrounding spaces, and only names that are tokens (the others dropped); each change counted."""
    out: list[tuple[str, str]] = []
    for h in headers:
        raw, value = str(h["name"]), str(h["value"])
        name = raw.strip()  # a raw header line split with its spaces (WebPageTest's "set-cookie ")
        notes["trimmed_header_names"] += name != raw
        if name.lower() in dropped:
            continue
        if not TOKEN.match(name):
            notes["dropped_headers"] += 1
            continue
        lines = [v.strip() for v in value.splitlines() if v.strip()] or [value.strip()]
        notes["split_headers"] += len(lines) - 1
        out += [(name, v) for v in lines]
    return out


def synthesize_dns(entries: list[dict], taken: frozenset[str] = frozenset()) -> dict[str, DnsAnswer]:
    """An A record per hostname: the HAR's server address where it has one, else a distinct made-up one that
    no other site of the archive (``taken``) and no address of this HAR uses."""
    seen: dict[str, str] = {}
    for entry in entries:
        host = (urlsplit(entry["request"]["url"]).hostname or "").lower()
        address = str(entry.get("serverIPAddress") or "").strip("[]")
        if host and host not in seen and _is_ipv4(address):
            seen[host] = address
        elif host:
            seen.setdefault(host, "")
    made_up = _free(taken | set(seen.values()))
    return {
        host: DnsAnswer(name=host, a=[address or next(made_up)], a_ttl=DEFAULT_TTL, synthesized=True)
        for host, address in sorted(seen.items())
    }


def _free(used: AbstractSet[str]) -> Iterator[str]:
    return (a for a in map(str, SYNTHETIC_POOL.hosts()) if a not in used)


def _is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True
