"""Chromium in the lab, all real: every arm with its proof, the fault sites, the sabotage cases of Firefox.

docs/visit.md has the net-error table these classes come from.
"""

from __future__ import annotations

import os
import signal

import pytest
from haralyzer import HarParser

from harness.browser.har import read_har
from harness.lab import faults
from harness.lab.lab import OUTSIDE_NAME
from harness.lab.zones import LAB_ZONE
from harness.visit import ONLOAD_TOLERANCE_MS, Visitor
from tests.helpers import explain, visit_retrying_harness_failures

pytestmark = pytest.mark.lab

PAGE = "https://google.com/"  # a multi-host page of the synthetic web
URL = "https://www.lab.test/"


@pytest.fixture(scope="module")
def chromium(lab, tmp_path_factory):
    return Visitor(lab, tmp_path_factory.mktemp("results"), timeout=12.0, margin=10.0, browser="chromium")


@pytest.fixture
def fault(lab):
    def apply(name: str) -> None:
        faults.apply(lab, faults.parse_fault(name, "near"))

    yield apply
    faults.clear(lab)


def _descendants_of_account(visitor: Visitor) -> list[int]:
    uid = visitor.browser.account.uid
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _uid(int(p)) == uid and _cmd(int(p)).startswith(
        b"/usr/lib/chromium")]  # fmt: skip


def _uid(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _cmd(pid: int) -> bytes:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return b""


@pytest.mark.parametrize("protocol", ["do53", "dot", "doh", "doq", "doh3"])
def test_each_arm_loads_a_page_in_chromium_and_proves_its_transport(chromium, protocol):
    result = visit_retrying_harness_failures(chromium, PAGE, protocol)
    assert result.error_class == "Successful", explain(result)
    assert result.proof["valid"], result.proof
    assert result.on_load_ms and result.fcp_ms and result.bidi_on_load_ms
    # Chromium's BiDi navigationStarted usually comes before the page's own navigation start: BiDi's onLoad is
    # later (9 to 85 ms in the lab), but once 10.5 ms earlier (doh3, clean-clone CI); never earlier by more
    # than the cross-check's own tolerance (docs/visit.md)
    assert result.bidi_on_load_ms >= result.on_load_ms - ONLOAD_TOLERANCE_MS, explain(result)
    assert result.versions["chromium"].startswith("156.") and result.versions["chromedriver"] == result.versions[
        "chromium"]  # fmt: skip
    values = result.browser_dns["values"]
    assert values["sandbox"] == "seccomp-filter"  # the renderers ran in Chromium's own sandbox
    assert result.browser_dns["differs"] == []
    secure = protocol == "doh"
    assert values["dns"]["secure_dns_modes"] == (["secure"] if secure else ["off"])
    # The built-in resolver answered (secure for DoH). Outside secure mode Chromium falls back to getaddrinfo
    # when its own client fails a lookup (seen once in CI, on a loaded host): the visit records it, and both
    # read the same resolv.conf, which the proof above shows; it stays the exception.
    paths = values["dns"]["resolver_path"]
    if secure:
        assert set(paths) == {"built-in-secure"}, paths
    else:
        assert set(paths) <= {"built-in", "system"} and paths.get("system", 0) < paths.get("built-in", 0), paths
    # A fresh Chromium asks its services' names as it starts, before the page's first name: through an encrypted
    # arm they open its connection, so the page's lookups never pay its setup (docs/visit.md).
    assert values["dns"]["own_lookups_before_page"] >= 1, values["dns"]
    assert result.har_problem is None and result.har_path
    har = read_har(result.har_path)
    HarParser(har)
    assert har["log"]["browser"]["name"] == "Chromium" and len(har["log"]["entries"]) == result.har_entries > 10
    assert _descendants_of_account(chromium) == []  # nothing of the visit's browser is left


@pytest.mark.parametrize(
    ("url", "protocol", "strict", "detail", "paper"),
    [
        (f"https://{OUTSIDE_NAME}/", "do53", "DNS Error", "net::ERR_NAME_NOT_RESOLVED", "DNS Error"),
        (f"https://{OUTSIDE_NAME}/", "doh", "DNS Error", "net::ERR_NAME_NOT_RESOLVED", "DNS Error"),
        (f"https://refused.{LAB_ZONE}/", "do53", "Other Error", "net::ERR_CONNECTION_REFUSED", "DNS Error"),
        (f"https://badcert.{LAB_ZONE}/", "do53", "Other Error", "net::ERR_CERT_AUTHORITY_INVALID", "Other Error"),
    ],
)
def test_each_lab_fault_site_gets_its_class_in_both_taxonomies(chromium, url, protocol, strict, detail, paper):
    result = chromium.visit_once(url, protocol, "near")
    assert (result.error_class, result.detail, result.paper_2019) == (strict, detail, paper), result.signal
    assert result.proof["valid"] and result.counted


def test_a_server_that_never_answers_is_a_page_load_timeout(lab, tmp_path):
    quick = Visitor(lab, tmp_path, timeout=4.0, margin=10.0, browser="chromium")
    result = quick.visit_once(f"https://hang.{LAB_ZONE}/", "do53", "near")
    assert result.error_class == "Page-load Timeout", explain(result)


SABOTAGE = [
    ("drop:dot", "dot", "dot:connect-timeout"),
    ("reject:dot", "dot", "dot:reset"),
    ("untrusted-cert", "doh", "doh:tls-auth"),
    ("wrong-name", "doh", "doh:tls-auth"),
    ("reject:doh", "doh", "doh:reset"),
    ("drop:doq", "doq", "doq:connect-timeout"),
    ("untrusted-cert", "doh3", "doh3:tls-auth"),
]


@pytest.mark.parametrize("name, protocol, detail", SABOTAGE)
def test_sabotage_is_the_protocols_counted_failure_never_a_do53_fallback(chromium, fault, name, protocol, detail):
    fault(name)
    result = chromium.visit_once(URL, protocol, "near")
    assert (result.error_class, result.detail) == ("DNS Error", detail), (result.signal, result.proof)
    assert result.counted and not result.proof["other_transport"]
    assert result.proof["client_packets"]["do53_connections"] == 0  # no query fell back to plain DNS


def test_a_dead_stub_is_our_failure_in_chromium_too(chromium, fault):
    fault("drop:dot")
    arm = chromium.arm("dot", "near")
    arm.start()
    try:
        assert arm.stub is not None
        os.kill(arm.stub.pid, signal.SIGKILL)
        result = chromium.visit(URL, arm)
    finally:
        arm.stop()
        chromium.client.restore_system_resolver()
    assert result.error_class == "Infrastructure Failure" and not result.counted
    assert result.detail.startswith("arm: ")
