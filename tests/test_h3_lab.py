"""HTTP/3 in the lab's web (issue 43, first step): the h3front beside nginx, and Firefox reaching it.

A lab of profiles/lab/http3.toml: the front runs unprivileged, answers over HTTP/3 what nginx answers over
HTTP/2 (the same headers but Date, the same bytes), nginx announces it (Alt-Svc), and a Firefox visit told to
use HTTP/3 (and to accept it with the lab CA) fetches a page's later requests over HTTP/3 after its first
over HTTP/2, while a visit with the study's usual preferences stays on HTTP/2 only.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import netns
from harness.accounts import BIND_LOW_PORT, helper
from harness.lab.config import load_lab_config
from harness.lab.h3front import ALT_SVC
from harness.paths import PROJECT_ROOT
from harness.visit import Visitor
from tests.conftest import own_lab
from tests.test_privileges import assert_confined, pids_named

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def h3_lab() -> Iterator[object]:
    with own_lab(load_lab_config("profiles/lab/http3.toml")) as the_lab:
        yield the_lab


def _browser_dns(tmp_path: Path, extra: dict[str, str]) -> Path:
    """The current DNS profile with ``extra`` preferences (name -> TOML value). The page's HTTP/3 is the visit's
    `page_http3`, which no DNS profile may set (harness/browser/firefox_dns.py)."""
    text = (PROJECT_ROOT / "profiles/firefox/dns-current.toml").read_text()
    for name, value in extra.items():
        text += f'\n[[pref]]\nname = "{name}"\nvalue = {value}\nreason = "the lab web\'s HTTP/3 (test)"\n'
    path = tmp_path / "dns-current-h3.toml"
    path.write_text(text)
    return path


def _entries(har_path: str | None) -> list[dict]:
    assert har_path
    return json.loads(gzip.open(har_path).read())["log"]["entries"]


def _h2_headers(lab, url: str, status: int = 200) -> tuple[dict[str, str], int]:
    """The answer over HTTP/2 from the client namespace, which must have ``status``: its headers (lower-case
    names) and body size."""
    argv = [
        "curl",
        "-s",
        "--http2",
        "--cacert",
        str(lab.ca_path),
        "-D",
        "-",
        "-o",
        "/dev/null",
        "-w",
        "%{size_download}",
    ]
    out = subprocess.run(netns.command(lab.namespaces["client"], [*argv, url]), capture_output=True, text=True)
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith(f"HTTP/2 {status}"), out.stdout
    headers = dict(line.split(": ", 1) for line in lines[1:-1] if ": " in line)
    return {k.lower(): v.strip() for k, v in headers.items()}, int(lines[-1])


def test_the_front_runs_unprivileged_and_nginx_announces_it(h3_lab):
    server = h3_lab.config.namespaces["server"]
    pids = pids_named(server, "h3front")
    assert len(pids) == 1
    assert_confined(pids[0], helper(), (BIND_LOW_PORT,))
    headers, _ = _h2_headers(h3_lab, "https://google.com/")
    assert headers["alt-svc"] == ALT_SVC


def test_lab_check_fetches_the_web_over_http3_too(h3_lab):
    checks = [r for r in h3_lab.run_checks() if r.name.startswith(("https ", "http3 "))]
    over_h3 = [r for r in checks if r.name.startswith("http3 ")]
    assert len(over_h3) == len(checks) // 2 >= 2, checks
    assert all(r.ok and r.detail.startswith("HTTP/3.0 200 ") for r in over_h3), over_h3


def test_firefox_fetches_later_requests_over_http3_with_nginx_s_answers(h3_lab, tmp_path):
    visitor = Visitor(h3_lab, tmp_path / "h3", timeout=30.0, margin=10.0, page_http3=True)
    result = visitor.visit_once("https://google.com/", "do53", "near")
    assert result.error_class == "Successful", result
    entries = _entries(result.har_path)
    by_origin: dict[str, list[str]] = defaultdict(list)
    for e in entries:
        by_origin[e["request"]["url"].split("/")[2]].append(e["response"]["httpVersion"])
    h3 = [e for e in entries if e["response"]["httpVersion"] == "HTTP/3"]
    assert h3, by_origin
    # Discovery: an origin's first request goes over HTTP/2, whose answer announces HTTP/3 for the later ones.
    assert by_origin["google.com"][0] == "HTTP/2" and "HTTP/3" in by_origin["google.com"], by_origin
    own = {"date", "x-firefox-http3"}  # the time, and what Firefox adds to an answer that came over HTTP/3
    for e in h3[:5]:  # the same answer as nginx's over HTTP/2: headers (but those) and bytes
        headers, size = _h2_headers(h3_lab, e["request"]["url"])
        got = {h["name"].lower(): h["value"] for h in e["response"]["headers"]}
        assert {k: v for k, v in got.items() if k not in own} == {k: v for k, v in headers.items() if k not in own}
        assert e["response"]["content"]["size"] == size
    # The front writes its log once a second (h3front/accesslog.go): the visit's last second may be unwritten yet.
    log, deadline = h3_lab.run_dir / "logs" / "h3front-access.log", time.monotonic() + 5
    while (served := log.read_text().count(" HTTP/3.0 ")) < len(h3) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert served >= len(h3), (served, len(h3))


def test_firefox_with_the_study_s_preferences_stays_on_http2(h3_lab, tmp_path):
    visitor = Visitor(h3_lab, tmp_path / "h2", timeout=30.0, margin=10.0)
    result = visitor.visit_once("https://google.com/", "do53", "near")
    assert result.error_class == "Successful", result
    assert {e["response"]["httpVersion"] for e in _entries(result.har_path)} == {"HTTP/2"}
