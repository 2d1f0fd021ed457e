"""The chaos benchmark's core, short: a lab crawl under random faults, resumed after each, then checked."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from chaos import EVERY_KIND_FROM, KINDS, Chaos, ChaosReport, Fault, check_lab_gone  # noqa: E402


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


def _kinds_checked(wanted: int, kinds: list[str]) -> dict[str, str]:
    """The kinds check of a run that wanted `wanted` faults and injected these kinds."""
    chaos = Chaos.__new__(Chaos)  # the check reads only the report and the number wanted: no lab needed
    chaos.wanted, chaos.report = wanted, ChaosReport(faults=[Fault(k, 0.0, 1.0, "-") for k in kinds])
    chaos._check_kinds()
    return chaos.report.checks


def test_a_long_chaos_run_fails_when_a_kind_of_fault_was_never_injected():
    checks = _kinds_checked(EVERY_KIND_FROM, [k for k in KINDS if k != "delayer"] * 10)
    assert checks == {"every kind of fault injected": "never injected: delayer"}
    assert not ChaosReport(checks=checks).passed
    assert _kinds_checked(EVERY_KIND_FROM, KINDS * 5) == {"every kind of fault injected": "ok"}


def test_a_short_chaos_run_only_reports_the_kinds_it_missed():
    checks = _kinds_checked(8, ["crawl"] * 8)
    assert list(checks) == ["every kind of fault injected (informative)"]
    assert ChaosReport(checks=checks).passed
