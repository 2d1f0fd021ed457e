"""`benchmarks/crawl_budget.py`: a crawl's time split from a store of the real schema."""

from __future__ import annotations

import json
import sqlite3

import pytest

from benchmarks.crawl_budget import Block, needed, read_blocks, report
from harness.store import Store


def _visit(
    db, ordinal: int, block: int, network: str, started: str, on_load_ms: float, wall_s: float, phases: dict, study="s"
):
    db.execute(
        "INSERT INTO visits (ordinal, study_id, round, block, network, rank, site, site_group, resolver, protocol, "
        "status, started_at, on_load_ms, record) VALUES (?, ?, 0, ?, ?, 1, 'a.example', 'top', 'near', 'do53', "
        "'done', ?, ?, ?)",
        (ordinal, study, block, network, started, on_load_ms, json.dumps({"wall_s": wall_s, "phases": phases})),
    )


def test_a_crawl_s_time_is_split_into_page_loads_starts_harness_link_and_timer(tmp_path):
    path = tmp_path / "store.sqlite"
    store = Store(path)
    store.add_study("s", "test", 1, {})
    store.close()
    db = sqlite3.connect(path)
    start = {"profile": 0.1, "browser_start": 1.0, "warm_start": 0.5}
    _visit(db, 0, 0, "3g", "2026-11-29T10:00:00.000+00:00", 3000, 5.0, start)
    _visit(db, 1, 0, "3g", "2026-11-29T10:00:05.000+00:00", 2000, 2.5, {"clear": 0.2})
    _visit(db, 2, 1, "wired", "2026-11-29T10:00:20.000+00:00", 500, 2.6, start)
    t0 = 1795946400.0  # 2026-11-29T10:00:00Z
    for block, begin, end in ((0, t0 + 8, t0 + 15), (1, t0 + 23, t0 + 24)):
        db.execute(
            "INSERT INTO timings (study_id, block, network, resolver, protocol, name, type, start, duration_us, "
            "new_connection, status, record) VALUES ('s', ?, 'n', 'near', 'do53', 'a', 'A', ?, ?, 0, 'ok', '{}')",
            (block, begin, int((end - begin) * 1e6)),
        )
    db.commit()
    db.close()

    first, second = read_blocks(str(path))
    assert (first.network, first.visits, first.starts) == ("3g", 2, 1)
    assert (first.on_load, first.start_s, round(first.other_s, 6)) == (5.0, 1.6, 0.9)
    assert first.link_s is None and first.timer_s == 7.0
    assert second.link_s == 5.0 and second.timer_s == 1.0  # the first block's timer ended at +15 s, this began at +20
    # the timer began 8 s and 3 s after the blocks' first visits, whose walls were 7.5 and 2.6 s
    assert (round(first.between_s, 6), round(second.between_s, 6)) == (0.5, 0.4)
    lines = report([first, second], analysis_s=30)
    assert lines[-1].startswith("floor, no harness time at all (onLoads, link checks, timers, analysis): 0.81 min")
    per_visit = "harness time per visit, starts and between visits included: 1.833 s"  # (3.2 + 1.4 + 0.9) s / 3
    assert lines[-1].endswith(per_visit)


def test_a_store_of_two_crawls_is_read_one_crawl_at_a_time(tmp_path):
    path = tmp_path / "store.sqlite"
    store = Store(path)
    store.add_study("s", "test", 1, {})
    store.add_study("t", "test", 1, {})
    store.close()
    db = sqlite3.connect(path)
    _visit(db, 0, 0, "wired", "2026-11-29T10:00:00.000+00:00", 500, 1.0, {})
    _visit(db, 0, 0, "3g", "2026-11-29T10:00:00.000+00:00", 3000, 4.0, {}, study="t")
    db.commit()
    db.close()
    with pytest.raises(SystemExit, match=r"name one crawl with --study and --place \(it holds s@here, t@here\)"):
        read_blocks(str(path))
    assert [b.network for b in read_blocks(str(path), study="t")] == ["3g"]


def test_a_rate_of_visits_an_hour_is_judged_by_the_harness_time_a_visit_it_leaves():
    # 32 visits at 4,096 an hour: 28.125 s; less 14.8 s of onLoads, 0.9 s between visits and the starts.
    b = Block("wired", visits=32, starts=6, on_load=14.8, start_s=9.0, other_s=13.9, between_s=0.9)
    assert needed(b, 4096).endswith(
        "6 starts 9.0 s, between visits 0.9 s: leaves 0.107 s of harness time a visit (as run 0.434 s)"
    )
    assert "2 starts 3.0 s, between visits 0.9 s: leaves 0.295 s" in needed(b, 4096, starts=2)  # at the mean start
    assert "leaves -0." in needed(b, 8000)  # 14.4 s: the onLoads alone exceed it
