"""HTTP/3 in replay (issue 43, item 1): a page recorded from the HTTP/3 lab, whose answers announce HTTP/3 by
Alt-Svc, replayed in a lab whose profile offers HTTP/3. The replay's HTTP/3 front passes each request over TLS
to the replay's nginx on the address it came to (h3front/upstream_tls.go), so Firefox's HTTP/3 requests get the
recorded answers, waits and all; a visit without HTTP/3 gets the same answers over HTTP/2 (docs/replay.md)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.lab.config import load_lab_config
from harness.lab.h3front import ALT_SVC
from harness.lab.replayweb import ReplayWeb
from harness.replay.archive import Archive
from harness.visit import Visitor
from tests.conftest import own_lab, replaying_lab
from tests.helpers import CLI_ENV, DNSSTUDY
from tests.test_h3_lab import _entries

pytestmark = pytest.mark.lab

PROFILE = "profiles/lab/http3.toml"
SITE = "google.com"


@pytest.fixture(scope="module")
def h3_archive(tmp_path_factory) -> Path:
    """SITE recorded from a lab of the HTTP/3 profile (through mitmproxy, over HTTP/2: the announcement kept)."""
    archive = tmp_path_factory.mktemp("h3-archive")
    lab: Any
    with own_lab(load_lab_config(PROFILE)) as lab:
        argv = ["record", SITE, "--archive", str(archive), "--profile", PROFILE, "--prefix", lab.name]
        argv += ["--subnet", lab.config.settings.subnet]
        done = subprocess.run([*DNSSTUDY, *argv], capture_output=True, text=True, env=CLI_ENV, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return archive


@pytest.fixture(scope="module")
def h3_replay(h3_archive) -> Iterator[object]:
    with replaying_lab(load_lab_config(PROFILE), h3_archive) as lab:
        yield lab


def test_the_archive_keeps_the_announcement_and_the_replay_offers_http3_where_it_was(h3_archive, h3_replay):
    record = Archive(h3_archive).load(SITE)
    announced = {e.host for e in record.exchanges for k, v in e.response_headers if k.lower() == "alt-svc"}
    assert SITE in announced, record.hostnames
    web = ReplayWeb.plan(h3_replay.config, h3_archive)
    assert web.h3_served(True) and set(web.h3_served(True)) <= web.tls_at and web.h3_served(False) == []


def test_lab_check_fetches_each_sample_over_http3_too_with_the_recorded_answer(h3_archive, h3_replay):
    """Where the replay offers HTTP/3, `lab check` fetches the site's samples over it as well and wants the
    recorded status and bytes, as over HTTP/2."""
    checks = {r.name: r for r in h3_replay.run_checks()}
    over_h3 = {name: r for name, r in checks.items() if name.startswith("http3 replay ")}
    samples = [s for s in ReplayWeb.plan(h3_replay.config, h3_archive).samples if s["http3"]]
    assert samples and len(over_h3) == len(samples), sorted(checks)
    for sample in samples:
        row = over_h3[f"http3 replay {sample['site']}: {sample['url']}"]
        h2 = checks[f"replay {sample['site']}: {sample['url']}"]
        assert row.ok and h2.ok, (row, h2)
        assert row.detail.split(" ", 1)[1] == h2.detail.split(" ", 1)[1], (row, h2)  # status and bytes alike


def _visit(lab, tmp_path: Path, page_http3: bool = False) -> tuple[object, list[dict]]:
    visitor = Visitor(lab, tmp_path, timeout=30.0, margin=10.0, page_http3=page_http3)
    result = visitor.visit_once(f"https://{SITE}/", "do53", "near")
    assert result.error_class == "Successful", result
    assert result.replay_misses == 0 and not result.replay_errors, result
    return result, _entries(result.har_path)


def test_firefox_gets_the_recorded_answers_over_http3(h3_replay, tmp_path):
    """Told to use HTTP/3, Firefox starts on HTTP/2 (the replay's nginx announcing HTTP/3) and fetches later
    requests over HTTP/3 through the front; every answer has the status and size the same page has over HTTP/2
    alone, and the front logged each HTTP/3 request."""
    (tmp_path / "h2").mkdir()
    (tmp_path / "h3").mkdir()
    _, h2 = _visit(h3_replay, tmp_path / "h2")
    _, h3 = _visit(h3_replay, tmp_path / "h3", page_http3=True)
    assert {e["response"]["httpVersion"] for e in h2} == {"HTTP/2"}
    first = {h["name"].lower(): h["value"] for h in h3[0]["response"]["headers"]}
    assert h3[0]["response"]["httpVersion"] == "HTTP/2" and first.get("alt-svc") == ALT_SVC, first
    over_h3 = [e for e in h3 if e["response"]["httpVersion"] == "HTTP/3"]
    assert over_h3, [e["response"]["httpVersion"] for e in h3]
    plain = {e["request"]["url"]: (e["response"]["status"], e["response"]["content"]["size"]) for e in h2}
    for e in over_h3:
        assert plain.get(e["request"]["url"]) == (e["response"]["status"], e["response"]["content"]["size"]), e
    # The front writes its log once a second (h3front/accesslog.go).
    log, deadline = h3_replay.run_dir / "logs" / "h3front-access.log", time.monotonic() + 5
    while (served := log.read_text().count(" HTTP/3.0 ")) < len(over_h3) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert served >= len(over_h3), (served, len(over_h3))
