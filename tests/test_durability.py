"""A week unattended: locks, unreadable HARs, hung daemons, a full disk, resuming from anywhere.

The fast tests (no marker) check the lock, the HAR reader and the halt messages; the lab tests run real
crawls: a resume from another directory over damaged HARs and orphans, a frozen lab resolver, two
crawls (and a visit) at once, and a disk that fills up mid-crawl.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.errors import HarnessError
from harness.lock import Busy, FileLock, holding
from harness.station import timed_out
from harness.timer import hostnames_from_hars, read_hostnames
from tests.conftest import TEST_PREFIX, TEST_SUBNET
from tests.helpers import CLI_ENV, DNSSTUDY, ROOT, assert_store_matches_plan, hars_on_disk, wait_for
from tests.helpers import study_file as crawl_study

ENV = CLI_ENV


# -- fast: the lock ---------------------------------------------------------------------

HOLDER = """
import sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from harness.lock import holding
with holding(Path({path!r}), "store S", "crawled"):
    print("locked", flush=True)
    time.sleep(60)
"""


def _hold_in_another_process(tmp_path: Path, path: Path) -> subprocess.Popen[str]:
    """A process that holds the lock at ``path`` (its command line: `dnsstudy crawl s.toml`)."""
    script = tmp_path / "holder.py"
    script.write_text(HOLDER.format(root=str(ROOT), path=str(path)))
    holder = subprocess.Popen([sys.executable, str(script), "crawl", "s.toml"], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


def test_a_held_lock_is_refused_in_one_line_naming_the_holder_and_a_dead_holder_s_is_taken_over(tmp_path):
    path = tmp_path / "store.sqlite.lock"
    holder = _hold_in_another_process(tmp_path, path)
    try:
        with pytest.raises(Busy) as refused:
            FileLock(path, "store S", "crawled").acquire()
        assert str(refused.value) == (
            f"store S is being crawled by pid {holder.pid} (dnsstudy crawl s.toml); wait for it or stop it"
        )
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    lock = FileLock(path, "store S", "crawled")
    lock.acquire()  # the kernel released the dead holder's lock: taken over without a word
    assert json.loads(path.read_text())["pid"] == os.getpid()
    lock.release()


def test_a_lock_is_re_entrant_within_a_process_and_released_with_the_outermost_hold(tmp_path):
    path = tmp_path / "place.lock"
    with holding(path, "lab x", "crawled"):
        with holding(path, "lab x", "crawled"):  # the CLI holds it, then the crawl it runs takes it again
            pass
        with pytest.raises(Busy):
            FileLock(path, "lab x", "used").acquire()  # still held: only the inner hold ended
    lock = FileLock(path, "lab x", "used")
    lock.acquire()
    lock.release()


# -- fast: reading HARs for the timer ---------------------------------------------------


def _har(path: Path, *urls: str) -> Path:
    entries = [
        {
            "pageref": "page_1",
            "startedDateTime": "2026-01-01T00:00:00.000Z",
            "time": 1,
            "request": {"method": "GET", "url": u, "httpVersion": "HTTP/2", "headers": []},
            "response": {"status": 200, "httpVersion": "HTTP/2", "headers": [], "content": {}},
            "timings": {"wait": 1, "receive": 0},
        }
        for u in urls
    ]
    pages = [{"id": "page_1", "startedDateTime": "2026-01-01T00:00:00.000Z", "title": "t", "pageTimings": {}}]
    with gzip.open(path, "wt") as f:
        json.dump({"log": {"version": "1.2", "pages": pages, "entries": entries}}, f)
    return path


def test_unreadable_hars_are_skipped_and_named_and_the_rest_is_read(tmp_path):
    good = _har(tmp_path / "good.har.gz", "https://www.a.test/", "https://cdn.b.test/x.js")
    truncated = _har(tmp_path / "truncated.har.gz", "https://c.test/")
    truncated.write_bytes(truncated.read_bytes()[:20])
    not_json = tmp_path / "bad.har.gz"
    not_json.write_bytes(gzip.compress(b"{not json"))
    not_a_har = tmp_path / "list.har.gz"
    not_a_har.write_bytes(gzip.compress(b"[1, 2]"))
    names, problems = read_hostnames([good, truncated, tmp_path / "gone.har.gz", not_json, not_a_har])
    assert names == ["cdn.b.test", "www.a.test"]
    assert [p.split(":")[0] for p in problems] == [
        str(tmp_path / "gone.har.gz"),
        str(truncated),
        str(not_json),
        str(not_a_har),
    ]
    assert "no such HAR file" in problems[0] and "EOFError" in problems[1]
    with pytest.raises(HarnessError, match="gone.har.gz: no such HAR"):  # `dnsstudy timer` names it and stops
        hostnames_from_hars([good, tmp_path / "gone.har.gz"])


def test_a_helper_that_overran_its_timeout_is_one_line_naming_the_program():
    place = SimpleNamespace(name="dsl", kind="lab", up_command="dnsstudy lab up")
    expired = subprocess.TimeoutExpired(["ip", "netns", "exec", "dsl-client", "nft", "-j", "list"], 10)
    message = timed_out(place, expired)  # type: ignore[arg-type]
    assert message.startswith("dsl: nft did not finish in 10 s (ip netns exec dsl-client nft -j list); ")
    assert "\n" not in message and "run the same command to resume" in message


def test_the_default_store_is_in_the_checkout_wherever_the_command_runs():
    from harness.cli.crawl import default_store

    assert default_store("x") == ROOT / "results" / "x" / "store.sqlite"


# -- the lab: real crawls ---------------------------------------------------------------


def study_file(tmp_path: Path, name: str, seed: int) -> Path:
    """One block on the wired link: eight visits (two sites, near and far, Do53 and DoH), then the timer."""
    return crawl_study(tmp_path, name=name, seed=seed, changes={'networks = ["wired", "4g"]': 'networks = ["wired"]'})


def crawl_argv(study: Path, store: Path | str, prefix: str = TEST_PREFIX, subnet: str = TEST_SUBNET) -> list[str]:
    return [*DNSSTUDY, "crawl", str(study), "--store", str(store), "--prefix", prefix, "--subnet", subnet]


def crawl(argv: list[str], cwd: Path = ROOT, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout)


def done_visits(store: Path) -> int:
    try:
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    except sqlite3.OperationalError:  # not created yet
        return 0
    try:
        return db.execute("SELECT COUNT(*) FROM visits WHERE status = 'done'").fetchone()[0]
    except sqlite3.OperationalError:  # the schema is not written yet
        return 0
    finally:
        db.close()


def one_line_error(stderr: str) -> str:
    """The CLI's error, which must be the only line it wrote to stderr."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dnsstudy: error: "), stderr
    return lines[0]


def assert_crawl_complete(study: Path, store: Path) -> sqlite3.Connection:
    """The store against its plan, no HAR besides the recorded ones (no orphan, no .part), the block timed."""
    db = assert_store_matches_plan(study, store)
    hars = {h for (h,) in db.execute("SELECT har_path FROM visits WHERE har_path IS NOT NULL")}
    assert hars_on_disk(store) == hars
    assert db.execute("SELECT COUNT(*) FROM blocks").fetchone()[0] == 1
    return db


@pytest.mark.lab
def test_a_resume_from_elsewhere_skips_unreadable_hars_removes_orphans_and_refuses_a_moved_store(lab, tmp_path):
    study = study_file(tmp_path, "resumetest", seed=21)
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    done = crawl(crawl_argv(study, "results/store.sqlite"), cwd=first)  # a relative --store
    assert done.returncode == 0, done.stdout + done.stderr
    store = first / "results" / "store.sqlite"
    db = assert_crawl_complete(study, store)
    hars = [Path(h) for (h,) in db.execute("SELECT har_path FROM visits WHERE har_path IS NOT NULL ORDER BY ordinal")]
    # A kill between the block's last visit and its timer run; then one HAR truncated, another lost.
    with db:
        db.execute("DELETE FROM timings")
        db.execute("DELETE FROM blocks")
    db.close()
    hars[0].write_bytes(hars[0].read_bytes()[:100])
    hars[1].unlink()
    (store.parent / "hars" / "orphan.har.gz").write_bytes(hars[2].read_bytes())
    (store.parent / "hars" / "killed.har.gz.part").write_bytes(b"half")

    resumed = crawl(crawl_argv(study, "../first/results/store.sqlite"), cwd=second)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    out = resumed.stdout
    assert "new store" not in out and "0 of 8 visits done" not in out and "8 of 8 visits done" in out
    assert "removed 2 files" in out and "2 HARs unreadable, skipped" in out
    assert not (second / "results").exists()  # the same store, not a new one beside the working directory
    db = sqlite3.connect(store)
    hostnames, problems = db.execute("SELECT hostnames, har_problems FROM blocks").fetchone()
    named = sorted(p.split(":")[0] for p in json.loads(problems))
    assert named == sorted([str(hars[0]), str(hars[1])]) and hostnames > 0
    assert db.execute("SELECT COUNT(*) FROM timings").fetchone()[0] == 4 * hostnames
    assert not (store.parent / "hars" / "orphan.har.gz").exists()
    assert not (store.parent / "hars" / "killed.har.gz.part").exists()
    db.close()

    # The results directory copied elsewhere: refused in one line until the crawl is told it moved.
    moved = tmp_path / "moved"
    subprocess.run(["cp", "-a", str(store.parent), str(moved)], check=True)
    refused = crawl(crawl_argv(study, moved / "store.sqlite"))
    assert refused.returncode == 2 and "--moved" in one_line_error(refused.stderr)
    adopted = crawl([*crawl_argv(study, moved / "store.sqlite"), "--moved"])
    assert adopted.returncode == 0, adopted.stdout + adopted.stderr
    paths = {h for (h,) in sqlite3.connect(moved / "store.sqlite").execute("SELECT har_path FROM visits")}
    assert paths and all(h.startswith(str(moved / "hars") + "/") for h in paths if h)


@pytest.mark.lab
def test_a_frozen_resolver_halts_the_crawl_naming_it_and_the_crawl_resumes_once_it_runs(private_lab, tmp_path):
    frozen = private_lab()
    study, store = study_file(tmp_path, "frozentest", seed=22), tmp_path / "run" / "store.sqlite"
    argv = crawl_argv(study, store, frozen.config.prefix, frozen.config.settings.subnet)
    proc = subprocess.Popen(argv, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid = next(d["pid"] for d in frozen.status().daemons if d["name"] == "resolver-near")
    try:
        wait_for(lambda: done_visits(store) >= 1, 200, "the first visit")
        os.kill(pid, signal.SIGSTOP)
        _, stderr = proc.communicate(timeout=300)
    finally:
        os.kill(pid, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, stderr
    line = one_line_error(stderr)
    assert "resolver-near" in line and "still planned" in line and "Traceback" not in stderr
    db = sqlite3.connect(store)
    done, wrong = db.execute(
        "SELECT COUNT(*), SUM(error_class != 'Successful') FROM visits WHERE status = 'done'"
    ).fetchone()
    assert not wrong and 1 <= done < 8  # nothing the frozen resolver broke was recorded
    db.close()
    resumed = crawl(argv)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert_crawl_complete(study, store)


@pytest.mark.lab
def test_one_crawl_per_store_and_per_lab_and_no_visit_under_a_crawl(lab, tmp_path):
    study, store = study_file(tmp_path, "locktest", seed=23), tmp_path / "run" / "store.sqlite"
    first = subprocess.Popen(
        crawl_argv(study, store), cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for(lambda: done_visits(store) >= 1, 200, "the first crawl's first visit")
        same_store = crawl(crawl_argv(study, store))
        assert same_store.returncode == 2
        line = one_line_error(same_store.stderr)
        assert f"store {store} is being crawled by pid {first.pid} (dnsstudy crawl {study}" in line
        assert line.endswith("; wait for it or stop it")
        same_lab = crawl(crawl_argv(study_file(tmp_path, "other", seed=24), tmp_path / "other" / "store.sqlite"))
        assert same_lab.returncode == 2
        assert f"lab {TEST_PREFIX} is being crawled by pid {first.pid}" in one_line_error(same_lab.stderr)
        assert not (tmp_path / "other" / "store.sqlite").exists()  # refused before it opened anything
        lab_args = ["--prefix", TEST_PREFIX, "--subnet", TEST_SUBNET]
        visit = crawl([*DNSSTUDY, "visit", "https://google.com/", "--protocol", "do53", *lab_args], timeout=60)
        assert visit.returncode == 2 and f"is being crawled by pid {first.pid}" in one_line_error(visit.stderr)
        net = crawl([*DNSSTUDY, "net", "apply", "3g", *lab_args], timeout=60)
        assert net.returncode == 2 and f"is being crawled by pid {first.pid}" in one_line_error(net.stderr)
        first.send_signal(signal.SIGINT)
        _, stderr = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 3, stderr  # the refused commands did not disturb it
    # A second store in the same directory would take the first's HARs for orphans of its own.
    beside = crawl(crawl_argv(study, store.with_name("second.sqlite")))
    assert beside.returncode == 2 and f"holds the HARs of another store, {store}" in one_line_error(beside.stderr)
    db = sqlite3.connect(store)
    assert not db.execute(
        "SELECT COUNT(*) FROM visits WHERE status = 'done' AND error_class != 'Successful'"
    ).fetchone()[0]


def _fill(path: Path) -> None:
    """Write ``path`` until the file system holding it is full."""
    with open(path, "wb", buffering=0) as f:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError as exc:
                assert exc.errno == 28, exc  # ENOSPC


@pytest.mark.lab
def test_a_full_disk_halts_the_crawl_in_one_line_and_it_resumes_once_there_is_space(lab, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "dsdurability", str(disk)], check=True)
    try:
        study, store = study_file(tmp_path, "fulltest", seed=25), disk / "results" / "store.sqlite"
        argv = crawl_argv(study, store)
        proc = subprocess.Popen(argv, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: done_visits(store) >= 2, 200, "two visits")
            _fill(disk / "filler")
            _, stderr = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 2, stderr
        line = one_line_error(stderr)
        assert line.startswith("dnsstudy: error: disk full at ") and str(disk) in line
        assert "visits still planned; free space and run the same command to resume" in line
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        rows = db.execute("SELECT har_path FROM visits WHERE status = 'done'").fetchall()
        assert 2 <= len(rows) < 8 and all(h and Path(h).stat().st_size > 0 for (h,) in rows)
        db.close()
        assert not list((store.parent / "hars").glob("*.part"))
        (disk / "filler").unlink()
        resumed = crawl(argv)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert_crawl_complete(study, store)
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.lab  # no lab, but it mounts a file system: root
def test_a_commit_on_a_full_disk_fails_and_leaves_the_store_as_it_was(tmp_path):
    from harness.plan import PlannedVisit, Site
    from harness.store import Store, disk_full
    from harness.store.records import VisitCounts

    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "dsdurability", str(disk)], check=True)
    try:
        store = Store(disk / "store.sqlite")
        visits = [PlannedVisit(i, 0, 0, "wired", Site(f"s{i}.test", i + 1, "top"), "near", "do53") for i in range(2)]
        store.add_study("s1", "test", 1, {}, visits)
        har = disk / "hars" / "v1.har.gz"
        har.parent.mkdir()
        har.write_bytes(b"har")
        record = {
            "visit_id": "v1",
            "started_at": "t",
            "error_class": "Successful",
            "detail": "",
            "paper_2019": "Successful",
            "counted": True,
            "on_load_ms": 1.0,
            "har_path": str(har),
            "padding": "x" * (2 << 20),  # more than the WAL can take in space it already has
        }
        _fill(disk / "filler")
        with pytest.raises(sqlite3.Error) as failed:
            store.complete("s1", visits[0], record)
        assert disk_full(failed.value, store.path)
        assert store.progress("s1") == VisitCounts(done=0, total=2) and store.next_planned("s1") == visits[0]
        (disk / "filler").unlink()
        store.complete("s1", visits[0], record)
        assert store.progress("s1") == VisitCounts(done=1, total=2)
        store.close()
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


FORKER = """
import os, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from harness.lock import holding
with holding(Path({path!r}), "lab x", "crawled"):
    if os.fork() == 0:
        os.write(1, b"forked\\n")  # after the at-fork handlers ran: the test waits for it, not for the scheduler
        time.sleep(60)
        os._exit(0)
    os.write(1, b"locked\\n")  # one write each: the two lines never interleave
    time.sleep(60)
"""


def test_a_forked_child_does_not_keep_a_dead_holder_s_lock(tmp_path):
    """pyroute2 forks namespace workers under a crawl: when the crawl dies, its lock must die with it."""
    path = tmp_path / "place.lock"
    script = tmp_path / "forker.py"
    script.write_text(FORKER.format(root=str(ROOT), path=str(path)))
    holder = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout is not None
        assert {holder.stdout.readline().strip(), holder.stdout.readline().strip()} == {"locked", "forked"}
        with pytest.raises(Busy):
            FileLock(path, "lab x", "used").acquire()
        holder.send_signal(signal.SIGKILL)  # its child sleeps on
        holder.wait()
        lock = FileLock(path, "lab x", "used")
        lock.acquire()
        lock.release()
    finally:
        os.killpg(holder.pid, signal.SIGKILL)


@pytest.mark.lab  # no lab, but it mounts a file system: root (not inside the image's test run)
def test_a_lock_taken_on_a_full_disk_is_one_line_naming_it(tmp_path):
    # Found by the chaos run (benchmarks/chaos.py): a coordinator started while the results' disk was full
    # died with a traceback (OSError ENOSPC writing its store lock's holder).
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], check=True)
    try:
        path = disk / "store.sqlite.lock"
        path.touch()  # a lock file an earlier holder left (empty: released)
        _fill(disk / "filler")
        with pytest.raises(HarnessError, match=f"disk full at {path}: free space and run the same command"):
            FileLock(path, "store", "coordinating").acquire()
        (disk / "filler").unlink()
        lock = FileLock(path, "store", "coordinating")
        lock.acquire()  # space again: taken, not left held by the refused attempt
        lock.release()
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.lab  # no lab, but it mounts a file system: root (not inside the image's test run)
def test_a_store_opened_on_a_full_disk_says_the_disk_is_full_not_that_it_is_no_store(tmp_path):
    # Found by the chaos run: "store.sqlite: not a dnsstudy store (disk I/O error)" for a coordinator
    # started again while the results' disk was full.
    from harness.store import Store

    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], check=True)
    try:
        Store(disk / "store.sqlite").close()  # a store, its WAL checkpointed and removed at close
        _fill(disk / "filler")
        with pytest.raises(HarnessError, match="disk full at .*store.sqlite: free space and run the same command"):
            Store(disk / "store.sqlite")
        (disk / "filler").unlink()
        Store(disk / "store.sqlite").close()
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
