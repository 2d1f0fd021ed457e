"""A visit's record of today's web: HTTP versions per request, HTTPS records asked, answered and used."""

from __future__ import annotations

import pytest

from harness.https_use import http_version, https_use_record
from harness.lab.querylog import Reply, log_sizes, page_replies
from harness.lab.zones import https_record_owners


def _entry(url: str, version: str, started: str) -> dict:
    return {
        "startedDateTime": started,
        "request": {"url": url, "httpVersion": version},
        "response": {"httpVersion": version, "status": 200},
    }


def _har(*entries: dict) -> dict:
    return {"log": {"entries": list(entries)}}


PAGE = "https://www.a.test/"
HAR = _har(
    # Out of order on purpose: the HAR's order is not always the order sent.
    _entry("https://img.b.test/x.png", "HTTP/2.0", "2026-11-28T10:00:00.300Z"),
    _entry("https://www.a.test/", "h3", "2026-11-28T10:00:00.000Z"),
    _entry("https://img.b.test/y.png", "h3", "2026-11-28T10:00:00.900Z"),
    _entry("https://cdn.c.test/s.js", "http/2+quic/46", "2026-11-28T10:00:00.200Z"),
    _entry("https://198.18.0.9/literal", "HTTP/1.1", "2026-11-28T10:00:00.400Z"),
    _entry("data:image/png;base64,AAAA", "", "2026-11-28T10:00:00.500Z"),
    _entry("https://plain.d.test/", "HTTP/1.1", "2026-11-28T10:00:00.600Z"),
)


@pytest.mark.parametrize(
    ("spelled", "alpn"),
    [("h3", "h3"), ("h3-29", "h3"), ("HTTP/3", "h3"), ("h2", "h2"), ("HTTP/2.0", "h2"), ("http/1.1", "http/1.1")]
    + [("HTTP/1.0", "http/1.0"), ("", ""), ("unknown", ""), ("gopher/1", ""), (None, "")],
)
def test_every_spelling_of_a_version_is_read_as_alpn_names_it(spelled, alpn):
    assert http_version(spelled) == alpn


def test_requests_are_counted_per_version_and_the_document_is_the_page_hosts_first_request():
    record = https_use_record(HAR, PAGE, None, None)
    # The literal address is a request too, counted by version, but no page host.
    assert record["http_versions"] == {"h2": 1, "h3": 3, "http/1.1": 2}
    assert record["first_h3"] is True
    assert record["page_hosts"] == 4
    # No resolver log at the place: nothing said about HTTPS records, not zero.
    assert record["https_asked"] is None and record["https_hosts"] is None


def test_a_page_whose_document_went_over_http2_is_not_first_h3():
    har = _har(_entry(PAGE, "h2", "2026-11-28T10:00:00.000Z"), _entry(PAGE + "x", "h3", "2026-11-28T10:00:01Z"))
    assert https_use_record(har, PAGE, [], frozenset())["first_h3"] is False
    assert https_use_record(har, "https://elsewhere.test/", [], frozenset())["first_h3"] is None


def test_asked_answered_and_used_per_page_host():
    replies = [
        Reply("www.a.test", "A", "NOERROR"),
        Reply("www.a.test", "HTTPS", "NOERROR"),
        Reply("img.b.test", "HTTPS", "NOERROR"),  # published, answered, but its first request went over h2
        Reply("cdn.c.test", "HTTPS", "SERVFAIL"),  # asked, not answered
        Reply("plain.d.test", "HTTPS", "NOERROR"),  # answered with no record: the zone publishes none
        Reply("other.e.test", "HTTPS", "NOERROR"),  # not a page host of this visit
    ]
    owners = frozenset({"www.a.test", "img.b.test", "cdn.c.test"})
    record = https_use_record(HAR, PAGE, replies, owners)
    assert (record["https_asked"], record["https_answered"], record["https_used"]) == (4, 2, 1)
    hosts = {h["host"]: h for h in record["https_hosts"]}
    assert list(hosts) == ["www.a.test", "cdn.c.test", "img.b.test", "plain.d.test"]  # in the order first sent
    assert hosts["www.a.test"] == {
        "host": "www.a.test",
        "published": True,
        "asked": True,
        "rcodes": ["NOERROR"],
        "answered": True,
        "first_version": "h3",
        "used": True,
    }
    assert hosts["img.b.test"]["answered"] and not hosts["img.b.test"]["used"]
    assert hosts["cdn.c.test"]["asked"] and not hosts["cdn.c.test"]["answered"]
    assert not hosts["plain.d.test"]["published"] and not hosts["plain.d.test"]["answered"]


def test_a_page_host_never_asked_is_not_asked_even_if_it_reached_http3():
    record = https_use_record(HAR, PAGE, [Reply("www.a.test", "A", "NOERROR")], frozenset({"www.a.test"}))
    assert record["https_asked"] == 0 and record["https_used"] == 0


def test_no_har_records_nothing():
    record = https_use_record(None, PAGE, [], frozenset())
    assert all(record[k] is None for k in ("http_versions", "first_h3", "page_hosts", "https_asked", "https_hosts"))


def test_the_resolvers_replies_of_a_window_keep_https_queries_in_either_spelling(tmp_path):
    log = tmp_path / "resolver-near.log"
    log.write_text("[1000] unbound[7:0] info: 198.18.0.2 www.a.test. HTTPS IN NOERROR 0.000000 0 90\n")
    opened = log_sizes([log])
    with log.open("a") as f:
        f.write(
            "[1001] unbound[7:0] info: 198.18.0.2 WWW.a.test. TYPE65 IN NOERROR 0.000000 0 90\n"
            "[1001] unbound[7:0] info: 198.18.0.2 www.lab.test. HTTPS IN NOERROR 0.000000 0 90\n"
            "[1001] unbound[7:0] info: 198.18.0.2 b.test. NS IN NOERROR 0.000000 0 90\n"
            "[1001] unbound[7:0] info: 198.18.0.2 c.test. HTTPS IN SERVFAIL 0.000000 0 40\n"
        )
    assert page_replies(opened) == [Reply("www.a.test", "HTTPS", "NOERROR"), Reply("c.test", "HTTPS", "SERVFAIL")]


def test_the_owners_of_https_records_are_read_from_the_root_zone_in_either_form():
    zone = (
        "$TTL 300\n. IN SOA auth.dns.lab.test. hostmaster.lab.test. 1 3600 600 86400 300\n"
        "www.a.test. IN A 198.18.2.1\n"
        'www.a.test. IN HTTPS 1 . alpn="h3,h2" ipv4hint=198.18.2.1\n'
        "Img.B.test. 300 IN HTTPS 1 . alpn=h2\n"
        'https.c.test. IN TXT "HTTPS"\n'
        "\n"
    )
    assert https_record_owners(zone) == frozenset({"www.a.test", "img.b.test"})
