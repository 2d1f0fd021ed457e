"""Paired differences with known answers: a shape, a site effect, and the population's true statistics.

A simulated study visits ``sites`` sites in ``rounds`` rounds; site i keeps
its own difference u_i (normal, sd ``site_sd_ms``; 0: no site effect) and
every visit adds noise of the chosen shape, so the difference of a pair is
u_i + e_ij. The population's median, mean and tail shares are computed from
the shape's distribution (by quadrature over the site effect), not from a
sample, so the coverage of an interval (benchmarks/coverage.py), the
false verdicts of a null grid and the power of a plan (tests) are measured
against the truth.

Shapes, each with a spread of about 300 ms:
- ``normal``: N(0, 300 ms);
- ``lognormal``: 200 (exp(0.8 Z) - 1) ms, skewed to the right, median 0;
- ``bimodal``: N(-100, 100) ms, but 30 % of visits pay a stall, N(1500, 200) ms
  (the resolver stalls of issue 13, scaled down).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

SHAPES = ("normal", "lognormal", "bimodal")
_LOG_SCALE_MS, _LOG_SIGMA = 200.0, 0.8
_STALL_SHARE, _FAST, _STALL = 0.3, (-100.0, 100.0), (1500.0, 200.0)  # (mean, sd) of the two modes
_NODES = 96  # Gauss-Hermite nodes over the site effect


@dataclass(frozen=True)
class Scenario:
    """A simulated study's differences: visit noise of ``shape``, a site effect, its sites and rounds."""

    shape: str
    site_sd_ms: float
    sites: int
    rounds: int
    shift_ms: float = 0.0  # added to every difference (0: no configuration is faster)
    noise_scale: float = 1.0  # the visit noise multiplied by this


def noise(shape: str, size: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Visit noise of ``shape`` (ms)."""
    if shape == "normal":
        return rng.normal(0.0, 300.0, size)
    if shape == "lognormal":
        return _LOG_SCALE_MS * np.expm1(_LOG_SIGMA * rng.standard_normal(size))
    if shape == "bimodal":
        stall = rng.random(size) < _STALL_SHARE
        return np.where(stall, rng.normal(*_STALL, size), rng.normal(*_FAST, size))
    raise ValueError(f"unknown shape '{shape}' (have: {', '.join(SHAPES)})")


def draw(scenario: Scenario, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One simulated study: the differences (ms) and each one's site (0 .. sites - 1), rounds per site."""
    n, r = scenario.sites, scenario.rounds
    effect = rng.normal(0.0, scenario.site_sd_ms, n) if scenario.site_sd_ms > 0 else np.zeros(n)
    d = effect[:, None] + scenario.noise_scale * noise(scenario.shape, (n, r), rng) + scenario.shift_ms
    return d.ravel(), np.repeat(np.arange(n), r)


def _noise_cdf(shape: str, t: np.ndarray) -> np.ndarray:
    if shape == "normal":
        return stats.norm.cdf(t, 0.0, 300.0)
    if shape == "lognormal":
        inside = np.maximum(1 + t / _LOG_SCALE_MS, 1e-300)
        return np.where(t <= -_LOG_SCALE_MS, 0.0, stats.norm.cdf(np.log(inside) / _LOG_SIGMA))
    return _STALL_SHARE * stats.norm.cdf(t, *_STALL) + (1 - _STALL_SHARE) * stats.norm.cdf(t, *_FAST)


def _noise_mean(shape: str) -> float:
    if shape == "normal":
        return 0.0
    if shape == "lognormal":
        return _LOG_SCALE_MS * float(np.expm1(_LOG_SIGMA**2 / 2))
    return _STALL_SHARE * _STALL[0] + (1 - _STALL_SHARE) * _FAST[0]


def cdf(scenario: Scenario, t: float | np.ndarray) -> np.ndarray:
    """P(difference <= t) in the population of sites and visits."""
    t = np.asarray(t, dtype=float) - scenario.shift_ms
    if scenario.site_sd_ms <= 0:
        return _noise_cdf(scenario.shape, t / scenario.noise_scale)
    x, w = np.polynomial.hermite_e.hermegauss(_NODES)  # nodes and weights for exp(-x^2 / 2)
    effects = scenario.site_sd_ms * x
    inner = _noise_cdf(scenario.shape, (t[..., None] - effects) / scenario.noise_scale)
    return inner @ (w / w.sum())


@dataclass(frozen=True)
class Truth:
    """The population's statistics of a scenario's differences."""

    median_ms: float
    mean_ms: float
    share_slower: float  # P(difference > large_ms)
    share_faster: float  # P(difference < -large_ms)


def truth(scenario: Scenario, large_ms: float) -> Truth:
    """The true median (solved on the CDF), mean and tail shares of ``scenario``'s differences."""
    median = optimize.brentq(lambda t: float(cdf(scenario, t)) - 0.5, -1e5, 1e5, xtol=1e-6)
    mean = scenario.shift_ms + scenario.noise_scale * _noise_mean(scenario.shape)
    return Truth(
        median_ms=float(median),
        mean_ms=mean,
        share_slower=float(1 - cdf(scenario, large_ms)),
        share_faster=float(cdf(scenario, -large_ms)),
    )
