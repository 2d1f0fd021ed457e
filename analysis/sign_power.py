"""The power of the sign test by site, exactly: every way n sites' sign sums can fall, and what the test says of it.

The verdict's test (analysis/significance.py) sums each site's signs, U_i,
and reads S = sum U_i against every flip of the sites' sums as wholes:
exactly (p = P(|S'| >= |S|) over the flips) where at most `EXACT_SITES`
sites have a non-zero sum or every sum is +-1, else by the normal
approximation (|S| / sqrt(sum U_i^2)). Given how many sites have each
magnitude |U| (a composition of the n sites), the p-value depends on |S|
alone, so the test rejects from some |S| on (`threshold`); and S, given
the composition, is a sum of independent binomials: how many of the sites of
each magnitude came out positive. The power is the sum over compositions
of their chance times P(|S| >= threshold), exact for sites whose sign
counts are independent draws from one distribution. Compositions too
unlikely to matter (below 1e-12 each) are skipped.
"""

from __future__ import annotations

import math
from functools import lru_cache
from itertools import combinations

import numpy as np
from scipy import special, stats

from analysis.significance import EXACT_SITES

#: The power is enumerated exactly up to this many compositions (n + r/2 choose r/2, r pairs per site) and
#: this much work (compositions x n x r: the convolutions' length); beyond, n is large enough for the normal
#: approximation (r = 1 has one composition, the binomial test: exact up to 500,000 sites).
EXACT_COMPOSITIONS = 5000
EXACT_WORK = 500_000


def enumerable(n: int, r: int) -> bool:
    """Whether `exact_power` is cheap enough for n sites of r pairs each."""
    compositions = math.comb(n + r // 2, r // 2)
    return compositions <= EXACT_COMPOSITIONS and compositions * n * r <= EXACT_WORK


_NEGLIGIBLE = 1e-12


def exact_power(probabilities: np.ndarray, n: int, level: float) -> float:
    """The chance that the sign test by site rejects at ``level`` (p < level) with ``n`` sites whose number of
    positive pairs k (of r = len(probabilities) - 1) has the chances ``probabilities``."""
    r = len(probabilities) - 1
    signed = 2 * np.arange(r + 1) - r
    values = np.unique(np.abs(signed))  # the magnitudes |U| a site can have, ascending
    mass = np.array([probabilities[np.abs(signed) == a].sum() for a in values])
    with np.errstate(invalid="ignore", divide="ignore"):
        positive = np.array([probabilities[signed == a].sum() for a in values]) / mass  # P(U > 0 | |U| = a)
        log_mass = np.log(mass)
    counts = _compositions(n, len(values))
    impossible = ((counts > 0) & (mass == 0)[None, :]).any(axis=1)  # a magnitude that never happens, drawn
    terms = counts * np.where(mass > 0, log_mass, 0.0)[None, :]
    log_weights = special.gammaln(n + 1) - special.gammaln(counts + 1).sum(axis=1) + terms.sum(axis=1)
    weights = np.where(impossible, 0.0, np.exp(log_weights))
    keep = weights > _NEGLIGIBLE
    chances = dict(zip((int(a) for a in values), np.nan_to_num(positive, nan=0.5), strict=True))
    pieces: dict[tuple[int, int], np.ndarray] = {}  # (a, count) -> P(j of count sites of magnitude a positive)
    log_factorial = special.gammaln(np.arange(1, n + 2))  # log k!, k = 0 .. n
    total = 0.0
    for composition, weight in zip(counts[keep], weights[keep], strict=True):
        parts = tuple((int(a), int(c)) for a, c in zip(values, composition, strict=True) if a > 0 and c > 0)
        at = threshold(parts, level)
        if at is None:
            continue
        for a, count in parts:
            if (a, count) not in pieces:
                j = np.arange(count + 1)
                log_pmf = log_factorial[count] - log_factorial[j] - log_factorial[count - j]
                pieces[a, count] = np.exp(
                    log_pmf + special.xlogy(j, chances[a]) + special.xlog1py(count - j, -chances[a])
                )
        distribution = _convolved(parts, pieces)
        reach = (len(distribution) - 1) // 2
        total += weight * float(distribution[np.abs(np.arange(-reach, reach + 1)) >= at].sum())
    return min(total, 1.0)


def _compositions(n: int, parts: int) -> np.ndarray:
    """Every way to split n sites among ``parts`` magnitudes: (compositions, parts) counts (stars and bars)."""
    if parts == 1:
        return np.array([[n]])
    bars = np.array(list(combinations(range(n + parts - 1), parts - 1)))
    edges = np.hstack([np.full((len(bars), 1), -1), bars, np.full((len(bars), 1), n + parts - 1)])
    return np.diff(edges, axis=1) - 1


def _convolved(parts: tuple[tuple[int, int], ...], pieces: dict[tuple[int, int], np.ndarray]) -> np.ndarray:
    """The distribution of S = sum of the site sums, over -T .. T (T = sum of a * count), for ``parts``
    (magnitude a, sites with it): of a's sites, j are positive with chance pieces[a, count][j]."""
    distribution = np.ones(1)
    for a, count in parts:
        piece = np.zeros(2 * a * count + 1)
        piece[:: 2 * a] = pieces[a, count]
        distribution = np.convolve(distribution, piece)
    return distribution


@lru_cache(maxsize=65536)
def threshold(parts: tuple[tuple[int, int], ...], level: float) -> int | None:
    """The smallest |S| at which the sign test by site rejects (p < level) for sites of these magnitudes
    (``parts``: (magnitude, sites with it), non-zero ones only), as analysis.significance.sign_test decides;
    None when no |S| does (every site one way is not enough)."""
    sites = sum(count for _, count in parts)
    if not sites:
        return None
    reach = sum(a * count for a, count in parts)
    if sites <= EXACT_SITES or all(a == 1 for a, _ in parts):
        null = _convolved(parts, {(a, c): stats.binom.pmf(np.arange(c + 1), c, 0.5) for a, c in parts})
        both = null[reach:] + null[reach::-1]  # P(|S'| = s), s = 0 .. reach
        both[0] = null[reach]
        tail = np.cumsum(both[::-1])[::-1]  # P(|S'| >= s)
        below = np.flatnonzero(tail < level)
        return int(below[0]) if len(below) else None
    squares = sum(a * a * count for a, count in parts)
    z = float(stats.norm.isf(level / 2))
    at = math.floor(z * math.sqrt(squares)) + 1  # 2 sf(s / sqrt(Q)) < level: s > z sqrt(Q)
    return at if at <= reach else None
