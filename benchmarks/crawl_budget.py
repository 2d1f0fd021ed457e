"""Where a crawl's time went, read from its store: per network block, the pages' own loads (onLoad), the
browsers' starts and warm-ups, the rest of the visits' harness time, the time between visits (the arms' start
and stop, the store's commits, retried attempts, the last browser's close), the link's change and check before
the block (and any pause there: a crawl resumed later counts its wait), and the resolution timer after it. What
a faster harness could win is the starts, harness and between columns at most; the pages' loads and the timer's
queries are the measurement.

    .venv/bin/python -m benchmarks.crawl_budget RESULTS/store.sqlite [--analysis-s 35] [--study ID --place P]

`--analysis-s` adds the analysis's time (the demo prints it) to the total and to the floor: the crawl with no
harness time at all (onLoads, timers, link checks, analysis), against which a time target can be judged.
`--needed wired=4096` prints what a rate of visits an hour leaves the wired block for harness time a visit,
beside its onLoads, its browsers' starts (as many as ran, or `--starts N` at their mean) and the time between
visits: a rate target judged against what the pages themselves take.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

#: The phases of a visit that start the browser (reused: its first visit's) and load its warm-up page.
START_PHASES = ("profile", "browser_start", "warm_start", "settle")


@dataclass
class Block:
    """One network block's time, in seconds."""

    network: str
    visits: int = 0
    starts: int = 0  # browsers started (a reused browser's start is in its first visit's phases)
    on_load: float = 0.0
    start_s: float = 0.0
    other_s: float = 0.0  # the visits' wall time less onLoad and starts: clearing, collecting, the HAR, ...
    between_s: float = 0.0  # from the first visit's start to the timer's, less the visits' wall time
    link_s: float | None = None  # from the block before's timer end to this block's first visit (unknown for the first)
    timer_s: float = 0.0

    def harness_s(self) -> float:
        """What the harness spent in the block beside the pages' loads: starts, visits' own time, between."""
        return self.start_s + self.other_s + self.between_s

    def total(self) -> float:
        return self.on_load + self.harness_s() + (self.link_s or 0.0) + self.timer_s


def _epoch(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def read_blocks(path: str, study: str | None = None, place: str | None = None) -> list[Block]:
    """The blocks of one study at one place (the store's only ones unless named) in run order, each with its
    time split (`Block`)."""
    db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    study, place = _one_crawl(db, path, study, place)
    blocks: dict[int, Block] = {}
    first_visit: dict[int, float] = {}
    last_end: dict[int, float] = {}
    for block, network, started, on_load, record in db.execute(
        "SELECT block, network, started_at, on_load_ms, record FROM visits WHERE status = 'done' AND study_id = ? "
        "AND vantage_point = ? ORDER BY started_at",
        (study, place),
    ):
        fields = json.loads(record)
        phases, wall = fields.get("phases", {}), float(fields.get("wall_s") or 0.0)
        b = blocks.setdefault(block, Block(network))
        start = sum(phases.get(p, 0.0) for p in START_PHASES)
        b.visits += 1
        b.starts += "browser_start" in phases
        b.on_load += (on_load or 0.0) / 1000
        b.start_s += start
        b.other_s += wall - (on_load or 0.0) / 1000 - start
        first_visit.setdefault(block, _epoch(started))
        last_end[block] = _epoch(started) + wall
    timer = _timer_spans(db, study, place)
    for block, b in blocks.items():
        begun, b.timer_s = timer.get(block, (last_end[block], 0.0))
        b.between_s = max(0.0, begun - first_visit[block] - (b.on_load + b.start_s + b.other_s))
    order = sorted(blocks, key=lambda k: first_visit[k])
    for before, block in zip(order, order[1:], strict=False):
        ended = sum(timer.get(before, (last_end[before], 0.0)))
        blocks[block].link_s = first_visit[block] - ended
    return [blocks[k] for k in order]


def _one_crawl(db: sqlite3.Connection, path: str, study: str | None, place: str | None) -> tuple[str, str]:
    """The (study, vantage point) to read: the one asked for, or the store's only one."""
    crawls = sorted(db.execute("SELECT DISTINCT study_id, vantage_point FROM visits WHERE status = 'done'"))
    chosen = [c for c in crawls if study in (None, c[0]) and place in (None, c[1])]
    if len(chosen) != 1:
        found = ", ".join(f"{s}@{p or 'here'}" for s, p in crawls) or "no finished visit"
        raise SystemExit(f"crawl_budget: {path}: name one crawl with --study and --place (it holds {found})")
    return chosen[0]


def _timer_spans(db: sqlite3.Connection, study: str, place: str) -> dict[int, tuple[float, float]]:
    """Per block, when its resolution timer began and how long it ran."""
    spans = {}
    for block, begun, ended in db.execute(
        "SELECT block, MIN(start), MAX(start + COALESCE(duration_us, 0) / 1e6) FROM timings "
        "WHERE study_id = ? AND vantage_point = ? GROUP BY block",
        (study, place),
    ):
        spans[block] = (begun, ended - begun)
    return spans


def report(blocks: list[Block], analysis_s: float) -> list[str]:
    """The table's lines: one per block, then the sums, the floor and visits per hour without harness time."""
    lines = [
        f"{'block':<10} {'visits':>6} {'starts':>6} {'onLoad':>8} {'starts s':>8} {'harness':>8} {'between':>8} "
        f"{'link':>6} {'timer':>6} {'total':>7}   visits/h (as run / onLoads only)"
    ]
    sums: dict[str, float] = defaultdict(float)
    for b in blocks:
        link = f"{b.link_s:6.1f}" if b.link_s is not None else f"{'?':>6}"
        lines.append(
            f"{b.network:<10} {b.visits:>6} {b.starts:>6} {b.on_load:8.1f} {b.start_s:8.1f} {b.other_s:8.1f} "
            f"{b.between_s:8.1f} {link} {b.timer_s:6.1f} {b.total():7.1f}   "
            f"{_per_hour(b.visits, b.on_load + b.harness_s())} / {_per_hour(b.visits, b.on_load)}"
        )
        for key in ("visits", "starts", "on_load", "start_s", "other_s", "between_s", "timer_s"):
            sums[key] += getattr(b, key)
        sums["link_s"] += b.link_s or 0.0
    crawl = sum(b.total() for b in blocks)
    floor = sums["on_load"] + sums["link_s"] + sums["timer_s"] + analysis_s
    harness = sums["start_s"] + sums["other_s"] + sums["between_s"]
    lines += [
        f"{'all':<10} {sums['visits']:>6.0f} {sums['starts']:>6.0f} {sums['on_load']:8.1f} {sums['start_s']:8.1f} "
        f"{sums['other_s']:8.1f} {sums['between_s']:8.1f} {sums['link_s']:6.1f} {sums['timer_s']:6.1f} {crawl:7.1f}",
        f"crawl {crawl / 60:.2f} min (the first block's link check not counted); with the analysis "
        f"({analysis_s:.0f} s) {(crawl + analysis_s) / 60:.2f} min",
        f"floor, no harness time at all (onLoads, link checks, timers, analysis): {floor / 60:.2f} min; "
        f"harness time per visit, starts and between visits included: {harness / max(sums['visits'], 1):.3f} s",
    ]
    return lines


def needed(b: Block, per_hour: float, starts: int | None = None) -> str:
    """What a rate of ``per_hour`` visits an hour leaves block ``b``: the harness time a visit beside its browsers'
    starts (``starts`` of them at the block's mean start, or as many as ran) and the time between visits, its
    onLoads being the measurement; against the harness time a visit as run."""
    budget = b.visits * 3600 / per_hour
    n = b.starts if starts is None else starts
    start_s = b.start_s / b.starts * n if b.starts else 0.0
    left = (budget - b.on_load - start_s - b.between_s) / b.visits
    return (
        f"{b.network} at {per_hour:.0f} visits/h: {budget:.1f} s for {b.visits} visits; onLoads {b.on_load:.1f} s, "
        f"{n} starts {start_s:.1f} s, between visits {b.between_s:.1f} s: leaves {left:.3f} s of harness time a "
        f"visit (as run {b.other_s / b.visits:.3f} s)"
    )


def _rate(text: str) -> tuple[str, float]:
    """``NETWORK=VISITS_PER_HOUR`` read, or a one-line error naming it."""
    network, _, rate = text.partition("=")
    try:
        if network and float(rate) > 0:
            return network, float(rate)
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"--needed {text!r}: expected NETWORK=VISITS_PER_HOUR, e.g. wired=4096")


def _per_hour(visits: int, seconds: float) -> str:
    return f"{visits / seconds * 3600:6.0f}" if seconds > 0 else f"{'-':>6}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store")
    parser.add_argument("--analysis-s", type=float, default=0.0, help="the analysis's time, added to the totals")
    parser.add_argument("--study", help="the study to read, if the store holds several")
    parser.add_argument("--place", help="the vantage point to read, if the store holds several ('' for here)")
    parser.add_argument(
        "--needed", type=_rate, action="append", default=[], help="NETWORK=VISITS_PER_HOUR: the harness time it leaves"
    )
    parser.add_argument("--starts", type=int, help="with --needed: browser starts a block, not as many as ran")
    args = parser.parse_args()
    blocks = read_blocks(args.store, args.study, args.place)
    print("\n".join(report(blocks, args.analysis_s)))
    for network, rate in args.needed:
        found = [b for b in blocks if b.network == network]
        if not found:
            raise SystemExit(f"crawl_budget: --needed {network}: no block of that network in {args.store}")
        print("\n".join(needed(b, rate, args.starts) for b in found))


if __name__ == "__main__":
    main()
