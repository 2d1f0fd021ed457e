"""Bootstrap intervals of paired differences, with the site as the unit that is resampled.

A study visits each site in several rounds, and one site's pairs resemble
each other (the same hostnames, the same page weight): they are not
independent draws. The cluster bootstrap resamples sites, each with all its
rounds, within its stratum (the vantage point: `analysis.pairs.STRATA`), so
an interval is as wide as the number of sites warrants, not the number of
pairs. Where every site has a single pair the two are the same, and the
median's interval is then computed exactly (`exact_median_interval`).

A resample is a vector of weights, how many times each site was drawn, so
the resampled mean and tail shares are ratios of weighted sums (one matrix
product for all resamples), and the resampled median is found in a window
of the sorted differences around the sample median: its rank moves by about
the square root of the sum of squared site sizes, and a window that turns
out too narrow is widened until it holds every percentile the interval reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

#: How an interval reads the bootstrap distribution: its plain percentiles, or the percentiles widened for the
#: number of units as Hesterberg (2015, "What teachers should know about the bootstrap", The American
#: Statistician 69:4, Sec. 6) proposes: alpha' / 2 = Phi(-sqrt(n / (n - 1)) t_{alpha/2, n-1}).
METHODS = ("percentile", "expanded")


def percentile_levels(confidence: float, units: int, method: str) -> tuple[float, float]:
    """The lower and upper percentile (fractions) an interval of ``confidence`` reads with ``units`` resampled."""
    if method not in METHODS:
        raise ValueError(f"unknown interval method '{method}' (have: {', '.join(METHODS)})")
    half = (1 - confidence) / 2
    if method == "expanded" and units > 1:
        t = stats.t.ppf(1 - half, units - 1)
        half = float(stats.norm.cdf(-math.sqrt(units / (units - 1)) * t))
    return half, 1 - half


def exact_median_interval(values: np.ndarray, low: float, high: float) -> tuple[float, float]:
    """The bootstrap percentile interval (percentiles ``low``, ``high``) of the median of independent values,
    computed exactly: a resample's median is its k-th order statistic (k = ceil(n/2)), and the number of
    resampled values at or below x_(j) is Binomial(n, j/n), so P(resample median <= x_(j)) is a binomial tail.
    This is the limit of infinitely many resamples, with no Monte-Carlo noise, for the cost of one sort."""
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    if n == 0:
        raise ValueError("no values")
    k = (n + 1) // 2
    at_or_below = stats.binom.sf(k - 1, n, np.arange(1, n + 1) / n)  # increasing in j
    first = int(np.searchsorted(at_or_below, low))
    last = int(np.searchsorted(at_or_below, high))
    return float(x[min(first, n - 1)]), float(x[min(last, n - 1)])


@dataclass(frozen=True)
class Resamples:
    """Bootstrap resamples of a table's sites: ``weights[b, s]`` is how often site s was drawn in resample b.
    Each stratum (vantage point) keeps its number of sites in every resample."""

    weights: np.ndarray  # (resamples, sites), float64 holding small integers


def draw_resamples(strata: np.ndarray, count: int, seed: int) -> Resamples:
    """``count`` resamples of sites whose stratum codes are ``strata`` (one per site), drawn with replacement
    within each stratum, from ``seed`` (the same data and seed give the same intervals)."""
    strata = np.asarray(strata)
    rng = np.random.default_rng(seed)
    weights = np.zeros((count, len(strata)))
    for stratum in np.unique(strata):
        members = np.flatnonzero(strata == stratum)
        m = len(members)
        picks = rng.integers(0, m, size=(count, m)) + (np.arange(count) * m)[:, None]
        weights[:, members] = np.bincount(picks.ravel(), minlength=count * m).reshape(count, m)
    return Resamples(weights)


@dataclass(frozen=True)
class Intervals:
    """Intervals of the median, mean and the two tail shares of paired differences, and what was resampled."""

    median: tuple[float, float]
    mean: tuple[float, float]
    slower: tuple[float, float]  # share of pairs above +large_ms
    faster: tuple[float, float]  # share of pairs below -large_ms
    unit: str  # "site": sites resampled with all their pairs; "pair": one pair per site, the median's exact


def intervals(
    differences: np.ndarray,
    sites: np.ndarray,
    resamples: Resamples,
    levels: tuple[float, float],
    large_ms: float,
) -> Intervals:
    """Intervals of row - column ``differences`` whose sites are ``sites`` (indices into the resamples' sites),
    at the percentiles ``levels``. A resample that drew none of these sites (the others had no pair here) is
    left out: the distribution is that of resamples with at least one pair."""
    order = np.argsort(differences, kind="stable")
    x, s = np.asarray(differences, dtype=float)[order], np.asarray(sites)[order]
    n_sites = resamples.weights.shape[1]
    per_site = np.stack(
        [
            np.bincount(s, minlength=n_sites).astype(float),
            np.bincount(s, weights=x, minlength=n_sites),
            np.bincount(s, weights=(x > large_ms).astype(float), minlength=n_sites),
            np.bincount(s, weights=(x < -large_ms).astype(float), minlength=n_sites),
        ],
        axis=1,
    )
    present = per_site[:, 0] > 0  # only sites with pairs here matter
    drawn = resamples.weights if present.all() else resamples.weights[:, present]
    per_site = per_site[present]
    sums = drawn @ per_site
    kept = sums[:, 0] > 0
    if not kept.all():
        sums, drawn = sums[kept], drawn[kept]
    ratios = sums[:, 1:] / sums[:, :1]
    mean, slower, faster = (_percentiles(ratios[:, i], levels) for i in range(3))
    if np.all(per_site[:, 0] == 1):
        return Intervals(exact_median_interval(x, *levels), mean, slower, faster, "pair")
    site_index = np.unique(s, return_inverse=True)[1]  # sites with pairs, renumbered as the columns of `drawn`
    median = _median_percentiles(x, site_index, drawn, sums[:, 0], levels)
    return Intervals(median, mean, slower, faster, "site")


def _percentiles(values: np.ndarray, levels: tuple[float, float]) -> tuple[float, float]:
    """The order statistics of ``values`` at the two percentile levels, ranked symmetrically from either end."""
    ranked = np.sort(values)
    low, high = _ranks(len(ranked), levels)
    return float(ranked[low]), float(ranked[high])


def _ranks(count: int, levels: tuple[float, float]) -> tuple[int, int]:
    """0-based ranks of the two (symmetric) percentiles among ``count`` sorted resampled statistics."""
    low = min(max(math.ceil(levels[0] * count) - 1, 0), count - 1)
    return low, count - 1 - low


def _median_percentiles(
    x: np.ndarray, site: np.ndarray, drawn: np.ndarray, totals: np.ndarray, levels: tuple[float, float]
) -> tuple[float, float]:
    """Percentiles of the resampled medians. ``x`` sorted, ``site`` its sites (columns of ``drawn``), ``drawn``
    each resample's weights, ``totals`` each resample's number of pairs. A resample's median is its k-th
    smallest pair (k = ceil(total / 2)), as in `exact_median_interval`."""
    n = len(x)
    k = np.ceil(totals / 2)
    low_rank, high_rank = _ranks(len(totals), levels)
    half = 2 * math.ceil(math.sqrt(float(np.sum(np.bincount(site) ** 2)))) + 16
    while True:
        start, stop = max(n // 2 - half, 0), min(n // 2 + half, n)
        below = drawn @ np.bincount(site[:start], minlength=drawn.shape[1]).astype(float)
        running = below[:, None] + np.cumsum(drawn[:, site[start:stop]], axis=1)
        inside = running[:, -1] >= k
        position = np.where(inside, start + np.argmax(running >= k[:, None], axis=1), n)  # n: above the window
        position[below >= k] = -1  # below the window
        ranked = np.sort(position)
        low, high = ranked[low_rank], ranked[high_rank]
        if (low >= start or start == 0) and (high < stop or stop == n):
            return float(x[max(low, 0)]), float(x[min(high, n - 1)])
        half *= 2
