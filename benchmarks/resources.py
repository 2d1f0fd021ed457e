"""Resources over a long crawl: the crawl process's RSS and the lab's /run use, from start to end.

Runs a wired lab crawl of N visits (near and far, Do53, DoT and DoH, timer off) in its own lab. Every
second it reads `VmRSS` of the crawl process (and its anonymous and file-backed parts); every K visits it
prints the RSS then, its lowest and highest since the previous row, and the bytes under
/run/dnsstudy/<prefix> (what `du` counts). Each row is read just after a visit is recorded, as the next
starts; the last as the last visit starts (the crawl exits right after it). It ends with the first and
last samples, the peak, and the slope per visit of the per-row lowest RSS (what the crawl holds between
visits; a leak raises it) and of /run, each with its extrapolation to a week.

The slopes and the week are read from the rows after the warm-up only (`--warm-up`, 300 visits by
default): over its first few hundred visits a crawl's RSS climbs while Python, Firefox's driver and the
allocator settle (82 to 95 MiB over the first 300 visits of a 2,003-visit run on this machine, then flat
at 94.7-98.6 MiB), and that climb extrapolated to a week is a leak that is not there (a short run
printed +733 MiB this way). A run that does not reach three rows after the warm-up prints no
extrapolation, and says so; the week comes with the 95 % interval of its slope, which says when the
rows after the warm-up are too few to tell.

    .venv/bin/python -m benchmarks.resources --visits 2000 --every 100
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.benchlab import add_lab_arguments, fresh_lab
from harness.logs import DEFAULT_LIMIT, used_bytes

ROOT = Path(__file__).resolve().parent.parent

CONFIGURATIONS = 6  # near and far, each over do53, dot and doh
#: Visits before a slope is read: on this machine the lowest RSS between rows climbed from 82 to 95 MiB over
#: the first 300 visits of a 2,003-visit crawl, then stayed within 94.7-98.6 MiB (docs/crawl.md).
WARM_UP = 300

STUDY = """
name = "{name}"
description = "resources over a long crawl (benchmarks/resources.py)"
target = "lab"
seed = 7
rounds = 1
networks = ["wired"]
resolvers = ["near", "far"]
protocols = ["do53", "dot", "doh"]
page_load_timeout_s = 30

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


def write_study(directory: Path, visits: int, name: str = "resources") -> Path:
    """A wired study of at least `visits` visits (whole sites of 6 configurations each)."""
    sites = min(2000, -(-visits // CONFIGURATIONS))
    path = directory / f"{name}.toml"
    path.write_text(STUDY.format(name=name, last=sites))
    return path


def memory(pid: int) -> tuple[int, int, int, int]:
    """(RSS, anonymous, file-backed, highest RSS so far) bytes of a process; zeros once it is gone."""
    fields = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                fields[key] = int(value.split()[0]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return fields.get("VmRSS", 0), fields.get("RssAnon", 0), fields.get("RssFile", 0), fields.get("VmHWM", 0)


def count_visits(store: Path, where: str = "1") -> int:
    """Visits in the store matching `where` (a constant of this file); 0 before the plan is written."""
    if not store.exists():
        return 0
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return int(db.execute(f"SELECT COUNT(*) FROM visits WHERE {where}").fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()


def done_visits(store: Path) -> int:
    """Visits done in the store."""
    return count_visits(store, "status = 'done'")


def run_bytes(run: Path) -> int:
    """Bytes under the lab's run directory, without the visit in flight (its profile goes when it ends)."""
    return used_bytes(run) - used_bytes(run / "visits")


def slope(points: list[tuple[int, int]]) -> float:
    """Least-squares slope of (visits, bytes): bytes per visit."""
    return fitted_slope(points)[0]


def fitted_slope(points: list[tuple[int, int]]) -> tuple[float, float | None]:
    """Least-squares slope of (visits, bytes) in bytes per visit, and the half-width of its 95 % interval
    (Student's t on the residuals; None with fewer than three points, which leave no residual to judge by)."""
    from scipy.stats import t  # imported here: only the report needs it

    n = len(points)
    if n < 2:
        return 0.0, None
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if not sxx:
        return 0.0, None
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    if n < 3:
        return b, None
    residuals = sum((y - my - b * (x - mx)) ** 2 for x, y in points)
    return b, float(t.ppf(0.975, n - 2)) * (residuals / (n - 2) / sxx) ** 0.5


@dataclass
class Sample:
    """One row: visits done, RSS now (anonymous, file-backed), its range since the last row (read every
    second), the kernel's high-water mark of RSS since the crawl started, and /run bytes."""

    visits: int
    rss: int
    anon: int
    file: int
    low: int
    high: int
    hwm: int
    run: int

    def line(self) -> str:
        """The row as printed."""
        mib = 2**20
        return (
            f"{self.visits:6d} visits  rss {self.rss / mib:6.1f} MiB (anon {self.anon / mib:5.1f}, "
            f"file {self.file / mib:5.1f}; since last row {self.low / mib:5.1f}-{self.high / mib:5.1f}; "
            f"peak {self.hwm / mib:5.1f})  "
            f"/run {self.run / mib:6.2f} MiB"
        )


def measure(args: argparse.Namespace, work: Path) -> list[Sample]:
    """Run the crawl, reading RSS every second; a row after the first visit, every K visits and the last but one."""
    study, store = write_study(work, args.visits), work / "store.sqlite"
    argv = [sys.executable, "-m", "harness.cli", "crawl", str(study), "--store", str(store)]
    argv += ["--prefix", args.prefix, "--subnet", args.subnet]
    run = Path("/run/dnsstudy") / args.prefix
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DNSSTUDY_PROGRESS_INTERVAL": "0"}
    samples: list[Sample] = []
    with open(work / "crawl.log", "w") as log:
        crawl = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        next_at, planned, seen = 1, 0, []
        while crawl.poll() is None:
            done = done_visits(store)
            planned = planned or count_visits(store)
            rss, anon, file, hwm = memory(crawl.pid)
            if rss and done:  # from the first visit on: before it, the process is still starting
                seen.append(rss)
            if done >= next_at and rss:
                samples.append(Sample(done, rss, anon, file, min(seen), max(seen), hwm, run_bytes(run)))
                print(samples[-1].line(), flush=True)
                seen = []
                next_at = (done // args.every + 1) * args.every
                if planned and done < planned - 1:
                    # A row as the last visit starts, like every row: the crawl exits right after that visit.
                    next_at = min(next_at, planned - 1)
            time.sleep(1)
    if crawl.returncode != 0:
        tail = (work / "crawl.log").read_text().splitlines()[-5:]
        print(f"crawl exited {crawl.returncode}:", *tail, sep="\n  ")
    return samples


def report(samples: list[Sample], warm_up: int = WARM_UP) -> None:
    """Start, end, peak; and, from the rows after the first ``warm_up`` visits, the slope per visit of RSS and
    /run with their week's extrapolation."""
    if not samples:
        print("no sample while the crawl ran")
        return
    first, last = samples[0], samples[-1]
    peak = next(s for s in samples if s.hwm == last.hwm)  # the first row whose high-water mark is the last
    mib = 2**20
    print(
        f"crawl RSS: {first.rss / mib:.1f} MiB -> {last.rss / mib:.1f} MiB over visits {first.visits} -> "
        f"{last.visits}; peak {last.hwm / mib:.1f} MiB (reached by the {peak.visits} visits row)"
    )
    print(f"/run use:  {first.run / mib:.2f} MiB -> {last.run / mib:.2f} MiB")
    steady = after_warm_up(samples, warm_up)
    if len(steady) < 3:
        print(
            f"no slope and no week's extrapolation: {len(steady)} row(s) after the warm-up of {warm_up} visits, "
            "three are needed (the climb during the warm-up is no leak); run more visits than that"
        )
        return
    floor, floor_error = fitted_slope([(s.visits, s.low) for s in steady])
    run, run_error = fitted_slope([(s.visits, s.run) for s in steady])
    print(
        f"after the warm-up ({warm_up} visits): rows from visit {steady[0].visits} to {steady[-1].visits}; "
        f"lowest RSS between rows {steady[0].low / mib:.1f} -> {steady[-1].low / mib:.1f} MiB, slope "
        f"{floor / 1024:.2f} KiB/visit; /run slope {run / 1024:.2f} KiB/visit"
    )
    week = 84_000  # visits in a week at 500 visits/h

    def extrapolated(per_visit: float, error: float | None) -> str:
        return f"{per_visit * week / mib:+.0f} MiB (95 %: ± {(error or 0.0) * week / mib:.0f})"

    print(
        f"at these slopes, a week ({week} visits): RSS {extrapolated(floor, floor_error)}, "
        f"/run {extrapolated(run, run_error)}; an interval wider than the figure says the rows after the warm-up "
        f"are too few to tell (logs are capped at {2 * DEFAULT_LIMIT / mib:.0f} MiB each: /run's slope flattens "
        "once they all are)"
    )


def after_warm_up(samples: list[Sample], warm_up: int) -> list[Sample]:
    """The rows taken after the first ``warm_up`` visits: the only ones a slope may be read from."""
    return [s for s in samples if s.visits >= warm_up]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--visits", type=int, default=2000)
    parser.add_argument("--every", type=int, default=100, help="sample every K visits")
    parser.add_argument(
        "--warm-up", type=int, default=WARM_UP, help="visits before the slopes are read (RSS still climbs)"
    )
    add_lab_arguments(parser)
    args = parser.parse_args()
    lab = fresh_lab(args)
    try:
        with tempfile.TemporaryDirectory(prefix="dnsstudy-resources-") as work:
            report(measure(args, Path(work)), args.warm_up)
    finally:
        lab.down()


if __name__ == "__main__":
    main()
