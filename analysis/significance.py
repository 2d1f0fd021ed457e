"""The p-values behind the verdicts, and their adjustment over a family of verdicts.

The verdict reads the median, so its test is the sign test of "the median
difference is zero", with the site as the unit: each site's pairs add up
their signs, and the reference distribution flips each site's sum as one
(exact over every flip for up to `EXACT_SITES` sites, the normal
approximation beyond). Where every site gives a single sign this is the
exact binomial sign test. Pairs of one site are not independent, so a test
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
    """Two-sided p-value of the sign test of a zero median, resampling units ``sites`` (one per difference;
    None: every difference its own unit). Zero differences carry no sign; all zero gives 1."""
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
