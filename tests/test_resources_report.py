"""benchmarks/resources.py's report (fast): slopes and the week's extrapolation come from after the warm-up only."""

from __future__ import annotations

import re

from benchmarks.resources import WARM_UP, Sample, report

MIB = 2**20


def rows(visits: list[int], low_mib: list[float]) -> list[Sample]:
    """Rows whose lowest RSS between rows is ``low_mib``; /run grows 1 KiB per visit."""
    return [
        Sample(v, int(m * MIB), 0, 0, int(m * MIB), int(m * MIB), int(max(low_mib) * MIB), 30 * MIB + 1024 * v)
        for v, m in zip(visits, low_mib, strict=True)
    ]


def test_the_climb_of_the_warm_up_is_not_extrapolated(capsys):
    """82 -> 95 MiB over the first 300 visits, then flat (this machine's 2,003-visit run): the week is flat."""
    visits = list(range(0, 1001, 100))
    samples = rows(visits, [82, 85, 89] + [95.0] * 8)
    report(samples)
    out = capsys.readouterr().out
    assert f"after the warm-up ({WARM_UP} visits): rows from visit 300 to 1000" in out
    assert "RSS +0 MiB (95 %: ± 0)" in out and "/run +82 MiB (95 %: ± 0)" in out  # 1 KiB/visit x 84,000 visits


def test_a_run_shorter_than_the_warm_up_prints_no_extrapolation(capsys):
    report(rows([1, 50, 100, 150, 200, 250], [77, 80, 82, 84, 86, 88]))  # all warm-up: +3.5 GiB a week
    out = capsys.readouterr().out
    assert "a week" not in out and "no slope and no week's extrapolation: 0 row(s) after the warm-up" in out
    report(rows([1, 50, 100, 150], [77, 80, 82, 84]), warm_up=50)  # what --warm-up 50 reads: three rows
    assert "rows from visit 50 to 150" in capsys.readouterr().out


def test_a_week_from_a_few_noisy_rows_says_it_cannot_tell(capsys):
    """A 360-visit crawl on this machine: after the warm-up, rows at 300, 330, 359 and 360 whose lowest RSS steps
    by the allocator's 1 MiB. Their slope reads +447 MiB a week; its interval is far wider than that."""
    report(rows([1, 30, 300, 330, 359, 360], [77.3, 77.3, 109.5, 110.5, 110.5, 109.5]))
    out = capsys.readouterr().out
    week = next(line for line in out.splitlines() if line.startswith("at these slopes"))
    figure, width = re.search(r"RSS ([+-]\d+) MiB \(95 %: ± (\d+)\)", week).groups()  # type: ignore[union-attr]
    assert abs(int(figure)) < int(width), week
