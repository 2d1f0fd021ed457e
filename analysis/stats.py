"""Statistics of paired differences and success rates, on plain arrays: what a cell of the grid says.

A cell's interval comes from resampling its sites (analysis/resampling.py),
its p-value from the sign test by site (analysis/significance.py), and its
verdict from both; the verdicts of one grid are then adjusted together
(`adjust_family`). The median is `analysis.resampling.median` throughout:
the point estimate and every resample's median alike.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np
from scipy import stats

from analysis.hodges_lehmann import hodges_lehmann
from analysis.resampling import (
    Intervals,
    Resamples,
    Sample,
    draw_resamples,
    intervals,
    intervals_of,
    median,
    percentile_levels,
    percentiles,
    sample,
)
from analysis.significance import adjust, family_size, sign_test


def median_interval(values: np.ndarray, confidence: float, resamples: int = 1000, seed: int = 1) -> tuple[float, float]:
    """Bootstrap percentile interval of the median (`analysis.resampling.median`) of independent ``values``."""
    alpha = 1 - confidence
    units = len(values)
    drawn = draw_resamples(np.zeros(units, dtype=int), resamples, seed)
    return intervals(np.asarray(values, dtype=float), np.arange(units), drawn, (alpha / 2, 1 - alpha / 2), 0.0).median


@dataclass(frozen=True)
class Reading:
    """How a cell is read: the analysis profile's numbers (analysis/settings.py) that `compare` needs."""

    confidence: float
    indistinguishable_ms: float
    thresholds_ms: tuple[float, float, float]
    min_pairs: int
    large_difference_ms: float
    interval: str = "expanded"  # analysis.resampling.METHODS
    resamples: int = 1000
    seed: int = 1


#: Marks a cell whose median and mean disagree in sign, in figures and tables alike.
DAGGER = "\N{DAGGER}"
_FLIPPED = {"row slower": "row faster", "row faster": "row slower"}


@dataclass
class PairStatistics:
    """What a cell of the grid says: row minus column, in milliseconds.

    The median and its interval carry the verdict and the shade, as in the
    reference study; the Hodges-Lehmann estimate, the mean, the 10th and 90th
    percentiles and the shares of large differences are there because a
    two-mode distribution (a few multi-second resolver stalls among many small
    gains) can have a median and a mean of opposite signs, which the median
    alone hides. Intervals resample sites (``resampled``: "site"), or pairs
    where every site has one ("pair").
    """

    pairs: int
    sites: int  # sites (at a vantage point) with at least one pair: the units resampled
    median_ms: float | None
    ci_low_ms: float | None
    ci_high_ms: float | None
    hodges_lehmann_ms: float | None
    mean_ms: float | None
    mean_ci_low_ms: float | None
    mean_ci_high_ms: float | None
    p10_ms: float | None
    p90_ms: float | None
    share_row_slower: float | None  # of pairs, row - column > the profile's large_difference_ms
    share_row_slower_ci_low: float | None
    share_row_slower_ci_high: float | None
    share_row_faster: float | None  # of pairs, row - column < -large_difference_ms
    share_row_faster_ci_low: float | None
    share_row_faster_ci_high: float | None
    sign_disagrees: bool  # the median and the mean point opposite ways (see `signs_disagree`)
    resampled: str | None  # "site" or "pair": what the intervals resampled; None without intervals
    p_value: float | None  # the sign test of a zero median, by site (analysis/significance.py)
    p_adjusted: float | None  # adjusted over the family (`adjust_family`); the p-value itself in a family of one
    adjustment: str | None  # the family's adjustment method (analysis.significance.ADJUSTMENTS)
    family_size: int  # verdicts tested in the family
    verdict: str  # "row slower", "row faster", "indistinguishable", "inconclusive", "too few pairs"/"sites"
    shade: int  # 0-3: |median| against the thresholds; the sign says which way

    def to_dict(self) -> dict:
        return asdict(self)

    def negated(self) -> PairStatistics:
        """The same pairs read the other way round (column - row): every location negated, the low and high
        ends swapped (intervals, p10/p90) and so are the two shares; counts, p-values and shade unchanged."""
        return replace(
            self,
            median_ms=_neg(self.median_ms),
            ci_low_ms=_neg(self.ci_high_ms),
            ci_high_ms=_neg(self.ci_low_ms),
            hodges_lehmann_ms=_neg(self.hodges_lehmann_ms),
            mean_ms=_neg(self.mean_ms),
            mean_ci_low_ms=_neg(self.mean_ci_high_ms),
            mean_ci_high_ms=_neg(self.mean_ci_low_ms),
            p10_ms=_neg(self.p90_ms),
            p90_ms=_neg(self.p10_ms),
            share_row_slower=self.share_row_faster,
            share_row_slower_ci_low=self.share_row_faster_ci_low,
            share_row_slower_ci_high=self.share_row_faster_ci_high,
            share_row_faster=self.share_row_slower,
            share_row_faster_ci_low=self.share_row_slower_ci_low,
            share_row_faster_ci_high=self.share_row_slower_ci_high,
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


def _verdict(low: float, high: float, p: float | None, alpha: float, indistinguishable_ms: float) -> str:
    """The interval's reading: inside the band; clear of zero on one side with the (adjusted) p-value below
    ``alpha``; or neither."""
    if -indistinguishable_ms <= low and high <= indistinguishable_ms:
        return "indistinguishable"
    if p is not None and p >= alpha:
        return "inconclusive"
    if low > 0:
        return "row slower"
    if high < 0:
        return "row faster"
    return "inconclusive"


_NOTHING = dict.fromkeys(
    [
        "median_ms",
        "ci_low_ms",
        "ci_high_ms",
        "hodges_lehmann_ms",
        "mean_ms",
        "mean_ci_low_ms",
        "mean_ci_high_ms",
        "p10_ms",
        "p90_ms",
        "share_row_slower",
        "share_row_slower_ci_low",
        "share_row_slower_ci_high",
        "share_row_faster",
        "share_row_faster_ci_low",
        "share_row_faster_ci_high",
        "resampled",
        "p_value",
        "p_adjusted",
        "adjustment",
    ]
)


def _descriptive_statistics(d: np.ndarray, sites: int, reading: Reading) -> PairStatistics:
    """The descriptive statistics of the differences ``d``, with no interval, p-value or verdict yet."""
    n = len(d)
    empty = PairStatistics(
        pairs=n, sites=sites, sign_disagrees=False, family_size=1, verdict="too few pairs", shade=0, **_NOTHING
    )
    if n == 0:
        return empty
    middle, mean = median(d), float(np.mean(d))
    p10, p90 = (float(q) for q in np.percentile(d, [10, 90]))  # linear interpolation: p10(-d) == -p90(d)
    large = reading.large_difference_ms
    return replace(
        empty,
        median_ms=middle,
        hodges_lehmann_ms=hodges_lehmann(d),
        mean_ms=mean,
        p10_ms=p10,
        p90_ms=p90,
        share_row_slower=float(np.count_nonzero(d > large)) / n,
        share_row_faster=float(np.count_nonzero(d < -large)) / n,
        sign_disagrees=signs_disagree(middle, mean, reading.indistinguishable_ms),
        shade=shade_of(middle, reading.thresholds_ms),
    )


def compare(
    differences: np.ndarray,
    reading: Reading,
    sites: np.ndarray | None = None,
    resamples: Resamples | None = None,
) -> PairStatistics:
    """Statistics of paired differences (row - column) whose sites are ``sites`` (codes, one per difference;
    None: every pair its own site), as a family of one (`adjust_family` adjusts a grid's cells together).

    With ``resamples`` the codes index its sites; without, they are drawn here. "indistinguishable" needs the
    whole interval within +-indistinguishable_ms, not just the median; "row slower"/"row faster" need the
    interval to exclude zero and the p-value to be below 1 - confidence; anything else is "inconclusive". The
    descriptive statistics are given whenever there is a pair, the intervals, p-value and verdict only from
    ``min_pairs`` pairs on, over two sites at least.
    """
    d = np.asarray(differences, dtype=float)
    codes = np.arange(len(d)) if sites is None else np.asarray(sites)
    if resamples is None:
        codes = np.unique(codes, return_inverse=True)[1] if len(codes) else codes.astype(int)
        units = int(codes.max()) + 1 if len(codes) else 0
        resamples = draw_resamples(np.zeros(units, dtype=int), reading.resamples, reading.seed)
    return compare_all([(d, codes)], reading, resamples)[0]


def compare_all(
    cells: list[tuple[np.ndarray, np.ndarray]], reading: Reading, resamples: Resamples
) -> list[PairStatistics]:
    """`compare` for several cells, each (differences, site codes into ``resamples``), their resamples
    weighed in one product (analysis.resampling.intervals_of): how a grid computes its cells."""
    described: list[PairStatistics] = []
    tested: list[int] = []
    samples: list[Sample] = []
    levels: list[tuple[float, float]] = []
    for d, codes in cells:
        order = np.argsort(np.asarray(d, dtype=float), kind="stable")
        x, s = np.asarray(d, dtype=float)[order], np.asarray(codes)[order]  # sorted once: later sorts find it so
        units = int(np.count_nonzero(np.bincount(s))) if len(s) else 0
        st = _descriptive_statistics(x, units, reading)
        if len(x) and len(x) >= reading.min_pairs:
            if units < 2:
                st = replace(st, verdict="too few sites")
            else:
                tested.append(len(described))
                samples.append(sample(x, s, resamples.weights.shape[1], reading.large_difference_ms))
                levels.append(percentile_levels(reading.confidence, units, reading.interval))
        described.append(st)
    for i, cell, iv in zip(tested, samples, intervals_of(samples, resamples, levels), strict=True):
        described[i] = _with_interval(described[i], iv, sign_test(cell.x, cell.sites), reading)
    return described


def _with_interval(st: PairStatistics, iv: Intervals, p: float, reading: Reading) -> PairStatistics:
    """A cell's descriptive statistics with its intervals, p-value and verdict (a family of one)."""
    return replace(
        st,
        ci_low_ms=iv.median[0],
        ci_high_ms=iv.median[1],
        mean_ci_low_ms=iv.mean[0],
        mean_ci_high_ms=iv.mean[1],
        share_row_slower_ci_low=iv.slower[0],
        share_row_slower_ci_high=iv.slower[1],
        share_row_faster_ci_low=iv.faster[0],
        share_row_faster_ci_high=iv.faster[1],
        resampled=iv.unit,
        p_value=p,
        p_adjusted=p,
        verdict=_verdict(iv.median[0], iv.median[1], p, 1 - reading.confidence, reading.indistinguishable_ms),
    )


def adjust_family(family: list[PairStatistics], method: str, reading: Reading) -> list[PairStatistics]:
    """The verdicts of one figure or table, adjusted together by ``method`` (Holm, Benjamini-Hochberg): each
    cell gets the adjusted p-value, the method and the family's size, and its verdict read again with it."""
    adjusted = adjust([st.p_value for st in family], method)
    size = family_size(adjusted)
    alpha = 1 - reading.confidence
    done = []
    for st, p in zip(family, adjusted, strict=True):
        st = replace(st, p_adjusted=p, adjustment=method, family_size=size)
        if st.ci_low_ms is not None and st.ci_high_ms is not None:
            st = replace(st, verdict=_verdict(st.ci_low_ms, st.ci_high_ms, p, alpha, reading.indistinguishable_ms))
        done.append(st)
    return done


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


def rate_differences(
    successes: np.ndarray, visits: np.ndarray, pairs: list[tuple[int, int]], resamples: Resamples, reading: Reading
) -> list[tuple[float, float, float]]:
    """p_a - p_b, the difference of two pooled success rates, with its interval from the sites' bootstrap, for
    each (a, b) of ``pairs``: ``successes[:, c]`` and ``visits[:, c]`` are each site's (the resamples' units)
    Successful and counted visits under configuration c. A resample's rates are its sites' visits pooled, each
    site with all of its visits, so a site's many visits count as one site's evidence (Newcombe's interval,
    used before, treated every visit as independent). The percentiles are read as the grid's are
    (``reading.interval``, for the sites visited under a or b); a resample that drew no visit under a or b is
    left out. nan without visits under either."""
    sums = resamples.weights @ np.hstack([successes, visits])
    k = successes.shape[1]
    done = []
    for a, b in pairs:
        n_a, n_b = float(visits[:, a].sum()), float(visits[:, b].sum())
        if not n_a or not n_b:
            done.append((math.nan, math.nan, math.nan))
            continue
        d = float(successes[:, a].sum()) / n_a - float(successes[:, b].sum()) / n_b
        kept = (sums[:, k + a] > 0) & (sums[:, k + b] > 0)
        resampled = sums[kept, a] / sums[kept, k + a] - sums[kept, b] / sums[kept, k + b]
        sites = int(np.count_nonzero(visits[:, a] + visits[:, b]))
        levels = percentile_levels(reading.confidence, sites, reading.interval)
        done.append((d, *percentiles(resampled, levels)) if len(resampled) else (d, math.nan, math.nan))
    return done


def rate_share(
    successes: np.ndarray, visits: np.ndarray, resamples: Resamples, reading: Reading
) -> tuple[float, float, float]:
    """One pooled success rate with its interval from the sites' bootstrap, read as `rate_differences` reads a
    difference: ``successes`` and ``visits`` are each site's (the resamples' units). nan without visits."""
    total = float(np.sum(visits))
    if not total:
        return math.nan, math.nan, math.nan
    sums = resamples.weights @ np.stack([successes, visits], axis=1)
    kept = sums[:, 1] > 0
    resampled = sums[kept, 0] / sums[kept, 1]
    levels = percentile_levels(reading.confidence, int(np.count_nonzero(visits)), reading.interval)
    share = float(np.sum(successes)) / total
    return (share, *percentiles(resampled, levels)) if len(resampled) else (share, math.nan, math.nan)
