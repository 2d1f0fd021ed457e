"""Synthetic results stores with known answers, written through the store's schema (docs/store.md)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from harness.plan import make_plan
from harness.sitelist import Site
from harness.store import Store

#: (network, round, site index, resolver, protocol) -> (error class, onLoad ms or None, paper-2019 class)
Outcome = Callable[[str, int, int, str, str], tuple[str, float | None, str]]


def make_store(
    path: Path,
    outcome: Outcome,
    sites: int = 40,
    rounds: int = 1,
    networks=("wired",),
    configurations=(("a", "do53"), ("b", "do53")),
    timings: dict | None = None,
) -> Path:
    """A store whose every planned visit is done with the outcome ``outcome`` gives it."""
    store = Store(path)
    site_list = [Site(f"site{i}.test", i + 1, "top" if i < sites // 2 else "tail") for i in range(sites)]
    plan = list(make_plan(site_list, rounds, list(networks), list(configurations), seed=1))
    store.add_study("synthetic", "synthetic", 1, {"study": {}}, plan)
    index = {s.domain: i for i, s in enumerate(site_list)}
    for visit in plan:
        error_class, on_load, paper = outcome(
            visit.network, visit.round, index[visit.site.domain], visit.resolver, visit.protocol
        )
        record = {
            "visit_id": uuid.uuid4().hex,
            "started_at": "2026-01-01T00:00:00Z",
            "error_class": error_class,
            "detail": "",
            "paper_2019": paper,
            "counted": error_class != "Infrastructure Failure",
            "on_load_ms": on_load if error_class == "Successful" else None,
            "har_path": None,
            "wall_s": 3.0,
        }
        store.complete("synthetic", visit, record)
    for block, ((network, resolver, protocol), durations) in enumerate((timings or {}).items()):
        rows = [_timer_record(resolver, protocol, i, d) for i, d in enumerate(durations)]
        store.add_block_timings("synthetic", block, network, len(rows), rows)
    store.close()
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
