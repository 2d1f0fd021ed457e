"""One Firefox session: fresh profile directory, geckodriver and Firefox as the browser account, one navigation.

`Firefox` (harness/browser/firefox.py) runs one per visit. The session runs
in a network namespace (the lab's client) or on the host.
geckodriver is started by us, not by Selenium, so that it can be prefixed
with `ip netns exec` (which also gives it the namespace's resolv.conf) and
`setpriv` (which drops root), and so that the watchdog can kill the whole
process tree. Selenium connects to it as a remote end on loopback.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.firefox.options import Options

from harness import netns
from harness.browser.account import BrowserAccount
from harness.browser.base import PageLoad
from harness.browser.bidi import EVENTS, NAVIGATION_EVENTS, BidiEventLog
from harness.browser.har import PageInfo
from harness.browser.prefs import user_js
from harness.browser.scripts import script
from harness.paths import BUILD_BIN, FIREFOX

GECKODRIVER = BUILD_BIN / "geckodriver"  # a symlink into /opt (see scripts/setup.sh)

# WebDriver scripts (harness/browser/scripts/): the first five run in Firefox's parent process.
_WATCH_ADDRESSES = script("watch-addresses")
_READ_ADDRESSES = script("read-addresses")
_WATCH_NETWORK = script("watch-network")
_READ_NETWORK = script("read-network")
_READ_PREFS = script("read-prefs")
_NAVIGATION = script("navigation")
_PAINT = script("paint")
_RESOLVE = script("resolve")


class FirefoxSession:
    """Prepare a profile directory, start the browser, load one URL, collect, kill, clean up: `start`, `load`, `stop`.

    Single-use. The watchdog runs from `start` to `stop`: at timeout + margin it kills the browser and
    everything of the account here, whatever hangs (the browser, geckodriver or the connection to it).
    """

    #: Where the HAR's requests come from. "recorder": scripts/watch-network.js, three observer calls per request
    #: in the parent; BiDi gives the navigation events only. "bidi": WebDriver BiDi's network events, whose
    #: DevTools network observer passes every response body through JavaScript on the parent's main thread and
    #: doubled the lab's onLoad (docs/visit.md); only to measure that (`benchmarks.browser_reuse
    #: --instrumentation-compare`).
    network_events = "recorder"

    def __init__(
        self,
        account: BrowserAccount,
        template: Path,
        namespace: str | None,
        work_root: Path,
        prefs: dict | None = None,
        timeout: float = 30.0,
        margin: float = 10.0,
        read_prefs: tuple[str, ...] = (),
        environment: dict[str, str] | None = None,
    ):
        self.account = account
        self.template = template
        self.namespace = namespace
        self.work_root = work_root
        self.prefs = prefs or {}
        self.read_prefs = list(read_prefs)  # preferences whose running values the report carries
        # Added to the account's minimal environment (a benchmark's profiler): Firefox's own variables only,
        # since the environment also reaches `ip netns exec` and setpriv before privileges drop.
        self.environment = environment or {}
        if any(not name.startswith("MOZ_") for name in self.environment):
            raise ValueError(f"only MOZ_* variables may be added to the browser's environment: {self.environment}")
        self.timeout = timeout
        self.margin = margin
        self.report = PageLoad()
        self._driver_proc: subprocess.Popen | None = None
        self._driver: webdriver.Remote | None = None
        self._events: BidiEventLog | None = None  # set once the browser is ready for a navigation
        self._recorder = False  # whether the running browser's requests come from the recorder (`network_events`)
        self._work: Path | None = None
        self._watchdog: threading.Timer | None = None
        self._killed = threading.Event()

    # -- processes ---------------------------------------------------------

    def _account_pids(self) -> list[int]:
        """Processes of the browser account in our namespace (Firefox, its children, geckodriver).

        On the host, only those in the host's own network namespace: a crawl's browsers, in their client
        namespaces, are not ours to kill.
        """
        own = []
        for pid in netns.pids_in(self.namespace):
            try:
                if os.stat(f"/proc/{pid}").st_uid == self.account.uid and not _zombie(pid):
                    own.append(pid)
            except OSError:
                pass
        return own

    def kill(self) -> None:
        """SIGKILL the driver's process group and every process of the account here.

        The profile is thrown away, so a graceful quit (0.5 s) buys nothing.
        """
        self._killed.set()
        proc = self._driver_proc
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for _ in range(50):
            pids = self._account_pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)
        if proc is not None:
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass

    def _start_watchdog(self) -> threading.Timer:
        """Kill the session at timeout + margin; the report says the watchdog fired."""

        def fire() -> None:
            self.report.watchdog_fired = True
            self.kill()

        timer = threading.Timer(self.timeout + self.margin, fire)
        timer.daemon = True
        timer.start()
        return timer

    # -- the session -----------------------------------------------------

    def run(self, url: str) -> PageLoad:
        """`start`, `load` and `stop`: one visit's browser."""
        try:
            self.start()
            return self.load(url)
        finally:
            self.stop()

    def start(self) -> None:
        """Copy the template into a work directory and start geckodriver and Firefox on the copy.

        A browser that does not start is the report's `driver_failure`; `stop` must follow even if this raises.
        """
        t = time.monotonic()
        self._work = Path(tempfile.mkdtemp(prefix="visit-", dir=self.work_root))
        self._watchdog = self._start_watchdog()
        profile_dir = self._prepare(self._work)
        self.report.phases["profile"] = time.monotonic() - t
        with netns.entered(self.namespace):
            self._start_browser(profile_dir, self._work)

    def load(self, url: str) -> PageLoad:
        """Navigate to ``url`` (the page-load timeout bounds it) and collect; the report as it stands if the
        browser did not start."""
        if self._driver is not None and self._events is not None:
            with netns.entered(self.namespace):
                self._navigate(url)
                self._collect(url, self._driver, self._events)
        return self.report

    def stop(self) -> None:
        """Cancel the watchdog, kill the browser, delete the work directory (and the profile directory in it)."""
        t = time.monotonic()
        if self._watchdog is not None:
            self._watchdog.cancel()
        self.kill()
        if self._driver is not None:  # its HTTP pool would hold a socket until garbage collection
            self._driver.command_executor.close()  # type: ignore[union-attr]  # a RemoteConnection here
        if self._work is not None:
            shutil.rmtree(self._work, ignore_errors=True)
        self.report.phases["shutdown"] = self.report.phases.get("shutdown", 0.0) + time.monotonic() - t

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
        argv = self.account.setpriv(
            [
                str(GECKODRIVER.resolve()),
                "--port",
                str(port),
                "--websocket-port",
                str(ws_port),
                "--allow-system-access",
                "--log",
                "warn",
            ]
        )
        if self.namespace:
            argv = netns.command(self.namespace, argv)
        # The directory is the browser account's: create the log afresh and never through a link.
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        with os.fdopen(os.open(work / "geckodriver.log", flags, 0o600), "ab") as log:
            self._driver_proc = subprocess.Popen(
                argv,
                env={**self.account.environment(work), **self.environment},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self._await_driver(port, "geckodriver")

    def _await_driver(self, port: int, name: str) -> int:
        """Wait until the driver just started listens on ``port`` (returned), at most 10 s."""
        assert self._driver_proc is not None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not self._killed.is_set():
            if self._driver_proc.poll() is not None:
                raise RuntimeError(f"{name} exited with status {self._driver_proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return port
            except OSError:
                time.sleep(0.01)
        raise RuntimeError(f"{name} did not listen within 10 s")

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

    def _start_browser(self, profile_dir: Path, work: Path) -> None:
        """geckodriver, a WebDriver session with BiDi, the event log and the address watch; a failure is the
        harness's (no browser, no visit), recorded in the report."""
        report, t = self.report, time.monotonic()
        try:
            port = self._start_driver(work)
            # browser_start's parts ("browser_start.*": not added to the phases' sum), to see where it goes
            report.phases["browser_start.driver"] = time.monotonic() - t
            driver = self._driver = webdriver.Remote(
                command_executor=f"http://127.0.0.1:{port}", options=self._options(profile_dir)
            )
            report.phases["browser_start.session"] = time.monotonic() - t - report.phases["browser_start.driver"]
            driver.command_executor.add_command(  # type: ignore[union-attr]  # a RemoteConnection, as built above
                "SET_CONTEXT", "POST", "/session/$sessionId/moz/context"
            )
            self._recorder = self.network_events == "recorder"
            names = NAVIGATION_EVENTS if self._recorder else EVENTS
            events = BidiEventLog(driver.capabilities["webSocketUrl"], names=names)
            self._in_chrome(driver, _WATCH_ADDRESSES)
            if self._recorder:
                self._in_chrome(driver, _WATCH_NETWORK)
            self._events = events
        except Exception as exc:  # no browser, no visit: the harness failed, not the page
            report.driver_failure = f"start: {type(exc).__name__}: {_first_line(exc)}"
        report.phases["browser_start"] = time.monotonic() - t

    def _navigate(self, url: str) -> None:
        """Load ``url``; a WebDriver error is the page's (a timeout, an error page), any other the driver's."""
        assert self._driver is not None  # started
        report, t = self.report, time.monotonic()
        try:
            self._driver.get(url)
        except WebDriverException as exc:
            report.exception, report.message = type(exc).__name__, _first_line(exc)
        except Exception as exc:  # the connection to the driver broke: it or the browser died
            report.driver_failure = f"navigate: {type(exc).__name__}: {_first_line(exc)}"
        report.phases["navigation"] = time.monotonic() - t

    def _collect(self, url: str, driver: webdriver.Remote, events: BidiEventLog) -> None:
        """What the page reports (navigation, paint, server addresses, preferences), then the BiDi events and
        the requests (once every request seen has ended, or after half a second; also when the rest failed,
        unless the watchdog killed the browser)."""
        report, t = self.report, time.monotonic()
        network: list[dict] = []
        try:
            if report.driver_failure is None:
                seen = driver.execute_script(_NAVIGATION)
                report.document_uri, report.trr_failure = seen["uri"], seen.get("trr")
                report.error_page = seen["uri"].startswith("about:")
                report.paint = _paint(driver) if not report.error_page else {}
                report.page = _page_info(url, seen)
                report.next_hop_protocol = (seen["timing"] or {}).get("nextHopProtocol")
                report.page.server_addresses = self._in_chrome(driver, _READ_ADDRESSES) or []
                report.prefs = self._in_chrome(driver, _READ_PREFS, self.read_prefs) if self.read_prefs else {}
                if not self._recorder:
                    events.settle()
        except Exception as exc:
            report.driver_failure = f"collect: {type(exc).__name__}: {_first_line(exc)}"
        if self._recorder and not self._killed.is_set():
            try:
                network = self._settled_requests(driver)
            except Exception as exc:
                problem = f"collect: requests: {type(exc).__name__}: {_first_line(exc)}"
                report.driver_failure = report.driver_failure or problem
        report.events = self._take_events(events) + network
        report.bidi_on_load_ms = _bidi_on_load(report.events)
        if report.watchdog_fired and report.driver_failure is None:
            report.driver_failure = "watchdog: the visit overran its time budget"
        report.phases["collect"] = time.monotonic() - t

    def _settled_requests(self, driver: webdriver.Remote, max_wait: float = 0.5) -> list[dict]:
        """The recorded requests as BiDi network events, taken from the recorder once none is open (or at
        ``max_wait``): a request still open then is in the HAR unanswered. RuntimeError if the recorder failed
        on any request (the HAR would miss it: the harness's failure, not the page's)."""
        deadline = time.monotonic() + max_wait
        while self._in_chrome(driver, _READ_NETWORK, "open")["open"] and time.monotonic() < deadline:
            time.sleep(0.02)
        taken = self._in_chrome(driver, _READ_NETWORK, "take")
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
            return f"{type(exc).__name__}: {_first_line(exc)}"

    def _take_events(self, events: BidiEventLog) -> list[dict]:
        """The visit's BiDi events; the log is closed with the single-use session."""
        events.close()
        return events.snapshot()

    @staticmethod
    def _in_chrome(driver: webdriver.Remote, source: str, *args):
        """Run ``source`` in Firefox's parent process (chrome context), then return to the page's."""
        driver.execute("SET_CONTEXT", {"context": "chrome"})
        try:
            return driver.execute_script(source, *args)
        finally:
            driver.execute("SET_CONTEXT", {"context": "content"})

    @staticmethod
    def _in_chrome_async(driver: webdriver.Remote, source: str, *args):
        """Run the asynchronous script ``source`` in Firefox's parent process, then return to the page's."""
        driver.execute("SET_CONTEXT", {"context": "chrome"})
        try:
            return driver.execute_async_script(source, *args)
        finally:
            driver.execute("SET_CONTEXT", {"context": "content"})


def _paint(driver: webdriver.Remote) -> dict:
    """FCP and LCP of the loaded page; empty if the page could not report them (never a driver failure)."""
    try:
        found = driver.execute_script(_PAINT)
    except WebDriverException:
        return {}
    return {k: found.get(k) for k in ("fcp", "lcp")} if isinstance(found, dict) else {}


def _zombie(pid: int) -> bool:
    """A process that has exited and waits to be reaped: it holds nothing, and a SIGKILL does nothing to it.

    Firefox's children, orphaned by its kill, wait for whoever reaps orphans here (the init of a container may
    take its time): waiting for them cost every visit 0.5 s of shutdown.
    """
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True  # gone


def _first_line(exc: BaseException) -> str:
    text = getattr(exc, "msg", None) or str(exc)
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def _page_info(url: str, seen: dict) -> PageInfo:
    timing = seen.get("timing") or {}
    page = PageInfo(url=url, title=seen.get("title") or "")
    start = timing.get("startTime", 0)
    if timing.get("loadEventStart"):
        page.on_load_ms = round(timing["loadEventStart"] - start, 3)
    if timing.get("domContentLoadedEventStart"):
        page.on_content_load_ms = round(timing["domContentLoadedEventStart"] - start, 3)
    return page


def _bidi_on_load(events: list[dict]) -> float | None:
    """browsingContext.load minus navigationStarted, both from BiDi (integer ms)."""
    started = next(
        (e["params"]["timestamp"] for e in events if e["method"] == "browsingContext.navigationStarted"), None
    )
    loaded = next((e["params"]["timestamp"] for e in events if e["method"] == "browsingContext.load"), None)
    return float(loaded - started) if started is not None and loaded is not None else None
