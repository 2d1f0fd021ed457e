"""Chromium's HAR from its net log against the HAR from BiDi's network events, on the same lab page, in a fresh
and in a reused browser: all real, in the lab (harness/browser/chromium_netlog_har.py, docs/visit.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.browser.base import SessionPolicy
from harness.browser.chromium_session import ChromiumSession
from harness.browser.har import check_har, read_har
from harness.lab.zones import web_address
from harness.visit import Visitor
from tests.helpers import explain, visit_retrying_harness_failures

pytestmark = pytest.mark.lab

PAGE = "https://google.com/"  # a multi-host page of the synthetic web


def answered(har: dict) -> dict[str, dict]:
    """The HAR's answered entries by URL (the page fetches each URL once)."""
    return {
        e["request"]["url"]: e
        for e in har["log"]["entries"]
        if e["response"]["status"] and "_error" not in e and "_unanswered" not in e
    }


def har_of(lab, tmp_path: Path, monkeypatch, source: str, session: str) -> dict:
    """The HAR of one Do53 visit to the page with ``source`` as Chromium's request source, in a fresh browser or in
    a reused one (its second visit: the net log's part of that visit)."""
    monkeypatch.setattr(ChromiumSession, "network_events", source)
    visitor = Visitor(lab, tmp_path / f"{source}-{session}", session=SessionPolicy(session), browser="chromium")
    try:
        for _ in range(1 if session == "fresh" else 2):
            result = visit_retrying_harness_failures(visitor, PAGE, "do53")
            assert result.error_class == "Successful", explain(result)
    finally:
        visitor.close()
    assert result.har_path is not None
    return read_har(Path(result.har_path))


@pytest.mark.parametrize("session", ["fresh", "reused"])
def test_the_net_log_s_har_answers_the_same_requests_as_bidi_s(lab, tmp_path, monkeypatch, session):
    by_bidi = har_of(lab, tmp_path, monkeypatch, "bidi", session)
    by_netlog = har_of(lab, tmp_path, monkeypatch, "netlog", session)
    assert check_har(by_netlog) is None and check_har(by_bidi) is None
    bidi, netlog = answered(by_bidi), answered(by_netlog)
    print(f"{session}: entries bidi {len(by_bidi['log']['entries'])}, netlog {len(by_netlog['log']['entries'])}")
    assert set(netlog) == set(bidi) and len(netlog) > 20
    assert len(by_netlog["log"]["entries"]) == len(by_bidi["log"]["entries"])  # no request of the browser's own

    def fields(entry: dict) -> tuple:
        response = entry["response"]
        return response["status"], response["httpVersion"], response["content"]["size"], response["headersSize"]

    assert {u: fields(e) for u, e in netlog.items()} == {u: fields(e) for u, e in bidi.items()}
    for url, entry in netlog.items():  # BiDi counts the header frame's bytes in its body size: at most 1 kB more
        assert 0 < bidi[url]["response"]["bodySize"] - entry["response"]["bodySize"] < 1024, url
    # Server addresses: BiDi gives none; the net log each response's, the lab's web servers'
    pool = set(lab.config.addresses.web(lab.config.settings.web_addresses))
    assert {e["serverIPAddress"] for e in netlog.values()} <= pool and "serverIPAddress" not in bidi[PAGE]
    assert netlog[PAGE]["serverIPAddress"] == web_address(lab.config, "google.com")
    assert netlog[PAGE]["connection"] == "443"
    # A fresh browser's visit opens connections: some entries have their DNS and connect times
    assert any(e["timings"]["connect"] > 0 for e in netlog.values())
    assert all(e["timings"]["wait"] >= 0 and e["timings"]["receive"] >= 0 for e in netlog.values())
