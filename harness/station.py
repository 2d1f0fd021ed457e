"""`Station`: one place with its shaping and browser, running a study's blocks there.

What happens *at* a vantage point, apart from what is written where: shape
the link and check it, visit with retries of the harness's own failures,
time a block's hostnames, and halt (`CrawlHalted`) when a daemon of the
place died or hangs, since then no result of the place can be trusted. The
single-host crawl (`harness/crawl.py`) drives one station and writes its
store itself; a distributed worker (`harness/distributed/worker.py`) drives
one and sends what it returns to the coordinator, the only writer there.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from harness.arms.evidence import resolver_counters
from harness.browser.base import SessionPolicy
from harness.browser.registry import DEFAULT_BROWSER
from harness.daemons import stopped
from harness.errors import HarnessError
from harness.leftovers import stop_leftovers
from harness.place import Place
from harness.plan import PlannedVisit
from harness.shaping.check import check_link, read_sysctl
from harness.shaping.link_profile import LinkProfile, load_link_profile
from harness.shaping.shaper import Shaper
from harness.study import Study
from harness.timer import PairTimings, TimerSettings, time_pairs
from harness.visit import Visitor
from harness.visit_record import VisitResult


class CrawlHalted(HarnessError):
    """The harness itself is broken (the place died, the link cannot be shaped): stop, keep the visit planned."""


@dataclass
class VisitOutcome:
    """A visit run to a record: the record, and the harness failures retried before it."""

    record: dict
    attempts: int  # harness failures retried before the recorded attempt
    infrastructure: bool  # recorded as an Infrastructure Failure after the retries
    wall_s: float
    retried: list[dict] = field(default_factory=list)


class Station:
    """A place, its shaper and one browser visitor, running one study's visits, link checks and timer runs."""

    def __init__(
        self,
        place: Place,
        study: Study,
        results_dir: Path,
        backend: str = "auto",
        console: Console | None = None,
        stopping: Callable[[], bool] = lambda: False,
    ):
        self.place, self.study, self.results_dir = place, study, results_dir
        self.shaper = Shaper(place, backend)
        self.console = console or Console()
        self.stopping = stopping  # True once the operator asked to stop: a failure then may be the stop itself
        self.links: dict[str, LinkProfile] = {n: load_link_profile(n) for n in study.networks}
        self._visitors: dict[str, Visitor] = {}  # one per browser of the study, each built on first use
        self._network = "wired"  # the block's network, given to a visitor built mid-block

    @property
    def visitor(self) -> Visitor:
        """The visitor of the study's first browser (building it reads the browser's and driver's versions)."""
        return self.visitor_for(self.study.browsers[0])

    @visitor.setter
    def visitor(self, visitor: Visitor) -> None:
        """Use ``visitor`` for every browser of the study (tests give a fake one)."""
        self._visitors = dict.fromkeys(self.study.browsers, visitor)

    def visitor_for(self, browser: str) -> Visitor:
        """The visitor that runs visits in ``browser``, built on first use."""
        if browser not in self._visitors:
            s = self.study
            self._visitors[browser] = Visitor(
                self.place,
                self.results_dir,
                timeout=s.page_load_timeout_s,
                network=self._network,
                stub_idle_timeout_ms=s.arms.stub_idle_timeout_ms,
                # The study's `browser_dns` is a Firefox preference profile; another browser runs its own default.
                browser_dns=s.browser_dns if browser == DEFAULT_BROWSER else None,
                stubs=s.arms.stubs,
                browser=browser,
                session=SessionPolicy(
                    s.browser_session, s.browser_restart.visits, s.browser_restart.memory_mb, s.browser_settle_s
                ),
                resolver_connection=s.resolver_connection,
                page_http3=s.page_http3,
            )
        return self._visitors[browser]

    def environment(self) -> dict[str, str]:
        """What a crawl records about where it runs: versions, kernel, backend, the place, congestion control."""
        ns = self.place.namespaces
        env = {
            **{k: v for b in self.study.browsers for k, v in self.visitor_for(b).versions.items()},
            "kernel": platform.release(),
            "python": platform.python_version(),
            "shaping_backend": self.shaper.choose_backend(),
            **self.place.describe(),
        }
        for role in ("client", "server"):
            if role in ns:
                env[f"congestion_control_{role}"] = read_sysctl(ns[role], "net.ipv4.tcp_congestion_control")
        return env

    def clean_up_after_a_kill(self) -> list[str]:
        """Stop what a killed visit left in the client namespace (`clean_up_client`)."""
        return clean_up_client(self.place)

    # -- a block -----------------------------------------------------------------------

    def start_block(
        self, network: str, visit: PlannedVisit | None = None, on_check: Callable[[dict], None] = lambda c: None
    ) -> dict:
        """Shape the link for ``network`` and check it (twice at most); returns the check that passed.

        ``on_check`` sees every check as it is made (to keep it, also a failed one). Raises CrawlHalted if a
        resolver hangs or the link check fails twice.
        """
        self.end_session()  # a reused browser serves one block: the next gets a new one
        self.require_responsive(visit)  # a frozen resolver would fail the link check's neighbours, then visits
        link = self.links[network]
        self._network = network
        for visitor in self._visitors.values():
            visitor.network = network
        checks: list[dict] = []
        for _attempt in (1, 2):
            self.shaper.apply(link)
            checks.append(self._check_link(link))
            on_check(checks[-1])
            if checks[-1].get("problem") is None:
                break
            self.shaper.clear()  # a broken link: rebuild it once from scratch
        else:
            raise CrawlHalted(
                f"network {network}: the link check failed twice ({checks[-1]['problem']}); "
                "the crawl stopped with the visit still planned"
            )
        return checks[-1]

    def end_session(self) -> None:
        """End the reused browsers, if any run (a block's end, its timer run, the crawl's end)."""
        for visitor in dict.fromkeys(self._visitors.values()):  # a test's one visitor serves every browser
            visitor.close()

    def _end_other_browsers(self, browser: str) -> None:
        """End the reused browsers of other browsers than ``browser``: one runs at a time in the client namespace,
        or an idle one's own lookups would count in the other's visit (a reused study plans them apart)."""
        mine = self.visitor_for(browser)
        for visitor in dict.fromkeys(self._visitors.values()):
            if visitor is not mine:
                visitor.close()

    def describe_check(self, block: int, network: str, check: dict) -> str:
        """The console line of a block's link check."""
        missed = [k for k, ok in check.get("verdicts", {}).items() if ok is False]
        rtt = check.get("rtt_median_ms", check.get("rtt_mean_ms"))  # a check stored before the median: its mean
        return (
            f"block {block}: {network} ({check.get('backend')} backend)"
            + (f", RTT {rtt:g} ms" if rtt is not None else "")
            + (f"; off target: {', '.join(missed)}" if missed else ", on target")
        )

    def _check_link(self, link: LinkProfile) -> dict:
        backend = (self.shaper.state() or {}).get("backend")
        if self.place.probe_peer() is not None:
            s = self.study.link_check
            check = check_link(self.place, link, backend, probes=s.probes, seconds=s.seconds).to_dict()
        else:  # no echo or rate peer (the Internet): the timer's RTTs are the check there
            check = {
                "profile": link.name,
                "backend": backend,
                "problem": None,
                "note": f"{self.place.kind} side: no probe peer; only the shaping daemons are checked",
            }
        check["problem"] = check.get("problem") or self.shaper.problem()
        return check

    # -- a visit -----------------------------------------------------------------------

    def visit(self, visit: PlannedVisit) -> VisitOutcome | None:
        """Run one planned visit, retrying harness failures; None if it must stay planned (stopped mid-visit).

        Raises CrawlHalted, the HAR discarded, when a daemon of the place died or hangs.
        """
        retries = self.study.infrastructure_retries
        failed: list[dict] = []  # the harness failures retried, kept with the record
        for attempt in range(retries + 1):
            if attempt:
                self.shaper.apply(self.links[visit.network])  # re-applies only if a delayer died
            try:
                url = self.place.page_url(visit.site.domain, visit.url)
                self._end_other_browsers(visit.browser)
                result = self.visitor_for(visit.browser).visit_once(url, visit.protocol, visit.resolver)
            except HarnessError:  # e.g. a dead resolver's statistics cannot be read
                self.halt_if_unhealthy(visit)
                raise
            if result.error_class != "Successful":
                # A dead resolver or web server would look like a protocol failure: never record that.
                self.halt_if_unhealthy(visit, result)
            if result.counted:
                break
            if self.stopping():  # the failure may be the stop itself: run the visit again on resume
                discard_har(result)
                return None
            if attempt < retries:
                discard_har(result)
                failed.append(
                    {"error_class": result.error_class, "detail": result.detail, "started_at": result.started_at}
                )
        record = result.to_dict()
        record.update(
            round=visit.round,
            block=visit.block,
            rank=visit.site.rank,
            site_group=visit.site.group,
            retried=failed,
            vantage_point=visit.vantage_point,
            browser=visit.browser,
        )
        return VisitOutcome(record, attempt, not result.counted, result.wall_s, failed)

    def halt_if_unhealthy(self, visit: PlannedVisit, result: VisitResult | None = None) -> None:
        """Stop, the visit still planned, if a daemon of the place died or hangs (the visit's failure is ours)."""
        status = self.place.status()
        if status.healthy:
            # A hung daemon is alive in /proc; the visit saw it (its statistics timed out), or we ask it now.
            problem = (result.signal.get("place_problem") if result is not None else None) or self.unresponsive()
            if problem is None:
                return
            if result is not None:
                discard_har(result)
            raise CrawlHalted(self.hung(problem, visit))
        if result is not None:
            discard_har(result)
        raise CrawlHalted(
            f"{self.place.name}: daemons died ({', '.join(status.dead)}); the crawl stopped "
            f"with visit {visit.ordinal} still planned: bring the {self.place.kind} up again "
            f"('{self.place.up_command}') and resume"
        )

    def unresponsive(self) -> str | None:
        """Why a daemon of the place hangs (stopped, or a resolver not answering its control channel), or None."""
        # Lab daemons are listed with their pids; a stopped one is named at once, without waiting for a timeout.
        for daemon in getattr(self.place.status(), "daemons", []):
            if daemon.get("alive") and stopped(daemon["pid"]):
                return f"{daemon['name']} is stopped (pid {daemon['pid']}, SIGSTOP?) and answers nothing"
        for name in self.study.resolvers:
            control = self.place.resolver(name).control_config
            try:
                if control is not None:
                    resolver_counters(control)  # bounded by its own timeout
            except HarnessError as exc:
                return str(exc)
        return None

    def require_responsive(self, visit: PlannedVisit | None = None) -> None:
        """Halt if a resolver of the study hangs."""
        problem = self.unresponsive()
        if problem is not None:
            raise CrawlHalted(self.hung(problem, visit))

    def hung(self, problem: str, visit: PlannedVisit | None) -> str:
        """The one-line halt of a daemon that is alive but does not answer."""
        left = f"visit {visit.ordinal}" if visit is not None else "the block's timer run"
        return (
            f"{self.place.name}: {problem}; the crawl stopped with {left} still planned: once the "
            f"{self.place.kind} is healthy again ('{self.place.up_command}'), run the same command to resume"
        )

    def timed_out(self, exc: subprocess.TimeoutExpired) -> str:
        """The one-line halt of a helper that overran its timeout (`timed_out`)."""
        return timed_out(self.place, exc)

    # -- the timer ---------------------------------------------------------------------

    def time_hostnames(self, block: int, network: str, names: list[str]) -> tuple[list[dict], list[str]] | None:
        """Time every name per resolver and protocol under the block's link: (records, problems).

        None when stopped part-way: the block is timed again on resume, whole.
        """
        self.end_session()  # no browser idles beside the timer with connections open
        self.shaper.apply(self.links[network])  # re-applies only if the link is not shaped so already
        t = self.study.timer
        settings = TimerSettings(timeout_ms=t.timeout_ms, idle_timeout_ms=t.idle_timeout_ms, concurrency=t.concurrency)
        pairs = self.study.timer_pairs
        runs = time_pairs(
            self.place.client_side(),
            self.place.resolver,
            pairs,
            names,
            settings,
            self.study.seed,
            pairs_key=("timer", str(block)),
            names_key=(str(block),),
            stopping=self.stopping,
            on_pair=self._check_after_pair,
        )
        if names and len(runs) < len(pairs):
            return None
        # The faults each pair met, as a visit records them: a timing under a fault is not the protocol's.
        met = {(r, p): self.place.faults_touching(r, p) for r, p in pairs}
        records = [
            {**x.to_dict(), "network": network, "faults": met.get((x.resolver, x.protocol), [])}
            for run in runs
            for x in run.timings
        ]
        return records, [run.problem for run in runs if run.problem]

    def _check_after_pair(self, run: PairTimings) -> None:
        """A resolver that hangs makes every query of a pair a timeout: halt rather than store them as results."""
        if run.problem or any(not t.ok for t in run.timings):
            self.require_responsive()


def clean_up_client(place: Place) -> list[str]:
    """Stop what a killed visit left in the client namespace; returns notes naming what was found.

    The browser, driver and stub have sessions of their own (so that a Ctrl-C reaches only the crawl):
    a kill of the crawl leaves them running. A program someone runs there is named and left alone.
    """
    notes = stop_leftovers(place.namespaces["client"])
    place.client_side().restore_system_resolver()  # a killed DoH visit leaves a dead resolver there
    for work in (place.run_dir / "visits").glob("visit-*"):
        shutil.rmtree(work, ignore_errors=True)
    return notes


def timed_out(place: Place, exc: subprocess.TimeoutExpired) -> str:
    """The one-line halt of a helper that overran its timeout (a hung daemon behind it, usually)."""
    argv = [str(a) for a in exc.cmd] if isinstance(exc.cmd, list | tuple) else str(exc.cmd).split()
    program = argv[4] if argv[:3] == ["ip", "netns", "exec"] and len(argv) > 4 else argv[0]
    return (
        f"{place.name}: {Path(program).name} did not finish in {exc.timeout:g} s ({' '.join(argv)}); "
        f"the crawl stopped with the visit still planned: once the {place.kind} is healthy again "
        f"('{place.up_command}'), run the same command to resume"
    )


def discard_har(result: VisitResult) -> None:
    """A visit that is not recorded leaves no HAR behind."""
    if result.har_path:
        Path(result.har_path).unlink(missing_ok=True)
