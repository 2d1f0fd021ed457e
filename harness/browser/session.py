"""One Firefox session: fresh profile directory, geckodriver and Firefox as the browser account, one navigation.

`Firefox` (harness/browser/firefox.py) runs one per visit. The session runs
in a network namespace (the lab's client) or on the host.
geckodriver is started by us, not by Selenium, so that it can be prefixed
with `ip netns exec` (which also gives it the namespace's resolv.conf) and
`setpriv` (which drops root), and so that the watchdog can kill the whole
process tree. Selenium connects to it as a remote end on loopback. What
Firefox shares with Chromium (the watchdog, the kill, BiDi, the page's
scripts) is `WebDriverSession`'s (harness/browser/webdriver_session.py).
"""

from __future__ import annotations

import json
import shutil
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.firefox.options import Options

from harness import netns
from harness.browser.bidi import BidiEventLog
from harness.browser.prefs import user_js
from harness.browser.scripts import script
from harness.browser.webdriver_session import NO_NETWORK_EVENTS, WebDriverSession, first_line
from harness.paths import BUILD_BIN, FIREFOX

GECKODRIVER = BUILD_BIN / "geckodriver"  # a symlink into /opt (see scripts/setup.sh)

# WebDriver scripts (harness/browser/scripts/) that run in Firefox's parent process.
_WATCH_ADDRESSES = script("watch-addresses")
_READ_ADDRESSES = script("read-addresses")
_WATCH_NETWORK = script("watch-network")
_READ_NETWORK = script("read-network")
_READ_PREFS = script("read-prefs")
_RESOLVE = script("resolve")

#: The drivers whose scripts run in the chrome context now (`FirefoxSession.chrome_context`).
_DRIVERS_IN_CHROME: weakref.WeakSet[webdriver.Remote] = weakref.WeakSet()


class FirefoxSession(WebDriverSession):
    """One Firefox visit on a copy of the profile template: `start`, `load`, `stop` (`WebDriverSession`)."""

    #: Where the HAR's requests come from. "recorder": scripts/watch-network.js, three observer calls per request
    #: in the parent; BiDi gives the navigation events only. "bidi": WebDriver BiDi's network events, whose
    #: DevTools network observer passes every response body through JavaScript on the parent's main thread and
    #: doubled the lab's onLoad (docs/visit.md); "none": no request recorded. The last two only to measure
    #: (`benchmarks.browser_reuse --instrumentation-compare`).
    NETWORK_SOURCES = ("recorder", "bidi", NO_NETWORK_EVENTS)
    network_events = "recorder"
    driver_name = "geckodriver"

    def __init__(
        self,
        *args: Any,
        prefs: dict | None = None,
        read_prefs: tuple[str, ...] = (),
        environment: dict[str, str] | None = None,
        **kwargs: Any,
    ):
        """`WebDriverSession`'s arguments; ``prefs`` added to the profile's, ``read_prefs`` read back after the load,
        ``environment`` added to the browser's."""
        super().__init__(*args, **kwargs)
        self.prefs = prefs or {}
        self.read_prefs = list(read_prefs)  # preferences whose running values the report carries
        # Added to the account's minimal environment (a benchmark's profiler): Firefox's own variables only,
        # since the environment also reaches `ip netns exec` and setpriv before privileges drop.
        self.environment = environment or {}
        if any(not name.startswith("MOZ_") for name in self.environment):
            raise ValueError(f"only MOZ_* variables may be added to the browser's environment: {self.environment}")

    @property
    def _recorder(self) -> bool:
        """Whether the running browser's requests come from the harness's recorder."""
        return self._source == "recorder"

    @contextmanager
    def driver(self, profile_dir: Path, work: Path) -> Iterator[webdriver.Remote]:
        """A WebDriver session on `profile` itself (not a copy), started as a visit starts it; killed after.

        For the template's warm-up and for benchmarks that look inside the browser; `work` is the browser
        account's directory for geckodriver's log. The caller's block runs in the session's namespace. A
        FirefoxSession is single-use. The watchdog bounds the whole session; RuntimeError if it fired.
        """
        watchdog = self._start_watchdog()
        try:
            with netns.entered(self.namespace):
                port = self._start_driver(work)
                yield webdriver.Remote(command_executor=f"http://127.0.0.1:{port}", options=self._options(profile_dir))
        except Exception as exc:
            if self.report.watchdog_fired:
                raise RuntimeError(f"the browser session overran {self.timeout + self.margin:.0f} s") from exc
            raise
        finally:
            watchdog.cancel()
            self.kill()

    def warm(self, profile_dir: Path, work: Path) -> None:
        """Start the browser on `profile` as a visit does and quit it cleanly.

        The session is ready only after Firefox's startup tasks are done (geckodriver waits for them), and
        a clean quit is what makes Firefox write its startup caches (compiled chrome scripts, the chrome
        documents' prototypes) into the profile directory.
        """
        with self.driver(profile_dir, work) as driver:
            driver.quit()  # returns once Firefox has exited, its caches written

    def _prepare(self, work: Path) -> Path:
        profile_dir = work / "profile"
        shutil.copytree(self.template, profile_dir, symlinks=True)
        if self.prefs:
            with open(profile_dir / "user.js", "a") as f:
                f.write(user_js(self.prefs))
        self.account.give(work)
        return profile_dir

    def _start_driver(self, work: Path) -> int:
        port, ws_port = netns.free_tcp_port(), netns.free_tcp_port()
        argv = [str(GECKODRIVER.resolve()), "--port", str(port), "--websocket-port", str(ws_port)]
        argv += ["--allow-system-access", "--log", "warn"]
        env = {**self.account.environment(work), **self.environment}
        self._spawn_driver(self.account.setpriv(argv), env, work / "geckodriver.log")
        return self._await_driver(port)

    def _options(self, profile_dir: Path) -> Options:
        options = Options()
        options.binary_location = FIREFOX
        options.add_argument("-headless")
        options.add_argument("-profile")
        options.add_argument(str(profile_dir))
        options.accept_insecure_certs = False  # Selenium's default (True) would hide TLS errors
        options.enable_bidi = True
        options.page_load_strategy = "normal"
        options.timeouts = {"pageLoad": int(self.timeout * 1000), "script": 10_000}
        return options

    def _ready(self, driver: webdriver.Remote) -> BidiEventLog:
        """The chrome context's command, the event log, the address watch and, by default, the recorder."""
        driver.command_executor.add_command(  # type: ignore[union-attr]  # a RemoteConnection, as built
            "SET_CONTEXT", "POST", "/session/$sessionId/moz/context"
        )
        events = self._bidi_events(driver, network=self._source == "bidi")
        self._in_chrome(driver, _WATCH_ADDRESSES)
        if self._recorder:
            self._in_chrome(driver, _WATCH_NETWORK)
        return events

    def _collect(self, url: str, driver: webdriver.Remote, events: BidiEventLog) -> None:
        """What the page reports (navigation, paint, server addresses, preferences), then the BiDi events and
        the requests (once every request seen has ended, or after half a second; also when the rest failed,
        unless the watchdog killed the browser)."""
        report, t = self.report, time.monotonic()
        network: list[dict] = []
        try:
            if report.driver_failure is None:
                seen = self._read_page(url, driver, "about:")
                report.trr_failure = seen.get("trr")
                with self.chrome_context(driver):
                    report.page.server_addresses = self._in_chrome(driver, _READ_ADDRESSES) or []  # type: ignore[union-attr]
                    report.prefs = self._in_chrome(driver, _READ_PREFS, self.read_prefs) if self.read_prefs else {}
                if self._source == "bidi":
                    events.settle()
        except Exception as exc:
            report.driver_failure = f"collect: {type(exc).__name__}: {first_line(exc)}"
        if self._recorder and not self._killed.is_set():
            try:
                network = self._settled_requests(driver)
            except Exception as exc:
                problem = f"collect: requests: {type(exc).__name__}: {first_line(exc)}"
                report.driver_failure = report.driver_failure or problem
        report.events = self._take_events(events) + network
        self._finish_collect(t)

    def _settled_requests(self, driver: webdriver.Remote, max_wait: float = 0.5) -> list[dict]:
        """The recorded requests as BiDi network events, taken from the recorder once none is open (or at
        ``max_wait``): a request still open then is in the HAR unanswered. RuntimeError if the recorder failed
        on any request (the HAR would miss it: the harness's failure, not the page's)."""
        deadline = time.monotonic() + max_wait
        with self.chrome_context(driver):
            while json.loads(self._in_chrome(driver, _READ_NETWORK, "open"))["open"] and time.monotonic() < deadline:
                time.sleep(0.02)
            taken = json.loads(self._in_chrome(driver, _READ_NETWORK, "take"))
        if taken["failures"]["count"]:
            raise RuntimeError(f"the recorder failed {taken['failures']['count']} times: {taken['failures']['first']}")
        return taken["events"]

    def drop_requests(self) -> None:
        """Forget the requests recorded so far (a browser that serves many visits, before each)."""
        if self._recorder and self._driver is not None:
            self._in_chrome(self._driver, _READ_NETWORK, "take")

    def resolve(self, name: str) -> str | None:
        """Resolve ``name`` through the running browser's resolver (a warm connection); the error, or None."""
        if self._driver is None or self._events is None or self.report.driver_failure is not None:
            return "the browser is not running"
        try:
            with netns.entered(self.namespace):
                return self._in_chrome_async(self._driver, _RESOLVE, name)
        except Exception as exc:
            return f"{type(exc).__name__}: {first_line(exc)}"

    @staticmethod
    @contextmanager
    def chrome_context(driver: webdriver.Remote) -> Iterator[None]:
        """The scripts of the block run in Firefox's parent process (chrome context), then the driver returns to
        the page's: one switch there and back for all of them, where each script alone makes its own (a switch is
        a round trip to geckodriver). A block inside another switches nothing. No command that needs the page's
        context (`switch_to.window`, a page's script) may run in it."""
        if driver in _DRIVERS_IN_CHROME:
            yield
            return
        driver.execute("SET_CONTEXT", {"context": "chrome"})
        _DRIVERS_IN_CHROME.add(driver)
        try:
            yield
        finally:
            _DRIVERS_IN_CHROME.discard(driver)
            driver.execute("SET_CONTEXT", {"context": "content"})

    @staticmethod
    def _in_chrome(driver: webdriver.Remote, source: str, *args):
        """Run ``source`` in Firefox's parent process (chrome context), then return to the page's (`chrome_context`)."""
        with FirefoxSession.chrome_context(driver):
            return driver.execute_script(source, *args)

    @staticmethod
    def _in_chrome_async(driver: webdriver.Remote, source: str, *args):
        """Run the asynchronous script ``source`` in Firefox's parent process, then return to the page's."""
        with FirefoxSession.chrome_context(driver):
            return driver.execute_async_script(source, *args)
