"""HTTPS records (RFC 9460) recorded and replayed in real labs (issue 43, item 2): a site of the https-records lab
(profiles/lab/https-records.toml: `1 . alpn=h3,h2 ipv4hint=<address>` for each of its hostnames) recorded with
`dnsstudy record`, its archive replayed in a second lab whose resolvers answer the record rewritten for the lab
(`alpn=h2`, the replay address), and a replayed visit in Firefox that says the host's record was published and
answered, its first request HTTP/2 (docs/replay.md, "HTTPS records"). One site, to keep it short.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.message
import dns.query
import dns.rdatatype
import pytest

from harness import netns
from harness.lab.config import load_lab_config
from harness.lab.svcb import load_shares, site_kinds
from harness.lab.zones import web_address
from harness.replay.archive import Archive
from harness.replay.recorder import resolve
from harness.visit import Visitor
from tests.conftest import own_lab, replaying_lab
from tests.helpers import CLI_ENV, DNSSTUDY
from tests.test_h3_lab import _browser_dns
from tests.test_https_records_lab import WAIT_FOR_RECORD

pytestmark = pytest.mark.lab

PROFILE = "profiles/lab/https-records.toml"
CANDIDATES = ["google.com", "facebook.com", "microsoft.com", "apple.com", "pinterest.com", "taobao.com", "adobe.com"]


def _record_site(lab) -> str:
    """A site whose zone the lab gives HTTPS records (kind "record", harness/lab/svcb.py)."""
    web = lab.config.settings.web
    kinds = site_kinds(web.seed, CANDIDATES, load_shares(web.https_records))
    return next(site for site in CANDIDATES if kinds[site] == "record")


def _https_answer(lab, name: str, resolver: int) -> list[str]:
    """The HTTPS records a lab resolver answers for ``name``, asked from the client namespace, quotes removed."""
    query = dns.message.make_query(name, dns.rdatatype.HTTPS)
    with netns.entered(lab.namespaces["client"]):
        reply, _ = dns.query.udp_with_fallback(query, lab.config.addresses.resolver(resolver), timeout=5)
    return [
        r.to_text().replace('"', "") for rrset in reply.answer if rrset.rdtype == dns.rdatatype.HTTPS for r in rrset
    ]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Iterator[tuple[Path, str, str]]:
    """The archive of one `record` site of the https-records lab, the site, and its address in that lab (the
    lab is down once recorded: the replay needs only the archive)."""
    archive = tmp_path_factory.mktemp("archive")
    with own_lab(load_lab_config(PROFILE)) as the_lab:
        lab: Any = the_lab  # a Lab (conftest's fixtures hand labs out as objects)
        site = _record_site(lab)
        argv = ["record", site, "--archive", str(archive), "--profile", PROFILE]
        argv += ["--prefix", lab.name, "--subnet", lab.config.settings.subnet]
        done = subprocess.run([*DNSSTUDY, *argv], capture_output=True, text=True, env=CLI_ENV, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert not netns.pids_in(lab.namespaces["client"]), "record left processes behind"
        address = web_address(lab.config, site)
    yield archive, site, address


def test_record_stores_the_site_s_https_record(recorded):
    archive, site, address = recorded
    record = Archive(archive).load(site)
    answer = record.dns[site]
    assert [r.replace('"', "") for r in answer.https or []] == [f"1 . alpn=h3,h2 ipv4hint={address}"], answer
    assert answer.https_ttl > 0 and not answer.chain
    assert all(d.https is not None for d in record.dns.values())  # every name asked: [] where none


@pytest.fixture(scope="module")
def replay_lab(lab_config, recorded):
    with replaying_lab(lab_config, recorded[0]) as the_lab:
        yield the_lab


def test_the_replay_resolvers_answer_the_record_rewritten_for_the_lab(replay_lab, recorded):
    _, site, _ = recorded
    address = resolve(replay_lab.namespaces["client"], replay_lab.config.addresses.resolver(0), site).a[0]
    for resolver in (0, 1):  # near reads the zone as its upstream, far asks the authoritative
        assert _https_answer(replay_lab, site, resolver) == [f"1 . alpn=h2 ipv4hint={address}"], resolver
    checks = {r.name: r for r in replay_lab.run_checks()}
    # each of the site's names has one record, h3 and the recording lab's address in it (pinterest.com: 3)
    n = sum(len(d.https or []) for d in Archive(recorded[0]).load(site).dns.values())
    row = checks["HTTPS records of the replay zone"]
    assert row.ok and row.detail == f"{n} published at {n} names; rewritten: ipv4hint {n}, h3 {n}", row


def test_a_replayed_visit_records_the_host_s_record_published_and_answered(replay_lab, recorded, tmp_path):
    _, site, _ = recorded
    visitor = Visitor(replay_lab, tmp_path, timeout=30.0, margin=10.0)
    result = visitor.visit_once(f"https://{site}/", "do53", "near")
    assert result.error_class == "Successful", result
    assert result.https_hosts is not None, result
    host = next(h for h in result.https_hosts if h["host"] == site)
    assert host["published"] and host["asked"] and host["answered"] and not host["used"], host
    assert host["first_version"] == "h2", host


@pytest.fixture(scope="module")
def h3_replay_lab(recorded):
    """The archive replayed in a lab of the https-records profile: HTTP/3 offered (the replay's front), and the
    near-bare resolver beside near."""
    with replaying_lab(load_lab_config(PROFILE), recorded[0]) as the_lab:
        yield the_lab


def test_a_replay_with_http3_keeps_h3_and_firefox_s_first_request_goes_there(h3_replay_lab, recorded, tmp_path):
    """Where the replay serves HTTP/3 the record keeps `alpn=h3,h2`, and Firefox's first request to the replayed
    site goes over HTTP/3 with the record used; through near-bare (no HTTPS records, the archive's left out of
    its zone too) the same page starts on HTTP/2 and its host's record reads as not published."""
    _, site, _ = recorded
    address = resolve(h3_replay_lab.namespaces["client"], h3_replay_lab.config.addresses.resolver(0), site).a[0]
    assert _https_answer(h3_replay_lab, site, 0) == [f"1 . alpn=h3,h2 ipv4hint={address}"]
    assert _https_answer(h3_replay_lab, site, 2) == []  # near-bare
    seen = {}
    for resolver in ("near", "near-bare"):
        prefs = _browser_dns(tmp_path, WAIT_FOR_RECORD)
        visitor = Visitor(
            h3_replay_lab, tmp_path / resolver, timeout=30.0, margin=10.0, browser_dns=prefs, page_http3=True
        )
        result = visitor.visit_once(f"https://{site}/", "do53", resolver)
        assert result.error_class == "Successful" and result.replay_misses == 0, result
        seen[resolver] = next(h for h in result.https_hosts or [] if h["host"] == site)
    assert seen["near"]["used"] and seen["near"]["first_version"] == "h3", seen
    assert not seen["near-bare"]["published"] and seen["near-bare"]["first_version"] == "h2", seen
