"""Analysis on synthetic stores whose answers are known: pairing, statistics, tables, figures, report, notebook."""

from __future__ import annotations

import random
import re
import sqlite3
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from analysis.bytecost import client_bytes, load_sizes
from analysis.export import export
from analysis.figures import grid_figure, resolution_cdf
from analysis.metrics import METRICS
from analysis.pairs import configurations, grid
from analysis.report import analyze
from analysis.results import OPTIONAL_VISIT_COLUMNS, VISIT_COLUMNS, ResultsError, load
from analysis.settings import DEFAULT_PROFILE, load_settings
from analysis.stats import DAGGER, PairStatistics, compare, median_interval, verdict_text
from analysis.tables import (
    outcome_table,
    success_differences,
    timer_failure_details,
    timer_failures,
    write_table,
)
from harness.store import Store
from tests.synthetic import make_store, ok, without_paint_columns

SETTINGS = load_settings()
A, B = ("a", "do53"), ("b", "do53")


def cell(cells, row, column):
    return next(c for c in cells if c.row == row and c.column == column)


def base_time(site: int, round_: int) -> float:
    return 800 + 37 * site + 11 * round_  # differs per site and round, so only pairing recovers the shift


def test_b_is_a_plus_200_ms_everywhere(tmp_path):
    store = make_store(
        tmp_path / "s.sqlite", lambda n, r, i, res, p: ok(base_time(i, r) + (200 if res == "b" else 0)), rounds=2
    )
    visits = load(store).visits
    cells = grid(visits, "wired", SETTINGS)
    b_vs_a = cell(cells, B, A).statistics
    assert b_vs_a.pairs == 80 and b_vs_a.median_ms == pytest.approx(200)
    assert b_vs_a.ci_low_ms > 0 and b_vs_a.verdict == "row slower" and b_vs_a.shade == 2  # 100 ms < 200 ms <= 1 s
    a_vs_b = cell(cells, A, B).statistics
    assert a_vs_b.median_ms == pytest.approx(-200) and a_vs_b.verdict == "row faster" and a_vs_b.ci_high_ms < 0
    assert b_vs_a.p_value is not None and b_vs_a.p_value < 1e-6  # every one of the 40 sites says slower
    assert b_vs_a.sites == 40 and b_vs_a.resampled == "site" and b_vs_a.hodges_lehmann_ms == pytest.approx(200)


def test_unpaired_and_failed_visits_are_left_out_of_pairs(tmp_path):
    def outcome(n, r, i, res, p):
        if res == "b" and i < 10:
            return "Page-load Timeout", None, "Page-load Timeout"  # no pair for these sites
        if res == "a" and i == 39:
            return "Infrastructure Failure", None, "Infrastructure Failure"
        return ok(base_time(i, r) + (200 if res == "b" else 0))

    visits = load(make_store(tmp_path / "s.sqlite", outcome)).visits
    st = cell(grid(visits, "wired", SETTINGS), B, A).statistics
    assert st.pairs == 40 - 10 - 1 and st.median_ms == pytest.approx(200)


def test_a_configuration_with_only_failures_gives_empty_cells_not_errors(tmp_path):
    def outcome(n, r, i, res, p):
        return ("DNS Error", None, "DNS Error") if res == "c" else ok(base_time(i, r))

    store = make_store(tmp_path / "s.sqlite", outcome, configurations=(A, B, ("c", "doh")))
    visits = load(store).visits
    cells = grid(visits, "wired", SETTINGS)
    dead = cell(cells, ("c", "doh"), A).statistics
    assert dead.pairs == 0 and dead.verdict == "too few pairs" and dead.median_ms is None
    assert cell(cells, B, A).statistics.verdict == "indistinguishable"
    strict = outcome_table(visits, "strict", SETTINGS)
    c_row = strict[strict["resolver"] == "C"].iloc[0]
    assert c_row["Successful %"] == 0 and c_row["DNS Error %"] == 100 and c_row["visits"] == 40
    report = analyze([store], tmp_path / "report")
    assert report.html.exists()


def test_indistinguishable_needs_the_interval_inside_33_ms_not_just_the_median():
    rng = np.random.default_rng(3)
    small = rng.normal(5, 4, 400)  # median ~5 ms, tight: indistinguishable
    wide = rng.normal(5, 400, 400)  # median ~5 ms too, but the interval reaches past +-33 ms
    reading = replace(SETTINGS.reading(), confidence=0.95, min_pairs=5)
    assert compare(small, reading).verdict == "indistinguishable"
    verdict = compare(wide, reading)
    assert verdict.median_ms is not None and abs(verdict.median_ms) < 33 and verdict.verdict == "inconclusive"
    assert compare(small[:3], reading).verdict == "too few pairs"


def grid_compare(d: np.ndarray) -> PairStatistics:
    """compare() with the default profile's settings, every pair its own site."""
    return compare(d, SETTINGS.reading())


def test_a_bimodal_sample_whose_median_and_mean_disagree_in_sign_is_flagged():
    # Issue 13's 3G cell: most pairs ~600 ms faster, a third paying a 5 s resolver stall.
    rng = np.random.default_rng(13)
    d = np.concatenate([rng.normal(-600, 80, 640), rng.normal(5000, 300, 360)])
    st = grid_compare(d)
    assert st.median_ms is not None and st.median_ms < -400 and st.ci_high_ms is not None and st.ci_high_ms < 0
    assert st.mean_ms is not None and st.mean_ms > 1000 and st.verdict == "row faster" and st.sign_disagrees
    assert st.share_row_slower == pytest.approx(0.36) and st.share_row_faster == 0 and st.shade == 2
    assert verdict_text(st).startswith(f"row faster by the median {DAGGER}") and "mean +" in verdict_text(st)
    unimodal = grid_compare(rng.normal(-600, 80, 1000))
    assert not unimodal.sign_disagrees and verdict_text(unimodal) == "row faster"
    noise = grid_compare(np.array([-2.0, -2.0, -2.0, 1.0, 6.0]))  # median -2, mean +0.2: both within 33 ms
    assert noise.median_ms == -2 and noise.mean_ms is not None and noise.mean_ms > 0 and not noise.sign_disagrees


def test_mean_percentiles_and_large_difference_shares_on_known_data():
    st = grid_compare(np.arange(11) * 300.0 - 600)  # -600, -300, ..., 2400
    assert (st.mean_ms, st.median_ms, st.p10_ms, st.p90_ms) == (900, 900, -300, 2100)
    assert st.share_row_slower == pytest.approx(5 / 11) and st.share_row_faster == 0  # 1200 ... 2400
    edges = grid_compare(np.array([1000.0, -1000.0, 1001.0, -1001.0, 0.0]))  # "more than 1 s": 1000 is not
    assert edges.share_row_slower == pytest.approx(0.2) and edges.share_row_faster == pytest.approx(0.2)
    assert SETTINGS.grid.large_difference_ms == 1000  # from the profile, not the code
    few = grid_compare(np.array([400.0, 600.0]))  # too few for an interval, still described
    assert few.verdict == "too few pairs" and few.ci_low_ms is None and few.mean_ms == 500
    assert few.share_row_slower == 0 and few.p10_ms == pytest.approx(420)
    empty = grid_compare(np.empty(0))
    assert empty.pairs == 0 and empty.mean_ms is None and empty.share_row_slower is None and not empty.sign_disagrees


def stalled(n, r, i, res, p):
    """b is 600 ms faster than a, except on every fourth site, where it pays a 5 s stall. (On every third site,
    14 of 40, the sites do not settle the median's sign: resampled, a third of them stall half the time.)"""
    return ok(base_time(i, r) + ((5000 if i % 4 == 0 else -600) if res == "b" else 0))


def test_mirror_cells_are_the_negated_statistics_of_the_same_pairs(tmp_path):
    visits = load(make_store(tmp_path / "s.sqlite", stalled, rounds=2)).visits
    cells = grid(visits, "wired", SETTINGS)
    a_b, b_a = cell(cells, A, B), cell(cells, B, A)  # (B, A) is computed by negating (A, B)
    direct = grid_compare(b_a.differences)  # the descriptive statistics do not depend on what is resampled
    for name in ("median_ms", "hodges_lehmann_ms", "mean_ms", "p10_ms", "p90_ms", "share_row_slower", "shade"):
        assert getattr(b_a.statistics, name) == pytest.approx(getattr(direct, name)), name
    st, mirror = a_b.statistics, b_a.statistics
    assert mirror.p10_ms == -st.p90_ms and mirror.p90_ms == -st.p10_ms and mirror.mean_ms == -st.mean_ms
    assert mirror.share_row_slower == st.share_row_faster and mirror.share_row_faster == st.share_row_slower
    assert mirror.share_row_slower == pytest.approx(20 / 80)  # sites 0, 4, ..., 36 in both rounds
    assert st.sign_disagrees and mirror.sign_disagrees and mirror.verdict == "row faster" and st.verdict == "row slower"


def test_the_report_tables_and_marks_cells_whose_median_and_mean_disagree(tmp_path):
    store = make_store(tmp_path / "s.sqlite", stalled, rounds=2)
    report = analyze([store], tmp_path / "out")
    frame = pd.read_csv(tmp_path / "out/tables/pairs-wired.csv")
    new = ["mean_ms", "p10_ms", "p90_ms", "share_row_slower", "share_row_faster", "sign_disagrees"]
    assert set(new) <= set(frame.columns) and frame["sign_disagrees"].all()
    assert "more than 1000 ms" in (tmp_path / "out/tables/pairs-wired.md").read_text()
    page = report.html.read_text()
    assert "The median and the mean disagree in sign in 1 pair" in page
    assert "median +600 ms [+600, +600] (row slower), but mean -800 ms" in page  # a minus b: 10 of 40 sites stall
    assert f"<td>row slower by the median {DAGGER}; mean -800 ms disagrees</td>" in page
    assert "<td>row faster</td>" not in page and "<td>row slower</td>" not in page  # never unqualified


def painted(n, r, i, res, p):
    """FCP and LCP well apart from onLoad, with b 300 ms faster to first paint (and 200 ms slower to onLoad, see
    `slower_onload`); b reports no FCP on sites 0-4, and DOMContentLoaded is never reported."""
    fcp = None if (res == "b" and i < 5) else 300 + 13 * i + 7 * r - (300 if res == "b" else 0)
    return {"fcp_ms": fcp, "lcp_ms": 600 + 13 * i + (50 if res == "b" else 0)}


def slower_onload(n, r, i, res, p):
    if res == "a" and i == 39:
        return "Page-load Timeout", None, "Page-load Timeout"  # not Successful: no onLoad, and no paint either
    return ok(base_time(i, r) + (200 if res == "b" else 0))


def test_the_fcp_grid_pairs_fcp_times_and_leaves_out_only_visits_without_fcp(tmp_path):
    store = make_store(tmp_path / "s.sqlite", slower_onload, rounds=2, paints=painted)
    visits = load(store).visits
    assert visits["fcp_ms"].dtype == float and visits["dcl_ms"].isna().all()
    assert visits[visits["error_class"] != "Successful"][["fcp_ms", "lcp_ms"]].isna().all().all()
    onload = cell(grid(visits, "wired", SETTINGS), B, A).statistics
    fcp = cell(grid(visits, "wired", SETTINGS, metric="fcp"), B, A).statistics
    lcp = cell(grid(visits, "wired", SETTINGS, metric="lcp"), B, A).statistics
    assert onload.pairs == 2 * 39 and onload.median_ms == pytest.approx(200)  # site 39 timed out under a
    assert fcp.pairs == 2 * (39 - 5) and fcp.median_ms == pytest.approx(-300) and fcp.verdict == "row faster"
    assert lcp.pairs == 2 * 39 and lcp.median_ms == pytest.approx(50)  # b's missing FCP does not touch LCP

    report = analyze([store], tmp_path / "out")
    names = {p.name for p in report.figures + report.tables}
    assert {"grid-wired.png", "grid-fcp-wired.png", "grid-fcp-wired.pdf"} <= names
    assert {"pairs-wired.csv", "pairs-fcp-wired.csv", "pairs-fcp-wired.tex", "metric-coverage.csv"} <= names
    assert not any("lcp" in name for name in names)  # drawn only for the profile's metrics: onload, fcp
    tables = {
        m: pd.read_csv(tmp_path / f"out/tables/{stem}.csv").set_index(["row", "column"])
        for m, stem in (("onload", "pairs-wired"), ("fcp", "pairs-fcp-wired"))
    }
    assert tables["onload"].loc[("B Do53", "A Do53"), "median_ms"] == pytest.approx(200)
    assert tables["fcp"].loc[("B Do53", "A Do53"), "median_ms"] == pytest.approx(-300)
    assert set(tables["fcp"]["metric"]) == {"fcp"} and set(tables["onload"]["metric"]) == {"onload"}
    assert (
        "Paired First Contentful Paint differences, Wired" in (tmp_path / "out/tables/pairs-fcp-wired.md").read_text()
    )
    coverage = pd.read_csv(tmp_path / "out/tables/metric-coverage.csv").set_index("resolver")
    assert coverage.loc["B", "Successful"] == 80 and coverage.loc["B", "no FCP"] == 10
    assert coverage.loc["A", "Successful"] == 78 and coverage.loc["A", "no onLoad"] == 0
    page = report.html.read_text()
    assert "First Contentful Paint: 10 of 158 Successful visits lack it" in page
    assert "onLoad: 0 of 158 Successful visits lack it" in page
    assert "10 of 158 Successful visits on Wired have no First Contentful Paint" in page
    assert "Pairwise grid of First Contentful Paint, Wired (grid-fcp-wired.png" in page


def test_the_grid_figure_is_titled_with_its_metric(tmp_path):
    visits = load(make_store(tmp_path / "s.sqlite", slower_onload, paints=painted)).visits
    for metric, title in (("fcp", "paired First Contentful Paint times"), ("onload", "paired onLoad times")):
        fig = grid_figure(grid(visits, "wired", SETTINGS, metric=metric), [A, B], "wired", SETTINGS)
        assert title in fig.get_suptitle()
        plt.close(fig)


def test_a_store_from_before_the_paint_columns_still_analyses_and_says_fcp_is_missing(tmp_path):
    # Every metric is read; the metrics a store may predate are exactly the paint and loading columns.
    assert {m.column for m in METRICS.values()} <= set(VISIT_COLUMNS)
    assert set(OPTIONAL_VISIT_COLUMNS) == {
        "fcp_ms",
        "lcp_ms",
        "dcl_ms",
        "vantage_point",
        "browser",
        "browser_session",
        "session_ordinal",
        "resolver_connection",
        "resolver_handshakes",
        "first_query_open",
        "replay_misses",
        "replay_fuzzy",
        "replay_errors",
        "replay_filled",
        "replay_dns_misses",
        "first_h3",
        "page_http3",
        "page_hosts",
        "https_asked",
        "https_answered",
        "https_used",
        "dns_unsettled",
        "resolver_connection_reset",
        "own_lookups_before_page",
    }
    old = without_paint_columns(make_store(tmp_path / "old.sqlite", slower_onload))
    with closing(sqlite3.connect(old)) as db:
        assert "fcp_ms" not in {row[1] for row in db.execute("PRAGMA table_info(visits)")}
    results = load(old)
    assert results.lacking == {"fcp_ms": [str(old)], "lcp_ms": [str(old)], "dcl_ms": [str(old)]}
    assert results.visits["fcp_ms"].isna().all() and results.visits["fcp_ms"].dtype == float
    assert all(c.statistics.pairs == 0 for c in grid(results.visits, "wired", SETTINGS, metric="fcp"))

    report = analyze([old], tmp_path / "out")
    names = {p.name for p in report.figures + report.tables}
    assert {"grid-wired.png", "pairs-wired.csv"} <= names
    assert not any("fcp" in name for name in names)  # no empty FCP grid, table or protocol figure
    assert cell(grid(results.visits, "wired", SETTINGS), B, A).statistics.median_ms == pytest.approx(200)
    page = report.html.read_text()
    assert (
        f"No First Contentful Paint grid for Wired: the metric is missing from all 79 Successful visits "
        f"({old} predates the fcp_ms column)." in page
    )
    assert f"First Contentful Paint: 79 of 79 Successful visits lack it; {old} predates its column" in page

    new = make_store(tmp_path / "new.sqlite", slower_onload, paints=painted)  # read with an old store: one frame
    both = load([old, new])
    assert both.lacking["fcp_ms"] == [str(old)] and both.visits["fcp_ms"].notna().sum() == 79 - 5


def test_an_unknown_metric_in_the_profile_is_a_one_line_error(tmp_path):
    text = DEFAULT_PROFILE.read_text()
    assert 'metrics = ["onload", "fcp"]' in text and SETTINGS.grid.metrics == ["onload", "fcp"]
    profile = tmp_path / "p.toml"
    profile.write_text(text.replace('metrics = ["onload", "fcp"]', 'metrics = ["onload", "ttfb", "fp"]'))
    with pytest.raises(ValueError) as error:
        load_settings(profile)
    message = str(error.value)
    assert message == f"{profile}: grid.metrics: unknown metric 'ttfb', 'fp' (known: onload, fcp, lcp, dcl)"
    store = make_store(tmp_path / "s.sqlite", slower_onload)
    with pytest.raises(ValueError, match="unknown metric 'ttfb'"):
        analyze([store], tmp_path / "out", profile)
    profile.write_text(text.replace('metrics = ["onload", "fcp"]', 'metrics = ["fcp", "fcp"]'))
    with pytest.raises(ValueError, match=r"grid.metrics: a metric is named twice"):
        load_settings(profile)
    profile.write_text(text.replace('metrics = ["onload", "fcp"]', ""))  # a profile from before: the paper's alone
    assert load_settings(profile).grid.metrics == ["onload"]


def test_timer_failures_are_counted_beside_the_resolution_cdfs(tmp_path):
    error = {"status": "error", "error": "TLS authentication failed"}
    timings = {
        ("wired", "a", "dot"): [3000] * 27 + [None] + [error] * 2 + [{"status": "invalid", "error": "empty label"}],
        ("wired", "b", "doh"): [{"status": "error", "error": "HTTP 503"}] * 4,  # never answers
    }
    store = make_store(
        tmp_path / "s.sqlite",
        lambda n, r, i, res, p: ok(base_time(i, r)),
        timings=timings,
        configurations=(("a", "dot"), ("b", "doh")),
    )
    recorded = load(store).timings
    rates = timer_failures(recorded, SETTINGS).set_index("resolver")
    assert rates.loc["A", "sent"] == 30 and rates.loc["A", "invalid (not sent)"] == 1  # invalid: never sent
    assert (rates.loc["A", "ok"], rates.loc["A", "timeout"], rates.loc["A", "error"]) == (27, 1, 2)
    assert rates.loc["A", "failed %"] == 10 and rates.loc["A", "ci low %"] < 10 < rates.loc["A", "ci high %"]
    assert rates.loc["B", "failed %"] == 100
    details = timer_failure_details(recorded, SETTINGS)
    assert list(zip(details["status"], details["error"], details["queries"], strict=True)) == [
        ("error", "TLS authentication failed", 2),
        ("timeout", "(none)", 1),
        ("error", "HTTP 503", 4),
    ]
    fig = resolution_cdf(recorded, "wired", SETTINGS)
    legend = fig.axes[0].get_legend()
    assert legend is not None
    texts = [t.get_text() for t in legend.get_texts()]
    plt.close(fig)
    assert texts == ["A DoT (failed 10.0 %, n=30)", "B DoH (failed 100.0 %, n=4)"]
    report = analyze([store], tmp_path / "out")
    assert {"timer-failures.csv", "timer-failure-details.md"} <= {p.name for p in report.tables}
    page = report.html.read_text()
    assert "TLS authentication failed" in page and "35 timed queries (7 failed of 34 sent)" in page


def test_the_large_difference_threshold_is_required_in_the_profile(tmp_path):
    text = DEFAULT_PROFILE.read_text()
    profile = tmp_path / "p.toml"
    profile.write_text("\n".join(line for line in text.splitlines() if not line.startswith("large_difference_ms")))
    with pytest.raises(ValueError, match="grid.large_difference_ms: Field required"):
        load_settings(profile)
    profile.write_text(text.replace("large_difference_ms = 1000", "large_difference_ms = 0"))
    with pytest.raises(ValueError, match="grid.large_difference_ms: Input should be greater than 0"):
        load_settings(profile)


def test_the_median_interval_matches_resampling_with_numpy_s_median():
    rng = np.random.default_rng(11)
    for values in (rng.lognormal(5, 1, 301), rng.normal(0, 50, 1000), np.repeat([1.0, 2.0, 3.0], 50)):
        low, high = median_interval(values, 0.95)
        draws = np.median(rng.choice(values, (4000, len(values))), axis=1)
        mc_low, mc_high = np.percentile(draws, [2.5, 97.5])
        spread = np.subtract(*np.percentile(values, [75, 25])) / 10
        assert abs(low - mc_low) <= spread and abs(high - mc_high) <= spread


def test_success_rates_differ_with_intervals_and_both_taxonomies_are_tabled(tmp_path):
    def outcome(n, r, i, res, p):
        if res == "b" and i % 4 == 0:  # b fails a quarter of sites with connection failures
            return "Other Error", None, "DNS Error"
        return ok(base_time(i, r))

    visits = load(make_store(tmp_path / "s.sqlite", outcome, sites=200)).visits
    diff = success_differences(visits, SETTINGS).iloc[0]
    assert diff["a success %"] == 100 and diff["b success %"] == 75
    assert diff["difference (a - b) pp"] == 25 and diff["ci low pp"] > 0 and diff["differs"]
    strict = outcome_table(visits, "strict", SETTINGS).set_index("resolver")
    paper = outcome_table(visits, "paper-2019", SETTINGS).set_index("resolver")
    assert strict.loc["B", "Other Error %"] == 25 and strict.loc["B", "DNS Error %"] == 0
    assert paper.loc["B", "DNS Error %"] == 25 and paper.loc["B", "Other Error %"] == 0


def test_the_report_has_every_figure_and_table_in_three_formats_and_is_self_contained(tmp_path):
    configs = [(r, p) for r in ("cloudflare", "google") for p in ("do53", "dot", "doh")]
    rng = random.Random(5)
    timings = {
        (n, r, p): [rng.randint(2000, 90000) for _ in range(30)] + [None] for n in ("wired", "4g") for r, p in configs
    }
    store = make_store(
        tmp_path / "s.sqlite",
        lambda n, r, i, res, p: ok(base_time(i, r) + rng.gauss(0, 30)),
        networks=("wired", "4g"),
        configurations=configs,
        timings=timings,
        paints=lambda n, r, i, res, p: {"fcp_ms": base_time(i, r) / 3 + rng.gauss(0, 10)},
    )
    report = analyze([store], tmp_path / "out")
    names = {p.name for p in report.figures}
    for stem in (
        "grid-wired",
        "grid-4g",
        "grid-fcp-wired",
        "grid-fcp-4g",
        "protocols-fcp-cloudflare",
        "resolution-cdf-wired",
        "resolution-cdf-4g",
        "protocols-cloudflare",
        "byte-cost",
    ):
        assert {f"{stem}.png", f"{stem}.pdf"} <= names
    tables = {p.name for p in report.tables}
    for stem in ("outcomes-strict", "outcomes-paper-2019", "success-differences", "pairs-wired", "pairs-fcp-4g"):
        assert {f"{stem}.md", f"{stem}.csv", f"{stem}.tex"} <= tables
    page = report.html.read_text()
    assert "Cloudflare DoT" in page and page.count("data:image/png;base64,") == len(names) // 2
    assert 'src="figures/' not in page and "\\begin{table}" in (tmp_path / "out/tables/outcomes-strict.tex").read_text()
    # The grids were drawn in workers: each is in its place, none left as a placeholder.
    grids = list(tmp_path.glob("out/figures/grid-*.png"))
    assert "<!-- figure" not in page and page.count('alt="Pairwise grid of') == len(grids) > 0
    frame = pd.read_csv(tmp_path / "out/tables/pairs-wired.csv")
    assert len(frame) == 6 * 5 and set(frame["verdict"]) <= {
        "indistinguishable",
        "inconclusive",
        "row slower",
        "row faster",
    }


def test_an_empty_or_foreign_store_gets_a_clear_message(tmp_path):
    store = Store(tmp_path / "empty.sqlite")
    store.close()
    with pytest.raises(ResultsError, match="empty.sqlite: no visit has been recorded yet"):
        analyze([tmp_path / "empty.sqlite"], tmp_path / "out")
    with pytest.raises(ResultsError, match="nope.sqlite: no such store"):
        load(tmp_path / "nope.sqlite")
    db = sqlite3.connect(tmp_path / "other.sqlite")
    db.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    db.execute("INSERT INTO meta VALUES ('schema_version', '9')")
    db.commit()
    with pytest.raises(ResultsError, match="store schema version 9, this analysis reads 1"):
        load(tmp_path / "other.sqlite")


def test_export_writes_every_table_as_parquet_and_csv(tmp_path):
    store = make_store(tmp_path / "s.sqlite", lambda n, r, i, res, p: ok(base_time(i, r)))
    for fmt, reader in (("parquet", pd.read_parquet), ("csv", pd.read_csv)):
        paths = export(store, tmp_path / fmt, fmt)
        visits = reader(next(p for p in paths if p.stem == "visits"))
        assert len(visits) == 80 and set(visits["status"]) == {"done"}


def test_the_byte_cost_model_orders_the_protocols():
    sizes = load_sizes()
    for r in (1, 10, 100):
        assert client_bytes("do53", r, sizes) < client_bytes("dot", r, sizes) < client_bytes("doh", r, sizes)
    # Per extra query, DoT costs a TLS record, a length prefix and an ACK more than Do53's UDP datagram.
    per = lambda p: client_bytes(p, 11, sizes) - client_bytes(p, 10, sizes)  # noqa: E731
    assert per("do53") == 20 + 8 + 52 and per("dot") == 52 + 22 + 2 + 52 + 52


def test_the_notebook_regenerates_every_figure_from_a_store(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    configs = [("near", p) for p in ("do53", "dot", "doh")]
    store = make_store(
        tmp_path / "s.sqlite",
        lambda n, r, i, res, p: ok(base_time(i, r)),
        networks=("wired", "3g"),
        configurations=configs,
        timings={("wired", "near", "dot"): [3000, 4000, 5000]},
    )
    notebook = nbformat.read(Path(__file__).parents[1] / "notebooks" / "paper-figures.ipynb", as_version=4)
    first = notebook.cells[1]
    assert first.source.startswith("STORE = ")
    first.source = f"STORE = {str(store)!r}\nOUT = {str(tmp_path / 'nb')!r}"
    NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(Path(__file__).parents[1])}}
    ).execute()
    written = {p.name for p in (tmp_path / "nb").iterdir()}
    assert {
        "grid-wired.png",
        "grid-3g.png",
        "resolution-cdf-wired.png",
        "protocols-near.png",
        "byte-cost.png",
    } <= written
    assert configurations(load(store).visits) == configs


def test_analysis_reads_the_store_only_never_the_harness():
    for path in (Path(__file__).parents[1] / "analysis").glob("*.py"):
        text = path.read_text()
        assert "from harness" not in text and "import harness" not in text, path


def with_session(path: Path, session: str, connection: str, shift_ms: float) -> Path:
    """The store's visits as if run with this browser session and resolver connection, onLoad shifted."""
    with closing(sqlite3.connect(path)) as db, db:
        db.execute(
            "UPDATE visits SET browser_session = ?, resolver_connection = ?, on_load_ms = on_load_ms + ?",
            (session, connection, shift_ms),
        )
    return path


def test_visits_of_two_connection_states_are_never_paired_and_the_report_shows_warm_against_cold(tmp_path):
    cold = with_session(make_store(tmp_path / "cold.sqlite", slower_onload), "reused", "cold", 0.0)
    warm = with_session(make_store(tmp_path / "warm.sqlite", slower_onload), "reused", "warm", -100.0)
    visits = load([cold, warm]).visits
    assert set(visits["resolver_connection"].astype(str)) == {"cold", "warm"}
    # Same study, rounds and sites in both stores: only the connection state keeps their visits apart.
    statistics = cell(grid(visits, "wired", SETTINGS), B, A).statistics
    alone = cell(grid(load(cold).visits, "wired", SETTINGS), B, A).statistics
    assert statistics.pairs == 2 * alone.pairs > 0 and statistics.median_ms == pytest.approx(200)
    report = analyze([cold, warm], tmp_path / "out")
    table = pd.read_csv(tmp_path / "out/tables/session-modes.csv")
    assert set(table["reused: warm - cold ms"]) == {-100.0}
    assert (table["reused cold visits"] == 40).all() and (table["reused warm visits"] == 40).all()
    assert "Browser life and resolver connection" in report.html.read_text()


def test_two_browser_lives_are_never_in_one_grid_and_the_environment_names_them(tmp_path):
    fresh = make_store(tmp_path / "fresh.sqlite", slower_onload)
    reused = with_session(make_store(tmp_path / "reused.sqlite", slower_onload), "reused warm-started", "cold", -50.0)
    report = analyze([fresh, reused], tmp_path / "out")
    text = report.html.read_text()
    assert "Browser lives differ: their grids are apart" in text
    assert "<h3>browser fresh, " in text and "<h3>browser reused warm-started, " in text  # each life's own grids
    found = re.search(r"browser, browser life, resolver connection, page's HTTP/3: ([^<]*)</li>", text)
    assert found is not None and re.fullmatch(
        r"firefox fresh cold HTTP/3 unrecorded \(\d+ visits\), "
        r"firefox reused warm-started cold HTTP/3 unrecorded \(\d+ visits\)",
        found.group(1),
    ), found
    assert "page_http3" not in text  # the column's name is not what the report says
    table = pd.read_csv(tmp_path / "out/tables/session-modes.csv")
    assert {"fresh cold visits", "reused warm-started cold visits"} <= set(table.columns)
    # Each mode's success tables hold its own visits; the tables of every visit say that they pool the two.
    pooled = pd.read_csv(tmp_path / "out/tables/outcomes-strict.csv")
    for mode in ("fresh cold", "reused warm-started cold"):
        own = pd.read_csv(tmp_path / f"out/tables/outcomes-strict-{mode}.csv")
        assert list(own["visits"] * 2) == list(pooled["visits"]) and own.drop(columns="visits").equals(
            pooled.drop(columns="visits")
        )  # the two stores hold the same outcomes, as many each
        assert (tmp_path / f"out/tables/success-differences-{mode}.csv").exists()
        assert f"<h2>Success and errors, browser {mode} connection</h2>" in text
    assert "<h2>Success and errors, every browser life and resolver connection together" in text


def test_a_reused_browser_s_first_visit_is_a_life_of_its_own_and_a_fresh_one_s_is_not(tmp_path):
    fresh = make_store(tmp_path / "fresh.sqlite", slower_onload)
    reused = with_session(make_store(tmp_path / "reused.sqlite", slower_onload), "reused warm-started", "cold", 0.0)
    for path in (fresh, reused):  # every browser's first visit is its block's first in run order
        with closing(sqlite3.connect(path)) as db, db:
            db.execute(
                "UPDATE visits SET session_ordinal = 1 + ordinal - "
                "(SELECT MIN(ordinal) FROM visits AS v WHERE v.block = visits.block)"
            )
    visits = load([fresh, reused]).visits
    lives = visits.groupby(visits["browser_session"].astype(str)).size()
    firsts = visits[visits["session_ordinal"] == 1]
    assert 0 < lives["reused warm-started (first visit)"] == (firsts["browser_session"] != "fresh").sum()
    assert lives["fresh"] == len(visits) / 2 and lives.sum() == len(visits)
    report = analyze([fresh, reused], tmp_path / "out")
    assert "<h3>browser reused warm-started (first visit), " in report.html.read_text()
    table = pd.read_csv(tmp_path / "out/tables/session-modes.csv")
    assert {"reused warm-started cold visits", "reused warm-started (first visit) cold visits"} <= set(table.columns)


def test_a_store_of_one_mode_has_no_session_section(tmp_path):
    report = analyze([make_store(tmp_path / "s.sqlite", slower_onload)], tmp_path / "out")
    assert not (tmp_path / "out/tables/session-modes.csv").exists()
    assert "Browser life and resolver connection" not in report.html.read_text()


def test_columns_with_one_value_are_filled_and_read_as_the_store_holds_them(tmp_path):
    path = make_store(tmp_path / "s.sqlite", slower_onload)
    with closing(sqlite3.connect(path)) as db, db:
        # One visit differs in a column that is otherwise uniform; another column holds one value in done
        # visits only (a planned visit with NULL there must not make it look mixed).
        db.execute("UPDATE visits SET session_ordinal = 3 WHERE ordinal = (SELECT MIN(ordinal) FROM visits)")
        db.execute("UPDATE visits SET replay_misses = 2 WHERE status = 'done'")
        db.execute(
            "INSERT INTO visits (ordinal, study_id, round, block, network, rank, site, site_group, resolver, "
            "protocol, status, attempts) SELECT MAX(ordinal) + 1, study_id, round, block, network, rank, site, "
            "site_group, resolver, protocol, 'planned', 0 FROM visits"
        )
        naive = pd.read_sql_query(f"SELECT {', '.join(VISIT_COLUMNS)} FROM visits WHERE status = 'done'", db)
    visits = load(path).visits
    assert len(visits) == len(naive) and list(visits.columns) == VISIT_COLUMNS
    for column in VISIT_COLUMNS:
        read, stored = visits[column].astype(object), naive[column].astype(object)
        assert [None if pd.isna(v) else v for v in read] == [None if pd.isna(v) else v for v in stored], column
    assert visits["browser"].dtype == "category" and visits["resolver_handshakes"].dtype == float
    assert sorted(visits["session_ordinal"].dropna().unique()) == [3.0]


def test_a_configuration_whose_page_could_use_http3_is_never_paired_with_one_whose_could_not(tmp_path):
    """Firefox's DoH3 turns HTTP/3 on for the page (docs/web.md): where its visits say "on" and the others "off",
    the grid has no pair between them, and a pair of two "off" configurations is untouched."""
    store = make_store(tmp_path / "s.sqlite", slower_onload)
    before = cell(grid(load(store).visits, "wired", SETTINGS), B, A).statistics
    with closing(sqlite3.connect(store)) as db, db:
        db.execute("UPDATE visits SET page_http3 = 'off'")
    assert cell(grid(load(store).visits, "wired", SETTINGS), B, A).statistics.pairs == before.pairs > 0
    with closing(sqlite3.connect(store)) as db, db:
        db.execute("UPDATE visits SET page_http3 = 'on' WHERE resolver = ?", (B[0],))
    assert cell(grid(load(store).visits, "wired", SETTINGS), B, A).statistics.pairs == 0


def test_a_table_s_name_keeps_a_dot_of_its_life(tmp_path):
    frame = pd.DataFrame({"a": [1]})
    lives = ["fresh settled 2.5 s", "fresh settled 2.7 s"]
    written = [write_table(frame, tmp_path / f"browsers-{life}", "caption") for life in lives]
    assert [p.name for p in written[0]] == [f"browsers-{lives[0]}{ext}" for ext in (".md", ".csv", ".tex")]
    assert len({p for paths in written for p in paths}) == 6 == len(list(tmp_path.iterdir()))  # none overwritten
