"""Analysis on synthetic stores whose answers are known: pairing, statistics, tables, figures, report, notebook."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.bytecost import client_bytes, load_sizes
from analysis.export import export
from analysis.pairs import configurations, grid
from analysis.report import analyze
from analysis.results import ResultsError, load
from analysis.settings import load_settings
from analysis.stats import compare, median_interval, rate_difference
from analysis.tables import outcome_table, success_differences
from harness.store import Store
from tests.synthetic import make_store, ok

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
    assert b_vs_a.wilcoxon_p < 1e-6


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
    g = SETTINGS.grid
    assert compare(small, 0.95, g.indistinguishable_ms, g.thresholds_ms, 5).verdict == "indistinguishable"
    verdict = compare(wide, 0.95, g.indistinguishable_ms, g.thresholds_ms, 5)
    assert verdict.median_ms is not None and abs(verdict.median_ms) < 33 and verdict.verdict == "inconclusive"
    assert compare(small[:3], 0.95, 33, g.thresholds_ms, 5).verdict == "too few pairs"


def test_the_exact_bootstrap_interval_matches_resampling():
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
    d, low, high = rate_difference(50, 100, 50, 100, 0.95)
    assert d == 0 and low < 0 < high


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
    )
    report = analyze([store], tmp_path / "out")
    names = {p.name for p in report.figures}
    for stem in (
        "grid-wired",
        "grid-4g",
        "resolution-cdf-wired",
        "resolution-cdf-4g",
        "protocols-cloudflare",
        "byte-cost",
    ):
        assert {f"{stem}.png", f"{stem}.pdf"} <= names
    tables = {p.name for p in report.tables}
    for stem in ("outcomes-strict", "outcomes-paper-2019", "success-differences", "pairs-wired"):
        assert {f"{stem}.md", f"{stem}.csv", f"{stem}.tex"} <= tables
    page = report.html.read_text()
    assert "Cloudflare DoT" in page and page.count("data:image/png;base64,") == len(names) // 2
    assert 'src="figures/' not in page and "\\begin{table}" in (tmp_path / "out/tables/outcomes-strict.tex").read_text()
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
