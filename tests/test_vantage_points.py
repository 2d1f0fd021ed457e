"""Vantage points without a network: the plan, the study key, the store's columns, the messages, the analysis."""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from contextlib import closing
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from analysis.pairs import load_time_table
from analysis.report import analyze
from analysis.results import load
from analysis.settings import load_settings
from analysis.tables import vantage_point_table
from harness.distributed.broker import check_url, display
from harness.distributed.messages import visit_message, visit_of
from harness.errors import HarnessError
from harness.plan import make_plan
from harness.sitelist import Site
from harness.store import CompletedVisit, Store
from harness.store.records import NetworkBlock, PlanEnd, VisitCounts
from harness.study import load_study
from tests.helpers import study_file
from tests.synthetic import make_store

SITES = [Site(f"s{i}.test", i + 1, "top") for i in range(5)]
CONFIGS = [("near", "do53"), ("near", "doh")]


def test_each_vantage_point_gets_the_same_sequence_one_after_the_other():
    plan = list(make_plan(SITES, 2, ["wired", "4g"], CONFIGS, seed=3, vantage_points=["a", "b"]))
    a = [v for v in plan if v.vantage_point == "a"]
    b = [v for v in plan if v.vantage_point == "b"]
    assert len(a) == len(b) == 2 * 2 * 5 * 2
    assert [v.ordinal for v in plan] == list(range(len(plan)))  # a's part, then b's
    assert [(v.round, v.network, v.site, v.resolver, v.protocol) for v in a] == [
        (v.round, v.network, v.site, v.resolver, v.protocol) for v in b
    ]
    assert max(v.block for v in a) < min(v.block for v in b)  # a block belongs to one vantage point
    single = list(make_plan(SITES, 2, ["wired", "4g"], CONFIGS, seed=3))
    assert [(v.ordinal, v.block, v.site) for v in single] == [(v.ordinal, v.block, v.site) for v in a]
    assert {v.vantage_point for v in single} == {""}


def test_a_vantage_point_added_later_continues_the_ordinals_and_blocks():
    first = list(make_plan(SITES, 1, ["wired"], CONFIGS, seed=3, vantage_points=["a"]))
    added = list(make_plan(SITES, 1, ["wired"], CONFIGS, 3, ["c"], first_ordinal=len(first), first_block=1))
    assert added[0].ordinal == len(first) and {v.block for v in added} == {1}
    assert [v.site for v in added] == [v.site for v in first]


@pytest.mark.parametrize(
    ("value", "message"),
    [('["a", "a"]', "'a' is listed twice"), ('["Frankfurt"]', "should match pattern"), ('["a b"]', "pattern")],
)
def test_bad_vantage_points_are_refused_naming_the_key(tmp_path, value, message):
    path = study_file(tmp_path, changes={"rounds = 1": f"rounds = 1\nvantage_points = {value}"})
    with pytest.raises(HarnessError, match="vantage_points") as error:
        load_study(str(path))
    assert message in str(error.value)


def test_the_single_host_crawl_refuses_a_study_with_vantage_points(tmp_path):
    from harness.crawl import Crawl

    loaded = load_study(str(study_file(tmp_path, changes={"rounds = 1": 'rounds = 1\nvantage_points = ["a", "b"]'})))
    assert loaded.visit_count == 2 * len(loaded.sites) * 2 * 2 * 2
    place = SimpleNamespace(kind="lab")
    with pytest.raises(HarnessError, match="dnsstudy coordinate"):
        Crawl(loaded, None, place, tmp_path)  # type: ignore[arg-type]


def test_the_store_hands_out_each_vantage_point_s_visits_and_blocks(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    plan = list(make_plan(SITES, 1, ["wired"], CONFIGS, seed=1, vantage_points=["a", "b"]))
    store.add_study("s", "s", 1, {"study": {}}, plan)
    assert [v.ordinal for v in store.planned_at("s", "b", 3)] == [10, 11, 12]
    assert store.vantage_points("s") == {"a": VisitCounts(0, 10), "b": VisitCounts(0, 10)}
    assert store.plan_end("s") == PlanEnd(ordinal=20, block=2)
    records = [CompletedVisit(v, _record()) for v in plan if v.vantage_point == "b"]
    store.complete_many("s", records)
    assert store.untimed_blocks("s", "b") == [NetworkBlock(1, "wired")] and store.untimed_blocks("s", "a") == []
    with pytest.raises(HarnessError, match="done before"):  # all or nothing: the fresh one is not recorded either
        store.complete_many("s", [CompletedVisit(plan[0], _record()), CompletedVisit(plan[10], _record())])
    assert store.vantage_points("s") == {"a": VisitCounts(0, 10), "b": VisitCounts(10, 10)}
    store.add_block_timings("s", 1, "wired", 1, [_timing()])
    row = store.db.execute("SELECT vantage_point FROM timings").fetchone()
    assert row == ("b",)


def test_an_older_store_gets_the_vantage_point_columns_as_single_host(tmp_path):
    path = tmp_path / "old.sqlite"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("DROP INDEX visits_place_todo")
    db.execute("ALTER TABLE visits DROP COLUMN vantage_point")  # as a store from before the column
    db.execute("INSERT INTO studies (study_id, name, seed, config) VALUES ('s', 's', 1, '{}')")
    db.execute(
        "INSERT INTO visits (ordinal, study_id, round, block, network, rank, site, site_group, resolver, protocol) "
        "VALUES (0, 's', 0, 0, 'wired', 1, 'x.test', 'top', 'near', 'do53')"
    )
    db.commit()
    db.close()
    visit = Store(path).next_planned("s")
    assert visit is not None and visit.vantage_point == ""


def test_a_visit_survives_the_trip_through_a_message_as_json():
    import json

    visit = next(iter(make_plan(SITES, 1, ["wired"], CONFIGS, seed=1, vantage_points=["a"])))
    message = json.loads(json.dumps(visit_message("s", {"name": "s"}, visit)))
    assert visit_of(message) == visit and message["digest"]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis://127.0.0.1:6380/0", "no password"),
        ("amqp://:pw@127.0.0.1/", "scheme"),
        ("redis://:pw@/0", "no host"),
    ],
)
def test_a_broker_url_without_a_password_or_with_another_scheme_is_one_line(url, message):
    with pytest.raises(HarnessError, match=message):
        check_url(url)


def test_a_broker_url_is_shown_without_its_password():
    assert display("rediss://:s3cret@broker.example:6380/0") == "rediss://:***@broker.example:6380/0"
    assert display("redis://:p%40ss@h:1/0?ssl_ca_certs=/x") == "redis://:***@h:1/0"  # escaped, and the query too
    assert check_url("rediss://:s3cret@broker.example:6380/0").startswith("rediss://")


def _slow_b(network, round_, site, resolver, protocol):
    return "Successful", 1000.0 + 10 * site + (50 if protocol == "doh" else 0), "Successful"


def test_the_analysis_compares_configurations_per_vantage_point(tmp_path):
    store = make_store(
        tmp_path / "vp.sqlite",
        _slow_b,
        sites=12,
        configurations=CONFIGS,
        vantage_points={"a": 0.0, "b": 500.0},
    )
    results = load(store)
    table = vantage_point_table(results.visits, load_settings())
    assert list(table["a visits"]) == [12, 12] and list(table["b visits"]) == [12, 12]
    difference = table["b median onLoad ms"] - table["a median onLoad ms"]
    assert list(difference) == [500.0, 500.0]
    pairs = load_time_table(results.visits, "wired")
    assert len(pairs) == 24  # 12 sites at each vantage point: a pair never joins two vantage points
    report = analyze([store], tmp_path / "report")
    names = {Path(p).name for p in report.figures + report.tables}
    assert {"grid-wired-a.png", "grid-wired-b.png", "vantage-points.csv"} <= names
    assert "Vantage points" in report.html.read_text()


def test_with_two_browser_lives_the_vantage_points_table_and_grids_keep_each_life_apart(tmp_path):
    fresh = make_store(tmp_path / "fresh.sqlite", _slow_b, sites=12, configurations=CONFIGS,
                       vantage_points={"a": 0.0, "b": 500.0})  # fmt: skip
    reused = tmp_path / "reused.sqlite"
    reused.write_bytes(fresh.read_bytes())
    with closing(sqlite3.connect(reused)) as db, db:  # the same visits as if by reused browsers, 300 ms faster
        db.execute("UPDATE visits SET browser_session = 'reused warm-started', on_load_ms = on_load_ms - 300")
    visits = load([fresh, reused]).visits
    table = vantage_point_table(visits, load_settings())
    assert Counter(table["browser life"]) == {"fresh": 2, "reused warm-started": 2}
    assert list(table["a visits"]) == [12] * 4  # one life's visits in a row, not both lives'
    by_life = table.set_index(["protocol", "browser life"])
    gap = by_life["a median onLoad ms"].xs("fresh", level=1) - by_life["a median onLoad ms"].xs(
        "reused warm-started", level=1
    )
    assert list(gap) == [300.0, 300.0]
    report = analyze([fresh, reused], tmp_path / "report")
    names = {Path(p).name for p in report.figures + report.tables}
    for life in ("fresh", "reused warm-started"):
        assert {f"grid-wired-a-{life}.png", f"pairs-wired-b-{life}.csv"} <= names
        pairs = pd.read_csv(report.out / "tables" / f"pairs-wired-a-{life}.csv")
        assert set(pairs["sites"]) == {12}  # each site once: its pairs in this life only
    assert not {"grid-wired-a.png", "pairs-wired-b.csv"} & names  # no vantage point's grid pools the lives


def test_a_single_host_report_has_no_vantage_point_section(tmp_path):
    store = make_store(tmp_path / "one.sqlite", _slow_b, sites=8, configurations=CONFIGS)
    report = analyze([store], tmp_path / "report")
    assert "Vantage points" not in report.html.read_text()
    assert Counter(load(store).visits["vantage_point"].astype(str)) == {"": 16}


def _record() -> dict:
    import uuid

    return {
        "visit_id": uuid.uuid4().hex,
        "started_at": "2026-01-01T00:00:00Z",
        "error_class": "Successful",
        "detail": "",
        "paper_2019": "Successful",
        "counted": True,
        "on_load_ms": 1000.0,
        "har_path": None,
    }


def _timing() -> dict:
    return {
        "resolver": "near",
        "protocol": "do53",
        "name": "x.test",
        "type": "A",
        "start": 0.0,
        "duration_us": 1000,
        "status": "ok",
    }


def test_a_worker_warns_when_its_host_runs_more_workers_than_measured_safe(tmp_path):
    from harness.distributed.capacity import WORKER_DOING, capacity_warning, record_capacity, running_workers
    from harness.lock import FileLock

    locks, capacity = tmp_path / "locks", tmp_path / "capacity.json"
    held = [FileLock(locks / f"w{i}.lock", f"lab w{i}", f"{WORKER_DOING} w{i}") for i in range(2)]
    crawl = FileLock(locks / "c.lock", "lab c", "crawled")
    gone = FileLock(locks / "gone.lock", "lab g", f"{WORKER_DOING} g")
    for lock in [*held, crawl, gone]:
        lock.acquire()
    assert gone.fd is not None
    os.close(gone.fd)  # its holder died: the record stays, the flock is gone
    assert running_workers(locks) == 2  # the crawl is not a worker; the dead worker's record is stale
    warning = capacity_warning(locks, capacity)
    assert warning is not None and "never measured" in warning
    record_capacity(1, {"workers": 2}, capacity)
    warning = capacity_warning(locks, capacity)
    assert warning is not None and "more than the 1 measured safe" in warning
    record_capacity(2, {"workers": 2}, capacity)
    assert capacity_warning(locks, capacity) is None
    for lock in [*held, crawl]:
        lock.release()


def test_a_result_is_recorded_only_for_its_own_visit_and_a_har_name_is_a_name():
    from harness.distributed.messages import HAR_NAME, matches, visit_task_id

    one, two = list(make_plan(SITES, 1, ["wired"], CONFIGS, seed=1, vantage_points=["a"]))[:2]
    record = {"url": one.url, "resolver": one.resolver, "protocol": one.protocol, "vantage_point": "a"}
    assert matches(one, record) and not matches(two, {**record, "url": "https://other.test/"})
    assert not matches(one, {**record, "vantage_point": "b"})
    assert HAR_NAME.match("0123abcd" * 4 + ".har.gz")
    assert not any(HAR_NAME.match(n) for n in (".store", "../x.har.gz", "x/../../etc.har", "a.har.gz.part"))
    assert visit_task_id("p1", "s", one) != visit_task_id("p2", "s", one)  # another store's tasks are not ours


@pytest.mark.parametrize("kind", ["lab", "internet"])
def test_worker_up_brings_a_lab_up_and_refuses_an_internet_side(monkeypatch, kind):
    from click.testing import CliRunner

    from harness.cli import main
    from harness.internet.config import internet_config
    from harness.internet.side import InternetSide
    from harness.lab.lab import Lab

    ran: list[str] = []

    def run_worker(*args: object) -> int:
        ran.append("worker")
        return 0

    monkeypatch.setattr(Lab, "up", lambda self: True)  # a lab that was down and is now up
    monkeypatch.setattr("harness.distributed.worker.run_worker", run_worker)
    argv = ["worker", "--vantage", "v", "--broker", "redis://:pw@127.0.0.1:1/0", "--up", "--prefix", "dsup"]
    if kind == "internet":
        side = InternetSide(internet_config("dsup", "eth0"))
        monkeypatch.setattr("harness.cli.distributed.place_from", lambda *args: side)
        argv += ["--internet", "dsup"]
    result = CliRunner().invoke(main, argv)
    if kind == "lab":
        assert result.exit_code == 0 and "lab 'dsup' is up" in result.output and ran == ["worker"]
    else:
        assert result.exit_code == 2 and ran == []
        assert "worker --up brings up a lab; an Internet side needs 'dnsstudy internet up' first" in result.output
