"""The chaos benchmark's core, short: a lab crawl under random faults, resumed after each, then checked."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from chaos import Chaos, check_lab_gone  # noqa: E402

pytestmark = pytest.mark.lab


def test_a_crawl_under_random_faults_records_every_visit_once_and_blames_no_protocol(private_lab, tmp_path):
    lab = private_lab()
    report = Chaos(lab, tmp_path, visits=12, faults=8, seed=3, gap=(2.0, 8.0)).run()
    lab.down()
    report.checks.update(check_lab_gone(lab))
    figures = "\n".join(report.lines())
    print(figures)  # the figures, with -s
    assert len(report.faults) == 8, figures
    assert report.passed, figures
