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
from dataclasses import asdict, dataclass, replace

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


#: Marks a cell whose median and mean disagree in sign, in figures and tables alike.
DAGGER = "\N{DAGGER}"
_FLIPPED = {"row slower": "row faster", "row faster": "row slower"}


@dataclass
class PairStatistics:
    """What a cell of the grid says: row minus column, in milliseconds.

    The median and its interval carry the verdict and the shade, as in the
    reference study; the mean, the 10th and 90th percentiles and the shares
    of large differences are there because a two-mode distribution (a few
    multi-second resolver stalls among many small gains) can have a median
    and a mean of opposite signs, which the median alone hides.
    """

    pairs: int
    median_ms: float | None
    ci_low_ms: float | None
    ci_high_ms: float | None
    mean_ms: float | None
    p10_ms: float | None
    p90_ms: float | None
    share_row_slower: float | None  # of pairs, row - column > the profile's large_difference_ms
    share_row_faster: float | None  # of pairs, row - column < -large_difference_ms
    sign_disagrees: bool  # the median and the mean point opposite ways (see `signs_disagree`)
    wilcoxon_p: float | None
    verdict: str  # "row slower", "row faster", "indistinguishable", "inconclusive", "too few pairs"
    shade: int  # 0-3: |median| against the thresholds; the sign says which way

    def to_dict(self) -> dict:
        return asdict(self)

    def negated(self) -> PairStatistics:
        """The same pairs read the other way round (column - row): every location negated, the low and high
        ends swapped (interval, p10/p90) and so are the two shares; counts, p-value and shade unchanged."""
        return replace(
            self,
            median_ms=_neg(self.median_ms),
            ci_low_ms=_neg(self.ci_high_ms),
            ci_high_ms=_neg(self.ci_low_ms),
            mean_ms=_neg(self.mean_ms),
            p10_ms=_neg(self.p90_ms),
            p90_ms=_neg(self.p10_ms),
            share_row_slower=self.share_row_faster,
            share_row_faster=self.share_row_slower,
            verdict=_FLIPPED.get(self.verdict, self.verdict),
        )


def _neg(value: float | None) -> float | None:
    return None if value is None else -value


def shade_of(median_ms: float, thresholds: tuple[float, float, float]) -> int:
    """0 within the first threshold, then 1, 2, 3 past each further one."""
    size = abs(median_ms)
    return sum(size > t for t in thresholds)


def signs_disagree(median_ms: float | None, mean_ms: float | None, indistinguishable_ms: float) -> bool:
    """True when the median and the mean have opposite signs and at least one of them lies outside
    +-indistinguishable_ms: a -2 ms median beside a +1 ms mean is noise nobody would read as a direction,
    a -626 ms median beside a +650 ms mean is the two-mode case the mark is for."""
    if median_ms is None or mean_ms is None or median_ms * mean_ms >= 0:
        return False
    return max(abs(median_ms), abs(mean_ms)) > indistinguishable_ms


def _verdict(low: float, high: float, indistinguishable_ms: float) -> str:
    """The interval's reading: inside the band, clear of zero on one side, or neither."""
    if -indistinguishable_ms <= low and high <= indistinguishable_ms:
        return "indistinguishable"
    if low > 0:
        return "row slower"
    if high < 0:
        return "row faster"
    return "inconclusive"


def _descriptive_statistics(
    d: np.ndarray, indistinguishable_ms: float, thresholds: tuple[float, float, float], large_ms: float
) -> PairStatistics:
    """The descriptive statistics of the differences ``d``, with no interval, p-value or verdict yet."""
    n = len(d)
    if n == 0:
        return PairStatistics(
            pairs=0,
            median_ms=None,
            ci_low_ms=None,
            ci_high_ms=None,
            mean_ms=None,
            p10_ms=None,
            p90_ms=None,
            share_row_slower=None,
            share_row_faster=None,
            sign_disagrees=False,
            wilcoxon_p=None,
            verdict="too few pairs",
            shade=0,
        )
    median, mean = float(np.median(d)), float(np.mean(d))
    p10, p90 = (float(q) for q in np.percentile(d, [10, 90]))  # linear interpolation: p10(-d) == -p90(d)
    return PairStatistics(
        pairs=n,
        median_ms=median,
        ci_low_ms=None,
        ci_high_ms=None,
        mean_ms=mean,
        p10_ms=p10,
        p90_ms=p90,
        share_row_slower=float(np.count_nonzero(d > large_ms)) / n,
        share_row_faster=float(np.count_nonzero(d < -large_ms)) / n,
        sign_disagrees=signs_disagree(median, mean, indistinguishable_ms),
        wilcoxon_p=None,
        verdict="too few pairs",
        shade=shade_of(median, thresholds),
    )


def compare(
    differences: np.ndarray,
    confidence: float,
    indistinguishable_ms: float,
    thresholds: tuple[float, float, float],
    min_pairs: int,
    large_ms: float,
) -> PairStatistics:
    """Statistics of paired differences (row - column).

    "indistinguishable" needs the whole interval within +-indistinguishable_ms,
    not just the median; "row slower"/"row faster" need the interval to exclude
    zero; anything else is "inconclusive". The descriptive statistics (mean,
    p10, p90, shares past +-large_ms) are given whenever there is a pair, the
    interval, p-value and verdict only from ``min_pairs`` pairs on.
    """
    d = np.asarray(differences, dtype=float)
    described = _descriptive_statistics(d, indistinguishable_ms, thresholds, large_ms)
    if len(d) == 0 or len(d) < min_pairs:
        return described
    low, high = median_interval(d, confidence)
    return replace(
        described,
        ci_low_ms=low,
        ci_high_ms=high,
        wilcoxon_p=wilcoxon_p(d),
        verdict=_verdict(low, high, indistinguishable_ms),
    )


def verdict_text(st: PairStatistics) -> str:
    """The verdict as a reader should take it: marked when the median and the mean disagree, and a direction
    (read from the median) qualified, so that no table says "row faster" about a cell whose mean is slower."""
    if not st.sign_disagrees or st.mean_ms is None:
        return st.verdict
    if st.verdict in _FLIPPED:
        return f"{st.verdict} by the median {DAGGER}; mean {st.mean_ms:+.0f} ms disagrees"
    return f"{st.verdict} {DAGGER}"


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
