"""Browsers as a factor of a study: the key, the plan, the store's `browser` column, a visitor per browser."""

from __future__ import annotations

import hashlib
import sqlite3
from collections import Counter

import pytest

from harness.errors import HarnessError
from harness.plan import Site, make_plan
from harness.store import Store
from harness.study import load_study
from tests.fakes import FakePlace, FakeStation, FakeVisitor
from tests.helpers import study_file
from tests.test_study import GOOD, write_study

SITES = [Site(f"site{i}.test", i + 1, "top" if i < 6 else "tail") for i in range(10)]
NETWORKS = ["wired", "4g", "3g"]
CONFIGURATIONS = [(r, p) for r in ("near", "far") for p in ("do53", "dot", "doh")]
#: The digest of this plan as the code made it before browsers were a factor (main at 146018c): a study that
#: names no browsers must keep planning exactly this, or a resumed crawl would find its stored plan changed.
PINNED = "7a5d8f3721dfe33b71b1240f1fa49ed198d829497a753dfaa4a27cd6e261ecba"


def _digest(browsers: tuple[str, ...] | None) -> str:
    if browsers is None:
        plan = make_plan(SITES, 2, NETWORKS, CONFIGURATIONS, 7, ["", "b"])
    else:
        plan = make_plan(SITES, 2, NETWORKS, CONFIGURATIONS, 7, ["", "b"], browsers=browsers)
    text = "\n".join(
        f"{v.ordinal} {v.round} {v.block} {v.network} {v.site.domain} {v.resolver} {v.protocol} {v.vantage_point}"
        for v in plan
    )
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_plan_without_browsers_is_the_plan_from_before_browsers_were_a_factor():
    assert _digest(None) == PINNED and _digest(("firefox",)) == PINNED
    assert {v.browser for v in make_plan(SITES, 1, NETWORKS, CONFIGURATIONS, 7)} == {"firefox"}
    assert _digest(("firefox", "chromium")) != PINNED


def test_two_browsers_cross_every_configuration_shuffled_with_it_per_site_in_the_same_blocks():
    visits = list(make_plan(SITES, 2, NETWORKS, CONFIGURATIONS, 7, browsers=("firefox", "chromium")))
    assert len(visits) == 2 * 3 * 10 * 6 * 2 and [v.ordinal for v in visits] == list(range(len(visits)))
    keys = Counter((v.round, v.network, v.site.domain, v.resolver, v.protocol, v.browser) for v in visits)
    assert set(keys.values()) == {1}
    # Still one block per (round, network): the browser does not split blocks, so a link is shaped once.
    blocks = {(v.block, v.round, v.network) for v in visits}
    assert len(blocks) == 6 == len({b for b, _, _ in blocks})
    # A site's twelve visits are consecutive, both browsers among them, in an order that differs between sites.
    runs = [visits[i : i + 12] for i in range(0, len(visits), 12)]
    assert all(len({v.site for v in run}) == 1 and {v.browser for v in run} == {"firefox", "chromium"} for run in runs)
    orders = {tuple(v.browser for v in run) for run in runs}
    assert len(orders) > 10
    # Neither browser comes first by design: across sites each opens about half the runs.
    firsts = Counter(run[0].browser for run in runs)
    assert min(firsts.values()) > len(runs) // 4


def test_the_study_key_browsers_is_validated_and_multiplies_the_plan(tmp_path):
    one = load_study(str(write_study(tmp_path, GOOD)))
    assert one.study.browsers == ["firefox"]
    two = load_study(
        str(
            write_study(
                tmp_path, GOOD.replace("rounds = 2", 'rounds = 2\nbrowsers = ["firefox", "chromium"]'), "two.toml"
            )
        )
    )
    assert two.visit_count == 2 * one.visit_count == len(two.plan())
    assert Counter(v.browser for v in two.plan()) == {"firefox": one.visit_count, "chromium": one.visit_count}
    assert two.record()["study"]["browsers"] == ["firefox", "chromium"]


@pytest.mark.parametrize(
    "value, message",
    [
        ('["firefox", "lynx"]', r"bad.toml:7: browsers.1: .*unknown browser 'lynx' \(have: chromium, firefox\)"),
        ('["chromium", "chromium"]', r"bad.toml:7: browsers: .*'chromium' is listed twice"),
        ("[]", r"bad.toml:7: browsers: .*at least 1"),
    ],
)
def test_a_bad_browsers_key_is_one_line_naming_file_line_key_and_value(tmp_path, value, message):
    path = write_study(tmp_path, GOOD.replace("rounds = 2", f"rounds = 2\nbrowsers = {value}"), "bad.toml")
    with pytest.raises(HarnessError, match=message) as caught:
        load_study(str(path))
    assert "\n" not in str(caught.value)


def test_the_store_keeps_each_planned_visit_s_browser_and_an_old_store_reads_firefox(tmp_path):
    plan = list(make_plan(SITES, 1, ["wired"], CONFIGURATIONS, 3, browsers=("chromium", "firefox")))
    store = Store(tmp_path / "crawl.sqlite")
    store.add_study("s1", "test", 3, {"rounds": 1})
    store.add_plan("s1", plan)
    assert store.next_planned("s1") == plan[0]
    assert store.planned_at("s1", "", len(plan)) == plan
    store.close()
    # A store from before the column: the column is added when a crawl opens it, every old visit in Firefox.
    old = tmp_path / "old.sqlite"
    store = Store(old)
    store.add_study("s1", "test", 3, {"rounds": 1})
    store.add_plan("s1", list(make_plan(SITES, 1, ["wired"], CONFIGURATIONS, 3)))
    store.close()
    db = sqlite3.connect(old)
    db.execute("ALTER TABLE visits DROP COLUMN browser")
    db.commit()
    db.close()
    store = Store(old)
    entry = store.next_planned("s1")
    assert entry is not None and entry.browser == "firefox"
    store.close()


def test_a_station_runs_each_planned_visit_in_its_own_browser_s_visitor(tmp_path, monkeypatch):
    monkeypatch.setenv("DNSSTUDY_PROGRESS_INTERVAL", "0")
    loaded = load_study(
        str(study_file(tmp_path, changes={"rounds = ": 'browsers = ["firefox", "chromium"]\nrounds = '}))
    )
    place = FakePlace("dsfake", tmp_path / "run")
    station = FakeStation(place, loaded.study, tmp_path / "results")
    visitors = {b: FakeVisitor(place, tmp_path / "results") for b in ("firefox", "chromium")}
    station._visitors = dict(visitors)  # what visitor_for builds on first use, without a browser
    plan = loaded.plan()
    assert {v.browser for v in plan} == {"firefox", "chromium"}
    for visit in plan:
        outcome = station.visit(visit)
        assert outcome is not None and outcome.record["browser"] == visit.browser
    for browser, visitor in visitors.items():
        mine = [v for v in plan if v.browser == browser]
        assert visitor.calls == [(v.url, v.resolver, v.protocol, "wired") for v in mine]
    # A test's one visitor (the setter) serves every browser of the study.
    station.visitor = visitors["firefox"]
    assert station.visitor_for("chromium") is visitors["firefox"] is station.visitor


def test_reused_browsers_run_one_at_a_time_each_block_s_part_of_a_browser_after_the_other(tmp_path, monkeypatch):
    monkeypatch.setenv("DNSSTUDY_PROGRESS_INTERVAL", "0")
    both = 'browsers = ["firefox", "chromium"]\nbrowser_session = "reused"\nrounds = '
    loaded = load_study(str(study_file(tmp_path, changes={"rounds = ": both})))
    assert loaded.study.browsers_apart
    place = FakePlace("dsfake", tmp_path / "run")
    station = FakeStation(place, loaded.study, tmp_path / "results")
    visitors = {b: FakeVisitor(place, tmp_path / "results") for b in ("firefox", "chromium")}
    station._visitors = dict(visitors)
    seen: list[tuple[str, str]] = []
    for browser, visitor in visitors.items():
        monkeypatch.setattr(visitor, "close", lambda b=browser: seen.append(("close", b)))

        def visit_once(*args, b=browser, real=visitor.visit_once):
            seen.append(("visit", b))
            return real(*args)

        monkeypatch.setattr(visitor, "visit_once", visit_once)
    plan = loaded.plan()
    for visit in plan:
        assert station.visit(visit) is not None
    # Each visit's browser is the only one alive: any other browser's visits since its last close came before.
    alive: set[str] = set()
    for what, browser in seen:
        if what == "close":
            alive.discard(browser)
        else:
            alive.add(browser)
            assert alive == {browser}, seen
    # One switch of browser a block at most: a reused browser serves its whole part of the block.
    for block in {v.block for v in plan}:
        order = [v.browser for v in plan if v.block == block]
        assert sum(x != y for x, y in zip(order, order[1:], strict=False)) <= 1


def test_a_planned_visit_s_browser_survives_the_trip_to_a_vantage_point_s_worker():
    import json

    from harness.distributed.messages import visit_message, visit_of

    plan = make_plan(SITES, 1, ["wired"], CONFIGURATIONS, 1, ["a"], browsers=("firefox", "chromium"))
    visit = next(v for v in plan if v.browser == "chromium")
    message = json.loads(json.dumps(visit_message("s", {"name": "s"}, visit)))
    assert visit_of(message) == visit and visit_of(message).browser == "chromium"
    del message["visit"]["browser"]  # from a coordinator before browsers were a factor: Firefox
    assert visit_of(message).browser == "firefox"
