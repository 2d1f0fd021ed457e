"""Visits in the lab, all real: Firefox, geckodriver, Stubby, unbound, nginx, namespaces."""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from haralyzer import HarParser

from harness import netns
from harness.browser.account import BrowserAccount
from harness.browser.chromium_session import ChromiumSession
from harness.browser.firefox import Firefox
from harness.browser.har import read_har
from harness.browser.session import FirefoxSession
from harness.browser.template import STARTUP_CACHES, WEB_STATE
from harness.lab.lab import OUTSIDE_NAME
from harness.lab.webcache import ensure_web
from harness.lab.zones import LAB_ZONE, infrastructure_names
from harness.visit import Visitor
from tests.helpers import explain, visit_retrying_harness_failures, wait_for

pytestmark = pytest.mark.lab

PAGE = "https://google.com/"  # a multi-host page of the synthetic web (top site, rank 1)
QUERY_LINE = re.compile(r"info: \S+ (\S+)\. [A-Z0-9]+ IN$")


@pytest.fixture(scope="module")
def visitor(lab, tmp_path_factory):
    return Visitor(lab, tmp_path_factory.mktemp("results"), timeout=30.0, margin=10.0)


def visit_once(visitor: Visitor, url: str, protocol: str, resolver: str = "near"):
    return visitor.visit_once(url, protocol, resolver)


def firefox(visitor: Visitor) -> Firefox:
    assert isinstance(visitor.browser, Firefox), visitor.browser
    return visitor.browser


def browser_processes(visitor: Visitor) -> list[int]:
    uid = visitor.browser.account.uid
    return [
        pid
        for pid in netns.pids_in(visitor.client.namespace)
        if os.path.exists(f"/proc/{pid}")
        and os.stat(f"/proc/{pid}").st_uid == uid
        and open(f"/proc/{pid}/stat").read().split(") ")[1][0] != "Z"
    ]


@pytest.mark.parametrize("protocol", ["do53", "dot", "doh", "doq", "doh3"])
def test_each_arm_loads_a_multi_host_page_and_proves_its_transport(visitor, protocol):
    result = visit_retrying_harness_failures(visitor, PAGE, protocol)
    assert result.error_class == "Successful", explain(result)
    assert result.counted and result.proof["valid"], result.proof
    assert result.proof["on_arm"] > 10 and result.proof["off_arm"] == 0
    # The lab's QUIC front relays DoQ and DoH3 to unbound over Do53: the resolver counts those as Do53.
    counted_as = "do53" if protocol in ("doq", "doh3") else protocol
    others = {"do53", "dot", "doh"} - {counted_as}
    assert all(result.proof["resolver_queries"][t] == 0 for t in others)
    packets = result.proof["client_packets"]
    assert packets[f"{protocol}_resolver"] > 0 and packets[f"{protocol}_answered"] > 0
    if protocol == "doh3":  # HTTP/3 and not the HTTP/2 fallback: no TCP connection to the endpoint's port
        assert packets["doh3_fallback"] == 0
    # Paint and load metrics as the page reported them, in the order a multi-host page has them.
    assert result.fcp_ms is not None and result.lcp_ms is not None, (result.fcp_ms, result.lcp_ms)
    assert 0 < result.fcp_ms <= result.lcp_ms <= result.on_load_ms
    assert result.on_content_load_ms is not None and 0 < result.on_content_load_ms <= result.on_load_ms

    har = read_har(Path(result.har_path))
    page = HarParser(har).pages[0]
    assert page.page_load_time == result.on_load_ms > 0
    hosts = {e["request"]["url"].split("/")[2] for e in har["log"]["entries"]}
    assert len(hosts) >= 5, hosts
    # A request with no outcome when the HAR is taken has no address or version: the HAR marks it (docs/visit.md).
    answered = [e for e in har["log"]["entries"] if not e.get("_unanswered")]
    assert len(answered) >= len(har["log"]["entries"]) - 3, [e["request"]["url"] for e in har["log"]["entries"]]
    assert all(e["serverIPAddress"].startswith("198.18.") for e in answered)
    assert all(e["response"]["httpVersion"] == "HTTP/2" for e in answered)
    assert not any(e["request"]["url"].startswith("data:") for e in har["log"]["entries"])
    assert result.bidi_on_load_ms is not None and result.on_load_agrees is not None


@pytest.mark.parametrize("protocol", ["do53", "dot", "doh"])
def test_nxdomain_is_a_dns_error_under_every_arm(visitor, protocol):
    result = visit_once(visitor, f"https://{OUTSIDE_NAME}/", protocol)
    assert (result.error_class, result.detail) == ("DNS Error", "dnsNotFound"), explain(result)
    assert result.proof["valid"] and result.counted  # the failing query itself went over the arm
    assert result.signal["document_uri"].startswith("about:neterror?e=dnsNotFound")


def test_connection_refused_is_other_error_and_paper_2019_calls_it_dns(visitor):
    result = visit_once(visitor, f"https://refused.{LAB_ZONE}/", "do53")
    assert (result.error_class, result.detail) == ("Other Error", "connectionFailure"), explain(result)
    assert result.paper_2019 == "DNS Error"


def test_untrusted_certificate_is_other_error_tls(visitor):
    result = visit_once(visitor, f"https://badcert.{LAB_ZONE}/", "do53")
    assert result.error_class == "Other Error", explain(result)
    assert result.signal["document_uri"].startswith("about:certerror")
    assert result.detail == "nssBadCert"


def test_server_that_never_answers_is_a_page_load_timeout_within_the_budget(lab, tmp_path):
    quick = Visitor(lab, tmp_path, timeout=4.0, margin=10.0)
    start = time.monotonic()
    result = visit_once(quick, f"https://hang.{LAB_ZONE}/", "do53")
    took = time.monotonic() - start
    assert result.error_class == "Page-load Timeout", explain(result)
    assert 4.0 <= took < 4.0 + 10.0, took


def test_a_hung_browser_is_killed_by_the_watchdog(lab, tmp_path):
    """Freeze every browser process mid-visit: the watchdog must end the visit at timeout + margin."""
    quick = Visitor(lab, tmp_path, timeout=3.0, margin=3.0)
    stop = threading.Event()

    def freeze() -> None:
        while not stop.is_set():
            for pid in browser_processes(quick):
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)

    thread = threading.Thread(target=freeze, daemon=True)
    start = time.monotonic()
    thread.start()
    try:
        result = visit_once(quick, f"https://hang.{LAB_ZONE}/", "do53")
    finally:
        stop.set()
        thread.join()
    took = time.monotonic() - start
    assert result.error_class == "Infrastructure Failure" and not result.counted, explain(result)
    assert result.signal["watchdog_fired"]
    # timeout + margin + kill and clean-up (subprocesses, slow on a loaded host); a watchdog that never fired
    # would hang the visit to its page-load timeout
    assert took < 3.0 + 3.0 + 10.0, took
    assert browser_processes(quick) == []


def test_stub_killed_before_the_visit_is_an_infrastructure_failure_not_a_dns_error(visitor):
    arm = visitor.arm("dot", "near", persistent=True)
    arm.start()
    try:
        os.kill(arm.stub.pid, signal.SIGKILL)
        deadline = time.monotonic() + 3  # SIGKILL is delivered asynchronously
        while arm.stub.alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        result = visitor.visit(PAGE, arm)
    finally:
        arm.stop()
    assert result.error_class == "Infrastructure Failure", explain(result)
    assert not result.counted and not result.proof["valid"]
    assert result.detail.startswith("arm: ")


def test_persistent_stub_keeps_one_tls_connection_across_visits(visitor):
    """With a persistent stub the second visit opens no new connection to the resolver; a fresh stub does."""
    arm = visitor.arm("dot", "near", persistent=True)
    arm.start()
    try:
        first = visitor.visit(PAGE, arm)
        second = visitor.visit(PAGE, arm)
    finally:
        arm.stop()
    assert first.error_class == second.error_class == "Successful"
    assert first.arm["stub_persistent"]
    fresh = visit_once(visitor, PAGE, "dot")
    # Connections opened to the resolver's port 853 during each visit (SYNs counted in the client namespace).
    assert first.proof["client_packets"]["dot_connections"] >= 1
    assert second.proof["client_packets"]["dot_connections"] == 0
    assert fresh.proof["client_packets"]["dot_connections"] >= 1


def lab_names(lab) -> set[str]:
    _, host_domain = ensure_web(lab.config)
    return set(host_domain) | set(host_domain.values()) | set(infrastructure_names(lab.config))


def test_a_lab_visit_queries_no_name_outside_the_lab(lab, visitor):
    log = Path(lab.run_dir / "logs" / "resolver-near.log")
    offset = log.stat().st_size
    result = visit_once(visitor, PAGE, "do53")
    assert result.error_class == "Successful"
    time.sleep(0.5)
    names = set()
    with open(log) as f:
        f.seek(offset)
        for line in f:
            match = QUERY_LINE.search(line.strip())
            if match:
                names.add(match.group(1).lower())
    assert len(names) > 10
    assert names - lab_names(lab) == set()


def test_fifty_visits_leave_nothing_behind(lab, visitor):
    fds_before = len(os.listdir("/proc/self/fd"))
    classes = []
    for i in range(50):
        protocol = ("do53", "dot", "doh")[i % 3]
        classes.append(visit_once(visitor, PAGE, protocol).error_class)
    assert classes.count("Successful") == 50, classes
    assert browser_processes(visitor) == []
    assert [
        pid
        for pid in netns.pids_in(visitor.client.namespace)
        if Path(f"/proc/{pid}/comm").read_text().strip() == "stubby"
    ] == []
    assert list((lab.run_dir / "visits").iterdir()) == []
    assert len(os.listdir("/proc/self/fd")) <= fds_before + 2
    account = BrowserAccount.lookup()
    leftover = [p for p in Path("/tmp").glob("rust_mozprofile*") if p.owner() == account.name]
    assert leftover == []


def test_the_template_holds_firefox_s_startup_caches_and_no_web_state(visitor):
    template = firefox(visitor).template
    assert {name: (template / name).stat().st_size > 0 for name in STARTUP_CACHES} == dict.fromkeys(
        STARTUP_CACHES, True
    )
    assert [name for name in WEB_STATE if (template / name).exists()] == []


def _runs_as(pid: int, program: str, uid: int) -> bool:
    """Whether process ``pid`` runs ``program`` as ``uid`` (its real uid, /proc's status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return False
    uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
    return comm == program and int(uids[0]) == uid


def test_a_browser_session_on_the_host_kills_the_host_s_browsers_not_the_lab_s(lab, visitor, tmp_path):
    sleep = visitor.browser.account.setpriv(["sleep", "60"])
    in_lab = subprocess.Popen(netns.command(visitor.client.namespace, sleep), start_new_session=True)
    on_host = subprocess.Popen(sleep, start_new_session=True)
    try:
        # Both have dropped root once they run as the browser's account (setpriv execs sleep in the same pid).
        uid = visitor.browser.account.uid
        for pid in (in_lab.pid, on_host.pid):
            wait_for(functools.partial(_runs_as, pid, "sleep", uid), 10, "sleep as the browser's account")
        assert any(Path(f"/proc/{pid}/comm").read_text().strip() == "sleep" for pid in browser_processes(visitor))
        FirefoxSession(visitor.browser.account, firefox(visitor).template, None, tmp_path).kill()
        assert on_host.wait(timeout=5) == -signal.SIGKILL
        assert in_lab.poll() is None
    finally:
        for proc in (in_lab, on_host):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert browser_processes(visitor) == []


def test_the_visitor_gives_its_dot_arms_the_study_s_stub_idle_timeout(lab, tmp_path):
    visitor = Visitor(lab, tmp_path, stub_idle_timeout_ms=2500)
    arm = visitor.arm("dot", "near")
    assert arm.idle_timeout_ms == 2500 and arm.describe()["idle_timeout_ms"] == 2500


@pytest.mark.parametrize("profile", ["profiles/firefox/dns-current.toml", "profiles/firefox/dns-2019.toml"])
def test_every_visit_records_the_dns_preferences_the_running_browser_holds(lab, tmp_path, profile):
    """The study's DNS profile reaches the browser: the values read back from its preference service
    (what about:config shows) equal the profile's, and a DoH visit loads with them."""
    from harness.browser.prefs import load_prefs

    chosen = Visitor(lab, tmp_path, timeout=30.0, margin=10.0, browser_dns=profile)
    result = chosen.visit_once(PAGE, "doh", "near")
    assert result.error_class == "Successful", result.detail
    wanted = load_prefs(profile).as_dict()
    record = result.browser_dns
    assert record["profile"] == profile and record["differs"] == []
    assert record["values"] == wanted  # every name read back, none missing, none different


def test_the_dot_stub_is_a_choice_and_dnsproxy_proves_dot_like_stubby(lab, tmp_path):
    chosen = Visitor(lab, tmp_path, timeout=30.0, margin=10.0, stubs={"dot": "dnsproxy"})
    result = chosen.visit_once(PAGE, "dot", "near")
    assert result.error_class == "Successful", result.detail
    assert result.proof["valid"] and result.arm["stub"] == "dnsproxy"
    assert result.proof["resolver_queries"]["dot"] > 10


@pytest.mark.parametrize("browser", ["firefox", "chromium"])
def test_a_visit_that_records_no_request_still_loads_proves_its_arm_and_times_the_page(
    lab, tmp_path, monkeypatch, browser
):
    """`network_events = "none"` (what the instrumentation benchmark compares against): BiDi's navigation events
    and Navigation Timing only, so the HAR has the page and no entry, and the arm's proof is the counters'."""
    session = {"firefox": FirefoxSession, "chromium": ChromiumSession}[browser]
    monkeypatch.setattr(session, "network_events", "none")
    quiet = Visitor(lab, tmp_path, timeout=30.0, margin=10.0, browser=browser)
    result = visit_retrying_harness_failures(quiet, PAGE, "doh")
    assert result.error_class == "Successful", explain(result)
    assert result.proof["valid"] and result.on_load_ms
    har = read_har(Path(result.har_path))
    assert har["log"]["entries"] == [] and har["log"]["pages"][0]["pageTimings"]["onLoad"] == result.on_load_ms
