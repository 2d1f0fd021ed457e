"""One browser for many visits (`browser_session = "reused"`), with nothing of one visit seen by the next: what
every browser's reused session shares.

`ReusedSession` sits on a browser's own session (`ReusedFirefoxSession` on `FirefoxSession`,
harness/browser/firefox_reused.py). It starts the browser once; before every visit it waits for the visit
before's DNS queries to end, starts the visit's watchdog, lets the browser clear what a visit could leave and
take the arm's settings (`_clear_for_visit`, the browser's own), opens a new tab in a new user context
(WebDriver BiDi `browser.createUserContext`), so that even what clearing missed is out of the next visit's
reach, then waits until the browser has ready what a navigation would otherwise make on its path
(`_await_ready`) and what the tab set going is done (`_await_tab_ready`); after the visit the tab and user
context are removed, and the visit waits for its browser's DNS queries in flight (to the system's name server or
its own DoH server) to end while its arm still serves them and its counters still run. Two steps run on a
thread beside the harness's own work: the next visit's tab is opened once a visit's counters are read
(`open_next_tab`, taken by the next `begin_visit`), and a browser whose collection is done with the tab may
begin closing it (`_close_visit_early`, awaited by `end_visit`), and opening the next one beside it
(`open_next_at_collection`). The watchdog runs per
visit; when it fires the browser is killed and the next visit gets a new one (`restart_reason`).
"""

from __future__ import annotations

import ipaddress
import sys
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TypeVar

from harness import netns
from harness.browser.base import PageLoad, SessionPolicy
from harness.browser.bidi import BidiEventLog
from harness.browser.warmup import PAGE, BrowserWarmup, WarmupServer, warm_up
from harness.browser.webdriver_session import WebDriverSession, first_line

#: How long a visit waits, before its counters start, for DNS queries of the visit before that are still in
#: flight: glibc retries an unanswered query after 5 s, twice in all by default (resolv.conf(5)), and a retry
#: sent during the next visit reaches the resolver of an arm that visit may not use (seen on 4G: one datagram
#: to port 53 in a stub arm's visit). Past this the visit goes on, and its proof judges what it saw.
DNS_SETTLE_S = 11.0
DNS_PORT = 53
TCP_ESTABLISHED = "01"  # the state column of /proc/net/tcp[6] (include/net/tcp_states.h)

#: How long a visit waits, before its counters start, for what its browser makes ready in the background
#: (`_await_ready`): Firefox's pool of content processes was full 0-0.1 s after its warm-up, and at later visits
#: at once (docs/visit.md). Past this the visit goes on, and its record says what was ready (`browser_ready`).
READY_LIMIT_S = 3.0

T = TypeVar("T")


class ReusedSession(WebDriverSession):
    """A browser's session that serves visit after visit: `start` once, then `begin_visit`, `load`, `end_visit`
    per visit, and `stop` at the end."""

    #: Whether the driver goes back to the first tab after each visit (geckodriver runs its chrome-context
    #: scripts in the current window, which must exist).
    home_after_visit = True

    #: Whether the next visit's user context and tab are opened as the visit's begin to close at its collection
    #: (`_close_visit_early`), rather than once its counters are read (`open_next_tab`): the tab's making (a new
    #: renderer) then runs beside the harness's reading of the visit too. Only where that makes no DNS query that
    #: the visit's counters could see (a tab on about:blank) and nothing the visit's record reads.
    open_next_at_collection = False
    #: Whether the visit's tab and user context begin to close at its collection, once the browser's collection
    #: needs the tab no more (`_close_visit_early`), while the harness reads what the visit left. False keeps the
    #: tab until `end_visit`, for a test that drives it after the load.
    close_tab_at_collection = False

    #: Whether the browser loads the warm-up page (harness/browser/warmup.py) at its start, before its first
    #: visit. False only to measure what it changes (`benchmarks.browser_reuse --modes reused-unwarmed`).
    warm_start = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.visits = 0  # visits begun in this browser
        self._home: str | None = None  # the first tab's window handle: where the driver waits between visits
        self._tab: str | None = None  # the current visit's tab (a BiDi browsing context id = a window handle)
        self._user_context: str | None = None
        self._browser_pid: int | None = None  # the browser's main process (its driver's child)
        self.warmup: BrowserWarmup | None = None  # the warm-up page's load at the start, if there was one
        # The warm-up's server, if the browser made it before its start (Chromium: its CA must be in the NSS
        # database before the browser opens it); otherwise `_warm_up` makes one once the browser runs.
        self._warmup_server: WarmupServer | None = None
        self._doh_server: tuple[str, int] | None = None  # the visit's DoH server (`begin_visit`)
        self._closing: Future[None] | None = None  # the visit's tab and user context closing (`_close_visit_early`)
        # The next visit's user context and tab opening (`open_next_tab`): their ids once open.
        self._opening: Future[tuple[str, str]] | None = None

    @abstractmethod
    def _clear_for_visit(self, settings: dict) -> None:
        """Clear what the visit before could have left and give the browser the arm's ``settings``; raise if it
        cannot (the browser is then killed and the visit is the harness's failure)."""

    @abstractmethod
    def _trust_warmup_certificate(self, server: WarmupServer) -> None:
        """Make the running browser trust the warm-up server's own CA (and nothing else of it)."""

    def _await_ready(self) -> dict | None:
        """Wait, at most `READY_LIMIT_S`, until the browser has ready what a navigation would otherwise make on its
        path (Firefox: its preallocated content processes); what it found, for the record (None: nothing to wait
        for)."""
        return None

    def _browser_scripts(self) -> AbstractContextManager[None]:
        """A block in which the browser's own scripts run with one switch of the driver's context for all
        (Firefox: its parent process, `FirefoxSession.chrome_context`); none by default."""
        return nullcontext()

    def _await_tab_ready(self) -> dict | None:
        """Wait, at most `READY_LIMIT_S`, until what opening the visit's tab set going in the browser is done
        (Chromium: the new tab's renderer starting); what it found, for the record (None: nothing to wait for)."""
        return None

    def start(self) -> None:
        """Start the browser as a fresh session does; its watchdog then covers only the start (one per visit)."""
        super().start()
        if self._driver is not None and self._events is not None and self._driver_proc is not None:
            driver_pid = self._driver_proc.pid
            self._browser_pid = next((p for p in self._account_pids() if _parent(p) == driver_pid), None)
            try:  # still under the start's watchdog: a WebDriver command to a hung browser never returns
                self._home = self._driver.current_window_handle
            except Exception as exc:
                self.report.driver_failure = f"start: {type(exc).__name__}: {first_line(exc)}"
            if self.report.driver_failure is None and self.warm_start:
                self._warm_up()
        self._end_watchdog()

    def _warm_up(self) -> None:
        """Load the warm-up page (harness/browser/warmup.py), still under the start's watchdog; a warm-up that
        fails is the start's failure (the harness's): the browser is killed, and the start may be retried."""
        assert self._driver is not None and self._events is not None and self._work is not None  # started
        t = time.monotonic()
        try:
            server = self._warmup_server or WarmupServer(self.namespace, self.account, self._work)
            self._trust_warmup_certificate(server)
            with server:
                self.warmup = warm_up(self._events, server)
        except Exception as exc:  # the server or the trust: no page loaded
            self.warmup = BrowserWarmup(PAGE, round(time.monotonic() - t, 3), False, f"{type(exc).__name__}: {exc}")
        self.report.phases["warm_start"] = time.monotonic() - t
        if not self.warmup.ok:
            self.report.driver_failure = f"start: warm-up: {self.warmup.detail}"
            self.kill()

    @property
    def alive(self) -> bool:
        """Started, not killed (by the watchdog or a failure), the driver running, and the browser too (not dead,
        not stopped): read from /proc, so a browser that hangs costs no wait here (the visit's watchdog has it)."""
        proc = self._driver_proc
        return (
            self._events is not None
            and self._home is not None
            and not self._killed.is_set()
            and proc is not None
            and proc.poll() is None
            and self._browser_pid is not None
            and process_state(self._browser_pid) not in ("Z", "X", "T", "t", None)
        )

    def memory_mb(self) -> float:
        """The proportional set size of the browser's processes (the browser's, its driver's), in MiB."""
        total = 0
        for pid in self._account_pids():
            try:
                rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
            except OSError:
                continue
            total += next((int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")), 0)
        return total / 1024

    def begin_visit(self, settings: dict, doh_server: tuple[str, int] | None = None) -> None:
        """A visit's report and watchdog, the arm's settings, everything cleared, a new user context and tab.
        ``doh_server``: where the arm has the browser's own DoH client send its queries (`BrowserDns.doh_server`).

        A browser that fails at this is killed, and the visit is the harness's failure (`driver_failure`).
        """
        if self.visits:  # the first visit's report keeps the browser's start
            self.report = PageLoad()
        self.visits += 1
        if not self.alive:
            self.report.driver_failure = self.report.driver_failure or "reuse: the browser is not running"
            return
        t = time.monotonic()
        unsettled = self._await_dns_settled()
        self._doh_server = doh_server
        self.report.phases["dns_settle"] = time.monotonic() - t
        self._watchdog = self._start_watchdog()
        t = time.monotonic()
        try:
            with netns.entered(self.namespace):
                opened = self._take_opened_tab()
                with self._browser_scripts() if opened else nullcontext():  # `_ready_tab` switches to a new tab
                    self._clear_for_visit(settings)
                    self._ready_tab(opened)
        except Exception as exc:
            self.report.driver_failure = f"reuse: {type(exc).__name__}: {first_line(exc)}"
            self.kill()
        self.report.phases["clear"] = time.monotonic() - t - self.report.phases.get("ready", 0.0)
        self.report.ready = {**(self.report.ready or {}), "dns_in_flight_before": unsettled}

    def _await_dns_settled(self) -> int:
        """Wait (at most `DNS_SETTLE_S`) until the browser has no DNS query in flight (`dns_queries_in_flight`),
        to the system's name server or to the visit's DoH server; the queries still in flight when the wait
        ended (0: it settled), which the record keeps (`browser_ready`)."""
        assert self._browser_pid is not None  # alive
        servers = (self._doh_server,) if self._doh_server else ()
        deadline = time.monotonic() + DNS_SETTLE_S
        while (left := dns_queries_in_flight(self._browser_pid, self.account.uid, servers)) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.05)
        return left

    def _take_opened_tab(self) -> bool:
        """Whether `open_next_tab` opened the visit's tab, which becomes the visit's (what its opening raised,
        raised here)."""
        opening, self._opening = self._opening, None
        if opening is None:
            return False
        self._user_context, self._tab = opening.result()
        return True

    def _ready_tab(self, opened: bool = False) -> None:
        """A new user context and tab opened (unless ``opened`` already), then what the browser makes ready for a
        navigation and what the new tab set going awaited, in that order: the tab takes what the browser had
        ready (Firefox: a preallocated process), which the navigation then finds made anew, whether the tab was
        opened here or before the visit. The time waited is the phase `ready`, what was found the record's
        `browser_ready`; events and requests so far are dropped."""
        assert self._events is not None  # alive
        if not opened:
            self._open_tab()
        with self._browser_scripts():
            t = time.monotonic()
            before = self._await_ready()
            after = self._await_tab_ready()
            self.report.phases["ready"] = time.monotonic() - t
            self.report.ready = {**(before or {}), **(after or {}), "tab_opened_before": opened}
            self._events.take()
            self.drop_requests()

    def _open_tab(self) -> None:
        """A new user context and a tab in it, the visit's, which the driver switches to."""
        self._user_context, self._tab = self._new_tab()

    def _new_tab(self) -> tuple[str, str]:
        """A new user context and a tab in it, which the driver switches to: their ids (on a thread,
        `open_next_tab`: nothing else drives the browser then)."""
        assert self._events is not None and self._driver is not None  # alive
        context = self._events.command("browser.createUserContext", {})["userContext"]
        tab = self._events.command("browsingContext.create", {"type": "tab", "userContext": context})["context"]
        self._driver.switch_to.window(tab)
        return context, tab

    def open_next_tab(self) -> None:
        """Begin opening the next visit's user context and tab on a thread, once a visit's counted window has
        ended (the visit's own tab and context removed), unless it began at the collection
        (`open_next_at_collection`): the browser makes them while the harness judges and stores the visit and
        starts the next arm. `begin_visit` takes them, clears the browser around them (they hold nothing yet: a
        tab on about:blank) and waits until they are idle, as for a tab opened then."""
        if self._opening is None and self.alive:
            self._opening = in_background(self._new_tab_in_namespace, "open-tab")

    def _new_tab_in_namespace(self) -> tuple[str, str]:
        """`_new_tab` from the client namespace, where the driver listens (a thread starts in the host's: a new
        connection to the driver from there, when the one kept is busy, finds nothing)."""
        with netns.entered(self.namespace):
            return self._new_tab()

    def load(self, url: str) -> PageLoad:
        """Navigate and collect, unless the visit's preparation failed."""
        if self.report.driver_failure is not None:
            return self.report
        return super().load(url)

    def end_visit(self) -> None:
        """Close the visit's tab and user context (unless `_close_visit_early` began it), back to the first tab,
        still under the visit's watchdog (a WebDriver command to a browser that hangs never returns); a browser
        that fails or hangs at it is killed (the visit stands: it was measured before)."""
        t, alive = time.monotonic(), self.alive
        try:
            if self._closing is not None:
                self._closing.result()  # what the closing raised, raised here
            else:
                self._close_visit()
            # Not while the next visit's tab opens: Firefox's `browsingContext.create` waits until its tab is the
            # selected one, and going home selects the first tab (the create got no reply in 10 s).
            if alive and self.home_after_visit and self._opening is None and self._driver is not None:
                self._driver.switch_to.window(self._home)  # type: ignore[arg-type]  # alive
        except Exception:  # the visit was measured; its browser goes, and the next visit gets a new one
            self.kill()
        finally:
            self._end_watchdog()
        if alive and not self.alive and not self._killed.is_set():  # it died or stopped as the visit ended
            self.kill()
        self._tab = self._user_context = self._closing = None
        self.report.phases["shutdown"] = self.report.phases.get("shutdown", 0.0) + time.monotonic() - t
        if self.alive:
            # The page's late lookups end while the visit's arm still serves them: the next arm's start stops
            # a stub or changes the name server, and a query it cuts off waits 5 s for glibc's retry.
            t = time.monotonic()
            unsettled = self._await_dns_settled()
            self.report.phases["dns_settle_after"] = time.monotonic() - t
            self.report.ready = {**(self.report.ready or {}), "dns_in_flight_after": unsettled}

    def _close_visit(self) -> None:
        """Close the visit's tab, then its user context: left to the removal, the tab's teardown ran into the next
        page (docs/visit.md)."""
        if self.alive and self._events is not None:
            if self._tab is not None:
                self._events.command("browsingContext.close", {"context": self._tab})
            if self._user_context is not None:
                self._events.command("browser.removeUserContext", {"userContext": self._user_context})

    def _close_visit_early(self) -> None:
        """Begin `_close_visit` on a thread, for `end_visit` to await: a browser whose collection needs the tab no
        more tears the visit down while the harness reads what the visit left (Chromium: its net log); and, with
        `open_next_at_collection`, the next visit's tab opening beside it (`open_next_tab`)."""
        if self._closing is None:
            self._closing = in_background(self._close_visit, "close-visit")
        if self.open_next_at_collection:
            self.open_next_tab()

    def _end_watchdog(self) -> None:
        """Cancel the watchdog and wait for it, in case it fired already: its kill ends before the next visit."""
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog.join()

    def _take_events(self, events: BidiEventLog) -> list[dict]:
        """The visit's events, taken from the log, which stays open for the next visit."""
        return events.take()


def in_background(work: Callable[[], T], name: str) -> Future[T]:
    """Run ``work`` on a thread of its own; what it returned (or raised) in the future returned."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            result = work()
        except BaseException as exc:  # handed to whoever awaits the future
            future.set_exception(exc)
        else:
            future.set_result(result)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


def restart_reason(browser: ReusedSession | None, policy: SessionPolicy) -> str | None:
    """Why the reused ``browser`` must be replaced before the next visit under ``policy``, or None (also when there
    is none yet): it died or hangs, it served `restart_after` visits, or its memory passed `memory_limit_mb`."""
    if browser is None:
        return None
    if not browser.alive:
        return "watchdog" if browser.report.watchdog_fired else "not answering"
    if policy.restart_after and browser.visits >= policy.restart_after:
        return f"after {browser.visits} visits"
    if policy.memory_limit_mb and (used := browser.memory_mb()) > policy.memory_limit_mb:
        return f"memory {used:.0f} MiB over {policy.memory_limit_mb}"
    return None


def dns_queries_in_flight(pid: int, uid: int, doh_servers: Iterable[tuple[str, int]] = ()) -> int:
    """The DNS queries of ``uid`` in flight in the network namespace of process ``pid``, as its sockets show them.

    glibc sends each query from a UDP socket connected to the name server, closed when the query ends: every UDP
    socket to port 53 is a query in flight. A DoH client keeps its TCP connection to ``doh_servers`` (address,
    port) open between queries: one holding data the server has not acknowledged carries a query the server has
    not received yet (on a lossy link, one waiting for its retransmission). A query answered late is not counted:
    the server, whose counters prove the visit, has it already.
    """
    wanted = set(doh_servers)
    count = 0
    for table in ("udp", "udp6", "tcp", "tcp6") if wanted else ("udp", "udp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        count += sum(_carries_a_query(line.split(), table, uid, wanted) for line in lines)
    return count


def _carries_a_query(fields: list[str], table: str, uid: int, doh_servers: set[tuple[str, int]]) -> bool:
    """Whether a socket of a /proc/net table (``fields``: sl local rem st tx_queue:rx_queue tr:when retrnsmt
    uid ...) is one of ``uid``'s DNS queries in flight (`dns_queries_in_flight`). Only an established TCP
    connection carries a query: one still connecting (a SYN unacknowledged, say on a path a fault drops) or
    closing (its FIN) holds none, and waiting for it would run the wait out each visit."""
    if len(fields) < 8 or int(fields[7]) != uid:
        return False
    if table.startswith("udp"):
        return int(fields[2].rsplit(":", 1)[1], 16) == DNS_PORT
    unacknowledged = int(fields[4].split(":")[0], 16) > 0
    return fields[3] == TCP_ESTABLISHED and unacknowledged and _endpoint(fields[2]) in doh_servers


def _endpoint(field: str) -> tuple[str, int]:
    """An address and port as /proc/net/{tcp,udp}[6] write them (hex, the address in 32-bit words of host
    byte order); an IPv4-mapped IPv6 address as its IPv4 one."""
    hex_address, hex_port = field.split(":")
    words = [bytes.fromhex(hex_address[i : i + 8]) for i in range(0, len(hex_address), 8)]
    address = ipaddress.ip_address(b"".join(w[::-1] if sys.byteorder == "little" else w for w in words))
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return str(address), int(hex_port, 16)


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command's name (state first), or None if the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _parent(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[1]) if fields else None


def process_state(pid: int) -> str | None:
    """The process's state letter from /proc (R, S, Z...), or None if it is gone."""
    fields = _stat(pid)
    return fields[0] if fields else None
