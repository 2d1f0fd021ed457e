"""Chaos: a lab study under random faults, resumed after each one that stops a part, then checked.

Two modes. `--mode fleet` (the default; benchmarks/chaos_fleet.py): the study runs through the
distributed path, `dnsstudy broker up`, `coordinate` and one `worker` on the lab, under faults of nine
kinds (worker, browser, stub, resolver, authoritative, broker, coordinator, disk full, clock step), and
the run ends with a table per kind: injected, visits touched, retried, lost, recorded twice,
misattributed (benchmarks/chaos_table.py), printed and written to chaos.json in the work directory.

`--mode crawl` (below): one `dnsstudy crawl` under SIGKILL of the crawl, of Firefox, geckodriver or
Stubby in the client namespace, of a 4G delayer (user-space shaping); SIGSTOP then SIGCONT of
resolver-near; the results directory's disk (a tmpfs of its own) filled, then freed. After a fault that
stops the crawl it runs again with the same command. At the end: every planned visit recorded once, no
counted failure during a fault (a failure the harness caused, blamed on a protocol), no orphan HAR or
.part, nothing left running in the client namespace, and after `lab down` no namespace and no process
of the lab.

    .venv/bin/python -m benchmarks.chaos --visits 300 --faults 100 --seed 1 --prefix P --subnet S
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from harness import netns
from harness.shaping.userspace import DELAYER
from harness.study import load_study

ROOT = Path(__file__).resolve().parent.parent

CONFIGURATIONS = 6  # near over do53, dot, doh; on wired and 4g
KINDS = ["crawl", "firefox", "geckodriver", "stubby", "delayer", "stop-resolver", "disk-full"]
CLIENT_PROGRAMS = {"firefox": "firefox-esr", "geckodriver": "geckodriver", "stubby": "stubby"}
# From this many faults on, every kind must be injected: the last LATE faults go to kinds not injected yet
# (a kind's target may be running only now and then, as Stubby during DoT visits). Below, a kind may go
# uninjected by chance, and its absence is only reported.
EVERY_KIND_FROM = 5 * len(KINDS)
LATE = 2 * len(KINDS)
# A counted failure that started this long before a fault's end may be that fault's doing.
VISIT_REACH_S = 45.0

STUDY = """
name = "chaos"
description = "a lab crawl under random faults (benchmarks/chaos.py)"
target = "lab"
seed = {seed}
rounds = 1
networks = ["wired", "4g"]
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


@dataclass
class Fault:
    """One injected fault and the wall-clock window it acted in."""

    kind: str
    start: float
    end: float
    target: str


@dataclass
class ChaosReport:
    """Figures and checks of one chaos run."""

    planned: int = 0
    faults: list[Fault] = field(default_factory=list)
    resumes: int = 0
    exit_codes: Counter[int] = field(default_factory=Counter)
    seconds: float = 0.0
    checks: dict[str, str] = field(default_factory=dict)  # check -> "ok" or what failed

    @property
    def passed(self) -> bool:
        """True if every check passed."""
        return all(v == "ok" for name, v in self.checks.items() if "informative" not in name)

    def lines(self) -> list[str]:
        """The figures, one per line."""
        kinds = Counter(f.kind for f in self.faults)
        rate = self.planned / self.seconds * 3600 if self.seconds else 0.0
        out = [
            f"visits planned {self.planned}; faults {len(self.faults)}: " + ", ".join(f"{k} {kinds[k]}" for k in KINDS),
            f"resumes {self.resumes}; crawl exits "
            + ", ".join(f"{c}: {n}" for c, n in sorted(self.exit_codes.items())),
            f"wall {self.seconds / 60:.1f} min, {rate:.0f} visits/h",
        ]
        return out + [f"check {name}: {verdict}" for name, verdict in self.checks.items()]


def write_study(directory: Path, visits: int, seed: int) -> Path:
    """The chaos study: whole sites of 6 visits (near over 3 protocols, wired and 4g)."""
    sites = max(1, -(-visits // CONFIGURATIONS))
    path = directory / "chaos.toml"
    path.write_text(STUDY.format(seed=seed, last=sites))
    return path


class Chaos:
    """Runs the crawl of a study in a lab that is up, injecting faults, resuming, and checking at the end."""

    def __init__(self, lab: Any, work: Path, visits: int, faults: int, seed: int, gap: tuple[float, float]):
        self.lab, self.work, self.wanted, self.rng, self.gap = lab, work, faults, random.Random(seed), gap
        self.results = work / "results"
        self.study = write_study(work, visits, seed)
        self.store = self.results / "store.sqlite"
        self.report = ChaosReport(planned=len(load_study(str(self.study)).plan()))
        self.log = open(work / "crawl.log", "a")  # noqa: SIM115 - kept for the whole run, closed in run()

    def argv(self) -> list[str]:
        """The crawl command, the same for the first run and every resume."""
        cfg = self.lab.config
        return [
            *(sys.executable, "-m", "harness.cli", "crawl", str(self.study), "--store", str(self.store)),
            *("--prefix", cfg.prefix, "--subnet", cfg.settings.subnet, "--backend", "userspace"),
        ]

    def start(self) -> subprocess.Popen[bytes]:
        """Start (or resume) the crawl."""
        env = {**os.environ, "PYTHONPATH": str(ROOT), "DNSSTUDY_PROGRESS_INTERVAL": "0"}
        return subprocess.Popen(self.argv(), cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def run(self) -> ChaosReport:
        """Crawl to the end under faults, then check; the results tmpfs is unmounted, the lab left up."""
        self.results.mkdir(parents=True, exist_ok=True)
        # A disk of its own, small enough to fill in a moment.
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(self.results)], check=True)
        began = time.monotonic()
        try:
            self._crawl_under_faults()
            self.report.seconds = time.monotonic() - began
            self._check_store()
            self._check_files()
            self.report.checks.update(kinds_check(self.report.faults, self.wanted))
        finally:
            self.log.close()
            # The injected-fault log and the store outlive the tmpfs, for a failed check to be read.
            faults = [f.__dict__ for f in self.report.faults]
            (self.work / "faults.json").write_text(json.dumps(faults, indent=1))
            if self.store.exists():
                shutil.copyfile(self.store, self.work / "store.sqlite")
            subprocess.run(["umount", "-l", str(self.results)], check=False)
        return self.report

    def _crawl_under_faults(self) -> None:
        """Inject faults until enough are in, resuming whenever the crawl stops, until it finishes."""
        crawl = self.start()
        next_at = time.monotonic() + self.rng.uniform(*self.gap)
        while True:
            code = crawl.poll()
            if code is not None:
                self.report.exit_codes[code] += 1
                if code == 0:
                    return
                if self.report.exit_codes[code] > 10 * max(1, self.wanted) + 10:
                    raise RuntimeError(f"the crawl keeps exiting {code}: see {self.work / 'crawl.log'}")
                self.report.resumes += 1
                crawl = self.start()
            elif len(self.report.faults) < self.wanted and time.monotonic() >= next_at:
                if self._inject(crawl):
                    next_at = time.monotonic() + self.rng.uniform(*self.gap)
                else:  # nothing to hit right now (e.g. no stub between visits): try again soon
                    next_at = time.monotonic() + 0.3
            time.sleep(0.1)

    def _inject(self, crawl: subprocess.Popen[bytes]) -> bool:
        """One fault of a random kind; False if its target is not running now."""
        kind = pick_kind(self.rng, self.report.faults, self.wanted)
        start = time.time()
        if kind == "crawl":
            crawl.kill()
            crawl.wait()
            target = f"crawl pid {crawl.pid}"
        elif kind in CLIENT_PROGRAMS or kind == "delayer":
            found = self._pids(kind)
            if not found:
                return False
            pid = self.rng.choice(found)
            _signal(pid, signal.SIGKILL)
            target = f"{kind} pid {pid}"
        elif kind == "stop-resolver":
            pid = self._resolver_pid()
            _signal(pid, signal.SIGSTOP)
            time.sleep(self.rng.uniform(1.0, 15.0))
            _signal(pid, signal.SIGCONT)
            target = f"resolver-near pid {pid}"
        else:
            self._fill_disk(self.rng.uniform(1.0, 10.0))
            target = str(self.results)
        self.report.faults.append(Fault(kind, start, time.time(), target))
        return True

    def _pids(self, kind: str) -> list[int]:
        """Processes of a kind: in the client namespace by program, or the shaper's delayers."""
        names = self.lab.config.namespaces
        if kind == "delayer":
            return [p for p in netns.pids_in(names["shaper"]) if _comm(p) == DELAYER]
        return [p for p in netns.pids_in(names["client"]) if _comm(p) == CLIENT_PROGRAMS[kind]]

    def _resolver_pid(self) -> int:
        """The pid of resolver-near, from the lab's state."""
        state = json.loads((Path(self.lab.run_dir) / "state.json").read_text())
        return next(int(d["pid"]) for d in state["daemons"] if d["name"] == "resolver-near")

    def _fill_disk(self, hold: float) -> None:
        """Fill the results tmpfs to the last byte, hold it full, free it."""
        filler = self.results / "filler"
        try:
            with open(filler, "wb") as f:
                while True:
                    f.write(b"\0" * 1024 * 1024)
        except OSError:
            pass  # ENOSPC: the disk is full
        time.sleep(hold)
        filler.unlink(missing_ok=True)

    def _check_store(self) -> None:
        """Store equals plan, each visit once; no counted failure while a fault acted."""
        plan = load_study(str(self.study)).plan()
        db = sqlite3.connect(self.store)
        try:
            rows = db.execute(
                "SELECT ordinal, network, site, resolver, protocol, status, visit_id, started_at, error_class, "
                "counted, detail FROM visits ORDER BY ordinal"
            ).fetchall()
        finally:
            db.close()
        expected = [(v.ordinal, v.network, v.site.domain, v.resolver, v.protocol) for v in plan]
        same = [r[:5] for r in rows] == expected
        once = all(r[5] == "done" for r in rows) and len({r[6] for r in rows}) == len(rows) == len(plan)
        self.report.checks["store equals plan"] = "ok" if same else f"{len(rows)} rows, {len(plan)} planned"
        self.report.checks["every visit done once"] = "ok" if once else "visits missing, not done or repeated"
        blamed = [r for r in rows if r[9] and r[8] != "Successful" and self._during_fault(r[7])]
        self.report.checks["no counted failure during a fault"] = (
            "ok" if not blamed else "; ".join(f"visit {r[0]} {r[4]} at {r[7]}: {r[8]}: {r[10]}" for r in blamed[:5])
        )
        others = [r for r in rows if r[9] and r[8] != "Successful" and r not in blamed]
        self.report.checks["counted failures outside faults (informative)"] = "ok" if not others else str(len(others))

    def _during_fault(self, started_at: str | None) -> bool:
        """True if a visit that started then could have run while a fault acted."""
        if not started_at:
            return False
        try:
            begun = float(started_at)
        except ValueError:
            begun = datetime.fromisoformat(started_at).timestamp()
        return any(f.start - VISIT_REACH_S <= begun <= f.end for f in self.report.faults)

    def _check_files(self) -> None:
        """No orphan HAR or .part in the results, nothing left in the client namespace."""
        db = sqlite3.connect(self.store)
        try:
            named = {p for (p,) in db.execute("SELECT har_path FROM visits WHERE har_path IS NOT NULL")}
        finally:
            db.close()
        hars = self.results / "hars"
        orphans = [
            p.name
            for p in hars.iterdir()
            if p.name.endswith(".part") or p.name.endswith((".har", ".har.gz")) and str(p) not in named
        ]
        self.report.checks["no orphan file"] = "ok" if not orphans else ", ".join(orphans[:5])
        left = [f"{p} {_comm(p)}" for p in netns.pids_in(self.lab.config.namespaces["client"])]
        self.report.checks["nothing left in the client namespace"] = "ok" if not left else ", ".join(left)


def pick_kind(rng: random.Random, faults: list[Fault], wanted: int) -> str:
    """A random kind of fault; in a run that must inject every kind, the last LATE go to those still missing."""
    injected = {f.kind for f in faults}
    missing = [k for k in KINDS if k not in injected]
    if wanted >= EVERY_KIND_FROM and missing and wanted - len(faults) <= LATE:
        return rng.choice(missing)
    return rng.choice(KINDS)


def kinds_check(faults: list[Fault], wanted: int) -> dict[str, str]:
    """Every kind of fault was injected: a kind whose target is never found would otherwise vanish unseen."""
    injected = Counter(f.kind for f in faults)
    missing = [k for k in KINDS if not injected[k]]
    name = "every kind of fault injected" + ("" if wanted >= EVERY_KIND_FROM else " (informative)")
    return {name: "ok" if not missing else "never injected: " + ", ".join(missing)}


def check_lab_gone(lab: Any) -> dict[str, str]:
    """After `lab down`: no namespace of the lab and no process naming its run directory."""
    namespaces = [n for n in lab.config.namespaces.values() if netns.exists(n)]
    run = f"/run/dnsstudy/{lab.config.prefix}/"
    procs = [
        f"{p.name} {_comm(int(p.name))}"
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and run in _cmdline(int(p.name))
    ]
    return {
        "no namespace left": "ok" if not namespaces else ", ".join(namespaces),
        "no process left": "ok" if not procs else ", ".join(procs),
    }


def _signal(pid: int, signum: int) -> None:
    """Send a signal to a process that may have just ended."""
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def stop(owner: int, mode: str, *_: object) -> None:
    """SIGTERM: a fleet run stops soon and tabulates what it saw; a crawl run cleans up and exits."""
    from benchmarks.chaos_fleet import STOP

    if os.getpid() != owner:
        os._exit(143)
    if mode != "fleet":
        sys.exit(143)
    STOP.set()


def main() -> None:
    from benchmarks.benchlab import add_lab_arguments, fresh_lab
    from benchmarks.chaos_run import run_fleet_chaos

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--visits", type=int, default=300)
    parser.add_argument("--faults", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--mode",
        choices=["fleet", "crawl"],
        default="fleet",
        help="fleet: broker, coordinator and a worker (benchmarks/chaos_fleet.py); crawl: one `dnsstudy crawl`",
    )
    parser.add_argument("--gap", type=float, nargs=2, default=None, help="seconds between faults (range)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/dnsstudy-chaos"))
    add_lab_arguments(parser)
    args = parser.parse_args()
    # Stopped (a background job ignores SIGINT): the lab, the broker, the tmpfs and held faults are cleaned up.
    # Only in this process: a child forked by pyroute2 inherits the handler and is stopped with SIGTERM; raising
    # there would unwind the parent's stack in the child (its cleanup, the tmpfs unmounted).
    owner = os.getpid()
    signal.signal(signal.SIGTERM, partial(stop, owner, args.mode))
    work = args.work / f"{args.mode}-seed{args.seed}-{datetime.now():%Y%m%dT%H%M%S}"
    work.mkdir(parents=True)
    print(f"work directory {work}", flush=True)
    lab = fresh_lab(args)
    report: Any
    try:
        if args.mode == "fleet":
            gap = tuple(args.gap or (6.0, 20.0))
            report = run_fleet_chaos(lab, work, args.visits, args.faults, args.seed, gap)
        else:
            report = Chaos(lab, work, args.visits, args.faults, args.seed, tuple(args.gap or (2.0, 12.0))).run()
    finally:
        lab.down()
    report.checks.update(check_lab_gone(lab))
    print(f"seed {args.seed}, {datetime.now():%Y-%m-%d}")
    print("\n".join(report.lines()))
    sys.exit(0 if report.passed else 1)


if __name__ == "__main__":
    main()
