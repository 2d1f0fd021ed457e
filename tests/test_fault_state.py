"""Faults are state a crawl sees (fast, no lab): recorded when applied, refused when undeclared, listed, locked.

The lab's real path (nftables, certificates, a crawl in a lab) is in tests/test_crawl.py and
tests/test_failure_attribution.py; here the bookkeeping runs over tests/fakes.py's place, the lab's state
files in a temporary directory, and the command line with a place lock held by another process.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from rich.console import Console

from harness import lock
from harness.cli import main
from harness.crawl import Crawl
from harness.errors import HarnessError
from harness.lab import faults, state
from harness.place import Fault
from harness.status import store_status
from harness.store import Store
from harness.study import load_study
from tests.fakes import FakePlace, FakeStation, FakeVisitor
from tests.helpers import ROOT, study_file

DECLARED = {"[link_check]": '[[faults]]\nname = "drop:dot"\nresolver = "near"\n\n[link_check]'}
BY_HAND = Fault("drop", "dot", "near", "by hand")


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakePlace:
    monkeypatch.setattr(lock, "LOCK_DIR", tmp_path / "locks")
    monkeypatch.setenv("DNSSTUDY_PROGRESS_INTERVAL", "0")
    return FakePlace("dsfake", tmp_path / "run")


def crawl(tmp_path: Path, place: FakePlace, changes: dict[str, str] | None = None, name: str = "crawltest"):
    """Run a crawl of the study to its end: (its summary or the HarnessError it raised, its store's path)."""
    study = study_file(tmp_path, name=name, changes=changes)
    path = tmp_path / name / "store.sqlite"
    store = Store(path)
    try:
        run = Crawl(
            load_study(str(study)),
            store,
            place,
            path.parent,
            console=Console(file=io.StringIO()),
            station_type=FakeStation,
        )
        return run.run(FakeVisitor(place, path.parent)), path
    except HarnessError as exc:
        return exc, path
    finally:
        store.close()


def test_a_fault_meets_the_visits_at_its_resolver_over_its_protocol_or_every_encrypted_one():
    assert BY_HAND.touches("near", "dot")
    assert not BY_HAND.touches("near", "doh") and not BY_HAND.touches("far", "dot")
    certificate = Fault("untrusted-cert", None, "near")
    assert [p for p in ("do53", "dot", "doh", "doq", "doh3") if certificate.touches("near", p)] == [
        "dot",
        "doh",
        "doq",
        "doh3",
    ]
    assert not certificate.touches("far", "doh")
    assert Fault("drop", "dot", "near", "by hand") == Fault("drop", "dot", "near", "by the crawl of study x")


def test_https_answers_can_be_lost_only_where_the_path_reads_a_query_s_type():
    assert "drop-https:do53" in faults.fault_names()
    assert not [n for n in faults.fault_names() if n.startswith("drop-https:") and n != "drop-https:do53"]
    lost = faults.parse_fault("drop-https:do53", "near")
    assert [p for p in ("do53", "dot", "doh", "doq", "doh3") if lost.touches("near", p)] == ["do53"]


def test_the_lost_https_answers_rule_for_a_name_matches_its_end_type_and_class():
    """The rule of the length of "www.a.test" (12 bytes on the wire) looks right after the question's name."""
    rules = faults._https_answer_rules("198.18.0.53", 53)
    assert len(rules) == len(faults.NAME_LENGTHS)
    wire = b"\x03www\x01a\x04test\x00"
    question = bytes(8 + 12) + wire + b"\x00\x41\x00\x01"  # UDP header, DNS header, name, type 65, class IN
    rule = next(r for r in rules if f"@th,{(20 + len(wire) - 1) * 8},40 " in r)
    offset = int(rule.split("@th,")[1].split(",")[0]) // 8
    assert question[offset : offset + 5] == bytes.fromhex(faults.HTTPS_QUESTION_TAIL[2:].rjust(10, "0"))
    assert rule.startswith('oifname "') and "ip saddr 198.18.0.53 udp sport 53 " in rule and rule.endswith(" drop")


def test_a_crawl_refuses_a_fault_its_study_does_not_declare_in_one_line_and_leaves_it(tmp_path, place):
    place.applied = [BY_HAND]
    refused, store = crawl(tmp_path, place)
    assert isinstance(refused, HarnessError)
    assert str(refused) == (
        "lab 'dsfake' carries fault drop:dot at resolver near, applied by hand, which study 'crawltest' does not "
        "declare (its [[faults]]): clear it with 'fake clear'"
    )
    assert place.applied == [BY_HAND] and place.faults_cleared == 0  # not the crawl's to clear
    db = Store.read_only(store)
    try:
        assert db.study_ids() == []  # refused before the plan was written
    finally:
        db.close()


def test_the_crawl_command_refuses_before_it_creates_the_store(tmp_path, monkeypatch):
    """The refusal comes before the store is opened: a refused crawl leaves no empty store behind."""
    from harness.lab import lab as lab_module

    monkeypatch.setattr(lab_module, "RUN_ROOT", tmp_path / "run")
    monkeypatch.setattr(lock, "LOCK_DIR", tmp_path / "locks")
    (tmp_path / "run" / "dsfault").mkdir(parents=True)
    state.save_faults(tmp_path / "run" / "dsfault", [BY_HAND])
    store = tmp_path / "results" / "store.sqlite"
    args = ["crawl", str(study_file(tmp_path)), "--store", str(store), "--prefix", "dsfault"]
    result = CliRunner().invoke(main, [*args, "--subnet", "198.18.250.0/23"])
    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [
        "dnsstudy: error: lab 'dsfault' carries fault drop:dot at resolver near, applied by hand, which study "
        "'crawltest' does not declare (its [[faults]]): clear it with 'dnsstudy lab fault clear --prefix dsfault'"
    ]
    assert not store.exists()


def test_a_crawl_runs_beside_a_fault_its_study_declares_and_clears_it_at_the_end(tmp_path, place):
    place.applied = [BY_HAND]
    summary, _ = crawl(tmp_path, place, DECLARED)
    assert not isinstance(summary, HarnessError) and summary.finished
    assert place.faults == [] and place.faults_cleared == 1


def test_a_killed_crawl_s_faults_let_it_resume_but_refuse_another_study(tmp_path, place):
    left = Fault("drop", "dot", "near", "by the crawl of study crawltest")  # the crawl was killed: no tear-down
    place.applied = [left]
    refused, _ = crawl(tmp_path, place, name="other")
    assert isinstance(refused, HarnessError)
    assert "drop:dot at resolver near, applied by the crawl of study crawltest, which study 'other'" in str(refused)
    place.applied = [left]
    resumed, _ = crawl(tmp_path, place, DECLARED)
    assert not isinstance(resumed, HarnessError) and resumed.finished


def test_the_more_faults_the_refusal_counts_them(tmp_path, place):
    place.applied = [BY_HAND, Fault("wrong-name", None, "far", "by hand")]
    refused, _ = crawl(tmp_path, place, DECLARED)  # declares drop:dot at near only
    assert isinstance(refused, HarnessError)
    assert "carries fault wrong-name at resolver far, applied by hand, which study" in str(refused)
    place.applied = [BY_HAND, Fault("reject", "doh", "near", "by hand")]
    refused, _ = crawl(tmp_path, place)
    assert "drop:dot at resolver near, applied by hand (and 1 more)" in str(refused)


# -- the lab's state ---------------------------------------------------------------------------------------------


def fake_lab(run_dir: Path) -> SimpleNamespace:
    """What faults.apply and faults.clear ask of a lab before they touch the server namespace."""
    run_dir.mkdir(parents=True, exist_ok=True)
    return SimpleNamespace(run_dir=run_dir, resolver=lambda name: None)


def test_the_faults_file_keeps_who_applied_each_and_reads_one_from_before_owners(tmp_path):
    state.save_faults(tmp_path, [BY_HAND, Fault("wrong-name", None, "far", "by the crawl of study s")])
    back = state.load_faults(tmp_path)
    assert [(f.name, f.resolver, f.owner) for f in back] == [
        ("drop:dot", "near", "by hand"),
        ("wrong-name", "far", "by the crawl of study s"),
    ]
    (tmp_path / state.FAULTS_FILE).write_text(json.dumps([{"kind": "drop", "protocol": "dot", "resolver": "near"}]))
    assert state.load_faults(tmp_path) == [BY_HAND] and state.load_faults(tmp_path)[0].owner == ""
    (tmp_path / state.FAULTS_FILE).write_text("{not json")
    with pytest.raises(HarnessError, match="faults.json is unreadable"):
        state.load_faults(tmp_path)


def test_a_fault_is_on_record_before_it_is_enforced_and_until_it_is_undone(tmp_path, monkeypatch):
    """However applying or clearing fails half-way, the record never shows a lab healthier than it is."""
    lab = fake_lab(tmp_path / "run")

    def broken(*args: object, **kwargs: object) -> None:
        raise HarnessError("nft failed")

    monkeypatch.setattr(faults, "_enforce", broken)
    with pytest.raises(HarnessError, match="nft failed"):
        faults.apply(lab, faults.parse_fault("drop:dot", "near"))  # type: ignore[arg-type]
    assert faults.applied(lab) == [BY_HAND] and faults.applied(lab)[0].owner == "by hand"  # type: ignore[arg-type]
    with pytest.raises(HarnessError, match="nft failed"):
        faults.clear(lab)  # type: ignore[arg-type]
    assert faults.applied(lab) == [BY_HAND]  # type: ignore[arg-type]
    monkeypatch.setattr(faults, "_enforce", lambda *args, **kwargs: None)
    assert faults.clear(lab) == [BY_HAND] and faults.applied(lab) == []  # type: ignore[arg-type]


# -- what status shows ---------------------------------------------------------------------------------------------


def test_status_lists_the_faults_the_study_s_lab_carries_now(tmp_path, place, monkeypatch):
    summary, path = crawl(tmp_path, place, DECLARED)
    assert not isinstance(summary, HarnessError)
    store = Store(path)
    store.record_environment("crawltest", {"place": "lab:dsfault"})  # what a crawl at a lab records
    store.close()
    monkeypatch.setattr(state, "RUN_ROOT", tmp_path / "run-root")
    (tmp_path / "run-root" / "dsfault").mkdir(parents=True)
    assert store_status(path).studies[0].faults == []
    assert "  lab faults active now (lab:dsfault): none" in CliRunner().invoke(main, ["status", str(path)]).output
    state.save_faults(tmp_path / "run-root" / "dsfault", [BY_HAND, Fault("wrong-name", None, "far", "by hand")])
    shown = store_status(path).studies[0].faults
    assert [(f["name"], f["resolver"], f["owner"], f["declared"]) for f in shown] == [
        ("drop:dot", "near", "by hand", True),
        ("wrong-name", "far", "by hand", False),
    ]
    text = CliRunner().invoke(main, ["status", str(path)]).output
    assert "  lab faults active now (lab:dsfault):\n" in text
    assert "    lab:dsfault: drop:dot at resolver near, applied by hand (declared by the study)" in text
    assert "wrong-name at resolver far, applied by hand (NOT declared by the study: a crawl of it is refused)" in text


# -- the place lock ------------------------------------------------------------------------------------------------

HOLDER = """
import sys, time
from pathlib import Path
from harness import lock
lock.LOCK_DIR = Path(sys.argv[1])
with lock.holding(lock.LOCK_DIR / "dsfault.lock", "lab dsfault", "crawled"):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def crawl_holds_the_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Another process holds lab dsfault's place lock as a crawl does (harness/lock.py); its pid."""
    monkeypatch.setattr(lock, "LOCK_DIR", tmp_path / "locks")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "locks")],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize(
    "command",
    [
        ["lab", "down"],
        ["lab", "fault", "apply", "drop:dot"],
        ["lab", "fault", "clear"],
        ["bench", "loss"],
    ],
    ids=" ".join,
)
def test_lab_down_fault_and_bench_refuse_while_a_crawl_holds_the_lab(crawl_holds_the_lab, command, tmp_path):
    result = CliRunner().invoke(main, [*command, "--prefix", "dsfault", "--subnet", "198.18.250.0/23"])
    assert result.exit_code == 2, result.output
    holder = f"dnsstudy {tmp_path / 'locks'}"  # the holder's record: its pid and command (python -c drops -c)
    assert result.output.splitlines() == [
        f"dnsstudy: error: lab dsfault is being crawled by pid {crawl_holds_the_lab} ({holder}); wait for it or stop it"
    ]


def test_a_worker_starts_beside_its_own_leftover_faults_only(place):
    from harness.distributed.worker import fault_owner, refuse_others_faults

    place.applied = [Fault("drop", "dot", "near", fault_owner("vp1"))]  # a killed worker's: the next one replaces it
    refuse_others_faults(place, "vp1")
    with pytest.raises(HarnessError) as refused:
        refuse_others_faults(place, "vp2")
    assert str(refused.value) == (
        "lab 'dsfake' carries fault drop:dot at resolver near, applied by the worker of vantage point vp1, "
        "which the worker of vantage point vp2 did not apply: clear it with 'fake clear'"
    )
    place.applied = [BY_HAND]
    with pytest.raises(HarnessError, match="applied by hand, which the worker of vantage point vp1 did not apply"):
        refuse_others_faults(place, "vp1")
