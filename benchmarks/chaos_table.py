"""The chaos run's figures per kind of fault: injected, visits touched, retried, lost, recorded twice, misattributed.

- touched: a visit the worker held (taken from the broker, not yet acknowledged) at some moment between
  the fault's start and its end, that is in flight or started during the fault;
- retried: a touched visit that ran more than once (held again after a gap or under another tag, or
  finished more than once by the worker; a gap shorter than the half-second look is missed) or
  whose record carries retried harness failures (`attempts`);
- lost: a touched visit the store does not hold as done at the end (the "all" row: any planned visit);
- recorded twice: a touched visit with more than one done row or more than one HAR on disk (the "all"
  row adds HARs on disk that no row names);
- misattributed: a touched visit counted as a protocol's failure (`counted` and not Successful). The lab
  has no declared fault, so the "all" row counts every counted failure of the run, touched or not.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.chaos_fleet import KINDS, FleetRun

COLUMNS = ["injected", "touched", "retried", "lost", "twice", "misattributed"]


@dataclass
class Row:
    """One kind's figures."""

    kind: str
    injected: int = 0
    touched: int = 0
    retried: int = 0
    lost: int = 0
    twice: int = 0
    misattributed: int = 0


@dataclass
class StoreView:
    """What the store and the results directory say about each planned visit."""

    planned: set[int]
    done: Counter[int]  # ordinal -> done rows
    attempts: dict[int, int]
    failures: dict[int, str]  # ordinal -> "error_class: detail" of a counted failure
    hars: Counter[int]  # ordinal -> HAR files on disk named by its visit id
    stray_hars: list[str]  # HAR files on disk no row names


def read_store(store: Path) -> StoreView:
    """The store's visits and the HARs beside it."""
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT ordinal, status, attempts, visit_id, counted, error_class, detail FROM visits"
        ).fetchall()
    finally:
        db.close()
    by_id = {r[3]: r[0] for r in rows if r[3]}
    hars: Counter[int] = Counter()
    stray: list[str] = []
    for path in (store.parent / "hars").iterdir():
        if path.name == ".store":
            continue
        ordinal = by_id.get(path.name.split(".")[0])
        if ordinal is None:
            stray.append(path.name)
        else:
            hars[ordinal] += 1
    return StoreView(
        planned={r[0] for r in rows},
        done=Counter(r[0] for r in rows if r[1] == "done"),
        attempts={r[0]: r[2] for r in rows},
        failures={r[0]: f"{r[5]}: {r[6]}" for r in rows if r[4] and r[5] != "Successful"},
        hars=hars,
        stray_hars=stray,
    )


def runs_per_visit(worker_log: str) -> Counter[int]:
    """How many times the worker finished each visit (its `visit N: ...` lines)."""
    return Counter(int(m) for m in re.findall(r"^visit (\d+): ", worker_log, flags=re.MULTILINE))


def table(run: FleetRun, view: StoreView, worker_log: str, finished: bool = True) -> list[Row]:
    """A row per kind of fault, then the "all" row over the whole run.

    A run stopped before the end (``finished`` False) counts as lost only touched visits not recorded: the
    visits it never reached are not lost, and are reported apart (`visits_done`)."""
    deliveries: Counter[int] = Counter()
    for h in run.holdings.values():
        deliveries[h.ordinal] += h.deliveries
    runs = runs_per_visit(worker_log)

    def figures(row: Row, visits: set[int]) -> Row:
        row.touched = len(visits)
        row.retried = sum(1 for v in visits if deliveries[v] > 1 or runs[v] > 1 or view.attempts.get(v, 0) > 0)
        row.lost = sum(1 for v in visits if view.done[v] == 0)
        row.twice = sum(1 for v in visits if view.done[v] > 1 or view.hars[v] > 1)
        row.misattributed = sum(1 for v in visits if v in view.failures)
        return row

    rows = []
    every: set[int] = set()
    for kind in KINDS:
        faults = [f for f in run.faults if f.kind == kind]
        touched = {h.ordinal for h in run.holdings.values() for f in faults if h.first <= f.end and h.last >= f.start}
        every |= touched
        rows.append(figures(Row(kind, injected=len(faults)), touched))
    total = figures(Row("all", injected=len(run.faults)), every)
    if finished:
        total.lost = len(view.planned - {v for v, n in view.done.items() if n})
    total.twice += len(view.stray_hars)
    total.misattributed = len(view.failures)
    return [*rows, total]


def checks(rows: list[Row], view: StoreView, wanted: int) -> dict[str, str]:
    """Lost, twice and misattributed are 0 (else a bug in the harness); every kind injected in a full run."""
    total = rows[-1]
    out = {
        "nothing lost": "ok" if total.lost == 0 else f"{total.lost} planned visits never recorded",
        "nothing recorded twice": "ok"
        if total.twice == 0
        else f"{total.twice}; HARs no row names: {', '.join(view.stray_hars[:5])}",
        "nothing misattributed": "ok"
        if total.misattributed == 0
        else "; ".join(f"visit {v} {d}" for v, d in sorted(view.failures.items())[:5]),
    }
    missing = [r.kind for r in rows[:-1] if r.injected == 0]
    name = "every kind of fault injected" + ("" if wanted >= len(KINDS) else " (informative)")
    out[name] = "ok" if not missing else "never injected: " + ", ".join(missing)
    return out


def render(rows: list[Row]) -> str:
    """The table, plain text, as docs/crawl.md shows it."""
    lines = ["| fault | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    lines += [f"| {r.kind} | " + " | ".join(str(getattr(r, c)) for c in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def as_json(rows: list[Row]) -> list[dict]:
    return [asdict(r) for r in rows]
