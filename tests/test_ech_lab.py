"""Encrypted Client Hello in a real lab (issue 43, item 5): profiles/lab/ech.toml, whose HTTPS records carry the
lab's ECH configuration and whose front (Go's TLS) accepts it over QUIC and TCP. Both browsers reach a `record`
site over HTTP/3 with ECH accepted on every arm (Firefox told to use HTTP/3), and over TCP too; each visit records
it (docs/web.md, "ECH")."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.lab.config import load_lab_config
from harness.lab.ech import config_list, ech_log
from harness.visit import Visitor
from tests.conftest import own_lab
from tests.helpers import wait_for
from tests.test_h3_lab import _browser_dns, _h2_headers
from tests.test_https_records_lab import WAIT_FOR_RECORD, _https_answer, _site_of_kind

pytestmark = pytest.mark.lab

PROFILE = "profiles/lab/ech.toml"


@pytest.fixture(scope="module")
def ech_lab() -> Iterator[object]:
    with own_lab(load_lab_config(PROFILE)) as the_lab:
        yield the_lab


def test_both_resolvers_answer_the_lab_s_ech_configuration(ech_lab):
    published = base64.b64encode(config_list((ech_lab.run_dir / "certs" / "ech.config").read_bytes())).decode()
    site = _site_of_kind(ech_lab, "record")
    for resolver in (0, 1):
        answer = [a.replace('"', "") for a in _https_answer(ech_lab, site, resolver)]
        assert len(answer) == 1 and answer[0].startswith("1 . alpn=h3,h2 ipv4hint=") and f"ech={published}" in answer[0]


@pytest.mark.parametrize("protocol", ["do53", "dot", "doh", "doq", "doh3"])
def test_firefox_over_http3_has_its_ech_accepted_on_every_arm(ech_lab, tmp_path, protocol):
    site = _site_of_kind(ech_lab, "record")
    window = ech_log(ech_lab.run_dir).stat().st_size
    prefs = _browser_dns(tmp_path, WAIT_FOR_RECORD)
    visitor = Visitor(ech_lab, tmp_path, timeout=30.0, margin=10.0, browser_dns=prefs, page_http3=True)
    result = visitor.visit_once(f"https://{site}/", protocol, "near")
    assert result.error_class == "Successful" and result.first_h3, result
    host = next(h for h in result.https_hosts or [] if h["host"] == site)
    assert host["used"] and host["ech"] is True and result.ech_accepted and result.ech_accepted >= 1, host
    lines = _ech_lines(ech_lab, window)
    assert any(line.split(" ")[2:] == [site, "ech=1", "quic"] for line in lines), lines  # the inner name, decrypted


@pytest.mark.parametrize("protocol", ["do53", "dot", "doh", "doq", "doh3"])
def test_chromium_over_http3_has_its_ech_accepted_on_every_arm(ech_lab, tmp_path, protocol):
    """Chromium, the lab CA allowed over QUIC for the announced hosts (automatic), reaches the `record` site over
    HTTP/3 with the record's ECH accepted. It waits for the HTTPS answer only a bounded time beside the addresses
    (tests/test_https_records_lab.py), so one of two visits must start on HTTP/3."""
    site = _site_of_kind(ech_lab, "record")
    for attempt in range(2):
        window = ech_log(ech_lab.run_dir).stat().st_size
        result = _visit(ech_lab, tmp_path / str(attempt), site, protocol, "chromium", page_http3=True)
        host = next(h for h in result.https_hosts or [] if h["host"] == site)
        if host["first_version"] == "h3":
            break
    assert host["used"] and host["ech"] is True and result.ech_accepted, host
    lines = _ech_lines(ech_lab, window)
    assert any(line.split(" ")[2:] == [site, "ech=1", "quic"] for line in lines), lines


def test_over_tcp_the_front_answers_as_nginx_does_for_every_kind_of_site(ech_lab):
    """The front holds TCP 443 of the web addresses (nginx cannot decrypt ECH): it speaks HTTP/2 with nginx's
    answers, and only a site that announces HTTP/3 says so (a `none` site's server block adds no Alt-Svc)."""
    for kind, announces in (("record", True), ("alt_svc", True), ("none", False)):
        site = _site_of_kind(ech_lab, kind)
        headers, size = _h2_headers(ech_lab, f"https://{site}/")
        assert headers["server"] == "nginx" and headers["cache-control"] == "no-store" and size > 0, headers
        assert ("alt-svc" in headers) == announces, (kind, headers)
    missing, _ = _h2_headers(ech_lab, f"https://{_site_of_kind(ech_lab, 'none')}/no-such-file", status=404)
    assert missing["server"] == "nginx", missing  # passed on to nginx, whose 404 it is
    log = ech_lab.run_dir / "logs" / "h3front-access.log"  # flushed each second
    wait_for(lambda: f"{site} HTTP/2.0" in log.read_text(), timeout=5, what="the front's access log")


@pytest.mark.parametrize("browser", ["firefox", "chromium"])
@pytest.mark.parametrize("protocol", ["do53", "dot", "doh", "doq", "doh3"])
def test_over_tcp_both_browsers_have_their_ech_accepted_on_every_arm(ech_lab, tmp_path: Path, browser, protocol):
    """With the study's own settings (`page_http3` false: HTTP/2 over TCP) each browser takes the `record`
    site's ECH configuration from the HTTPS record the arm delivered and the front accepts it over TCP: the inner
    name decrypted, HTTP/2, and the visit records it. Firefox's DoH3 arm is the exception the browser makes:
    DNS over HTTP/3 needs `network.http.http3.enable`, which turns HTTP/3 on for the page too (docs/web.md).
    Each visit records whether its page could use HTTP/3."""
    site = _site_of_kind(ech_lab, "record")
    window = ech_log(ech_lab.run_dir).stat().st_size
    result = _visit(ech_lab, tmp_path, site, protocol, browser)
    host = next(h for h in result.https_hosts or [] if h["host"] == site)
    http3_on = browser == "firefox" and protocol == "doh3"
    assert result.page_http3 == http3_on, result
    assert host["answered"] and host["first_version"] == ("h3" if http3_on else "h2") and host["ech"] is True, host
    assert result.ech_accepted and result.ech_accepted >= 1, result
    lines = _ech_lines(ech_lab, window)
    transport = "quic" if http3_on else "tcp"
    assert any(line.split(" ")[2:] == [site, "ech=1", transport] for line in lines), lines


def _visit(lab, results: Path, site: str, protocol: str, browser: str, page_http3: bool = False):
    """One Successful visit of the site's page through the near resolver."""
    visitor = Visitor(lab, results, timeout=30.0, margin=10.0, browser=browser, page_http3=page_http3)
    try:
        result = visitor.visit_once(f"https://{site}/", protocol, "near")
    finally:
        visitor.close()
    assert result.error_class == "Successful", result
    return result


def _ech_lines(lab, window: int) -> list[str]:
    """The front's connection log (h3front/ech.go) from byte ``window`` on."""
    with ech_log(lab.run_dir).open() as log:
        log.seek(window)
        return log.read().splitlines()
