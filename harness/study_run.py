"""`StudyRun`: one run of a study into its store, the part a single-host crawl and a coordinator share.

A run stores the study and its plan (or checks that the store holds this
very study), holds the store's lock (and whatever else it uses) from start
to end, turns SIGINT and SIGTERM into a stop after the work in hand,
records itself as the study's crawler for `dnsstudy status`, halts in one
line (`DiskFull`) when the results' file system is full, and sums up what it
did (`RunSummary`). How the plan's visits get done is a subclass's:
`Crawl` (harness/crawl.py) runs them at its own station, `Coordinator`
(harness/distributed/coordinator.py) queues them to the vantage points'
workers and records their results.

Run again, a study resumes at its first visit still planned: the store is
consistent at every instant, so a run may end anywhere.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, ClassVar, Generic, TypeVar

from rich.console import Console

from harness.errors import HarnessError
from harness.lock import holding, store_lock
from harness.station import CrawlHalted
from harness.store import Store, disk_full
from harness.study import LoadedStudy, as_current_study

__all__ = ["DiskFull", "RunSummary", "StudyRun"]

SignalHandler = Callable[[int, FrameType | None], Any] | int | None


class DiskFull(CrawlHalted):
    """The results' file system is full: stop with the work in flight unrecorded; resume once there is space."""


@dataclass
class RunSummary:
    """What one run of a study did: the counts every run has (a subclass adds its own)."""

    visits: int = 0  # recorded in this run
    blocks_timed: int = 0
    stopped: bool = False  # by SIGINT / SIGTERM, before the plan was done
    done: int = 0
    total: int = 0
    seconds: float = 0.0

    #: Told after the store's path when the run ended unfinished.
    resume_hint: ClassVar[str] = ""

    @property
    def finished(self) -> bool:
        """Whether the plan is done."""
        return self.done == self.total

    def counts(self) -> str:
        """What else the run counted, for the closing line's parentheses."""
        return f"{self.blocks_timed} blocks timed"

    def rates(self) -> str:
        """Rates for the end of the closing line ('' for none)."""
        return ""

    def notes(self) -> list[str]:
        """Lines between the closing line and the store's (plain text)."""
        return []

    def print_closing(self, console: Console, store: Path) -> None:
        """The lines a command prints when the run is over: what it recorded, what is left, where the store is."""
        console.print(
            f"{self.visits} visits recorded in {self.seconds / 60:.1f} min ({self.counts()}); "
            f"{self.done} of {self.total} done" + self.rates()
        )
        for note in self.notes():
            console.print(note, markup=False, soft_wrap=True)
        console.print(f"store: {store}" + ("" if self.finished else self.resume_hint))


S = TypeVar("S", bound=RunSummary)


class StudyRun(ABC, Generic[S]):
    """One run of a study into one store: prepare, lock, stop on signals, halt on a full disk, sum up.

    `run` is the template; a subclass says how the visits get done (`_do_visits`) and fills in the hooks.
    """

    #: What the store's lock file says this run does to the store ("crawled", "coordinated").
    doing: ClassVar[str]
    #: How a refusal names this kind of run ("give the crawl another --store").
    noun: ClassVar[str]
    #: The line naming the files killed runs left in hars/ and this run removed (`{removed}`, `{hars}`).
    orphans_note: ClassVar[str]
    #: Printed at the first SIGINT or SIGTERM (None: nothing).
    stop_notice: ClassVar[str | None] = None
    #: Whether a second SIGINT or SIGTERM stops at once (KeyboardInterrupt) rather than after the work in hand.
    second_signal_stops_at_once: ClassVar[bool] = False
    #: Study keys a later run may change because it extends the plan (the coordinator's vantage points).
    extendable: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, loaded: LoadedStudy, store: Store, results_dir: Path, console: Console | None, moved: bool):
        self.loaded, self.study, self.store = loaded, loaded.study, store
        self.study_id = loaded.name
        # Absolute, symlinks resolved: HAR paths in the store must not depend on the working directory.
        self.results_dir = Path(os.path.realpath(results_dir))
        self.moved = moved  # the user says the results directory was moved here
        self.console = console or Console()
        self.stopping = False  # set by the first SIGINT or SIGTERM
        self.first_start = 0.0  # when the study first started: rounds are spread from here (duration_days)
        self._pid = os.getpid()

    # -- before the first visit ---------------------------------------------------------

    def prepare(self) -> int:
        """Store the study and its plan (first run), or check the store holds this very study.

        Returns the number of visits planned.
        """
        config = self.loaded.record()
        # Before a plan is written: a refused store stays as it was.
        self.store.claim_hars(self.results_dir / "hars", self.moved)
        self.store.record_protocols()
        existing = self.store.study_config(self.study_id)
        if existing is None:
            planned = self.store.add_study(self.study_id, self.study.name, self.study.seed, config, self.loaded.plan())
            self.console.print(f"new store {self.store.path}: {planned} visits planned")
            return planned
        changed = self._differences(config, existing)
        if changed:
            raise HarnessError(
                f"{self.store.path} holds study '{self.study_id}' with another configuration "
                f"(differs in: {', '.join(changed)}); give the {self.noun} another --store"
            )
        self._extend_plan(existing)
        return self.store.progress(self.study_id).total

    def _differences(self, config: dict, existing: dict) -> list[str]:
        """What differs between the study (``config``, as `LoadedStudy.record` gives it) and the stored one."""
        ours, stored = config["study"], as_current_study(existing["study"])
        changed = sorted(
            k for k in set(ours) | set(stored) if k not in self.extendable and ours.get(k) != stored.get(k)
        )
        if existing.get("list") != config["list"]:
            changed.append("the site list")
        return changed

    def _extend_plan(self, existing: dict) -> None:  # noqa: B027 -- most runs never extend a plan
        """Plan what the study added since the store was made (``existing``: its stored configuration)."""

    def _remove_orphans(self) -> None:
        """Remove what a killed run left in the results' hars/ (`Store.remove_orphan_hars`), saying so."""
        hars = self.results_dir / "hars"
        removed = self.store.remove_orphan_hars(hars)
        if removed:
            self.console.print(self.orphans_note.format(removed=removed, hars=hars))

    # -- the run ---------------------------------------------------------------------------

    def run(self) -> S:
        """Run the study until its plan is done, a stop (SIGINT, SIGTERM), or a halt; what this run did.

        The store (and whatever else the run uses) is locked for the whole run: another run of it is refused
        while this one runs. A full disk becomes a `DiskFull` (one line), with the work in flight unrecorded.
        """
        with self._locked(), self._halting():
            return self._run()

    def _run(self) -> S:
        """The run itself, under the locks `run` holds."""
        started = time.monotonic()
        summary = self._new_summary()
        self.prepare()
        self._set_up()
        self.first_start = self.store.started_at(self.study_id, time.time())
        self.console.print(self._opening_line())
        previous = self._catch_signals()
        try:
            self.store.crawler_started(self.study_id)  # for `dnsstudy status` (harness/process_identity.py)
            with self._halting():  # here too: the crawler's record then says the halt, not the error behind it
                self._do_visits(summary)
        finally:
            self._release_signals(previous)
            self._tear_down()
            self.store.crawler_ended(self.study_id, ending(self.stopping))
        counts = self.store.progress(self.study_id)
        summary.done, summary.total = counts.done, counts.total
        self._sum_up(summary)
        summary.stopped = self.stopping and not summary.finished
        summary.seconds = time.monotonic() - started
        return summary

    def _locked(self) -> AbstractContextManager[None]:
        """Hold what the run must have alone: its store's lock (a subclass adds its place's)."""
        path = Path(os.path.realpath(self.store.path))
        return holding(store_lock(path), f"store {path}", self.doing)

    @contextmanager
    def _halting(self) -> Iterator[None]:
        """Turn an error that halts the run (`_halt`) into its one-line HarnessError."""
        try:
            yield
        except Exception as exc:
            halt = self._halt(exc)
            if halt is None:
                raise
            raise halt from None

    def _halt(self, exc: Exception) -> HarnessError | None:
        """The one-line halt ``exc`` stands for (a full disk), or None if it is no halt."""
        if not disk_full(exc, self.store.path):
            return None
        where = getattr(exc, "filename", None) or self.store.path
        return DiskFull(f"disk full at {where}: {self._left_on_a_full_disk()}")

    # -- stopping --------------------------------------------------------------------------

    def _catch_signals(self) -> tuple[SignalHandler, SignalHandler]:
        """Stop on SIGINT and SIGTERM (`_on_signal`); the handlers they had before."""
        previous = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)
        return previous

    @staticmethod
    def _release_signals(previous: tuple[SignalHandler, SignalHandler]) -> None:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if os.getpid() != self._pid:  # a forked helper (pyroute2's namespace workers) being stopped
            os._exit(128 + signum)
        if self.stopping:
            if self.second_signal_stops_at_once:  # stop now: the store is consistent at every instant
                raise KeyboardInterrupt
            return
        self.stopping = True
        if self.stop_notice:
            self.console.print(self.stop_notice)

    # -- what a subclass says ------------------------------------------------------------------

    @abstractmethod
    def _new_summary(self) -> S:
        """An empty summary of this kind of run."""

    @abstractmethod
    def _set_up(self) -> None:
        """Get ready to visit, after `prepare` (clean up after a killed run: `_remove_orphans`)."""

    @abstractmethod
    def _opening_line(self) -> str:
        """The line that says what the run is about to do."""

    @abstractmethod
    def _do_visits(self, summary: S) -> None:
        """Get the plan's visits done until none is left, `stopping`, or a halt; count them in ``summary``."""

    @abstractmethod
    def _left_on_a_full_disk(self) -> str:
        """What a full disk leaves to do, after 'disk full at PATH: '."""

    def _tear_down(self) -> None:  # noqa: B027 -- not every run has something to undo
        """Undo what `_set_up` did for the visits, however the run ends (after the signals are released)."""

    def _sum_up(self, summary: S) -> None:  # noqa: B027 -- `run` fills in what every summary has
        """Add this kind of run's own figures to ``summary`` at its end."""


def ending(stopping: bool) -> str:
    """How the crawl is ending, called where it ends (a `finally`): finished, stopped, or the error that ends it."""
    error = sys.exc_info()[1]
    if error is None:
        return "stopped by a signal" if stopping else "finished"
    if isinstance(error, KeyboardInterrupt):
        return "stopped at once by a second Ctrl-C"
    if isinstance(error, HarnessError):
        return f"halted: {error}"
    return f"crashed: {type(error).__name__}: {error}"
