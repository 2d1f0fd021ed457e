"""The Hodges-Lehmann estimate of paired differences: the median of the Walsh averages, without forming them.

The Walsh averages of n differences are the n(n+1)/2 means (x_i + x_j) / 2,
i <= j; their median is the location estimate that goes with the signed-rank
test, less swayed than the mean by a tail and less coarse than the median.
A grid cell has tens of thousands of pairs, hence hundreds of millions of
averages, so the median is selected instead: how many averages lie at or
below t is counted in O(n log n) from the sorted differences (for each
x_i, the x_j <= 2t - x_i), t is bisected until few averages are left
between the bounds, and those few are formed and ranked. The result is
exact (up to averages that differ in the last bits of a float).
"""

from __future__ import annotations

import numpy as np

#: Up to this many differences, every Walsh average is formed (about 2 million of them).
DIRECT = 2000


def hodges_lehmann(differences: np.ndarray) -> float:
    """The median of the Walsh averages of ``differences`` (for an even count, the mean of the middle two)."""
    x = np.sort(np.asarray(differences, dtype=float))
    n = len(x)
    if n == 0:
        raise ValueError("no values")
    if n <= DIRECT:
        return _direct(x)
    total = n * (n + 1) // 2
    lower, upper = (total + 1) // 2, total // 2 + 1  # 1-based ranks of the middle one or two
    middle = _middle(x, lower, upper)
    return float((middle[0] + middle[1]) / 2)


def _direct(x: np.ndarray) -> float:
    i, j = np.triu_indices(len(x))
    return float(np.median((x[i] + x[j]) / 2))


def _count(x: np.ndarray, t: float) -> tuple[int, np.ndarray]:
    """How many Walsh averages are <= t, and for each i the end (exclusive) of the j with x_i + x_j <= 2t."""
    ends = np.searchsorted(x, (2 * t - x)[::-1], side="right")[::-1]  # ascending keys: numpy's fast path
    return int(np.sum(np.maximum(ends - np.arange(len(x)), 0))), ends


def _middle(x: np.ndarray, lower: int, upper: int) -> tuple[float, float]:
    """The ``lower``-th and ``upper``-th smallest (1-based) Walsh averages of sorted ``x``: a bracket around
    a sub-sample's estimate, narrowed (by interpolating the counts, or halving) until at most n averages are
    left in it, which are then formed and ranked."""
    n = len(x)
    guess = _direct(x[:: -(-n // 400)])
    step = max(float(x[3 * n // 4] - x[n // 4]), 1e-6) / 20
    (low, below, low_ends), (high, above, high_ends) = _bracket(x, guess, step, lower, upper)
    halve = False
    while above - below > n:
        width = high - low
        share = 0.5 if halve else ((lower + upper) / 2 - below) / (above - below)
        t = low + width * min(max(share, 1 / 16), 15 / 16)
        if t in (low, high):  # no float left between: the averages left are all equal to high
            return high, high
        count, ends = _count(x, t)
        if count >= upper:
            high, above, high_ends = t, count, ends
        elif count < lower:
            low, below, low_ends = t, count, ends
        else:
            return _middle_of(x, lower, upper, (low, below, low_ends), (t, count, ends), (high, above, high_ends))
        halve = high - low > width / 2 and not halve
    starts = np.maximum(low_ends, np.arange(n))
    between = _formed(x, starts, high_ends)
    return float(between[lower - below - 1]), float(between[upper - below - 1])


Bound = tuple[float, int, np.ndarray]  # t, the averages <= t, and the ends `_count` gives


def _bracket(x: np.ndarray, guess: float, step: float, lower: int, upper: int) -> tuple[Bound, Bound]:
    """Bounds around ``guess`` with fewer than ``lower`` averages at or below the low one and at least
    ``upper`` at or below the high one, widened by doubling ``step`` until they hold."""
    low, high = guess - step, guess + step
    below, low_ends = _count(x, low)
    while below >= lower:
        step *= 2
        low = min(guess - step, float(x[0]) - step)
        below, low_ends = _count(x, low)
    above, high_ends = _count(x, high)
    while above < upper:
        step *= 2
        high = max(guess + step, float(x[-1]))
        above, high_ends = _count(x, high)
    return (low, below, low_ends), (high, above, high_ends)


def _middle_of(x: np.ndarray, lower: int, upper: int, low: Bound, at: Bound, high: Bound) -> tuple[float, float]:
    """The two middle averages when ``at`` splits them (lower <= count(at) < upper): each from its own side."""
    n = len(x)
    first = _formed(x, np.maximum(low[2], np.arange(n)), at[2])
    second = _formed(x, np.maximum(at[2], np.arange(n)), high[2])
    return float(first[lower - low[1] - 1]), float(second[upper - at[1] - 1])


def _formed(x: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The Walsh averages (x_i + x_j) / 2 with starts[i] <= j < ends[i], sorted."""
    lengths = np.maximum(ends - starts, 0)
    i = np.repeat(np.arange(len(x)), lengths)
    j = starts[i] + np.arange(len(i)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.sort((x[i] + x[j]) / 2)
