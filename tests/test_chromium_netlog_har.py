"""Chromium's requests from its net log (harness/browser/chromium_netlog_har.py): fast, on a trimmed net log of a
lab visit to google.com (tests/data/chromium-netlog-page.json: the navigation, a request on its HTTP/2 session,
one on a new connection, and three of the browser's own requests) and on small made-up logs in Chromium's event
names for what the lab page has not: redirects, failures, HTTP/1.1, compressed bodies, open requests."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from harness.browser.chromium_netlog import load_netlog
from harness.browser.chromium_netlog_har import (
    FLUSH_URL,
    NAVIGATION,
    PAGE_ANNOTATIONS,
    annotation_hash,
    page_requests,
)
from harness.browser.chromium_session import navigation_error
from harness.browser.har import PageInfo, build_har, check_har

EXCERPT = Path(__file__).parent / "data" / "chromium-netlog-page.json"
PAGE = "https://google.com/"
ON_HTTP2_SESSION = "https://google.com/o/js/2896.js?s=google.com&i=0"
NEW_CONNECTION = "https://cdn.alibaba.com/o/js/5793.js?s=google.com&i=5"
BLINK = annotation_hash("blink_resource_loader")


@pytest.fixture(scope="module")
def excerpt() -> dict:
    data = load_netlog(EXCERPT)
    assert data is not None
    return data


def by_url(events: list[dict], method: str) -> dict[str, dict]:
    return {e["params"]["request"]["url"]: e["params"] for e in events if e["method"] == method}


def test_the_annotation_hash_is_chromium_s_and_names_the_page_s_requests_in_the_log(excerpt):
    annotations = {
        e["params"]["traffic_annotation"]
        for e in excerpt["events"]
        if e["type"] == excerpt["constants"]["logEventTypes"]["REQUEST_ALIVE"] and e["phase"] == 1
    }
    assert PAGE_ANNOTATIONS <= annotations and len(annotations) > len(PAGE_ANNOTATIONS)  # the browser's own too
    assert annotation_hash("favicon_loader") in annotations  # the favicon: BiDi does not report it either
    assert NAVIGATION == 63171670 and BLINK == 101845102


def test_only_the_page_s_requests_are_taken_with_what_bidi_gives(excerpt):
    found = page_requests(excerpt)
    completed = by_url(found.events, "network.responseCompleted")
    # Sign-in checks, the time and update services and the favicon are in the log, but not the page's
    assert set(completed) == {PAGE, ON_HTTP2_SESSION, NEW_CONNECTION} and found.open == 0
    assert not [e for e in found.events if e["method"] == "network.fetchError"]
    main = completed[PAGE]
    assert main["navigation"] and main["redirectCount"] == 0 and main["request"]["method"] == "GET"
    response = main["response"]
    assert (response["status"], response["protocol"], response["mimeType"]) == (200, "h2", "text/html")
    # The same figures as BiDi's for this visit: the decoded body and the header block's size
    assert response["content"]["size"] == 4215 and response["headersSize"] == 215
    assert {"name": "content-length", "value": {"type": "string", "value": "4215"}} in response["headers"]
    assert any(h["name"] == "user-agent" for h in main["request"]["headers"])
    assert not any(h["name"].startswith(":") for h in main["request"]["headers"])  # HTTP/2 pseudo-headers
    assert found.server_addresses[0] == {"url": PAGE, "address": "198.18.97.102", "port": 443}
    assert {a["url"]: a["address"] for a in found.server_addresses}[NEW_CONNECTION] == "198.18.97.123"


def test_connection_phases_only_for_a_connection_made_for_the_request(excerpt):
    completed = by_url(page_requests(excerpt).events, "network.responseCompleted")
    new = completed[NEW_CONNECTION]["request"]["timings"]
    # BiDi said dns 92.4 ms, connect 250 ms for this request: the log's times are whole milliseconds
    assert new["dnsEnd"] - new["dnsStart"] == 93 and new["connectEnd"] - new["connectStart"] == 250
    assert new["requestTime"] <= new["dnsStart"] <= new["connectStart"] <= new["requestStart"] <= new["responseEnd"]
    reused = completed[ON_HTTP2_SESSION]["request"]["timings"]
    assert not {"dnsStart", "connectStart", "tlsStart"} & reused.keys() and reused["responseStart"] > 0
    # The navigation's socket was preconnected: clamped to the request's start, and its lookup is not counted
    main = completed[PAGE]["request"]["timings"]
    assert main["connectStart"] == main["requestTime"] and "dnsStart" not in main


def test_the_net_log_s_events_make_a_har_haralyzer_reads():
    data = load_netlog(EXCERPT)
    found = page_requests(data)
    page = PageInfo(url=PAGE, title="google", on_load_ms=580.0, server_addresses=found.server_addresses)
    har = build_har(found.events, page, ("Chromium", "156"), "test")
    assert check_har(har) is None
    entries = {e["request"]["url"]: e for e in har["log"]["entries"]}
    assert len(entries) == 3 and entries[PAGE]["serverIPAddress"] == "198.18.97.102"
    assert entries[PAGE]["response"]["httpVersion"] == "HTTP/2" and entries[PAGE]["connection"] == "443"
    timings = entries[NEW_CONNECTION]["timings"]
    assert timings["dns"] == 93 and timings["connect"] == 250 and timings["wait"] >= 0 and timings["blocked"] >= 0


# -- made-up logs in Chromium's event names ------------------------------------------------------------


class Log:
    """A net log in the excerpt's constants, its events added one by one."""

    def __init__(self) -> None:
        data = json.loads(EXCERPT.read_text())
        self.constants = copy.deepcopy(data["constants"])
        self.types = self.constants["logEventTypes"]
        self.events: list[dict] = []
        self.time = 1000

    def add(self, source: int, name: str, phase: int = 0, **params) -> Log:
        self.time += 1
        self.events.append(
            {
                "source": {"id": source, "type": 1},
                "type": self.types[name],
                "phase": phase,
                "time": str(self.time),
                "params": params,
            }
        )
        return self

    def request(self, source: int, url: str, annotation: int = BLINK, request_type: str = "other") -> Log:
        self.add(source, "REQUEST_ALIVE", 1, traffic_annotation=annotation, url=url)
        return self.add(source, "URL_REQUEST_START_JOB", 1, url=url, method="GET", request_type=request_type)

    def answer(self, source: int, status_line: str, *headers: str, body: int = 0, sent: str = "") -> Log:
        self.add(source, "HTTP_TRANSACTION_SEND_REQUEST", 1)
        self.add(source, sent or "HTTP_TRANSACTION_HTTP2_SEND_REQUEST_HEADERS", headers=[":method: GET", "accept: */*"])
        self.add(source, "HTTP_TRANSACTION_SEND_REQUEST", 2)
        self.add(source, "HTTP_TRANSACTION_READ_HEADERS", 1)
        self.add(source, "HTTP_TRANSACTION_READ_RESPONSE_HEADERS", headers=[status_line, *headers])
        self.add(source, "HTTP_TRANSACTION_READ_HEADERS", 2)
        if body:
            self.add(source, "URL_REQUEST_JOB_FILTERED_BYTES_READ", byte_count=body)
        return self

    def data(self) -> dict:
        return {"constants": self.constants, "events": self.events}


def test_a_redirect_is_an_entry_of_its_own_with_the_next_redirect_count():
    log = Log().request(7, "https://a.lab.test/", NAVIGATION, "main frame")
    log.answer(7, "HTTP/1.1 301", "location: https://b.lab.test/").add(7, "URL_REQUEST_START_JOB", 2)
    log.add(7, "URL_REQUEST_REDIRECTED", location="https://b.lab.test/")
    log.add(7, "URL_REQUEST_START_JOB", 1, url="https://b.lab.test/", method="GET", request_type="main frame")
    log.answer(7, "HTTP/1.1 200", "content-type: text/html; charset=utf-8", body=10).add(7, "REQUEST_ALIVE", 2)
    found = page_requests(log.data())
    responses = [e["params"] for e in found.events if e["method"] == "network.responseCompleted"]
    assert [(r["request"]["url"], r["redirectCount"], r["response"]["status"]) for r in responses] == [
        ("https://a.lab.test/", 0, 301),
        ("https://b.lab.test/", 1, 200),
    ]
    assert responses[1]["response"]["mimeType"] == "text/html" and responses[1]["response"]["content"]["size"] == 10
    har = build_har(found.events, PageInfo(url="https://a.lab.test/", on_load_ms=5.0), ("Chromium", "156"), "t")
    assert [e["response"]["status"] for e in har["log"]["entries"]] == [301, 200] and check_har(har) is None


def test_a_failed_navigation_is_a_fetch_error_with_its_net_error():
    log = Log().request(3, "https://nowhere.lab.test/", NAVIGATION, "main frame")
    log.add(3, "URL_REQUEST_START_JOB", 2, net_error=-105).add(3, "REQUEST_ALIVE", 2, net_error=-105)
    found = page_requests(log.data())
    assert [e["method"] for e in found.events] == ["network.beforeRequestSent", "network.fetchError"]
    assert navigation_error(found.events) == "net::ERR_NAME_NOT_RESOLVED" and found.server_addresses == []
    har = build_har(found.events, PageInfo(url="https://nowhere.lab.test/"), ("Chromium", "156"), "t")
    assert har["log"]["entries"][0]["_error"] == "net::ERR_NAME_NOT_RESOLVED"


def test_http_1_1_compressed_bodies_open_requests_and_requests_before_the_navigation():
    log = Log().request(2, "https://warm.lab.test/")  # the warm-up lookup's fetch, before the visit's navigation
    log.add(2, "REQUEST_ALIVE", 2, net_error=-105)
    log.request(5, "http://plain.lab.test/", NAVIGATION, "main frame")
    log.answer(5, "HTTP/1.1 200 OK", "content-encoding: gzip", body=900, sent="HTTP_TRANSACTION_SEND_REQUEST_HEADERS")
    log.add(5, "URL_REQUEST_JOB_BYTES_READ", byte_count=300).add(5, "REQUEST_ALIVE", 2)
    log.request(6, "https://slow.lab.test/big.js").answer(6, "HTTP/1.1 200", body=100)  # its end not yet written
    found = page_requests(log.data())
    started = by_url(found.events, "network.beforeRequestSent")
    assert set(started) == {"http://plain.lab.test/", "https://slow.lab.test/big.js"} and found.open == 1
    plain = by_url(found.events, "network.responseCompleted")["http://plain.lab.test/"]["response"]
    assert (plain["protocol"], plain["statusText"], plain["bodySize"], plain["content"]["size"]) == (
        "http/1.1", "OK", 300, 900)  # fmt: skip
    assert "https://slow.lab.test/big.js" in by_url(found.events, "network.responseStarted")
    har = build_har(found.events, PageInfo(url="http://plain.lab.test/", on_load_ms=9.0), ("Chromium", "156"), "t")
    assert [e.get("_unanswered") for e in har["log"]["entries"]] == [None, None]  # started: answered, not ended


def test_the_harness_s_flush_fetch_after_the_page_is_no_request_of_the_page():
    log = Log().request(5, "https://a.lab.test/", NAVIGATION, "main frame")
    log.answer(5, "HTTP/1.1 200", body=10).add(5, "REQUEST_ALIVE", 2)
    log.request(9, FLUSH_URL, BLINK, "other")  # the first tab's fetch, to have the running browser write
    log.add(9, "URL_REQUEST_START_JOB", 2, net_error=-102).add(9, "REQUEST_ALIVE", 2, net_error=-102)
    found = page_requests(log.data())
    assert set(by_url(found.events, "network.beforeRequestSent")) == {"https://a.lab.test/"} and not found.open


def test_no_log_no_request():
    assert page_requests(None).events == [] and page_requests({"constants": {}, "events": []}).open == 0
