"""The distributed chaos run from start to end: its tmpfs, a fresh broker, the fleet under faults, the table.

`benchmarks/chaos.py --mode fleet` calls `run_fleet_chaos`; the parts are in `benchmarks/chaos_fleet.py`
and the counting in `benchmarks/chaos_table.py`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.chaos_fleet import Chaos, Fleet, FleetRun, _comm, write_fleet_study
from harness import netns


@dataclass
class FleetReport:
    """The run, its table per kind of fault and its checks."""

    run: FleetRun
    rows: list[Any]
    checks: dict[str, str]
    planned: int
    done: int = 0

    @property
    def passed(self) -> bool:
        return all(v == "ok" for name, v in self.checks.items() if "informative" not in name)

    def lines(self) -> list[str]:
        from benchmarks.chaos_table import render

        done = self.planned if not self.run.stopped else self.done
        rate = done / self.run.seconds * 3600 if self.run.seconds else 0.0
        exits = "; ".join(f"{p} {Counter(c).most_common()}" for p, c in sorted(self.run.exits.items()))
        return [
            render(self.rows),
            f"visits planned {self.planned}, done {done}"
            + (" (stopped before the end)" if self.run.stopped else "")
            + f"; wall {self.run.seconds / 60:.1f} min, {rate:.0f} visits/h",
            f"exits (status, times): {exits}; lab brought up again {self.run.lab_restarts} times",
            *(f"check {name}: {verdict}" for name, verdict in self.checks.items()),
        ]


def run_fleet_chaos(lab: Any, work: Path, visits: int, faults: int, seed: int, gap: tuple[float, float]) -> FleetReport:
    """The whole distributed chaos run on a lab that is up; the lab is left up, everything else stopped."""
    from benchmarks.chaos_table import as_json, checks, read_store, table
    from harness.study import load_study

    study = write_fleet_study(work, visits, seed)
    planned = len(load_study(str(study)).plan())
    port = 16000 + int(lab.config.settings.subnet.split(".")[2])  # a port of the lab's own subnet
    fleet = Fleet(lab, work, study, port)
    fleet.results.mkdir(parents=True, exist_ok=True)
    # The results' disk of its own, small enough to fill in a moment.
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", str(fleet.results)], check=True)
    began, owner = time.monotonic(), os.getpid()
    try:
        fleet.fresh_broker()
        Chaos(fleet, faults, seed, gap).crawl(limit_s=max(3600.0, 20.0 * planned))
        fleet.run.seconds = time.monotonic() - began
        fleet.stop()
        view = read_store(fleet.store)
        rows = table(fleet.run, view, (work / "worker.log").read_text(), finished=not fleet.run.stopped)
        done = sum(1 for n in view.done.values() if n)
        report = FleetReport(fleet.run, rows, checks(rows, view, faults), planned, done)
        left = [f"{p} {_comm(p)}" for p in netns.pids_in(lab.config.namespaces["client"])]
        report.checks["nothing left in the client namespace"] = "ok" if not left else ", ".join(left)
        (work / "chaos.json").write_text(
            json.dumps(
                {
                    "seed": seed,
                    "visits": planned,
                    "faults": [f.__dict__ for f in fleet.run.faults],
                    "table": as_json(rows),
                    "checks": report.checks,
                    "seconds": round(fleet.run.seconds),
                    "stopped_early": fleet.run.stopped,
                    "visits_done": sum(1 for n in view.done.values() if n),
                    "exits": fleet.run.exits,
                    "lab_restarts": fleet.run.lab_restarts,
                },
                indent=1,
            )
        )
        return report
    finally:
        if os.getpid() != owner:  # a forked child unwinding through this frame: the parent cleans up
            traceback.print_stack()
            os._exit(70)
        fleet.stop()
        (fleet.results / "filler").unlink(missing_ok=True)
        if fleet.store.exists():  # the store outlives the tmpfs, for a failed check to be read
            shutil.copyfile(fleet.store, work / "store.sqlite")
        subprocess.run(["umount", "-l", str(fleet.results)], check=False)
