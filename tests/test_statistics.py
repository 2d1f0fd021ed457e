"""Statistics a reviewer checks (issue 34): sites as the unit, a grid's verdicts controlled, power before a crawl.

Simulated data come from analysis/simulate.py, whose true median, mean and
shares are computed from the distributions, not from a sample. Seeds are
fixed; the margins are several standard errors of the simulated rates, so a
correct method passes and the pair-level (or unadjusted) one fails.
"""

from __future__ import annotations

import math
from dataclasses import replace
from itertools import combinations
from typing import get_args

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy import stats

from analysis import resampling
from analysis.hodges_lehmann import DIRECT, hodges_lehmann
from analysis.pairs import grid, load_time_table, paired, site_codes, units
from analysis.power import NormalSpread, PilotSpread, Plan, detectable, power, rounds_needed, study_power
from analysis.resampling import draw_resamples, percentile_levels
from analysis.results import load
from analysis.settings import load_settings
from analysis.significance import ADJUSTMENTS, BH, HOLM, adjust, holm, sign_test
from analysis.simulate import Scenario, draw, truth
from analysis.stats import PairStatistics, adjust_family, compare, wilson_interval
from analysis.tables import success_differences
from harness.cli import main
from harness.study import StudyAnalysis, load_study
from tests.synthetic import make_store, ok

SETTINGS = load_settings()
READING = SETTINGS.reading()
DIRECTIONS = ("row slower", "row faster")


def test_site_level_intervals_cover_a_known_site_effect_and_pair_level_ones_do_not():
    # The issue's measurement: each site keeps its own difference (sd 300 ms), a visit adds 60 ms of noise.
    scenario = Scenario("normal", site_sd_ms=300.0, sites=40, rounds=4, noise_scale=0.2)
    reading = replace(READING, large_difference_ms=300.0)  # a share of about 16 %, not ~0
    true = truth(scenario, reading.large_difference_ms)
    rng = np.random.default_rng(34)
    covered = {unit: np.zeros(3) for unit in ("pair", "site")}
    replicates = 250
    for i in range(replicates):
        d, sites = draw(scenario, rng)
        for unit, codes in (("pair", np.arange(len(d))), ("site", sites)):
            st = compare(d, replace(reading, seed=i), codes)
            assert st.resampled == unit
            covered[unit] += [
                _covers(st.ci_low_ms, st.ci_high_ms, true.median_ms),
                _covers(st.mean_ci_low_ms, st.mean_ci_high_ms, true.mean_ms),
                _covers(st.share_row_slower_ci_low, st.share_row_slower_ci_high, true.share_slower),
            ]
    pair, site = covered["pair"] / replicates, covered["site"] / replicates
    assert np.all(pair < 0.80), pair  # about 0.68: 160 pairs are worth about 41 sites' information
    assert np.all((site >= 0.90) & (site <= 0.99)), site  # 95 % nominal; 250 replicates: +-1.4 points


def _covers(low: float | None, high: float | None, value: float) -> bool:
    assert low is not None and high is not None
    return low <= value <= high


def _null_grid(rng: np.random.Generator, sites: int = 40, rounds: int = 4, configurations: int = 4) -> list:
    """No configuration is faster across sites, but each keeps its own difference at each site: every pair's
    differences have a site effect of sd 300 ms and visit noise of sd 60 ms (the issue's null grid)."""
    effect = rng.normal(0, 300 / math.sqrt(2), (sites, 1, configurations))
    times = 2000 + effect + rng.normal(0, 60 / math.sqrt(2), (sites, rounds, configurations))
    codes = np.repeat(np.arange(sites), rounds)
    return [((times[:, :, i] - times[:, :, j]).ravel(), codes) for i, j in combinations(range(configurations), 2)]


def test_a_null_grid_says_faster_or_slower_at_most_at_the_nominal_family_wise_rate_with_holm():
    rng = np.random.default_rng(7)
    grids, any_verdict = 200, {"pair, unadjusted": 0, "site, unadjusted": 0, "site, Holm": 0}
    for g in range(grids):
        reading = replace(READING, seed=g)
        cells = _null_grid(rng)
        site = [compare(d, reading, codes) for d, codes in cells]
        held = adjust_family(site, HOLM, reading)
        pair = [compare(d, reading) for d, _ in cells]
        for name, family in (("pair, unadjusted", pair), ("site, unadjusted", site), ("site, Holm", held)):
            any_verdict[name] += any(st.verdict in DIRECTIONS for st in family)
        assert all(st.adjustment == HOLM and st.family_size == 6 for st in held)
    rate = {name: count / grids for name, count in any_verdict.items()}
    assert rate["site, Holm"] <= 0.05 + 0.04, rate  # nominal 5 %; +0.04 is 2.6 standard errors
    assert rate["site, unadjusted"] >= 0.12, rate  # six verdicts at 95 % each: about one grid in five
    assert rate["pair, unadjusted"] >= 0.5, rate  # pairs as if independent: most grids say something


def test_the_issue_s_null_store_gets_few_verdicts_by_site_where_pairs_alone_give_many(tmp_path):
    # 40 sites, 4 rounds, 4 networks, 3 protocols; each protocol keeps a per-site difference (sd 300 ms between
    # two of them) and a visit adds noise (sd 60 ms between two): no protocol is faster across sites.
    rng = np.random.default_rng(34)
    effect = rng.normal(0, 300 / math.sqrt(2), (4, 40, 3))
    networks, protocols = ("wired", "4g", "4g-lossy", "3g"), ("do53", "dot", "doh")

    def outcome(n, r, i, res, p):
        return ok(2000 + 50 * i + effect[networks.index(n), i, protocols.index(p)] + rng.normal(0, 60 / math.sqrt(2)))

    configurations = tuple(("a", p) for p in protocols)
    store = make_store(tmp_path / "s.sqlite", outcome, rounds=4, networks=networks, configurations=configurations)
    visits = load(store).visits
    by_site, by_pair = 0, 0
    for network in networks:
        cells = [c for c in grid(visits, network, SETTINGS) if c.row < c.column]
        assert len(cells) == 3 and all(c.statistics.sites == 40 and c.statistics.pairs == 160 for c in cells)
        by_site += sum(c.statistics.verdict in DIRECTIONS for c in cells)
        by_pair += sum(compare(c.differences, READING).verdict in DIRECTIONS for c in cells)
    assert by_site <= 1 and by_pair >= 3, (by_site, by_pair)  # of 12 cells; pairs alone: about 30 % of them


def test_a_site_measured_at_two_vantage_points_is_one_unit_where_a_grid_pools_them(tmp_path):
    # 12 sites, each measured at two vantage points in one round: b is slower at 9 sites, faster at 3, at
    # both vantage points alike (the site, not the vantage point, decides). Pooled, that is 9 of 12 sites'
    # evidence (sign test p 0.15), not 18 of 24 independent sites' (p 0.02).
    rng = np.random.default_rng(3)

    def outcome(n, r, i, res, p):
        return ok(2000 + 40 * i + (0 if res == "a" else (200 if i < 9 else -200)) + rng.normal(0, 10))

    places = {"eu": 0.0, "us": 300.0}
    visits = load(make_store(tmp_path / "s.sqlite", outcome, sites=12, vantage_points=places)).visits
    cell = next(c for c in grid(visits, "wired", SETTINGS) if c.row == ("b", "do53"))
    st = cell.statistics
    assert st.pairs == 24 and st.sites == 12 and st.resampled == "site"
    assert st.p_value == pytest.approx(stats.binomtest(9, 12).pvalue)
    codes, strata = site_codes(load_time_table(visits, "wired"))
    assert len(np.unique(codes)) == 12 and len(strata) == 12 and len(np.unique(strata)) == 1
    for place in places:  # one vantage point's own grid: the site there is the unit
        alone = grid(visits[visits["vantage_point"] == place], "wired", SETTINGS)
        assert alone[0].statistics.sites == 12 and alone[0].statistics.resampled == "pair"
    # Sites that only one vantage point measured stay in its stratum, as before: each keeps its number.
    keys = pd.DataFrame({"vantage_point": ["eu", "eu", "us", "us", "eu", "us"], "site": list("abcdee")})
    codes, strata = units(keys)
    assert list(codes) == [0, 1, 2, 3, 4, 4] and list(strata) == [0, 0, 1, 1, 2]


def test_holm_and_benjamini_hochberg_adjust_a_family_together():
    p = [0.01, 0.04, 0.03, 0.005]
    assert holm(np.array(p)) == pytest.approx([0.03, 0.06, 0.06, 0.02])  # 4p, 3p, 2p, p in order, monotone
    assert adjust(p, BH) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert adjust([0.01, None, 0.02], HOLM) == pytest.approx([0.02, None, 0.02])  # None is not in the family
    with pytest.raises(ValueError, match="unknown adjustment 'bonferroni'"):
        adjust(p, "bonferroni")
    named = get_args(get_args(StudyAnalysis.model_fields["multiple_comparisons"].annotation)[0])
    assert set(ADJUSTMENTS) == set(named)  # the study file's names are the analysis's


def test_a_site_counts_once_in_the_sign_test_however_many_rounds_it_has():
    signs = np.array([1, 1, 1, 1, 1, 1, 1, -1, -1, 1.0])  # 8 of 10 sites faster
    per_pair = np.repeat(signs * 100, 4)
    sites = np.repeat(np.arange(10), 4)
    binomial = stats.binomtest(8, 10, 0.5).pvalue
    assert sign_test(signs * 100) == pytest.approx(binomial)
    assert sign_test(per_pair, sites) == pytest.approx(binomial)  # 40 pairs, still 10 sites' evidence
    assert sign_test(per_pair) < binomial / 10  # as 40 independent pairs it would look far stronger
    large = np.repeat(np.random.default_rng(1).choice([-1.0, 1.0], 40, p=[0.3, 0.7]), 3)
    normal = sign_test(large, np.repeat(np.arange(40), 3))  # 40 sites: the normal approximation
    assert normal == pytest.approx(stats.binomtest(int((large[::3] > 0).sum()), 40).pvalue, abs=0.03)
    assert sign_test(np.zeros(5)) == 1.0


@pytest.mark.parametrize("n", [5, 6, DIRECT + 1, DIRECT + 2])
def test_the_hodges_lehmann_estimate_is_the_median_of_the_walsh_averages(n):
    rng = np.random.default_rng(n)
    for x in (rng.normal(0, 300, n), rng.lognormal(6, 1, n) - 400, np.round(rng.normal(0, 2, n)), np.zeros(n)):
        i, j = np.triu_indices(n)
        assert hodges_lehmann(x) == pytest.approx(float(np.median((x[i] + x[j]) / 2)), abs=1e-9)
        assert hodges_lehmann(-x) == pytest.approx(-hodges_lehmann(x), abs=1e-9)


def test_every_table_has_effect_sizes_beside_the_verdict_and_both_p_values():
    st = compare(np.random.default_rng(2).normal(150, 300, 400), READING)
    assert st.hodges_lehmann_ms == pytest.approx(150, abs=60) and _covers(st.mean_ci_low_ms, st.mean_ci_high_ms, 150)
    assert st.p_value == st.p_adjusted and st.adjustment is None and st.resampled == "pair"
    columns = set(PairStatistics.__dataclass_fields__)
    wanted = {"median_ms", "ci_low_ms", "ci_high_ms", "hodges_lehmann_ms", "share_row_slower", "share_row_faster"}
    assert wanted | {"p_value", "p_adjusted", "adjustment", "family_size", "verdict"} <= columns
    one = compare(np.array([5.0, 7.0, 9.0, 11.0, 13.0]), READING, np.zeros(5, dtype=int))
    assert one.verdict == "too few sites" and one.ci_low_ms is None


def test_expanded_percentiles_widen_for_few_sites_and_vanish_for_many():
    low8, _ = percentile_levels(0.95, 8, "expanded")
    assert low8 == pytest.approx(stats.norm.cdf(-math.sqrt(8 / 7) * stats.t.ppf(0.975, 7)))  # about 0.6 %
    assert percentile_levels(0.95, 8, "percentile") == pytest.approx((0.025, 0.975))
    assert percentile_levels(0.95, 2000, "expanded")[0] == pytest.approx(0.025, abs=0.0005)


#: (sites, family): 8 sites can only reach a level above 2/2^8, so a family of 3; the others a grid's 45.
POWER_CHECKS = [(8, 3), (12, 45), (20, 45), (50, 45)]
SIMULATED = 1000  # studies per check: the simulated power's standard error is at most 0.016


@pytest.mark.parametrize(("sites", "family"), POWER_CHECKS)
def test_the_power_of_a_plan_matches_a_simulation_of_the_test_the_verdict_uses(sites, family):
    """The predicted power against the rejection rate of the verdict's own test (the sign test by site, exact up
    to 16 sites with a non-zero sign sum, at Holm's first step 0.05 / family) over simulated studies of the
    model the prediction assumes (site sd 300 ms, visit noise 100 ms, 4 rounds), at the detectable difference
    (80 %) and at half of it. The tolerance is the simulation's own error: 3.3 standard errors of a rate
    measured over 1,000 studies (a chance of 1 in 1,000 per comparison), plus 0.01 for the quadrature."""
    plan = Plan(sites=sites, rounds=4, family=family)
    spread = NormalSpread(sd_ms=math.hypot(300, 100), site_share=0.9)
    smallest = detectable(plan, spread)
    assert smallest is not None and power(smallest, plan, spread) == pytest.approx(0.8, abs=0.01)
    rng = np.random.default_rng(sites)
    for delta in (smallest / 2, smallest):
        predicted = power(delta, plan, spread)
        scenario = Scenario("normal", 300.0, sites, 4, shift_ms=delta, noise_scale=1 / 3)
        simulated = np.mean([sign_test(*draw(scenario, rng)) < 0.05 / family for _ in range(SIMULATED)])
        tolerance = 3.3 * math.sqrt(predicted * (1 - predicted) / SIMULATED) + 0.01
        assert simulated == pytest.approx(predicted, abs=tolerance), (delta, simulated, predicted)


def test_more_rounds_help_until_the_sites_differences_dominate():
    plan = Plan(sites=30, rounds=4, family=3)
    spread = NormalSpread(sd_ms=math.hypot(300, 100), site_share=0.9)
    smallest = detectable(plan, spread)
    assert smallest is not None
    assert rounds_needed(smallest, replace(plan, rounds=1), spread) == 4
    assert rounds_needed(smallest / 4, plan, spread) is None  # 30 sites' differences: no rounds make up for them


def _detectable(plan: Plan, spread: PilotSpread) -> float:
    found = detectable(plan, spread)
    assert found is not None
    return found


def test_pilots_drawn_from_a_known_model_give_its_detectable_difference():
    plan = Plan(sites=200, rounds=2)
    known = detectable(plan, NormalSpread(math.hypot(300, 100), 0.9))  # site sd 300 ms, visit noise 100 ms
    rng = np.random.default_rng(12)
    scenario = Scenario("normal", 300.0, 100, 3, noise_scale=1 / 3)
    estimates = [_detectable(plan, PilotSpread.of(*draw(scenario, rng), 0.5, "")) for _ in range(40)]
    assert np.median(estimates) == pytest.approx(known, rel=0.15), (np.median(estimates), known)
    one_round = [_detectable(plan, PilotSpread.of(*draw(replace(scenario, rounds=1), rng), 0.9, "")) for _ in range(40)]
    assert np.median(one_round) == pytest.approx(known, rel=0.2)  # the site share from the profile instead


def test_a_pilot_store_s_pairs_plan_its_cells_and_the_profile_plans_the_rest(tmp_path):
    rng = np.random.default_rng(12)
    effect = rng.normal(0, 300, 60)

    def outcome(n, r, i, res, p):
        if res == "b" and i % 10 == 0:
            return "Page-load Timeout", None, "Page-load Timeout"  # a tenth of the sites never pair
        return ok(3000 + 40 * i + (effect[i] if res == "b" else 0) + rng.normal(0, 70))

    pilot = load(make_store(tmp_path / "pilot.sqlite", outcome, sites=60, rounds=3)).visits
    plan, pairs = Plan(sites=200, rounds=2), [("a", "do53"), ("b", "do53"), ("c", "doh")]
    cells = study_power(["wired", "3g"], pairs, plan, SETTINGS, pilot)
    a_b = cells[0]
    assert a_b.source == "pilot: 162 pairs at 54 sites" and a_b.plan.pair_yield == pytest.approx(0.9)
    table = load_time_table(pilot, "wired")
    d, mask = paired(table, ("a", "do53"), ("b", "do53"))
    again = PilotSpread.of(d, site_codes(table)[0][mask], 0.5, "")
    assert a_b.detectable_ms == detectable(replace(plan, family=3, pair_yield=0.9), again)
    others = [c.source for c in cells[1:]]  # c/doh is not in the pilot, nor is 3G
    assert all(s.startswith("profile") for s in others) and "the pilot has 0 pairs" in others[0]
    assert cells[3].source.startswith("profile: sd 1320 ms, site share 0.5")  # 3G, from the profile


INTERNET_STUDY = """
name = "powered"
description = "a study planned for its power"
target = "internet"
seed = 3
rounds = 2
networks = ["wired"]
resolvers = ["cloudflare", "google"]
protocols = ["do53", "doh"]

[sites]
list = "tranco/paper-2019.csv"

[[sites.select]]
group = "top"
ranks = [1, 1000]
every = 10

[analysis]
multiple_comparisons = "benjamini-hochberg"
minimum_detectable_effect_ms = {mde}
"""


def test_study_power_and_check_say_what_a_plan_detects_and_warn_below_the_declared_effect(tmp_path):
    path = tmp_path / "powered.toml"
    path.write_text(INTERNET_STUDY.format(mde=20))
    study = load_study(str(path)).study
    assert study.analysis.multiple_comparisons == BH and study.analysis.minimum_detectable_effect_ms == 20
    result = CliRunner().invoke(main, ["study", "power", str(path), "--difference", "100"])
    assert result.exit_code == 0, result.output
    assert "plan: 100 sites, 2 round(s), 6 pairs per grid; power 80% of the verdict's test" in result.output
    assert "wired: every pair detects" in result.output and "100 ms needs" in result.output
    checked = CliRunner().invoke(main, ["study", "check", str(path)])
    assert checked.exit_code == 0 and "warning: wired: the plan detects" in checked.output
    assert "minimum_detectable_effect_ms 20" in checked.output
    path.write_text(INTERNET_STUDY.format(mde=2000))
    reached = CliRunner().invoke(main, ["study", "check", str(path)])
    assert "warning" not in reached.output and "every pair detects 2000 ms" in reached.output
    path.write_text(INTERNET_STUDY.format(mde=-5))
    refused = CliRunner().invoke(main, ["study", "check", str(path)])
    assert refused.exit_code == 2 and "minimum_detectable_effect_ms" in refused.output


def test_a_study_s_vantage_points_add_pairs_to_each_site_not_sites(tmp_path):
    """The same sites measured from two vantage points are the same units: the plan has 100 sites, each giving
    a cell 2 rounds x 2 vantage points of pairs (counted as 200 independent sites, it claimed too much)."""
    path = tmp_path / "powered.toml"
    path.write_text(INTERNET_STUDY.format(mde=20).replace('protocols = ["do53", "doh"]', PLACES))
    result = CliRunner().invoke(main, ["study", "power", str(path)])
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())  # the console wraps long lines
    assert "plan: 100 sites, each at 2 vantage points (one unit with all its pairs), 2 round(s)" in output
    assert SETTINGS.power is not None
    wired = SETTINGS.power.spread("wired")
    spread = NormalSpread(wired.sd_ms, wired.site_share)
    found = detectable(Plan(sites=100, rounds=2, family=6, places=2), spread)
    assert found is not None and f"wired: every pair detects {found:.0f} ms" in output
    twice = detectable(Plan(sites=200, rounds=2, family=6), spread)  # what counting each site twice gave
    assert twice is not None and found > twice


PLACES = 'protocols = ["do53", "doh"]\nvantage_points = ["eu", "us"]'


def test_a_success_difference_carried_by_two_sites_of_forty_is_not_a_verdict(tmp_path):
    def outcome(n, r, i, res, p):
        if res == "b" and i < 2:  # b fails at two sites, in every round
            return "DNS Error", None, "DNS Error"
        return ok(1000.0 + i)

    visits = load(make_store(tmp_path / "s.sqlite", outcome, rounds=4)).visits
    row = success_differences(visits, SETTINGS).iloc[0]
    assert row["difference (a - b) pp"] == 5 and row["sites"] == 40
    # By site: a resample draws neither failing site about one time in eight (0.95^40), so the interval reaches
    # zero; Newcombe's, of 160 visits each as if independent, was [1.6, 10.0] pp, clear of it.
    assert row["ci low pp"] <= 0 < row["ci high pp"] and not row["differs"]
    assert row["p_value"] == pytest.approx(0.15, abs=0.02)  # 40 sites: not settled
    assert row["adjustment"] == HOLM and row["p_adjusted"] == row["p_value"]  # a table of one row


def test_success_rate_intervals_by_site_cover_a_clustered_difference_at_the_nominal_rate():
    """Each site has its own failure rate under each configuration (drawn alike, so no configuration fails more
    across sites), measured at two vantage points in 4 rounds: visits are clustered, so an interval of visits
    as if independent (Newcombe's, before) is too narrow; the sites' bootstrap covers the true zero difference
    about 95 % of the time, a site at two vantage points being one unit."""
    rng = np.random.default_rng(8)
    replicates, covered, newcombe = 200, 0, 0
    sites, rounds, places = 30, 4, ("eu", "us")
    shape = (len(places), rounds, sites, 2)  # vantage point, round, site, configuration
    index = np.indices(shape).reshape(4, -1)
    for _ in range(replicates):
        fail = rng.beta(0.5, 4.5, (sites, 2))  # failure rates averaging 10 %, very unequal between sites
        failed = rng.random(shape) < fail[None, None, :, :]
        visits = pd.DataFrame(
            {
                "network": "wired",
                "vantage_point": np.array(places)[index[0]],
                "site": [f"site{i}" for i in index[2]],
                "resolver": np.array(["a", "b"])[index[3]],
                "protocol": "do53",
                "error_class": np.where(failed.ravel(), "DNS Error", "Successful"),
            }
        )
        row = success_differences(visits, SETTINGS).iloc[0]
        assert row["sites"] == sites  # 30 sites, not 60 sites at vantage points
        covered += row["ci low pp"] <= 0 <= row["ci high pp"]
        loaded = (~failed).sum(axis=(0, 1, 2))
        newcombe += _newcombe_covers_zero(int(loaded[0]), int(loaded[1]), failed[..., 0].size)
    assert covered / replicates >= 0.90, covered  # 95 % nominal; 200 replicates: 90 % is 3.2 standard errors below
    assert newcombe / replicates <= 0.90, newcombe  # about 84 %


def _newcombe_covers_zero(successes_a: int, successes_b: int, visits: int) -> bool:
    """Whether Newcombe's hybrid score interval of p_a - p_b (visits as independent) holds zero."""
    (la, ua), (lb, ub) = (wilson_interval(s, visits, 0.95) for s in (successes_a, successes_b))
    pa, pb = successes_a / visits, successes_b / visits
    d = pa - pb
    return d - math.hypot(pa - la, ub - pb) <= 0 <= d + math.hypot(ua - pa, pb - lb)


@pytest.mark.parametrize("first_half", [None, 1])  # the window the spread gives, and one widened from 1 pair
def test_the_site_bootstrap_s_median_percentiles_are_those_of_the_resampled_medians(monkeypatch, first_half):
    rng = np.random.default_rng(5)
    d, sites = draw(Scenario("bimodal", 300.0, 30, 5), rng)
    resamples = draw_resamples(np.repeat([0, 1], 15), 400, 9)  # two vantage points of 15 sites
    if first_half is not None:
        around = resampling._Window.around.__func__  # type: ignore[attr-defined]
        monkeypatch.setattr(
            resampling._Window,
            "around",
            classmethod(lambda cls, s, n, half=None: around(cls, s, n, half or first_half)),
        )
    levels = percentile_levels(0.95, 30, "expanded")
    got = resampling.intervals(d, sites, resamples, levels, 1000.0)
    medians, means = [], []
    for weights in resamples.by_site.T:  # each resample: every pair repeated as often as its site was drawn
        drawn = np.sort(np.repeat(d, weights[sites]))
        medians.append(np.median(drawn))  # 30 sites x 5 rounds: every resample has 150 pairs, an even count
        means.append(drawn.mean())
    low = math.ceil(levels[0] * 400) - 1
    assert got.unit == "site" and got.median == (np.sort(medians)[low], np.sort(medians)[399 - low])
    assert got.mean == pytest.approx((np.sort(means)[low], np.sort(means)[399 - low]))
    assert np.all(resamples.weights[:, :15].sum(axis=1) == 15)  # each stratum keeps its number of sites


@pytest.mark.parametrize("unit", ["pair", "site"])
def test_one_median_everywhere_the_point_estimate_and_every_resample_s_the_mean_of_the_middle_two(unit):
    """An even count's median is the mean of its two middle values, in the point estimate and in every
    resample (a "lower median" in the resamples put the interval one order statistic off, and broke the
    antisymmetry a grid relies on: the interval of -d is minus that of d)."""
    rng = np.random.default_rng(21)
    d, sites = draw(Scenario("bimodal", 300.0, 40, 2 if unit == "site" else 1), rng)
    d = np.round(d / 50) * 50  # ties make the two middle values differ often enough to matter
    codes = sites if unit == "site" else np.arange(len(d))
    resamples = draw_resamples(np.zeros(40, dtype=int), 300, 4)
    levels = (0.1, 0.9)
    got = resampling.intervals(d, codes, resamples, levels, 1000.0)
    medians = np.sort([np.median(np.repeat(d, w[codes])) for w in resamples.by_site.T])
    low = math.ceil(levels[0] * 300) - 1
    assert got.unit == unit and got.median == (medians[low], medians[299 - low])
    flipped = resampling.intervals(-d, codes, resamples, levels, 1000.0)
    assert flipped.median == (-got.median[1], -got.median[0])
    st = compare(d, replace(READING, resamples=300, seed=4), codes)
    assert st.median_ms == np.median(d) == resampling.median(d)


@pytest.mark.parametrize("sites", [2, 5, 8])
def test_a_plan_with_too_few_sites_for_any_verdict_detects_nothing(sites):
    """With n sites the exact sign test's smallest p-value is 2/2^n: below the family's level, no difference is
    ever detected, however large (8 sites: 0.0078 > 0.05/45)."""
    plan = Plan(sites=sites, rounds=4, family=45)
    assert power(1e9, plan, NormalSpread(330.0, 0.5)) == 0.0
    assert detectable(plan, NormalSpread(330.0, 0.5)) is None
    assert detectable(replace(plan, sites=20), NormalSpread(330.0, 0.5)) is not None


def test_a_study_that_names_no_adjustment_is_read_with_the_default_beside_one_that_does():
    from analysis.methods import choose_adjustment

    assert choose_adjustment({"a": {"multiple_comparisons": BH}, "b": {}}, HOLM)[0] == HOLM
    assert choose_adjustment({"a": {"multiple_comparisons": BH}}, HOLM)[0] == BH
    assert choose_adjustment({"a": {}, "b": {}}, HOLM)[0] == HOLM
    assert choose_adjustment({"a": {}, "b": {}}, BH)[0] == BH
