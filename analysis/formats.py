"""How the report's tables print numbers: signed milliseconds, intervals, shares with their intervals."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd


def ms_interval(low: float | None, high: float | None) -> str:
    """'[-12, +30]' in whole milliseconds, or blank without an interval."""
    return "" if low is None or high is None else f"[{low:+.0f}, {high:+.0f}]"


def share(value: float | None, low: float | None, high: float | None) -> str:
    """'3.0 [1.2, 5.1]': a share and its interval in %, or blank without a share."""
    if value is None:
        return ""
    return f"{100 * value:.1f}" + ("" if low is None or high is None else f" [{100 * low:.1f}, {100 * high:.1f}]")


def number(pattern: str) -> Callable[[float], str]:
    """A cell formatter: milliseconds as whole signed numbers (not 1.29e+03), and blank where there is none."""
    return lambda x: "" if pd.isna(x) else pattern.format(x)
