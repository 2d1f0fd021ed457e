"""HTTPS records in a real lab (issue 43, items 2 and 3): profiles/lab/https-records.toml, its resolvers answering
each site's record, and Firefox told to use HTTP/3 making its first connection to a site with an `alpn=h3` record
over HTTP/3 on every arm, to an Alt-Svc-only site over HTTP/2 first, and never to a site with neither; each
visit's record saying which host's record was asked, answered and used."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import dns.exception
import dns.message
import dns.query
import dns.rdatatype
import pytest

from harness import netns
from harness.lab import faults
from harness.lab.config import load_lab_config
from harness.lab.svcb import load_shares, site_kinds
from harness.lab.zones import web_address
from harness.visit import Visitor
from harness.visit_record import VisitResult
from tests.conftest import own_lab
from tests.test_h3_lab import _browser_dns, _entries

pytestmark = pytest.mark.lab

PROFILE = "profiles/lab/https-records.toml"
#: Firefox races a connection to an HTTPS record's HTTP/3 against one over HTTP/2 started this many ms later
#: (default 50). Without this the doh arm's first request went over HTTP/2 once (2026-11-28, a 2-core machine at
#: load 19; its later requests over HTTP/3): likely the QUIC handshake losing that race. The test gives HTTP/3 two
#: seconds: it asks whether the record leads Firefox to HTTP/3 first, not how fast the handshake is.
FALLBACK = {"network.dns.httpssvc.http3_fast_fallback_timeout": "2000"}
#: Firefox asks a host's HTTPS record beside its addresses and does not wait for it: a connection the addresses
#: let start before the record arrives goes over HTTP/2 (nsHttpTransaction::Init waits only when
#: network.dns.force_use_https_rr is true; default false). The clean-clone CI saw it once on the doq arm
#: (2026-11-28, first request HTTP/2, the later ones HTTP/3): the stub's HTTPS answer behind its A answer. A study
#: records that race as it falls (answered, not used); the tests that ask whether an arriving record leads to
#: HTTP/3 first make Firefox wait for it.
WAIT_FOR_RECORD = FALLBACK | {"network.dns.force_use_https_rr": "true"}
CANDIDATES = ["google.com", "facebook.com", "microsoft.com", "apple.com", "pinterest.com", "taobao.com", "adobe.com"]


@pytest.fixture(scope="module")
def records_lab() -> Iterator[object]:
    with own_lab(load_lab_config(PROFILE)) as the_lab:
        yield the_lab


def _site_of_kind(lab, kind: str) -> str:
    web = lab.config.settings.web
    kinds = site_kinds(web.seed, CANDIDATES, load_shares(web.https_records))
    return next(site for site in CANDIDATES if kinds[site] == kind)


def _https_answer(lab, name: str, resolver: int) -> list[str]:
    query = dns.message.make_query(name, dns.rdatatype.HTTPS)
    with netns.entered(lab.namespaces["client"]):
        reply, _ = dns.query.udp_with_fallback(query, lab.config.addresses.resolver(resolver), timeout=5)
    return [r.to_text() for rrset in reply.answer if rrset.rdtype == dns.rdatatype.HTTPS for r in rrset]


def test_both_resolvers_answer_a_record_site_s_https_record_and_nothing_for_the_others(records_lab):
    site = _site_of_kind(records_lab, "record")
    for resolver in (0, 1):  # near answers from memory, far asks the authoritative
        answer = [a.replace('"', "") for a in _https_answer(records_lab, site, resolver)]
        assert len(answer) == 1 and answer[0].startswith("1 . alpn=h3,h2 ipv4hint="), answer
        assert answer[0].endswith(f"ipv4hint={web_address(records_lab.config, site)}"), answer
        for kind in ("alt_svc", "none"):
            assert _https_answer(records_lab, _site_of_kind(records_lab, kind), resolver) == []


def _first_versions(
    lab, tmp_path: Path, site: str, protocol: str, resolver: str = "near", prefs: dict[str, str] = FALLBACK
) -> tuple[list[str], dict[str, str], dict]:
    """The HTTP version of each of the site's own requests in order, its first answer's headers, and what the
    visit's record says of the site's host (harness/https_use.py)."""
    visitor = Visitor(
        lab, tmp_path / site, timeout=30.0, margin=10.0, browser_dns=_browser_dns(tmp_path, prefs), page_http3=True
    )
    result = visitor.visit_once(f"https://{site}/", protocol, resolver)
    assert result.error_class == "Successful", result
    own = [e for e in _entries(result.har_path) if e["request"]["url"].split("/")[2] == site]
    headers = {h["name"].lower(): h["value"] for h in own[0]["response"]["headers"]}
    assert result.https_hosts is not None and result.page_hosts == len(result.https_hosts), result
    host = next(h for h in result.https_hosts if h["host"] == site)
    assert result.first_h3 == (host["first_version"] == "h3"), result  # the page's document is the site's host
    seen = {"first_h3": result.first_h3, "faults": result.faults, "on_load_ms": result.on_load_ms}
    return [e["response"]["httpVersion"] for e in own], headers, host | seen


@pytest.mark.parametrize("protocol", ["do53", "dot", "doh", "doq", "doh3"])
def test_firefox_s_first_connection_to_a_site_with_an_h3_record_is_http3(records_lab, tmp_path, protocol):
    """On every arm (its proof holding: the HTTPS queries took the arm's transport, as every other query), the
    record is asked, answered and used: the page's first request goes over HTTP/3, and the record says so."""
    site = _site_of_kind(records_lab, "record")
    versions, _, host = _first_versions(records_lab, tmp_path, site, protocol, prefs=WAIT_FOR_RECORD)
    assert versions[0] == "HTTP/3", (versions, host)
    assert host["first_h3"] and host["published"] and host["asked"] and host["answered"] and host["used"], host


def test_an_alt_svc_only_site_starts_on_http2_and_one_with_neither_stays_there(records_lab, tmp_path):
    """Firefox asks each site's HTTPS record; none is answered, and the record says the first connection was
    HTTP/2."""
    versions, headers, host = _first_versions(records_lab, tmp_path, _site_of_kind(records_lab, "alt_svc"), "doh")
    assert versions[0] == "HTTP/2" and "alt-svc" in headers, versions
    assert host["asked"] and not host["answered"] and host["first_version"] == "h2" and not host["first_h3"], host
    versions, headers, host = _first_versions(records_lab, tmp_path, _site_of_kind(records_lab, "none"), "doh")
    assert set(versions) == {"HTTP/2"} and "alt-svc" not in headers, versions
    assert host["asked"] and not host["published"] and not host["used"], host


@pytest.fixture
def https_answers_lost(records_lab) -> Iterator[None]:
    """The near resolver's answers to HTTPS queries over Do53 lost on the path (cleared when the test ends)."""
    faults.apply(records_lab, faults.parse_fault("drop-https:do53", "near"))
    yield
    faults.clear(records_lab)
    assert records_lab.status().healthy


def test_a_lost_https_answer_changes_only_that(records_lab, tmp_path, https_answers_lost):
    """With HTTPS answers over Do53 lost on the path, the resolver still answers (its log) and A queries still
    pass, but the record never reaches the client: Firefox's first request to a `record` site goes over HTTP/2,
    and the record says the answer went out and was not used. The same page over DoH, whose queries the path
    cannot read, still reaches HTTP/3 first."""
    site = _site_of_kind(records_lab, "record")
    with pytest.raises(dns.exception.Timeout):
        _https_answer(records_lab, site, 0)
    assert _https_answer(records_lab, site, 1) != []  # the far resolver: the fault is the near one's
    (tmp_path / "do53").mkdir()
    (tmp_path / "doh").mkdir()
    versions, _, host = _first_versions(records_lab, tmp_path / "do53", site, "do53")
    assert versions[0] == "HTTP/2", versions
    assert host["asked"] and host["answered"] and not host["used"] and not host["first_h3"], host
    assert host["faults"] == ["drop-https:do53"], host
    versions, _, host = _first_versions(records_lab, tmp_path / "doh", site, "doh", prefs=WAIT_FOR_RECORD)
    assert versions[0] == "HTTP/3" and host["used"] and host["faults"] == [], (versions, host)


def test_chromium_loses_the_https_answer_and_only_that(records_lab, tmp_path, https_answers_lost):
    """Chromium too: with the HTTPS answers over Do53 lost on the path, the page loads, its first request to the
    `record` site over HTTP/2 with the answer sent and not used, and the visit names the fault."""
    site = _site_of_kind(records_lab, "record")
    result = _chromium_visit(records_lab, tmp_path, site, "do53")
    assert result.error_class == "Successful" and result.faults == ["drop-https:do53"], result
    host = next(h for h in result.https_hosts or [] if h["host"] == site)
    assert host["asked"] and host["answered"] and not host["used"] and host["first_version"] == "h2", host


def test_chromium_starts_an_alt_svc_only_site_on_http2_and_goes_to_http3_after(records_lab, tmp_path):
    """No record: Chromium's first request to an `alt_svc` site goes over HTTP/2, whose answer announces HTTP/3,
    and later requests to that host go over HTTP/3 (Chromium allowed the lab CA over QUIC)."""
    site = _site_of_kind(records_lab, "alt_svc")
    result = _chromium_visit(records_lab, tmp_path, site, "doh")
    assert result.error_class == "Successful", result
    host = next(h for h in result.https_hosts or [] if h["host"] == site)
    assert host["asked"] and not host["answered"] and host["first_version"] == "h2" and not host["used"], host
    own = [e["response"]["httpVersion"] for e in _entries(result.har_path) if e["request"]["url"].split("/")[2] == site]
    assert own[0] == "HTTP/2" and "HTTP/3" in own[1:], own


@pytest.mark.parametrize("protocol", ["do53", "dot", "doh", "doq", "doh3"])
def test_chromium_asks_every_host_s_record_and_goes_to_http3_first_on_every_arm(records_lab, tmp_path, protocol):
    """Chromium asks every page host's HTTPS record whatever the arm, and gets a `record` site's. The lab names
    its web's hosts as signed by its CA over QUIC (`ClientSide.quic_ca_hosts`) and Chromium allows them that
    root at a port no page uses (nothing forced: harness/browser/chromium_quic.py), with no switch in the study's
    profile: it discovers HTTP/3 itself, its first request to the site goes over HTTP/3 and the record says used.
    Chromium waits for a host's HTTPS answer only a bounded extra time beside its addresses, so on a loaded host
    the answer can lose that race as Firefox's can (docs/web.md): one of two visits must start on HTTP/3, and
    both reach it."""
    site = _site_of_kind(records_lab, "record")
    hosts = []
    for attempt in range(2):
        result = _chromium_visit(records_lab, tmp_path / str(attempt), site, protocol)
        assert result.error_class == "Successful" and "h3" in (result.http_versions or {}), result.http_versions
        allowed = len(records_lab.client_side().quic_ca_hosts)
        assert result.browser_dns["values"]["quic_ca_hosts"] == allowed > 1000, result.browser_dns
        assert result.https_hosts is not None and result.https_asked == result.page_hosts, result.https_hosts
        hosts.append(next(h for h in result.https_hosts if h["host"] == site))
        if hosts[-1]["used"]:
            break
    assert hosts[-1]["published"] and hosts[-1]["answered"], hosts
    assert hosts[-1]["used"] and hosts[-1]["first_version"] == "h3", hosts


def test_chromium_not_allowed_the_lab_ca_over_quic_gets_the_record_and_stays_on_http2(
    records_lab, tmp_path, monkeypatch
):
    """The control of the test above: a client side naming no hosts (as before the lab named them) leaves
    Chromium's QUIC refusing the lab's root (docs/web.md), so it asks for and gets the record and never goes to
    HTTP/3, the lab's artifact the automatic allowance removes; the visit reads back no host allowed."""
    own = records_lab.client_side
    monkeypatch.setattr(records_lab, "client_side", lambda: replace(own(), quic_ca_hosts=()))
    site = _site_of_kind(records_lab, "record")
    result = _chromium_visit(records_lab, tmp_path, site, "doh")
    assert result.error_class == "Successful", result
    assert result.browser_dns["values"]["quic_ca_hosts"] == 0, result.browser_dns
    host = next(h for h in result.https_hosts or [] if h["host"] == site)
    assert host["published"] and host["answered"] and not host["used"], host
    assert result.first_h3 is False and "h3" not in (result.http_versions or {}), result.http_versions


def _chromium_visit(lab, results: Path, site: str, protocol: str, page_http3: bool = True) -> VisitResult:
    """One visit of Chromium with the study's default settings but ``page_http3`` to the site's page through the
    near resolver."""
    visitor = Visitor(lab, results, timeout=30.0, margin=10.0, browser="chromium", page_http3=page_http3)
    try:
        return visitor.visit_once(f"https://{site}/", protocol, "near")
    finally:
        visitor.close()


def test_the_bare_resolver_serves_the_same_web_without_the_records(records_lab, tmp_path):
    """near-bare answers a `record` site's addresses and no HTTPS record; Firefox through it starts the site on
    HTTP/2 (the Alt-Svc then sends later requests to HTTP/3), and the record says the site's record was asked and
    not published there: the pair a study compares, the same pages with and without the records."""
    site = _site_of_kind(records_lab, "record")
    assert _https_answer(records_lab, site, 2) == [] and _https_answer(records_lab, site, 0) != []
    versions, headers, host = _first_versions(records_lab, tmp_path, site, "doh", resolver="near-bare")
    assert versions[0] == "HTTP/2" and "alt-svc" in headers, versions
    assert host["asked"] and not host["published"] and not host["answered"] and not host["first_h3"], host
