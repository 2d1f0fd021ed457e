"""The crawl in a real lab: killed with SIGKILL and resumed, Ctrl-C, harness failures retried, a dead lab, the demo."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from harness import netns
from harness.study import load_study
from tests.conftest import TEST_PREFIX, TEST_SUBNET
from tests.helpers import CLI_ENV, DNSSTUDY, ROOT, assert_store_matches_plan, study_file, wait_for

pytestmark = pytest.mark.lab

ENV = CLI_ENV


def crawl_argv(
    study: Path, store: Path, prefix: str = TEST_PREFIX, subnet: str = TEST_SUBNET, backend: str = "auto"
) -> list[str]:
    return [
        *DNSSTUDY,
        "crawl",
        str(study),
        "--store",
        str(store),
        "--prefix",
        prefix,
        "--subnet",
        subnet,
        "--backend",
        backend,
    ]


def done_visits(store: Path, where: str = "1") -> int:
    if not store.exists():
        return 0
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return db.execute(f"SELECT COUNT(*) FROM visits WHERE status = 'done' AND {where}").fetchone()[0]
    except sqlite3.OperationalError:  # the schema is not written yet
        return 0
    finally:
        db.close()


def assert_crawl_complete(study: Path, store: Path) -> sqlite3.Connection:
    """The store against its plan, and every block checked and timed: each hostname once per configuration."""
    db = assert_store_matches_plan(study, store)
    plan = load_study(str(study)).plan()
    blocks = {v.block for v in plan}
    checked = {b for (b,) in db.execute("SELECT block FROM link_checks WHERE problem IS NULL")}
    assert checked == blocks
    timed = dict(db.execute("SELECT block, hostnames FROM blocks"))
    assert set(timed) == blocks and all(n > 0 for n in timed.values())
    for block, hostnames in timed.items():
        per_pair = db.execute(
            "SELECT COUNT(*) FROM timings WHERE block = ? GROUP BY resolver, protocol", (block,)
        ).fetchall()
        assert per_pair == [(hostnames,)] * 4  # every hostname once per resolver and protocol, never twice
    return db


def client_processes(prefix: str = TEST_PREFIX) -> list[int]:
    return netns.pids_in(f"{prefix}-client")


def test_a_crawl_killed_at_random_moments_resumes_without_losing_or_repeating_a_visit(lab, tmp_path):
    study, store = study_file(tmp_path), tmp_path / "run" / "store.sqlite"
    rng = random.Random(7)
    kills = 0
    while kills < 4:
        crawl = subprocess.Popen(
            crawl_argv(study, store), cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        try:
            crawl.wait(timeout=rng.uniform(3.0, 14.0))
            break
        except subprocess.TimeoutExpired:
            kills += 1
        finally:  # SIGKILL: the fault under test; and an interrupted test leaves no crawl behind
            crawl.kill()
            crawl.wait()
    final = subprocess.run(crawl_argv(study, store), cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=400)
    assert final.returncode == 0, final.stdout + final.stderr
    assert kills == 4, "the crawl finished before it was killed four times"
    db = assert_crawl_complete(study, store)
    assert db.execute("SELECT COUNT(*) FROM visits WHERE error_class = 'Successful'").fetchone()[0] == 16
    env = dict(db.execute("SELECT key, value FROM environment"))
    assert env["shaping_backend"] in ("userspace", "netem") and env["firefox"] and env["kernel"]
    assert "congestion_control_client" in env
    assert client_processes() == []  # nothing the killed crawls started is still running
    # ... and the client namespace resolves as the lab set it up, even if a kill hit a DoH visit's dead resolver.
    resolv = (netns.ETC_NETNS / lab.config.namespaces["client"] / "resolv.conf").read_text()
    assert f"nameserver {lab.config.addresses.resolver(0)}\n" in resolv


def test_ctrl_c_stops_after_the_visit_and_harness_failures_are_retried_not_counted(lab, tmp_path):
    study, store = study_file(tmp_path, name="retrytest", seed=11), tmp_path / "run" / "store.sqlite"
    # The user-space backend, whatever the kernel has: the test breaks the link by killing its delayers.
    argv = crawl_argv(study, store, backend="userspace")
    crawl = subprocess.Popen(argv, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # Break the link emulation under the crawl: kill the 4g delayers once a 4g visit is in.
        wait_for(lambda: done_visits(store, "network = '4g'") >= 1, 200, "a 4g visit")
        state = json.loads((lab.run_dir / "shaping.json").read_text())
        assert state["profile"] == "4g" and state["daemons"]
        for daemon in state["daemons"]:
            os.kill(daemon["pid"], signal.SIGKILL)
        before = done_visits(store, "network = '4g'")
        wait_for(lambda: done_visits(store, "network = '4g'") >= before + 2, 120, "visits after the broken link")
        crawl.send_signal(signal.SIGINT)
        output, _ = crawl.communicate(timeout=90)
    finally:
        crawl.kill()
    assert crawl.returncode == 3, output
    assert "stopping after the current visit" in output and "run the same command again to resume" in output
    db = sqlite3.connect(store)
    done, total = db.execute("SELECT SUM(status = 'done'), COUNT(*) FROM visits").fetchone()
    assert 0 < done < total
    retried = [
        json.loads(r) for (r,) in db.execute("SELECT json_extract(record, '$.retried') FROM visits WHERE attempts > 0")
    ]
    assert retried and any(r[0]["detail"].startswith("link") for r in retried), retried
    # The retry ran on a repaired link, and nothing broken was counted as a protocol result.
    assert (
        db.execute("SELECT COUNT(*) FROM visits WHERE status = 'done' AND error_class != 'Successful'").fetchone()[0]
        == 0
    )
    assert client_processes() == []
    resumed = subprocess.run(argv, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=400)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert_crawl_complete(study, store)


def test_a_dead_lab_resolver_stops_the_crawl_instead_of_blaming_the_protocol(private_lab, tmp_path):
    halted = private_lab()
    study, store = study_file(tmp_path, name="halttest", seed=3), tmp_path / "run" / "store.sqlite"
    argv = crawl_argv(study, store, halted.config.prefix, halted.config.settings.subnet)
    crawl = subprocess.Popen(argv, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: done_visits(store) >= 1, 200, "the first visit")
        for daemon in halted.status().daemons:
            if daemon["name"] == "resolver-near":
                os.kill(daemon["pid"], signal.SIGKILL)
        _, stderr = crawl.communicate(timeout=200)
        assert crawl.returncode == 2 and "daemons died" in stderr and "still planned" in stderr, stderr
        db = sqlite3.connect(store)
        assert (
            db.execute("SELECT COUNT(*) FROM visits WHERE status = 'done' AND error_class != 'Successful'").fetchone()[
                0
            ]
            == 0
        )
        assert client_processes(halted.config.prefix) == []
    finally:
        if crawl.poll() is None:
            crawl.kill()


def test_the_demo_brings_up_a_lab_crawls_analyses_and_leaves_nothing(private_lab, tmp_path):
    study = study_file(
        tmp_path, name="demotest", seed=2, changes={'networks = ["wired", "4g"]': 'networks = ["wired"]'}
    )
    results = tmp_path / "demo"
    demo_lab = private_lab(up=False)  # the demo brings it up and down itself
    prefix = demo_lab.config.prefix
    run = subprocess.run(
        [
            *DNSSTUDY,
            "demo",
            "--study",
            str(study),
            "--results",
            str(results),
            "--prefix",
            prefix,
            "--subnet",
            demo_lab.config.settings.subnet,
        ],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "checks passed" in run.stdout and f"lab {prefix} down" in run.stdout and "demo finished" in run.stdout
    assert (results / "report" / "report.html").exists() and (
        results / "report" / "figures" / "grid-wired.pdf"
    ).exists()
    assert_crawl_complete(study, results / "store.sqlite")
    assert not netns.exists(f"{prefix}-client") and not demo_lab.run_dir.exists()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DNSSTUDY, *args], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)


def test_a_study_s_lab_fault_is_counted_against_its_protocol_in_the_tables(lab, tmp_path):
    """`[[faults]]` drop:dot for the whole crawl: DoT visits are counted DNS Errors naming the cause and record
    the fault, DoH is untouched, the timer's DoT queries fail and are shown as such, and the lab is mended when
    the crawl ends. The same fault applied by hand first refuses a study that does not declare it, in one line,
    and `lab status` and `status` list it."""
    from analysis.results import load
    from analysis.settings import load_settings
    from analysis.tables import outcome_table, timer_failures
    from harness.lab import faults

    changes = {
        'networks = ["wired", "4g"]': 'networks = ["wired"]',
        'resolvers = ["near", "far"]': 'resolvers = ["near"]',
        'protocols = ["do53", "doh"]': 'protocols = ["dot", "doh"]',
        "page_load_timeout_s = 30": "page_load_timeout_s = 15",
        # Every DoT query of the timer waits out its timeout: keep it short, and several in flight.
        "[link_check]": "[timer]\ntimeout_ms = 1000\nconcurrency = 8\n\n[link_check]",
    }
    undeclared = study_file(tmp_path, name="nofaulttest", seed=4, changes=changes)
    changes["[link_check]"] = changes["[link_check]"].replace(
        "[link_check]", '[[faults]]\nname = "drop:dot"\nresolver = "near"\n\n[link_check]'
    )
    study = study_file(tmp_path, name="faulttest", seed=4, changes=changes)
    lab_names = ("--prefix", TEST_PREFIX, "--subnet", TEST_SUBNET)

    assert _cli("lab", "fault", "apply", "drop:dot", "--resolver", "near", *lab_names).returncode == 0
    shown = json.loads(_cli("lab", "status", "--json", *lab_names).stdout)["faults"]
    assert shown == [{"name": "drop:dot", "resolver": "near", "owner": "by hand"}]
    refused = subprocess.run(
        crawl_argv(undeclared, tmp_path / "refused" / "store.sqlite"), cwd=ROOT, env=ENV, capture_output=True, text=True
    )
    assert refused.returncode == 2 and refused.stderr.splitlines() == [
        f"dnsstudy: error: lab '{TEST_PREFIX}' carries fault drop:dot at resolver near, applied by hand, which study "
        f"'nofaulttest' does not declare (its [[faults]]): clear it with 'dnsstudy lab fault clear --prefix "
        f"{TEST_PREFIX}'"
    ]
    assert not (tmp_path / "refused" / "store.sqlite").exists()  # refused before the store is opened

    store = tmp_path / "run" / "store.sqlite"
    done = subprocess.run(crawl_argv(study, store), cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr
    assert faults.applied(lab) == []  # cleared when the crawl ended
    db = sqlite3.connect(store)
    rows = db.execute("SELECT protocol, error_class, detail FROM visits ORDER BY protocol").fetchall()
    assert rows == [("doh", "Successful", "")] * 2 + [("dot", "DNS Error", "dot:connect-timeout")] * 2
    recorded = db.execute("SELECT protocol, json_extract(record, '$.faults') FROM visits ORDER BY protocol").fetchall()
    assert recorded == [("doh", "[]")] * 2 + [("dot", '["drop:dot"]')] * 2  # the fault each visit met
    timed = db.execute("SELECT DISTINCT protocol, json_extract(record, '$.faults') FROM timings ORDER BY 1").fetchall()
    assert timed == [("doh", "[]"), ("dot", '["drop:dot"]')]  # and each timer query

    assert _cli("lab", "fault", "apply", "drop:dot", "--resolver", "near", *lab_names).returncode == 0
    status = _cli("status", str(store)).stdout
    assert f"    lab:{TEST_PREFIX}: drop:dot at resolver near, applied by hand (declared by the study)" in status
    assert _cli("lab", "fault", "clear", *lab_names).returncode == 0 and faults.applied(lab) == []
    # Paint and load metrics are columns of Successful visits only.
    metrics = db.execute("SELECT protocol, fcp_ms, lcp_ms, dcl_ms, on_load_ms FROM visits ORDER BY protocol").fetchall()
    assert all(None not in row for row in metrics[:2]) and all(row[1:] == (None,) * 4 for row in metrics[2:])
    results = load(store)
    settings = load_settings()
    table = outcome_table(results.visits, "strict", settings).set_index("protocol")
    assert table.loc["DoT", "DNS Error %"] == 100.0 and table.loc["DoT", "visits"] == 2
    assert table.loc["DoH", "Successful %"] == 100.0
    timer = timer_failures(results.timings, settings).set_index("protocol")
    assert timer.loc["DoT", "failed %"] == 100.0 and timer.loc["DoH", "failed %"] == 0.0
