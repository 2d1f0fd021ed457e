"""Record and replay in real labs: the synthetic web recorded through mitmproxy, replayed in a second lab.

All real: Firefox through mitmdump in the first lab's client namespace, the
archive served by the second lab's authoritative, resolvers and replay
server, and visits in both compared page by page (docs/replay.md).
"""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from harness import netns
from harness.browser.har import read_har
from harness.lab.replayweb import events_log
from harness.replay.archive import Archive, write_site
from harness.replay.compare import dns_differences, page_differences, summarise_har
from harness.replay.recorder import resolve
from harness.visit import Visitor
from harness.visit_record import VisitResult
from tests.conftest import replaying_lab
from tests.helpers import CLI_ENV, DNSSTUDY, wait_for

pytestmark = pytest.mark.lab

SITES = ["google.com", "facebook.com"]  # multi-host pages of the synthetic web
CNAMED = "edge.replay-cdn.test"  # a CNAME target the test adds to one recorded name


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DNSSTUDY, *args], capture_output=True, text=True, env=CLI_ENV, timeout=timeout)


@pytest.fixture(scope="module")
def recorded(lab, tmp_path_factory) -> Path:
    """The synthetic lab's SITES recorded into an archive, one name given a CNAME chain afterwards."""
    archive = tmp_path_factory.mktemp("archive")
    done = _cli(
        "record", *SITES, "--archive", str(archive), "--prefix", lab.name, "--subnet", lab.config.settings.subnet
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert not [pid for pid in netns.pids_in(lab.namespaces["client"])], "record left processes behind"
    record = Archive(archive).load(SITES[0])
    name = next(h for h in record.hostnames if h != SITES[0])
    dns = dict(record.dns)
    dns[name] = replace(dns[name], chain=[(CNAMED, 120)], a_ttl=20)
    write_site(archive, replace(record, dns=dns))
    return archive


def test_record_stores_exchanges_and_dns(lab, recorded):
    records = Archive(recorded).load_all()
    assert [r.site for r in records] == sorted(SITES)
    for r in records:
        assert len(r.exchanges) > 10 and r.body_bytes > 10_000
        assert set(r.dns) == set(r.hostnames) and all(d.a and not d.synthesized for d in r.dns.values())
        assert {e.http_version for e in r.exchanges} == {"HTTP/2.0"}  # nginx serves the synthetic web over h2
        served = {d.name: d.a[0] for d in r.dns.values()}
        assert served == {h: lab_address(lab, h) for h in served}


def lab_address(lab, name: str) -> str:
    return resolve(lab.namespaces["client"], lab.config.addresses.resolver(0), name).a[0]


@pytest.fixture(scope="module")
def replay_lab(lab_config, recorded):
    """A second lab serving the archive (module-scoped: brought down at the module's end)."""
    with replaying_lab(lab_config, recorded) as the_lab:
        yield the_lab


def test_replayed_dns_is_the_recorded_dns(replay_lab, recorded):
    recorded_dns = {n: d for r in Archive(recorded).load_all() for n, d in r.dns.items()}
    near = replay_lab.config.addresses.resolver(0)
    asked = time.monotonic()  # nothing asks the lab's resolvers before this test: their caches start here
    served = {name: resolve(replay_lab.namespaces["client"], near, name) for name in recorded_dns}
    assert dns_differences(recorded_dns, served, held_s=time.monotonic() - asked) == []
    assert any([target for target, _ in d.chain] == [CNAMED] for d in served.values())  # TTLs checked above
    far = replay_lab.config.addresses.resolver(1)  # the recursive resolver asks the authoritative
    cnamed = next(n for n, d in recorded_dns.items() if d.chain)
    assert resolve(replay_lab.namespaces["client"], far, cnamed).chain[0][0] == CNAMED


def test_replayed_certificates_name_what_the_originals_did(lab, replay_lab, recorded):
    """What one connection may carry follows from the names on its certificate (and the address): a replayed
    hostname's server shows the names the original's showed. With one certificate per address naming every
    hostname on it, google.com's page took 14-19 connections in the replay against the original's 22."""
    records = Archive(recorded).load_all()
    certificates = {host: names for r in records for host, names in r.certificates.items()}
    assert set(certificates) == {h for r in records for h in r.hostnames}  # every hostname's was recorded
    for host in sorted(certificates):
        original = _certificate_names(lab, host)
        replayed = _certificate_names(replay_lab, host)
        assert sorted(certificates[host]) == original == replayed, host


def _certificate_names(a_lab, host: str) -> list[str]:
    """The DNS names on the certificate ``host``'s server shows, asked from the lab's client namespace."""
    context = ssl.create_default_context(cafile=str(a_lab.ca_path))
    with netns.entered(a_lab.namespaces["client"]):
        raw = socket.create_connection((lab_address(a_lab, host), 443), timeout=5)
    with raw, context.wrap_socket(raw, server_hostname=host) as tls:
        cert = tls.getpeercert() or {}
    names: tuple[tuple[str, str], ...] = cert.get("subjectAltName", ())  # type: ignore[assignment]
    return sorted(value for kind, value in names if kind == "DNS")


@pytest.mark.parametrize("protocol", ["do53", "doh"])
def test_replayed_pages_match_the_originals(lab, replay_lab, tmp_path, protocol):
    original = Visitor(lab, tmp_path / "original", timeout=30.0, margin=10.0)
    replayed = Visitor(replay_lab, tmp_path / "replayed", timeout=30.0, margin=10.0)
    events = events_log(replay_lab.run_dir)
    logs = (lab.run_dir / "logs" / "nginx-access.log", replay_lab.run_dir / "logs" / "replay-nginx-access.log")
    for site in SITES:
        before = time.time()
        a, _ = _visit_logged(original, site, protocol, logs[0])
        b, b_lines = _visit_logged(replayed, site, protocol, logs[1])
        assert (a.error_class, b.error_class) == ("Successful", "Successful"), (a.detail, b.detail)
        assert b.proof["valid"], b.proof  # the replayed visit proves its transport like any other
        assert (a.replay_misses, b.replay_misses) == (None, 0)  # counted on a replayed web only
        assert a.har_path and b.har_path
        differences = page_differences(
            summarise_har(read_har(Path(a.har_path))), summarise_har(read_har(Path(b.har_path)))
        )
        assert differences == [], f"{site}: {differences}"
        misses = [json.loads(line) for line in events.read_text().splitlines()] if events.exists() else []
        assert [m for m in misses if m["time"] >= before] == []
        # Every request had an exact recorded answer, so the replay web's nginx answered each 200 from its
        # file (a recorded 404, the favicon's, is the replay server's).
        assert [line for line in b_lines if line.endswith(" file=") and '" 200 ' in line] == []


def _visit_logged(visitor: Visitor, site: str, protocol: str, log: Path) -> tuple[VisitResult, list[str]]:
    """A visit and the lines its page left in a server's access log (the log is flushed each second)."""
    start = len(_lines(log))
    result = visitor.visit_once(f"https://{site}/", protocol, "near")
    requests = summarise_har(read_har(Path(result.har_path))).requests if result.har_path else 0
    wait_for(lambda: len(_lines(log)) >= start + requests, timeout=10, what=f"{log.name}")
    time.sleep(1.2)  # a request the HAR does not count (the favicon's) may be in the next flush
    return result, _lines(log)[start:]


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_visit_counts_its_misses(replay_lab, tmp_path):
    """A page the archive does not hold is a miss the visit records (never a crash)."""
    visitor = Visitor(replay_lab, tmp_path, timeout=30.0, margin=10.0)
    result = visitor.visit_once(f"https://{SITES[0]}/not-recorded?x=1", "do53", "near")
    assert result.replay_misses is not None and result.replay_misses >= 1, result
    fuzzy = visitor.visit_once(f"https://{SITES[0]}/?not=recorded", "do53", "near")
    assert fuzzy.error_class == "Successful" and fuzzy.replay_fuzzy == 1 and fuzzy.replay_misses == 0, fuzzy


def test_lab_up_refuses_a_broken_archive_in_one_line(private_lab, recorded, tmp_path):
    broken = tmp_path / "broken"
    subprocess.run(["cp", "-r", str(recorded), str(broken)], check=True)
    site_file = broken / "sites" / f"{SITES[1]}.json.gz"
    site_file.write_bytes(site_file.read_bytes()[:-100])
    the_lab = private_lab(up=False)
    done = _cli("lab", "up", "--web", str(broken), "--prefix", the_lab.name, "--subnet", the_lab.config.settings.subnet)
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0 and "corrupt or truncated" in done.stderr, done.stderr
    assert not any(netns.exists(ns) for ns in the_lab.namespaces.values())
