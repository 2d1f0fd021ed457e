"""Following a crawl: the progress lines of a log, `dnsstudy status`, and what a killed crawl left behind.

The progress reporter runs on a fake clock; `dnsstudy status` reads stores
written through `harness.store` (a crawler recorded as this very test
process, alive, then dead); the lab test runs a real crawl with its output
in a file, kills it, and resumes it.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from harness import netns
from harness.cli import main
from harness.errors import HarnessError
from harness.plan import PlannedVisit, make_plan
from harness.progress import ProgressLog, finish_time, interval_from_env, recent_rate, round_starts
from harness.sitelist import Site
from harness.status import store_status
from harness.store import Store
from tests.conftest import TEST_PREFIX, TEST_SUBNET
from tests.helpers import ROOT, study_file, wait_for

CONFIGURATIONS = [("near", "do53"), ("near", "doh")]
T0 = 1_800_000_000.0  # 2027-01-15: any fixed moment

# -- the progress reporter --------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self, now: float = T0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Summary:
    retried: int = 0
    infrastructure: int = 0


def reporter(
    clock: FakeClock, terminal: bool = False, interval: float = 60.0, total: int = 8
) -> tuple[ProgressLog, io.StringIO, dict]:
    out = io.StringIO()
    tally: dict[tuple[str, str], list[int]] = {}
    log = ProgressLog(
        "demo",
        Console(file=out, force_terminal=terminal, width=80),
        done=0,
        total=total,
        planned_by_round={0: total},
        round_start_at=lambda _round: T0,
        tally=tally,
        configurations=CONFIGURATIONS,
        blocks=2,
        failure_of=lambda ordinal: "Infrastructure Failure: the DoH resolver died" if ordinal == 3 else None,
        interval=interval,
        clock=clock,
    )
    return log, out, tally


def visit(ordinal: int, block: int = 0) -> PlannedVisit:
    resolver, protocol = CONFIGURATIONS[ordinal % 2]
    return PlannedVisit(ordinal, 0, block, "wired", Site(f"s{ordinal}.test", ordinal + 1, "top"), resolver, protocol)


def test_a_log_gets_one_progress_line_per_interval_with_every_field():
    clock = FakeClock()
    log, out, tally = reporter(clock)
    summary = Summary()
    printed = 0
    for ordinal in range(8):  # a visit every 30 s: 120 visits an hour
        clock.now += 30
        summary.infrastructure += ordinal == 3
        ok, counted = (0, 0) if ordinal == 3 else (1, 1)
        cell = tally.setdefault(CONFIGURATIONS[ordinal % 2], [0, 0])
        cell[0], cell[1] = cell[0] + ok, cell[1] + counted
        log.visit_done(visit(ordinal), summary)
        printed += log.tick()
    lines = out.getvalue().splitlines()
    assert printed == len(lines) == 4  # 240 s at one line a minute
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
    assert all(re.match(rf"{stamp} progress demo: \d/8 visits ", line) for line in lines)
    second = lines[1]  # at T0 + 120 s, after 4 visits
    assert "4/8 visits (50.0 %)" in second and "block 0 (wired; 2 in all)" in second
    assert "120 visits/h (last 2 min)" in second
    finish = time.strftime("%Y-%m-%d %H:%M", time.localtime(T0 + 120 + 4 * 30))
    assert f"ETA {finish} (in 2 min)" in second
    assert "successful/counted near/do53 2/2, near/doh 1/1" in second
    clock_at_failure = time.strftime("%H:%M:%S", time.localtime(T0 + 120))
    assert "harness failures this run: 0 retried, 1 recorded" in second
    assert f"last: visit 3 near/doh at {clock_at_failure}: Infrastructure Failure: the DoH resolver died" in second
    assert "done;" in lines[3] and "ETA" not in lines[3]


def test_a_block_start_prints_at_once_and_restarts_the_interval():
    clock = FakeClock()
    log, out, _ = reporter(clock)
    clock.now += 50
    log.block_started(visit(0, block=1))
    assert len(out.getvalue().splitlines()) == 1 and "block 1 (wired; 2 in all)" in out.getvalue()
    assert "ETA unknown" in out.getvalue()
    clock.now += 59
    assert not log.tick()
    clock.now += 1
    assert log.tick()


def test_a_terminal_gets_no_progress_lines_nor_does_an_interval_of_zero():
    for terminal, interval in ((True, 60.0), (False, 0.0)):
        clock = FakeClock()
        log, out, _ = reporter(clock, terminal=terminal, interval=interval)
        log.block_started(visit(0))
        for ordinal in range(3):
            clock.now += 100
            log.visit_done(visit(ordinal), Summary())
            log.tick()
        log.close()
        assert out.getvalue() == ""


def test_the_thread_prints_on_time_while_no_visit_ends():
    """A block's timer run, a slow visit or a wait for a round prints nothing of the crawl's own: the thread does."""
    out = io.StringIO()
    log = ProgressLog(
        "demo",
        Console(file=out, force_terminal=False),
        0,
        4,
        {0: 4},
        lambda _round: 0.0,
        {},
        CONFIGURATIONS,
        1,
        interval=0.1,
    ).start()
    begun = time.monotonic()
    # Waited for, not slept: on a loaded host each tick's wake-up is late, and lateness adds up.
    wait_for(lambda: len(out.getvalue().splitlines()) >= 3, 5, "three lines from the thread")
    took = time.monotonic() - begun
    log.close()  # and a last line
    assert len(out.getvalue().splitlines()) >= 4 and took >= 0.25, took  # at the interval, never faster
    assert not any(t.name == "progress-log" for t in threading.enumerate())


def test_the_interval_comes_from_the_environment():
    assert interval_from_env({}) == 60.0
    assert interval_from_env({"DNSSTUDY_PROGRESS_INTERVAL": "2.5"}) == 2.5
    assert interval_from_env({"DNSSTUDY_PROGRESS_INTERVAL": "0"}) == 0.0
    for bad in ("x", "-1", "nan", "inf"):
        with pytest.raises(HarnessError, match="DNSSTUDY_PROGRESS_INTERVAL: expected seconds"):
            interval_from_env({"DNSSTUDY_PROGRESS_INTERVAL": bad})


def test_the_rate_is_taken_between_visits_and_the_eta_waits_for_each_round():
    assert recent_rate([]) is None and recent_rate([5.0]) is None
    assert recent_rate([0.0, 10.0, 20.0, 30.0]) == 360.0
    # A wait for a round (or a long timer run) between visits is not a slow crawl: the window ends at the newest.
    assert recent_rate([0.0, 10.0, 20.0, 5000.0, 5010.0], window_s=900) == 360.0
    starts = round_starts(1000.0, rounds=3, duration_days=3 / 86_400 * 1000)  # a round every 1,000 s
    assert [starts(r) for r in range(3)] == [1000.0, 2000.0, 3000.0]
    # One visit a second: round 1's ten visits wait for 2000, round 2's for 3000.
    assert finish_time(1500.0, {0: 0, 1: 10, 2: 10}, 3600.0, starts) == 3010.0
    assert finish_time(500.0, {1: 10}, 3600.0, round_starts(1000.0, 3, None)) == 510.0


# -- what a killed crawl left in the client namespace ---------------------------------------------------------


def test_only_orphans_are_a_killed_crawls_leftovers_and_they_are_named(monkeypatch):
    from harness import leftovers

    # pid: (comm, parent, in the namespace)
    procs = {
        1: ("init", 0, False),
        50: ("systemd", 1, False),  # a user's service manager, which adopts a desktop session's orphans
        60: ("bash", 1, False),
        100: ("geckodriver", 1, True),  # the killed crawl's: orphaned
        101: ("firefox-esr", 100, True),
        102: ("stubby", 50, True),
        103: ("sleep", 60, True),  # someone's, run from a living shell
        104: ("python3", 103, True),
    }
    monkeypatch.setattr(leftovers.netns, "pids_in", lambda ns: [p for p, v in procs.items() if v[2]])
    monkeypatch.setattr(leftovers, "_stat", lambda pid: procs[pid][:2] if pid in procs else None)
    monkeypatch.setattr(leftovers, "command_line", lambda pid: {103: "sleep 600"}.get(pid, procs[pid][0]))
    stopped: list[int] = []
    monkeypatch.setattr(leftovers, "terminate", lambda pids, grace: stopped.extend(pids))
    lines = leftovers.stop_leftovers("ns")
    assert stopped == [100, 101, 102]
    assert lines == [
        "stopped 3 processes an interrupted crawl left in ns: geckodriver (pid 100), firefox-esr (pid 101), "
        "stubby (pid 102)",
        "left running in ns, not a crawl's leftover: pid 103 sleep 600 (run by pid 60 bash); "
        "it shares the crawl's link",
        "left running in ns, not a crawl's leftover: pid 104 python3 (run by pid 60 bash); it shares the crawl's link",
    ]
    monkeypatch.setattr(leftovers.netns, "pids_in", lambda ns: [])
    assert leftovers.stop_leftovers("ns") == []  # nothing there: not a word


# -- `dnsstudy status` on stores written through harness.store --------------------------------------------------


def build_store(path: Path, done: int, sites: int = 4) -> list[PlannedVisit]:
    """A two-block study (wired, 4g) with ``done`` visits done, a harness failure, a DNS error and a timed block."""
    store = Store(path)
    site_list = [Site(f"site{i}.test", i + 1, "top") for i in range(sites)]
    plan = list(make_plan(site_list, 1, ["wired", "4g"], CONFIGURATIONS, seed=1))
    config = {"study": {"rounds": 1, "resolvers": ["near"], "protocols": ["do53", "doh"]}, "list": {}}
    store.add_study("demo", "demo", 1, config, plan)
    now = time.time()
    store.started_at("demo", now - 3600)
    for i, v in enumerate(plan[:done]):
        error = {3: ("Infrastructure Failure", "the DoH resolver died"), 5: ("DNS Error", "NXDOMAIN")}.get(i)
        retried = [{"error_class": "Infrastructure Failure", "detail": "browser crashed", "started_at": ""}]
        record = {
            "visit_id": uuid.uuid4().hex,
            "started_at": dt.datetime.fromtimestamp(now - 30 * (done - i), dt.UTC).isoformat(timespec="milliseconds"),
            "error_class": error[0] if error else "Successful",
            "detail": error[1] if error else "",
            "paper_2019": "Successful",
            "counted": not (error and error[0] == "Infrastructure Failure"),
            "on_load_ms": None if error else 800.0,
            "har_path": None,
            "wall_s": 20.0,
            "retried": retried if i == 1 else [],
        }
        store.complete("demo", v, record, attempts=int(i == 1))
    verdicts = {"rtt_within_2ms": True, "uplink_rate_within_5pct": False}
    store.add_link_check("demo", 0, plan[0].network, {"backend": "netem", "problem": None, "verdicts": verdicts})
    if done >= len(plan) // 2:
        store.add_block_timings("demo", 0, plan[0].network, 1, [_timing()])
    store.close()
    return plan


def _timing() -> dict:
    return {"resolver": "near", "protocol": "do53", "name": "a.test", "type": "A", "start": 0.0, "status": "ok"}


def status(path: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["status", str(path), *args])
    return result.exit_code, result.output


def set_crawler(path: Path, **values: object) -> None:
    db = sqlite3.connect(path)
    with db:
        db.execute(f"UPDATE crawler SET {', '.join(f'{k} = ?' for k in values)}", tuple(values.values()))
    db.close()


def test_status_of_a_finished_study(tmp_path):
    path = tmp_path / "store.sqlite"
    plan = build_store(path, done=16)
    store = Store(path)
    store.add_block_timings("demo", 1, plan[-1].network, 2, [_timing()], "near/doh: 1 timeout")
    store.crawler_started("demo")
    store.crawler_ended("demo", "finished")
    store.close()
    code, out = status(path)
    assert code == 0, out
    assert f"store {path} (wal journal)" in out
    assert re.search(rf"study demo: FINISHED: crawler pid {os.getpid()} on \S+, started .*, ended .*: finished", out)
    assert f"progress: {len(plan)}/{len(plan)} visits (100.0 %)" in out and "ETA" not in out
    for resolver, protocol in CONFIGURATIONS:  # visit 3 is an Infrastructure Failure, visit 5 a DNS error
        ordinals = [v.ordinal for v in plan if (v.resolver, v.protocol) == (resolver, protocol)]
        counted = len(ordinals) - (3 in ordinals)
        ok = counted - (5 in ordinals)
        assert re.search(rf"{resolver}/{protocol} +{ok}/{counted} +{100 * ok / counted:.1f} % +\(8/8 done\)", out)
    first, last = plan[0].network, plan[-1].network
    assert re.search(rf"0 +r0 {first} +8/8 +link off target: uplink_rate_within_5pct \(netem, .*\); timed 1 host", out)
    assert re.search(
        rf"1 +r0 {last} +8/8 +link not checked; timed 2 hostnames at .*, problems: near/doh: 1 timeout", out
    )
    v3 = plan[3]
    assert re.search(
        rf"visit 3 \(block 0, {first}\) {v3.resolver}/{v3.protocol} {v3.site.domain} .*: Infrastructure Failure: the",
        out,
    )
    assert "retried 1x, last: Infrastructure Failure: browser crashed" in out
    assert re.search(r"visit 5 .*: DNS Error: NXDOMAIN", out)
    reader = Store.read_only(path)  # what the progress line reads when a harness failure happens: one row
    assert reader.harness_failure_of("demo", 3) == "Infrastructure Failure: the DoH resolver died"
    assert reader.harness_failure_of("demo", 1) == "Infrastructure Failure: browser crashed (retried)"
    assert reader.harness_failure_of("demo", 0) is None
    reader.close()
    data = json.loads(status(path, "--json")[1])
    assert data["exit_code"] == 0 and data["studies"][0]["state"] == "finished"
    assert data["studies"][0]["crawler"]["liveness"] == "ended"


def test_status_of_a_study_whose_crawler_is_alive_then_dead(tmp_path):
    path = tmp_path / "store.sqlite"
    build_store(path, done=6)
    store = Store(path)
    store.crawler_started("demo")  # the crawler is this very process: alive
    store.close()
    code, out = status(path)
    assert code == 3, out
    assert re.search(rf"study demo: RUNNING: crawler pid {os.getpid()} on \S+, started .*, alive", out)
    assert re.search(
        r"progress: 6/16 visits \(37.5 %\), 120 visits/h .* ETA \d{4}-\d\d-\d\d \d\d:\d\d \(in 5 min\)", out
    )
    assert "    1: not started (1 block)" in out
    # The pid now names another process (reused): dead. So does a pid that no longer runs.
    set_crawler(path, pid_started=1)
    code, out = status(path)
    assert code == 1 and "STOPPED" in out and "died without ending (killed, crashed, or the machine went down)" in out
    assert "if resumed now ETA" in out
    set_crawler(path, pid=2**22 + 1)
    assert status(path)[0] == 1
    set_crawler(path, hostname="elsewhere.example")
    code, out = status(path)
    assert code == 3 and "another host" in out
    store = Store(path)
    store.crawler_started("demo")
    store.crawler_ended("demo", "halted: lab dshg: daemons died (resolver near)")
    store.close()
    code, out = status(path)
    assert code == 1 and re.search(r"STOPPED: .*ended .*: halted: lab dshg: daemons died \(resolver near\)", out)


def test_status_reads_without_disturbing_a_writer_and_refuses_what_is_no_store(tmp_path):
    path = tmp_path / "store.sqlite"
    build_store(path, done=6)
    writer = sqlite3.connect(path, isolation_level=None, timeout=0)
    writer.execute("BEGIN IMMEDIATE")  # a crawl in the middle of recording a visit
    writer.execute("UPDATE visits SET status = 'done' WHERE ordinal = 6")
    assert store_status(path).studies[0].done == 6  # the last commit, not the writer's open transaction
    writer.execute("COMMIT")
    writer.execute("BEGIN EXCLUSIVE")  # no lock of the reader is left
    writer.execute("COMMIT")
    writer.execute("PRAGMA journal_mode=DELETE")  # a store without WAL: the reader's locks last a statement
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE visits SET status = 'done' WHERE ordinal = 7")
    report = store_status(path)
    assert (report.journal_mode, report.studies[0].done) == ("delete", 7)
    writer.execute("COMMIT")
    assert writer.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # status changed nothing
    writer.close()
    (tmp_path / "junk.sqlite").write_text("not a database, just text" * 100)
    for bad, message in ((tmp_path / "junk.sqlite", "not a dnsstudy store"), (tmp_path / "none.sqlite", "no such")):
        code, out = status(bad)
        assert code == 2 and f"dnsstudy: error: {bad}: {message}" in out and len(out.strip().splitlines()) == 1
    assert not (tmp_path / "none.sqlite").exists()


# -- a real crawl, its output in a file ------------------------------------------------------------------------


def _crawl(study: Path, store: Path, log: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "harness.cli", "crawl", str(study), "--store", str(store)]
    argv += ["--prefix", TEST_PREFIX, "--subnet", TEST_SUBNET]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DNSSTUDY_PROGRESS_INTERVAL": "2"}
    with open(log, "w") as out:  # a file: not a terminal
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def _progress_lines(log: Path, crawl: subprocess.Popen | None = None) -> list[str]:
    """The progress lines so far (while ``crawl`` runs: one that ended early fails the test with its log)."""
    text = log.read_text()
    assert crawl is None or crawl.poll() is None, text
    return [line for line in text.splitlines() if " progress statustest: " in line]


def _browser_running(namespace: str) -> bool:
    names = []
    for pid in netns.pids_in(namespace):
        try:
            names.append(Path(f"/proc/{pid}/comm").read_text().strip())
        except OSError:
            pass
    return "geckodriver" in names


@pytest.mark.lab
def test_a_crawl_logs_progress_to_a_file_and_status_follows_it_through_a_kill(lab, tmp_path):
    store = tmp_path / "run" / "store.sqlite"
    # Three rounds (24 visits, about 40 s on the wired lab): long enough to be killed while it runs, and each
    # progress line (every 2 s) may count more than one visit since the last.
    study = study_file(
        tmp_path,
        name="statustest",
        seed=9,
        changes={'networks = ["wired", "4g"]': 'networks = ["wired"]', "rounds = 1": "rounds = 3"},
    )
    namespace = lab.config.namespaces["client"]
    # Someone's program in the client namespace, run by this (living) test: not a leftover, never stopped.
    bystander = subprocess.Popen(netns.command(namespace, ["sleep", "600"]))
    try:
        first = _crawl(study, store, tmp_path / "first.log")
        try:
            # Progress lines arrive while the crawl runs, not at its end.
            wait_for(
                lambda: any(
                    re.search(r" [1-9]\d*/24 visits", line) for line in _progress_lines(tmp_path / "first.log", first)
                ),
                200,
                "a line",
            )
            assert first.poll() is None
            code, out = status(store)
            assert code == 3 and f"RUNNING: crawler pid {first.pid} " in out and ", alive" in out, out
            wait_for(lambda: _browser_running(namespace), 60, "a visit's browser")
            first.send_signal(signal.SIGKILL)
            first.wait()
        finally:
            first.kill()
        code, out = status(store)
        assert code == 1 and "died without ending" in out, out
        log = tmp_path / "second.log"
        second = _crawl(study, store, log)
        assert second.wait(timeout=400) == 0, log.read_text()
        text = log.read_text()
        stopped = re.search(rf"stopped (\d+) process(es)? an interrupted crawl left in {namespace}: (.*)", text)
        assert stopped and "geckodriver (pid" in stopped.group(3), text
        assert f"left running in {namespace}, not a crawl's leftover: pid {bystander.pid} sleep 600" in text
        assert bystander.poll() is None
        lines = _progress_lines(log)
        assert lines and "24/24 visits (100.0 %)" in lines[-1] and "successful/counted near/do53 6/6" in lines[-1]
        code, out = status(store)
        assert code == 0 and re.search(r"FINISHED: crawler pid \d+ .*: finished", out), out
    finally:
        bystander.kill()
        bystander.wait()
