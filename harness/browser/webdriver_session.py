"""What every browser's WebDriver session shares: the browser account's processes and their kill, the watchdog,
the driver on loopback, the navigation, WebDriver BiDi's event log and the page's own scripts.

Each browser specialises `WebDriverSession` (Firefox: harness/browser/session.py, Chromium:
harness/browser/chromium_session.py): how its directory is prepared, how its driver starts, its capabilities,
what it does once the browser is ready and how a visit is collected. A reused browser adds
harness/browser/reused.py on top of its browser's session. No browser's session inherits another's.
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
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.options import ArgOptions

from harness import netns
from harness.browser.account import BrowserAccount
from harness.browser.base import PageLoad
from harness.browser.bidi import EVENTS, NAVIGATION_EVENTS, BidiEventLog
from harness.browser.har import PageInfo
from harness.browser.scripts import script
from harness.errors import HarnessError

#: The page scripts (harness/browser/scripts/) both browsers run in the loaded page.
_PAGE = script("page")

#: `network_events` that records no request at all: BiDi's navigation events and the page's own Navigation
#: Timing only, to measure what recording the requests costs onLoad (`benchmarks.browser_reuse
#: --instrumentation-compare`); the HAR then has no entries.
NO_NETWORK_EVENTS = "none"


class WebDriverSession(ABC):
    """Prepare a directory, start the browser, load one URL, collect, kill, clean up: `start`, `load`, `stop`.

    Single-use. The watchdog runs from `start` to `stop`: at timeout + margin it kills the browser and
    everything of the account here, whatever hangs (the browser, its driver or the connection to it).
    """

    #: Where the HAR's requests come from, one of `NETWORK_SOURCES` (the first is the browser's default). A
    #: session validates it when it is built; a benchmark may set it on the class to measure another source.
    network_events: ClassVar[str]
    NETWORK_SOURCES: ClassVar[tuple[str, ...]]
    driver_name: ClassVar[str]  # geckodriver, chromedriver: what a start failure names

    def __init__(
        self,
        account: BrowserAccount,
        template: Path,
        namespace: str | None,
        work_root: Path,
        timeout: float = 30.0,
        margin: float = 10.0,
    ):
        check_network_events(type(self), self.network_events)
        self._source = self.network_events  # the running browser's (a benchmark may change the class's later)
        self.account = account
        self.template = template
        self.namespace = namespace
        self.work_root = work_root
        self.timeout = timeout
        self.margin = margin
        self.report = PageLoad()
        self._driver_proc: subprocess.Popen | None = None
        self._driver: webdriver.Remote | None = None
        self._events: BidiEventLog | None = None  # set once the browser is ready for a navigation
        self._work: Path | None = None
        self._watchdog: threading.Timer | None = None
        self._killed = threading.Event()

    # -- what each browser says ------------------------------------------

    @abstractmethod
    def _prepare(self, work: Path) -> Path:
        """The browser's directory (profile, user data) in ``work``, given to the browser account."""

    @abstractmethod
    def _start_driver(self, work: Path) -> int:
        """Start the driver as the browser account (`_spawn_driver`); the port it listens on."""

    @abstractmethod
    def _options(self, profile_dir: Path) -> ArgOptions:
        """The WebDriver capabilities of a session on ``profile_dir``."""

    @abstractmethod
    def _ready(self, driver: webdriver.Remote) -> BidiEventLog:
        """What the browser needs once its WebDriver session runs; the BiDi event log of its visits."""

    @abstractmethod
    def _collect(self, url: str, driver: webdriver.Remote, events: BidiEventLog) -> None:
        """Fill the report with what the loaded page and the browser say."""

    @abstractmethod
    def resolve(self, name: str) -> str | None:
        """Resolve ``name`` through the running browser's resolver (a warm connection); the error, or None."""

    def _start_failure(self, exc: Exception, work: Path) -> str:
        """The report's `driver_failure` for a browser that did not start."""
        return f"start: {type(exc).__name__}: {first_line(exc)}"

    # -- processes ---------------------------------------------------------

    def _account_pids(self) -> list[int]:
        """Processes of the browser account in our namespace (the browser, its children, its driver).

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
        """Prepare a work directory and start the driver and the browser on it.

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
        """Cancel the watchdog, kill the browser, delete the work directory (and the browser's directory in it)."""
        t = time.monotonic()
        if self._watchdog is not None:
            self._watchdog.cancel()
        self.kill()
        if self._driver is not None:  # its HTTP pool would hold a socket until garbage collection
            self._driver.command_executor.close()  # type: ignore[union-attr]  # a RemoteConnection here
        if self._work is not None:
            shutil.rmtree(self._work, ignore_errors=True)
        self.report.phases["shutdown"] = self.report.phases.get("shutdown", 0.0) + time.monotonic() - t

    def _spawn_driver(self, argv: list[str], env: dict[str, str], log_path: Path) -> None:
        """Start the driver ``argv`` as the browser account, in the namespace, in a process group of its own
        (the kill takes it whole), its output to ``log_path``."""
        if self.namespace:
            argv = netns.command(self.namespace, argv)
        # The directory is the browser account's: create the log afresh and never through a link.
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        with os.fdopen(os.open(log_path, flags, 0o600), "ab") as log:
            self._driver_proc = subprocess.Popen(
                argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def _await_driver(self, port: int) -> int:
        """Wait until the driver just started listens on ``port`` (returned), at most 10 s."""
        assert self._driver_proc is not None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not self._killed.is_set():
            if self._driver_proc.poll() is not None:
                raise RuntimeError(f"{self.driver_name} exited with status {self._driver_proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return port
            except OSError:
                time.sleep(0.01)
        raise RuntimeError(f"{self.driver_name} did not listen within 10 s")

    def _start_browser(self, profile_dir: Path, work: Path) -> None:
        """The driver, a WebDriver session with BiDi, then what the browser needs (`_ready`); a failure is the
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
            self._events = self._ready(driver)
        except Exception as exc:  # no browser, no visit: the harness failed, not the page
            report.driver_failure = self._start_failure(exc, work)
        report.phases["browser_start"] = time.monotonic() - t

    def _bidi_events(self, driver: webdriver.Remote, network: bool) -> BidiEventLog:
        """The BiDi event log: the navigation events, and BiDi's network events if ``network``."""
        return BidiEventLog(driver.capabilities["webSocketUrl"], names=EVENTS if network else NAVIGATION_EVENTS)

    def _navigate(self, url: str) -> None:
        """Load ``url``; a WebDriver error is the page's (a timeout, an error page), any other the driver's."""
        assert self._driver is not None  # started
        report, t = self.report, time.monotonic()
        try:
            self._driver.get(url)
        except WebDriverException as exc:
            report.exception, report.message = type(exc).__name__, first_line(exc)
        except Exception as exc:  # the connection to the driver broke: it or the browser died
            report.driver_failure = f"navigate: {type(exc).__name__}: {first_line(exc)}"
        report.phases["navigation"] = time.monotonic() - t

    def _read_page(self, url: str, driver: webdriver.Remote, error_scheme: str) -> dict:
        """The page's own report (Navigation Timing, its document, paint) into the visit's report; what the
        page script saw. A document whose URI begins with ``error_scheme`` is the browser's error page."""
        report = self.report
        seen = driver.execute_script(_PAGE)
        report.document_uri = seen["uri"]
        report.error_page = seen["uri"].startswith(error_scheme)
        paint = seen.get("paint") if not report.error_page else None
        report.paint = {k: paint.get(k) for k in ("fcp", "lcp")} if isinstance(paint, dict) else {}
        report.page = _page_info(url, seen)
        report.next_hop_protocol = (seen["timing"] or {}).get("nextHopProtocol")
        return seen

    def _finish_collect(self, t: float) -> None:
        """The collection's last word: BiDi's onLoad, the watchdog's failure, the phase's time since ``t``."""
        report = self.report
        report.bidi_on_load_ms = _bidi_on_load(report.events)
        if report.watchdog_fired and report.driver_failure is None:
            report.driver_failure = "watchdog: the visit overran its time budget"
        report.phases["collect"] = time.monotonic() - t

    def drop_requests(self) -> None:  # noqa: B027 -- BiDi's events need nothing here; the recorder overrides it
        """Forget the requests recorded so far (a browser that serves many visits, before each). BiDi's network
        events go with the event log's `take`; a browser that records requests another way forgets them here."""

    def _take_events(self, events: BidiEventLog) -> list[dict]:
        """The visit's BiDi events; the log is closed with the single-use session."""
        events.close()
        return events.snapshot()


def check_network_events(session: type[WebDriverSession], value: object) -> None:
    """A one-line error naming the key and the value unless ``value`` is one of the session's sources."""
    if value not in session.NETWORK_SOURCES:
        raise HarnessError(
            f"network_events = {value!r} for {session.__name__}: choose one of {', '.join(session.NETWORK_SOURCES)}"
        )


def _zombie(pid: int) -> bool:
    """A process that has exited and waits to be reaped: it holds nothing, and a SIGKILL does nothing to it.

    The browser's children, orphaned by its kill, wait for whoever reaps orphans here (the init of a container
    may take its time): waiting for them cost every visit 0.5 s of shutdown.
    """
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True  # gone


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (WebDriver's carry a stack trace after it)."""
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
