"""The power of a study before its crawl: the smallest median difference its sites and rounds detect.

A cell's verdict needs the sign test by site (analysis/significance.py) to
reject after the grid's adjustment; the power is that test's, computed as
it decides. A spread says how a site's r pairs fall at a median difference
delta: P(K = k), k of them positive (`Spread.site_sums`). n sites drawn
independently from it, the sign test by site rejects with a chance that
`analysis.sign_power.exact_power` enumerates exactly (the exact test for up
to 16 sites with a non-zero sum, the normal approximation beyond, as the
test itself does) wherever the enumeration is small; for many sites with
several pairs each, by the normal approximation of the test's statistic:
S = sum of the site sums U, divided by sqrt(sum U^2),

    Phi((n E[U] - z sqrt(n E[U^2])) / sqrt(n Var U)),  z = Phi^-1(1 - a/2).

The level a is 1 - confidence divided by the family's size: Holm's first
step, where a pair is rejected when it is the only one that differs; so is
Benjamini-Hochberg's (its first step is the same, and null pairs rarely
come first). Where other pairs differ too, both are less strict for the
rest, so the power is at least this. The verdict also needs the interval
clear of zero, which the power does not model (the two agree but at the
margin). A vantage point that measures the same sites adds pairs per site,
not sites (`Plan.places`).

The spreads: a normal model with a share of the variance between sites (the
profile's defaults, for a study with no pilot yet), integrated over the site
effect; or a pilot's pairs (centred on their median, shifted by delta: a
pure shift), whose mean sign and within-site sign correlation give a
beta-binomial. The rounds of a plan add pairs per site, whose signs
correlate, so past some number of rounds only more sites help;
`rounds_needed` says when that is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np
import pandas as pd
from scipy import stats

from analysis.pairs import PAIR_INDEX, Configuration, load_time_table, paired, site_codes
from analysis.resampling import median
from analysis.settings import AnalysisSettings
from analysis.sign_power import enumerable, exact_power

MOST_ROUNDS = 1000


class Spread(Protocol):
    """What the power of a cell depends on: how a site's signs fall at a median difference delta."""

    @property
    def source(self) -> str:
        """Where the spread comes from, for the reader."""
        ...

    def site_sums(self, delta_ms: float, pairs: int) -> np.ndarray:
        """P(K = k), k = 0 .. pairs: the chance that k of a site's ``pairs`` differences are positive (its sign
        sum is 2k - pairs) when the cell's median difference is ``delta_ms``."""
        ...


#: Sites drawn (as equally likely quantiles of the site effect) to integrate a normal spread's site sums.
_SITE_QUANTILES = 512


@dataclass(frozen=True)
class NormalSpread:
    """Differences normal with sd ``sd_ms``, ``site_share`` of their variance between sites (profile defaults):
    a site's difference is its effect (sd sqrt(share) sd_ms) plus independent visit noise."""

    sd_ms: float
    site_share: float
    source: str = ""

    def site_sums(self, delta_ms: float, pairs: int) -> np.ndarray:
        quantiles = (np.arange(_SITE_QUANTILES) + 0.5) / _SITE_QUANTILES
        effect = math.sqrt(self.site_share) * self.sd_ms * stats.norm.ppf(quantiles)
        noise = math.sqrt(max(1 - self.site_share, 0.0)) * self.sd_ms
        centre = delta_ms + effect
        positive = stats.norm.cdf(centre / noise) if noise > 0 else (centre > 0).astype(float)
        return stats.binom.pmf(np.arange(pairs + 1)[None, :], pairs, positive[:, None]).mean(axis=0)


@dataclass(frozen=True)
class PilotSpread:
    """A pilot's pairs of one cell: their differences centred on the median, and each one's site (unit)."""

    centred: np.ndarray
    sites: np.ndarray  # codes 0 .. k-1
    fallback_share: float  # the profile's site share, for a pilot with one pair per site
    source: str = ""

    @classmethod
    def of(cls, differences: np.ndarray, sites: np.ndarray, fallback_share: float, source: str) -> PilotSpread:
        d = np.asarray(differences, dtype=float)
        codes = np.unique(np.asarray(sites), return_inverse=True)[1]
        return cls(d - median(d), codes, fallback_share, source)

    @property
    def repeated(self) -> bool:
        """Whether some site has more than one pair, so the pilot shows how a site's signs go together."""
        return bool(np.any(np.bincount(self.sites) > 1))

    def moments(self, delta_ms: float) -> tuple[float, float]:
        """(theta, c): the mean sign and the covariance of two signs at one site, at median difference delta."""
        signs = np.sign(self.centred + delta_ms)
        theta = float(np.mean(signs))
        if not self.repeated:  # the arcsine law of a normal pair with this share between sites
            return theta, (2 / math.pi) * math.asin(self.fallback_share) * (1 - theta**2)
        sums = np.bincount(self.sites, weights=signs)
        sizes = np.bincount(self.sites)
        together = float(np.sum(sums**2 - np.bincount(self.sites, weights=signs**2)))
        return theta, together / float(np.sum(sizes * (sizes - 1))) - theta**2

    def site_sums(self, delta_ms: float, pairs: int) -> np.ndarray:
        """The beta-binomial with the pilot's mean sign and within-site sign correlation (its moments): a
        site's chance of a positive pair varies between sites as a beta distribution whose spread gives that
        correlation (an assumption about the shape; the two moments are the pilot's)."""
        theta, c = self.moments(delta_ms)
        p = min(max((1 + theta) / 2, 0.0), 1.0)
        k = np.arange(pairs + 1)
        correlation = c / (1 - theta**2) if theta**2 < 1 else 1.0
        if correlation <= 0 or p in (0.0, 1.0):  # independent signs (a negative correlation read as none)
            return stats.binom.pmf(k, pairs, p)
        if correlation >= 1:  # a site's pairs all fall one way
            return np.where(k == pairs, p, 0.0) + np.where(k == 0, 1 - p, 0.0)
        scale = 1 / correlation - 1
        return stats.betabinom.pmf(k, pairs, p * scale, (1 - p) * scale)


@dataclass(frozen=True)
class Plan:
    """What a study plans for a cell: its sites, the vantage points that each measure all of them, its rounds
    and the family's size."""

    sites: int
    rounds: int
    family: int = 1
    confidence: float = 0.95
    power: float = 0.8
    pair_yield: float = 1.0  # pairs per site and round (a pilot's share of visits that paired)
    places: int = 1  # vantage points: each adds a pair per site and round, not a site

    @property
    def pairs_per_site(self) -> int:
        """The pairs each site gives a cell (rounds x vantage points x yield, rounded; at least one)."""
        return max(1, round(self.rounds * self.places * self.pair_yield))

    @property
    def level(self) -> float:
        """The level each verdict is tested at: 1 - confidence over the family's size (see the module)."""
        return (1 - self.confidence) / self.family


def power(delta_ms: float, plan: Plan, spread: Spread) -> float:
    """The chance that a cell whose median difference is ``delta_ms`` gets a direction from the sign test by
    site at the plan's level: exactly where the site sums' compositions are few enough to enumerate
    (analysis.sign_power.enumerable), else by the normal approximation."""
    r, n = plan.pairs_per_site, plan.sites
    probabilities = spread.site_sums(abs(delta_ms), r)
    if enumerable(n, r):
        return exact_power(probabilities, n, plan.level)
    return _normal_power(probabilities, n, plan.level)


def _normal_power(probabilities: np.ndarray, n: int, level: float) -> float:
    """The sign test's power by the normal approximation: S = sum of n site sums U, divided by sqrt(sum U^2)."""
    u = 2 * np.arange(len(probabilities)) - (len(probabilities) - 1)
    mean, square = float(probabilities @ u), float(probabilities @ u**2)
    variance = square - mean**2
    z = float(stats.norm.ppf(1 - level / 2))
    if variance <= 1e-12:
        return 1.0 if abs(mean) > 0 and math.sqrt(n) > z else 0.0  # the statistic is sqrt(n) exactly
    return float(stats.norm.cdf((n * abs(mean) - z * math.sqrt(n * square)) / math.sqrt(n * variance)))


def detectable(plan: Plan, spread: Spread, most_ms: float = 1e6) -> float | None:
    """The smallest median difference (ms) detected with the plan's power; None if none up to ``most_ms``."""
    high = 1.0
    while power(high, plan, spread) < plan.power:
        high *= 2
        if high > most_ms:
            return None
    low = 0.0
    while high - low > max(0.1, high * 1e-4):
        middle = (low + high) / 2
        low, high = (low, middle) if power(middle, plan, spread) >= plan.power else (middle, high)
    return high


def rounds_needed(delta_ms: float, plan: Plan, spread: Spread, most: int = MOST_ROUNDS) -> int | None:
    """The fewest rounds with which the plan's sites detect ``delta_ms``; None if no number up to ``most``
    does (the sites are too few: more rounds of the same sites stop helping)."""
    if power(delta_ms, _with(plan, rounds=most), spread) < plan.power:
        return None
    low, high = 0, most  # power(low) < target <= power(high), rounds being monotone here
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (
            (low, middle) if power(delta_ms, _with(plan, rounds=middle), spread) >= plan.power else (middle, high)
        )
    return high


def sites_needed(delta_ms: float, plan: Plan, spread: Spread, most: int = 10**7) -> int | None:
    """The fewest sites with which the plan's rounds detect ``delta_ms``; None past ``most``."""
    if power(delta_ms, _with(plan, sites=most), spread) < plan.power:
        return None
    low, high = 1, most
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (
            (low, middle) if power(delta_ms, _with(plan, sites=middle), spread) >= plan.power else (middle, high)
        )
    return high


def _with(plan: Plan, **changes: int) -> Plan:
    return replace(plan, **changes)


#: Fewer pilot pairs than this in a cell, and the cell is planned from the profile's spread instead.
MIN_PILOT_PAIRS = 20


@dataclass(frozen=True)
class CellPower:
    """What one cell of a planned grid can detect, and where its spread came from."""

    network: str
    row: Configuration
    column: Configuration
    source: str
    plan: Plan  # as planned for this cell: the family's size, the pilot's pair yield, the power
    detectable_ms: float | None  # at the plan's power; None: nothing up to 1,000 s
    difference_ms: float | None = None  # the difference asked about, if any
    rounds_needed: int | None = None  # for it, with the plan's sites (None: no number of rounds suffices)
    sites_needed: int | None = None  # for it, with the plan's rounds


def study_power(
    networks: list[str],
    configurations: list[Configuration],
    plan: Plan,
    settings: AnalysisSettings,
    pilot: pd.DataFrame | None = None,
    difference_ms: float | None = None,
) -> list[CellPower]:
    """Every cell of a planned study (each network, each two configurations): its detectable difference and,
    for ``difference_ms``, the rounds and sites that detect it. Spreads come from the ``pilot``'s visits
    (a store's, read by analysis.results) where it has the cell, else from the profile's `[power]`."""
    if settings.power is None:
        raise ValueError("the analysis profile has no [power] section: no spread to plan with")
    defaults = settings.power
    family = max(len(configurations) * (len(configurations) - 1) // 2, 1)
    cells = []
    planned: dict[tuple[NormalSpread, Plan], CellPower] = {}  # cells planned from one profile spread are alike
    for network in networks:
        fallback = defaults.spread(network)
        normal = NormalSpread(
            fallback.sd_ms,
            fallback.site_share,
            f"profile: sd {fallback.sd_ms:g} ms, site share {fallback.site_share:g}",
        )
        table = load_time_table(pilot, network) if pilot is not None else None
        for i, row in enumerate(configurations):
            for column in configurations[i + 1 :]:
                spread: Spread = normal
                pair_yield = 1.0
                if table is not None and pilot is not None:
                    spread, pair_yield = _pilot_spread(pilot, table, network, (row, column), normal)
                cell_plan = replace(plan, family=family, pair_yield=pair_yield, power=defaults.power)
                if isinstance(spread, NormalSpread):
                    if (spread, cell_plan) not in planned:
                        planned[spread, cell_plan] = _cell(network, row, column, spread, cell_plan, difference_ms)
                    cells.append(replace(planned[spread, cell_plan], network=network, row=row, column=column))
                else:
                    cells.append(_cell(network, row, column, spread, cell_plan, difference_ms))
    return cells


def _pilot_spread(
    pilot: pd.DataFrame,
    table: pd.DataFrame,
    network: str,
    pair: tuple[Configuration, Configuration],
    normal: NormalSpread,
) -> tuple[Spread, float]:
    """A cell's spread from the pilot's pairs and the share of its site-round slots that paired; the profile's
    when the pilot has fewer than `MIN_PILOT_PAIRS` pairs there."""
    d, mask = paired(table, *pair)
    if len(d) < MIN_PILOT_PAIRS:
        return NormalSpread(normal.sd_ms, normal.site_share, f"{normal.source}; the pilot has {len(d)} pairs"), 1.0
    codes = site_codes(table)[0][mask]
    slots = len(pilot[pilot["network"].astype(str) == network][PAIR_INDEX].drop_duplicates())
    sites = len(np.unique(codes))
    spread = PilotSpread.of(d, codes, normal.site_share, f"pilot: {len(d)} pairs at {sites} sites")
    if not spread.repeated:
        spread = replace(spread, source=spread.source + ", one each (site share from the profile)")
    return spread, min(len(d) / slots, 1.0) if slots else 1.0


def _cell(
    network: str, row: Configuration, column: Configuration, spread: Spread, plan: Plan, difference: float | None
) -> CellPower:
    cell = CellPower(network, row, column, spread.source, plan, detectable(plan, spread))
    if difference is None:
        return cell
    return replace(
        cell,
        difference_ms=difference,
        rounds_needed=rounds_needed(difference, plan, spread),
        sites_needed=sites_needed(difference, plan, spread),
    )
