"""The project's HAR files of every writer (tests/data/har), imported and replayed in a real lab with both browsers.

One lab serves the archive of all seven files (bodies filled where the writer
saved none) and one more site whose page carries a header HTTP cannot send;
each page is visited once per browser over Do53 at the near resolver
(docs/replay.md). The quirks themselves are tested one by one, without a
lab, in tests/test_har_import.py.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from harness.lab.config import load_lab_config
from harness.lab.replayweb import events_log
from harness.replay.archive import Archive, DnsAnswer, Exchange, SiteRecord, write_site
from harness.replay.har_import import HarImport
from harness.visit import Visitor
from tests.conftest import replaying_lab

pytestmark = pytest.mark.lab

HARS = Path(__file__).parent / "data" / "har"
BROKEN = "broken-page.test"  # a site whose page carries a header name HTTP cannot send
UNRECORDED = "unrecorded.chrome-dialect.test"  # a name Chrome's page asks that its HAR does not hold
FILLED = {"firefox43-dialect.test", "wpt-dialect.test", "firebug-dialect.test"}


@pytest.fixture(scope="module")
def har_archive(tmp_path_factory) -> Path:
    archive = tmp_path_factory.mktemp("har-archive")
    importer = HarImport(archive, fill_missing_bodies=True)
    for path in sorted(HARS.glob("*.har")):
        importer.add(path)
    page = Exchange(
        "GET",
        f"https://www.{BROKEN}/",
        200,
        "HTTP/1.1",
        [],
        [("content-type", "text/html"), ("x\x01y", "1")],
        b"<p>",
        0,
    )
    dns = {f"www.{BROKEN}": DnsAnswer(f"www.{BROKEN}", a=["100.127.0.1"], synthesized=True)}
    write_site(archive, SiteRecord(BROKEN, page.url, "har", [page], dns))
    return archive


@pytest.fixture(scope="module")
def har_lab(lab_config, har_archive):
    """A lab serving the archive (module-scoped: brought down at the module's end)."""
    with replaying_lab(lab_config, har_archive) as the_lab:
        yield the_lab


def test_lab_check_compares_every_site_with_the_archive(har_lab):
    results = har_lab.run_checks()
    errors = [(c.name, c.detail) for c in results if c.name.startswith("replay error: ")]
    samples = [c for c in results if c.name.startswith("replay ") and not c.name.startswith("replay error: ")]
    assert {c.name.split(":")[0] for c in samples} == {f"replay {s}" for s in Archive(har_lab.archive_dir).sites}
    assert all(c.ok for c in samples), [(c.name, c.detail) for c in samples if not c.ok]
    # status, protocol and bytes came as recorded; the header it could not send is a failed check of its own
    assert errors == [(f"replay error: https://www.{BROKEN}/", "header 'x\\x01y' cannot be sent")], errors


@pytest.mark.parametrize("browser", ["firefox", "chromium"])
def test_every_writers_page_replays_in_both_browsers(har_lab, har_archive, tmp_path, browser):
    visitor = Visitor(har_lab, tmp_path, timeout=20.0, margin=10.0, browser=browser)
    for site in Archive(har_archive).sites:
        url = har_lab.page_url(site, "")
        since = _events(har_lab)
        result = visitor.visit_once(url, "do53", "near")
        if site == BROKEN:  # its page was not replayed as recorded: the replay's failure, never Successful
            assert result.error_class == "Infrastructure Failure" and not result.counted, result
            assert f"the page {url} was not replayed as recorded (header" in result.detail, result.detail
            assert [e["url"] for e in result.replay_errors or []] == [url]
            continue
        assert result.error_class == "Successful", (site, result.error_class, result.detail)
        assert result.replay_errors == [], (site, result.replay_errors)
        misses = [e["target"] for e in _events(har_lab)[len(since) :] if e["kind"] == "miss"]
        assert set(misses) <= {"/favicon.ico"}, (site, misses)  # every recorded answer was given
        assert (result.replay_filled or 0) > 0 if site in FILLED else result.replay_filled == 0, (site, result)
        expected = [UNRECORDED] if site == "chrome-dialect.test" else []
        assert result.replay_dns_misses == expected, (site, result.replay_dns_misses)


def _events(the_lab) -> list[dict]:
    log = events_log(the_lab.run_dir)
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("protocol", ["dot", "doh", "doq", "doh3"])
def test_an_unrecorded_name_is_a_dns_miss_on_every_arm(har_lab, tmp_path, protocol):
    """Do53 in both browsers above; here the other arms, in Firefox, at the far (recursive) resolver, which asks
    the lab authoritative."""
    visitor = Visitor(har_lab, tmp_path, timeout=20.0, margin=10.0)
    result = visitor.visit_once(har_lab.page_url("chrome-dialect.test", ""), protocol, "far")
    assert result.error_class == "Successful", (result.error_class, result.detail)
    assert result.replay_dns_misses == [UNRECORDED] and result.replay_errors == []


TTL_S = 30  # the names' recorded TTL: a second visit comes well within it


def test_resolvers_cache_within_the_recorded_ttls(private_lab, tmp_path):
    """profiles/lab/replay-ttl.toml: the far resolver keeps each answer for its recorded TTL, so a second visit
    within it asks the authoritative fewer times, and one after it as many as the first."""
    archive = tmp_path / "ttl"
    hosts = ["www.ttl.test", "img.ttl.test", "js.ttl.test"]
    html = b"<html><head></head><body><img src='https://img.ttl.test/a.gif'><script src='https://js.ttl.test/a.js'>"
    bodies = {"www.ttl.test/": (html, "text/html"), "img.ttl.test/a.gif": (b"GIF89a", "image/gif")}
    bodies["js.ttl.test/a.js"] = (b"var t;", "text/javascript")
    exchanges = [
        Exchange("GET", f"https://{path}", 200, "HTTP/2.0", [], [("content-type", kind)], body, 0)
        for path, (body, kind) in bodies.items()
    ]
    dns = {h: DnsAnswer(h, a=[f"100.127.1.{i}"], a_ttl=TTL_S, synthesized=True) for i, h in enumerate(hosts, 1)}
    write_site(archive, SiteRecord("ttl.test", "https://www.ttl.test/", "har", exchanges, dns))
    config = load_lab_config("profiles/lab/replay-ttl.toml").with_overrides(web_archive=str(archive))
    the_lab = private_lab(config=config)
    visitor = Visitor(the_lab, tmp_path / "results", timeout=20.0, margin=10.0)

    def asked() -> int:
        """A visit's A queries at the authoritative (a negative answer is cached for the SOA minimum, 300 s)."""
        before = _authoritative_a_queries(the_lab)
        result = visitor.visit_once("https://www.ttl.test/", "do53", "far")
        assert result.error_class == "Successful" and result.replay_dns_misses == [], (result.error_class, result)
        return _authoritative_a_queries(the_lab) - before

    first = asked()
    second = asked()
    time.sleep(TTL_S + 1)
    third = asked()
    # every name asked again once its TTL ran out (not third == first: unbound may resend a query to a slow
    # authoritative, and the authoritative counts it twice)
    assert first >= len(hosts) and second < first and third >= len(hosts), (first, second, third)


def _authoritative_a_queries(the_lab) -> int:
    """A queries the lab authoritative answered so far (its unbound's statistics)."""
    done = subprocess.run(
        ["unbound-control", "-c", str(the_lab.run_dir / "auth.conf"), "stats_noreset"],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    stats = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return int(float(stats.get("num.query.type.A", "0")))
