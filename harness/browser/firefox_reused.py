"""One Firefox for many visits (`browser_session = "reused"`): what Firefox clears before each visit.

`ReusedSession` (harness/browser/reused.py) runs the visits; before each, in
this order: the arm's preferences are set in the running browser (each visit's
arm may differ; those of the arm before are put back), everything a visit could
leave is cleared (scripts/clear-state.js: Services.clearData with CLEAR_ALL,
the TLS session cache, every idle connection closed, the browser's DoH
connection with them, the DNS cache), and, with BiDi's network events instead
of the recorder, the subscription is made anew (the network observer behind
them kept every server certificate it had decoded). Firefox partitions
cookies, storage, the HTTP cache and connections by user context, the new one
each visit gets.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from selenium import webdriver

from harness import netns
from harness.browser.bidi import BidiEventLog
from harness.browser.reused import READY_LIMIT_S, ReusedSession
from harness.browser.scripts import script
from harness.browser.session import FirefoxSession
from harness.browser.warmup import WarmupServer

#: Preferences of a browser that serves many visits, set at its start.
#: - The platform resolver's state is per thread (glibc's `_res`): HTTPS-record queries (res_nquery) on a DNS
#:   thread that lives across visits would keep the resolv.conf of the arm before (Do53 to the resolver, or the
#:   stub on loopback). Idle DNS threads exit at once, so each visit's are new (a thread start costs
#:   microseconds; within a visit a thread serves many names).
#: - Firefox refills its pool of preallocated content processes `delayMs` after a process is taken (1 s by
#:   default). A visit takes two, its page's at the navigation and its next tab's at its collection, so the
#:   wait for a full pool before the next navigation (`_await_ready`) mostly waited out the tab's delay: 0.1 s
#:   cut a later visit's harness time by a quarter, its onLoad unchanged (docs/visit.md, "The pool refilled
#:   sooner").
#:   0 is no refill at all (the pool stayed empty).
REUSED_PREFS: dict[str, bool | int | str] = {
    "network.dns.resolver-thread-extra-idle-time-seconds": 0,
    "dom.ipc.processPrelaunch.delayMs": 100,
}

_CLEAR = script("clear-state")
_SET_PREFS = script("set-prefs")
_TRUST = script("trust-certificate")
_AWAIT_PROCESSES = script("await-content-processes")


class ReusedFirefoxSession(ReusedSession, FirefoxSession):
    """A `FirefoxSession` that serves visit after visit (`ReusedSession`); the visit's settings are the arm's
    preferences."""

    #: With BiDi's network events (`network_events = "bidi"`): whether each visit gets a new BiDi subscription,
    #: and with it a new network observer in Firefox (the old one kept every server certificate it decoded: a
    #: site seen before loaded 10-18 % faster, docs/visit.md). False only to measure that
    #: (`benchmarks.browser_reuse --carryover N --carryover-compare`). The recorder keeps no such thing.
    renew_network_observer = True
    #: The visit's tab and user context begin to close once its page, addresses, requests and events are read,
    #: and the next visit's open beside them: the tab takes a preallocated content process, whose replacement
    #: then launches while the harness reads the counters and stores the visit, not in the next visit's wait
    #: for the pool (`_await_ready`). An about:blank tab in a new user context asks no name and loads nothing.
    close_tab_at_collection = True
    open_next_at_collection = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{**kwargs, "prefs": {**(kwargs.get("prefs") or {}), **REUSED_PREFS}})
        self._originals: dict = {}  # preferences the current arm set -> the value each had before it

    def _collect(self, url: str, driver: webdriver.Remote, events: BidiEventLog) -> None:
        """`FirefoxSession._collect`, then the tab's close and the next one's opening begun
        (`close_tab_at_collection`): after the events are taken, so none of the new tab's is the visit's."""
        super()._collect(url, driver, events)
        if self.close_tab_at_collection:
            self._close_visit_early()

    def _browser_scripts(self) -> AbstractContextManager[None]:
        return self.chrome_context(self._driver)  # type: ignore[arg-type]  # alive

    def _clear_for_visit(self, settings: dict) -> None:
        """The arm's preferences, everything cleared (scripts/clear-state.js), BiDi's observer renewed."""
        with self._browser_scripts():
            self._apply_prefs(settings)
            cleared = self._in_chrome_async(self._driver, _CLEAR)  # type: ignore[arg-type]  # alive
        if not isinstance(cleared, dict) or "error" in cleared:
            raise RuntimeError(f"clearing failed: {cleared}")
        if self._source == "bidi" and self.renew_network_observer:
            self._events.resubscribe()  # type: ignore[union-attr]  # alive

    def _await_ready(self) -> dict | None:
        """Firefox's pool of preallocated content processes full (scripts/await-content-processes.js): a visit
        that found it short paid a process launch inside its page load."""
        limit_ms = int(READY_LIMIT_S * 1000)
        found = self._in_chrome_async(self._driver, _AWAIT_PROCESSES, limit_ms)  # type: ignore[arg-type]  # alive
        if not isinstance(found, dict) or "error" in found:
            raise RuntimeError(f"reading the content processes failed: {found}")
        return {"content_processes": found["ready"], "wanted": found["wanted"], "waited_s": found["ms"] / 1000}

    def _trust_warmup_certificate(self, server: WarmupServer) -> None:
        """The warm-up CA added to the running Firefox's certificate database (scripts/trust-certificate.js)."""
        with netns.entered(self.namespace):
            self._in_chrome(self._driver, _TRUST, server.ca_base64)  # type: ignore[arg-type]  # started

    def _apply_prefs(self, prefs: dict) -> None:
        restore = {n: v for n, v in self._originals.items() if n not in prefs}
        before = self._in_chrome(self._driver, _SET_PREFS, prefs, restore)  # type: ignore[arg-type]  # alive
        self._originals = {n: self._originals[n] if n in self._originals else before[n] for n in prefs}
