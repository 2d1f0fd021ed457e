"""Where a crawl's time went, read from its store: per network block, the pages' own loads (onLoad), the
browsers' starts and warm-ups, the rest of the visits' harness time, the link's change and check before the
block, and the resolution timer after it. What a faster harness could win is the second, third and fourth
columns at most; the pages' loads and the timer's queries are the measurement.

    .venv/bin/python -m benchmarks.crawl_budget RESULTS/store.sqlite [--analysis-s 35]

`--analysis-s` adds the analysis's time (the demo prints it) to the total and to the floor: the crawl with no
harness time at all (onLoads, timers, link checks, analysis), against which a time target can be judged.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sqlite3
from collections import defaultdict
from dataclasses import dataclass

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
    link_s: float | None = None  # from the block before's timer end to this block's first visit (unknown for the first)
    timer_s: float = 0.0

    def total(self) -> float:
        return self.on_load + self.start_s + self.other_s + (self.link_s or 0.0) + self.timer_s


def _epoch(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def read_blocks(path: str) -> list[Block]:
    """The store's blocks in run order, each with its time split (`Block`)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    blocks: dict[int, Block] = {}
    first_visit: dict[int, float] = {}
    for block, network, started, on_load, record in db.execute(
        "SELECT block, network, started_at, on_load_ms, record FROM visits WHERE status = 'done' ORDER BY started_at"
    ):
        phases = json.loads(record).get("phases", {})
        b = blocks.setdefault(block, Block(network))
        start = sum(phases.get(p, 0.0) for p in START_PHASES)
        b.visits += 1
        b.starts += "browser_start" in phases
        b.on_load += (on_load or 0.0) / 1000
        b.start_s += start
        b.other_s += json.loads(record)["wall_s"] - (on_load or 0.0) / 1000 - start
        first_visit.setdefault(block, _epoch(started))
    timer_end: dict[int, float] = {}
    for block, begun, ended in db.execute(
        "SELECT block, MIN(start), MAX(start + COALESCE(duration_us, 0) / 1e6) FROM timings GROUP BY block"
    ):
        if block in blocks:
            blocks[block].timer_s, timer_end[block] = ended - begun, ended
    for block, timed_at in db.execute("SELECT block, timed_at FROM blocks"):
        timer_end.setdefault(block, _epoch(timed_at))
    order = sorted(blocks, key=lambda k: first_visit[k])
    for before, block in zip(order, order[1:], strict=False):
        if before in timer_end:
            blocks[block].link_s = first_visit[block] - timer_end[before]
    return [blocks[k] for k in order]


def report(blocks: list[Block], analysis_s: float) -> list[str]:
    """The table's lines: one per block, then the sums, the floor and visits per hour without harness time."""
    lines = [
        f"{'block':<10} {'visits':>6} {'starts':>6} {'onLoad':>8} {'starts s':>8} {'harness':>8} "
        f"{'link':>6} {'timer':>6} {'total':>7}   visits/h (as run / onLoads only)"
    ]
    sums: dict[str, float] = defaultdict(float)
    for b in blocks:
        link = f"{b.link_s:6.1f}" if b.link_s is not None else f"{'?':>6}"
        visits_s = b.on_load + b.start_s + b.other_s
        lines.append(
            f"{b.network:<10} {b.visits:>6} {b.starts:>6} {b.on_load:8.1f} {b.start_s:8.1f} {b.other_s:8.1f} "
            f"{link} {b.timer_s:6.1f} {b.total():7.1f}   {b.visits / visits_s * 3600:6.0f} / "
            f"{b.visits / b.on_load * 3600:6.0f}"
        )
        for key in ("visits", "starts", "on_load", "start_s", "other_s", "timer_s"):
            sums[key] += getattr(b, key)
        sums["link_s"] += b.link_s or 0.0
    crawl = sum(b.total() for b in blocks)
    floor = sums["on_load"] + sums["link_s"] + sums["timer_s"] + analysis_s
    lines += [
        f"{'all':<10} {sums['visits']:>6.0f} {sums['starts']:>6.0f} {sums['on_load']:8.1f} {sums['start_s']:8.1f} "
        f"{sums['other_s']:8.1f} {sums['link_s']:6.1f} {sums['timer_s']:6.1f} {crawl:7.1f}",
        f"crawl {crawl / 60:.2f} min (the first block's link check not counted); with the analysis "
        f"({analysis_s:.0f} s) {(crawl + analysis_s) / 60:.2f} min",
        f"floor, no harness time at all (onLoads, link checks, timers, analysis): {floor / 60:.2f} min; "
        f"harness time per visit, starts included: {(sums['start_s'] + sums['other_s']) / sums['visits']:.3f} s",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store")
    parser.add_argument("--analysis-s", type=float, default=0.0, help="the analysis's time, added to the totals")
    args = parser.parse_args()
    print("\n".join(report(read_blocks(args.store), args.analysis_s)))


if __name__ == "__main__":
    main()
