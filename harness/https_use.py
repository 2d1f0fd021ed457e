"""Today's web on one visit: the HTTP version of each request, and which of the page's hosts asked for, got and
used an HTTPS record (RFC 9460).

Two witnesses, read after the load: the visit's HAR (each request's HTTP version, in the order the browser
sent them) and the replies the place's resolvers logged while the page loaded (harness/lab/querylog.py). A
page host's HTTPS record was *asked* when a resolver replied to an HTTPS query for it in the visit's window,
*answered* when that reply was NOERROR and the place's zone gives the name a record, and *used* when, answered,
the host's first request went over HTTP/3 (the record announced h3; without it the browser learns of HTTP/3
only from an Alt-Svc header, on a later connection). Which transport the query took is the arm's: the visit's
proof shows every query took it (harness/arms/evidence.py), type 65 as any other. Where the place keeps no
resolver log (the Internet side) the counts are None, never 0 (docs/visit.md, "HTTP/3 and HTTPS records").

A third witness where the lab's web has Encrypted Client Hello (harness/lab/ech.py): the HTTP/3 front's log of
connections, each with the server name and whether ECH was accepted. A page host's `ech` is True when one of
its connections accepted ECH, False when the front saw it only without, None when the front never saw it (an
HTTP/2 host: nginx cannot do ECH); `ech_accepted` counts the page hosts with True, None without the witness.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from harness.http_versions import ALPN, canonical_version

if TYPE_CHECKING:
    from harness.lab.querylog import Reply


def http_version(spelled: object) -> str:
    """A HAR's HTTP version (any writer's spelling) as ALPN names it: h3, h2, http/1.1, http/1.0; "" unknown."""
    try:
        version = canonical_version(spelled)
    except ValueError:
        return ""
    return ALPN[version] if version else ""


def _host(url: str) -> str | None:
    """A request URL's hostname (lower case), or None for a literal address or a URL without a host."""
    host = (urlsplit(url).hostname or "").lower()
    if not host:
        return None
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host
    return None


def _requests(har: dict) -> list[tuple[str | None, str]]:
    """(host, version) of every http(s) request of the HAR, in the order sent; host None for a literal address."""
    entries = sorted(har.get("log", {}).get("entries", []), key=lambda e: str(e.get("startedDateTime", "")))
    out = []
    for entry in entries:
        url = str(entry.get("request", {}).get("url", ""))
        if url.startswith(("https:", "http:")):
            spelled = (entry.get("response") or {}).get("httpVersion") or entry["request"].get("httpVersion")
            out.append((_host(url), http_version(spelled)))
    return out


def https_use_record(
    har: dict | None,
    url: str,
    replies: Iterable[Reply] | None,
    owners: frozenset[str] | None,
    ech: dict[str, bool] | None = None,
) -> dict:
    """A visit record's fields of today's web (see the module's docstring): requests per HTTP version, whether
    the page's document went over HTTP/3, per page host its HTTPS record asked, answered and used, and (``ech``,
    per server name) whether its connections accepted Encrypted Client Hello."""
    empty = dict.fromkeys(("first_h3", "page_hosts", "https_asked", "https_answered", "https_used", "ech_accepted"))
    if har is None:
        return {**empty, "http_versions": None, "https_hosts": None}
    requests = _requests(har)
    first: dict[str, str] = {}
    for host, version in requests:
        if host is not None:
            first.setdefault(host, version)
    page_host = _host(url)
    record: dict = {
        **empty,
        "http_versions": dict(sorted(Counter(v or "unknown" for _, v in requests).items())),
        "first_h3": (first[page_host] == "h3") if page_host in first else None,
        "page_hosts": len(first),
        "https_hosts": None,
    }
    if replies is None or owners is None:
        return record
    hosts = _https_hosts(first, list(replies), owners)
    if ech is not None:
        hosts = [h | {"ech": ech.get(h["host"])} for h in hosts]
    return {
        **record,
        "https_asked": sum(h["asked"] for h in hosts),
        "https_answered": sum(h["answered"] for h in hosts),
        "https_used": sum(h["used"] for h in hosts),
        "ech_accepted": sum(h["ech"] is True for h in hosts) if ech is not None else None,
        "https_hosts": hosts,
    }


def _https_hosts(first: dict[str, str], replies: list[Reply], owners: frozenset[str]) -> list[dict]:
    """Per page host (in the order first requested): published, asked, the rcodes, answered, first version, used."""
    rcodes: dict[str, list[str]] = {}
    for reply in replies:
        if reply.type == "HTTPS":
            rcodes.setdefault(reply.name, []).append(reply.rcode)
    hosts = []
    for host, version in first.items():
        got = rcodes.get(host, [])
        answered = host in owners and "NOERROR" in got
        hosts.append(
            {
                "host": host,
                "published": host in owners,
                "asked": bool(got),
                "rcodes": sorted(set(got)),
                "answered": answered,
                "first_version": version or "unknown",
                "used": answered and version == "h3",
            }
        )
    return hosts
