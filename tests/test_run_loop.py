"""The run loop's bookkeeping without a lab (fast): plan, resume, retries, stops and halts, over tests/fakes.py.

Each run is what a new process would do: a new Store, a new Crawl (or
Coordinator) and a new visitor over the same results directory. The lab
tests (tests/test_crawl.py, tests/test_durability.py, tests/test_distributed.py)
do the same with real processes, browsers, daemons and Redis; these check
the bookkeeping at every visit, in seconds. The coordinator's broker is
`FakeBroker`, its workers `FakeWorker`s.
"""

from __future__ import annotations

import io
import json
import signal
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from harness import lock
from harness.crawl import Crawl, CrawlSummary
from harness.distributed import coordinator
from harness.distributed.coordinator import Coordinator, CoordinatorSummary, complete_visits
from harness.distributed.messages import visit_message
from harness.errors import HarnessError
from harness.plan import PlannedVisit
from harness.station import CrawlHalted
from harness.store import Store
from harness.store.records import VisitCounts
from harness.study import load_study
from harness.study_run import DiskFull
from tests.fakes import FakeBroker, FakePlace, FakeStation, FakeVisitor, FakeWorker
from tests.helpers import study_file

VISITS = 16  # tests/helpers.py's study: 2 sites x 2 resolvers x 2 protocols x 2 networks, in 2 blocks
FAULTS = {"[link_check]": '[[faults]]\nname = "drop:dot"\nresolver = "near"\n\n[link_check]'}


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakePlace:
    monkeypatch.setattr(lock, "LOCK_DIR", tmp_path / "locks")  # not the host's /run/dnsstudy/locks
    monkeypatch.setenv("DNSSTUDY_PROGRESS_INTERVAL", "0")  # no progress thread
    return FakePlace("dsfake", tmp_path / "run")


@dataclass
class Run:
    """One run's crawl, visitor, output and how it ended (its summary, or what it raised)."""

    crawl: Crawl | None  # None: refused as it was made
    visitor: FakeVisitor
    out: io.StringIO
    summary: CrawlSummary | None = None
    error: BaseException | None = None

    @property
    def output(self) -> str:
        return self.out.getvalue()

    @property
    def station(self) -> FakeStation:
        assert self.crawl is not None and isinstance(self.crawl.station, FakeStation)
        return self.crawl.station


class Runs:
    """Runs of one study into one store, each as a new process would make it."""

    def __init__(self, tmp_path: Path, place: FakePlace, changes: dict[str, str] | None = None):
        self.study = study_file(tmp_path, changes=changes)
        self.store = tmp_path / "results" / "store.sqlite"
        self.place = place
        self.plan = load_study(str(self.study)).plan()

    def run(self, script: dict[int, str] | None = None) -> Run:
        """A crawl to its end; a KeyboardInterrupt or a HarnessError it raises is kept in the Run."""
        out = io.StringIO()
        store = Store(self.store)
        visitor = FakeVisitor(self.place, self.store.parent, script)
        crawl = None
        try:
            crawl = Crawl(
                load_study(str(self.study)),
                store,
                self.place,
                self.store.parent,
                console=Console(file=out, width=400),
                station_type=FakeStation,
            )
            return Run(crawl, visitor, out, summary=crawl.run(visitor))
        except (KeyboardInterrupt, HarnessError) as exc:
            return Run(crawl, visitor, out, error=exc)
        finally:
            store.close()

    def done(self) -> int:
        return self.db().execute("SELECT COUNT(*) FROM visits WHERE status = 'done'").fetchone()[0]

    def db(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.store}?mode=ro", uri=True)

    def ending(self) -> str:
        return self.db().execute("SELECT ending FROM crawler").fetchone()[0]

    def assert_complete(self) -> None:
        """Every planned visit recorded exactly once with its HAR, every block timed, no orphan HAR left."""
        rows = self.db().execute("SELECT ordinal, status, visit_id, har_path FROM visits ORDER BY ordinal").fetchall()
        assert [r[0] for r in rows] == [v.ordinal for v in self.plan]
        assert all(r[1] == "done" for r in rows)
        assert len({r[2] for r in rows}) == len(rows)
        hars = {r[3] for r in rows}
        assert all(Path(h).exists() for h in hars)
        on_disk = {str(p) for p in (self.store.parent / "hars").iterdir() if p.name != ".store"}
        assert on_disk == hars
        assert self.db().execute("SELECT block FROM blocks ORDER BY block").fetchall() == [(0,), (1,)]


def visited(visits: list[PlannedVisit]) -> list[tuple[str, str, str, str]]:
    """What a visitor is asked to visit for ``visits``, in order."""
    return [(v.url, v.resolver, v.protocol, v.network) for v in visits]


def test_a_crawl_visits_its_plan_once_in_order_times_every_block_and_a_second_run_does_nothing(tmp_path, place):
    runs = Runs(tmp_path, place)
    first = runs.run()
    assert first.error is None and first.summary is not None
    assert first.visitor.calls == visited(runs.plan)
    assert (first.summary.visits, first.summary.done, first.summary.total) == (VISITS, VISITS, VISITS)
    assert first.summary.finished and not first.summary.stopped and first.summary.blocks_timed == 2
    assert first.station.timed == [0, 1] and first.station.cleaned_up == 1
    assert sorted(first.station.fake_shaper.applied) == ["4g", "wired"]  # shaped once per block
    runs.assert_complete()
    assert runs.ending() == "finished"
    assert f"new store {runs.store}: {VISITS} visits planned" in first.output
    assert f"study crawltest: 0 of {VISITS} visits done" in first.output

    again = runs.run()
    assert again.visitor.calls == [] and again.summary is not None and again.summary.visits == 0
    assert again.summary.finished and again.station.timed == []
    runs.assert_complete()


def test_the_closing_lines_say_what_was_done_and_how_to_resume(tmp_path, place):
    runs = Runs(tmp_path, place)
    stopped = runs.run({3: "sigterm"})
    assert stopped.summary is not None
    console = Console(file=io.StringIO(), width=400)
    stopped.summary.print_closing(console, runs.store)
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines[0].startswith("3 visits recorded in 0.0 min (0 retried, 0 infrastructure failures); 3 of 16 done")
    assert "; visits per hour by network: " in lines[0]
    assert lines[1:] == [f"store: {runs.store}  (run the same command again to resume)"]


@pytest.mark.parametrize("n", range(1, VISITS + 1))
def test_a_second_ctrl_c_at_any_visit_loses_and_repeats_nothing(tmp_path, place, n):
    """A KeyboardInterrupt (the second Ctrl-C) inside visit N: N - 1 recorded, N's HAR an orphan removed on resume."""
    runs = Runs(tmp_path, place, FAULTS)
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    interrupted = runs.run({n: "interrupt"})
    assert isinstance(interrupted.error, KeyboardInterrupt)
    assert runs.done() == n - 1 and runs.ending() == "stopped at once by a second Ctrl-C"
    assert place.faults == [] and place.faults_cleared == 1  # the study's lab fault undone however the crawl ended
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers  # given back

    resumed = runs.run()
    assert resumed.error is None and resumed.summary is not None and resumed.summary.finished
    assert resumed.visitor.calls == visited(runs.plan[n - 1 :])  # from the visit that was interrupted
    assert "removed 1 files interrupted visits left in" in resumed.output
    runs.assert_complete()


@pytest.mark.parametrize("how", ["sigint", "sigterm"])
@pytest.mark.parametrize("n", [1, 7, 8, 9, VISITS])
def test_a_signal_stops_after_the_visit_and_the_crawl_resumes_at_the_next(tmp_path, place, how, n):
    runs = Runs(tmp_path, place)
    stopped = runs.run({n: how})
    assert stopped.error is None and stopped.summary is not None
    assert "stopping after the current visit (Ctrl-C again to stop now)" in stopped.output
    assert stopped.visitor.calls == visited(runs.plan[:n]) and runs.done() == n
    assert stopped.summary.stopped == (n < VISITS) and stopped.summary.finished == (n == VISITS)
    assert runs.ending() == "stopped by a signal"
    # A stop at a block's last visit leaves the block untimed (also the plan's last: the plan is done, the crawl
    # counts as finished): the next run times it before any visit.
    assert stopped.station.timed == ([0] if n > 8 else [])

    resumed = runs.run()
    assert resumed.visitor.calls == visited(runs.plan[n:])
    assert resumed.station.timed == ([0] if n <= 8 else []) + [1]
    runs.assert_complete()


def test_stopped_again_and_again_the_crawl_still_records_every_visit_once(tmp_path, place):
    runs = Runs(tmp_path, place)
    for script in ({2: "sigterm"}, {1: "interrupt"}, {4: "sigint"}, {3: "interrupt"}, {}, {}):
        runs.run(script)
    runs.assert_complete()


def test_harness_failures_are_retried_up_to_the_bound_then_recorded_as_infrastructure_failures(tmp_path, place):
    """The study's bound is 2: a visit failing once is retried and recorded; one failing 3 times is recorded as
    an Infrastructure Failure, not counted. The retried attempts' HARs are discarded."""
    runs = Runs(tmp_path, place)
    run = runs.run({2: "harness", 5: "harness", 6: "harness", 7: "harness"})
    assert run.summary is not None and run.summary.finished
    assert (run.summary.retried, run.summary.infrastructure) == (3, 1)
    assert len(run.visitor.calls) == VISITS + 3
    assert run.visitor.calls[1:3] == visited(runs.plan[1:2]) * 2
    assert run.visitor.calls[4:7] == visited(runs.plan[3:4]) * 3
    rows = runs.db().execute("SELECT ordinal, attempts, error_class, counted, record FROM visits").fetchall()
    by_ordinal = {r[0]: r for r in rows}
    assert by_ordinal[1][1:4] == (1, "Successful", 1)
    assert by_ordinal[3][1:4] == (2, "Infrastructure Failure", 0)
    retried = json.loads(by_ordinal[3][4])["retried"]
    assert [r["error_class"] for r in retried] == ["Infrastructure Failure"] * 2
    assert sum(r[1] for r in rows) == 3
    runs.assert_complete()  # no HAR of a retried attempt left


def test_a_full_disk_halts_in_one_line_with_the_visit_planned_and_the_crawl_resumes(tmp_path, place):
    runs = Runs(tmp_path, place, FAULTS)
    full = runs.run({5: "disk full"})
    assert isinstance(full.error, DiskFull)
    har = full.visitor.results_dir / "hars"
    assert str(full.error).startswith(f"disk full at {har}/")
    assert str(full.error).endswith(": 12 visits still planned; free space and run the same command to resume")
    assert runs.done() == 4 and runs.ending() == f"halted: {full.error}"
    assert place.faults == [] and place.faults_cleared == 1
    resumed = runs.run()
    assert resumed.visitor.calls == visited(runs.plan[4:])
    runs.assert_complete()


def test_a_full_disk_at_the_commit_leaves_the_har_to_the_next_run(tmp_path, place, monkeypatch):
    """SQLite's 'database or disk is full' as the record is committed: a DiskFull; the HAR, never recorded,
    is an orphan the next run removes before it visits again."""
    runs = Runs(tmp_path, place)
    complete = Store.complete
    calls = {"n": 0}

    def fill_at_the_third(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            error = sqlite3.OperationalError("database or disk is full")
            error.sqlite_errorcode = sqlite3.SQLITE_FULL
            raise error
        return complete(self, *args, **kwargs)

    monkeypatch.setattr(Store, "complete", fill_at_the_third)
    full = runs.run()
    assert isinstance(full.error, DiskFull) and runs.done() == 2
    assert (
        str(full.error)
        == f"disk full at {runs.store}: 14 visits still planned; free space and run the same command to resume"
    )
    monkeypatch.setattr(Store, "complete", complete)
    resumed = runs.run()
    assert "removed 1 files interrupted visits left in" in resumed.output
    assert resumed.visitor.calls == visited(runs.plan[2:])
    runs.assert_complete()


def test_a_place_that_dies_halts_the_crawl_with_the_visit_planned_and_it_resumes_once_up(tmp_path, place):
    runs = Runs(tmp_path, place)
    halted = runs.run({3: "dead"})
    assert isinstance(halted.error, CrawlHalted) and not isinstance(halted.error, DiskFull)
    assert "daemons died (unbound-near)" in str(halted.error) and "visit 2 still planned" in str(halted.error)
    assert runs.done() == 2 and runs.ending().startswith("halted: ")
    refused = runs.run()  # still dead: refused before anything runs
    assert isinstance(refused.error, HarnessError) and "not up and healthy" in str(refused.error)
    place.dead = []
    resumed = runs.run()
    assert resumed.visitor.calls == visited(runs.plan[2:])
    runs.assert_complete()


def test_a_store_holding_the_study_with_another_configuration_is_refused_as_it_is(tmp_path, place):
    runs = Runs(tmp_path, place)
    runs.run({3: "sigterm"})
    other = Runs(tmp_path, place, {"seed = 5": "seed = 6"})
    refused = other.run()
    assert isinstance(refused.error, HarnessError)
    assert f"{runs.store} holds study 'crawltest' with another configuration (differs in: seed); " in str(refused.error)
    assert str(refused.error).endswith("give the crawl another --store")
    assert refused.visitor.calls == [] and runs.done() == 3


# -- the coordinator, over a fake broker ---------------------------------------------------------------------

URL = "redis://:secret@127.0.0.1:6399/0"
PER_POINT = VISITS  # each vantage point runs the whole study: 16 visits in 2 blocks


class Coordinations:
    """Coordinator runs of one study at vantage points a and b, through one broker that outlives them."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scripts: dict[str, dict[int, str]]):
        self.tmp, self.monkeypatch = tmp_path, monkeypatch
        self.study = self.study_file(["a", "b"])
        self.store = tmp_path / "results" / "store.sqlite"
        self.plan = load_study(str(self.study)).plan()
        self.places = {vp: FakePlace(f"dsf{vp}", tmp_path / f"run-{vp}") for vp in ("a", "b")}
        workers = {vp: FakeWorker(vp, p, tmp_path / f"worker-{vp}", scripts.get(vp)) for vp, p in self.places.items()}
        self.broker = FakeBroker(dict(workers))
        monkeypatch.setattr(coordinator, "connect", lambda url: self.broker)
        monkeypatch.setattr(coordinator, "make_app", lambda url, **options: self.broker)

    def study_file(self, vantage_points: list[str], rounds: int = 1) -> Path:
        changes = {"rounds = 1": f"rounds = {rounds}\nvantage_points = {json.dumps(vantage_points)}"}
        return study_file(self.tmp, name="vptest", changes=changes)

    def coordinator(self, store: Store, out: io.StringIO) -> Coordinator:
        return Coordinator(
            load_study(str(self.study)), store, URL, self.store.parent, console=Console(file=out, width=400)
        )

    def run(self) -> tuple[CoordinatorSummary | HarnessError, str]:
        """A coordinator to its end: its summary (or the HarnessError it raised) and its output."""
        out, store = io.StringIO(), Store(self.store)
        try:
            return self.coordinator(store, out).run(), out.getvalue()
        except HarnessError as exc:
            return exc, out.getvalue()
        finally:
            store.close()

    def db(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.store}?mode=ro", uri=True)

    def assert_complete(self) -> None:
        """Every visit recorded once with its HAR in the results, every block timed, each task sent once."""
        rows = self.db().execute("SELECT ordinal, status, har_path FROM visits ORDER BY ordinal").fetchall()
        assert [(r[0], r[1]) for r in rows] == [(v.ordinal, "done") for v in self.plan]
        hars = {r[2] for r in rows}
        on_disk = {str(p) for p in (self.store.parent / "hars").iterdir() if p.name != ".store"}
        assert on_disk == hars and all(Path(h).parent == self.store.parent / "hars" for h in hars)
        assert self.db().execute("SELECT COUNT(*) FROM blocks").fetchone()[0] == 4
        visits_sent = [t for t in self.broker.sent if ":visit:" in t]
        assert len(visits_sent) == len(set(visits_sent)) == len(self.plan)


def test_a_coordinator_records_each_vantage_point_s_visits_once_and_a_second_run_sends_nothing(tmp_path, monkeypatch):
    runs = Coordinations(tmp_path, monkeypatch, {})
    summary, output = runs.run()
    assert isinstance(summary, CoordinatorSummary), summary
    assert "study vptest: coordinating a, b through redis://:***@127.0.0.1:6399/0" in output and "secret" not in output
    assert (summary.visits, summary.blocks_timed, summary.duplicates, summary.done) == (32, 4, 0, 32)
    assert summary.finished and not summary.stopped and summary.halted == {}
    runs.assert_complete()
    environment = dict(runs.db().execute("SELECT key, value FROM environment").fetchall())
    assert environment["a/place"] == "fake dsfa" and environment["b/vantage_point"] == "b"
    assert runs.db().execute("SELECT COUNT(*) FROM link_checks").fetchone()[0] == 4
    assert runs.db().execute("SELECT ending FROM crawler").fetchone()[0] == "finished"
    assert runs.broker.backend.values == {}  # every result read was deleted: HARs leave the broker's memory

    sent = len(runs.broker.sent)
    again, _ = runs.run()
    assert isinstance(again, CoordinatorSummary) and again.finished and again.visits == 0
    assert len(runs.broker.sent) == sent


def test_a_coordinator_stopped_by_a_signal_leaves_results_in_the_broker_and_the_next_adopts_them(tmp_path, monkeypatch):
    runs = Coordinations(tmp_path, monkeypatch, {"a": {3: "sigterm"}})
    summary, _ = runs.run()
    assert isinstance(summary, CoordinatorSummary) and summary.stopped and not summary.finished
    assert runs.db().execute("SELECT ending FROM crawler").fetchone()[0] == "stopped by a signal"
    left = len(runs.broker.backend.values)
    assert left > 0  # sent and done at the worker, not yet recorded
    console = Console(file=io.StringIO(), width=400)
    summary.print_closing(console, runs.store)
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines[0].endswith(
        f"(0 duplicate results ignored, 0 lost tasks queued again, 0 blocks timed); {summary.done} of 32 done"
    )
    assert lines[1:] == [f"store: {runs.store}"]  # no resume hint: the coordinator never had one

    resumed, _ = runs.run()
    assert isinstance(resumed, CoordinatorSummary) and resumed.finished
    assert summary.visits + resumed.visits == 32
    runs.assert_complete()  # the adopted tasks were not sent again


def test_a_full_disk_at_the_coordinator_halts_in_one_line_and_the_results_stay_in_the_broker(tmp_path, monkeypatch):
    runs = Coordinations(tmp_path, monkeypatch, {})
    complete_many = Store.complete_many

    def full(self, *args, **kwargs):
        error = sqlite3.OperationalError("database or disk is full")
        error.sqlite_errorcode = sqlite3.SQLITE_FULL
        raise error

    monkeypatch.setattr(Store, "complete_many", full)
    halted, _ = runs.run()
    assert isinstance(halted, DiskFull)
    assert str(halted) == (
        f"disk full at {runs.store}: the results stay in the broker; free space and run the same command"
    )
    assert runs.db().execute("SELECT ending FROM crawler").fetchone()[0] == f"halted: {halted}"
    assert (
        runs.broker.backend.values
        and runs.db().execute("SELECT COUNT(*) FROM visits WHERE status = 'done'").fetchone()[0] == 0
    )

    monkeypatch.setattr(Store, "complete_many", complete_many)
    resumed, output = runs.run()
    assert isinstance(resumed, CoordinatorSummary) and resumed.finished and resumed.visits == 32
    assert "interrupted completions left (unrecorded HARs, .part)" in output  # the HARs written before the commit
    runs.assert_complete()


def test_a_halted_vantage_point_waits_while_the_other_finishes_and_resumes_when_its_worker_is_back(
    tmp_path, monkeypatch
):
    runs = Coordinations(tmp_path, monkeypatch, {"a": {3: "dead"}})
    summary, output = runs.run()
    assert isinstance(summary, CoordinatorSummary) and not summary.finished and not summary.stopped
    assert list(summary.halted) == ["a"] and "daemons died (unbound-near)" in summary.halted["a"]
    assert f"vantage point a halted: {summary.halted['a']}; its visits wait in its queue" in output
    assert summary.notes() == [f"halted: a: {summary.halted['a']}"]
    done = dict(runs.db().execute("SELECT vantage_point, COUNT(*) FROM visits WHERE status = 'done' GROUP BY 1"))
    assert done == {"a": 2, "b": PER_POINT}

    runs.places["a"].dead = []
    runs.broker.worker_back("a")
    resumed, _ = runs.run()
    assert isinstance(resumed, CoordinatorSummary) and resumed.finished and resumed.halted == {}
    rows = runs.db().execute("SELECT COUNT(*), COUNT(DISTINCT ordinal) FROM visits WHERE status = 'done'").fetchone()
    assert rows == (32, 32)


def test_a_vantage_point_added_is_planned_and_a_reordering_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    runs = Coordinations(tmp_path, monkeypatch, {})
    out = io.StringIO()
    store = Store(runs.store)
    assert runs.coordinator(store, out).prepare() == 32
    runs.study = runs.study_file(["a", "b", "c"])
    assert runs.coordinator(store, out).prepare() == 48
    assert "vantage points c added: 16 visits planned" in out.getvalue()
    assert store.vantage_points("vptest") == {p: VisitCounts(done=0, total=16) for p in "abc"}
    runs.study = runs.study_file(["b", "a", "c"])
    with pytest.raises(HarnessError, match="may only be added at the end"):
        runs.coordinator(store, out).prepare()
    runs.study = runs.study_file(["a", "b", "c"], rounds=2)
    with pytest.raises(HarnessError, match=r"differs in: rounds\); give the coordinator another --store"):
        runs.coordinator(store, out).prepare()
    store.close()


def test_completing_results_is_idempotent_and_ignores_what_is_not_the_visit_s(tmp_path):
    """A visit that ran twice (its worker died before the acknowledgement) is recorded once."""
    loaded = load_study(str(study_file(tmp_path, changes={"rounds = 1": 'rounds = 1\nvantage_points = ["a"]'})))
    store = Store(tmp_path / "results" / "store.sqlite")
    plan = loaded.plan()
    store.add_study(loaded.name, loaded.study.name, loaded.study.seed, loaded.record(), plan)
    worker = FakeWorker("a", FakePlace("dsfa", tmp_path / "run"), tmp_path / "worker")
    config = loaded.record()["study"]
    results = [(v, json.loads(json.dumps(worker.visit(visit_message(loaded.name, config, v))))) for v in plan[:4]]
    hars = tmp_path / "results" / "hars"
    hars.mkdir(parents=True)
    out = io.StringIO()

    def complete(batch: list[tuple[PlannedVisit, dict]]) -> int:
        return complete_visits(store, loaded.name, hars, batch, Console(file=out))

    assert complete(results[:1] * 2) == 1  # twice in one batch
    assert complete(results[:2]) == 1  # the first again, with the second
    assert complete(results[:2]) == 0
    assert store.progress(loaded.name) == VisitCounts(done=2, total=PER_POINT)
    assert store.db.execute("SELECT COUNT(*) FROM link_checks").fetchone()[0] == 1  # kept once, with the first
    assert complete([(plan[3], results[2][1])]) == 0  # another visit's result
    bad_har = json.loads(json.dumps(results[3][1]))
    bad_har["har"]["name"] = "../escaped.har.gz"
    assert complete([(plan[3], bad_har)]) == 0
    assert out.getvalue().splitlines() == ["visit 3: a result that is not of this visit, ignored"] * 2
    assert complete(results[2:]) == 2
    assert sorted(p.name for p in hars.iterdir()) == sorted(r["har"]["name"] for _, r in results)
    assert store.progress(loaded.name) == VisitCounts(done=4, total=PER_POINT)
    store.close()
