"""The p-values behind the verdicts, and their adjustment over a family of verdicts.

The verdict reads the median, so its test is the sign test of "the median
difference is zero", with the site as the unit: each site's pairs add up
their signs, and the reference distribution flips each site's sum as one
(exact over every flip for up to `EXACT_SITES` sites, the normal
approximation beyond). Where every site gives a single sign this is the
exact binomial sign test. Its null hypothesis is that a site's sign sum is
as likely positive as negative (symmetric about zero), which implies
P(slower) = P(faster); see `sign_test` for what that does and does not
assume, and how ties count. Pairs of one site are not independent, so a test
that counted them as such would find "differences" a study's sites do not
support.

A figure or table makes many verdicts, each at the same level; by chance
alone some of them would say "faster". Holm's step-down method controls the
family-wise error rate (the chance of any false verdict in the family);
Benjamini and Hochberg's the false-discovery rate (the expected share of
false ones among the verdicts made), which a study can choose instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

#: Up to this many sites with a non-zero sign sum, the p-value enumerates every flip (2^16 = 65,536).
EXACT_SITES = 16
HOLM, BH = "holm", "benjamini-hochberg"
#: The adjustment methods by the name a study or profile gives, with what they control.
ADJUSTMENTS = {HOLM: "family-wise error rate", BH: "false-discovery rate"}
#: How a caption names a method.
ADJUSTMENT_NAMES = {HOLM: "Holm", BH: "Benjamini-Hochberg"}


def sign_test(differences: np.ndarray, sites: np.ndarray | None = None) -> float:
    """Two-sided p-value of the sign test by site: units ``sites`` (one per difference; None: every difference
    its own unit, the classical sign test).

    What it tests: that each site's sign sum U_i (pairs slower minus pairs faster) is as likely to be +u as
    -u, independently between sites, so that flipping every site's sum as a whole gives the reference
    distribution of S = sum U_i (conditional on the |U_i|). That holds when, at every site, a pair is as
    likely slower as faster, and more generally when sites leaning one way are matched by sites leaning the
    other way as strongly; it implies P(slower) = P(faster) over the pairs, a zero median difference, and
    with one pair per site it is exactly that. It assumes nothing about the shape of the differences (not
    their symmetry, which the signed-rank test needs) and says nothing about their mean. Ties: a zero
    difference has no sign and adds nothing; a site whose signs cancel (U_i = 0) carries no direction and
    drops out, as ties do from the classical test, so the exact enumeration counts only sites with a
    non-zero sum. All zero gives 1."""
    d = np.asarray(differences, dtype=float)
    units = np.arange(len(d)) if sites is None else np.asarray(sites)
    if units.dtype.kind not in "iu" or (len(units) and units.min() < 0):  # not codes 0, 1, ...: make them so
        units = np.unique(units, return_inverse=True)[1]
    sums = np.bincount(units, weights=np.sign(d)) if len(d) else np.empty(0)
    sums = sums[sums != 0]
    if not len(sums):
        return 1.0
    if np.all(np.abs(sums) == 1):  # one sign per unit: the binomial sign test, exactly
        return float(stats.binomtest(int(np.count_nonzero(sums > 0)), len(sums), 0.5).pvalue)
    observed = abs(float(sums.sum()))
    if len(sums) <= EXACT_SITES:
        flips = ((np.arange(2 ** len(sums))[:, None] >> np.arange(len(sums))) & 1) * 2 - 1
        return float(np.mean(np.abs(flips @ sums) >= observed - 1e-9))
    return float(2 * stats.norm.sf(observed / math.sqrt(float(np.sum(sums**2)))))


def rate_difference_test(
    s1: np.ndarray, n1: np.ndarray, s2: np.ndarray, n2: np.ndarray, difference: float = 0.0
) -> float | None:
    """Two-sided p-value of "two success rates differ by ``difference``" (equal, unless told), with the site as
    the unit: ``s1``, ``n1`` are each site's successes and visits under the first configuration, ``s2``, ``n2``
    under the second. The difference of the pooled rates is divided by its standard error from the sites' own
    contributions (linearised, the sandwich estimate), so a site's many visits count as that site's. None with
    fewer than two sites."""
    sites = int(np.count_nonzero((np.asarray(n1) + np.asarray(n2)) > 0))
    if sites < 2 or not float(np.sum(n1)) or not float(np.sum(n2)):
        return None
    p1, c1 = _pooled(s1, n1)
    p2, c2 = _pooled(s2, n2)
    return _z_test(p1 - p2 - difference, c1 - c2, sites)


def rate_test(s: np.ndarray, n: np.ndarray, share: float) -> float | None:
    """Two-sided p-value of "the pooled success rate is ``share``", the site as the unit (each site's successes
    ``s`` of visits ``n``), as `rate_difference_test` reads a difference. None with fewer than two sites."""
    sites = int(np.count_nonzero(np.asarray(n) > 0))
    if sites < 2:
        return None
    p, contribution = _pooled(s, n)
    return _z_test(p - share, contribution, sites)


def _pooled(s: np.ndarray, n: np.ndarray) -> tuple[float, np.ndarray]:
    """The pooled rate and each site's contribution to its linearised error."""
    total = float(np.sum(n))
    p = float(np.sum(s)) / total
    return p, (np.asarray(s) - p * np.asarray(n)) / total


def _z_test(distance: float, contribution: np.ndarray, sites: int) -> float:
    """Two-sided normal p-value of ``distance`` over the sandwich error of the sites' ``contribution``."""
    error = math.sqrt(sites / (sites - 1) * float(np.sum(contribution**2)))
    if error == 0:
        return 1.0 if distance == 0 else 0.0  # every site the same: all of one, none of the other
    return float(2 * stats.norm.sf(abs(distance) / error))


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values: the i-th smallest is scaled by (m - i + 1), then made monotone."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    scaled = (len(p) - np.arange(len(p))) * p[order]
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return adjusted


def adjust(p_values: Sequence[float | None], method: str) -> list[float | None]:
    """Adjust a family's p-values together (``method``: a key of `ADJUSTMENTS`); a None (a cell with too few
    pairs for a test) stays None and is not counted in the family."""
    if method not in ADJUSTMENTS:
        raise ValueError(f"unknown adjustment '{method}' (have: {', '.join(ADJUSTMENTS)})")
    present = [i for i, p in enumerate(p_values) if p is not None]
    if not present:
        return list(p_values)
    p = np.array([p_values[i] for i in present], dtype=float)
    done = holm(p) if method == HOLM else stats.false_discovery_control(p, method="bh")
    adjusted: list[float | None] = list(p_values)
    for i, value in zip(present, done, strict=True):
        adjusted[i] = float(value)
    return adjusted


def family_size(p_values: Sequence[float | None]) -> int:
    """How many verdicts of a family were tested (and so adjusted together)."""
    return sum(p is not None for p in p_values)
