"""Chaos through the distributed path: a broker, a coordinator and one worker on a lab, under random faults.

Every part runs as the command a user runs (`dnsstudy broker up`, `coordinate`, `worker`), with its log
in the work directory. Whatever a fault stops is started again with the same command; whatever the
broker holds is watched twice a second, so that each fault knows the visits in flight while it acted.
The figures per kind of fault are made by `benchmarks/chaos_table.py`.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.chaos_clock import SteppedClock
from harness import netns

ROOT = Path(__file__).resolve().parent.parent
DNSSTUDY = [sys.executable, "-m", "harness.cli"]
VANTAGE = "chaos"
KINDS = [
    "worker",
    "browser",
    "stub",
    "resolver",
    "authoritative",
    "broker",
    "coordinator",
    "disk-full",
    "clock-step",
]
BROWSER_PROGRAMS = ["firefox-esr", "geckodriver"]
STUB_PROGRAMS = ["stubby", "dnsproxy"]
CONFIGURATIONS = 3  # near over do53, dot, doh on the wired link
# A visit the broker hands out again after this long without a worker's acknowledgement (a worker started
# again takes its visits back at once); short enough that a wrong redelivery would show within a run.
VISIBILITY_S = 300

STUDY = """
name = "chaos-fleet"
description = "a lab study through broker, coordinator and worker, under random faults (benchmarks/chaos.py)"
target = "lab"
seed = {seed}
rounds = 1
vantage_points = ["{vantage}"]
networks = ["wired"]
resolvers = ["near"]
protocols = ["do53", "dot", "doh"]
page_load_timeout_s = 20
infrastructure_retries = 2

[sites]
list = "tranco/paper-2019.csv"

[[sites.select]]
group = "top"
ranks = [1, {last}]

[link_check]
probes = 200
seconds = 1.0

[timer]
enabled = false
"""


#: Set by SIGTERM (benchmarks/chaos.py): no fault more; once every visit a fault touched is recorded (or 3 min
#: passed) the run stops and tabulates what it saw. A flag, not an exception: raised at a random point of the
#: loop (inside Popen, a lab's `up`) an exception left it blocked.
STOP = threading.Event()
STOP_GRACE_S = 180.0


@dataclass
class Injected:
    """One fault: its kind, what it hit, and the true (unstepped) times it acted between."""

    kind: str
    target: str
    start: float
    end: float = 0.0


@dataclass
class Holding:
    """A visit held by the worker (taken, not acknowledged) from ``first`` to ``last`` seen, one delivery."""

    ordinal: int
    tag: str
    first: float
    last: float
    deliveries: int = 1  # held again after a gap: put back (a killed worker's) and taken again, same tag


@dataclass
class FleetRun:
    """What the run saw: the faults, the holdings, the restarts and exits of each part."""

    faults: list[Injected] = field(default_factory=list)
    holdings: dict[str, Holding] = field(default_factory=dict)  # delivery tag -> holding
    exits: dict[str, list[int]] = field(default_factory=dict)  # part -> exit statuses
    lab_restarts: int = 0
    seconds: float = 0.0
    store: Path | None = None
    stopped: bool = False  # stopped before the coordinator said done (SIGTERM)

    def visits_done(self) -> list[int]:
        """The ordinals the store holds as done now (for the progress lines)."""
        import sqlite3

        if self.store is None:
            return []
        try:
            db = sqlite3.connect(f"file:{self.store}?mode=ro", uri=True, timeout=1)
            try:
                return [o for (o,) in db.execute("SELECT ordinal FROM visits WHERE status = 'done'")]
            finally:
                db.close()
        except sqlite3.Error:
            return []


def write_fleet_study(directory: Path, visits: int, seed: int) -> Path:
    """The study: whole sites of 3 visits (near over Do53, DoT and DoH, wired) at one vantage point."""
    path = directory / "chaos-fleet.toml"
    path.write_text(STUDY.format(seed=seed, vantage=VANTAGE, last=max(1, -(-visits // CONFIGURATIONS))))
    return path


class Fleet:
    """The broker, the coordinator and the worker as processes, started again whenever one stops."""

    def __init__(self, lab: Any, work: Path, study: Path, port: int):
        from harness.distributed.broker import RedisService

        self.lab, self.work, self.study = lab, work, study
        self.results = work / "results"
        self.store = self.results / "store.sqlite"
        self.broker = RedisService(name=f"{lab.config.prefix}-chaos", port=port)
        self.clock = SteppedClock(work / "clock")
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.run = FleetRun(store=self.store)
        self.held_last: set[str] = set()  # the tags held at the last look that answered

    def env(self) -> dict[str, str]:
        """The worker's and coordinator's environment: the checkout, the stepped clock, the broker's URL."""
        env = {**os.environ, "DNSSTUDY_PROGRESS_INTERVAL": "0", **self.clock.environment(str(ROOT))}
        return env | {"DNSSTUDY_BROKER": self.broker.url}  # from the environment: kept out of ps

    def broker_up(self) -> None:
        """`dnsstudy broker up` (it daemonizes), on true time: redis-server's allocator recurses into
        libfaketime at start (benchmarks/chaos_clock.py)."""
        argv = [*DNSSTUDY, "broker", "up", "--name", self.broker.name, "--port", str(self.broker.port)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with open(self.work / "broker.log", "a") as log:
            subprocess.run(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, check=True, timeout=60)

    def fresh_broker(self) -> None:
        """A broker with no queue left by an earlier run."""
        self.broker.down()
        shutil.rmtree(self.broker.directory, ignore_errors=True)
        self.broker_up()

    def argv(self, part: str) -> list[str]:
        if part == "worker":
            cfg = self.lab.config
            return [
                *(*DNSSTUDY, "worker", "--vantage", VANTAGE, "--prefix", cfg.prefix),
                *("--subnet", cfg.settings.subnet, "--backend", "userspace"),
                *("--visibility-timeout", str(VISIBILITY_S)),
            ]
        return [*DNSSTUDY, "coordinate", str(self.study), "--store", str(self.store)]

    def start(self, part: str) -> None:
        with open(self.work / f"{part}.log", "a") as log:
            self.processes[part] = subprocess.Popen(
                self.argv(part), cwd=ROOT, env=self.env(), stdout=log, stderr=subprocess.STDOUT
            )

    def kill(self, part: str) -> int:
        process = self.processes[part]
        process.kill()
        process.wait()
        self.run.exits.setdefault(part, []).append(-9)
        return process.pid

    def stop(self) -> None:
        """Everything stopped: the worker and coordinator by SIGTERM, the broker down."""
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.broker.down()

    def watch(self) -> None:
        """The visits the worker holds now (the broker's unacknowledged set), if the broker answers."""
        import redis

        now = time.time()
        try:
            client = redis.Redis.from_url(self.broker.url, socket_timeout=2)
            held = client.hgetall("unacked")
            client.close()
        except (redis.RedisError, OSError):
            return
        now_held: set[str] = set()
        for tag, value in held.items():
            message = json.loads(value)[0]
            task_id = message["headers"]["id"]
            if ":visit:" not in task_id:
                continue
            key = tag.decode() if isinstance(tag, bytes) else tag
            now_held.add(key)
            known = self.run.holdings.get(key)
            if known is None:
                self.run.holdings[key] = Holding(int(task_id.rsplit(":", 1)[1]), key, now, now)
            else:
                known.deliveries += key not in self.held_last
                known.last = now
        self.held_last = now_held

    def daemon_pid(self, name: str) -> int | None:
        state = json.loads((Path(self.lab.run_dir) / "state.json").read_text())
        return next((int(d["pid"]) for d in state["daemons"] if d["name"] == name), None)

    def lab_dead(self) -> bool:
        """True if a daemon of the lab is gone (a resolver or the authoritative killed)."""
        try:
            state = json.loads((Path(self.lab.run_dir) / "state.json").read_text())
        except (OSError, ValueError):
            return True
        return any(not _alive(int(d["pid"])) for d in state["daemons"])

    def client_pids(self, programs: list[str]) -> list[int]:
        return [p for p in netns.pids_in(self.lab.config.namespaces["client"]) if _comm(p) in programs]


class Chaos:
    """Injects ``wanted`` faults at random moments, keeps the fleet running, until the study is done."""

    def __init__(self, fleet: Fleet, wanted: int, seed: int, gap: tuple[float, float]):
        self.fleet, self.wanted, self.rng, self.gap = fleet, wanted, random.Random(seed), gap
        self.undo: tuple[float, Callable[[], None], Injected] | None = None  # a held fault: when, how to end it
        self.restart_at: dict[str, float] = {}
        self.held: tuple[float, Callable[[], None]] | None = None  # how long a stopped daemon stays stopped

    def crawl(self, limit_s: float) -> None:
        """Until the coordinator exits 0 (every visit recorded); SystemExit past ``limit_s``."""
        try:
            self._crawl(limit_s)
        finally:
            if self.undo is not None:  # a held fault is ended whatever stopped the run: no stopped daemon left
                self._end_held()

    def _crawl(self, limit_s: float) -> None:
        fleet, began = self.fleet, time.monotonic()
        fleet.start("worker")
        fleet.start("coordinator")
        next_at = time.monotonic() + self.rng.uniform(*self.gap)
        stop_by: float | None = None
        while True:
            fleet.watch()
            if self._tend():
                return
            if STOP.is_set() and stop_by is None:
                self.wanted, stop_by = len(fleet.run.faults), time.monotonic() + STOP_GRACE_S
            if stop_by is not None and self.undo is None and (time.monotonic() > stop_by or self._touched_done()):
                fleet.run.stopped = True
                return
            if self.undo is not None and time.monotonic() >= self.undo[0]:
                self._end_held()
                next_at = time.monotonic() + self.rng.uniform(*self.gap)
            elif self.undo is None and len(fleet.run.faults) < self.wanted and time.monotonic() >= next_at:
                # Nothing to hit right now (no stub between DoT visits, no browser between visits): soon again.
                next_at = time.monotonic() + (self.rng.uniform(*self.gap) if self._inject() else 0.3)
            if time.monotonic() - began > limit_s:
                raise SystemExit(f"not done within {limit_s:.0f} s: see {fleet.work}")
            time.sleep(0.5)

    def _touched_done(self) -> bool:
        """True if every visit held during a fault is recorded (a run stopped early loses none of them)."""
        touched = {
            h.ordinal
            for h in self.fleet.run.holdings.values()
            for f in self.fleet.run.faults
            if h.first <= (f.end or time.time()) and h.last >= f.start
        }
        return touched <= set(self.fleet.run.visits_done())

    def _tend(self) -> bool:
        """Start again whatever stopped; True once the coordinator says the study is done."""
        fleet = self.fleet
        if self.undo is not None and self.undo[2].kind == "broker":
            return False  # the broker is down on purpose: nothing to start until it is back
        for part in ("worker", "coordinator"):
            code = fleet.processes[part].poll()
            if code is None:
                continue
            if part not in self.restart_at:
                fleet.run.exits.setdefault(part, []).append(code)
                if part == "coordinator" and code == 0:
                    return True
                self.restart_at[part] = time.monotonic() + 2.0
            elif time.monotonic() >= self.restart_at[part]:
                del self.restart_at[part]
                if part == "worker" and fleet.lab_dead():  # what an operator does: the place up again
                    fleet.lab.down()
                    fleet.lab.up()
                    fleet.run.lab_restarts += 1
                if len(fleet.run.exits.get(part, [])) > 20 * max(1, self.wanted):
                    raise SystemExit(f"the {part} keeps exiting: see {fleet.work / (part + '.log')}")
                fleet.start(part)
        return False

    def _inject(self) -> bool:
        """One fault of a random kind; False if its target does not run now."""
        kind = pick_kind(self.rng, self.fleet.run.faults, self.wanted)
        fault = Injected(kind, "", time.time())
        hold: tuple[float, Callable[[], None]] | None = None
        if kind in ("worker", "coordinator"):
            if self.fleet.processes[kind].poll() is not None:
                return False
            fault.target = f"{kind} pid {self.fleet.kill(kind)}"
            self.restart_at[kind] = time.monotonic()  # started again at once, by _tend
        elif kind in ("browser", "stub"):
            pids = self.fleet.client_pids(BROWSER_PROGRAMS if kind == "browser" else STUB_PROGRAMS)
            if not pids:
                return False
            pid = self.rng.choice(pids)
            fault.target = f"{_comm(pid)} pid {pid}"
            _signal(pid, signal.SIGKILL)
        elif kind in ("resolver", "authoritative"):
            if not self._daemon_fault(fault, "resolver-near" if kind == "resolver" else "auth"):
                return False
            hold = self.held
        else:
            hold = self._held_fault(fault)
        self.fleet.run.faults.append(fault)
        done = len(self.fleet.run.visits_done()) if self.fleet.store.exists() else 0
        print(f"fault {len(self.fleet.run.faults)}: {kind}, {fault.target}; {done} visits done", flush=True)
        if hold is None:
            fault.end = time.time()
        else:
            self.undo = (time.monotonic() + hold[0], hold[1], fault)
        return True

    def _daemon_fault(self, fault: Injected, name: str) -> bool:
        """A lab daemon stopped (SIGSTOP, SIGCONT 1-15 s later: `self.held`) or killed, half and half; False if it
        does not run now. (A kill has nothing to end: it must still count as injected.)"""
        self.held = None
        pid = self.fleet.daemon_pid(name)
        if pid is None or not _alive(pid):
            return False
        if self.rng.random() < 0.5:
            fault.target = f"{name} pid {pid} killed"
            _signal(pid, signal.SIGKILL)
            return True
        fault.target = f"{name} pid {pid} stopped"
        _signal(pid, signal.SIGSTOP)
        self.held = (self.rng.uniform(1.0, 15.0), lambda: _signal(pid, signal.SIGCONT))
        return True

    def _held_fault(self, fault: Injected) -> tuple[float, Callable[[], None]]:
        """The broker killed, the results disk full, or the clock stepped; and how it ends."""
        fleet = self.fleet
        if fault.kind == "broker":
            pid = fleet.broker.pid()
            fault.target = f"redis-server pid {pid}"
            if pid is not None:
                _signal(pid, signal.SIGKILL)
            return self.rng.uniform(1.0, 10.0), fleet.broker_up  # the same command again
        if fault.kind == "disk-full":
            fault.target = str(fleet.results)
            fill(fleet.results / "filler")
            return self.rng.uniform(1.0, 10.0), lambda: (fleet.results / "filler").unlink(missing_ok=True)
        # A step of the wall clock to between 45 minutes behind and 2 hours ahead of true time, at least
        # a minute from where it was; it stays until the next step (the lab's certificates are backdated 1 h).
        offset = fleet.clock.offset
        while abs(offset - fleet.clock.offset) < 60:
            offset = self.rng.randint(-45 * 60, 2 * 3600)
        fault.target = f"wall clock {fleet.clock.offset:+d} s -> {offset:+d} s"
        fleet.clock.set(offset)
        return 2.0, lambda: None  # every process reads the file again within a second

    def _end_held(self) -> None:
        assert self.undo is not None
        _at, end, fault = self.undo
        end()
        fault.end = time.time()
        self.undo = None


def pick_kind(rng: random.Random, faults: list[Injected], wanted: int) -> str:
    """A random kind; the last 2 x len(KINDS) faults of a run of at least one per kind go to kinds missing."""
    injected = {f.kind for f in faults}
    missing = [k for k in KINDS if k not in injected]
    if wanted >= len(KINDS) and missing and wanted - len(faults) <= 2 * len(KINDS):
        return rng.choice(missing)
    return rng.choice(KINDS)


def fill(path: Path) -> None:
    """Fill the filesystem of ``path`` to the last byte; only a disk of its own (never the host's)."""
    if not os.path.ismount(path.parent):
        raise SystemExit(f"{path.parent} is not a mount point any more: not filling the disk under it")
    try:
        with open(path, "wb") as f:
            while True:
                f.write(b"\0" * 1024 * 1024)
    except OSError:
        pass  # ENOSPC: the disk is full


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and " Z " not in Path(f"/proc/{pid}/stat").read_text()


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
