"""Bootstrap intervals of paired differences, with the site as the unit that is resampled.

A study visits each site in several rounds, and one site's pairs resemble
each other (the same hostnames, the same page weight): they are not
independent draws. The cluster bootstrap resamples sites, each with all its
rounds, within its stratum (the vantage point and browser: `analysis.pairs.STRATA`), so
an interval is as wide as the number of sites warrants, not the number of
pairs. Where every site has a single pair the two are the same.

The median is one statistic throughout (`median`, numpy's): the middle value
of the sorted differences, or the mean of the two middle ones for an even
count. The point estimate, every resample's median and so the interval read
from them all use it; it is antisymmetric (the median of -d is minus the
median of d), so a cell read the other way round is its negation exactly.

A resample is a vector of weights, how many times each site was drawn, so
the resampled mean and tail shares are ratios of weighted sums (one matrix
product for all resamples and all of a grid's cells), and the resampled
median is found in a window of the sorted differences around the sample
median: its rank moves by about the square root of the sum over sites of
(pairs below the median - half the site's pairs)^2, and a window that turns
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


@dataclass(frozen=True)
class Resamples:
    """Bootstrap resamples of a table's sites: ``weights[b, s]`` is how often site s was drawn in resample b.
    Each stratum (vantage point and browser) keeps its number of sites in every resample. ``by_site`` is the same counts
    site by site (``weights.T`` as int32, rows contiguous): the median's window gathers sites' rows."""

    weights: np.ndarray  # (resamples, sites), float64 holding small integers: for matrix products
    by_site: np.ndarray  # (sites, resamples), int32


def draw_resamples(strata: np.ndarray, count: int, seed: int) -> Resamples:
    """``count`` resamples of sites whose stratum codes are ``strata`` (one per site), drawn with replacement
    within each stratum, from ``seed`` (the same data and seed give the same intervals)."""
    strata = np.asarray(strata)
    rng = np.random.default_rng(seed)
    by_site = np.zeros((len(strata), count), dtype=np.int32)
    for stratum in np.unique(strata):
        members = np.flatnonzero(strata == stratum)
        m = len(members)
        picks = rng.integers(0, m, size=(count, m)) + (np.arange(count) * m)[:, None]
        by_site[members, :] = np.bincount(picks.ravel(), minlength=count * m).reshape(count, m).T
    return Resamples(np.ascontiguousarray(by_site.T, dtype=np.float64), by_site)


@dataclass(frozen=True)
class Intervals:
    """Intervals of the median, mean and the two tail shares of paired differences, and what was resampled."""

    median: tuple[float, float]
    mean: tuple[float, float]
    slower: tuple[float, float]  # share of pairs above +large_ms
    faster: tuple[float, float]  # share of pairs below -large_ms
    unit: str  # "site": sites resampled with all their pairs; "pair": every site has one pair (the same thing)


@dataclass(frozen=True)
class Sample:
    """One cell's pairs ready to be resampled: sorted, each one's site, and the per-site sums the resamples
    weigh (pairs, their sum, those above +large_ms, those below -large_ms, those before the median's window)."""

    x: np.ndarray
    sites: np.ndarray
    per_site: np.ndarray  # (sites, 5)
    window: _Window


def sample(differences: np.ndarray, sites: np.ndarray, n_sites: int, large_ms: float) -> Sample:
    """A cell's ``differences`` with their ``sites`` (indices among ``n_sites``), sorted and summed by site."""
    order = np.argsort(differences, kind="stable")
    x, s = np.asarray(differences, dtype=float)[order], np.asarray(sites)[order]
    window = _Window.around(s, n_sites)
    per_site = np.stack(
        [
            np.bincount(s, minlength=n_sites).astype(float),
            np.bincount(s, weights=x, minlength=n_sites),
            np.bincount(s, weights=(x > large_ms).astype(float), minlength=n_sites),
            np.bincount(s, weights=(x < -large_ms).astype(float), minlength=n_sites),
            np.bincount(s[: window.start], minlength=n_sites).astype(float),
        ],
        axis=1,
    )
    return Sample(x, s, per_site, window)


def intervals_of(samples: list[Sample], resamples: Resamples, levels: list[tuple[float, float]]) -> list[Intervals]:
    """The intervals of several cells (each at its percentile ``levels``), their resampled sums from one matrix
    product: a grid's cells share their resamples, and one large product is far cheaper than many small ones.
    A resample that drew none of a cell's sites (the others had no pair there) is left out of that cell: its
    distribution is that of resamples with at least one pair."""
    if not samples:
        return []
    sums = resamples.weights @ np.hstack([s.per_site for s in samples])
    return [
        _finish(s, sums[:, 5 * i : 5 * i + 5], resamples, lv)
        for i, (s, lv) in enumerate(zip(samples, levels, strict=True))
    ]


def intervals(
    differences: np.ndarray,
    sites: np.ndarray,
    resamples: Resamples,
    levels: tuple[float, float],
    large_ms: float,
) -> Intervals:
    """Intervals of row - column ``differences`` whose sites are ``sites`` (indices into the resamples' sites),
    at the percentiles ``levels`` (one cell of `intervals_of`)."""
    one = sample(differences, sites, resamples.weights.shape[1], large_ms)
    return intervals_of([one], resamples, [levels])[0]


def _finish(cell: Sample, sums: np.ndarray, resamples: Resamples, levels: tuple[float, float]) -> Intervals:
    """A cell's intervals from its resampled sums (one row per resample, the columns of `Sample.per_site`)."""
    kept = sums[:, 0] > 0
    if not kept.all():
        sums = sums[kept]
    ratios = sums[:, 1:4] / sums[:, :1]
    mean, slower, faster = (percentiles(ratios[:, i], levels) for i in range(3))
    median = _median_percentiles(cell.x, cell.sites, resamples, kept, sums[:, 0], sums[:, 4], cell.window, levels)
    single = np.all(cell.per_site[cell.per_site[:, 0] > 0, 0] == 1)
    return Intervals(median, mean, slower, faster, "pair" if single else "site")


def median(values: np.ndarray) -> float:
    """The median as this analysis defines it everywhere: the middle value, or the mean of the two middle
    values for an even count (numpy's)."""
    return float(np.median(np.asarray(values, dtype=float)))


@dataclass(frozen=True)
class _Window:
    """The sorted pairs [start, stop) in which the resampled medians are looked for, ``half`` each side of the
    sample median."""

    start: int
    stop: int
    half: int

    @classmethod
    def around(cls, site: np.ndarray, n_sites: int, half: int | None = None) -> _Window:
        """A window of ``half`` pairs each side of the median; by default four times the spread of the
        resampled median's rank: the square root of the sum over sites of (pairs below the median - half the
        site's pairs)^2, which a site's pairs falling together on one side make large."""
        n = len(site)
        if half is None:
            imbalance = np.bincount(site[: n // 2], minlength=n_sites) - np.bincount(site, minlength=n_sites) / 2
            half = 4 * math.ceil(math.sqrt(float(np.sum(imbalance**2)))) + 16
        return cls(max(n // 2 - half, 0), min(n // 2 + half, n), half)


def percentiles(values: np.ndarray, levels: tuple[float, float]) -> tuple[float, float]:
    """The order statistics of ``values`` (resampled statistics) at the two percentile levels, ranked
    symmetrically from either end."""
    ranked = np.sort(values)
    low, high = _ranks(len(ranked), levels)
    return float(ranked[low]), float(ranked[high])


def _ranks(count: int, levels: tuple[float, float]) -> tuple[int, int]:
    """0-based ranks of the two (symmetric) percentiles among ``count`` sorted resampled statistics."""
    low = min(max(math.ceil(levels[0] * count) - 1, 0), count - 1)
    return low, count - 1 - low


def _median_percentiles(
    x: np.ndarray,
    site: np.ndarray,
    resamples: Resamples,
    kept: np.ndarray,
    totals: np.ndarray,
    below: np.ndarray,
    window: _Window,
    levels: tuple[float, float],
) -> tuple[float, float]:
    """Percentiles of the resampled medians (of the ``kept`` resamples, with ``totals`` pairs and ``below``
    of them before the window). ``x`` sorted, ``site`` its sites. A resample's median is `median`'s: the
    mean of its k1-th and k2-th smallest pairs (k1 = ceil(total / 2), k2 = floor(total / 2) + 1, the same
    pair for an odd total); the j-th lies where the resample's running count of pairs, down the sorted
    differences, first reaches j. Only the window is counted, so a median whose pairs lie outside it is only
    bounded; the window is widened until the bounds agree at both percentiles."""
    n, n_sites = len(x), resamples.weights.shape[1]
    low_rank, high_rank = _ranks(len(totals), levels)
    ranks = (np.ceil(totals / 2), np.floor(totals / 2) + 1)
    by_site = resamples.by_site if kept.all() else resamples.by_site[:, kept]
    while True:
        running = by_site[site[window.start : window.stop]]  # a copy: summed in place, in its own int32
        np.cumsum(running, axis=0, out=running)  # (a dtype= argument makes numpy's accumulate ten times slower)
        low_bound, high_bound = np.zeros(len(totals)), np.zeros(len(totals))
        for k in ranks:
            short = np.count_nonzero(running < (k - below)[None, :], axis=0)  # window pairs before the k-th
            position = window.start + short  # window.stop: past the window
            inside = x[np.minimum(position, n - 1)]
            before = below >= k  # the k-th pair lies before the window: at most x[start - 1]
            past = position >= window.stop  # after it: at least x[stop]
            low_bound += np.where(before, -np.inf, np.where(past, x[min(window.stop, n - 1)], inside)) / 2
            high_bound += np.where(before, x[max(window.start - 1, 0)], np.where(past, np.inf, inside)) / 2
        low_bound.sort()
        high_bound.sort()
        if low_bound[low_rank] == high_bound[low_rank] and low_bound[high_rank] == high_bound[high_rank]:
            return float(low_bound[low_rank]), float(low_bound[high_rank])
        window = _Window.around(site, n_sites, 2 * window.half)
        below = (resamples.weights @ np.bincount(site[: window.start], minlength=n_sites).astype(float))[kept]
