"""The chaos benchmark's core, short: a lab study under random faults (one crawl; broker, coordinator and worker),
then checked; and its table per kind of fault, from made-up runs."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from benchmarks.chaos import (
    EVERY_KIND_FROM,
    KINDS,
    LATE,
    Chaos,
    ChaosReport,
    Fault,
    check_lab_gone,
    kinds_check,
    pick_kind,
)
from benchmarks.chaos_fleet import KINDS as FLEET_KINDS
from benchmarks.chaos_fleet import FleetRun, Holding, Injected
from benchmarks.chaos_fleet import pick_kind as fleet_pick_kind
from benchmarks.chaos_run import run_fleet_chaos
from benchmarks.chaos_table import StoreView, checks, table


@pytest.mark.lab
def test_a_crawl_under_random_faults_records_every_visit_once_and_blames_no_protocol(private_lab, tmp_path):
    lab = private_lab()
    report = Chaos(lab, tmp_path, visits=12, faults=8, seed=3, gap=(2.0, 8.0)).run()
    lab.down()
    report.checks.update(check_lab_gone(lab))
    figures = "\n".join(report.lines())
    print(figures)  # the figures, with -s
    assert len(report.faults) == 8, figures
    assert report.passed, figures


def faults(kinds: list[str]) -> list[Fault]:
    return [Fault(k, 0.0, 1.0, "-") for k in kinds]


def test_a_long_chaos_run_fails_when_a_kind_of_fault_was_never_injected():
    checks = kinds_check(faults([k for k in KINDS if k != "delayer"] * 10), EVERY_KIND_FROM)
    assert checks == {"every kind of fault injected": "never injected: delayer"}
    assert not ChaosReport(checks=checks).passed
    assert kinds_check(faults(KINDS * 5), EVERY_KIND_FROM) == {"every kind of fault injected": "ok"}


def test_a_short_chaos_run_only_reports_the_kinds_it_missed():
    checks = kinds_check(faults(["crawl"] * 8), 8)
    assert list(checks) == ["every kind of fault injected (informative)"]
    assert ChaosReport(checks=checks).passed


def test_the_last_faults_of_a_long_run_go_to_the_kinds_still_missing():
    rng, others = random.Random(1), [k for k in KINDS if k != "stubby"]
    early = faults(others * 10)  # 60 of 100: 40 left, more than LATE
    assert {pick_kind(rng, early, 100) for _ in range(200)} == set(KINDS)
    late = faults((others * 20)[: 100 - LATE])  # LATE left
    assert {pick_kind(rng, late, 100) for _ in range(200)} == {"stubby"}
    assert {pick_kind(rng, faults(others), 8) for _ in range(200)} == set(KINDS)  # a short run: never forced


# -- the distributed path (benchmarks/chaos_fleet.py): broker, coordinator and a worker ------------------------


@pytest.mark.lab
def test_a_study_through_broker_coordinator_and_worker_under_every_kind_of_fault_loses_nothing(private_lab, tmp_path):
    lab = private_lab()
    report = run_fleet_chaos(lab, tmp_path, visits=24, faults=len(FLEET_KINDS), seed=3, gap=(3.0, 6.0))
    lab.down()
    report.checks.update(check_lab_gone(lab))
    figures = "\n".join(report.lines())
    print(figures)  # the table, with -s
    rows = {r.kind: r for r in report.rows}
    assert all(rows[k].injected == 1 for k in FLEET_KINDS), figures  # every kind, once
    assert rows["all"].lost == rows["all"].twice == rows["all"].misattributed == 0, figures
    assert report.passed, figures
    saved = json.loads((tmp_path / "chaos.json").read_text())
    assert [r["kind"] for r in saved["table"]] == [*FLEET_KINDS, "all"]


def holding(ordinal: int, tag: str, first: float, last: float) -> Holding:
    return Holding(ordinal, tag, first, last)


def view(**changes) -> StoreView:
    base = dict(
        planned={0, 1, 2, 3},
        done=Counter({0: 1, 1: 1, 2: 1, 3: 1}),
        attempts={0: 0, 1: 0, 2: 0, 3: 0},
        failures={},
        hars=Counter({0: 1, 1: 1, 2: 1, 3: 1}),
        stray_hars=[],
    )
    return StoreView(**(base | changes))


def test_the_table_counts_a_visit_as_touched_by_the_faults_it_was_held_during():
    run = FleetRun(
        faults=[Injected("worker", "-", 10.0, 10.0), Injected("broker", "-", 20.0, 25.0)],
        holdings={
            "a": holding(0, "a", 5.0, 10.5),  # in flight when the worker was killed
            "b": holding(0, "b", 12.0, 14.0),  # handed out again: a retry
            "c": holding(1, "c", 24.0, 30.0),  # started while the broker was down
            "d": holding(2, "d", 26.0, 30.0),  # after every fault
        },
    )
    rows = {r.kind: r for r in table(run, view(), "visit 0: x\nvisit 1: y\nvisit 2: z\n")}
    assert (rows["worker"].injected, rows["worker"].touched, rows["worker"].retried) == (1, 1, 1)
    assert (rows["broker"].touched, rows["broker"].retried) == (1, 0)
    assert rows["disk-full"].injected == rows["disk-full"].touched == 0
    assert (rows["all"].injected, rows["all"].touched, rows["all"].lost) == (2, 2, 0)
    assert checks(list(rows.values()), view(), 2) == {
        "nothing lost": "ok",
        "nothing recorded twice": "ok",
        "nothing misattributed": "ok",
        "every kind of fault injected (informative)": "never injected: "
        + ", ".join(k for k in FLEET_KINDS if k not in ("worker", "broker")),
    }


def test_the_table_fails_a_run_that_lost_recorded_twice_or_blamed_a_protocol():
    run = FleetRun(faults=[Injected("stub", "-", 10.0, 10.0)], holdings={"a": holding(1, "a", 9.0, 11.0)})
    bad = view(
        done=Counter({0: 1, 1: 1, 2: 1}),  # 3 never recorded
        failures={1: "DNS Error: resolution failed"},
        hars=Counter({0: 1, 1: 2, 2: 1}),  # 1's HAR written twice
        stray_hars=["0123abcd.har.gz"],
    )
    rows = table(run, bad, "visit 1: x\nvisit 1: x\n")
    stub, total = rows[FLEET_KINDS.index("stub")], rows[-1]
    assert (stub.touched, stub.retried, stub.lost, stub.twice, stub.misattributed) == (1, 1, 0, 1, 1)
    assert (total.lost, total.twice, total.misattributed) == (1, 2, 1)
    verdicts = checks(rows, bad, 1)
    assert verdicts["nothing lost"] == "1 planned visits never recorded"
    assert "0123abcd.har.gz" in verdicts["nothing recorded twice"]
    assert verdicts["nothing misattributed"] == "visit 1 DNS Error: resolution failed"


def test_a_fleet_run_of_at_least_one_fault_per_kind_injects_every_kind():
    rng = random.Random(1)
    seen: list[Injected] = []
    for _ in range(len(FLEET_KINDS)):
        seen.append(Injected(fleet_pick_kind(rng, seen, len(FLEET_KINDS)), "-", 0.0, 0.0))
    assert sorted(f.kind for f in seen) == sorted(FLEET_KINDS)
    long_run = [Injected("worker", "-", 0.0, 0.0)] * 10  # 90 of 100 left: any kind
    assert {fleet_pick_kind(rng, long_run, 100) for _ in range(300)} == set(FLEET_KINDS)


def test_a_run_stopped_before_the_end_counts_as_lost_only_the_touched_visits_it_never_recorded():
    run = FleetRun(
        faults=[Injected("coordinator", "-", 10.0, 10.0)],
        holdings={"a": holding(1, "a", 9.0, 11.0), "b": holding(3, "b", 9.5, 12.0)},
    )
    partial = view(done=Counter({0: 1, 1: 1}))  # 2 never reached, 3 touched and never recorded
    assert table(run, partial, "", finished=False)[-1].lost == 1
    assert table(run, partial, "", finished=True)[-1].lost == 2


def test_a_killed_lab_daemon_counts_as_an_injected_fault(monkeypatch, tmp_path):
    # The full run's first version drew a kill, sent it, and counted nothing (only stops, which have an end).
    import subprocess
    from types import SimpleNamespace

    from benchmarks import chaos_fleet

    daemon = subprocess.Popen(["sleep", "60"])
    try:
        fleet = SimpleNamespace(run=FleetRun(), store=tmp_path / "none.sqlite", daemon_pid=lambda name: daemon.pid)
        chaos = chaos_fleet.Chaos(fleet, wanted=1, seed=0, gap=(1.0, 2.0))  # type: ignore[arg-type]
        monkeypatch.setattr(chaos_fleet, "pick_kind", lambda *_: "resolver")
        monkeypatch.setattr(chaos.rng, "random", lambda: 0.1)  # below 0.5: a kill
        assert chaos._inject()
        assert daemon.wait(timeout=10) == -9
        [fault] = fleet.run.faults
        assert fault.kind == "resolver" and fault.target.endswith("killed") and fault.end >= fault.start
        assert chaos.undo is None  # nothing to end
    finally:
        daemon.kill()
        daemon.wait()


def test_a_visit_put_back_and_taken_again_under_the_same_tag_counts_as_retried():
    # A killed worker's visit goes back to its queue with its delivery tag: held, not held, held again.
    run = FleetRun(faults=[Injected("worker", "-", 10.0, 10.0)], holdings={"a": Holding(0, "a", 5.0, 20.0, 2)})
    assert table(run, view(), "visit 0: x\n")[0].retried == 1
