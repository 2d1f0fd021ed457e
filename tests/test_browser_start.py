"""A visit's browser start: failed starts retried within the visit, a fresh browser's settling, the browser life
the record names, and the warm-up page's parts (fast: no browser, no lab)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import cast

import pytest
from cryptography import x509

from harness.accounts import Account
from harness.arms.base import DnsArm
from harness.browser.base import Browser, PageLoad, SessionPolicy, start_failure
from harness.browser.starting import START_RETRIES, browser_life, start_browser
from harness.browser.warmup import REQUESTS, WarmupServer, _nginx_config, _png, warmed
from harness.errors import HarnessError

ARM = cast(DnsArm, object())  # the fake browser never reads its arm


class FlakyBrowser:
    """Starts fail with ``failures`` in turn (None: it started); what `start_browser` needs of a `Browser`."""

    def __init__(self, failures: list[str | None], session: SessionPolicy | None = None):
        self.failures, self.session = failures, session or SessionPolicy()
        self.starts = self.stops = 0

    def start(self, arm: DnsArm) -> None:
        self.starts += 1

    def start_failure(self) -> str | None:
        return self.failures[min(self.starts, len(self.failures)) - 1]

    def stop(self) -> None:
        self.stops += 1


def started(failures: list[str | None], settle_s: float = 0.0, mode: str = "fresh"):
    browser = FlakyBrowser(failures, SessionPolicy(mode))
    return browser, start_browser(cast(Browser, browser), ARM, settle_s)


def test_a_start_that_failed_for_the_harness_s_reasons_is_retried_and_each_retry_recorded():
    browser, done = started(["start: ConnectionResetError: BiDi socket lost", None])
    assert (browser.starts, browser.stops, done.retried) == (2, 1, ["start: ConnectionResetError: BiDi socket lost"])


def test_a_start_is_retried_at_most_twice_and_the_last_failure_is_left_to_the_visit():
    browser, done = started(["start: RuntimeError: geckodriver exited"] * 5)
    assert START_RETRIES == 2 and browser.starts == 3 and len(done.retried) == 2
    assert browser.stops == 2  # the third start's browser is the visit's: its load reports it, its stop ends it
    assert browser.start_failure() is not None and done.settled_s == 0.0  # never settled: it never started


def test_only_a_start_s_own_failure_counts_not_the_page_s_nor_a_spent_watchdog():
    assert start_failure(PageLoad(driver_failure="start: RuntimeError: x")) == "start: RuntimeError: x"
    assert start_failure(PageLoad(driver_failure="reuse: RuntimeError: clearing failed")) is not None
    assert start_failure(PageLoad(driver_failure="navigate: ConnectionError: x")) is None
    assert start_failure(PageLoad(driver_failure="start: x", watchdog_fired=True)) is None
    assert start_failure(PageLoad(exception="TimeoutException")) is None


def test_a_fresh_browser_settles_after_a_good_start_and_a_reused_one_never():
    _, done = started([None], settle_s=0.05)
    assert 0.05 <= done.settled_s < 1
    _, done = started([None], settle_s=0.05, mode="reused")
    assert done.settled_s == 0.0


def test_the_browser_life_names_what_the_analysis_keeps_apart():
    assert browser_life(SessionPolicy(), False) == "fresh"
    assert browser_life(SessionPolicy(settle_s=3), False) == "fresh settled 3 s"
    assert browser_life(SessionPolicy(settle_s=0.5), False) == "fresh settled 0.5 s"
    assert browser_life(SessionPolicy("reused"), True) == "reused warm-started"
    assert browser_life(SessionPolicy("reused"), False) == "reused"
    with pytest.raises(HarnessError, match="browser_settle_s 3"):
        SessionPolicy("reused", settle_s=3)
    with pytest.raises(HarnessError, match="browser_settle_s -1"):
        SessionPolicy(settle_s=-1)


def test_the_warm_up_counts_only_a_page_that_used_everything_over_http2():
    made = f"requests={REQUESTS}"
    assert warmed(f"ok protocol=h2 fonts=1 images=2 {made} items=50 height=true")
    assert not warmed(f"ok protocol=http/1.1 fonts=1 images=2 {made} items=50 height=true")
    assert not warmed(f"ok protocol=h2 fonts=0 images=2 {made} items=50 height=true")
    assert not warmed(f"ok protocol=h2 fonts=1 images=1 {made} items=50 height=true")
    assert not warmed(f"ok protocol=h2 fonts=1 images=2 requests={REQUESTS - 1} items=50 height=true")
    assert not warmed("the page said nothing ({'type': 'undefined'})")
    assert not warmed("RuntimeError: BiDi browsingContext.navigate failed: unknown error: about:certerror")


def test_the_warm_up_image_is_a_valid_png():
    data = _png(32, 32)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (kind, struct.unpack(">II", data[16:24])) == (b"IHDR", (32, 32))
    idat_at = data.index(b"IDAT")
    size = struct.unpack(">I", data[idat_at - 4 : idat_at])[0]
    assert len(zlib.decompress(data[idat_at + 4 : idat_at + 4 + size])) == 32 * (1 + 32 * 3)


def test_the_warm_up_server_listens_on_loopback_only_with_its_own_certificate(tmp_path):
    server = WarmupServer(None, Account("nobody", 65534, 65534, Path("/nonexistent")), tmp_path)
    config = _nginx_config(server.dir, 4443)
    listens = [line.strip() for line in config.splitlines() if line.strip().startswith("listen")]
    assert listens == ["listen 127.0.0.1:4443 ssl http2;"]
    assert "user " not in config and "master_process off;" in config  # one process, as the account starting it
    leaf = x509.load_pem_x509_certificate((server.dir / "cert.pem").read_bytes())
    ca = x509.load_der_x509_certificate(server.ca_der)
    assert leaf.issuer == ca.subject
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(a) for a in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert not list(server.dir.glob("*ca*key*"))  # the CA's key is never written
    for name in ("index.html", "style.css", "app.js", "image.png", "image.svg", "font.ttf"):
        assert (server.dir / "site" / name).stat().st_size > 0
