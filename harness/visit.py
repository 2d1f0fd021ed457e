"""One visit: a URL, a DNS arm, a fresh browser; the result, its HAR and the arm's proof.

`Visitor` holds what many visits share (the lab, the browser account, the
profile template, versions); the crawl (issue 6) drives it visit after
visit. `run_visit` is the one-shot form behind `dnsstudy visit`.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness import __version__
from harness.arms import DnsArm, make_arm
from harness.arms.evidence import ArmProof, client_counters, judge, reset_client_counters, resolver_counters
from harness.browser.account import BrowserAccount
from harness.browser.har import PageInfo, build_har, check_har, write_har
from harness.browser.prefs import load_prefs
from harness.browser.session import GECKODRIVER, BrowserSession, NavigationReport
from harness.browser.template import ensure_template, firefox_version
from harness.errors import HarnessError, require_root
from harness.internet import InternetSide
from harness.lab.lab import Lab
from harness.outcome import ErrorClass, Signals, classify
from harness.shaping.shaper import Shaper

#: Navigation Timing and BiDi onLoad differ by clock domains and event dispatch;
#: beyond this they disagree and the record says so.
ONLOAD_TOLERANCE_MS = 50.0


@dataclass
class VisitResult:
    """The record of one visit (what `dnsstudy visit` prints and the store keeps)."""

    visit_id: str
    url: str
    protocol: str
    resolver: str
    network: str
    started_at: str
    error_class: str
    detail: str
    paper_2019: str
    counted: bool                       # False: a harness failure, never a protocol result
    on_load_ms: float | None            # Navigation Timing (successful visits only)
    on_content_load_ms: float | None
    bidi_on_load_ms: float | None       # BiDi load - navigationStarted, the cross-check
    on_load_agrees: bool | None
    wall_s: float
    phases: dict[str, float]
    signal: dict                        # the raw signals the class was decided from
    proof: dict
    arm: dict
    har_path: str | None
    har_entries: int
    har_problem: str | None
    next_hop_protocol: str | None
    timeout_s: float
    versions: dict = field(default_factory=dict)
    link: dict = field(default_factory=dict)  # the shaping applied: profile, backend, fingerprint

    def to_dict(self) -> dict:
        return asdict(self)


def geckodriver_version() -> str:
    out = subprocess.run([str(GECKODRIVER), "--version"], capture_output=True, text=True, timeout=30).stdout
    return out.split()[1] if out.split()[:1] == ["geckodriver"] else "unknown"


class Visitor:
    """Runs visits from the client namespace of a lab or an Internet side, one at a time."""

    def __init__(self, lab: Lab | InternetSide, results_dir: Path, timeout: float = 30.0, margin: float = 10.0,
                 network: str = "wired"):
        require_root("a visit")  # namespaces, resolver statistics; the browser itself drops root
        if not lab.status().healthy:
            raise HarnessError(f"lab '{lab.config.prefix}' is not up and healthy: run 'dnsstudy lab up'")
        if not GECKODRIVER.exists():
            raise HarnessError(f"{GECKODRIVER} is missing: run scripts/setup.sh")
        if timeout <= 0 or margin <= 0:
            raise HarnessError(f"timeout and margin must be positive (got {timeout} and {margin})")
        self.lab = lab
        self.shaper = Shaper(lab)
        self.client = lab.client_side()
        self.account = BrowserAccount.lookup()
        self.results_dir = results_dir
        self.timeout, self.margin, self.network = timeout, margin, network
        (results_dir / "hars").mkdir(parents=True, exist_ok=True)
        self.work_root = lab.run_dir / "visits"
        self.work_root.mkdir(exist_ok=True)
        self.versions = {"firefox": firefox_version(), "geckodriver": geckodriver_version(), "dnsstudy": __version__}
        prefs = load_prefs().as_dict()
        self.template = ensure_template(lab.run_dir, self.client.ca_file if self.client.browser_trusts_ca else None,
                                        prefs, self.account,
                                        self.client.namespace, self.versions["firefox"])

    def arm(self, protocol: str, resolver: str, persistent: bool = False) -> DnsArm:
        return make_arm(protocol, self.lab.resolver(resolver), self.client, persistent=persistent)

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
        visit_id = uuid.uuid4().hex
        started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")
        problem = arm.problem()
        link_problem = self.shaper.problem()  # a dead delayer: nothing to measure
        state = self.shaper.state() or {}
        link = {k: state.get(k) for k in ("profile", "backend", "fingerprint")} if state else {"profile": None}
        report = NavigationReport(url=url)
        before = after = None
        packets: dict[str, int] = {}
        try:
            if problem is None and link_problem is None:  # no browser when arm or link is broken
                control = arm.resolver.control_config
                reset_client_counters(self.client.namespace, arm.resolver.address)
                before = resolver_counters(control) if control else None
                session = BrowserSession(self.account, self.template, self.client.namespace, self.work_root,
                                         prefs=arm.firefox_prefs(), timeout=self.timeout, margin=self.margin)
                report = session.run(url)
                after = resolver_counters(control) if control else None
                packets = client_counters(self.client.namespace)
                problem = arm.problem()
                link_problem = self.shaper.problem()
        finally:
            arm.finish_visit()
        unmeasured = problem or link_problem
        proof = judge(arm.protocol, arm.transport, before, after, packets, arm.client_required, arm.client_forbidden) \
            if unmeasured is None else ArmProof(arm.protocol, None, packets, None, None, False,
                                                "not measured: " + unmeasured)

        t = time.monotonic()
        page_loaded = report.exception is None and not (report.document_uri or "").startswith("about:")
        on_load = report.page.on_load_ms if (report.page and page_loaded) else None
        if report.page and not page_loaded:
            report.page.on_load_ms = report.page.on_content_load_ms = None  # an error page's own load
        har = har_path = har_problem = None
        if report.events or report.page:
            har = build_har(report.events, report.page or PageInfo(url=url), self.versions["firefox"], __version__)
            har_problem = check_har(har)
            if har_problem is None or page_loaded:
                har_path = self.results_dir / "hars" / f"{visit_id}.har.gz"
                write_har(har, har_path)
        elif unmeasured is None and report.driver_failure is None:
            har_problem = "no events recorded"
        report.phases["har"] = time.monotonic() - t

        outcome = classify(Signals(exception=report.exception, document_uri=report.document_uri, on_load_ms=on_load,
                                   driver_failure=report.driver_failure, arm_problem=problem,
                                   link_problem=link_problem,
                                   proof_valid=proof.valid, proof_reason=proof.reason, har_problem=har_problem))
        agrees = None
        if on_load is not None and report.bidi_on_load_ms is not None:
            agrees = abs(on_load - report.bidi_on_load_ms) <= ONLOAD_TOLERANCE_MS
        result = VisitResult(
            visit_id=visit_id, url=url, protocol=arm.protocol, resolver=arm.resolver.name, network=self.network,
            started_at=started, error_class=outcome.error_class.value, detail=outcome.detail,
            paper_2019=outcome.paper_2019, counted=outcome.counted,
            on_load_ms=on_load if outcome.error_class is ErrorClass.SUCCESSFUL else None,
            on_content_load_ms=report.page.on_content_load_ms if report.page else None,
            bidi_on_load_ms=report.bidi_on_load_ms, on_load_agrees=agrees,
            wall_s=round(time.monotonic() - t0, 3), phases={k: round(v, 3) for k, v in report.phases.items()},
            signal={"exception": report.exception, "message": report.message, "document_uri": report.document_uri,
                    "driver_failure": report.driver_failure, "watchdog_fired": report.watchdog_fired,
                    "arm_problem": problem, "link_problem": link_problem},
            proof=proof.to_dict(), arm=arm.describe(),
            har_path=str(har_path) if har_path else None,
            har_entries=len(har["log"]["entries"]) if har else 0, har_problem=har_problem,
            next_hop_protocol=report.next_hop_protocol, timeout_s=self.timeout, versions=self.versions, link=link,
        )
        return result


def run_visit(lab: Lab | InternetSide, url: str, protocol: str, resolver: str, results_dir: Path, timeout: float = 30.0,
              margin: float = 10.0, network: str = "wired") -> VisitResult:
    """One visit through a new Visitor (what `dnsstudy visit` does)."""
    return Visitor(lab, results_dir, timeout=timeout, margin=margin, network=network).visit_once(url, protocol, resolver)
