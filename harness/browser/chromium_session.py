"""One Chromium session: a fresh user-data directory, chromedriver and Chromium as the browser account, one
navigation; the watchdog, the kill and the navigation are `WebDriverSession`'s (shared with Firefox), what is
Chromium's is here.

The browser runs with its own sandbox (user namespaces and seccomp; Debian's build has no setuid helper):
never `--no-sandbox`. It trusts the place's CA through the NSS database in its HOME (~/.pki/nssdb), never
by ignoring certificate errors. Its net log (--log-net-log) says which resolver answered and with which
configuration (harness/browser/chromium_netlog.py).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.options import Options

from harness import netns
from harness.arms.doh import DOH_CERTIFICATE_FAILED
from harness.browser.bidi import BidiEventLog
from harness.browser.chromium_netlog import CHROMIUM_OWN_NAMES, NetLogDns, load_netlog, netlog_dns
from harness.browser.chromium_netlog_har import PageRequests, page_requests
from harness.browser.chromium_quic import quic_ca_hosts
from harness.browser.webdriver_session import NO_NETWORK_EVENTS, WebDriverSession, first_line

CHROMIUM = "/usr/lib/chromium/chromium"  # the binary itself: /usr/bin/chromium is a wrapper adding flags
CHROMEDRIVER = "/usr/bin/chromedriver"
#: What Chromium prints when neither the setuid nor the namespace sandbox can start (sandbox/linux/...).
NO_SANDBOX = "No usable sandbox"
#: Asynchronous page script: fetch arguments[0] without CORS and say how it ended ("answered", or the error's
#: message). A name that does not exist ends in a TypeError once it is looked up: that lookup is the point.
_RESOLVE = """const [url, done] = arguments;
fetch(url, {mode: "no-cors", cache: "no-store"}).then(() => done("answered"), e => done(String(e)));"""
#: How a lookup's fetch may end: answered, or failed (Chromium says only "Failed to fetch", whatever failed).
_RESOLVED = ("answered", "TypeError: Failed to fetch")


class ChromiumSession(WebDriverSession):
    """`start`, `load`, `stop` of one Chromium visit. ``template`` is the NSS database trusting the place's CA;
    ``switches``, ``local_state`` and ``preferences`` are what the study's settings and the arm say."""

    #: Where the HAR's requests come from: "netlog", the net log every visit writes anyway
    #: (harness/browser/chromium_netlog_har.py); "bidi", WebDriver BiDi's network events (chromium-bidi over
    #: CDP), which cost onLoad 12-17 %; "none": no request recorded, only to measure what recording costs onLoad
    #: (`benchmarks.browser_reuse --instrumentation-compare`).
    NETWORK_SOURCES = ("netlog", "bidi", NO_NETWORK_EVENTS)
    network_events = "netlog"
    driver_name = "chromedriver"

    def __init__(
        self,
        *args: Any,
        switches: list[str],
        local_state: dict,
        preferences: dict,
        read_settings: dict[str, str],
        **kwargs: Any,
    ):
        """`WebDriverSession`'s arguments, and what the study's settings and the arm say."""
        super().__init__(*args, **kwargs)
        self.switches, self.local_state, self.preferences = switches, local_state, preferences
        self.read_settings = read_settings  # name -> kind of the study's settings, read back from the net log

    def _prepare(self, work: Path) -> Path:
        """HOME with the NSS database, and a user-data directory holding Local State and the preferences.

        Empty otherwise, not copied from a warmed template as Firefox's profile is: measured, a warmed one
        stripped of web state starts no faster (benchmarks/chromium_start.py, docs/visit.md)."""
        shutil.copytree(self.template, work / "home" / ".pki" / "nssdb")
        user_data = work / "user-data"
        (user_data / "Default").mkdir(parents=True)
        (user_data / "Local State").write_text(json.dumps(self.local_state))
        (user_data / "Default" / "Preferences").write_text(json.dumps(self.preferences))
        self.account.give(work)
        return user_data

    def _start_driver(self, work: Path) -> int:
        port = netns.free_tcp_port()
        env = {**self.account.environment(work), "HOME": str(work / "home")}
        env = {k: v for k, v in env.items() if not k.startswith("MOZ_")}
        self._spawn_driver(self.account.setpriv([CHROMEDRIVER, f"--port={port}"]), env, work / "chromedriver.log")
        return self._await_driver(port)

    def _options(self, profile_dir: Path) -> Options:
        options = Options()
        options.binary_location = CHROMIUM
        for argument in ["--headless", f"--user-data-dir={profile_dir}", f"--log-net-log={self._netlog}"]:
            options.add_argument(argument)
        for argument in self.switches:
            options.add_argument(argument)
        options.accept_insecure_certs = False
        options.enable_bidi = True
        options.page_load_strategy = "normal"
        options.timeouts = {"pageLoad": int(self.timeout * 1000), "script": 10_000}
        return options

    @property
    def _netlog(self) -> Path:
        assert self._work is not None
        return self._work / "netlog.json"

    def _ready(self, driver: webdriver.Remote) -> BidiEventLog:
        """The event log: BiDi's network events too, unless no request is recorded."""
        return self._bidi_events(driver, network=self._source == "bidi")

    def _start_failure(self, exc: Exception, work: Path) -> str:
        """A sandbox that could not start says so in one line."""
        if _log_says(work / "chromedriver.log", NO_SANDBOX):
            return (
                "start: Chromium's sandbox could not start (it said 'No usable sandbox'): the browser account "
                "needs user namespaces; dnsstudy never runs Chromium with --no-sandbox"
            )
        return super()._start_failure(exc, work)

    def _collect(self, url: str, driver: webdriver.Remote, events: BidiEventLog) -> None:
        """What the page reports (navigation, paint), the BiDi events; then a clean quit, which completes the net
        log the DNS facts (and, by default, the requests) are read from; the navigation's net error."""
        report, t = self.report, time.monotonic()
        try:
            if report.driver_failure is None:
                self._read_page(url, driver, "chrome-error:")
                if self._source == "bidi":
                    events.settle()
                if not report.error_page and report.exception is None:
                    _await_load_event(events)
        except Exception as exc:
            report.driver_failure = f"collect: {type(exc).__name__}: {first_line(exc)}"
        report.events = self._take_events(events)
        self._read_netlog(driver)
        # A navigation the page-load timeout stopped ends in net::ERR_ABORTED: that abort is the driver's.
        failed = report.error_page or report.exception not in (None, "TimeoutException")
        report.net_error = navigation_error(report.events) if failed else None
        self._finish_collect(t)

    def _read_netlog(self, driver: webdriver.Remote) -> None:
        """Quit the browser cleanly (it closes its net log), then read the DNS facts, the settings and (the net
        log being the requests' source) the page's requests from it."""
        sandbox = self._sandbox()  # while the browser still runs
        if self.report.driver_failure is None:
            try:
                driver.quit()
            except Exception:  # the log's complete lines are read all the same
                pass
        data = load_netlog(self._netlog)
        self._report_netlog(netlog_dns(data, own_names=CHROMIUM_OWN_NAMES), sandbox)
        if self._source == "netlog":
            self._report_requests(page_requests(data))

    def _report_requests(self, found: PageRequests) -> None:
        """The page's requests from the net log into the report's events (BiDi's shape, after the navigation
        events), the server address of each response into the page's."""
        self.report.events += found.events
        if self.report.page is not None:
            self.report.page.server_addresses = found.server_addresses

    def _report_netlog(self, found: NetLogDns | None, sandbox: str) -> None:
        """The net log's DNS facts, the settings read back and the sandbox into the visit's report."""
        if found is None:
            return
        written = self._preferences_written()
        report = self.report
        settings = found.settings(self.read_settings)
        # The hosts allowed the place's CA over QUIC, as the running browser's command line names them: a count,
        # since a lab web's list runs to thousands of names (the same at every visit of the place)
        quic = quic_ca_hosts(found.command_line)
        report.prefs = {**settings, **written, "dns": found.summary(), "sandbox": sandbox, "quic_ca_hosts": quic}
        if found.doh_cert_errors:
            report.trr_failure = DOH_CERTIFICATE_FAILED

    def resolve(self, name: str) -> str | None:
        """Resolve ``name`` through the running browser's resolver, from the current tab (a fetch that fails once
        the name is looked up: its secure DNS, or its built-in resolver and so the arm's stub), so that the
        connection to the resolver is open before the navigation (a warm connection); the error, or None. The
        fetch's own events are no visit's: they are dropped."""
        if self._driver is None or self._events is None or self.report.driver_failure is not None:
            return "the browser is not running"
        try:
            with netns.entered(self.namespace):
                said = self._driver.execute_async_script(_RESOLVE, f"https://{name}/")
        except Exception as exc:
            return f"{type(exc).__name__}: {first_line(exc)}"
        self._events.settle()
        self._events.take()
        return None if said in _RESOLVED else f"the lookup said {said}"

    def _preferences_written(self) -> dict[str, object]:
        """The study's profile preferences as the browser wrote them back to Default/Preferences at its quit."""
        assert self._work is not None
        try:
            written = json.loads((self._work / "user-data" / "Default" / "Preferences").read_text())
        except (OSError, ValueError):
            return {}
        out: dict[str, object] = {}
        for name, kind in self.read_settings.items():
            if kind == "preference":
                node: object = written
                for part in name.split("."):
                    node = node.get(part) if isinstance(node, dict) else None
                out[name] = node
        return out

    def _sandbox(self) -> str:
        """How the browser's processes were sandboxed, from the zygote's and renderers' /proc (seccomp mode 2:
        a filter); "" where none could be seen (the browser had exited)."""
        modes = set()
        for pid in self._descendants():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes()  # one string once the process set its title
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            if b"--type=renderer" in argv:
                seccomp = next((line.split()[1] for line in status.splitlines() if line.startswith("Seccomp:")), "")
                modes.add("seccomp-filter" if seccomp == "2" else f"seccomp-{seccomp or 'unknown'}")
        return ",".join(sorted(modes))

    def _descendants(self) -> list[int]:
        """chromedriver's processes and theirs: the renderers live in namespaces of their own (the sandbox's),
        not the client's, so only their parentage finds them."""
        if self._driver_proc is None:
            return []
        parents: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    ppid = int(
                        next(x for x in (entry / "status").read_text().splitlines() if x.startswith("PPid:")).split()[1]
                    )
                except (OSError, StopIteration, ValueError):
                    continue
                parents.setdefault(ppid, []).append(int(entry.name))
        found, pending = [], [self._driver_proc.pid]
        while pending:
            pid = pending.pop()
            found.append(pid)
            pending.extend(parents.get(pid, []))
        return found


def _await_load_event(events: BidiEventLog, max_wait: float = 1.0) -> None:
    """chromedriver answers the navigation before its BiDi load event reaches us (seen at 3.3 s onLoads on a
    loaded machine): wait briefly for it, the cross-check of onLoad."""
    deadline = time.monotonic() + max_wait
    while time.monotonic() < deadline:
        if any(e["method"] == "browsingContext.load" for e in events.snapshot()):
            return
        time.sleep(0.01)


def navigation_error(events: list[dict]) -> str | None:
    """The net::ERR_* code BiDi reports for the navigation's own request (a fetchError with a navigation id)."""
    for event in events:
        params = event.get("params", {})
        if event.get("method") == "network.fetchError" and params.get("navigation"):
            return str(params.get("errorText") or "") or None
    return None


def _log_says(log: Path, marker: str) -> bool:
    try:
        return marker in log.read_text(errors="replace")
    except OSError:
        return False
