"""Helpers every test module shares: the CLI as a user runs it, waiting, the store against its plan,
and real clients run inside a lab namespace."""

from __future__ import annotations

import base64
import os
import sqlite3
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import dns.message

from harness import netns
from harness.study import load_study

ROOT = Path(__file__).resolve().parent.parent

#: The CLI as a subprocess, from the checkout under test (never an installed copy elsewhere).
DNSSTUDY = [sys.executable, "-m", "harness.cli"]
#: The environment for it: the checkout first on the path, whatever the working directory.
CLI_ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def wait_for(condition: Callable[[], object], timeout: float, what: str, every: float = 0.2) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)


def hars_on_disk(store: Path) -> set[str]:
    """The HAR files beside a store (its `.store` marker aside), as absolute paths."""
    return {str(p) for p in (store.parent / "hars").iterdir() if p.name != ".store"}


def assert_store_matches_plan(study: Path, store: Path) -> sqlite3.Connection:
    """Every planned visit recorded exactly once, in plan order, done, with an existing absolute HAR wherever
    it has one; returns the open store for the caller's own checks."""
    plan = load_study(str(study)).plan()
    db = sqlite3.connect(store)
    rows = db.execute(
        "SELECT ordinal, network, site, resolver, protocol, status, visit_id, har_path, error_class "
        "FROM visits ORDER BY ordinal"
    ).fetchall()
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in rows] == [
        (v.ordinal, v.network, v.site.domain, v.resolver, v.protocol) for v in plan
    ]
    assert all(r[5] == "done" for r in rows) and len({r[6] for r in rows}) == len(plan)
    assert all(Path(r[7]).is_absolute() and Path(r[7]).exists() for r in rows if r[7])
    assert all(r[7] for r in rows if r[8] == "Successful")
    return db


def in_ns(namespace: str, *argv: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", namespace, *argv], capture_output=True, text=True, timeout=timeout)


def dns_query_file(tmp: Path, name: str) -> Path:
    path = tmp / f"{name}.bin"
    path.write_bytes(dns.message.make_query(name, "A", id=0).to_wire())
    return path


def doh_get_param(name: str) -> str:
    wire = dns.message.make_query(name, "A", id=0).to_wire()
    return base64.urlsafe_b64encode(wire).rstrip(b"=").decode()


def live_processes_mentioning(text: str) -> list[str]:
    """Command lines of running (non-zombie) processes that mention ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(f"{entry.name}: {cmdline}")
    return found


def dig_ms(namespace: str, server: str, name: str, tcp: bool = False) -> float:
    """Wall-clock milliseconds of one query made by dig inside the namespace."""
    args = ["dig", "+tries=1", "+time=3", "+short", f"@{server}", name]
    if tcp:
        args.insert(1, "+tcp")
    start = time.perf_counter()
    result = in_ns(namespace, *args)
    elapsed = (time.perf_counter() - start) * 1000
    assert result.returncode == 0 and result.stdout.strip(), result.stdout + result.stderr
    return elapsed


def median(values: list[float]) -> float:
    return statistics.median(values)


def mounts_mentioning(text: str) -> list[str]:
    return [line for line in Path("/proc/self/mounts").read_text().splitlines() if text in line]


def namespace_exists(name: str) -> bool:
    return netns.exists(name)


#: A small lab study for crawl tests: two sites, near and far, Do53 and DoH, wired and 4G.
STUDY = """
name = "{name}"
description = "a small crawl for the tests"
target = "lab"
seed = {seed}
rounds = 1
networks = ["wired", "4g"]
resolvers = ["near", "far"]
protocols = ["do53", "doh"]
page_load_timeout_s = 30

[sites]
list = "tranco/paper-2019.csv"

[[sites.select]]
group = "top"
ranks = [1, 1000]
every = 500

[link_check]
probes = 200
seconds = 1.0
"""


def study_file(tmp_path: Path, name: str = "crawltest", seed: int = 5, changes: dict[str, str] | None = None) -> Path:
    text = STUDY.format(name=name, seed=seed)
    for old, new in (changes or {}).items():
        text = text.replace(old, new)
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def explain(result) -> str:
    """A failed visit's verdict in full, as an assertion message: class, detail, proof reason, packets, signals.

    A string, because pytest shortens a dict message to one line of its first keys and the cause is lost.
    """
    proof = {k: v for k, v in result.proof.items() if k != "client_packets"}
    packets = {k: v for k, v in result.proof.get("client_packets", {}).items() if v}
    return (
        f"{result.error_class} / {result.detail} ({result.protocol}, {result.url}); proof {proof}; "
        f"non-zero packets {packets}; signals {result.signal}; phases {result.phases}"
    )


#: As a crawl does (the study key `infrastructure_retries`, default 2): a visit our own part failed is visited
#: again, never counted. Only for tests that expect a counted outcome; each retry is a warning in the report.
HARNESS_RETRIES = 2


def visit_retrying_harness_failures(visitor, url: str, protocol: str, resolver: str = "near"):
    """One counted visit, as a crawl makes it: an Infrastructure Failure (our fault, never the protocol's) is
    retried up to HARNESS_RETRIES times, and each one is reported, in full, as a warning."""
    result = visitor.visit_once(url, protocol, resolver)
    for _ in range(HARNESS_RETRIES):
        if result.counted:
            break
        warnings.warn(f"harness failure, visited again as a crawl would: {explain(result)}", stacklevel=2)
        result = visitor.visit_once(url, protocol, resolver)
    return result
