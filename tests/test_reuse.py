"""A browser reused for many visits, and the resolver connection warm or cold: all real, in the lab.

Each clearing is shown the same way: a visit leaves the state (or the test puts it there, through the
page or Firefox's own services), a control shows the test can see it, and the next visit has no trace.
Tests that need no browser's own services run in both browsers (`BROWSERS`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import ipaddress
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import dns.message
import dns.query
import pytest
from selenium.common.exceptions import WebDriverException

from harness import netns
from harness.arms import evidence
from harness.arms.base import DnsArm
from harness.arms.evidence import client_counters, reset_client_counters, resolver_counters
from harness.browser import reused as reused_module  # its DNS_SETTLE_S, shortened
from harness.browser import webdriver_session as session_module  # where the BiDi event log is made
from harness.browser.base import Browser, PageLoad, SessionPolicy
from harness.browser.chromium import Chromium
from harness.browser.chromium_reused import IDLE_STEP_S, IDLE_STEPS
from harness.browser.firefox import Firefox
from harness.browser.firefox_reused import REUSED_PREFS, ReusedFirefoxSession
from harness.browser.registry import browser_class
from harness.browser.reused import READY_LIMIT_S, dns_queries_in_flight, process_state
from harness.browser.scripts import script
from harness.browser.session import FirefoxSession
from harness.errors import HarnessError
from harness.lab import faults
from harness.lab.nginx import STATE_PREFIX
from harness.lab.zones import LAB_ZONE
from harness.visit import Visitor
from tests.helpers import explain, wait_for

pytestmark = pytest.mark.lab

PAGE = "https://google.com/"  # a multi-host page of the synthetic web
#: The browsers that can be reused: a test that looks at nothing browser-specific runs in each.
BROWSERS = ["firefox", "chromium"]

# Firefox, chrome context, asynchronous: what about:networking shows (harness-independent, Firefox's own view).
DNS_CACHE = """const done = arguments[arguments.length - 1];
Cc["@mozilla.org/network/dashboard;1"].getService(Ci.nsIDashboard)
  .requestDNSInfo({ onDashboardDataAvailable(data) { done(data.entries.map(e => e.hostname)); } });"""
ADDRESSES = """const [host, done] = arguments;
Cc["@mozilla.org/network/dashboard;1"].getService(Ci.nsIDashboard).requestDNSInfo({ onDashboardDataAvailable(data) {
  done(data.entries.filter(e => e.hostname == host).flatMap(e => e.hostaddr)); } });"""
SOCKETS = """const done = arguments[arguments.length - 1];
Cc["@mozilla.org/network/dashboard;1"].getService(Ci.nsIDashboard)
  .requestSockets({ onDashboardDataAvailable(data) {
    done(data.sockets.filter(s => s.type == "TCP" && s.port == 443).map(s => s.host)); } });"""
# The lab's server says no-store (a fresh browser's design needs no cache): the test puts an entry in the
# HTTP cache itself, as a visit to a cacheable site would, and looks for it.
HTTP_CACHE = """const done = arguments[arguments.length - 1];
const storage = Services.cache2.diskCacheStorage(Services.loadContextInfo.default);
const uri = Services.io.newURI("https://google.com/dnsstudy-cached");
if (!arguments[0]) return done(storage.exists(uri, ""));
storage.asyncOpenURI(uri, "", Ci.nsICacheStorage.OPEN_NORMALLY, {
  onCacheEntryCheck() { return Ci.nsICacheEntryOpenCallback.ENTRY_WANTED; },
  onCacheEntryAvailable(entry, isNew, status) {
    const out = entry.openOutputStream(0, -1);
    out.write("x", 1);
    out.close();
    entry.setMetaDataElement("dnsstudy", "1");
    done(storage.exists(uri, ""));
  },
});"""
HSTS = """const sss = Cc["@mozilla.org/ssservice;1"].getService(Ci.nsISiteSecurityService);
const uri = Services.io.newURI(arguments[0]);
if (arguments[1]) sss.processHeader(uri, "max-age=100000", {});
return sss.isSecureURI(uri, {});"""
# Chrome: Firefox's HTTPS-Only mode on (arguments[0] true) or off: it upgrades an http:// URL by an internal
# redirect, whose first channel never connects.
HTTPS_ONLY = 'Services.prefs.setBoolPref("dom.security.https_only_mode", arguments[0]); return true;'
# Chrome: with arguments[0], every response of google.com from now on says an alternative service, as a site's
# would (the lab's server sends none); without, no more. Then the alt-svc mappings Firefox keeps, by key.
ALT_SVC = """if (arguments[0]) {
  window.__dnsstudyAltSvc = { observe(channel) {
    channel.QueryInterface(Ci.nsIHttpChannel);
    if (channel.URI.host == "google.com")
      channel.setResponseHeader("Alt-Svc", 'h2="www.google.com:443"; ma=3600', false);
  } };
  Services.obs.addObserver(window.__dnsstudyAltSvc, "http-on-examine-response");
} else Services.obs.removeObserver(window.__dnsstudyAltSvc, "http-on-examine-response");"""
ALT_SVC_KEYS = """return Cc["@mozilla.org/network/protocol;1?name=http"]
  .getService(Ci.nsIHttpProtocolHandler).altSvcCacheKeys;"""
# Content: what the page's origin keeps between loads, if anything.
LEAVE = """document.cookie = "dnsstudy=1; max-age=3600; path=/";
localStorage.setItem("dnsstudy", "1");
const done = arguments[arguments.length - 1];
caches.open("dnsstudy").then(c => c.put("/dnsstudy-cached", new Response("x")))
  .then(() => done(true), e => done(String(e)));"""
# Chrome: every idle connection closes (the clearing's own call, here alone: no TLS session is forgotten).
PRUNE = 'Services.obs.notifyObservers(null, "net:prune-all-connections");'
# Content: hints to hosts the page does not use itself, as a page's <head> may carry (a lab web server, and a
# name of the synthetic web): a speculative connection, and a name resolved in advance.
HINTS = """for (const [rel, href] of [["preconnect", "https://www.lab.test"], ["dns-prefetch", "//youtube.com"]]) {
  const link = document.createElement("link");
  link.rel = rel;
  link.href = href;
  document.head.append(link);
}"""
FIND = """const done = arguments[arguments.length - 1];
const found = caches => done({cookie: document.cookie, storage: localStorage.getItem("dnsstudy"), caches: caches});
caches.keys().then(found, e => found(String(e)));"""

# Chrome: the server certificates the BiDi network observer describes (each response's security details), in
# order, by fingerprint, each with whether the observer had it decoded already. Its cache is private to it: the
# test sees it through the one function it is passed to, wrapped on the first call. Each call returns the list
# so far and starts a new one.
CERTIFICATES = """const { NetworkHelper } = ChromeUtils.importESModule(
  "resource://devtools/shared/network-observer/NetworkHelper.sys.mjs");
if (!window.__dnsstudyCerts) {
  const parse = NetworkHelper.parseCertificateInfo;
  window.__dnsstudyCerts = [];
  NetworkHelper.parseCertificateInfo = function (cert, cache) {
    if (cert) window.__dnsstudyCerts.push([cert.sha256Fingerprint, cache.has(cert.sha256Fingerprint)]);
    return parse.call(this, cert, cache);
  };
}
return window.__dnsstudyCerts.splice(0);"""

# Chrome context: start resolving a name and return at once (the lookup goes on in one of Firefox's DNS threads).
RESOLVE_LATER = """Services.dns.asyncResolve(arguments[0], Ci.nsIDNSService.RESOLVE_TYPE_DEFAULT,
  Ci.nsIDNSService.RESOLVE_BYPASS_CACHE, null, { onLookupComplete() {} }, Services.tm.mainThread, {});"""
# The server side drops DNS over UDP for a moment: a query sent then is answered only by glibc's retry, 5 s later.
DROP_DNS = "table inet dnsstudy_test { chain input { type filter hook input priority -10; udp dport 53 drop; }; }"


def served(lab, offset: int, urls: set[str]) -> dict[int, str]:
    """The connections of the requests nginx logged from byte `offset` of its access log on, each by its number
    with "r" if its TLS session was resumed ("." if not), once every URL of `urls` is among them (nginx writes
    its log a second late, and each worker its own lines). By path: the log names a connection's server name,
    which Firefox uses for every host whose address and certificate the connection has too. The favicon aside:
    the same tab loading a page again takes it from Firefox's favicon cache."""
    log = Path(lab.run_dir) / "logs" / "nginx-access.log"
    paths = {urlsplit(u)._replace(scheme="", netloc="").geturl() for u in urls} - {"/favicon.ico"}
    found: dict[str, tuple[int, str]] = {}

    def read() -> bool:
        with log.open("rb") as f:
            f.seek(offset)
            text = f.read().decode()
        for line in text.splitlines(keepends=True):
            if line.endswith("\n"):  # written whole
                head, request, tail = line.split('"', 2)
                connection, resumed = tail.split()[-2:]
                if request.split()[1] in paths:  # a late line of the load before (its favicon) is not this load's
                    found[request.split()[1]] = (int(connection), resumed)
        return paths <= found.keys()

    wait_for(read, 15, f"nginx to log the page's {len(paths)} requests")
    return dict(found.values())


def log_size(lab) -> int:
    return (Path(lab.run_dir) / "logs" / "nginx-access.log").stat().st_size


@pytest.fixture
def reused(lab, tmp_path):
    visitors: list[Visitor] = []

    def make(
        connection: str = "cold", session: str = "reused", browser: str = "firefox", page_http3: bool = False, **policy
    ) -> Visitor:
        policy_ = SessionPolicy(session, **policy)
        visitors.append(
            Visitor(
                lab, tmp_path, session=policy_, resolver_connection=connection, browser=browser, page_http3=page_http3
            )
        )
        return visitors[-1]

    yield make
    for visitor in visitors:
        visitor.close()


def firefox_pids(visitor: Visitor) -> set[int]:
    """The browser account's Firefox processes in the client namespace (the parent and its children)."""
    uid = visitor.browser.account.uid
    found = set()
    for pid in netns.pids_in(visitor.client.namespace):
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid and Path(f"/proc/{pid}/comm").read_text().startswith("firefox"):
                found.add(pid)
        except OSError:
            pass
    return found


def parent_pid(visitor: Visitor) -> int:
    """The Firefox parent process: the one whose parent is not Firefox."""
    pids = firefox_pids(visitor)
    ppid = {p: int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1]) for p in pids}
    return next(p for p in pids if ppid[p] not in pids)


def dead(pid: int) -> bool:
    """Gone, or a zombie: SIGKILL is delivered at once, the process ends a moment later (on CI's loaded run, a
    visit begun in that moment found a browser that died under it: the harness's failure, as it should be)."""
    return process_state(pid) in ("Z", "X", None)


def requested(load) -> set[str]:
    """The URLs a load's responses were for."""
    return {e["params"]["request"]["url"] for e in load.events if e["method"] == "network.responseCompleted"}


def fetched(load) -> set[str]:
    """The URLs a load's responses came from the network for (not from a cache)."""
    return {
        e["params"]["request"]["url"]
        for e in load.events
        if e["method"] == "network.responseCompleted" and not e["params"]["response"].get("fromCache")
    }


@contextlib.contextmanager
def do53_arm_and_browser(visitor: Visitor) -> Iterator[tuple[DnsArm, Browser]]:
    """The near resolver's Do53 arm, started, and the visitor's reused browser; both closed after the block."""
    arm = visitor.arm("do53", "near")
    arm.start()
    try:
        yield arm, visitor.browser
    finally:
        visitor.browser.close()
        arm.stop()
        visitor.client.restore_system_resolver()


def loaded(browser: Browser, url: str = PAGE) -> PageLoad:
    """The browser's load of ``url``, which must have reached the page."""
    load = browser.load(url)
    assert load.driver_failure is None and load.exception is None, load
    return load


def begin_visit(visitor: Visitor, arm: DnsArm):
    """Begin the reused browser's next visit (cleared, a new user context); its driver, for chrome scripts."""
    visitor.browser.start(arm)
    return session_of(visitor)._driver


def keep_tab_after_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reused browser's visit keeps its tab until the visit ends, for a test that drives it after the load (the
    harness closes it at the collection: `close_tab_at_collection`)."""
    from harness.browser.chromium_reused import ReusedChromiumSession
    from harness.browser.firefox_reused import ReusedFirefoxSession

    for session in (ReusedChromiumSession, ReusedFirefoxSession):
        monkeypatch.setattr(session, "close_tab_at_collection", False)


def session_of(visitor: Visitor):
    browser = visitor.browser
    assert isinstance(browser, Firefox | Chromium) and browser._reused is not None
    return browser._reused


def browser_pid(visitor: Visitor) -> int:
    """The reused browser's main process (its driver's child), in either browser."""
    pid = session_of(visitor)._browser_pid
    assert pid is not None
    return pid


def restarts_for_dns(browser: str, protocols: list[str]) -> list[bool]:
    """Whether each visit of ``protocols`` in a row (resolver near) starts a new browser for its DNS settings, as
    the browser's launch groups say, which the plan uses (Chromium's are fixed at launch, Firefox's set per visit):
    the lab test holds them against the restarts that happen."""
    kind = [browser_class(browser).launch_group(p, "near") for p in protocols]
    return [i > 0 and kind[i] != kind[i - 1] for i in range(len(kind))]


@pytest.mark.parametrize("browser", BROWSERS)
def test_one_browser_serves_every_arm_in_turn_and_each_visit_proves_its_transport(reused, browser):
    visitor = reused(browser=browser)
    protocols = ["do53", "dot", "doh", "do53", "doq", "doh3", "dot", "do53"]
    results, pids = [], []
    for protocol in protocols:
        results.append(visitor.visit_once(PAGE, protocol, "near"))
        pids.append(browser_pid(visitor))
    for protocol, result in zip(protocols, results, strict=True):
        # Do53 after a stub arm (and the reverse) shows the browser follows each arm's resolv.conf and prefs.
        assert result.error_class == "Successful" and result.proof["valid"], (protocol, result.detail)
        assert result.proof["on_arm"] > 10 and result.proof["off_arm"] == 0, result.proof
        assert result.browser_session == "reused warm-started" and result.resolver_connection == "cold"
    # Firefox takes each arm's preferences while it runs; Chromium is replaced when secure DNS changes.
    restarts, ordinals = restarts_for_dns(browser, protocols), list[int]()
    for restart in restarts:
        ordinals.append(1 if restart or not ordinals else ordinals[-1] + 1)
    assert [r.session_ordinal for r in results] == ordinals
    assert [r.browser_restart is not None for r in results] == restarts, [r.browser_restart for r in results]
    assert all(r.browser_restart is None or " to " in r.browser_restart for r in results), results
    assert [pids[i] != pids[i - 1] for i in range(1, len(pids))] == restarts[1:]
    # The browser's start loaded the warm-up page, recorded with its first visit (and a replacement's).
    for result, restart in zip(results, restarts, strict=True):
        warmup = result.browser_warmup
        if result is results[0] or restart:
            assert warmup is not None and warmup["ok"] and warmup["detail"].startswith("ok protocol=h2"), warmup
            assert "warm_start" in result.phases and "browser_start" in result.phases
        else:  # the others clear a running browser
            assert warmup is None and "browser_start" not in result.phases, result.phases
    assert all("clear" in r.phases for r in results)
    # Before each navigation Firefox's pool of preallocated content processes was full (a visit that found it
    # short launched a process inside its page load); Chromium's renderers were idle (a new tab's renderer
    # starts for about 0.45 s after the tab is made, and a page navigated then loaded 1.5x slower).
    for result in results:
        ready = result.browser_ready
        # the last poll may end past the limit by a step and a read of /proc
        assert ready is not None and 0 <= ready["waited_s"] <= READY_LIMIT_S + 0.5 and "ready" in result.phases, ready
        assert ready["dns_in_flight_before"] == ready["dns_in_flight_after"] == 0, ready  # every wait settled
        # A later visit's tab was opened before it (`open_next_tab`), from the visit before's collection on: once
        # its page, requests and events were read (Firefox) or its part of the net log fixed (Chromium).
        assert ready["tab_opened_before"] == (result.session_ordinal > 1), (result.session_ordinal, ready)
        if browser == "firefox":
            assert 1 <= ready["wanted"] <= ready["content_processes"], ready
        else:
            assert ready["renderers_idle"] and ready["renderers"] >= 1, ready
            assert ready["waited_s"] >= IDLE_STEP_S * IDLE_STEPS, ready  # two quiet steps at the least
    if browser == "chromium":  # each visit's part of the browser's net log: its own resolver's answers
        for protocol, result in zip(protocols, results, strict=True):
            dns = result.browser_dns["values"]["dns"]
            path = "built-in-secure" if protocol == "doh" else "built-in"
            assert dns["resolver_path"].get(path, 0) > 10 and result.browser_dns["differs"] == [], (protocol, dns)
            # its own lookups that came before the page's in the visit's part, counted (0 at most later visits)
            assert isinstance(dns["own_lookups_before_page"], int), dns
            assert result.browser_ready["netlog_flushed"], result.browser_ready  # every event of the page written


def web_connections(visitor: Visitor) -> int:
    """The browser account's established TCP connections to port 443 in the client namespace, from the kernel's
    own table (either browser; Chromium's renderers have no sockets of their own)."""
    uid, count = visitor.browser.account.uid, 0
    for pid in netns.pids_in(visitor.client.namespace)[:1]:  # one process is enough: the table is the namespace's
        for table in ("tcp", "tcp6"):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()  # sl local rem st ... uid
                if fields[3] == "01" and int(fields[2].rsplit(":", 1)[1], 16) == 443 and int(fields[7]) == uid:
                    count += 1
    return count


@pytest.mark.parametrize("browser", BROWSERS)
def test_each_visit_finds_no_cookie_storage_or_connection_and_fetches_every_resource_again(
    reused, browser, monkeypatch
):
    keep_tab_after_load(monkeypatch)
    visitor = reused(browser=browser)
    with do53_arm_and_browser(visitor) as (arm, browser_):
        browser_.start(arm)
        first = loaded(browser_)
        driver = session_of(visitor)._driver
        assert driver.execute_async_script(LEAVE) is True
        # CONTROL: the page's origin keeps them, and the visit's connections are open.
        assert driver.execute_async_script(FIND) == {"cookie": "dnsstudy=1", "storage": "1", "caches": ["dnsstudy"]}
        left = web_connections(visitor)
        assert left > 0
        browser_.stop()

        begin_visit(visitor, arm)  # the next visit: a new user context
        at_next = web_connections(visitor)
        second = loaded(browser_)
        assert session_of(visitor)._driver.execute_async_script(FIND) == {"cookie": "", "storage": None, "caches": []}
        assert fetched(second) == fetched(first) == requested(second), (fetched(first), fetched(second))
        browser_.stop()
    print(f"web connections: after the visit {left}, at the next {at_next}")
    assert at_next == 0


def test_each_visit_queries_every_name_again_and_finds_no_cache_cookie_storage_or_connection(reused, monkeypatch):
    keep_tab_after_load(monkeypatch)  # the test drives the tab after the load
    visitor = reused()
    with do53_arm_and_browser(visitor) as (arm, browser):
        browser.start(arm)
        first = loaded(browser)
        driver = session_of(visitor)._driver
        assert driver.execute_async_script(LEAVE) is True
        assert driver.execute_async_script(FIND) == {
            "cookie": "dnsstudy=1",
            "storage": "1",
            "caches": ["dnsstudy"],
        }
        # The preferences of a browser that serves many visits are the running browser's (its DNS threads, its
        # pool's refill).
        assert FirefoxSession._in_chrome(driver, script("read-prefs"), list(REUSED_PREFS)) == REUSED_PREFS
        with netns.entered(visitor.client.namespace):
            cached_names = FirefoxSession._in_chrome_async(driver, DNS_CACHE)
            open_sockets = FirefoxSession._in_chrome_async(driver, SOCKETS)
            assert FirefoxSession._in_chrome_async(driver, HTTP_CACHE, True) is True
            assert FirefoxSession._in_chrome(driver, HSTS, PAGE, True) is True
        assert "www.google.com" in cached_names and open_sockets, (cached_names, open_sockets)
        browser.stop()

        driver = begin_visit(visitor, arm)  # the next visit: cleared, a new user context
        with netns.entered(visitor.client.namespace):
            assert FirefoxSession._in_chrome_async(driver, DNS_CACHE) == []
            assert FirefoxSession._in_chrome_async(driver, SOCKETS) == []
            assert FirefoxSession._in_chrome_async(driver, HTTP_CACHE, False) is False
            assert FirefoxSession._in_chrome(driver, HSTS, PAGE, False) is False
        second = loaded(browser)
        assert driver.execute_async_script(FIND) == {"cookie": "", "storage": None, "caches": []}
        # Every resource came from the server: Firefox also reports an image a document uses twice as a cache
        # hit (a fresh browser's first visit too), but only after that visit fetched it over the network.
        assert fetched(second) == fetched(first) == requested(second), (fetched(first), fetched(second))
        browser.stop()


def test_no_tls_session_of_a_visit_is_resumed_by_the_next(reused, lab, monkeypatch):
    keep_tab_after_load(monkeypatch)  # the test drives the tab after the load
    visitor = reused()
    with do53_arm_and_browser(visitor) as (arm, browser):
        browser.start(arm)
        offset = log_size(lab)
        first = loaded(browser)
        urls = fetched(first)
        opened = served(lab, offset, urls)
        driver = session_of(visitor)._driver
        with netns.entered(visitor.client.namespace):
            # CONTROL: in the visit's own tab and user context, its connections closed, the page again: Firefox
            # resumes the TLS sessions of the first load on the new connections.
            FirefoxSession._in_chrome(driver, PRUNE)
            wait_for(lambda: FirefoxSession._in_chrome_async(driver, SOCKETS) == [], 10, "the connections to close")
            offset = log_size(lab)
            driver.get(PAGE)
            control = served(lab, offset, urls)
            # The clearing alone, in the same tab and user context: the page again resumes nothing.
            assert "error" not in FirefoxSession._in_chrome_async(driver, script("clear-state"))
            offset = log_size(lab)
            driver.get(PAGE)
            cleared = served(lab, offset, urls)
        browser.stop()

        browser.start(arm)  # the next visit: cleared, a new user context
        offset = log_size(lab)
        second = loaded(browser)
        after = served(lab, offset, fetched(second))
        browser.stop()
    print(f"resumed/connections: first {_resumed(opened)}, control {_resumed(control)}, ", end="")
    print(f"cleared {_resumed(cleared)}, next visit {_resumed(after)}")
    assert "r" in control.values() and control.keys().isdisjoint(opened), (opened, control)
    assert cleared and "r" not in cleared.values(), cleared
    assert after and "r" not in after.values(), after


def test_no_tls_session_of_a_chromium_visit_is_resumed_by_the_next(reused, lab, monkeypatch):
    """Chromium has no call that closes its connections: the control closes them from the kernel (`ss -K`)."""
    keep_tab_after_load(monkeypatch)
    visitor = reused(browser="chromium")
    with do53_arm_and_browser(visitor) as (arm, browser):
        browser.start(arm)
        offset = log_size(lab)
        first = loaded(browser)
        urls = fetched(first)
        opened = served(lab, offset, urls)
        driver = session_of(visitor)._driver
        # CONTROL: in the visit's own tab and user context, its connections closed, the page again: Chromium
        # resumes the TLS sessions of the first load on the new connections.
        kill = ["ss", "-K", "state", "established", "(", "dport", "=", ":443", ")"]
        netns.run(visitor.client.namespace, kill)
        wait_for(lambda: web_connections(visitor) == 0, 10, "the connections to close")
        offset = log_size(lab)
        with netns.entered(visitor.client.namespace):
            driver.get(PAGE)
        control = served(lab, offset, urls)
        browser.stop()

        browser.start(arm)  # the next visit: a new user context
        offset = log_size(lab)
        second = loaded(browser)
        after = served(lab, offset, fetched(second))
        browser.stop()
    print(f"resumed/connections: first {_resumed(opened)}, control {_resumed(control)}, next visit {_resumed(after)}")
    assert "r" in control.values() and control.keys().isdisjoint(opened), (opened, control)
    assert after and "r" not in after.values(), after


def _resumed(connections: dict[int, str]) -> str:
    return f"{list(connections.values()).count('r')}/{len(connections)}"


def test_no_alt_svc_mapping_of_a_visit_is_left_to_the_next(reused):
    visitor = reused()
    with do53_arm_and_browser(visitor) as (arm, browser):
        driver = begin_visit(visitor, arm)
        with netns.entered(visitor.client.namespace):
            FirefoxSession._in_chrome(driver, ALT_SVC, True)
            try:
                first = browser.load(PAGE)
            finally:
                FirefoxSession._in_chrome(driver, ALT_SVC, False)
            assert first.driver_failure is None and first.exception is None, first
            # CONTROL: Firefox keeps the mapping the page's responses gave.
            wait_for(lambda: FirefoxSession._in_chrome(driver, ALT_SVC_KEYS), 10, "an alt-svc mapping")
            kept = FirefoxSession._in_chrome(driver, ALT_SVC_KEYS)
            browser.stop()

            driver = begin_visit(visitor, arm)  # the next visit: cleared, a new user context
            left = FirefoxSession._in_chrome(driver, ALT_SVC_KEYS)
        browser.stop()
    print(f"alt-svc keys: after the visit {kept}, at the next {left}")
    assert any(":google.com:443:" in k for k in kept) and left == [], (kept, left)


# The lab host's paths that leave state (harness/lab/nginx.py, `STATE_HEADERS`): Chromium has no chrome context
# a test could write or read HSTS, the HTTP cache or alt-svc through, so the server says them, as a site would.
STATE = f"https://www.{LAB_ZONE}{STATE_PREFIX}"
#: The same page over http: nothing listens on port 80, so only an upgrade inside the browser reaches it.
PLAIN_STATE = f"http://www.{LAB_ZONE}{STATE_PREFIX}"
# Content, asynchronous: fetch a URL of the page's origin, then the transfer size of each fetch of it so far
# (Resource Timing: 0 for an answer from the HTTP cache).
FETCH = """const [url, done] = arguments;
fetch(url).then(r => r.text()).then(() => {
  done(performance.getEntriesByName(new URL(url, location.href).href).map(e => e.transferSize));
}, e => done(String(e)));"""
#: net/base/net_error_list.h: ERR_CONNECTION_REFUSED.
REFUSED = -102
#: The client namespace counts its UDP datagrams to the lab host's port 443 (QUIC): no server listens there.
QUIC_COUNTER = "dnsstudy_quic"


def netlog_events(visitor: Visitor) -> list[tuple[str, dict, int]]:
    """The reused Chromium's net log since the visit began, all of it written (the harness's own flush): each
    event's type name, parameters and source (a request's id)."""
    data = session_of(visitor)._visit_part()
    assert data is not None
    names = {number: name for name, number in data["constants"]["logEventTypes"].items()}
    return [(names.get(e["type"], ""), e.get("params", {}), e["source"]["id"]) for e in data.get("events", [])]


def hsts_upgrades(events: list[tuple[str, dict, int]]) -> list[str]:
    """Where the net log's HSTS internal redirects led (net's URLRequestRedirectJob, reason HSTS; Chromium's
    HTTPS-Upgrades say another reason)."""
    found = []
    for name, params, _ in events:
        headers = params.get("headers", [])
        if name == "URL_REQUEST_FAKE_RESPONSE_HEADERS_CREATED" and "Non-Authoritative-Reason: HSTS" in headers:
            found += [h.split(": ", 1)[1] for h in headers if h.startswith("Location: ")]
    return found


def cache_reads(events: list[tuple[str, dict, int]], url: str) -> list[bool]:
    """Each request of ``url`` in the net log, in order: whether the HTTP cache answered it (it read the cache's
    entry and sent no request to the server)."""
    sources = [s for name, params, s in events if name == "URL_REQUEST_START_JOB" and params.get("url") == url]
    kinds = {source: {name for name, _, s in events if s == source} for source in sources}
    return [
        "HTTP_CACHE_READ_INFO" in kinds[source] and "HTTP_TRANSACTION_SEND_REQUEST" not in kinds[source]
        for source in sources
    ]


def alternatives(events: list[tuple[str, dict, int]]) -> dict[str, list]:
    """What the net log says of alternative services: the ones found for a request, and the stream jobs that
    went to one (QUIC sessions to the alternative)."""
    found = [p["alt_svc"] for n, p, _ in events if n == "HTTP_STREAM_JOB_CONTROLLER_ALT_SVC_FOUND"]
    jobs = [p["destination"] for n, p, _ in events if n == "HTTP_STREAM_JOB" and p.get("type") == "alternative"]
    return {"found": found, "jobs": jobs}


def navigated(driver, url: str) -> str:
    """Where a classic WebDriver navigation to ``url`` ended: the state page's URL if it reached it, else its net
    error (chromedriver names it, but not every time: then the error page's URL)."""
    try:
        driver.get(url)
    except WebDriverException as e:
        error = re.search(r"net::ERR_[A-Z_]+", str(e))
        return error.group(0) if error else str(e)
    reached = driver.execute_script("return document.title") == "dnsstudy state"
    return driver.current_url if reached else f"an error page at {driver.current_url}"


def request_errors(events: list[tuple[str, dict, int]], url: str) -> list[list[int]]:
    """Each request of ``url`` in the net log, in order: the net errors its events say (none for a redirect)."""
    sources = [s for name, params, s in events if name == "URL_REQUEST_START_JOB" and params.get("url") == url]
    return [sorted({p["net_error"] for _, p, s in events if s == source and p.get("net_error")}) for source in sources]


def requests_logged(lab, offset: int, path: str, at_least: int) -> int:
    """How many requests of ``path`` nginx logged from byte ``offset`` of its access log on, once it logged
    ``at_least`` and then wrote its buffer once more (it flushes every second)."""
    log = Path(lab.run_dir) / "logs" / "nginx-access.log"

    def count() -> int:
        with log.open("rb") as f:
            f.seek(offset)
            lines = f.read().decode().splitlines(keepends=True)
        return sum(1 for line in lines if line.endswith("\n") and line.split('"')[1].split()[1] == path)

    wait_for(lambda: count() >= at_least, 15, f"nginx to log {at_least} requests of {path}")
    time.sleep(1.5)
    return count()


def quic_datagrams(namespace: str) -> int:
    """The datagrams the client namespace sent to the lab host's UDP port 443 (`QUIC_COUNTER`)."""
    table = json.loads(netns.nft(namespace, ["-j", "list", "table", "inet", QUIC_COUNTER]))
    rules = [item["rule"] for item in table["nftables"] if "rule" in item]
    return sum(e["counter"]["packets"] for rule in rules for e in rule["expr"] if "counter" in e)


@contextlib.contextmanager
def counting_quic(lab, namespace: str) -> Iterator[None]:
    """Count the client namespace's datagrams to the lab host's UDP port 443 (`quic_datagrams`) while the block
    runs."""
    address = ipaddress.ip_address(lab.check_spec()["probe_address"])  # www.lab.test's
    rule = f"ip daddr {address} udp dport 443 counter"
    netns.nft(
        namespace,
        ["-f", "-"],
        f"table inet {QUIC_COUNTER} {{ chain output {{ type filter hook output priority 0; {rule}; }}; }}",
    )
    try:
        yield
    finally:
        netns.nft(namespace, ["delete", "table", "inet", QUIC_COUNTER])


def test_no_hsts_policy_a_chromium_visit_received_is_used_by_the_next(reused, monkeypatch):
    keep_tab_after_load(monkeypatch)
    visitor = reused(browser="chromium")
    with do53_arm_and_browser(visitor) as (arm, browser):
        browser.start(arm)
        loaded(browser, STATE)
        driver = session_of(visitor)._driver
        with netns.entered(visitor.client.namespace):
            before = navigated(driver, PLAIN_STATE)  # no policy yet: http stays http (no HTTPS-Upgrades here)
            assert navigated(driver, STATE + "hsts") == STATE + "hsts"  # the policy
            control = navigated(driver, PLAIN_STATE)
        events = netlog_events(visitor)
        browser.stop()

        browser.start(arm)  # the next visit: a new user context
        loaded(browser, STATE)
        with netns.entered(visitor.client.namespace):
            after = navigated(session_of(visitor)._driver, PLAIN_STATE)
        events_next = netlog_events(visitor)
        browser.stop()
    upgraded, upgraded_next = hsts_upgrades(events), hsts_upgrades(events_next)
    errors, errors_next = request_errors(events, PLAIN_STATE), request_errors(events_next, PLAIN_STATE)
    print(f"http:// navigation: before the policy {before}, after it {control} (HSTS redirects {upgraded}, ", end="")
    print(f"net errors {errors}), at the next visit {after} (HSTS redirects {upgraded_next}, net errors {errors_next})")
    # CONTROL: the policy the page received upgraded the visit's own http:// navigation, by HSTS.
    assert before != STATE and control == STATE and upgraded == [STATE], (before, control, upgraded)
    # The net log's witness: the requests of the navigation before the policy were refused (Chromium tries
    # again), the one after it was not (redirected, then answered over https).
    assert errors[-1] == [] and errors[:-1] and all(e == [REFUSED] for e in errors[:-1]), errors
    assert after != STATE and upgraded_next == [], (after, upgraded_next)
    assert errors_next and all(e == [REFUSED] for e in errors_next), errors_next


def test_no_http_cache_entry_a_chromium_visit_stored_is_used_by_the_next(reused, lab, monkeypatch):
    keep_tab_after_load(monkeypatch)
    visitor = reused(browser="chromium")
    cached = STATE + "cached"
    with do53_arm_and_browser(visitor) as (arm, browser):
        browser.start(arm)
        offset = log_size(lab)
        loaded(browser, STATE)
        driver = session_of(visitor)._driver
        with netns.entered(visitor.client.namespace):
            first = driver.execute_async_script(FETCH, cached)
            driver.get(STATE)  # a new document: what it finds of the fetch is in the HTTP cache
            control = driver.execute_async_script(FETCH, cached)
        reads = cache_reads(netlog_events(visitor), cached)
        browser.stop()

        browser.start(arm)  # the next visit: a new user context
        loaded(browser, STATE)
        with netns.entered(visitor.client.namespace):
            second = session_of(visitor)._driver.execute_async_script(FETCH, cached)
        reads_next = cache_reads(netlog_events(visitor), cached)
        browser.stop()
    served_ = requests_logged(lab, offset, urlsplit(cached).path, 2)
    print(f"transfer sizes: first {first}, control {control}, next visit {second}; ", end="")
    print(f"cache answered: {reads}, at the next visit {reads_next}; nginx served it {served_} times")
    # CONTROL: the entry the first fetch stored answered the visit's next fetch, in a new document.
    assert first[0] > 0 and control == [0] and reads == [False, True], (first, control, reads)
    assert second[0] > 0 and reads_next == [False] and served_ == 2, (second, reads_next, served_)


def test_no_alternative_service_a_chromium_visit_was_told_is_used_by_the_next(reused, lab, monkeypatch):
    keep_tab_after_load(monkeypatch)
    visitor = reused(browser="chromium", page_http3=True)  # QUIC on: without it no alternative is tried at all
    namespace = visitor.client.namespace
    with counting_quic(lab, namespace), do53_arm_and_browser(visitor) as (arm, browser):
        browser.start(arm)
        loaded(browser, STATE + "alt-svc")  # the announcement: h3 on the same host's port 443
        driver = session_of(visitor)._driver
        with netns.entered(namespace):
            for _ in range(3):  # requests after it
                driver.execute_async_script(FETCH, STATE)
        first, sent = alternatives(netlog_events(visitor)), quic_datagrams(namespace)
        browser.stop()

        browser.start(arm)  # the next visit: a new user context
        loaded(browser, STATE)
        with netns.entered(namespace):
            for _ in range(3):
                session_of(visitor)._driver.execute_async_script(FETCH, STATE)
        second, sent_next = alternatives(netlog_events(visitor)), quic_datagrams(namespace) - sent
        browser.stop()
    print(f"alternative services: visit {first} ({sent} datagrams), next visit {second} ({sent_next} datagrams)")
    # CONTROL: Chromium kept the announced alternative and tried it (QUIC to port 443, refused: marked broken).
    assert first["found"] and all(a.startswith(f"quic www.{LAB_ZONE}:443") for a in first["found"]), first
    assert first["jobs"] and sent > 0, (first, sent)
    assert second == {"found": [], "jobs": []} and sent_next == 0, (second, sent_next)


def test_no_speculative_connection_or_prefetched_name_of_a_visit_is_left_to_the_next(reused, monkeypatch):
    keep_tab_after_load(monkeypatch)  # the test drives the tab after the load
    visitor = reused()
    with do53_arm_and_browser(visitor) as (arm, browser):
        browser.start(arm)
        first = loaded(browser)
        assert not {"www.lab.test", "youtube.com"} & {urlsplit(u).hostname for u in requested(first)}
        driver = session_of(visitor)._driver
        with netns.entered(visitor.client.namespace):
            driver.execute_script(HINTS)

            def hinted() -> bool:  # CONTROL: Firefox opened the connection and resolved the name
                names = FirefoxSession._in_chrome_async(driver, DNS_CACHE)
                lab_web = FirefoxSession._in_chrome_async(driver, ADDRESSES, "www.lab.test")
                opened = set(lab_web) & set(FirefoxSession._in_chrome_async(driver, SOCKETS))
                return bool(opened) and "youtube.com" in names

            wait_for(hinted, 10, "the hinted connection and name")
            browser.stop()

            driver = begin_visit(visitor, arm)  # the next visit: cleared, a new user context
            names = FirefoxSession._in_chrome_async(driver, DNS_CACHE)
            sockets = FirefoxSession._in_chrome_async(driver, SOCKETS)
        browser.stop()
    print(f"at the next visit: names {names}, sockets {sockets}")
    assert names == [] and sockets == [], (names, sockets)


def test_the_harness_s_recorder_runs_no_devtools_network_observer_and_misses_no_request(reused, monkeypatch):
    keep_tab_after_load(monkeypatch)  # the test drives the tab after the load
    # BiDi's network events come from a DevTools observer that passes every response body through JavaScript
    # on the parent's main thread and decodes every server certificate there: onLoad doubled on the lab. The
    # harness records the requests itself (scripts/watch-network.js), so no certificate is decoded in a visit,
    # and the HAR is as whole. CONTROL: with BiDi's network events, the wrapper sees each one decoded.
    loads: dict[str, tuple[list, PageLoad]] = {}
    upgraded = None
    for source in ("recorder", "bidi"):
        monkeypatch.setattr(FirefoxSession, "network_events", source)
        visitor = reused()
        with do53_arm_and_browser(visitor) as (arm, browser):
            driver = begin_visit(visitor, arm)
            with netns.entered(visitor.client.namespace):
                FirefoxSession._in_chrome(driver, CERTIFICATES)  # the wrapper, before the first response
                load = dataclasses.replace(loaded(browser))  # the next load in this visit reuses its report
                loads[source] = (FirefoxSession._in_chrome(driver, CERTIFICATES), load)
                if source == "recorder":  # an http:// URL in HTTPS-Only mode: upgraded before it connects
                    FirefoxSession._in_chrome(driver, HTTPS_ONLY, True)
                    upgraded = loaded(browser, "http://google.com/")
                    FirefoxSession._in_chrome(driver, HTTPS_ONLY, False)
            browser.stop()
    (recorded, by_recorder), (decoded, by_bidi) = loads["recorder"], loads["bidi"]
    print(f"certificates decoded: recorder {len(recorded)}, bidi {len(decoded)}; ", end="")
    print(f"responses: recorder {len(requested(by_recorder))}, bidi {len(requested(by_bidi))}")
    assert recorded == [] and len({fingerprint for fingerprint, _ in decoded}) > 5, (recorded, decoded)
    assert requested(by_recorder) == requested(by_bidi) and len(requested(by_recorder)) > 20
    entries = {e["params"]["request"]["url"]: e["params"] for e in by_recorder.events if "response" in e["params"]}
    main = entries[PAGE]
    assert main["response"]["status"] == 200 and main["response"]["protocol"] == "h2", main
    assert main["request"]["timings"]["dnsStart"] > 0 and main["response"]["bytesReceived"] > 0, main
    # The internal redirect's first channel never connects, answers or ends: it is no request, not an open one.
    assert upgraded is not None and PAGE in requested(upgraded), upgraded
    assert not [e for e in upgraded.events if e["method"] in ("network.beforeRequestSent", "network.fetchError")]


def test_no_certificate_the_network_observer_decoded_in_a_visit_is_kept_for_the_next(reused, monkeypatch):
    keep_tab_after_load(monkeypatch)  # the test drives the tab after the load
    # With BiDi's network events (a measuring option): the observer that serves them decodes each server
    # certificate in JavaScript on the parent's main thread and keeps it; kept across visits, a site seen
    # before loaded 10-18 % faster.
    monkeypatch.setattr(FirefoxSession, "network_events", "bidi")
    visitor = reused()
    with do53_arm_and_browser(visitor) as (arm, browser):
        driver = begin_visit(visitor, arm)
        with netns.entered(visitor.client.namespace):
            FirefoxSession._in_chrome(driver, CERTIFICATES)  # the wrapper, before the first response
            loaded(browser)
            first = FirefoxSession._in_chrome(driver, CERTIFICATES)
            # CONTROL: the page again in the visit's own tab: the observer decodes none of its certificates again.
            driver.get(PAGE)
            control = FirefoxSession._in_chrome(driver, CERTIFICATES)
            browser.stop()

            driver = begin_visit(visitor, arm)  # the next visit: a new subscription, a new observer
            loaded(browser)
            second = FirefoxSession._in_chrome(driver, CERTIFICATES)
        browser.stop()

    def seen(calls: list) -> set[str]:
        return {fingerprint for fingerprint, _ in calls}

    def decoded(calls: list) -> set[str]:
        return {fingerprint for fingerprint, known in calls if not known}

    print(f"certificates seen/decoded: first {len(seen(first))}/{len(decoded(first))}, ", end="")
    print(f"control {len(seen(control))}/{len(decoded(control))}, next {len(seen(second))}/{len(decoded(second))}")
    assert seen(first) and decoded(first) == seen(first), first
    assert seen(control) and decoded(control) == set(), control
    assert seen(second) & seen(first) and decoded(second) == seen(second), second


@pytest.mark.parametrize("browser", BROWSERS)
def test_the_resolver_sees_every_query_again_in_the_next_visit(reused, browser):
    visitor = reused(browser=browser)
    first, second = (visitor.visit_once(PAGE, "doh", "near") for _ in range(2))
    assert first.error_class == second.error_class == "Successful"
    # The DNS cache (TRR's; in Chromium the user context's) was cleared: the page's names are asked again, as many
    # as the first time or nearly.
    assert second.proof["on_arm"] >= 0.8 * first.proof["on_arm"] > 10, (first.proof, second.proof)


@pytest.mark.parametrize("browser", BROWSERS)
@pytest.mark.parametrize("protocol", ["doh", "dot", "doq", "doh3"])
def test_cold_opens_a_new_resolver_connection_and_warm_uses_an_open_one(reused, protocol, browser):
    # For a stub arm the do53 visit before makes Chromium start anew (the stub's resolv.conf), after the visit's stub
    # started: its start asks its own services' names (`own_names`) through the stub, which the cold visit then
    # restarts (`DnsArm.reset_connection`) so that its first query still opens the connection.
    cold, warm = reused("cold", browser=browser), reused("warm", browser=browser)
    for visitor in (cold, warm):
        visitor.visit_once(PAGE, "do53", "near")  # a browser already running, as in a block
    c, w = cold.visit_once(PAGE, protocol, "near"), warm.visit_once(PAGE, protocol, "near")
    assert c.error_class == w.error_class == "Successful", (c.detail, w.detail)
    assert c.first_query_open is False and w.first_query_open is True, (c.proof, w.proof)
    assert w.warm_up is None and c.warm_up is None
    # Where the cold visit's browser is new (Chromium: the arm's launch settings differ from Do53's), or asks names
    # of its own (Chromium), the reset ran, or the counters proved the arm's stub had opened no connection; a reset
    # says how many of the browser's connections it closed.
    considered = c.session_ordinal == 1 or bool(cold.browser.own_names)
    assert (c.resolver_connection_reset is not None) == considered, c.resolver_connection_reset
    assert (c.resolver_connections_closed is not None) == (c.resolver_connection_reset == "reset")
    if protocol in ("doh", "dot"):  # TCP: handshakes are counted
        assert c.resolver_handshakes >= 1 and w.resolver_handshakes == 0
    else:  # QUIC: a handshake's Initial datagrams counted on the cold visit, none on the warm one
        assert c.proof["client_packets"][f"{protocol}_initials"] > 0
        assert w.proof["client_packets"][f"{protocol}_initials"] == 0


@pytest.mark.parametrize("asked_before", [False, True])
def test_a_cold_visit_restarts_a_stub_that_opened_a_connection_before_its_window_and_keeps_one_that_did_not(
    reused, monkeypatch, asked_before
):
    # A new reused Firefox's first visit considers a reset (its start might ask through the arm). With a name
    # asked through the stub after it started (as Chromium's own lookups are), the counters see its connection
    # and the stub is restarted; without, it is kept, and either way the page's first query opens the connection.
    visitor = reused()
    make_arm = visitor.arm

    def arm_that_asks(protocol: str, resolver: str) -> DnsArm:
        arm = make_arm(protocol, resolver)
        start = arm.start

        def start_and_ask() -> None:
            start()
            if asked_before:
                with netns.entered(visitor.client.namespace):
                    dns.query.udp(dns.message.make_query("google.com", "A"), "127.0.0.1", timeout=5)

        monkeypatch.setattr(arm, "start", start_and_ask)
        return arm

    monkeypatch.setattr(visitor, "arm", arm_that_asks)
    v = visitor.visit_once(PAGE, "dot", "near")
    assert v.error_class == "Successful", v.detail
    assert v.session_ordinal == 1 and v.resolver_connection_reset == ("reset" if asked_before else "unopened")
    assert v.first_query_open is False and v.resolver_handshakes == 1, v.proof


def test_a_cold_doh_reset_closes_the_connections_open_to_the_doh_server(reused):
    # A connection the browser opened before a cold visit's window would carry the visit's first query; the reset
    # destroys it (the browser would see it aborted and open another); the control: a reset with none open.
    arm = reused().arm("doh", "near")
    with netns.entered(arm.client.namespace):
        conn = socket.create_connection((arm.resolver.address, 443), timeout=5)
    try:
        assert arm.reset_connection() == 1
        try:
            data: bytes | None = conn.recv(1)
        except TimeoutError:  # still open: the server sends nothing first
            data = None
        except OSError:  # aborted, as the kernel reports a destroyed socket
            data = b""
        assert data == b""
        assert arm.reset_connection() == 0
    finally:
        conn.close()


def names_asked(netlog: str) -> set[str]:
    """The host names Chromium's net log shows resolution requests for."""
    found = re.findall(r'"host":"(?:[a-z]+://)?([^":/]+)', netlog)
    return set(found)


@pytest.mark.parametrize("browser", BROWSERS)
def test_the_warm_up_page_reaches_neither_the_resolver_nor_the_visit_s_counters(reused, browser, monkeypatch):
    keep_tab_after_load(monkeypatch)  # the test drives the tab after the load
    visitor = reused(browser=browser)
    with do53_arm_and_browser(visitor) as (arm, browser):
        control = arm.resolver.control_config
        assert control is not None
        reset_client_counters(visitor.client.namespace, arm.resolver)
        before = resolver_counters(control)
        browser.start(arm)  # a new browser: its warm-up page, then the visit's clearing and tab
        after, packets = resolver_counters(control), client_counters(visitor.client.namespace)
        warmup = browser.warmup
        assert warmup is not None and warmup["ok"], warmup
        if isinstance(browser, Chromium):  # its start asks its own services' names: the warm-up page asks none
            # Its services' names, and autofill's, which Chromium asks for the page's form: no study name.
            asked = names_asked(session_of(visitor)._netlog.read_text(errors="replace")) - {"127.0.0.1"}
            assert asked and asked <= browser.own_names | {"content-autofill.googleapis.com"}, asked
            before, packets = after, {}
        assert after == before and not any(packets.values()), (before, after, packets)
        load = loaded(browser)  # the control: the visit's own queries are counted
        browser.stop()
        assert resolver_counters(control)["do53_udp"] > after["do53_udp"]
        assert sum(client_counters(visitor.client.namespace).values()) > 0
        assert not [url for url in requested(load) if "127.0.0.1" in url]  # none of the warm-up's requests


def test_the_counting_table_is_zeroed_in_place_and_made_anew_when_gone_or_for_another_resolver(reused):
    """A visit whose counting table would be the one loaded before only zeroes its counters, and says what they
    counted since their last reading (which zeroes them too); a table deleted, not all ours, or for another
    resolver, is made anew."""
    visitor = reused()
    namespace, resolver = visitor.client.namespace, visitor.arm("do53", "near").resolver

    def rules() -> str:  # the table without its counters' values
        return re.sub(r"packets \d+ bytes \d+", "", netns.nft(namespace, ["list", "table", "inet", evidence.TABLE]))

    def send_to(address: str) -> None:  # one datagram to port 53, sent as the browser would
        with netns.entered(namespace), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"\0" * 12, (address, 53))

    reset_client_counters(namespace, resolver)
    loaded = rules()
    send_to(resolver.address)
    assert client_counters(namespace)["do53_resolver"] == 1  # the control: the datagram is counted
    assert client_counters(namespace)["do53_resolver"] == 0  # a reading zeroes what it read
    send_to(resolver.address)
    counted = reset_client_counters(namespace, resolver)  # what was counted since the last reading, then zeroed
    assert counted is not None and counted.packets["do53_resolver"] == 1, counted
    assert not any(client_counters(namespace).values()) and rules() == loaded  # zeroed, the same rules
    netns.nft(namespace, ["delete", "table", "inet", evidence.TABLE])
    assert reset_client_counters(namespace, resolver) is None and rules() == loaded  # made anew: nothing counted
    other = dataclasses.replace(resolver, address="198.18.9.9")
    reset_client_counters(namespace, other)
    assert "198.18.9.9" in rules() and resolver.address not in rules()
    send_to(resolver.address)
    counts = client_counters(namespace)
    assert counts["do53_resolver"] == 0 and counts["do53_other"] == 1
    # A table of that name loaded by someone else, with counters missing, is never read as zeros: read, it is
    # refused; at a reset, made anew.
    table, mine = evidence.TABLE, rules()
    netns.nft(namespace, ["-f", "-"], f"table inet {table}\ndelete table inet {table}\n"
              f"table inet {table} {{\n counter do53_resolver {{ }}\n}}\n")  # fmt: skip
    with pytest.raises(HarnessError, match="lacks counters stub_loopback, icmp_unreachable"):
        client_counters(namespace)
    assert reset_client_counters(namespace, other) is None and rules() == mine
    assert set(client_counters(namespace)) == set(evidence.client_counter_names())


def test_a_failed_start_is_retried_inside_the_visit_and_a_fresh_browser_settles(reused, monkeypatch):
    real, calls = session_module.BidiEventLog, []

    def lost_once(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise ConnectionResetError("the BiDi socket was lost (the test)")
        return real(*args, **kwargs)

    monkeypatch.setattr(session_module, "BidiEventLog", lost_once)
    result = reused(session="fresh", settle_s=1.0).visit_once(PAGE, "do53", "near")
    assert result.error_class == "Successful" and result.proof["valid"], result.detail
    assert result.browser_start_retries == ["start: ConnectionResetError: the BiDi socket was lost (the test)"]
    assert result.browser_session == "fresh settled 1 s" and 1.0 <= result.browser_settle_s < 2.0  # not twice
    assert result.phases["settle"] >= 1.0 and len(calls) == 2


def test_a_fresh_browser_gets_a_warm_connection_from_the_warm_up_query(reused):
    visitor = reused("warm", session="fresh")
    result = visitor.visit_once(PAGE, "doh", "near")
    assert result.error_class == "Successful" and result.browser_session == "fresh"
    assert result.resolver_handshakes == 0 and result.first_query_open is True
    assert "warm_up" in result.phases and "browser_start" in result.phases


@pytest.mark.parametrize("browser", BROWSERS)
def test_the_browser_is_replaced_after_n_visits_and_when_it_dies(reused, browser):
    visitor = reused(browser=browser, restart_after=2)
    ordinals, parents = [], []
    for _ in range(3):
        result = visitor.visit_once(PAGE, "do53", "near")
        assert result.error_class == "Successful", result.detail
        ordinals.append((result.session_ordinal, result.browser_restart))
        parents.append(browser_pid(visitor))
    assert ordinals == [(1, None), (2, None), (1, "after 2 visits")]
    assert parents[0] == parents[1] != parents[2]
    os.kill(parents[2], signal.SIGKILL)  # the browser dies between visits: dead before the next one begins
    wait_for(lambda: dead(parents[2]), 10, "the killed browser to die")
    result = visitor.visit_once(PAGE, "do53", "near")
    assert result.error_class == "Successful" and result.session_ordinal == 1, result.detail
    assert result.browser_restart == "not answering"


def test_a_hung_browser_is_a_harness_failure_and_the_next_visit_gets_a_new_one(lab, tmp_path):
    visitor = Visitor(lab, tmp_path, timeout=5.0, margin=3.0, session=SessionPolicy("reused"))
    parent = None
    try:
        first = visitor.visit_once(PAGE, "do53", "near")
        assert first.error_class == "Successful", first.detail
        parent = parent_pid(visitor)
        # It hangs during the next visit (a stopped browser before a visit is replaced at once, unseen): a page
        # that never answers (the lab's tarpit) keeps the visit open past the freeze, however fast it begins.
        freeze = threading.Timer(0.5, os.kill, (parent, signal.SIGSTOP))
        freeze.start()
        hung = visitor.visit_once("https://hang.lab.test/", "do53", "near")
        freeze.join()
        assert hung.counted is False and hung.error_class == "Infrastructure Failure", hung.detail
        after = visitor.visit_once(PAGE, "do53", "near")
        assert after.error_class == "Successful" and after.session_ordinal == 1, after.detail
        assert after.browser_restart in ("watchdog", "not answering") and parent_pid(visitor) != parent
    finally:
        visitor.close()
        if parent is not None:
            subprocess.run(["kill", "-CONT", str(parent)], capture_output=True)


def test_a_browser_that_hangs_as_its_visit_ends_is_killed_and_the_visit_stands(lab, tmp_path, monkeypatch):
    """The visit's tab is closed under its watchdog: a browser that hangs then is killed, not waited for."""
    visitor = Visitor(lab, tmp_path, timeout=5.0, margin=3.0, session=SessionPolicy("reused"))

    def freeze_at_close(command: Callable[..., dict]) -> Callable[..., dict]:
        # The browser stops as the command that closes the visit's tab is sent (at the collection, or in
        # `end_visit`), once the close has found it running: the command waits.
        def command_then(method: str, params: dict, timeout: float = 10.0) -> dict:
            if method == "browsingContext.close":
                os.kill(parent_pid(visitor), signal.SIGSTOP)
            return command(method, params, timeout)

        return command_then

    parent = None
    try:
        first = visitor.visit_once(PAGE, "do53", "near")
        assert first.error_class == "Successful", first.detail
        parent = parent_pid(visitor)
        events = session_of(visitor)._events
        monkeypatch.setattr(events, "command", freeze_at_close(events.command))
        ended = visitor.visit_once(PAGE, "do53", "near")
        monkeypatch.undo()
        assert ended.error_class == "Successful" and ended.counted, ended.detail  # measured before the hang
        wait_for(lambda: dead(parent), 10, "the hung browser to be killed")
        after = visitor.visit_once(PAGE, "do53", "near")
        assert after.error_class == "Successful" and after.session_ordinal == 1, after.detail
        assert after.browser_restart == "watchdog" and parent_pid(visitor) != parent
    finally:
        visitor.close()
        if parent is not None:
            subprocess.run(["kill", "-CONT", str(parent)], capture_output=True)


def test_a_dns_query_still_in_flight_ends_before_the_next_visit_counts(reused, lab):
    """A query of the visit before that glibc still retries would reach its resolver during the next visit: the
    next visit waits for it before its counters start, so a stub arm's visit sees no datagram to port 53."""
    visitor = reused()
    assert visitor.visit_once(PAGE, "do53", "near").error_class == "Successful"
    session = session_of(visitor)
    assert session._driver is not None and session._browser_pid is not None
    firefox, uid = session._browser_pid, visitor.browser.account.uid
    netns.nft(lab.namespaces["server"], ["-f", "-"], DROP_DNS)
    try:
        with netns.entered(visitor.client.namespace):
            FirefoxSession._in_chrome(session._driver, RESOLVE_LATER, "late.google.com")
        # The control: the query in flight is seen (its socket, connected to port 53).
        wait_for(lambda: dns_queries_in_flight(firefox, uid) > 0, timeout=5, what="the query in flight")
    finally:
        netns.nft(lab.namespaces["server"], ["delete", "table", "inet", "dnsstudy_test"])
    seen = time.time()
    second = visitor.visit_once(PAGE, "dot", "near")
    # glibc retries about 5 s after its try: a visit begun well before then must have waited for the query.
    if dt.datetime.fromisoformat(second.started_at).timestamp() - seen < 3.5:
        assert second.phases["dns_settle"] > 0.5, second.phases
    assert dns_queries_in_flight(firefox, uid) == 0
    assert second.error_class == "Successful" and second.proof["valid"], (second.detail, second.proof)
    assert second.proof["off_arm"] == 0, second.proof


def query_late_then_end(visitor, lab, monkeypatch, rule: str, servers=(), lift_after_s: float = 0.0) -> list[int]:
    """Make the visit's browser look up a name as its visit ends while the server side applies nftables ``rule``
    (lifted ``lift_after_s`` later), then end the visit; the list gets the queries still in flight (UDP to port 53,
    or held up to ``servers``) once `end_visit` returned."""
    end_visit = ReusedFirefoxSession.end_visit
    in_flight: list[int] = []
    server_side = lab.namespaces["server"]

    def lift() -> None:
        netns.nft(server_side, ["delete", "table", "inet", "dnsstudy_test"])

    def look_up_late_then_end(session: ReusedFirefoxSession) -> None:
        browser, uid = session._browser_pid, visitor.browser.account.uid
        assert session._driver is not None and browser is not None  # alive
        netns.nft(server_side, ["-f", "-"], rule)
        lifting = threading.Timer(lift_after_s, lift)
        try:
            with netns.entered(visitor.client.namespace):
                FirefoxSession._in_chrome(session._driver, RESOLVE_LATER, "late.google.com")
            # The control: the query held up is seen in flight.
            wait_for(lambda: dns_queries_in_flight(browser, uid, servers) > 0, 5, "the query in flight")
        finally:
            lifting.start()
            if not lift_after_s:
                lifting.join()
        end_visit(session)
        in_flight.append(dns_queries_in_flight(browser, uid, servers))
        lifting.join()

    monkeypatch.setattr(ReusedFirefoxSession, "end_visit", look_up_late_then_end)
    return in_flight


def test_a_late_lookup_of_a_visit_ends_before_its_arm_stops(reused, lab, monkeypatch):
    """A lookup the page makes as its visit ends is waited for while the visit's arm still serves it: the next
    arm's start (a stub stopped, another name server) would cut it off and leave glibc to retry it 5 s later."""
    visitor = reused()
    in_flight = query_late_then_end(visitor, lab, monkeypatch, DROP_DNS)  # answered by glibc's retry
    visit = visitor.visit_once(PAGE, "do53", "near")
    assert visit.error_class == "Successful", visit.detail
    assert in_flight == [0] and visit.phases["dns_settle_after"] > 0.5, (in_flight, visit.phases)


def doh_held_up(visitor: Visitor) -> tuple[tuple[str, int], str]:
    """The near resolver's DoH server (address, port), and an nftables rule for the server side that drops what
    the client sends it."""
    server = visitor.arm("doh", "near").browser_dns().doh_server()
    assert server is not None
    held = (
        "table inet dnsstudy_test { chain input { type filter hook input priority -10; "
        f"ip daddr {server[0]} tcp dport {server[1]} drop; }}; }}"
    )
    return server, held


def test_a_late_doh_query_of_a_visit_reaches_its_resolver_before_the_visit_ends(reused, lab, monkeypatch):
    """A DoH query the browser sends as its visit ends, held up on the path (a lost segment waiting for its
    retransmission), reaches the resolver before the visit's counters stop: counted in the next visit, it would
    be a query over another transport there (seen on 3G, Do53 after DoH, 2026-11-29)."""
    visitor = reused()
    server, held = doh_held_up(visitor)
    in_flight = query_late_then_end(visitor, lab, monkeypatch, held, [server], lift_after_s=0.5)
    visit = visitor.visit_once(PAGE, "doh", "near")
    assert visit.error_class == "Successful" and visit.proof["valid"], (visit.detail, visit.proof)
    assert in_flight == [0] and visit.phases["dns_settle_after"] > 0.2, (in_flight, visit.phases)
    assert visit.browser_ready is not None and visit.browser_ready["dns_in_flight_after"] == 0, visit.browser_ready


def test_a_query_still_in_flight_when_the_wait_runs_out_is_in_the_record(reused, lab, monkeypatch):
    """The wait for a visit's late queries is bounded (`DNS_SETTLE_S`, 1 s here): a DoH query held up for longer
    leaves the wait with the query still in flight, and the visit's record says so."""
    visitor = reused()
    monkeypatch.setattr(reused_module, "DNS_SETTLE_S", 1.0)
    server, held = doh_held_up(visitor)
    in_flight = query_late_then_end(visitor, lab, monkeypatch, held, [server], lift_after_s=3.0)
    visit = visitor.visit_once(PAGE, "doh", "near")
    assert in_flight and in_flight[0] >= 1, in_flight  # the control: the wait ended with the query held up
    assert visit.browser_ready is not None and visit.browser_ready["dns_in_flight_after"] >= 1, visit.browser_ready
    assert 1.0 <= visit.phases["dns_settle_after"] < 2.5, visit.phases


def test_a_sabotaged_stub_inside_a_reused_browser_fails_as_in_a_fresh_one(reused, lab):
    """A blocked DoT path is DoT's counted failure and a dead stub ours, as with fresh browsers
    (test_failure_attribution.py); the same browser then serves a good visit."""
    visitor = reused()
    assert visitor.visit_once(PAGE, "do53", "near").error_class == "Successful"
    parent = parent_pid(visitor)
    faults.apply(lab, faults.parse_fault("drop:dot", "near"))
    try:
        blocked = visitor.visit_once(PAGE, "dot", "near")
    finally:
        faults.clear(lab)
    assert (blocked.error_class, blocked.detail, blocked.counted) == ("DNS Error", "dot:connect-timeout", True)
    arm = visitor.arm("dot", "near")
    arm.start()
    try:
        assert arm.stub is not None
        os.kill(arm.stub.pid, signal.SIGKILL)
        dead = visitor.visit(PAGE, arm)
    finally:
        arm.stop()
        visitor.client.restore_system_resolver()
    assert dead.error_class == "Infrastructure Failure" and not dead.counted and dead.detail.startswith("arm: ")
    after = visitor.visit_once(PAGE, "dot", "near")
    assert after.error_class == "Successful" and after.proof["valid"], after.detail
    assert parent_pid(visitor) == parent and after.browser_restart is None


def test_a_hung_page_inside_a_reused_browser_is_the_page_s_timeout_and_leaves_nothing(lab, tmp_path):
    """The lab's tarpit accepts and never answers: the page's timeout, counted; the browser lives on, and the
    next visit finds no connection to the tarpit and loads its page."""
    visitor = Visitor(lab, tmp_path, timeout=5.0, margin=10.0, session=SessionPolicy("reused"))
    try:
        first = visitor.visit_once(PAGE, "do53", "near")
        assert first.error_class == "Successful", first.detail
        parent = parent_pid(visitor)
        hung = visitor.visit_once("https://hang.lab.test/", "do53", "near")
        assert (hung.error_class, hung.counted) == ("Page-load Timeout", True), (hung.error_class, hung.detail)
        arm = visitor.arm("do53", "near")
        arm.start()
        try:
            visitor.browser.start(arm)  # the next visit, cleared
            with netns.entered(visitor.client.namespace):
                assert FirefoxSession._in_chrome_async(session_of(visitor)._driver, SOCKETS) == []
            visitor.browser.stop()
        finally:
            arm.stop()
            visitor.client.restore_system_resolver()
        after = visitor.visit_once(PAGE, "do53", "near")
        assert after.error_class == "Successful" and parent_pid(visitor) == parent, after.detail
        assert after.session_ordinal == 4 and after.browser_restart is None
    finally:
        visitor.close()


def test_a_reused_chromium_navigates_only_once_its_renderers_are_idle(reused, monkeypatch):
    """A renderer kept busy as the visit's tab opens (1.2 s of script in that tab, begun once it is made) holds
    the navigation until it is done; without it, the renderers are found idle at once. Each tab opened after a
    visit is the next visit's (`open_next_tab`), made while the harness finishes that visit (Chromium: from its
    collection on, `open_next_at_collection`)."""
    from harness.browser.chromium_reused import ReusedChromiumSession

    visitor = reused(browser="chromium")
    visitor.visit_once(PAGE, "do53", "near")  # the browser's first: its tab made in its visit, the next one's after
    new_tab = ReusedChromiumSession._new_tab

    def new_busy_tab(self: ReusedChromiumSession) -> tuple[str, str]:
        context, tab = new_tab(self)
        busy = "setTimeout(() => { const end = performance.now() + 1200; while (performance.now() < end) {} }, 0)"
        assert self._events is not None  # alive: the tab was just opened
        self._events.command("script.evaluate", {"expression": busy, "target": {"context": tab}, "awaitPromise": False})
        return context, tab

    monkeypatch.setattr(ReusedChromiumSession, "_new_tab", new_busy_tab)
    quiet = visitor.visit_once(PAGE, "do53", "near")  # its tab opened before the patch, the next one's after
    held = visitor.visit_once(PAGE, "do53", "near")
    assert quiet.error_class == held.error_class == "Successful", (explain(quiet), explain(held))
    assert quiet.browser_ready["tab_opened_before"] and held.browser_ready["tab_opened_before"]
    assert quiet.browser_ready["renderers_idle"] and quiet.browser_ready["waited_s"] < 0.25, quiet.browser_ready
    assert held.browser_ready["renderers_idle"] and held.browser_ready["waited_s"] >= 0.45, held.browser_ready
