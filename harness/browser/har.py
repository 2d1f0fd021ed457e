"""Assemble HAR 1.2 from network events in WebDriver BiDi's shape (our own small recorder).

Sources: the network events of one navigation (Chromium's from BiDi; Firefox's
from the harness's request recorder, scripts/watch-network.js, since BiDi's
observer doubled Firefox's onLoad); BiDi's navigation events; the server address
of each response, observed inside the browser (BiDi does not report it); and
Navigation Timing, which gives onLoad and onContentLoad (network DNS times are not
trustworthy and are kept only as the HAR's `dns` field).
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path

from haralyzer import HarParser

from harness.durable import write_durably

HTTP_VERSIONS = {"h2": "HTTP/2", "http/1.1": "HTTP/1.1", "http/1.0": "HTTP/1.0", "h3": "HTTP/3"}


@dataclass
class PageInfo:
    """What the page itself reports after navigation."""

    url: str
    title: str = ""
    on_load_ms: float | None = None  # Navigation Timing: loadEventStart - startTime
    on_content_load_ms: float | None = None  # domContentLoadedEventStart - startTime
    server_addresses: list[dict] = field(default_factory=list)  # [{url, address, port, protocol}] in response order


def _iso(epoch_ms: float) -> str:
    return dt.datetime.fromtimestamp(epoch_ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")


def _headers(raw: list[dict] | None) -> list[dict]:
    out = []
    for header in raw or []:
        value = header.get("value")
        out.append(
            {"name": header.get("name", ""), "value": value.get("value", "") if isinstance(value, dict) else str(value)}
        )
    return out


def _span(timings: dict, start: str, end: str) -> float:
    a, b = timings.get(start) or 0, timings.get(end) or 0
    return round(b - a, 3) if a > 0 and b >= a else -1


def _timings(t: dict) -> dict:
    """HAR timings from BiDi request timings (epoch ms, 0 = unset)."""
    dns = _span(t, "dnsStart", "dnsEnd")
    connect = _span(t, "connectStart", "connectEnd")
    ssl = _span(t, "tlsStart", "tlsEnd")
    wait = _span(t, "requestStart", "responseStart")
    receive = _span(t, "responseStart", "responseEnd")
    first_phase = next((t[k] for k in ("dnsStart", "connectStart", "requestStart") if t.get(k)), 0)
    requested = t.get("requestTime")
    blocked = round(first_phase - requested, 3) if first_phase and requested and first_phase >= requested else -1
    return {
        "blocked": blocked,
        "dns": dns,
        "connect": connect,
        "ssl": ssl,
        "send": 0,
        "wait": max(wait, 0),
        "receive": max(receive, 0),
    }


def _total(timings: dict) -> float:
    # `ssl` is part of `connect` in HAR 1.2, so it is not added again.
    return round(sum(v for k, v in timings.items() if k != "ssl" and v > 0), 3)


def _dropped(request: dict, response: dict | None) -> bool:
    """Firefox's duplicate cache reports and data: URLs (error pages' fonts) are not network requests."""
    if request.get("url", "").startswith("data:"):
        return True
    if response and response.get("fromCache"):
        t = request.get("timings") or {}
        return not any(t.get(k) for k in ("requestStart", "responseStart", "connectStart"))
    return False


def build_har(events: list[dict], page: PageInfo, browser: tuple[str, str], creator_version: str) -> dict:
    """A HAR 1.2 document with one page and one entry per network request; ``browser`` is (name, version)."""
    slots = _collect_requests(events)
    addresses = _addresses_by_url(page)
    entries = [_entry(slot, addresses) for slot in slots if not _dropped(slot["request"], slot["response"])]
    started_ms = _navigation_start(events)
    if started_ms is None:
        started_ms = _first_request_time(slots)
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": "dnsstudy", "version": creator_version},
            "browser": {"name": browser[0], "version": browser[1]},
            "pages": [_page(page, started_ms)],
            "entries": entries,
        }
    }


def _collect_requests(events: list[dict]) -> list[dict]:
    """One slot per (request id, redirect count), in order of first event, merging that request's events."""
    slots: dict[tuple, dict] = {}
    for event in events:
        method, params = event["method"], event["params"]
        if not method.startswith("network."):
            continue
        key = (params["request"]["request"], params.get("redirectCount", 0))
        slot = slots.get(key)
        if slot is None:
            slot = slots[key] = {
                "request": params["request"],
                "response": None,
                "error": None,
                "timestamp": params.get("timestamp"),
            }
        slot["request"] = params["request"]  # later events carry the complete timings and headers
        if "response" in params:
            slot["response"] = params["response"]
        if method == "network.fetchError":
            slot["error"] = params.get("errorText", "")
    return list(slots.values())


def _navigation_start(events: list[dict]) -> float | None:
    """The first timestamp a navigationStarted event gives, if any."""
    starts = (
        event["params"].get("timestamp") for event in events if event["method"] == "browsingContext.navigationStarted"
    )
    return next((ms for ms in starts if ms is not None), None)


def _first_request_time(slots: list[dict]) -> float:
    """The page start when no navigation event gave one: the earliest request (dropped ones count too)."""
    times = ((slot["request"].get("timings") or {}).get("requestTime") for slot in slots)
    return min((ms for ms in times if ms), default=0)


def _addresses_by_url(page: PageInfo) -> dict[str, deque]:
    """Server addresses queued per URL: a URL fetched twice takes them in response order."""
    addresses: dict[str, deque] = defaultdict(deque)
    for seen in page.server_addresses:
        addresses[seen["url"]].append(seen)
    return addresses


def _entry(slot: dict, addresses: dict[str, deque]) -> dict:
    """One HAR entry; takes the next server address seen for its URL."""
    request, response = slot["request"], slot["response"] or {}
    timings = _timings(request.get("timings") or {})
    version = HTTP_VERSIONS.get(response.get("protocol", "").lower(), response.get("protocol") or "")
    start_ms = (request.get("timings") or {}).get("requestTime") or slot["timestamp"] or 0
    entry = {
        "pageref": "page_1",
        "startedDateTime": _iso(start_ms),
        "time": _total(timings),
        "request": _request(request, version),
        "response": _response(response, version),
        "cache": {},
        "_transferSize": response.get("bytesReceived", -1),
        "timings": timings,
    }
    queue = addresses.get(entry["request"]["url"])
    if queue:
        seen = queue.popleft()
        entry["serverIPAddress"] = seen["address"]
        entry["connection"] = str(seen.get("port", ""))
    if slot["error"] is not None:
        entry["_error"] = slot["error"]
    elif slot["response"] is None:
        # Neither answered nor failed when the HAR was taken: still in flight, or (seen in Firefox under load)
        # a second request for a URL already answered that never reported an outcome.
        entry["_unanswered"] = True
    return entry


def _request(request: dict, version: str) -> dict:
    """The HAR request of a BiDi request."""
    return {
        "method": request.get("method", "GET"),
        "url": request.get("url", ""),
        "httpVersion": version,
        "cookies": [
            {"name": c.get("name", ""), "value": (c.get("value") or {}).get("value", "")}
            for c in request.get("cookies") or []
        ],
        "headers": _headers(request.get("headers")),
        "queryString": [],
        "headersSize": request.get("headersSize") or -1,
        "bodySize": _or_minus_one(request.get("bodySize")),
    }


def _response(response: dict, version: str) -> dict:
    """The HAR response of a BiDi response ({} when none came)."""
    return {
        "status": response.get("status", 0),
        "statusText": response.get("statusText", ""),
        "httpVersion": version,
        "cookies": [],
        "headers": _headers(response.get("headers")),
        # Firefox leaves content.size at 0; the body size is the best figure it gives.
        "content": {
            "size": (response.get("content") or {}).get("size") or response.get("bodySize") or 0,
            "mimeType": response.get("mimeType") or "x-unknown",
        },
        "redirectURL": "",
        "headersSize": response.get("headersSize") or -1,
        "bodySize": _or_minus_one(response.get("bodySize")),
    }


def _page(page: PageInfo, started_ms: float | None) -> dict:
    """The HAR page; unknown page timings are -1."""
    return {
        "startedDateTime": _iso(started_ms or 0),
        "id": "page_1",
        "title": page.title or page.url,
        "pageTimings": {
            "onContentLoad": _or_minus_one(page.on_content_load_ms),
            "onLoad": _or_minus_one(page.on_load_ms),
        },
    }


def _or_minus_one(value: float | None) -> float:
    # HAR's "unknown" is -1; 0 is a real value here, so only None becomes -1.
    return value if value is not None else -1


def check_har(har: dict) -> str | None:
    """None if haralyzer reads the HAR and its page_load_time is the recorded onLoad, else why not."""
    try:
        parsed = HarParser(har)
        pages = parsed.pages
    except Exception as exc:  # haralyzer raises assorted errors on malformed input
        return f"haralyzer cannot read the HAR: {type(exc).__name__}: {exc}"
    if len(pages) != 1:
        return f"HAR has {len(pages)} pages, expected 1"
    expected = har["log"]["pages"][0]["pageTimings"]["onLoad"]
    if pages[0].page_load_time != expected:
        return f"haralyzer page_load_time {pages[0].page_load_time} != recorded onLoad {expected}"
    return None


def write_har(har: dict, path: Path) -> None:
    """Write gzip JSON atomically and durably: to ``path``.part, fsync it, rename it, fsync the directory.

    A half-written HAR never appears under the final name, and once this returns the HAR survives a
    power cut, so a store may commit a record naming it. Any failure (a full disk: ENOSPC, EDQUOT)
    removes the .part and raises.
    """
    write_durably(gzip.compress(json.dumps(har, separators=(",", ":")).encode(), compresslevel=6), path)


def read_har(path: Path) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)
