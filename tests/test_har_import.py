"""HAR import of every writer's dialect (tests/data/har, one small synthetic page each), and what the replay does
with what the import kept: failed requests, filled bodies, unsendable answers, http:// pages (docs/replay.md).

The same files are imported and replayed with both browsers in tests/test_replay_lab.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.errors import HarnessError
from harness.lab.config import load_lab_config
from harness.lab.querylog import log_sizes, nxdomain_names
from harness.lab.replayfront import FAILED_STATUS
from harness.lab.replayserver import sendable
from harness.lab.replayweb import ReplayWeb
from harness.replay.archive import Archive, Exchange
from harness.replay.events import ReplayEvents, read_events
from harness.replay.har_import import HarImport, ImportOptions, read_har
from harness.replay.matching import page_urls

HARS = Path(__file__).parent / "data" / "har"
#: The writers whose files hold no (or partial) bodies: refused unless filling is asked for.
WITHOUT_BODIES = {"firefox-43.har": "has no body", "webpagetest.har": "has no body", "firebug.har": "partial body"}
FILL = ImportOptions(fill_missing_bodies=True)


def _read(name: str, fill: bool = False):
    return read_har(HARS / name, options=FILL if fill else None)


@pytest.mark.parametrize("name", sorted(p.name for p in HARS.glob("*.har")))
def test_every_writers_har_imports(name):
    record = _read(name, fill=name in WITHOUT_BODIES)
    assert record.source == "har" and record.site.endswith("-dialect.test") and len(record.exchanges) >= 4
    assert all(d.synthesized and d.a for d in record.dns.values())


def test_a_byte_order_mark_is_read():
    """Fiddler writes a UTF-8 BOM, which JSON refuses."""
    assert (HARS / "fiddler.har").read_bytes().startswith(b"\xef\xbb\xbf")
    assert _read("fiddler.har").exchanges[1].body == b"a{}"


def test_joined_set_cookie_values_are_split_and_non_token_names_dropped():
    """Chrome joins a response's Set-Cookie values with newlines in one header and lists HTTP/2 pseudo-headers."""
    record = _read("chrome-devtools.har")
    page = record.exchanges[1]
    cookies = [v for k, v in page.response_headers if k == "set-cookie"]
    assert cookies == ["sid=1; Path=/; Secure", "lang=en; Path=/"]
    assert not any(k.startswith(":") for e in record.exchanges for k, _ in e.request_headers + e.response_headers)
    assert record.notes["split_headers"] == 1 and record.notes["dropped_headers"] == 4  # 2 :status, :authority, :method


def test_webpagetest_header_names_with_spaces_are_trimmed():
    """WebPageTest splits raw header lines with their spaces ("set-cookie "): the cookies are kept."""
    record = _read("webpagetest.har", fill=True)
    cookies = [v for k, v in record.exchanges[0].response_headers if k == "set-cookie"]
    assert cookies == ["a=1; path=/", "b=2; path=/"]
    assert record.notes["trimmed_header_names"] == 2 and record.notes["dropped_headers"] == 1


def test_status_0_entries_are_kept_as_failures_and_replayed_as_one(tmp_path):
    chrome = _read("chrome-devtools.har").exchanges[-1]
    assert (chrome.status, chrome.failure, chrome.body) == (0, "net::ERR_CONNECTION_RESET", b"")
    firefox = _read("firefox-111.har").exchanges[-1]
    assert (firefox.status, firefox.failure, firefox.method) == (0, "no response", "POST")
    answer = sendable(chrome, "chrome-dialect.test")
    assert answer.status == FAILED_STATUS and not answer.problem  # nginx closes on it: no made-up 502
    HarImport(tmp_path / "a").add(HARS / "chrome-devtools.har")
    again = Archive(tmp_path / "a").load("chrome-dialect.test")
    assert again.exchanges[-1].failure == "net::ERR_CONNECTION_RESET" and again.notes["failed_requests"] == 1


def test_a_page_that_failed_in_the_original_is_refused(tmp_path):
    har = json.loads((HARS / "chrome-devtools.har").read_text())
    har["log"]["entries"] = har["log"]["entries"][-1:]  # the status-0 entry first: the page
    (tmp_path / "failed.har").write_text(json.dumps(har))
    with pytest.raises(
        HarnessError, match=r"entry 0 \(https://ads.chrome-dialect.test/pixel\) is the page, and it failed"
    ):
        read_har(tmp_path / "failed.har")


@pytest.mark.parametrize(("name", "what"), sorted(WITHOUT_BODIES.items()))
def test_entries_without_their_body_are_refused_in_one_line(name, what):
    with pytest.raises(HarnessError) as error:
        _read(name)
    message = str(error.value)
    assert message.startswith(f"{HARS / name}: entry ") and what in message and "https://" in message
    assert "--fill-missing-bodies" in message and "\n" not in message
    if name == "firefox-43.har":
        assert "the HAR says 'Response bodies are not included.'" in message


def test_filled_bodies_are_valid_empty_bodies_of_the_recorded_size_and_type(tmp_path):
    record = _read("firefox-43.har", fill=True)
    page, css, gif, js = record.exchanges
    assert all(e.filled for e in record.exchanges) and record.notes["filled_bodies"] == 4
    assert page.body == b" " * 400 and css.body == b" " * 120 and js.body == b" " * 80
    assert gif.body.startswith(b"GIF89a") and len(gif.body) == 300
    wpt = _read("webpagetest.har", fill=True)
    assert len(wpt.exchanges[0].body) == 512  # size 0 in the content: the body's recorded size
    firebug = _read("firebug.har", fill=True)
    assert [e.filled for e in firebug.exchanges] == [False, False, False, True]  # only the cut script
    result = CliRunner().invoke(
        main, ["archive", "import", str(HARS / "firefox-43.har"), "--archive", str(tmp_path), "--fill-missing-bodies"]
    )
    assert result.exit_code == 0 and "4 filled bodies" in result.output, result.output
    assert Archive(tmp_path).load("firefox43-dialect.test").filled
    assert sendable(css, "x").body == css.body


def test_a_bad_base64_body_names_the_entry_and_the_body(tmp_path):
    har = json.loads((HARS / "fiddler.har").read_bytes().decode("utf-8-sig"))
    har["log"]["entries"][2]["response"]["content"]["text"] = "R0lGOD=lhAQ"
    (tmp_path / "bad.har").write_text(json.dumps(har))
    with pytest.raises(HarnessError) as error:
        read_har(tmp_path / "bad.har")
    assert "entry 2 (GET https://img.fiddler-dialect.test/logo.gif): its body is not valid base64" in str(error.value)


@pytest.mark.parametrize(
    ("spelling", "version"),
    [
        ("h2", "HTTP/2.0"),
        ("HTTP/2", "HTTP/2.0"),
        ("HTTP/2.0", "HTTP/2.0"),
        ("http/2.0", "HTTP/2.0"),
        ("h3", "HTTP/3"),
        ("h3-29", "HTTP/3"),
        ("HTTP/3", "HTTP/3"),
        ("http/2+quic/46", "HTTP/3"),
        ("http/1.1", "HTTP/1.1"),
        ("HTTP/1.1", "HTTP/1.1"),
        ("HTTP/1.0", "HTTP/1.0"),
        ("", "HTTP/1.1"),
        ("unknown", "HTTP/1.1"),
    ],
)
def test_http_versions_in_every_spelling(tmp_path, spelling, version):
    har = json.loads((HARS / "fiddler.har").read_bytes().decode("utf-8-sig"))
    for side in ("request", "response"):
        har["log"]["entries"][0][side]["httpVersion"] = spelling
    (tmp_path / "v.har").write_text(json.dumps(har))
    assert read_har(tmp_path / "v.har").exchanges[0].http_version == version


def test_an_unknown_version_is_refused_in_one_line(tmp_path):
    har = json.loads((HARS / "fiddler.har").read_bytes().decode("utf-8-sig"))
    har["log"]["entries"][0]["response"]["httpVersion"] = "gopher/1"
    (tmp_path / "v.har").write_text(json.dumps(har))
    with pytest.raises(HarnessError, match=r"entry 0 \(GET https://www.fiddler-dialect.test/\): HTTP version"):
        read_har(tmp_path / "v.har")


def test_http_pages_are_served_on_port_80_and_http3_hosts_over_http2_and_http3(tmp_path):
    importer = HarImport(tmp_path, fill_missing_bodies=True)
    for name in ("safari.har", "firefox-111.har"):
        importer.add(HARS / name)
    config = load_lab_config().with_overrides(prefix="dsunit", subnet="198.18.250.0/23")
    web = ReplayWeb.plan(config, tmp_path)
    safari = web.records["www.safari-dialect.test"][1]
    assert web.ports(safari) == [80] and safari not in web.http2_at  # recorded over http:// only: no TLS
    firefox = web.records["img.firefox111-dialect.test"][1]  # recorded over HTTP/3 only: HTTP/2 in the lab
    assert web.ports(firefox) == [443] and firefox in web.http2_at
    assert firefox in web.h3_served(True) and safari not in web.h3_at  # HTTP/3 where a lab offers it


def test_one_address_pool_per_archive(tmp_path):
    """HARs without server addresses (Firebug, Safari's IPv6) get made-up ones no other site of the archive has."""
    importer = HarImport(tmp_path, fill_missing_bodies=True)
    importer.add(HARS / "firebug.har")
    HarImport(tmp_path).add(HARS / "safari.har")  # a later import, a new importer: the archive's addresses count
    records = Archive(tmp_path).load_all()
    by_site = [{a for d in r.dns.values() for a in d.a} for r in records]
    assert len(by_site) == 2 and not by_site[0] & by_site[1]


def test_a_site_already_in_the_archive_is_refused_unless_replaced(tmp_path):
    argv = ["archive", "import", str(HARS / "fiddler.har"), "--archive", str(tmp_path)]
    assert CliRunner().invoke(main, argv).exit_code == 0
    again = CliRunner().invoke(main, argv)
    assert again.exit_code != 0 and "site 'fiddler-dialect.test' is already in" in again.output
    assert CliRunner().invoke(main, [*argv, "--replace"]).exit_code == 0


def test_a_multi_file_import_imports_every_readable_file_and_names_each_refused(tmp_path):
    (tmp_path / "broken.har").write_text("{not json")
    files = [HARS / "firefox-43.har", tmp_path / "broken.har", HARS / "fiddler.har", HARS / "safari.har"]
    result = CliRunner().invoke(main, ["archive", "import", *map(str, files), "--archive", str(tmp_path / "a")])
    assert result.exit_code != 0
    assert "refused: " + str(HARS / "firefox-43.har") + ": entry 0" in result.output
    assert "refused: " + str(tmp_path / "broken.har") + ": not a readable HAR" in result.output
    assert "2 of 4 HAR files refused" in result.output
    assert Archive(tmp_path / "a").sites == ["fiddler-dialect.test", "safari-dialect.test"]


def test_unsendable_answers_are_errors_and_a_page_not_replayed_is_the_replays_failure(tmp_path):
    bad = Exchange("GET", "https://a.test/x", 200, "HTTP/1.1", [], [("ok", "1"), ("bad\x01name", "v")], b"x", 0)
    answer = sendable(bad, "a.test")
    assert answer.headers == [("ok", "1")] and "cannot be sent" in answer.problem
    assert "status 1 cannot be sent" in sendable(Exchange("GET", "u", 1, "HTTP/1.1", [], [], b"", 0), "a").problem
    log = tmp_path / "events.jsonl"
    lines = [
        {"time": 5, "kind": "error", "url": "https://a.test/x", "reason": "header 'bad' cannot be sent", "page": False},
        {"time": 6, "kind": "miss", "url": "https://www.a.test/", "page": True},
        {"time": 6, "kind": "filled", "url": "https://a.test/f", "page": False},
        {"time": 9, "kind": "error", "url": "https://a.test/late", "reason": "r", "page": True},
    ]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"cut')
    seen = read_events(log, 4, 8)
    assert seen.errors == [{"url": "https://a.test/x", "reason": "header 'bad' cannot be sent"}]
    assert (seen.misses, seen.filled) == (1, 1)
    assert seen.page_problem == "replay: the page https://www.a.test/ was not replayed as recorded (not in the archive)"
    assert ReplayEvents().page_problem is None


def test_dns_misses_are_the_names_answered_nxdomain_since_the_window_opened(tmp_path):
    """A window is where each log stood, not a time: the previous visit's replies in the same second are not
    this one's (unbound stamps to the second), nor is a line still being written."""
    near, far = tmp_path / "resolver-near.log", tmp_path / "resolver-far.log"
    near.write_text("[1000] unbound[7:0] info: 198.18.0.2 before.a.test. A IN NXDOMAIN 0.000000 0 40\n")
    opened = log_sizes([near, far, tmp_path / "none.log"])
    assert opened[far] == 0 and opened[tmp_path / "none.log"] == 0
    with near.open("a") as log:
        log.write(
            "[1000] unbound[7:0] info: 198.18.0.2 gone.a.test. A IN\n"
            "[1000] unbound[7:0] info: 198.18.0.2 gone.a.test. A IN NXDOMAIN 0.000000 0 40\n"
            "[1000] unbound[7:0] info: 198.18.0.2 gone.a.test. AAAA IN NXDOMAIN 0.000000 0 40\n"
            "[1000] unbound[7:0] info: 198.18.0.2 www.a.test. A IN NOERROR 0.000000 0 56\n"
            "[1000] unbound[7:0] info: 198.18.0.2 example.com. NS IN NXDOMAIN 0.000000 0 40\n"
            "[1001] unbound[7:0] info: 198.18.0.2 dnsstudy-warm-up.invalid. A IN NXDOMAIN 0.000000 0 40\n"
            "[1001] unbound[7:0] info: 198.18.0.2 nope.lab.test. A IN NXDOMAIN 0.000000 0 40\n"
            "[1001] unbound[7:0] info: 198.18.0.2 cut.a.test. A IN NXDOMAIN 0.0"
        )
    far.write_text("Nov 28 01:47:10 unbound[8:0] info: 198.18.1.9 Ads.B.test. HTTPS IN NXDOMAIN 0.000000 0 40\n")
    assert nxdomain_names(opened) == ["ads.b.test", "gone.a.test"]
    assert nxdomain_names(log_sizes([near, far])) == []


def test_the_pages_own_urls_follow_its_redirects():
    record = _read("chrome-devtools.har")
    assert page_urls(record) == {"https://chrome-dialect.test/", "https://www.chrome-dialect.test/"}


def test_the_project_hars_are_small_and_synthetic():
    """The files are the project's own, written for these tests: small, every URL under .test."""
    for path in HARS.glob("*.har"):
        assert path.stat().st_size < 16_000
        har = json.loads(path.read_bytes().decode("utf-8-sig"))
        assert all(".test/" in e["request"]["url"] for e in har["log"]["entries"])
