"""A two-browser study crawled in a real lab and analysed: each browser's visits proven, recorded and reported."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections import Counter

import pytest

from tests.helpers import CLI_ENV, ROOT, study_file
from tests.test_crawl import assert_crawl_complete, crawl_argv

pytestmark = pytest.mark.lab


def test_a_two_browser_study_is_crawled_proven_recorded_and_reported_per_browser(lab, tmp_path):
    from analysis.report import analyze

    changes = {
        'networks = ["wired", "4g"]': 'networks = ["wired"]',
        'resolvers = ["near", "far"]': 'resolvers = ["near", "far"]\nbrowsers = ["firefox", "chromium"]',
    }
    study = study_file(tmp_path, name="browserstest", seed=6, changes=changes)
    store = tmp_path / "run" / "store.sqlite"
    done = subprocess.run(crawl_argv(study, store), cwd=ROOT, env=CLI_ENV, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    db = assert_crawl_complete(study, store)  # 2 sites x 2 resolvers x 2 protocols x 2 browsers, one block
    db.row_factory = sqlite3.Row
    rows = db.execute("SELECT browser, protocol, error_class, counted, record FROM visits").fetchall()
    assert Counter(r["browser"] for r in rows) == {"firefox": 8, "chromium": 8}
    for row in rows:
        record = json.loads(row["record"])
        assert (row["error_class"], row["counted"]) == ("Successful", 1), (row["browser"], record["detail"])
        assert record["proof"]["valid"], (row["browser"], row["protocol"], record["proof"])
        assert record["browser"] == row["browser"]
        # Each visit ran in the browser it was planned for: its record names that browser's version only.
        other = "chromium" if row["browser"] == "firefox" else "firefox"
        assert row["browser"] in record["versions"] and other not in record["versions"]
    environment = dict(db.execute("SELECT key, value FROM environment").fetchall())
    assert {"firefox", "chromium", "geckodriver", "chromedriver"} <= set(environment)

    report = analyze([store], tmp_path / "report")
    names = {p.name for p in report.figures + report.tables}
    assert {"browsers.csv", "browsers-do53.png", "grid-wired-firefox.png", "grid-wired-chromium.png"} <= names
    assert {"outcomes-strict-firefox.csv", "outcomes-strict-chromium.csv"} <= names
    page = report.html.read_text()
    assert "<h2>Browsers</h2>" in page and "Success and errors, Firefox" in page
    assert "Success and errors, Chromium" in page
