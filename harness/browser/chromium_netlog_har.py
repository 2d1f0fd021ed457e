"""Chromium's requests from its net log (--log-net-log), in WebDriver BiDi's event shape, so that `har.py` builds
Chromium's HAR without a subscription to BiDi's network events (which cost its onLoad 12-17 %, docs/visit.md).

The net log already runs for every visit (its DNS facts: harness/browser/chromium_netlog.py). Its default capture
mode has what a HAR needs: each URL request's events (`URL_REQUEST` sources) with the URL, method, the headers
sent and received, the body bytes read, the net error, redirects, and the transport's endpoint; the stream job,
connect job and socket it was bound to give the DNS, connect and TLS times of a connection made for it.

A page's requests are told from the browser's own by their network traffic annotation (the `REQUEST_ALIVE`
event's hash of the annotation's unique id): the navigation's (`navigation_url_loader`) and the renderer's
(`blink_resource_loader`), which are what BiDi reports. Everything else is the browser's own (sign-in checks,
component and time updates, the favicon, DoH, which runs on no URL request of these). Of a reused browser's net
log only the visit's part is read, and in it only requests made from the navigation on (the warm-up lookup's
fetch comes before it).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field


def annotation_hash(unique_id: str) -> int:
    """Chromium's hash of a network traffic annotation's unique id (net/traffic_annotation/
    network_traffic_annotation.h, `COMPUTE_NETWORK_TRAFFIC_ANNOTATION_ID_HASH`), as the net log gives it."""
    value = ord(unique_id[0])
    for char in unique_id[1:]:
        value = (value * 31 + ord(char)) % 138003713
    return value


#: The harness's own navigation that makes a running Chromium write out its net log (harness/browser/
#: chromium_reused.py): a port on loopback nothing listens on, no name to resolve; never a page's request.
FLUSH_URL = "http://127.0.0.1:4/"
#: The annotations of a page's own requests: its navigations and what its renderer fetches.
NAVIGATION = annotation_hash("navigation_url_loader")
PAGE_ANNOTATIONS = frozenset({NAVIGATION, annotation_hash("blink_resource_loader")})
_ENDPOINT = re.compile(r"endpoint = \[?([0-9A-Fa-f.:]+?)\]?:(\d+)")
#: Request header events by the protocol they were sent over.
_SENT_HEADERS = {
    "HTTP_TRANSACTION_HTTP2_SEND_REQUEST_HEADERS": "h2",
    "HTTP_TRANSACTION_QUIC_SEND_REQUEST_HEADERS": "h3",
    "HTTP_TRANSACTION_SEND_REQUEST_HEADERS": "",  # HTTP/1.x: the status line says which
}


@dataclass
class NetLogIndex:
    """A parsed net log's events by source, with its constants' names."""

    names: dict[int, str]
    errors: dict[int, str]
    offset: float  # epoch ms of the log's tick 0
    sources: dict[int, list[dict]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def of(cls, data: dict) -> NetLogIndex:
        constants = data.get("constants", {})
        index = cls(
            names={v: k for k, v in constants.get("logEventTypes", {}).items()},
            errors={v: k for k, v in constants.get("netError", {}).items()},
            offset=float(constants.get("timeTickOffset", 0)),
        )
        for event in data.get("events", []):
            index.sources[int((event.get("source") or {}).get("id", -1))].append(event)
        return index

    def name(self, event: dict) -> str:
        return self.names.get(event.get("type", -1), "")

    def epoch(self, event: dict) -> float:
        """The event's time in epoch ms (the log's times are ticks, ms since the machine's boot)."""
        return float(event.get("time", 0)) + self.offset

    def error(self, code: int) -> str:
        return f"net::{self.errors.get(code, f'ERR_{code}')}"


@dataclass
class PageRequests:
    """A visit's page requests from its net log: BiDi-shaped network events, the server address of each
    response, and how many page requests were still open (no end logged)."""

    events: list[dict]
    server_addresses: list[dict]
    open: int


def page_requests(data: dict | None) -> PageRequests:
    """The page's requests in the parsed net log ``data`` (`chromium_netlog.load_netlog`): for each request and
    each of its redirects `network.beforeRequestSent`, then `network.responseCompleted` (or `responseStarted`
    while its body is still read) and/or `network.fetchError`, as BiDi would give them."""
    found = PageRequests([], [], 0)
    if data is None:
        return found
    index = NetLogIndex.of(data)
    requests = [s for s, events in sorted(index.sources.items()) if _annotation(index, events) in PAGE_ANNOTATIONS]
    navigation = next((s for s in requests if _annotation(index, index.sources[s]) == NAVIGATION), None)
    for source in requests:
        if navigation is not None and source < navigation:
            continue  # before the visit's navigation: the warm-up lookup's fetch, a late request of a visit before
        events = index.sources[source]
        if any(str((e.get("params") or {}).get("url", "")).startswith(FLUSH_URL) for e in events):
            continue  # the harness's own, after the page
        if not any(index.name(e) == "REQUEST_ALIVE" and e.get("phase") == 2 for e in events):
            found.open += 1
        for count, segment in enumerate(_segments(index, events)):
            _add_request(found, index, str(source), count, segment)
    return found


def _annotation(index: NetLogIndex, events: list[dict]) -> int | None:
    """The traffic annotation of a URL request's events (None: not a URL request, or its start is not here)."""
    for event in events:
        if index.name(event) == "REQUEST_ALIVE" and event.get("phase") == 1:
            return (event.get("params") or {}).get("traffic_annotation")
    return None


def _segments(index: NetLogIndex, events: list[dict]) -> list[list[dict]]:
    """A URL request's events split at each job start: one part for the request and one for each redirect."""
    segments: list[list[dict]] = [[]]
    for event in events:
        if index.name(event) == "URL_REQUEST_START_JOB" and event.get("phase") == 1 and _has_job(index, segments[-1]):
            segments.append([])
        segments[-1].append(event)
    return segments


def _has_job(index: NetLogIndex, events: list[dict]) -> bool:
    return any(index.name(e) == "URL_REQUEST_START_JOB" and e.get("phase") == 1 for e in events)


def _add_request(found: PageRequests, index: NetLogIndex, request_id: str, count: int, events: list[dict]) -> None:
    """The BiDi events of one request (or redirect) ``events``, and its server address."""
    begin = _params(index, events, "URL_REQUEST_START_JOB", 1) or _params(index, events, "REQUEST_ALIVE", 1) or {}
    sent, protocol = _sent_headers(index, events)
    received = _received_headers(index, events)
    request = {
        "request": request_id,
        "url": begin.get("url", ""),
        "method": begin.get("method", "GET"),
        "headers": [_header(line) for line in sent if not line.startswith(":")],
        "cookies": [],
        "headersSize": -1,  # the raw header block is not in the log (for HTTP/2 and 3 it was never sent as text)
        "bodySize": (_params(index, events, "HTTP_TRANSACTION_SEND_REQUEST_BODY", None) or {}).get("length", 0),
        "timings": _timings(index, events),
    }
    base = {"request": request, "redirectCount": count, "timestamp": request["timings"]["requestTime"]}
    if begin.get("request_type") == "main frame":
        base["navigation"] = f"netlog-{request_id}"  # what `navigation_error` looks for
    found.events.append({"method": "network.beforeRequestSent", "params": base})
    if received:
        response = _response(index, events, received, protocol, request["url"])
        ended = _ended(index, events)
        method = "network.responseCompleted" if ended else "network.responseStarted"
        found.events.append({"method": method, "params": {**base, "response": response}})
        address = _server_address(index, events)
        if address is not None:
            found.server_addresses.append({"url": request["url"], **address})
    error = _net_error(index, events)
    if error is not None:
        found.events.append({"method": "network.fetchError", "params": {**base, "errorText": index.error(error)}})


def _params(index: NetLogIndex, events: list[dict], name: str, phase: int | None) -> dict | None:
    """The parameters of the first event ``name`` of ``phase`` (0 none, 1 begin, 2 end; None: any) in ``events``."""
    for event in events:
        if index.name(event) == name and phase in (None, event.get("phase")):
            return event.get("params") or {}
    return None


def _sent_headers(index: NetLogIndex, events: list[dict]) -> tuple[list[str], str]:
    """The request header lines as sent ("name: value"), and the protocol their event says ("" for HTTP/1.x)."""
    for event in events:
        protocol = _SENT_HEADERS.get(index.name(event))
        if protocol is not None:
            return list((event.get("params") or {}).get("headers") or []), protocol
    return [], ""


def _received_headers(index: NetLogIndex, events: list[dict]) -> list[str]:
    """The response's status line and header lines: read from the server, or made up by Chromium for an internal
    redirect (an HSTS upgrade); [] when none came."""
    found: list[str] = []
    for event in events:
        if index.name(event) in ("HTTP_TRANSACTION_READ_RESPONSE_HEADERS", "URL_REQUEST_FAKE_RESPONSE_HEADERS_CREATED"):
            found = list((event.get("params") or {}).get("headers") or [])  # the last: after a 1xx, the final
    return found


def _header(line: str) -> dict:
    """BiDi's header of a "name: value" line (HTTP/2's pseudo-headers begin with ':')."""
    cut = line.find(":", 1)
    name, value = (line[:cut], line[cut + 1 :].strip()) if cut > 0 else (line, "")
    return {"name": name, "value": {"type": "string", "value": value}}


def _response(index: NetLogIndex, events: list[dict], lines: list[str], protocol: str, url: str) -> dict:
    """BiDi's response of a request's header lines and body events."""
    status_line = lines[0].split(" ", 2) if lines else []
    headers = [_header(line) for line in lines[1:]]
    if not protocol:  # HTTP/1.x, or an internal redirect's made-up status line
        fake = any(index.name(e) == "URL_REQUEST_FAKE_RESPONSE_HEADERS_CREATED" for e in events)
        protocol = "" if fake or not status_line else status_line[0].lower()
    decoded = _bytes(index, events, "URL_REQUEST_JOB_FILTERED_BYTES_READ")
    raw = _bytes(index, events, "URL_REQUEST_JOB_BYTES_READ")  # logged only when a decoder ran (gzip, br)
    body = raw if raw is not None else decoded or 0
    content_type = next((h["value"]["value"] for h in headers if h["name"].lower() == "content-type"), "")
    return {
        "url": url,
        "protocol": protocol,
        "status": int(status_line[1]) if len(status_line) > 1 and status_line[1].isdigit() else 0,
        "statusText": status_line[2] if len(status_line) > 2 else "",
        "headers": headers,
        "mimeType": content_type.split(";")[0].strip(),
        "bytesReceived": body,  # the body as received; BiDi's counts the header frame's bytes too
        "headersSize": sum(len(h["name"]) + len(h["value"]["value"]) + 4 for h in headers),
        "bodySize": body,
        "content": {"size": decoded or 0},
        "fromCache": False,
    }


def _bytes(index: NetLogIndex, events: list[dict], name: str) -> int | None:
    counts = [(e.get("params") or {}).get("byte_count", 0) for e in events if index.name(e) == name]
    return sum(counts) if counts else None


def _ended(index: NetLogIndex, events: list[dict]) -> bool:
    """Whether the request (or this redirect of it) is over: redirected, or its life ended."""
    return any(
        index.name(e) == "URL_REQUEST_REDIRECTED" or (index.name(e) == "REQUEST_ALIVE" and e.get("phase") == 2)
        for e in events
    )


def _net_error(index: NetLogIndex, events: list[dict]) -> int | None:
    """The net error the request ended with, if it failed (a redirect's part never does)."""
    for name in ("REQUEST_ALIVE", "URL_REQUEST_START_JOB"):
        error = (_params(index, events, name, 2) or {}).get("net_error")
        if error:
            return int(error)
    return None


def _server_address(index: NetLogIndex, events: list[dict]) -> dict | None:
    """The endpoint the request's transport was connected to, from the local network access check made once it
    was (every request that reached a server has one); None if the log does not say."""
    for event in events:
        if index.name(event) == "LOCAL_NETWORK_ACCESS_CHECK":
            match = _ENDPOINT.search(str((event.get("params") or {}).get("transport_info", "")))
            if match:
                return {"address": match.group(1), "port": int(match.group(2))}
    return None


def _timings(index: NetLogIndex, events: list[dict]) -> dict:
    """BiDi's request timings (epoch ms, 0 = unset) of one request or redirect. Phases of a connection made
    before the request (a preconnect) are clamped to its start, as Chromium's own load timing does."""
    start = next((index.epoch(e) for e in events if index.name(e) == "URL_REQUEST_START_JOB"), None)
    start = start if start is not None else (index.epoch(events[0]) if events else 0.0)
    times = {"requestTime": start, **_connection(index, events)}
    for event in events:
        name, phase = index.name(event), event.get("phase")
        if name == "HTTP_TRANSACTION_SEND_REQUEST" and phase == 1 and "requestStart" not in times:
            times["requestStart"] = index.epoch(event)
        elif name == "HTTP_TRANSACTION_READ_HEADERS" and phase == 2:
            times["responseStart"] = index.epoch(event)
        elif name == "URL_REQUEST_FAKE_RESPONSE_HEADERS_CREATED":
            times["requestStart"] = times["responseStart"] = index.epoch(event)
    if events and _ended(index, events):  # the last body bytes read from the network, else the end
        body = [index.epoch(e) for e in events if index.name(e) == "URL_REQUEST_JOB_FILTERED_BYTES_READ"]
        times["responseEnd"] = body[-1] if body else index.epoch(events[-1])
    return {k: max(v, start) if k != "requestTime" and v else v for k, v in times.items()}


def _connection(index: NetLogIndex, events: list[dict]) -> dict:
    """DNS, connect and TLS times of the connection made for the request: the socket of the connect job bound to
    the request's stream job, and the first host resolution of the jobs its stream request started. {} when the
    request went on an open connection (an HTTP/2 session, a kept-alive socket) or over QUIC."""
    job = _dependency(index, events, "HTTP_STREAM_REQUEST_BOUND_TO_JOB")
    job_events = index.sources.get(job, []) if job is not None else []
    connect_job = _dependency(index, job_events, "SOCKET_POOL_BOUND_TO_CONNECT_JOB")
    socket = _dependency(index, job_events, "SOCKET_POOL_BOUND_TO_SOCKET")
    if connect_job is None or socket is None:
        return {}
    times: dict[str, float] = {}
    for event in index.sources.get(socket, []):
        name, phase, at = index.name(event), event.get("phase"), index.epoch(event)
        if name == "TCP_CONNECT" and phase == 1:
            times["connectStart"] = at
        elif name in ("TCP_CONNECT", "SSL_CONNECT") and phase == 2:
            times["connectEnd"] = at  # HAR's connect includes TLS
        if name == "SSL_CONNECT":
            times["tlsStart" if phase == 1 else "tlsEnd"] = at
    controller = _dependency(index, events, "HTTP_STREAM_JOB_CONTROLLER_BOUND")
    resolution = _resolution(index, [connect_job, *_started_jobs(index, controller)])
    # Only a lookup before the connection is its own: a preconnected socket's came before the request's jobs
    if resolution is not None and resolution[0] <= times.get("connectStart", resolution[0]):
        times["dnsStart"], times["dnsEnd"] = resolution
    return times


def _dependency(index: NetLogIndex, events: list[dict], name: str) -> int | None:
    """The source an event ``name`` among ``events`` points to (its `source_dependency`)."""
    for event in events:
        if index.name(event) == name:
            dependency = (event.get("params") or {}).get("source_dependency") or {}
            return int(dependency["id"]) if "id" in dependency else None
    return None


def _started_jobs(index: NetLogIndex, controller: int | None) -> list[int]:
    """The stream jobs a job controller started (TCP and QUIC racing), and the QUIC session pool jobs of these."""
    jobs: list[int] = []
    for event in index.sources.get(controller, []) if controller is not None else []:
        if index.name(event) == "HTTP_STREAM_REQUEST_STARTED_JOB":
            job = int(((event.get("params") or {}).get("source_dependency") or {}).get("id", -1))
            quic = _dependency(index, index.sources.get(job, []), "BOUND_TO_QUIC_SESSION_POOL_JOB")
            jobs += [job] if quic is None else [job, quic]
    return jobs


def _resolution(index: NetLogIndex, sources: list[int]) -> tuple[float, float] | None:
    """The earliest host resolution (begin, end) among ``sources``' events."""
    found: list[tuple[float, float]] = []
    for source in sources:
        begun: float | None = None
        for event in index.sources.get(source, []):
            if index.name(event) == "HOST_RESOLVER_MANAGER_REQUEST":
                if event.get("phase") == 1:
                    begun = index.epoch(event)
                elif event.get("phase") == 2 and begun is not None:
                    found.append((begun, index.epoch(event)))
                    begun = None
    return min(found) if found else None
