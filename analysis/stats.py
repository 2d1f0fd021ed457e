"""Statistics for paired differences and success rates, on plain arrays.

The median's confidence interval is the bootstrap percentile interval,
computed exactly instead of by resampling: a resample's median is its k-th
order statistic (k = ceil(n/2)), and the number of resampled values at or
below x_(j) is Binomial(n, j/n), so P(resample median <= x_(j)) is a
binomial tail. This is the limit of infinitely many bootstrap resamples; it
is deterministic and costs one sort, which is what lets a grid over a
million visits finish in seconds (tests compare it with real resampling).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats


def median_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """Exact bootstrap percentile interval of the median of ``values``."""
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    if n == 0:
        raise ValueError("no values")
    k = (n + 1) // 2
    at_or_below = stats.binom.sf(k - 1, n, np.arange(1, n + 1) / n)  # P(resample median <= x_(j)), increasing in j
    alpha = 1 - confidence
    low = int(np.searchsorted(at_or_below, alpha / 2))
    high = int(np.searchsorted(at_or_below, 1 - alpha / 2))
    return float(x[min(low, n - 1)]), float(x[min(high, n - 1)])


def wilcoxon_p(differences: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p-value (1.0 when every difference is zero)."""
    d = np.asarray(differences, dtype=float)
    if not np.any(d):
        return 1.0
    return float(stats.wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)


@dataclass
class PairStatistics:
    """What a cell of the grid says: row minus column, in milliseconds."""

    pairs: int
    median_ms: float | None
    ci_low_ms: float | None
    ci_high_ms: float | None
    wilcoxon_p: float | None
    verdict: str  # "row slower", "row faster", "indistinguishable", "inconclusive", "too few pairs"
    shade: int  # 0-3: |median| against the thresholds; the sign says which way

    def to_dict(self) -> dict:
        return asdict(self)


def shade_of(median_ms: float, thresholds: tuple[float, float, float]) -> int:
    """0 within the first threshold, then 1, 2, 3 past each further one."""
    size = abs(median_ms)
    return sum(size > t for t in thresholds)


def compare(
    differences: np.ndarray,
    confidence: float,
    indistinguishable_ms: float,
    thresholds: tuple[float, float, float],
    min_pairs: int,
) -> PairStatistics:
    """Statistics of paired differences (row - column).

    "indistinguishable" needs the whole interval within +-indistinguishable_ms,
    not just the median; "row slower"/"row faster" need the interval to exclude
    zero; anything else is "inconclusive".
    """
    d = np.asarray(differences, dtype=float)
    if len(d) < min_pairs:
        return PairStatistics(
            len(d),
            float(np.median(d)) if len(d) else None,
            None,
            None,
            None,
            "too few pairs",
            shade_of(float(np.median(d)), thresholds) if len(d) else 0,
        )
    median = float(np.median(d))
    low, high = median_interval(d, confidence)
    if -indistinguishable_ms <= low and high <= indistinguishable_ms:
        verdict = "indistinguishable"
    elif low > 0:
        verdict = "row slower"
    elif high < 0:
        verdict = "row faster"
    else:
        verdict = "inconclusive"
    return PairStatistics(len(d), median, low, high, wilcoxon_p(d), verdict, shade_of(median, thresholds))


def wilson_interval(successes: int, n: int, confidence: float) -> tuple[float, float]:
    """Wilson score interval of a proportion."""
    if n == 0:
        return 0.0, 1.0
    z = stats.norm.ppf(0.5 + confidence / 2)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate_difference(s1: int, n1: int, s2: int, n2: int, confidence: float) -> tuple[float, float, float]:
    """p1 - p2 with Newcombe's hybrid score interval (independent samples)."""
    if n1 == 0 or n2 == 0:
        return math.nan, math.nan, math.nan
    p1, p2 = s1 / n1, s2 / n2
    l1, u1 = wilson_interval(s1, n1, confidence)
    l2, u2 = wilson_interval(s2, n2, confidence)
    d = p1 - p2
    return d, d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
