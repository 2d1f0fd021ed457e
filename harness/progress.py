"""Progress a log can show: one plain line at least once a minute when the crawl's output is not a terminal.

On a terminal the crawl draws rich's live table. Anywhere else (nohup, a
systemd unit, a pipe) rich draws nothing until the crawl ends, so this
reporter prints a line instead, every `DNSSTUDY_PROGRESS_INTERVAL` seconds
(default 60; 0 turns it off) and when a network block starts:

    2026-05-04 10:31:07 progress paper-2019: 12345/80000 visits (15.4 %), block 6 (4g; 28 in all), 312 visits/h
    (last 15 min), ETA 2026-05-11 14:02 (in 7.1 days); successful/counted cloudflare/do53 1200/1210, ...;
    harness failures this run: 3 retried, 1 recorded, last: visit 12301 quad9/dot at 10:29:55: ...

(one line in the log). It reads only the crawl's running tallies, never
the store, except one row when a harness failure happens (its detail). A
background thread prints on time even while a visit, a block's timer run
or a wait for a round takes minutes; it never touches the store.

The rate and ETA functions are shared with `dnsstudy status`.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from rich.console import Console

from harness.errors import HarnessError
from harness.plan import PlannedVisit
from harness.schedule import DAY_S, round_start

if TYPE_CHECKING:
    from harness.crawl import Crawl

INTERVAL_ENV = "DNSSTUDY_PROGRESS_INTERVAL"
DEFAULT_INTERVAL_S = 60.0
#: The rate is taken over the visits of this window (ending at the newest visit): long enough to include a
#: block's link check and timer run, short enough to follow a slower network.
RATE_WINDOW_S = 15 * 60.0
#: A crawl with no visit for this long says so: a visit lasts at most its timeout and a margin (a reused
#: browser's, up to 11 s more, waiting for DNS queries of the visit before: harness/browser/reused.py).
QUIET_S = 120.0
#: Done visits read for the rate: more than the window holds at any rate a crawl reaches.
RECENT_VISITS = 500


class Failures(Protocol):
    """What the reporter needs of a crawl's summary: its harness-failure counts."""

    retried: int
    infrastructure: int


def interval_from_env(environ: Mapping[str, str] = os.environ) -> float:
    """Seconds between progress lines (`DNSSTUDY_PROGRESS_INTERVAL`; 0 turns them off)."""
    text = environ.get(INTERVAL_ENV, "").strip()
    if not text:
        return DEFAULT_INTERVAL_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):  # also refuses NaN
        raise HarnessError(f"{INTERVAL_ENV}: expected seconds between progress lines (0: none), got {text!r}")
    return value


def recent_rate(times: Sequence[float], window_s: float = RATE_WINDOW_S) -> float | None:
    """Visits per hour among ``times`` (Unix times of visits, ascending) in the window ending at the newest.

    Measured between visits, so a wait for a round does not read as a slow crawl; None below two visits.
    """
    if len(times) < 2:
        return None
    newest = times[-1]
    recent = [t for t in times if t >= newest - window_s]
    if len(recent) < 2 or newest <= recent[0]:
        return None
    return (len(recent) - 1) * 3600.0 / (newest - recent[0])


def iso_unix(iso: str | None) -> float | None:
    """A stored ISO time ('2026-05-04T10:31:07.123+00:00') as Unix time; None if absent or unreadable."""
    try:
        return dt.datetime.fromisoformat(iso).timestamp() if iso else None
    except ValueError:
        return None


def finish_time(
    now: float, planned_by_round: Mapping[int, int], per_hour: float, round_start_at: Callable[[int], float]
) -> float:
    """When the visits still planned are done at ``per_hour``, no round starting before its time."""
    t = now
    for round_, planned in sorted(planned_by_round.items()):
        if planned > 0:
            t = max(t, round_start_at(round_)) + planned * 3600.0 / per_hour
    return t


def round_starts(started_at: float, rounds: int, duration_days: float | None) -> Callable[[int], float]:
    """Round r's earliest start for a study spread over ``duration_days`` (as harness.schedule.round_start)."""
    if not duration_days:
        return lambda _round: 0.0  # no round waits for its time
    return lambda round_: started_at + round_ * duration_days * DAY_S / rounds


def human_duration(seconds: float) -> str:
    """'45 s', '12 min', '3.5 h', '6.2 days'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * DAY_S:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / DAY_S:.1f} days"


def eta_text(now: float, finish: float | None) -> str:
    """'ETA 2026-05-11 14:02 (in 7.1 days)', or 'ETA unknown' without a rate yet."""
    if finish is None:
        return "ETA unknown (no rate yet)"
    return f"ETA {time.strftime('%Y-%m-%d %H:%M', time.localtime(finish))} (in {human_duration(finish - now)})"


class ProgressLog:
    """Plain progress lines for a log: at least every ``interval`` seconds, and when a block starts."""

    def __init__(
        self,
        study_id: str,
        console: Console,
        done: int,
        total: int,
        planned_by_round: Mapping[int, int],
        round_start_at: Callable[[int], float],
        tally: Mapping[tuple[str, str], Sequence[int]],
        configurations: Sequence[tuple[str, str]],
        blocks: int,
        failure_of: Callable[[int], str | None] = lambda _ordinal: None,
        interval: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.time,
        enabled: bool | None = None,
        recent: Sequence[float] = (),
    ):
        self.study_id, self.console, self.clock = study_id, console, clock
        self.done, self.total, self.blocks = done, total, blocks
        self.planned_by_round = dict(planned_by_round)
        self.round_start_at = round_start_at
        self.tally = tally  # the crawl's own running tally, (resolver, protocol) -> [successful, counted]
        self.configurations = list(configurations)
        self.failure_of = failure_of
        self.interval = interval
        # Quiet on a terminal, where the live table shows all this; quiet when switched off.
        self.enabled = (not console.is_terminal if enabled is None else enabled) and interval > 0
        self.block: tuple[int, str] | None = None
        self.visit_times: deque[float] = deque(sorted(recent))  # when visits ended (Unix time)
        self.failures = (0, 0)  # (retried, recorded) this run
        self.last_failure: str | None = None
        self.due = clock() + interval
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def of_crawl(cls, crawl: Crawl, first_start: float) -> ProgressLog:
        """The reporter for a crawl that is starting (three queries, once), with its thread running.

        A resumed crawl's rate starts from the visits of its last run, so its first lines have an ETA.
        """
        study, store, sid = crawl.study, crawl.store, crawl.study_id
        try:
            interval = interval_from_env()
        except HarnessError as exc:  # not fatal: the crawl has applied its lab faults, which only its end clears
            crawl.console.print(f"{exc}; a line every {DEFAULT_INTERVAL_S:g} s", markup=False, soft_wrap=True)
            interval = DEFAULT_INTERVAL_S
        counts = store.progress(sid)
        ended = [
            t + (v.wall_s or 0.0) for v in store.recent_visits(sid, RECENT_VISITS) if (t := iso_unix(v.started_at))
        ]
        return cls(
            sid,
            crawl.console,
            counts.done,
            counts.total,
            store.planned_by_round(sid),
            lambda round_: round_start(crawl.loaded, round_, first_start),
            crawl.tally,
            study.configurations,
            study.rounds * len(study.networks),
            failure_of=lambda ordinal: store.harness_failure_of(sid, ordinal),
            interval=interval,
            recent=ended,
        ).start()

    # -- what the crawl tells it (main thread) ----------------------------------------------------------------

    def visit_done(self, visit: PlannedVisit, summary: Failures) -> None:
        """A visit was recorded (the crawl's tally already counts it)."""
        failures = (summary.retried, summary.infrastructure)
        failure = None
        if failures != self.failures:  # one row read, only when a harness failure happened
            detail = self.failure_of(visit.ordinal)
            stamp = time.strftime("%H:%M:%S", time.localtime(self.clock()))
            failure = (
                f"visit {visit.ordinal} {visit.resolver}/{visit.protocol} at {stamp}: {detail}" if detail else None
            )
        with self._lock:
            now = self.clock()
            self.done += 1
            self.planned_by_round[visit.round] = max(0, self.planned_by_round.get(visit.round, 0) - 1)
            self.block = (visit.block, visit.network)
            self.visit_times.append(now)
            while self.visit_times and self.visit_times[0] < now - RATE_WINDOW_S:
                self.visit_times.popleft()
            self.failures = failures
            self.last_failure = failure or self.last_failure

    def block_started(self, visit: PlannedVisit) -> None:
        """A network block starts (its link is shaped and checked): a line now, whatever the interval."""
        with self._lock:
            self.block = (visit.block, visit.network)
        self.emit()

    # -- lines ------------------------------------------------------------------------------------------------

    def line(self) -> str:
        """The progress line as of now."""
        with self._lock:
            now = self.clock()
            times = list(self.visit_times)
            rate = recent_rate(times)
            finish = finish_time(now, self.planned_by_round, rate, self.round_start_at) if rate else None
            parts = [
                f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(now))} progress {self.study_id}: "
                f"{self.done}/{self.total} visits ({100 * self.done / max(self.total, 1):.1f} %)"
            ]
            if self.block is not None:
                # Numbered as the crawl's own block lines number them (from 0).
                parts.append(f"block {self.block[0]} ({self.block[1]}; {self.blocks} in all)")
            if rate is not None:
                parts.append(f"{rate:.0f} visits/h (last {human_duration(min(RATE_WINDOW_S, times[-1] - times[0]))})")
            parts.append("done" if self.done >= self.total else eta_text(now, finish))
            if times and now - times[-1] > QUIET_S:
                parts.append(f"no visit for {human_duration(now - times[-1])}")
            text = ", ".join(parts)
            text += "; successful/counted " + ", ".join(
                f"{r}/{p} {ok}/{counted}" for (r, p) in self.configurations for ok, counted in [self._tally(r, p)]
            )
            retried, recorded = self.failures
            text += f"; harness failures this run: {retried} retried, {recorded} recorded"
            if self.last_failure:
                text += f", last: {self.last_failure}"
            return text

    def _tally(self, resolver: str, protocol: str) -> tuple[int, int]:
        ok_counted = self.tally.get((resolver, protocol)) or (0, 0)
        return ok_counted[0], ok_counted[1]

    def emit(self) -> None:
        """Print the line (if this reporter prints at all) and start the interval again."""
        if not self.enabled:
            return
        text = self.line()
        with self._lock:
            self.due = self.clock() + self.interval
        # soft_wrap: one line in the log whatever its length (a console that is no terminal wraps at 80).
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def tick(self) -> bool:
        """Print the line if the interval has passed since the last one; True if it did."""
        if not self.enabled or self.clock() < self.due:
            return False
        self.emit()
        return True

    # -- the thread ---------------------------------------------------------------------------------------------

    def start(self) -> ProgressLog:
        """Print on time from a thread of its own (only when enabled)."""
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="progress-log", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(max(0.05, self.due - self.clock())):
            self.tick()

    def close(self) -> None:
        """Stop the thread and print a last line. Never raises: it runs while the crawl ends, maybe on an error."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self.emit()
        except Exception:  # noqa: BLE001 -- a progress line must never hide why the crawl ended
            pass
