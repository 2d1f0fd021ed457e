"""The link check's verdicts: what the profile promises, and whether what was measured keeps to it.

The median RTT within 2 ms of the target, each direction's configured loss
inside the exact 95 % interval of the loss measured, each direction's rate
within 5 % of the profile's.

The median, not the mean: the profile's delay is the centre of a symmetric
spread (its jitter), and what a busy machine adds to a probe is one-sided
and comes in bursts (a delayer woken late holds back every packet behind
it), so a few probes in a hundred can move the mean by more than the
tolerance while the link delays the typical packet by just the profile's
delay. The mean and its SD stay in the record (docs/network.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from harness.shaping.link_profile import LinkProfile

#: The rate verdict: the measured bottleneck rate lies within 5 % of the profile's (issue 13).
RATE_TOLERANCE = 0.05


class LinkMeasures(Protocol):
    """What a link check measured (a `LinkCheck`): what the verdicts judge."""

    probes: int
    rtt_median_ms: float | None
    uplink_lost: int
    downlink_lost: int
    uplink_rate_mbit: float | None
    downlink_rate_mbit: float | None


def rtt_target_ms(profile: LinkProfile, base_rtt_ms: float) -> float:
    """The RTT the link should show: the place's own (``base_rtt_ms``) plus what the profile adds."""
    return round(base_rtt_ms + profile.round_trip()["added_rtt_ms"], 3)


def link_targets(profile: LinkProfile, base_rtt_ms: float) -> dict[str, float | None]:
    """What the profile promises: the RTT (``rtt_mean_ms``, the key stored checks have), and each direction's
    loss and rate (None: unlimited)."""
    up, down = profile.uplink, profile.downlink
    return {
        "rtt_mean_ms": rtt_target_ms(profile, base_rtt_ms),
        "uplink_loss_percent": up.loss_percent,
        "downlink_loss_percent": down.loss_percent,
        "uplink_rate_mbit": up.rate_mbit,
        "downlink_rate_mbit": down.rate_mbit,
    }


def link_verdicts(measured: LinkMeasures, profile: LinkProfile, base_rtt_ms: float) -> dict[str, bool | None]:
    """Each measure against its target: True (on target), False (off), None (no target to judge by)."""
    up, down = profile.uplink, profile.downlink
    rtt = measured.rtt_median_ms
    sent = measured.probes
    seen = sent - measured.uplink_lost  # the probes the echo saw: the downlink's trials
    return {
        "rtt_within_2ms": rtt is not None and abs(rtt - rtt_target_ms(profile, base_rtt_ms)) <= 2.0,
        "uplink_loss_in_95ci": within(up.loss_percent, binomial_interval(measured.uplink_lost, sent)),
        "downlink_loss_in_95ci": within(down.loss_percent, binomial_interval(measured.downlink_lost, seen)),
        "uplink_rate_within_5pct": rate_ok(measured.uplink_rate_mbit, up.rate_mbit),
        "downlink_rate_within_5pct": rate_ok(measured.downlink_rate_mbit, down.rate_mbit),
    }


def within(target: float, interval: tuple[float, float]) -> bool:
    """``target`` lies inside ``interval`` (bounds included)."""
    return interval[0] <= target <= interval[1]


def rate_ok(measured: float | None, target: float | None) -> bool | None:
    """Within the tolerance of the target; None where there is no target, False where nothing was measured."""
    if target is None:
        return None
    return measured is not None and abs(measured - target) <= RATE_TOLERANCE * target


def binomial_interval(lost: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval for a loss proportion, in percent.

    Exact, not Wilson: with a few lost probes in 200 Wilson's coverage dips below its level (at 4G's 0.5 %
    it flags a healthy link 8 % of the time); the exact interval's false alarms stay under 5 %. Solved by
    bisection on the binomial tails here: scipy's would add about 70 MiB to every crawl process.
    """
    if n == 0:
        return (0.0, 100.0)
    tail = (1 - confidence) / 2
    # The lower bound is the p where P(X >= lost) = tail, the upper where P(X <= lost) = tail.
    low = 0.0 if lost == 0 else _solve(lambda p: 1 - tail - _binomial_cdf(lost - 1, n, p))
    high = 1.0 if lost == n else _solve(lambda p: tail - _binomial_cdf(lost, n, p))
    return (100 * low, 100 * high)  # unrounded: rounding could move a bound across the target


def _binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), 0 < p < 1, summed in log space."""
    log_p, log_q, log_n = math.log(p), math.log1p(-p), math.lgamma(n + 1)
    return min(
        1.0,
        sum(
            math.exp(log_n - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q)
            for i in range(k + 1)
        ),
    )


def _solve(f: Callable[[float], float]) -> float:
    """The root in (0, 1) of f, which goes from negative to positive: bisection to 1e-12."""
    lo, hi = 1e-15, 1 - 1e-15
    while hi - lo > 1e-12:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if f(mid) > 0 else (mid, hi)
    return (lo + hi) / 2
