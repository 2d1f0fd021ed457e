"""HTTP/3 and HTTPS records per arm (analysis/https_use.py) and their report section, on synthetic stores."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pandas as pd
import pytest

from analysis.https_report import HEADING, OUTCOMES, RECORDS
from analysis.https_use import h3_outcomes_table, recorded, records_table
from analysis.report import analyze
from analysis.results import H3_COLUMNS, load
from analysis.settings import load_settings
from tests.synthetic import make_store, ok

SETTINGS = load_settings()
LABELS = SETTINGS.labels
#: (site index, round, network, browser, protocol) -> the visit's (first_h3, page_hosts, asked, answered, used).
Columns = Callable[[int, int, str, str, str], tuple[int | None, ...]]


def write_h3(path: Path, columns: Columns) -> Path:
    """Set every done visit's HTTP/3 and HTTPS-record columns straight through the schema, as the harness will."""
    with closing(sqlite3.connect(path)) as db, db:
        rows = db.execute("SELECT ordinal, site, round, network, browser, protocol FROM visits").fetchall()
        values = [
            (*columns(int(site.removeprefix("site").removesuffix(".test")), rnd, net, browser, protocol), ordinal)
            for ordinal, site, rnd, net, browser, protocol in rows
        ]
        db.executemany(f"UPDATE visits SET {', '.join(f'{c} = ?' for c in H3_COLUMNS)} WHERE ordinal = ?", values)
    return path


def outcome(network: str, round_: int, i: int, resolver: str, protocol: str) -> tuple[str, float | None, str]:
    """DoH fails at site 9 (both rounds); site 8's first DoH visit is the harness's failure (not counted)."""
    if protocol == "doh" and i == 9:
        return "Page-load Timeout", None, "Page-load Timeout"
    if protocol == "doh" and i == 8 and round_ == 0:
        return "Infrastructure Failure", None, "Infrastructure Failure"
    return ok(1000 + 10 * i)


def two_browsers(i: int, round_: int, network: str, browser: str, protocol: str) -> tuple[int | None, ...]:
    """Firefox's DoH pages: 10 hosts, 8 asked, 4 answered, 2 used, the document over h3 at sites 0-4; Chromium's:
    10, 10, 5, 5 and its document unobserved. Do53: no record asked. On 3G, Firefox's odd sites have no resolver
    logs (the counts NULL, the hosts a misleading 1,000) and Chromium none at all (the Internet side's case)."""
    if protocol == "do53":
        return 0, 10, 0, 0, 0
    first = (1 if i < 5 else 0) if browser == "firefox" else None
    hosts = (10, 8, 4, 2) if browser == "firefox" else (10, 10, 5, 5)
    if network == "3g" and (browser == "chromium" or i % 2):
        return (first, 1000, None, None, None) if browser == "firefox" else (0, None, None, None, None)
    return (first, *hosts)


def row(frame: pd.DataFrame, **where: object) -> pd.Series:
    mine = frame
    for column, value in where.items():
        mine = mine[mine[column] == value]
    assert len(mine) == 1, (where, mine)
    return mine.iloc[0]


@pytest.fixture(scope="module")
def browsers_store(tmp_path_factory) -> Path:
    path = make_store(
        tmp_path_factory.mktemp("h3") / "s.sqlite",
        outcome,
        sites=10,
        rounds=2,
        networks=("wired", "3g"),
        configurations=(("a", "do53"), ("a", "doh")),
        browsers={"firefox": {}, "chromium": {}},
    )
    return write_h3(path, two_browsers)


def test_counts_and_shares_per_browser_are_never_pooled(browsers_store):
    frame = records_table(load(browsers_store).visits, SETTINGS)
    doh, wired = LABELS.protocol("doh"), LABELS.network("wired")
    firefox = row(frame, network=wired, protocol=doh, browser=LABELS.browser("firefox"))
    # 20 visits less the harness's failure; pooled with Chromium it would read 90, 45 and 35 %.
    assert firefox["visits"] == 19 and firefox["visits with hosts"] == 19 and firefox["page hosts"] == 190
    assert (firefox["HTTPS asked"], firefox["HTTPS answered"], firefox["HTTPS used"]) == (152, 76, 38)
    assert (firefox["asked % of hosts"], firefox["answered % of hosts"], firefox["used % of hosts"]) == (80, 40, 20)
    assert firefox["visits with first_h3"] == 19 and firefox["first_h3 %"] == pytest.approx(100 * 10 / 19, abs=0.01)
    chromium = row(frame, network=wired, protocol=doh, browser=LABELS.browser("chromium"))
    assert (chromium["asked % of hosts"], chromium["answered % of hosts"], chromium["used % of hosts"]) == (100, 50, 50)
    assert chromium["visits with first_h3"] == 0 and pd.isna(chromium["first_h3 %"])
    do53 = row(frame, network=wired, protocol=LABELS.protocol("do53"), browser=LABELS.browser("firefox"))
    assert do53["visits"] == 20 and do53["asked % of hosts"] == 0 and do53["first_h3 %"] == 0
    assert len(frame) == 8  # 2 networks x 2 arms x 2 browsers, none pooled, none left out


def test_null_columns_are_left_out_not_counted_as_zero(browsers_store):
    frame = records_table(load(browsers_store).visits, SETTINGS)
    doh, slow = LABELS.protocol("doh"), LABELS.network("3g")
    firefox = row(frame, network=slow, protocol=doh, browser=LABELS.browser("firefox"))
    # Even sites only (10 visits, less the harness's failure at site 8): the odd sites' 1,000 hosts stay out.
    assert firefox["visits"] == 19 and firefox["visits with hosts"] == 9 and firefox["page hosts"] == 90
    assert firefox["used % of hosts"] == 20 and firefox["visits with first_h3"] == 19
    chromium = row(frame, network=slow, protocol=doh, browser=LABELS.browser("chromium"))
    assert (
        chromium["visits with hosts"] == 0 and pd.isna(chromium["page hosts"]) and pd.isna(chromium["used % of hosts"])
    )
    assert chromium["visits with first_h3"] == 19 and chromium["first_h3 %"] == 0


def test_success_and_onload_by_first_h3(browsers_store):
    frame = h3_outcomes_table(load(browsers_store).visits, SETTINGS)
    where = {
        "network": LABELS.network("wired"),
        "protocol": LABELS.protocol("doh"),
        "browser": LABELS.browser("firefox"),
    }
    h3 = row(frame, first_h3=1, **where)
    assert h3["visits"] == 10 and h3["success %"] == 100 and h3["median onLoad ms"] == 1020
    assert h3["ci low ms"] <= 1020 <= h3["ci high ms"] and h3["ci low ms"] < h3["ci high ms"]
    # Sites 5-9: site 9 fails twice, site 8's first visit is not counted; Successful 1050-1070 twice, 1080 once.
    other = row(frame, first_h3=0, **where)
    assert other["visits"] == 9 and other["success %"] == pytest.approx(100 * 7 / 9, abs=0.01)
    assert other["median onLoad ms"] == 1060 and other["ci low ms"] <= 1060 <= other["ci high ms"]
    # Chromium's document was never observed on Wired: no row; on 3G every visit is first_h3 0.
    assert frame[(frame["browser"] == LABELS.browser("chromium")) & (frame["first_h3"] == 1)].empty
    assert len(frame[(frame["network"] == where["network"]) & (frame["browser"] == LABELS.browser("chromium"))]) == 1


def test_browser_lives_and_resolver_connections_are_kept_apart(tmp_path):
    path = make_store(
        tmp_path / "s.sqlite", lambda *_: ok(1000), sites=10, rounds=2, browser_life="reused warm-started"
    )
    with closing(sqlite3.connect(path)) as db, db:  # sites 0-4: a new browser's first visit; round 1: warm
        db.execute("UPDATE visits SET session_ordinal = CASE WHEN rank <= 5 THEN 1 ELSE 2 END")
        db.execute("UPDATE visits SET resolver_connection = CASE WHEN round = 1 THEN 'warm' ELSE 'cold' END")
    write_h3(path, lambda i, rnd, *_: (1 if rnd else 0, 10, 10, 10, 10 if i < 5 else 0))
    frame = records_table(load(path).visits, SETTINGS)
    assert len(frame) == 2 * 2 * 2  # two arms, each in two browser lives and two resolver connections
    first = frame[frame["browser life"] == "reused warm-started (first visit)"]
    later = frame[frame["browser life"] == "reused warm-started"]
    assert set(first["used % of hosts"]) == {100} and set(later["used % of hosts"]) == {0}
    assert set(frame.loc[frame["resolver connection"] == "warm", "first_h3 %"]) == {100}
    assert set(frame.loc[frame["resolver connection"] == "cold", "first_h3 %"]) == {0}
    assert set(frame["visits"]) == {5}


def test_the_report_shows_the_section_and_writes_both_tables(browsers_store, tmp_path):
    report = analyze([browsers_store], tmp_path / "out")
    page = report.html.read_text()
    assert f"<h2>{HEADING}</h2>" in page
    for name in (RECORDS, OUTCOMES):
        csv = tmp_path / "out" / "tables" / f"{name}.csv"
        assert csv in report.tables and csv.exists()
    written = pd.read_csv(tmp_path / "out" / "tables" / f"{RECORDS}.csv")
    assert len(written) == 8 and set(written["used % of hosts"].dropna()) == {0, 20, 50}


def test_stores_without_the_columns_get_no_section_and_no_error(tmp_path):
    empty = make_store(tmp_path / "null.sqlite", lambda *_: ok(1000), sites=6)  # the columns, all NULL
    old = make_store(tmp_path / "old.sqlite", lambda *_: ok(1000), sites=6)
    with closing(sqlite3.connect(old)) as db, db:  # a store from before the columns
        for column in H3_COLUMNS:
            db.execute(f"ALTER TABLE visits DROP COLUMN {column}")
    for store in (empty, old):
        results = load(store)
        assert not recorded(results.visits) and records_table(results.visits, SETTINGS).empty
        report = analyze([store], tmp_path / store.stem)
        assert HEADING not in report.html.read_text()
        assert not any(p.stem in (RECORDS, OUTCOMES) for p in report.tables)
    assert set(load(old).lacking) == set(H3_COLUMNS)
