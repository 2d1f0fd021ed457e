"""Encrypted Client Hello in a real lab (issue 43, item 5): profiles/lab/ech.toml, whose HTTPS records carry the
lab's ECH configuration and whose HTTP/3 front accepts it. Firefox told to use HTTP/3 reaches a `record` site over
HTTP/3 with ECH accepted on every arm, and the visit records it; over TCP, where nginx cannot do ECH, both
browsers' ECH is rejected under the public name and they retry without it, so the page still loads (docs/web.md,
"ECH")."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from harness.lab.config import load_lab_config
from harness.lab.ech import config_list, ech_log
from harness.visit import Visitor
from tests.conftest import own_lab
from tests.test_h3_lab import _browser_dns
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
    visitor = Visitor(ech_lab, tmp_path, timeout=30.0, margin=10.0, browser_dns=_browser_dns(tmp_path, WAIT_FOR_RECORD))
    result = visitor.visit_once(f"https://{site}/", protocol, "near")
    assert result.error_class == "Successful" and result.first_h3, result
    host = next(h for h in result.https_hosts or [] if h["host"] == site)
    assert host["used"] and host["ech"] is True and result.ech_accepted and result.ech_accepted >= 1, host
    with ech_log(ech_lab.run_dir).open() as log:
        log.seek(window)
        lines = log.read().splitlines()
    assert any(line.split(" ")[2:] == [site, "ech=1"] for line in lines), lines  # the inner name, decrypted


@pytest.mark.parametrize("browser", ["firefox", "chromium"])
def test_over_tcp_the_rejected_ech_is_retried_without_it(ech_lab, tmp_path: Path, browser, monkeypatch):
    """nginx cannot decrypt ECH: each browser's ECH over TCP is rejected under the public name, whose certificate
    every web address serves, and the browser retries without it; the front never sees the page (no HTTP/3).
    Chromium is kept on TCP by a client side naming no hosts for the lab CA over QUIC (docs/web.md, "It is
    automatic"); Firefox's study preferences have HTTP/3 off."""
    own = ech_lab.client_side
    monkeypatch.setattr(ech_lab, "client_side", lambda: replace(own(), quic_ca_hosts=()))
    site = _site_of_kind(ech_lab, "record")
    visitor = Visitor(ech_lab, tmp_path, timeout=30.0, margin=10.0, browser=browser)
    try:
        result = visitor.visit_once(f"https://{site}/", "do53", "near")
    finally:
        visitor.close()
    assert result.error_class == "Successful", result
    assert set(result.http_versions or {}) == {"h2"} and result.ech_accepted == 0, result
