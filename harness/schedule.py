"""When a study's rounds start, and whether its plan fits the time it is given.

A study with `duration_days` spreads its rounds evenly: round r starts no
earlier than r x duration / rounds after the crawl first started, so a
week-long study samples every part of the week rather than its first days.
Whether the plan fits is estimated from measured visit times (the median
wall time of visits per network), never from a guess: without
measurements the answer is "unknown" until the first block has run.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from harness.study import LoadedStudy

DAY_S = 86_400.0


@dataclass
class Estimate:
    """How long the plan takes, from measured visit times."""

    visits: int
    seconds_per_visit: dict[str, float]  # median wall time per network, where measured
    unmeasured: list[str]  # networks with no measured visit yet
    round_s: float | None  # one round, visits plus each block's link check (not the timer's run)
    total_s: float | None
    budget_s: float | None  # the study's duration, if it has one

    @property
    def fits(self) -> bool | None:
        """True/False when both the duration and every network's visit time are known."""
        if self.budget_s is None or self.total_s is None:
            return None
        return self.total_s <= self.budget_s

    def summary(self) -> str:
        if self.total_s is None:
            return (
                f"{self.visits} visits; no measured visit time yet for {', '.join(self.unmeasured)}: "
                "the fit is estimated after the first block"
            )
        text = (
            f"{self.visits} visits, about {_human(self.total_s)} of visits and link checks at the measured visit times"
        )
        if self.budget_s is not None:
            verdict = "fits" if self.fits else "does NOT fit"
            text += f"; {verdict} in the study's {_human(self.budget_s)}"
        return text


def estimate(loaded: LoadedStudy, measured: dict[str, list[float]]) -> Estimate:
    """Estimate the study's time from ``measured`` wall times per network (seconds)."""
    s = loaded.study
    per_network = len(loaded.sites) * len(s.configurations) * len(s.browsers)
    medians = {n: statistics.median(measured[n]) for n in s.networks if measured.get(n)}
    missing = [n for n in s.networks if n not in medians]
    check_s = s.link_check.probes * 0.01 + 1.5 * s.link_check.seconds + 1  # probes, both directions' rates at once
    round_s = None if missing else sum(per_network * medians[n] + check_s for n in s.networks)
    budget = s.duration_days * DAY_S if s.duration_days else None
    return Estimate(
        visits=loaded.visit_count,
        seconds_per_visit=medians,
        unmeasured=missing,
        round_s=round_s,
        total_s=None if round_s is None else round_s * s.rounds,
        budget_s=budget,
    )


def round_start(loaded: LoadedStudy, round_: int, started_at: float) -> float:
    """The earliest Unix time round ``round_`` may start; 0.0 for a round that never waits: the first, and
    every round of a study without a duration. Their start is not compared with ``started_at``: a wall
    clock stepped back behind the study's first start would hold the crawl until it caught up."""
    s = loaded.study
    if not s.duration_days or round_ == 0:
        return 0.0
    return started_at + round_ * s.duration_days * DAY_S / s.rounds


def _human(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 2 * DAY_S:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / DAY_S:.1f} days"


def measured_seconds(stores: list[Path]) -> dict[str, list[float]]:
    """Visit wall times per network from existing stores (missing ones are skipped): what `estimate` reads."""
    from harness.store import Store

    times: dict[str, list[float]] = {}
    for path in stores:
        if path.exists():
            for network, values in Store(path).visit_seconds().items():
                times.setdefault(network, []).extend(values)
    return times
