"""The crawl loop: a study's plan, visit after visit, into the store; resumable at any moment.

Visits run in plan order. A network block starts by shaping the link once
and checking it (the check is stored next to the visits); it ends by timing
every hostname the block's pages met, under the same link. A harness
failure (dead stub, dead delayer, crashed browser) is retried up to the
study's bound and then recorded as an Infrastructure Failure, never as a
protocol result; a dead lab stops the crawl with the visit still planned.
Ctrl-C (or SIGTERM) stops after the current visit; a second Ctrl-C stops
at once, which loses nothing either, because a visit is recorded in one
transaction after its HAR is in place and on disk (fsynced).

One crawl runs per store and per place (`harness/lock.py`). A full disk, a
daemon that hangs, or any helper that overruns its timeout stops the crawl
like a dead lab does (`CrawlHalted`, exit status 2 from the CLI), with the
visit still planned; a HAR the timer cannot read is skipped and named with
its block. What every run of a study does (the plan into the store, the
locks, the signals, the full disk, the closing summary) is `StudyRun`'s
(`harness/study_run.py`); a `Crawl` is the run that visits at its own
station.
"""

from __future__ import annotations

import os
import subprocess
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from rich.console import Console, Group
from rich.live import Live
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from harness.errors import HarnessError
from harness.lock import crawling
from harness.logs import bound_logs
from harness.place import Place
from harness.plan import PlannedVisit
from harness.progress import ProgressLog
from harness.schedule import estimate, round_start
from harness.station import CrawlHalted, Station
from harness.store import Store
from harness.study import LoadedStudy, check_resolvers, check_sites
from harness.study_run import DiskFull, RunSummary, StudyRun
from harness.timer import read_hostnames
from harness.visit import Visitor

__all__ = ["Crawl", "CrawlHalted", "CrawlSummary", "DiskFull"]


@dataclass
class CrawlSummary(RunSummary):
    """What one run of the crawl did."""

    retried: int = 0  # harness failures that were retried
    infrastructure: int = 0  # recorded as Infrastructure Failure after the retries
    per_network: dict[str, list[float]] = field(default_factory=dict)  # wall times of this run's visits

    resume_hint: ClassVar[str] = "  (run the same command again to resume)"

    def counts(self) -> str:
        return f"{self.retried} retried, {self.infrastructure} infrastructure failures"

    def rates(self) -> str:
        rates = ", ".join(f"{n} {len(v) / sum(v) * 3600:.0f}" for n, v in self.per_network.items() if sum(v))
        return f"; visits per hour by network: {rates}" if rates else ""


@dataclass
class _Display:
    """What the crawl shows as it goes: rich's live bar and table on a terminal, plain lines in a log."""

    progress: Progress
    task: TaskID
    live: Live
    report: ProgressLog


class Crawl(StudyRun[CrawlSummary]):
    """One study's crawl on a place (the lab or an Internet side), into one store."""

    doing = "crawled"
    noun = "crawl"
    orphans_note = "removed {removed} files interrupted visits left in {hars} (unrecorded HARs, .part)"
    stop_notice = "stopping after the current visit (Ctrl-C again to stop now)"
    second_signal_stops_at_once = True

    def __init__(
        self,
        loaded: LoadedStudy,
        store: Store,
        place: Place,
        results_dir: Path,
        backend: str = "auto",
        console: Console | None = None,
        moved: bool = False,
        station_type: type[Station] = Station,  # a test's fake station (tests/fakes.py)
    ):
        if loaded.study.vantage_points:
            raise HarnessError(
                f"{loaded.path}: vantage_points: the study names {len(loaded.study.vantage_points)} vantage points; "
                "crawl it with 'dnsstudy coordinate' and a 'dnsstudy worker' at each (docs/distributed.md)"
            )
        if loaded.study.target != place.kind:
            raise HarnessError(
                f"{loaded.path}: target: the study is for the {loaded.study.target}, "
                f"but the crawl was given the {place.kind}"
            )
        place.require_healthy()
        check_resolvers(loaded, place)
        check_sites(loaded, place)
        super().__init__(loaded, store, results_dir, console, moved)
        self.place = place
        self.tally: dict[tuple[str, str], list[int]] = {}  # (resolver, protocol) -> [successful, counted]
        self.report: ProgressLog | None = None  # plain progress lines, while the visits run
        self.station = station_type(place, self.study, self.results_dir, backend, self.console, lambda: self.stopping)

    # -- before the first visit -------------------------------------------------

    def prepare(self) -> int:
        """Store the study and its plan (first run), or check the store holds this very study.

        A results directory the user says was ``moved`` here gets its HAR paths rewritten first.
        Returns the number of visits planned. Refused first (one line naming the fault and the command that
        clears it) when the place carries a fault the study does not declare: its visits would count failures
        the protocol did not cause.
        """
        refuse_undeclared_faults(self.loaded, self.place)
        rewritten = self.store.adopt_results_dir(self.results_dir, self.moved)
        if rewritten:
            self.console.print(f"{self.store.path}: {rewritten} HAR paths rewritten to {self.results_dir / 'hars'}")
        return super().prepare()

    def run(self, visitor: Visitor | None = None) -> CrawlSummary:
        """Run the crawl until the plan is done, Ctrl-C, or a harness failure (CrawlHalted).

        The store and the place are locked for the whole run: another crawl of either, or a `visit`,
        `timer` or `net` on the place, is refused while it runs. A full disk and a helper that overruns
        its timeout become a CrawlHalted (one line) with the visit in flight still planned.
        """
        if visitor is not None:
            self.station.visitor = visitor
        try:
            return super().run()
        finally:
            self.station.end_session()

    def _locked(self) -> AbstractContextManager[None]:
        return crawling(self.place, Path(os.path.realpath(self.store.path)))

    def _halt(self, exc: Exception) -> HarnessError | None:
        if isinstance(exc, subprocess.TimeoutExpired):
            return CrawlHalted(self.station.timed_out(exc))
        return super()._halt(exc)

    def _left_on_a_full_disk(self) -> str:
        counts = self.store.progress(self.study_id)  # reading needs no space
        return f"{counts.total - counts.done} visits still planned; free space and run the same command to resume"

    def _new_summary(self) -> CrawlSummary:
        return CrawlSummary()

    def _set_up(self) -> None:
        self._clean_up_after_a_kill()
        # The study's lab faults hold for the whole crawl, and are undone when it ends however it ends.
        self.place.apply_faults(
            [(f.name, f.resolver) for f in self.study.faults], f"by the crawl of study {self.study_id}"
        )
        self.store.record_environment(self.study_id, self.station.environment())

    def _opening_line(self) -> str:
        counts = self.store.progress(self.study_id)
        return (
            f"study {self.study_id}: {counts.done} of {counts.total} visits done; "
            f"{estimate(self.loaded, self.store.visit_seconds(self.study_id)).summary()}"
        )

    def _tear_down(self) -> None:
        if self.study.faults:
            self.place.clear_faults()
        if self.report is not None:
            self.report.close()

    def _clean_up_after_a_kill(self) -> None:
        """A crawl killed mid-visit leaves its browser, driver and stub running in the client namespace
        (they have sessions of their own, so that a Ctrl-C reaches only the crawl): orphans, stopped and named.
        A program someone runs there (a shell, a benchmark) is named and left alone (harness/leftovers.py)."""
        notes = self.station.clean_up_after_a_kill()
        for note in notes:  # nothing at all when nothing was left
            self.console.print(note, markup=False, highlight=False, soft_wrap=True)
        self._remove_orphans()

    # -- the loop --------------------------------------------------------------------

    def _do_visits(self, summary: CrawlSummary) -> None:
        """Every visit still planned, in order, block by block, shown as it goes; then the blocks left untimed."""
        counts = self.store.progress(self.study_id)
        progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
        )
        task = progress.add_task(self.study_id, total=counts.total, completed=counts.done)
        # Success per configuration, read once and then kept up to date: no query per visit.
        self.tally = {
            c: [v.successful, v.counted] for c, v in self.store.success_by_configuration(self.study_id).items()
        }
        # Plain progress lines when the output is no terminal.
        self.report = report = ProgressLog.of_crawl(self, self.first_start)
        with Live(
            Group(progress, self._success_table()), console=self.console, refresh_per_second=2, transient=False
        ) as live:
            self._time_untimed_blocks(summary)
            self._visit_blocks(summary, _Display(progress, task, live, report))
            # Blocks whose visits were all done before a kill, but not their timer run.
            self._time_untimed_blocks(summary)
        self.console.print()

    def _visit_blocks(self, summary: CrawlSummary, display: _Display) -> None:
        """Visit until the plan is done or the crawl stops, starting and finishing each network block."""
        block: tuple[int, str] | None = None  # (block, network) of the visits running
        while not self.stopping and (visit := self.store.next_planned(self.study_id)) is not None:
            if block is None or visit.block != block[0]:
                if block is not None:
                    self._finish_block(*block, summary)
                block = (visit.block, visit.network)
                if not self._start_block(visit):
                    break
                display.report.block_started(visit)
            display.progress.update(
                display.task,
                description=f"{self.study_id} r{visit.round} {visit.network} {visit.resolver}/{visit.protocol}",
            )
            # Lab and stub logs live in RAM: bounded between visits, where no stub reads them.
            bound_logs(self.place.run_dir / "logs")
            if self._visit(visit, summary):
                display.progress.advance(display.task)
                display.live.update(Group(display.progress, self._success_table()))
                display.report.visit_done(visit, summary)
        if not self.stopping and block is not None:
            self._finish_block(*block, summary)

    def _start_block(self, visit: PlannedVisit) -> bool:
        """Wait for the round's start, shape the link, check it; False if stopped while waiting."""
        not_before = round_start(self.loaded, visit.round, self.first_start)
        if time.time() < not_before:
            self.console.print(
                f"round {visit.round} starts at {time.strftime('%Y-%m-%d %H:%M', time.localtime(not_before))}"
            )
            while time.time() < not_before and not self.stopping:
                time.sleep(min(5.0, not_before - time.time()))
            if self.stopping:
                return False
        check = self.station.start_block(
            visit.network,
            visit,
            on_check=lambda c: self.store.add_link_check(self.study_id, visit.block, visit.network, c),
        )
        self.console.print(self.station.describe_check(visit.block, visit.network, check))
        return True

    def _visit(self, visit: PlannedVisit, summary: CrawlSummary) -> bool:
        """Run one planned visit (retrying harness failures) and record it; False if left planned."""
        outcome = self.station.visit(visit)
        if outcome is None:
            return False
        summary.retried += outcome.attempts
        summary.infrastructure += outcome.infrastructure
        # If this fails (a full disk), the HAR stays until the next run's orphan pass: that pass asks the store,
        # and only the store knows for sure whether a failed commit left the record out.
        self.store.complete(self.study_id, visit, outcome.record, attempts=outcome.attempts)
        ok_counted = self.tally.setdefault((visit.resolver, visit.protocol), [0, 0])
        ok_counted[0] += outcome.record["error_class"] == "Successful"
        ok_counted[1] += bool(outcome.record["counted"])
        summary.visits += 1
        summary.per_network.setdefault(visit.network, []).append(outcome.wall_s)
        return True

    # -- after a block -------------------------------------------------------------------

    def _finish_block(self, block: int, network: str, summary: CrawlSummary) -> None:
        if self.study.timer.enabled and not self.store.block_timed(self.study_id, block):
            self._time_block(block, network, summary)

    def _time_untimed_blocks(self, summary: CrawlSummary) -> None:
        """Time blocks whose visits are all done but whose timer run was lost to a kill."""
        if not self.study.timer.enabled:
            return
        for untimed in self.store.untimed_blocks(self.study_id):
            if self.stopping:
                return
            self._time_block(untimed.block, untimed.network, summary)

    def _time_block(self, block: int, network: str, summary: CrawlSummary) -> None:
        """Time every hostname of the block's HARs, per resolver and protocol, under the block's link.

        A HAR that cannot be read (missing, truncated, not JSON) is skipped, and the problem is kept with
        the block: one bad file must not stop a crawl that times this block before any visit on every resume.
        """
        names, unreadable = read_hostnames(Path(p) for p in self.store.block_hars(self.study_id, block))
        if unreadable:
            self.console.print(
                f"block {block}: {len(unreadable)} HARs unreadable, skipped: {unreadable[0]}"
                + (f" (and {len(unreadable) - 1} more, kept with the block)" if len(unreadable) > 1 else "")
            )
        started = time.monotonic()
        timed = self.station.time_hostnames(block, network, names)
        if timed is None:
            return  # stopped part-way: the block is timed again on resume, whole
        records, problems = timed
        self.store.add_block_timings(
            self.study_id, block, network, len(names), records, "; ".join(problems) or None, unreadable
        )
        summary.blocks_timed += 1
        self.console.print(
            f"block {block}: timed {len(names)} hostnames x {len(self.study.timer_pairs)} resolver/protocol pairs "
            f"in {time.monotonic() - started:.0f} s" + (f"; problems: {'; '.join(problems)}" if problems else "")
        )

    def _success_table(self) -> Table:
        table = Table("configuration", "visits", "successful", box=None, pad_edge=False)
        for resolver, protocol in self.study.configurations:
            ok, counted = self.tally.get((resolver, protocol), (0, 0))
            table.add_row(f"{resolver} {protocol}", str(counted), f"{100 * ok / counted:.0f} %" if counted else "-")
        return table


def refuse_undeclared_faults(loaded: LoadedStudy, place: Place) -> None:
    """Refuse a crawl of ``loaded`` at ``place`` in one line if the place carries a fault the study does not declare
    (applied by hand, or left by a crawl of another study). Call it under the place's lock, so that none is applied
    after this look; the CLI calls it before it opens the store, so that a refused crawl leaves no store behind."""
    declared = {(f.name, f.resolver) for f in loaded.study.faults}
    foreign = [f for f in place.active_faults() if (f.name, f.resolver) not in declared]
    place.refuse_faults(foreign, f"which study '{loaded.name}' does not declare (its [[faults]])")
