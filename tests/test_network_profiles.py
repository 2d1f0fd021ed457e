"""Network profiles: the shipped ones carry the reference figures; mistakes are refused by file and key."""

from __future__ import annotations

import math

import pytest

from harness.errors import HarnessError
from harness.shaping.link_profile import available_profiles, load_link_profile

REFERENCE = {  # Hounsel et al. 2019: added delay, jitter, loss, rate up, rate down
    "4g": (53.3, 1.0, 0.5, 7.44, 22.1),
    "4g-lossy": (53.3, 1.0, 1.5, 7.44, 22.1),
    "3g": (150.0, 8.0, 2.1, 1.0, 1.0),
}


def test_shipped_profiles():
    assert {"wired", "4g", "4g-lossy", "3g", "4g-symmetric", "4g-lossy-symmetric", "3g-symmetric"} <= set(
        available_profiles()
    )
    assert not load_link_profile("wired").shaped


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_reference_links_shape_the_clients_egress_only(name):
    delay, jitter, loss, up, down = REFERENCE[name]
    p = load_link_profile(name)
    assert (p.uplink.delay_ms, p.uplink.jitter_ms, p.uplink.loss_percent, p.uplink.rate_mbit) == (
        delay,
        jitter,
        loss,
        up,
    )
    assert (p.downlink.delay_ms, p.downlink.jitter_ms, p.downlink.loss_percent, p.downlink.rate_mbit) == (0, 0, 0, down)
    assert "Hounsel" in p.source


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_symmetric_variants_keep_the_round_trip(name):
    reference, symmetric = load_link_profile(name), load_link_profile(f"{name}-symmetric")
    assert symmetric.uplink.delay_ms == symmetric.downlink.delay_ms > 0
    assert symmetric.uplink.loss_percent == symmetric.downlink.loss_percent > 0
    for key, value in reference.round_trip().items():
        assert symmetric.round_trip()[key] == pytest.approx(value, abs=0.002)


@pytest.mark.parametrize(
    "body, key",
    [
        ("[uplink]\ndelay_ms = -1\n", "uplink.delay_ms"),
        ("[uplink]\nloss_percent = 101\n", "uplink.loss_percent"),
        ("[downlink]\nrate_mbit = 0\n", "downlink.rate_mbit"),
        ("[downlink]\nlatency_ms = 3\n", "downlink.latency_ms"),
        ("colour = 'red'\n", "colour"),
    ],
)
def test_impossible_values_and_unknown_keys_are_refused_by_file_and_key(tmp_path, body, key):
    path = tmp_path / "mine.toml"
    path.write_text('description = "x"\nsource = "y"\n' + body)
    with pytest.raises(HarnessError, match=rf"mine\.toml:\d+: {key}"):
        load_link_profile(str(path))


def test_unknown_profile_name_lists_the_known_ones():
    with pytest.raises(HarnessError, match="no network profile '5g'.*4g"):
        load_link_profile("5g")


# The rate check (harness/shaping/rate.py, verdicts.py): its plans for every shipped profile, its estimator on a
# simulated token bucket, and its verdict. The lab tests in test_shaping.py run it on real links.

SHAPED = [(name, way) for name in available_profiles() for way in ("uplink", "downlink")]
FRAME_BITS = 8 * 1514  # a full Ethernet frame: what the check sends on the lab's veths


def token_bucket(arrivals: list[float], rate_bps: float, burst_bits: float, frame_bits: int) -> list[float]:
    """Departure times of frames reaching a token bucket (full at the start, queue unlimited) at ``arrivals``."""
    tokens, clock, last, departures = burst_bits, 0.0, 0.0, []
    for arrival in arrivals:
        now = max(arrival, last)
        tokens = min(burst_bits, tokens + (now - clock) * rate_bps)
        clock = now
        if tokens < frame_bits:  # wait for the missing tokens
            now += (frame_bits - tokens) / rate_bps
            tokens, clock = frame_bits, now
        tokens -= frame_bits
        last = now
        departures.append(now)
    return departures


def offered_flow(plan, loss_percent: float, jitter_ms: float, seed: int = 13) -> list[float]:
    """The check's flow as it reaches the bottleneck: paced, thinned by the loss, delayed in order by the jitter."""
    import random

    rng = random.Random(seed)
    gap = plan.frame_bits / plan.offered_bps
    times, latest = [], 0.0
    for k in range(math.ceil(1.5 * plan.span_s / gap)):
        if rng.random() < loss_percent / 100:
            continue
        latest = max(latest, k * gap + rng.uniform(-1, 1) * jitter_ms / 1000)  # the delayer keeps the order
        times.append(latest)
    return times


def stamps(times: list[float]) -> list[int]:
    return [round(t * 1e9) for t in times]


def test_the_rtt_verdict_judges_the_median_so_a_burst_of_late_probes_does_not_move_it():
    """What a busy machine does to a probe: a burst of probes held up to 230 ms (a delayer woken late holds back
    those behind it) among 300 on target. Their mean is 7 ms off; their median, what the link delays the typical
    packet by, is on target. Half the probes late is the link off, and the median says so."""
    import statistics
    from types import SimpleNamespace

    from harness.shaping.verdicts import link_verdicts

    link = load_link_profile("4g")  # 53.3 ms added: target 53.4
    on_target = [53.4 + (i % 5 - 2) * 0.4 for i in range(282)]
    held = [53.4 + 10 * i for i in range(18, 0, -1)]  # 233 ms down to 63 ms, ten apart

    def judged(rtts: list[float]) -> bool | None:
        measured = SimpleNamespace(
            probes=300,
            rtt_median_ms=statistics.median(rtts),
            uplink_lost=0,
            downlink_lost=0,
            uplink_rate_mbit=None,
            downlink_rate_mbit=None,
        )
        return link_verdicts(measured, link, base_rtt_ms=0.1)["rtt_within_2ms"]

    assert statistics.fmean(held + on_target) > 53.4 + 2  # the mean would call this link off
    assert judged(held + on_target) is True
    assert judged(on_target[:140] + [53.4 + 3] * 160) is False  # most probes 3 ms late: off


def test_the_rate_verdict_holds_within_the_tolerance_only():
    from harness.shaping.verdicts import rate_ok

    assert rate_ok(1.049, 1.0) is True and rate_ok(0.951, 1.0) is True
    assert rate_ok(1.051, 1.0) is False and rate_ok(0.949, 1.0) is False
    assert rate_ok(None, 1.0) is False  # a rate to check, and nothing measured: the link is off
    assert rate_ok(4000.0, None) is None and rate_ok(None, None) is None  # no rate set: nothing to judge


@pytest.mark.parametrize("name, way", SHAPED)
def test_every_shipped_rate_gets_a_plan_that_overloads_it_and_is_long_enough(name, way):
    from harness.shaping.rate import (
        RATE_OVERLOAD,
        RATE_PRECISION,
        TBF_BURST_BYTES,
        TIMER_SLIP_S,
        WINDOW_FRAMES,
        plan_rate,
    )

    direction = getattr(load_link_profile(name), way)
    plan = plan_rate(direction, FRAME_BITS)
    if direction.rate_mbit is None:
        assert plan is None  # unlimited (wired): no rate to check, no time spent
        return
    assert plan is not None and plan.rate_bps == direction.rate_mbit * 1e6
    after_loss = plan.offered_bps * (1 - direction.loss_percent / 100)
    assert after_loss == pytest.approx((1 + RATE_OVERLOAD) * plan.rate_bps)
    assert plan.warmup_s * RATE_OVERLOAD * plan.rate_bps > 8 * TBF_BURST_BYTES  # the bucket's burst is spent
    assert plan.window_s * plan.rate_bps >= WINDOW_FRAMES * FRAME_BITS  # enough frames
    assert plan.window_s >= 2 * TIMER_SLIP_S / RATE_PRECISION  # and long enough
    longer = plan_rate(direction, FRAME_BITS, least_window_s=7.0)  # a study may ask for longer
    assert longer is not None and longer.window_s == 7.0


def test_the_test_lasts_longer_at_3g_than_at_4g_because_it_needs_frames_not_seconds():
    from harness.shaping.rate import plan_rate

    slow = plan_rate(load_link_profile("3g").downlink, FRAME_BITS)
    fast = plan_rate(load_link_profile("4g").downlink, FRAME_BITS)
    assert slow is not None and fast is not None
    assert slow.warmup_s > 2 * fast.warmup_s and slow.window_s > fast.window_s
    assert slow.span_s < 3.0  # and a 3G check still fits a block's start


@pytest.mark.parametrize("name, way", [s for s in SHAPED if load_link_profile(s[0]).model_dump()[s[1]]["rate_mbit"]])
def test_the_estimate_lands_on_the_buckets_rate_and_the_warmup_is_what_keeps_it_there(name, way):
    from harness.shaping.rate import TBF_BURST_BYTES, bottleneck_rate, plan_rate
    from harness.shaping.verdicts import rate_ok

    direction = getattr(load_link_profile(name), way)
    plan = plan_rate(direction, FRAME_BITS)
    assert plan is not None
    out = token_bucket(
        offered_flow(plan, direction.loss_percent, direction.jitter_ms),
        plan.rate_bps,
        8 * TBF_BURST_BYTES,
        FRAME_BITS,
    )
    measured = bottleneck_rate(stamps(out), FRAME_BITS, plan.warmup_s)
    assert measured is not None and measured.frames >= 100
    assert measured.bps == pytest.approx(plan.rate_bps, rel=0.002)
    first_second = [t for t in out if t <= 1.0]  # a one-second test that counts the bucket's burst
    burst_included = bottleneck_rate(stamps(first_second), FRAME_BITS, 0.0)
    assert burst_included is not None and burst_included.bps > measured.bps
    if plan.rate_bps <= 1e6:  # at 3G that alone puts a right link off target
        assert not rate_ok(burst_included.bps / 1e6, direction.rate_mbit)


@pytest.mark.parametrize("name, way", [s for s in SHAPED if load_link_profile(s[0]).model_dump()[s[1]]["rate_mbit"]])
def test_a_link_with_no_bottleneck_reads_off_target(name, way):
    """A faster link passes the whole flow: thinned by the loss (seeds vary it), it still reads too high."""
    from harness.shaping.rate import bottleneck_rate, plan_rate
    from harness.shaping.verdicts import rate_ok

    direction = getattr(load_link_profile(name), way)
    plan = plan_rate(direction, FRAME_BITS)
    assert plan is not None
    for seed in range(5):
        measured = bottleneck_rate(
            stamps(offered_flow(plan, direction.loss_percent, direction.jitter_ms, seed)), FRAME_BITS, plan.warmup_s
        )
        assert measured is not None
        assert rate_ok(measured.bps / 1e6, direction.rate_mbit) is False, (seed, measured)


def test_nothing_arriving_is_no_rate():
    from harness.shaping.rate import bottleneck_rate

    assert bottleneck_rate([], FRAME_BITS, 0.5) is None
    assert bottleneck_rate([1_000_000_000], FRAME_BITS, 0.0) is None
    assert bottleneck_rate([0, 10**8], FRAME_BITS, 0.5) is None  # all within the warm-up


@pytest.mark.parametrize("name", sorted(p for p in available_profiles() if load_link_profile(p).shaped))
@pytest.mark.parametrize("probes", [200, 300])
def test_a_healthy_link_fails_the_loss_verdict_at_most_5_percent_of_the_time(name, probes):
    """The chance that a link losing exactly the profile's share of probes reads off target, summed exactly."""
    from scipy.stats import binom

    from harness.shaping.verdicts import binomial_interval

    for direction in (load_link_profile(name).uplink, load_link_profile(name).downlink):
        p, target = direction.loss_percent / 100, direction.loss_percent
        most = int(binom.isf(1e-9, probes, p))  # beyond it lies under 1e-9 of the mass: counted as false alarms
        false_alarm = binom.sf(most, probes, p) + sum(
            binom.pmf(lost, probes, p)
            for lost in range(most + 1)
            if not (bounds := binomial_interval(lost, probes))[0] <= target <= bounds[1]
        )
        assert false_alarm <= 0.05, (name, target, false_alarm)


def test_the_loss_interval_is_exact_at_the_edges():
    from harness.shaping.verdicts import binomial_interval

    assert binomial_interval(0, 200)[0] == 0.0 and binomial_interval(200, 200)[1] == 100.0
    assert binomial_interval(0, 0) == (0.0, 100.0)  # nothing sent: anything is possible
    low, high = binomial_interval(3, 200)  # 4G's 0.5 % inside, as a healthy 4G link often shows
    assert low < 0.5 < high
    assert binomial_interval(4, 200)[0] > 0.5  # 4 of 200 is evidence of more loss than 0.5 %


def test_the_loss_interval_is_clopper_pearson():
    from scipy.stats import binomtest

    from harness.shaping.verdicts import binomial_interval

    for n in (1, 7, 200, 300, 1000):
        for lost in sorted({k for k in (0, 1, 2, 3, 4, 9, n // 2, n - 1, n) if k <= n}):
            exact = binomtest(lost, n).proportion_ci(confidence_level=0.95, method="exact")
            low, high = binomial_interval(lost, n)
            assert low == pytest.approx(100 * exact.low, abs=1e-8) and high == pytest.approx(100 * exact.high, abs=1e-8)


def test_a_link_check_does_not_load_scipy_into_the_crawl():
    """scipy costs the crawl process about 70 MiB of RSS (measured with benchmarks/resources.py)."""
    import subprocess
    import sys

    code = (
        "import sys, harness.shaping.check; from harness.shaping.verdicts import binomial_interval; "
        "binomial_interval(3, 200); sys.exit('scipy' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
