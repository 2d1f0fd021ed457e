"""Synthetic results stores with known answers, written through the store's schema (docs/store.md)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path

from harness.plan import make_plan
from harness.sitelist import Site
from harness.store import Store

#: (network, round, site index, resolver, protocol) -> (error class, onLoad ms or None, paper-2019 class)
Outcome = Callable[[str, int, int, str, str], tuple[str, float | None, str]]
#: (network, round, site index, resolver, protocol) -> paint and loading times in ms by column ("fcp_ms",
#: "lcp_ms", "dcl_ms"); a column left out, or None, is one the browser did not report.
Paints = Callable[[str, int, int, str, str], dict[str, float | None]]
#: The visits columns of the paint and loading metrics, and the full record's key for each (docs/store.md).
PAINT_COLUMNS = {"fcp_ms": "fcp_ms", "lcp_ms": "lcp_ms", "dcl_ms": "on_content_load_ms"}


def make_store(
    path: Path,
    outcome: Outcome,
    sites: int = 40,
    rounds: int = 1,
    networks=("wired",),
    configurations=(("a", "do53"), ("b", "do53")),
    timings: dict | None = None,
    paints: Paints | None = None,
    vantage_points: dict[str, float] | None = None,
    browsers: dict[str, dict[str, float]] | None = None,
    config: dict | None = None,
    browser_life: str = "fresh",
) -> Path:
    """A store whose every planned visit is done with the outcome ``outcome`` gives it.

    With ``paints``, each Successful visit also gets the paint and loading times it gives (in its columns and
    its record); every other visit has none, as in a crawl. Without, every record says none, and the columns
    are left as `Store` makes them. ``vantage_points``: name -> ms added to every onLoad measured there (the
    plan is repeated at each, as a study with vantage points plans it). ``browsers``: name -> protocol -> ms
    added to every onLoad of that protocol in that browser (a factor of the plan, as a study's `browsers`).
    ``config``: the study's record as a crawl stores it (`LoadedStudy.record()`); default an empty study.
    ``browser_life``: every visit's `browser_session` (what a crawl records: "fresh", "reused warm-started"...)."""
    store = Store(path)
    site_list = [Site(f"site{i}.test", i + 1, "top" if i < sites // 2 else "tail") for i in range(sites)]
    places = vantage_points or {"": 0.0}
    slower = browsers or {"firefox": {}}
    plan = list(
        make_plan(site_list, rounds, list(networks), list(configurations), 1, list(places), browsers=tuple(slower))
    )
    store.add_study("synthetic", "synthetic", 1, config or {"study": {}}, plan)
    index = {s.domain: i for i, s in enumerate(site_list)}
    painted: list[tuple] = []
    for visit in plan:
        key = (visit.network, visit.round, index[visit.site.domain], visit.resolver, visit.protocol)
        error_class, on_load, paper = outcome(*key)
        times = _paint_times(paints, key, error_class)
        record = {
            "visit_id": uuid.uuid4().hex,
            "started_at": "2026-01-01T00:00:00Z",
            "error_class": error_class,
            "detail": "",
            "paper_2019": paper,
            "counted": error_class != "Infrastructure Failure",
            "on_load_ms": (
                on_load + places[visit.vantage_point] + slower[visit.browser].get(visit.protocol, 0.0)
                if error_class == "Successful" and on_load is not None
                else None
            ),
            "har_path": None,
            "wall_s": 3.0,
            "browser_session": browser_life,
        }
        # The record always has the keys, as a crawl's does (None: not reported), whichever columns are written.
        record.update({PAINT_COLUMNS[column]: ms for column, ms in times.items()})
        painted.append((*times.values(), visit.ordinal))
        store.complete("synthetic", visit, record)
    if paints is not None:
        _write_paints(store, painted)
    for block, ((network, resolver, protocol), durations) in enumerate((timings or {}).items()):
        rows = [_timer_record(resolver, protocol, i, d) for i, d in enumerate(durations)]
        store.add_block_timings("synthetic", block, network, len(rows), rows)
    store.close()
    return path


def _paint_times(paints: Paints | None, key: tuple, error_class: str) -> dict[str, float | None]:
    """A visit's paint and loading times by column: all None without ``paints`` or unless Successful."""
    given = paints(*key) if paints is not None and error_class == "Successful" else {}
    return {column: given.get(column) for column in PAINT_COLUMNS}


def _write_paints(store: Store, rows: list[tuple]) -> None:
    """Write the paint and loading columns straight through the schema, adding any the store does not have yet,
    so these stores do not depend on which of them `Store.complete` writes."""
    have = {row[1] for row in store.db.execute("PRAGMA table_info(visits)")}
    with store.transaction():
        for column in PAINT_COLUMNS:
            if column not in have:
                store.db.execute(f"ALTER TABLE visits ADD COLUMN {column} REAL")
        store.db.executemany(
            f"UPDATE visits SET {', '.join(f'{c} = ?' for c in PAINT_COLUMNS)} "
            "WHERE study_id = 'synthetic' AND ordinal = ?",
            rows,
        )


def without_paint_columns(path: Path) -> Path:
    """Make ``path`` a store from before the paint and loading columns: drop whichever of them it has."""
    db = sqlite3.connect(path)
    try:
        have = {row[1] for row in db.execute("PRAGMA table_info(visits)")}
        for column in PAINT_COLUMNS:
            if column in have:
                db.execute(f"ALTER TABLE visits DROP COLUMN {column}")
        db.commit()
    finally:
        db.close()
    return path


def _timer_record(resolver: str, protocol: str, i: int, d: float | dict | None) -> dict:
    """A timer record: a duration (us) is an answer, None a timeout, a dict sets the fields itself
    (e.g. {"status": "error", "error": "TLS authentication failed"})."""
    record = {
        "resolver": resolver,
        "protocol": protocol,
        "name": f"n{i}.test",
        "type": "A",
        "start": float(i),
        "duration_us": d,
        "new_connection": i == 0,
        "status": "ok" if d is not None else "timeout",
    }
    if isinstance(d, dict):
        record.update({"duration_us": None, **d})
    return record


def ok(on_load: float) -> tuple[str, float, str]:
    return "Successful", on_load, "Successful"
