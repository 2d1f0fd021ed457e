"""Firefox ESR through geckodriver: a fresh browser, on a copy of a warmed profile template, for every visit,
or one for many visits (`browser_session = "reused"`, harness/browser/reused.py).

The template (harness/browser/template.py) trusts the place's CA where it
must and holds the quiet preferences and the study's DNS profile
(harness/browser/prefs.py); each visit's copy adds the arm's preferences and
runs in a `FirefoxSession` (harness/browser/session.py) as the browser account.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from harness.browser.base import SessionPolicy, register_browser
from harness.browser.firefox_dns import firefox_prefs, page_http3_on, refuse_page_http3_prefs
from harness.browser.firefox_reused import ReusedFirefoxSession
from harness.browser.prefs import DNS_CURRENT, load_prefs
from harness.browser.reused import restart_reason
from harness.browser.session import GECKODRIVER, FirefoxSession
from harness.browser.template import ensure_template, firefox_version
from harness.browser.webdriver_browser import WebDriverBrowser
from harness.errors import HarnessError
from harness.place import ClientSide

if TYPE_CHECKING:
    from harness.arms.base import BrowserDns, DnsArm


def geckodriver_version() -> str:
    """`geckodriver 0.37.1 (...)` -> `0.37.1`."""
    out = subprocess.run([str(GECKODRIVER), "--version"], capture_output=True, text=True, timeout=30).stdout
    return out.split()[1] if out.split()[:1] == ["geckodriver"] else "unknown"


@register_browser("firefox")
class Firefox(WebDriverBrowser):
    """Firefox, started afresh for each visit on a copy of the place's profile template and killed after it,
    or (a reused session) started once and cleared before each visit."""

    product = "Firefox"
    default_browser_dns = DNS_CURRENT
    native_dns = frozenset({"doh", "doh3"})  # TRR, over HTTP/2 or HTTP/3
    reusable = True

    def __init__(
        self,
        client: ClientSide,
        timeout: float = 30.0,
        margin: float = 10.0,
        browser_dns: str | Path | None = None,
        session: SessionPolicy | None = None,
        page_http3: bool = False,
    ):
        if not GECKODRIVER.exists():
            raise HarnessError(f"{GECKODRIVER} is missing: run scripts/setup.sh")
        super().__init__(
            client, timeout=timeout, margin=margin, browser_dns=browser_dns, session=session, page_http3=page_http3
        )
        self.work_root = client.run_dir / "visits"  # each visit's profile copy, deleted after it
        self.work_root.mkdir(exist_ok=True)
        self.version = firefox_version()
        self.versions = {"firefox": self.version, "geckodriver": geckodriver_version()}
        # The browser's DNS behaviour is data a study names; every visit records the values it ran with.
        self.dns_settings = load_prefs(self.browser_dns).as_dict()
        refuse_page_http3_prefs(self.browser_dns, self.dns_settings)
        prefs = {**load_prefs().as_dict(), **self.dns_settings}
        self.template = ensure_template(
            client.run_dir, self.trusted_ca, prefs, self.account, client.namespace, self.version
        )
        self._session: FirefoxSession | None = None
        self._reused: ReusedFirefoxSession | None = None

    def start(self, arm: DnsArm) -> None:
        """A new session on a copy of the template with the arm's preferences, its watchdog running; or, reused,
        the running session (a new one when `restart_reason` says so) cleared and given the arm's preferences."""
        if self.session.reused:
            self._start_reused(arm)
            return
        self.session_ordinal = 1
        self._session = FirefoxSession(
            self.account,
            self.template,
            self.client.namespace,
            self.work_root,
            prefs=self._arm_prefs(arm),
            timeout=self.timeout,
            margin=self.margin,
            read_prefs=tuple(self.dns_settings),
        )
        self._session.start()

    def page_http3_for(self, dns: BrowserDns) -> bool:
        return page_http3_on(dns, self.page_http3)

    def _arm_prefs(self, arm: DnsArm) -> dict:
        return firefox_prefs(arm.browser_dns(), self.client.browser_trusts_ca, self.page_http3)

    def _start_reused(self, arm: DnsArm) -> None:
        reason = restart_reason(self._reused, self.session)
        if self._reused is None or reason is not None:
            self.close()
            self._reused = ReusedFirefoxSession(
                self.account,
                self.template,
                self.client.namespace,
                self.work_root,
                timeout=self.timeout,
                margin=self.margin,
                read_prefs=tuple(self.dns_settings),
            )
            self._reused.start()
            self.warmup = self._reused.warmup.to_dict() if self._reused.warmup else None
            self.session_ordinal = 0
        self.restart_reason = reason
        self.session_ordinal += 1
        self._reused.begin_visit(self._arm_prefs(arm), arm.browser_dns().doh_server())
        self._session = self._reused
