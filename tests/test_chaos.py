"""The chaos benchmark's core, short: a lab crawl under random faults, resumed after each, then checked."""

from __future__ import annotations

import random

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
