"""Coverage of the grid's intervals: how often each method's 95 % interval holds the true value.

Simulates paired differences (analysis/simulate.py: normal, log-normal and
bimodal visit noise, with and without a site effect of sd 300 ms) for 8, 20,
50 and 200 sites in 4 rounds, and for 1 round (one visit per site), and
counts how often each interval method's interval of the median, the mean and
the share of pairs above +300 ms holds the population's value:

- pair-percentile: pairs resampled as if independent, plain percentiles, what
  the analysis did before issue 34 (then with the median's bootstrap
  computed exactly for a lower median; every median is numpy's now);
- pair-expanded: the same with Hesterberg's expanded percentiles;
- site-percentile: sites resampled with all their rounds, plain percentiles;
- site-expanded: sites resampled, expanded percentiles.

With one round the pair and site methods are the same, so only the pair
ones are shown. Prints one row per scenario, then the mean distance from
95 % of each site method over the sizes studies use (20 sites and more, rounds
> 1), the one the profile's `[statistics] interval` should name.

    .venv/bin/python -m benchmarks.coverage [--replicates 1000] [--resamples 1000] [--processes 2]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from analysis.resampling import draw_resamples, intervals, percentile_levels
from analysis.simulate import SHAPES, Scenario, draw, truth

METHODS = {
    "pair-percentile": ("pair", "percentile"),
    "pair-expanded": ("pair", "expanded"),
    "site-percentile": ("site", "percentile"),
    "site-expanded": ("site", "expanded"),
}
STATISTICS = ("median", "mean", "share")
SIZES = (8, 20, 50, 200)
STUDY_SIZES = (20, 50, 200)  # what a study uses; 8 sites is a pilot
SITE_SD_MS = 300.0
LARGE_MS = 300.0  # the tail share's threshold: inside every shape's range, so the share is not ~0
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Task:
    scenario: Scenario
    replicates: int
    resamples: int
    seed: int


def scenarios() -> list[Scenario]:
    """Every shape, with and without a site effect, at every size, 4 rounds; then 1 round (site effect on)."""
    several = [Scenario(s, sd, n, 4) for s in SHAPES for sd in (0.0, SITE_SD_MS) for n in SIZES]
    return several + [Scenario(s, SITE_SD_MS, n, 1) for s in SHAPES for n in SIZES]


def run(task: Task) -> dict[tuple[str, str], float]:
    """Coverage of each (method, statistic) over the task's replicates."""
    scenario = task.scenario
    true = truth(scenario, LARGE_MS)
    target = {"median": true.median_ms, "mean": true.mean_ms, "share": true.share_slower}
    rng = np.random.default_rng(task.seed)
    covered = dict.fromkeys(((m, s) for m in METHODS for s in STATISTICS), 0)
    for replicate in range(task.replicates):
        d, sites = draw(scenario, rng)
        units = {"pair": np.arange(len(d)), "site": sites}
        for unit, codes in units.items():
            if unit == "site" and scenario.rounds == 1:
                continue
            count = len(np.unique(codes))
            resamples = draw_resamples(np.zeros(count, dtype=int), task.resamples, task.seed * 100_003 + replicate)
            for method, (their_unit, kind) in METHODS.items():
                if their_unit != unit:
                    continue
                iv = intervals(d, codes, resamples, percentile_levels(CONFIDENCE, count, kind), LARGE_MS)
                got = {"median": iv.median, "mean": iv.mean, "share": iv.slower}
                for statistic, (low, high) in got.items():
                    covered[(method, statistic)] += int(low <= target[statistic] <= high)
    return {key: hits / task.replicates for key, hits in covered.items()}


def _label(scenario: Scenario) -> str:
    effect = f"site sd {scenario.site_sd_ms:g}" if scenario.site_sd_ms else "no site effect"
    return f"{scenario.shape:9} {effect:14} {scenario.sites:4} sites x {scenario.rounds} rounds"


def report(results: list[tuple[Scenario, dict[tuple[str, str], float]]]) -> None:
    """The table (coverage in %, median / mean / share for each method), then each site method's distance."""
    print(f"{'scenario':45} " + " ".join(f"{m:>20}" for m in METHODS))
    print(f"{'':45} " + " ".join(f"{'median/mean/share':>20}" for _ in METHODS))
    for scenario, coverage in results:
        cells = []
        for method, (unit, _) in METHODS.items():
            if unit == "site" and scenario.rounds == 1:
                cells.append(f"{'(= pair)':>20}")
                continue
            cells.append(f"{'/'.join(f'{100 * coverage[(method, s)]:.1f}' for s in STATISTICS):>20}")
        print(f"{_label(scenario):45} " + " ".join(cells))
    print("\nmean |coverage - 95 %| of the median's interval at 20 sites and more, several rounds:")
    for method, (unit, _) in METHODS.items():
        chosen = [c for s, c in results if s.rounds > 1 and s.sites in STUDY_SIZES]
        distance = np.mean([abs(c[(method, "median")] - CONFIDENCE) for c in chosen])
        print(f"  {method}: {100 * distance:.2f} percentage points" + ("" if unit == "site" else " (not valid here)"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=1000, help="simulated studies per scenario")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per interval")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=34)
    args = parser.parse_args()
    started = time.perf_counter()
    tasks = [Task(s, args.replicates, args.resamples, args.seed * 1000 + i) for i, s in enumerate(scenarios())]
    with ProcessPoolExecutor(args.processes) as pool:
        results = list(zip((t.scenario for t in tasks), pool.map(run, tasks), strict=True))
    report(results)
    half_width = 100 * 1.96 * np.sqrt(CONFIDENCE * (1 - CONFIDENCE) / args.replicates)
    print(
        f"\n{args.replicates} replicates per scenario (a coverage of 95 % is measured within +-{half_width:.1f} "
        f"points), {args.resamples} resamples per interval; {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
