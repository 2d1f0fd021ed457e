"""The crawl plan (deterministic, randomized as the reference study) and the store (atomic, resumable)."""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.plan import Site, make_plan
from harness.store import SCHEMA_VERSION, Store, disk_full
from harness.store.records import VisitCounts

SITES = [Site(f"site{i}.test", i + 1, "top" if i < 6 else "tail") for i in range(10)]
# By path, not `-m tests.store_worker`: the tranco package installs a top-level `tests` package.
WORKER = [sys.executable, str(Path(__file__).with_name("store_worker.py"))]
NETWORKS = ["wired", "4g", "3g"]
CONFIGURATIONS = [(r, p) for r in ("near", "far") for p in ("do53", "dot", "doh")]


def plan(seed: int = 1, rounds: int = 2):
    return list(make_plan(SITES, rounds, NETWORKS, CONFIGURATIONS, seed))


def test_the_plan_has_every_visit_once_in_network_blocks():
    visits = plan()
    assert len(visits) == 2 * 3 * 10 * 6 and [v.ordinal for v in visits] == list(range(len(visits)))
    keys = Counter((v.round, v.network, v.site.domain, v.resolver, v.protocol) for v in visits)
    assert set(keys.values()) == {1}
    # Each block is one network, and a round visits each network in exactly one block.
    blocks: dict[int, set[tuple[int, str]]] = {}
    for v in visits:
        blocks.setdefault(v.block, set()).add((v.round, v.network))
    assert all(len(b) == 1 for b in blocks.values()) and len(blocks) == 2 * 3


def test_the_plan_is_random_but_the_same_for_the_same_seed():
    assert plan(1) == plan(1)
    assert [v.site for v in plan(1)] != [v.site for v in plan(2)]
    visits = plan(1)
    # Sites are shuffled per block and configurations per site.
    first_sites = [next(v.site for v in visits if v.block == b) for b in range(6)]
    assert len(set(first_sites)) > 1
    per_site = [tuple((v.resolver, v.protocol) for v in visits[i : i + 6]) for i in range(0, 60, 6)]
    assert len(set(per_site)) > 1


def test_reused_browsers_run_apart_within_each_block_and_a_mixed_plan_is_as_before():
    browsers = ("firefox", "chromium")
    mixed = list(make_plan(SITES, 2, NETWORKS, CONFIGURATIONS, 1, browsers=browsers))
    apart = list(make_plan(SITES, 2, NETWORKS, CONFIGURATIONS, 1, browsers=browsers, browsers_apart=True))
    key = lambda v: (v.round, v.block, v.network, v.site.domain, v.browser, v.resolver, v.protocol)  # noqa: E731
    assert sorted(map(key, apart)) == sorted(map(key, mixed)) and len(set(map(key, apart))) == len(apart)
    assert [v.ordinal for v in apart] == list(range(len(apart)))
    switches = [b for b in range(6) if len({v.browser for v in mixed if v.block == b}) > 1]
    assert switches  # shuffled together, the browsers alternate within blocks
    runs = {b: [v.browser for v in apart if v.block == b] for b in range(6)}
    # Apart: each block is one browser's visits, then the other's (one switch a block), their order drawn anew.
    assert all(sum(x != y for x, y in zip(r, r[1:], strict=False)) == 1 for r in runs.values())
    assert len({r[0] for r in runs.values()}) == 2
    # Within a browser's part, sites and configurations are shuffled as in any plan.
    part = [v for v in apart if v.block == 0 and v.browser == runs[0][0]]
    assert len({tuple((v.resolver, v.protocol) for v in part[i : i + 6]) for i in range(0, 60, 6)}) > 1
    # One browser, or browsers shuffled together: the plan of before (a resumed store's plan is its own anyway).
    assert list(make_plan(SITES, 2, NETWORKS, CONFIGURATIONS, 1, browsers_apart=True)) == plan(1)


def test_a_reused_browser_s_part_of_a_block_runs_its_launch_groups_in_turn_each_over_every_site():
    group = lambda b, r, p: "" if b == "firefox" else (f"{p} {r}" if p != "dot" else "stub")  # noqa: E731
    browsers = ("firefox", "chromium")
    apart = list(
        make_plan(SITES, 1, NETWORKS, CONFIGURATIONS, 1, browsers=browsers, browsers_apart=True, launch_group=group)
    )
    assert len(apart) == len(set((v.block, v.site, v.browser, v.resolver, v.protocol) for v in apart)) == 3 * 10 * 12
    for block in range(3):
        visits = [v for v in apart if v.block == block]
        runs = [(v.browser, group(v.browser, v.resolver, v.protocol)) for v in visits]
        changes = [a for a, b in zip(runs, runs[1:], strict=False) if a != b]
        # Chromium's 5 groups (do53 and doh per resolver, the stub) and Firefox's one, each run once, in turn.
        assert len(changes) == 5 and len(set(runs)) == 6
        for key in set(runs):  # each group visits every site with each of its configurations once
            mine = [v for v, k in zip(visits, runs, strict=True) if k == key]
            assert len(mine) == 10 * len({(v.resolver, v.protocol) for v in mine})
    # The groups' order is drawn per block; without groups a reused browser's part is as before.
    orders = {
        tuple(dict.fromkeys((v.browser, group(v.browser, v.resolver, v.protocol)) for v in apart if v.block == b))
        for b in range(3)
    }
    assert len(orders) > 1
    assert list(make_plan(SITES, 2, NETWORKS, CONFIGURATIONS, 1, browsers_apart=True, launch_group=group)) == plan(1)


def test_the_store_takes_the_plan_and_hands_out_visits_in_order(tmp_path):
    store = Store(tmp_path / "crawl.sqlite")
    store.add_study("s1", "test", 1, {"rounds": 2})
    assert store.add_plan("s1", plan()) == 360
    first = store.next_planned("s1")
    assert first is not None and first == plan()[0]
    har = tmp_path / "a.har.gz"
    har.write_bytes(b"x")
    record = {
        "visit_id": "v1",
        "started_at": "t",
        "error_class": "Successful",
        "detail": "",
        "paper_2019": "Successful",
        "counted": True,
        "on_load_ms": 812.5,
        "har_path": str(har),
    }
    store.complete("s1", first, record)
    assert store.next_planned("s1") == plan()[1] and store.progress("s1") == VisitCounts(done=1, total=360)
    with pytest.raises(HarnessError, match="was done before"):
        store.complete("s1", first, {**record, "visit_id": "v2"})
    with pytest.raises(HarnessError, match="HAR .* is missing"):
        store.complete("s1", plan()[1], {**record, "visit_id": "v3", "har_path": str(tmp_path / "gone.har.gz")})
    assert store.progress("s1") == VisitCounts(done=1, total=360)  # the refused visit left no trace
    store.close()
    again = Store(tmp_path / "crawl.sqlite")
    assert again.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert again.next_planned("s1") == plan()[1]


def test_a_store_of_another_version_or_not_a_store_is_refused(tmp_path):
    path = tmp_path / "old.sqlite"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with pytest.raises(HarnessError, match=f"schema version 0, this dnsstudy reads {SCHEMA_VERSION}"):
        Store(path)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(HarnessError, match="not a dnsstudy store"):
        Store(junk)


def test_killed_at_random_moments_the_crawl_loses_and_repeats_nothing(tmp_path):
    path, hars = tmp_path / "crawl.sqlite", tmp_path / "hars"
    store = Store(path)
    store.add_study("s1", "test", 7, {})
    planned = store.add_plan("s1", make_plan(SITES, 100, NETWORKS, CONFIGURATIONS, 7))
    store.close()
    rng = random.Random(2019)
    kills = 0
    for _ in range(60):
        worker = subprocess.Popen(WORKER + [str(path), "s1", str(hars)], cwd=os.getcwd())
        try:
            worker.wait(timeout=rng.uniform(0.15, 0.5))
            break  # finished the plan
        except subprocess.TimeoutExpired:
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait()
            kills += 1
    else:
        subprocess.run(WORKER + [str(path), "s1", str(hars)], check=True, timeout=120)
    assert kills >= 3, "the worker finished before it could be killed: make the plan larger"
    store = Store(path)
    rows = store.db.execute("SELECT ordinal, status, visit_id, har_path FROM visits ORDER BY ordinal").fetchall()
    assert len(rows) == planned and all(status == "done" for _, status, _, _ in rows)
    assert len({visit_id for _, _, visit_id, _ in rows}) == planned  # each visit recorded exactly once
    assert all(os.path.exists(har) for _, _, _, har in rows)
    # A visit killed after writing its HAR but before its record leaves an orphan file, never a record.
    orphans = {str(p) for p in hars.glob("*.har.gz")} - store.referenced_hars()
    assert len(orphans) <= kills
    assert not list(hars.glob("*.part")) or kills  # a half-written HAR only as a .part, never under its name


def _done_with_har(store: Store, har_path: str) -> None:
    """A study of one planned visit, done, whose record names ``har_path``."""
    store.add_study("s1", "test", 1, {}, plan()[:1])
    record = {
        "visit_id": "v1",
        "started_at": "t",
        "error_class": "Successful",
        "detail": "",
        "paper_2019": "Successful",
        "counted": True,
        "on_load_ms": 1.0,
        "har_path": har_path,
    }
    # `complete` wants the HAR in place; a store from before meta.results_dir may name it relatively.
    store.db.execute(
        "UPDATE visits SET status = 'done', visit_id = 'v1', har_path = ?, record = ? WHERE ordinal = 0",
        (har_path, json.dumps(record)),
    )


def test_a_store_records_its_results_dir_and_refuses_another_until_told_it_moved(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    store = Store(first / "store.sqlite")
    assert store.adopt_results_dir(first) == 0 and store.results_dir() == first
    _done_with_har(store, str(first / "hars" / "v1.har.gz"))
    with pytest.raises(HarnessError, match=r"holds the HARs of .*first, not of .*second: .* --moved") as refused:
        store.adopt_results_dir(second)
    assert "\n" not in str(refused.value)
    assert store.adopt_results_dir(second, moved=True) == 1
    har, record = store.db.execute("SELECT har_path, json_extract(record, '$.har_path') FROM visits").fetchone()
    assert har == record == str(second / "hars" / "v1.har.gz") and store.results_dir() == second


def test_an_older_store_s_relative_har_paths_are_made_absolute_and_foreign_ones_refused(tmp_path):
    store = Store(tmp_path / "old" / "store.sqlite")
    _done_with_har(store, "results/old/hars/v1.har.gz")  # a crawl once given a relative --store
    assert store.adopt_results_dir(tmp_path / "old") == 1
    assert store.referenced_hars() == {str(tmp_path / "old" / "hars" / "v1.har.gz")}
    other = Store(tmp_path / "copy" / "store.sqlite")
    _done_with_har(other, str(tmp_path / "old" / "hars" / "v1.har.gz"))
    with pytest.raises(HarnessError, match="holds HARs in .*old/hars, not in .*copy/hars"):
        other.adopt_results_dir(tmp_path / "copy")


def test_an_older_store_gets_the_har_problems_column_when_opened(tmp_path):
    path = tmp_path / "store.sqlite"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE blocks DROP COLUMN har_problems")  # as stores were before the column
    db.close()
    store = Store(path)
    store.add_study("s1", "test", 1, {})
    store.add_block_timings("s1", 0, "wired", 3, [], None, ["/r/hars/a.har.gz: no such HAR file or directory"])
    row = store.db.execute("SELECT hostnames, har_problems FROM blocks").fetchone()
    assert row == (3, '["/r/hars/a.har.gz: no such HAR file or directory"]')


def test_disk_full_is_told_apart_from_other_failures(tmp_path):
    assert disk_full(OSError(errno.ENOSPC, "full"), tmp_path / "s") and disk_full(OSError(errno.EDQUOT, "q"), tmp_path)
    assert not disk_full(OSError(errno.EACCES, "denied"), tmp_path / "s")
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = 13  # SQLITE_FULL, as SQLite sets it
    assert disk_full(full, tmp_path / "s") and not disk_full(sqlite3.OperationalError("no such table"), tmp_path)
