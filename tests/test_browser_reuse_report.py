"""`benchmarks/browser_reuse.py`: a reused browser's later visits' harness time; the recording's cost over arms."""

from __future__ import annotations

from benchmarks.browser_reuse import _later_overheads, report_instrumentation


def _row(ordinal: int | None, wall: float, onload_ms: float = 300.0, ok: bool = True) -> dict:
    return {"ordinal": ordinal, "wall": wall, "onload": onload_ms, "ok": ok}


def test_a_reused_cell_s_later_visits_give_the_harness_time_without_starts():
    rows = {
        ("wired", "reused-cold", "do53"): [_row(1, 2.3), _row(2, 0.55), _row(3, 0.6), _row(4, 9.0, ok=False)],
        ("wired", "reused-cold", "dot"): [_row(1, 2.5), _row(2, 0.75)],
        ("wired", "fresh-cold", "do53"): [_row(None, 1.5), _row(None, 1.6)],
    }
    # The first visits (a start each) and a failed visit are left out; per arm and pooled over the arms.
    assert _later_overheads(rows, "wired", "reused-cold", ["do53", "dot"]) == (
        "n=3 overhead 0.300 (do53 0.275, dot 0.450)"
    )
    assert _later_overheads(rows, "wired", "fresh-cold", ["do53", "dot"]) == ""  # fresh browsers: no ordinal


def test_the_recording_s_cost_is_given_over_the_arms_each_visit_against_its_arm_s_median(capsys):
    # Recording costs 10 % in both arms, whose pages differ fourfold, and one arm has fewer recorded visits: pooled,
    # each visit against its own arm's median with none recorded, the ratio is the 10 %, not the mix of the arms'
    # sizes (the raw onLoads pooled give 1.75).
    rows = {}
    for protocol, base in (("do53", 100.0), ("doh", 400.0)):
        none = [base * f for f in (0.96, 0.98, 1.0, 1.02, 1.04)]
        rows[("wired", "reused-cold+none", protocol)] = [_row(2, 1.0, v) for v in none]
        recorded = none[1:4] if protocol == "do53" else none
        rows[("wired", "reused-cold", protocol)] = [_row(2, 1.0, v * 1.1) for v in recorded]
    report_instrumentation(rows, ["wired"], ["do53", "doh"], [("firefox", "reused-cold", "none", "recorder")])
    lines = capsys.readouterr().out.splitlines()
    pooled = [line for line in lines if " all " in line]
    assert len(pooled) == 1 and "n=  8/ 10" in pooled[0] and "ratio 1.100" in pooled[0]
    assert sum("ratio 1.100" in line for line in lines) == 3  # each arm, and over both
