"""The analysis by browser: a stratum like the vantage point, per-browser grids and tables, the side-by-side figure."""

from __future__ import annotations

import sqlite3
from collections import Counter
from contextlib import closing
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from analysis.figures import browser_figure
from analysis.pairs import differences, grid, load_time_table
from analysis.report import analyze
from analysis.results import load
from analysis.settings import load_settings
from analysis.tables import outcome_table, side_by_side_table
from tests.synthetic import make_store

SETTINGS = load_settings()
CONFIGS = [("near", "do53"), ("near", "doh"), ("near", "dot")]
#: Chromium's DoH 100 ms slower than its Do53 beyond Firefox's 50 ms; DoT as slow as in Firefox (+20 ms).
BROWSERS = {"firefox": {}, "chromium": {"doh": 100.0}}
SITES = 12


def _doh_slower(network, round_, site, resolver, protocol):
    extra = {"doh": 50.0, "dot": 20.0}.get(protocol, 0.0)
    return "Successful", 1000.0 + 10 * site + extra, "Successful"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = make_store(tmp_path / "two.sqlite", _doh_slower, sites=SITES, rounds=2, configurations=CONFIGS,
                      browsers=BROWSERS)  # fmt: skip
    # Chromium's DoH fails on the first three sites (both rounds): a per-browser success table must show it.
    with closing(sqlite3.connect(path)) as db:
        db.execute(
            "UPDATE visits SET error_class = 'DNS Error', paper_2019 = 'DNS Error', on_load_ms = NULL "
            "WHERE browser = 'chromium' AND protocol = 'doh' AND rank <= 3"
        )
        db.commit()
    return path


def _median(visits: pd.DataFrame, browser: str, arm: str) -> float:
    table = load_time_table(visits[visits["browser"].astype(str) == browser], "wired")
    return float(np.median(differences(table, ("near", arm), ("near", "do53"))))


def test_pairs_never_join_two_browsers_and_each_browser_keeps_its_own_difference(store):
    visits = load(store).visits
    assert Counter(visits["browser"].astype(str)) == {"firefox": SITES * 2 * 3, "chromium": SITES * 2 * 3}
    table = load_time_table(visits, "wired")
    # One row per (browser, round, site): a Firefox visit is never paired with a Chromium one.
    assert len(table) == 2 * 2 * SITES
    assert set(table.index.get_level_values("browser")) == {"firefox", "chromium"}
    assert _median(visits, "firefox", "doh") == pytest.approx(50)
    assert _median(visits, "chromium", "doh") == pytest.approx(150)
    assert _median(visits, "chromium", "dot") == _median(visits, "firefox", "dot") == pytest.approx(20)
    # The pooled grid counts each browser's site as its own unit: 2 x 12, minus Chromium's 3 failed DoH sites.
    cells = {(c.row, c.column): c for c in grid(visits, "wired", SETTINGS)}
    assert cells[(("near", "doh"), ("near", "do53"))].statistics.sites == 2 * SITES - 3
    assert cells[(("near", "dot"), ("near", "do53"))].statistics.sites == 2 * SITES


def test_the_tables_show_each_browser_apart(store):
    visits = load(store).visits
    side = side_by_side_table(visits, "browser", SETTINGS)
    doh = side[side["protocol"] == "DoH"].iloc[0]
    assert doh["firefox visits"] == doh["chromium visits"] == 2 * SITES
    assert doh["firefox success %"] == 100.0 and doh["chromium success %"] == pytest.approx(100 * 9 / 12, abs=0.01)
    chromium = outcome_table(visits[visits["browser"].astype(str) == "chromium"], "strict", SETTINGS)
    firefox = outcome_table(visits[visits["browser"].astype(str) == "firefox"], "strict", SETTINGS)
    assert list(chromium.loc[chromium["protocol"] == "DoH", "DNS Error %"]) == [25.0]
    assert list(firefox["DNS Error %"]) == [0.0, 0.0, 0.0]


def test_the_browser_figure_puts_each_arm_s_difference_side_by_side(store):
    visits = load(store).visits
    fig = browser_figure(visits, SETTINGS)
    ax = fig.axes[0]
    medians = sorted(round(float(np.asarray(line.get_ydata())[0])) for line in ax.lines if line.get_gid() == "median")
    # Two arms (DoH, DoT) x two browsers, each box's median the paired difference from Do53 in that browser.
    assert medians == [20, 20, 50, 150]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["Near (lab) DoT", "Near (lab) DoH"]  # the registry's order
    legend = fig.axes[-1].get_legend()
    assert legend is not None and [t.get_text() for t in legend.get_texts()] == ["Firefox", "Chromium"]
    plt.close(fig)


def test_the_report_has_a_section_per_browser_with_its_grids_tables_and_the_figure(store, tmp_path):
    report = analyze([store], tmp_path / "report")
    names = {p.name for p in report.figures + report.tables}
    assert {"grid-wired-firefox.png", "grid-wired-chromium.png", "browsers.csv", "browsers-do53.png"} <= names
    assert {"outcomes-strict-chromium.csv", "outcomes-paper-2019-firefox.csv"} <= names
    assert "success-differences-chromium.csv" in names
    page = report.html.read_text()
    assert "<h2>Browsers</h2>" in page and "Success and errors, Chromium" in page
    assert "Success and errors, Firefox" in page
    frame = pd.read_csv(report.out / "tables" / "outcomes-strict-chromium.csv")
    assert frame.loc[frame["protocol"] == "DoH", "DNS Error %"].tolist() == [25.0]


def test_a_store_from_before_the_browser_column_reads_firefox_and_has_no_browser_section(tmp_path):
    path = make_store(tmp_path / "old.sqlite", _doh_slower, sites=6, configurations=CONFIGS)
    with closing(sqlite3.connect(path)) as db:
        db.execute("ALTER TABLE visits DROP COLUMN browser")
        db.commit()
    results = load(path)
    assert set(results.visits["browser"].astype(str)) == {"firefox"} and "browser" not in results.lacking
    page = analyze([path], tmp_path / "report").html.read_text()
    assert "<h2>Browsers</h2>" not in page
    # Read with a two-browser store, the old store's visits are Firefox's.
    both = load([path, make_store(tmp_path / "new.sqlite", _doh_slower, sites=6, configurations=CONFIGS,
                                  browsers=BROWSERS)])  # fmt: skip
    assert Counter(both.visits["browser"].astype(str)) == {"firefox": 18 + 18, "chromium": 18}


def test_with_two_browser_lives_each_life_has_its_own_browsers_section_and_none_mixes_them(store, tmp_path):
    reused = tmp_path / "reused.sqlite"
    reused.write_bytes(store.read_bytes())
    with closing(sqlite3.connect(reused)) as db, db:  # the same visits as if made by reused browsers, 100 ms faster
        db.execute("UPDATE visits SET browser_session = 'reused warm-started', on_load_ms = on_load_ms - 100")
    report = analyze([store, reused], tmp_path / "report")
    names = {p.name for p in report.figures + report.tables}
    for life in ("fresh", "reused warm-started"):
        assert {f"browsers-{life}.csv", f"browsers-do53-{life}.png", f"grid-wired-chromium-{life}.png"} <= names
        assert f"outcomes-strict-firefox-{life}.csv" in names
        side = pd.read_csv(report.out / "tables" / f"browsers-{life}.csv")
        doh = side[side["protocol"] == "DoH"].iloc[0]
        assert doh["firefox visits"] == doh["chromium visits"] == 2 * SITES  # one life's visits, not both lives'
        pairs = pd.read_csv(report.out / "tables" / f"pairs-wired-firefox-{life}.csv")
        assert set(pairs["sites"]) == {SITES}  # each site once: its pairs in this life only
    # Nothing per browser pools the two lives.
    assert not {"browsers.csv", "grid-wired-firefox.png", "outcomes-strict-chromium.csv"} & names
    fresh = pd.read_csv(report.out / "tables" / "pairs-wired-firefox-fresh.csv")
    later = pd.read_csv(report.out / "tables" / "pairs-wired-firefox-reused warm-started.csv")
    assert list(fresh["median_ms"]) == list(later["median_ms"])  # a constant shift leaves every paired difference
    assert "<h2>Browsers, browser reused warm-started</h2>" in report.html.read_text()
