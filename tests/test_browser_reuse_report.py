"""`benchmarks/browser_reuse.py`: the harness time of a reused browser's later visits, the target's figure."""

from __future__ import annotations

from benchmarks.browser_reuse import _later_overheads


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
