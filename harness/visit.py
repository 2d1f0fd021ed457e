"""One visit: a URL, a DNS arm, a browser (fresh, or reused and cleared); the result, its HAR and the arm's proof.

`Visitor` holds what many visits share (the place, its shaper, the browser, versions); the crawl drives it
visit after visit. It talks to the browser only through `Browser` (harness/browser/base.py), chosen by name.
`run_visit` is the one-shot form behind `dnsstudy visit`.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness import __version__
from harness.arms import DnsArm, arm_class, make_arm
from harness.arms.evidence import (
    ArmProof,
    ClientCount,
    ResolverConnections,
    client_counters,
    judge,
    path_failure,
    reset_client_counters,
    resolver_counters,
)
from harness.browser.base import PageLoad, SessionPolicy
from harness.browser.har import check_har, write_har
from harness.browser.registry import DEFAULT_BROWSER, make_browser
from harness.browser.starting import BrowserStart, browser_life, start_browser
from harness.daemon_watch import DaemonWatch, place_problem
from harness.errors import HarnessError, require_root
from harness.https_use import https_use_record
from harness.outcome import ErrorClass, Outcome, Signals, classify, page_outcome
from harness.place import Place
from harness.replay.events import ReplayEvents, replay_record
from harness.shaping.shaper import Shaper, shape
from harness.visit_record import VisitResult

if TYPE_CHECKING:
    from harness.lab.querylog import Reply

#: Navigation Timing and BiDi onLoad differ by clock domains and event dispatch;
#: beyond this they disagree and the record says so.
ONLOAD_TOLERANCE_MS = 50.0
#: The resolver connection's state when a visit starts: opened by the visit's first query, or open already.
RESOLVER_CONNECTIONS = ("cold", "warm")
#: What the warm-up query asks for: a name no page uses (RFC 6761 reserves .invalid), answered by the resolver.
WARM_UP_NAME = "dnsstudy-warm-up.invalid"


@dataclass
class _Observed:
    """What one browser run left behind: the navigation, the counters around it, the arm's and link's health."""

    url: str
    visit_id: str
    started: str  # ISO time, UTC
    report: PageLoad
    arm_problem: str | None
    link_problem: str | None
    link: dict
    before: dict[str, int] | None = None
    after: dict[str, int] | None = None
    packets: dict[str, int] = field(default_factory=dict)
    place_problem: str | None = None  # a daemon of the place died during the visit
    replay: ReplayEvents | None = None  # what a replayed web did during the load (misses, errors...)
    authentication_failed: bool = False  # the arm's own report: the resolver's certificate did not verify
    faults: list[str] = field(default_factory=list)  # the place's faults the visit met
    warm_up: str | None = None  # the warm-up query's failure (a warm connection), if it failed
    start: BrowserStart = field(default_factory=BrowserStart)  # the browser's start: retries, settling
    connections_closed: int | None = None  # the browser's resolver connections closed before the window
    counted: ClientCount | None = None  # the client's counters between the last reading and the window's start
    connection_reset: str | None = None  # "reset", "unopened" or None (`Visitor._reset_connection`)
    dns_replies: list[Reply] | None = None  # the place's resolvers' replies for the page's names (None: no log)
    ech: dict[str, bool] | None = None  # per server name, whether a connection accepted ECH (None: no ECH)

    @property
    def unmeasured(self) -> str | None:
        """Why the counters prove nothing (the arm, the link or the place was broken), or None."""
        return self.arm_problem or self.link_problem or self.place_problem


@dataclass
class _Har:
    """The visit's HAR as built, where it was written (if it was), and what is wrong with it."""

    data: dict | None = None
    path: Path | None = None
    problem: str | None = None


class Visitor:
    """Runs visits from the client namespace of a place (the lab or an Internet side), one at a time."""

    def __init__(
        self,
        place: Place,
        results_dir: Path,
        timeout: float = 30.0,
        margin: float = 10.0,
        network: str = "wired",
        stub_idle_timeout_ms: int = 10_000,
        browser_dns: str | Path | None = None,
        stubs: dict[str, str] | None = None,
        browser: str = DEFAULT_BROWSER,
        session: SessionPolicy | None = None,
        resolver_connection: str = "cold",
        page_http3: bool = False,
    ):
        """``browser_dns`` names the browser's DNS settings (None: the browser's default profile); ``session``
        whether one browser serves many visits; ``resolver_connection`` whether a warm-up query opens the
        connection to the resolver before each navigation ("warm") or the visit's first query does ("cold");
        ``page_http3`` whether the page's requests may use HTTP/3 (the study's `page_http3`)."""
        require_root("a visit")  # namespaces, resolver statistics; the browser itself drops root
        if resolver_connection not in RESOLVER_CONNECTIONS:
            raise HarnessError(f"resolver connection '{resolver_connection}': choose one of cold, warm")
        place.require_healthy()
        self.place = place
        self.shaper = Shaper(place)
        self.client = place.client_side()
        if session is not None and session.reused and self.client.system_resolver is None:
            # A long-lived browser sees the resolv.conf bind-mounted when it started; it needs one to exist.
            raise HarnessError(f"{place.name}: a reused browser needs the client namespace's own resolv.conf")
        self.resolver_connection = resolver_connection
        self.session = session or SessionPolicy()
        self.browser = make_browser(  # the watchdog's margin holds the settling a fresh browser's visit adds
            browser, self.client, timeout, margin + self.session.settle_s, browser_dns, session, page_http3
        )
        self.results_dir = results_dir
        self.timeout, self.margin, self.network = timeout, margin, network
        self.stub_idle_timeout_ms = stub_idle_timeout_ms
        self.stubs = stubs or {}  # protocol -> stub program, for arms that run one
        (results_dir / "hars").mkdir(parents=True, exist_ok=True)
        self.versions = {**self.browser.versions, "dnsstudy": __version__}
        warning = self.browser.unexpected_version()
        if warning:  # a crawl builds its visitor at its start: the warning comes before the first visit
            print(warning, file=sys.stderr)

    def arm(self, protocol: str, resolver: str, persistent: bool = False) -> DnsArm:
        """A new arm; one the browser cannot speak itself gets its first stub (Chromium's DoH3: dnsproxy)."""
        stub = self.stubs.get(protocol)
        cls = arm_class(protocol)
        if stub is None and cls.browser_native and protocol not in self.browser.native_dns:
            stub = cls.stubs[0]
        return make_arm(
            protocol,
            self.place.resolver(resolver),
            self.client,
            persistent=persistent,
            idle_timeout_ms=self.stub_idle_timeout_ms,
            stub=stub,
        )

    def visit_once(self, url: str, protocol: str, resolver: str) -> VisitResult:
        """Start a fresh arm, visit once, stop the arm."""
        arm = self.arm(protocol, resolver)
        try:
            arm.start()
            return self.visit(url, arm)
        finally:
            arm.stop()
            self.client.restore_system_resolver()

    def visit(self, url: str, arm: DnsArm) -> VisitResult:
        """One visit through an arm the caller has started; ends the arm's visit state."""
        t0 = time.monotonic()
        try:
            seen = self._browse(url, arm)
        finally:
            arm.finish_visit()
        self.browser.between_visits()  # the counters read: what the browser does now is no visit's
        proof = _judge(arm, seen)
        report = seen.report
        page_loaded = report.exception is None and not report.error_page
        on_load = report.page.on_load_ms if (report.page and page_loaded) else None
        if report.page and not page_loaded:
            report.page.on_load_ms = report.page.on_content_load_ms = None  # an error page's own load
        har = self._keep_har(seen, page_loaded)
        outcome = classify(
            Signals(
                exception=report.exception,
                document_uri=report.document_uri,
                on_load_ms=on_load,
                driver_failure=report.driver_failure,
                arm_problem=seen.arm_problem,
                link_problem=seen.link_problem,
                place_problem=seen.place_problem,
                proof_valid=proof.valid,
                proof_reason=proof.reason,
                other_transport=proof.other_transport,
                path_failure=_path_failure(arm, proof, seen, on_load),
                har_problem=har.problem,
                net_error=report.net_error,
            )
        )
        return self._result(arm, seen, proof, outcome, on_load, har, wall_s=time.monotonic() - t0)

    def _browse(self, url: str, arm: DnsArm) -> _Observed:
        """Run the browser once, between two readings of the counters; no browser when arm or link is broken."""
        state = self.shaper.state() or {}
        link = {k: state.get(k) for k in ("profile", "backend", "fingerprint")} if state else {"profile": None}
        started = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
        seen = _Observed(url, uuid.uuid4().hex, started, PageLoad(), arm.problem(), self.shaper.problem(), link)
        seen.faults = self.place.faults_touching(arm.resolver.name, arm.protocol)
        if seen.arm_problem is not None or seen.link_problem is not None:
            return seen
        control = arm.resolver.control_config
        prepared = self._prepare(arm, seen)
        seen.counted = reset_client_counters(self.client.namespace, arm.resolver)
        try:
            seen.before = resolver_counters(control) if control else None
        except HarnessError as exc:  # the resolver is dead or hangs: no visit can prove anything
            seen.place_problem = place_problem(self.place) or str(exc)
            if prepared:
                self.browser.stop()
            return seen
        if prepared:
            self._reset_connection(arm, seen)
        arm.begin_visit()
        window, dns_window, ech_window = self.place.replay_window(), self.place.dns_window(), self.place.ech_window()
        with DaemonWatch(self.place) as watch:
            seen.report = self._load(url, arm, seen, prepared).add_phases(seen.report.phases)
        seen.replay = self.place.replay_events(window) if window else None
        seen.dns_replies = self.place.dns_replies(dns_window) if dns_window is not None else None
        seen.ech = self.place.ech_hosts(ech_window) if ech_window is not None else None
        unread = None
        try:
            seen.after = resolver_counters(control) if control else None
        except HarnessError as exc:  # the resolver died or hangs: the place's failure, decided below
            unread = str(exc)
        seen.packets = client_counters(self.client.namespace)
        seen.arm_problem, seen.link_problem = arm.problem(), self.shaper.problem()
        replay_problem = seen.replay.page_problem if seen.replay else None  # the page not replayed as recorded
        seen.place_problem = place_problem(self.place) or unread or watch.problem or replay_problem
        seen.authentication_failed = arm.authentication_failed(seen.report.trr_failure)
        return seen

    def _prepare(self, arm: DnsArm, seen: _Observed) -> bool:
        """Whether the browser was started (and the resolver connection warmed) before the counted window.

        A reused browser is cleared, and a warm connection opened, before the counters start, so they count the
        visit alone; a fresh browser with a cold connection starts inside the window, as the reference design's did.
        """
        if not (self.browser.session.reused or self.resolver_connection == "warm"):
            return False
        seen.start = self._start(arm, seen.report.phases)
        if self.resolver_connection == "warm":
            t = time.monotonic()
            seen.warm_up = self.browser.warm_resolver(WARM_UP_NAME)
            seen.report.phases["warm_up"] = time.monotonic() - t
        return True

    def _reset_connection(self, arm: DnsArm, seen: _Observed) -> None:
        """A cold visit's arm given a new connection inside the counted window, when its reused browser just started
        or asks names of its own (`own_names`: Chromium's services, at its start and seconds after).

        Such lookups through the arm open its connection before the visit's first query. Reset once the counters
        run, any connection carrying the visit's queries is opened, and counted, in the window. A new connection,
        not a restarted arm: that would write resolv.conf and the arm's rules again. None is needed where the
        counters since the arm's stub started count no connection to the resolver (`DnsArm.connection_unopened`):
        the record says which (`resolver_connection_reset`).
        """
        if self.resolver_connection != "cold" or (self.browser.session_ordinal != 1 and not self.browser.own_names):
            return
        if arm.connection_unopened(seen.counted):
            seen.connection_reset = "unopened"
            return
        seen.connection_reset = "reset"
        try:
            seen.connections_closed = arm.reset_connection()
        except BaseException:
            self.browser.stop()  # the visit's user context ends; the error is the arm's start's
            raise

    def _load(self, url: str, arm: DnsArm, seen: _Observed, started: bool = False) -> PageLoad:
        """Start the browser for ``arm`` (unless `_prepare` did), load ``url``, end the visit's browser (its time
        is in the load's phases)."""
        try:
            if not started:
                seen.start = self._start(arm, seen.report.phases)
            return self.browser.load(url)
        finally:
            self.browser.stop()

    def _start(self, arm: DnsArm, phases: dict[str, float]) -> BrowserStart:
        """The browser started for ``arm``, failed starts retried, a fresh one settled (harness/browser/starting.py)."""
        started = start_browser(self.browser, arm, self.session.settle_s)
        if started.settled_s:
            phases["settle"] = started.settled_s
        return started

    def close(self) -> None:
        """End a reused browser (a network block's end, the crawl's); nothing for fresh ones."""
        self.browser.close()

    def _keep_har(self, seen: _Observed, page_loaded: bool) -> _Har:
        """Build the HAR from the events; write it if it is valid or the page loaded."""
        t = time.monotonic()
        report, har = seen.report, _Har()
        if report.events or report.page:
            har.data = self.browser.har(report, seen.url)
            har.problem = check_har(har.data)
            if har.problem is None or page_loaded:
                har.path = self.results_dir / "hars" / f"{seen.visit_id}.har.gz"
                write_har(har.data, har.path)
        elif seen.unmeasured is None and report.driver_failure is None:
            har.problem = "no events recorded"
        report.phases["har"] = time.monotonic() - t
        return har

    def _result(
        self,
        arm: DnsArm,
        seen: _Observed,
        proof: ArmProof,
        outcome: Outcome,
        on_load: float | None,
        har: _Har,
        wall_s: float,
    ) -> VisitResult:
        """The visit's record."""
        report = seen.report
        agrees = None
        if on_load is not None and report.bidi_on_load_ms is not None:
            agrees = abs(on_load - report.bidi_on_load_ms) <= ONLOAD_TOLERANCE_MS
        return VisitResult(
            visit_id=seen.visit_id,
            url=seen.url,
            protocol=arm.protocol,
            resolver=arm.resolver.name,
            network=self.network,
            started_at=seen.started,
            error_class=outcome.error_class.value,
            detail=outcome.detail,
            paper_2019=outcome.paper_2019,
            counted=outcome.counted,
            on_load_ms=on_load if outcome.error_class is ErrorClass.SUCCESSFUL else None,
            on_content_load_ms=report.page.on_content_load_ms if report.page else None,
            bidi_on_load_ms=report.bidi_on_load_ms,
            on_load_agrees=agrees,
            wall_s=round(wall_s, 3),
            phases={k: round(v, 3) for k, v in report.phases.items()},
            signal=_signal(seen),
            proof=proof.to_dict(),
            arm=arm.describe(),
            har_path=str(har.path) if har.path else None,
            har_entries=len(har.data["log"]["entries"]) if har.data else 0,
            har_problem=har.problem,
            next_hop_protocol=report.next_hop_protocol,
            timeout_s=self.timeout,
            versions=self.versions,
            link=seen.link,
            browser_dns=self._browser_dns_record(report.prefs),
            faults=seen.faults,
            **self._session_record(arm, seen),
            **replay_record(seen.replay, self.browser.own_names),
            **_paint_metrics(report.paint, outcome),
            **https_use_record(
                har.data, seen.url, seen.dns_replies, self.place.https_record_owners(arm.resolver.name), seen.ech
            ),
        )

    def _session_record(self, arm: DnsArm, seen: _Observed) -> dict:
        """The browser's session and the resolver connection's state: as chosen, and as the counters saw it."""
        warm = self.resolver_connection == "warm"
        connections = ResolverConnections.count(arm.protocol, seen.packets, warm) if seen.packets else None
        warmup = self.browser.warmup if self.session.reused else None
        return {
            "browser_session": browser_life(self.session, warmup is not None),
            "session_ordinal": self.browser.session_ordinal,
            "browser_restart": self.browser.restart_reason,
            "browser_settle_s": round(seen.start.settled_s, 3),
            "page_http3": self.client.web_http3 and self.browser.page_http3_for(arm.browser_dns()),
            "browser_start_retries": seen.start.retried,
            "browser_warmup": warmup if self.browser.session_ordinal == 1 else None,
            "browser_ready": seen.report.ready,
            "resolver_connection": self.resolver_connection,
            "warm_up": seen.warm_up,
            "resolver_handshakes": connections.handshakes if connections else None,
            "first_query_open": connections.first_query_open if connections else None,
            "resolver_connections_closed": seen.connections_closed,
            "resolver_connection_reset": seen.connection_reset,
        }

    def _browser_dns_record(self, read: dict) -> dict:
        """The DNS preference profile, the values read back from the running browser, and any that differ."""
        differs = sorted(n for n, v in self.browser.dns_settings.items() if read and read.get(n) != v)
        return {"profile": self.browser.browser_dns, "values": read, "differs": differs}


def _signal(seen: _Observed) -> dict:
    """The raw signals a visit's class was decided from, as its record keeps them."""
    report = seen.report
    return {
        "exception": report.exception,
        "message": report.message,
        "document_uri": report.document_uri,
        "driver_failure": report.driver_failure,
        "watchdog_fired": report.watchdog_fired,
        "arm_problem": seen.arm_problem,
        "link_problem": seen.link_problem,
        "place_problem": seen.place_problem,
        "trr_failure": report.trr_failure,
        "net_error": report.net_error,
        "authentication_failed": seen.authentication_failed,
    }


def _paint_metrics(paint: dict, outcome: Outcome) -> dict:  # fcp_ms, lcp_ms: float | None
    """FCP and LCP of a Successful visit, rounded to the microsecond (the timeline's precision); None otherwise."""
    ok = outcome.error_class is ErrorClass.SUCCESSFUL
    return {
        f"{name}_ms": round(paint[name], 3) if ok and isinstance(paint.get(name), (int, float)) else None
        for name in ("fcp", "lcp")
    }


def _path_failure(arm: DnsArm, proof: ArmProof, seen: _Observed, on_load: float | None) -> str | None:
    """``protocol:cause`` when the arm's transport failed on the path, else None (docs/visit.md).

    The transport failed when the resolver received no query over it (lab resolvers count them) or,
    where no resolver statistics exist, when the page itself reports a DNS failure.
    """
    if seen.unmeasured is not None:
        return None
    if proof.on_arm is not None:
        failed = proof.on_arm == 0
    else:
        report = seen.report
        page_class, _ = page_outcome(report.exception, report.document_uri, on_load, report.net_error)
        failed = page_class is ErrorClass.DNS_ERROR
    cause = path_failure(arm.protocol, seen.packets, seen.authentication_failed) if failed else None
    return f"{arm.protocol}:{cause}" if cause else None


def _judge(arm: DnsArm, seen: _Observed) -> ArmProof:
    """The arm's proof from the counters around the browser run; unproven if the arm or link was broken."""
    if seen.unmeasured is not None:
        return ArmProof(arm.protocol, None, seen.packets, None, None, False, "not measured: " + seen.unmeasured)
    return judge(
        arm.protocol, arm.transport, seen.before, seen.after, seen.packets, arm.client_required, arm.client_forbidden
    )


def run_visit(
    place: Place,
    url: str,
    protocol: str,
    resolver: str,
    results_dir: Path,
    timeout: float = 30.0,
    margin: float = 10.0,
    network: str = "wired",
    browser: str = DEFAULT_BROWSER,
) -> VisitResult:
    """`dnsstudy visit`: shape the link as ``network`` says, visit once in ``browser`` through a new Visitor, and
    append the record to ``results_dir``/visits.jsonl."""
    shape(place, network)
    visitor = Visitor(place, results_dir, timeout=timeout, margin=margin, network=network, browser=browser)
    result = visitor.visit_once(url, protocol, resolver)
    with open(results_dir / "visits.jsonl", "a") as f:
        f.write(json.dumps(result.to_dict()) + "\n")
    return result
