"""Resources over a long crawl: the crawl process's RSS and the lab's /run use, at start, every K visits, at end.

Runs a wired lab crawl of N visits (near and far, Do53, DoT and DoH, timer off) in its own lab, samples
`VmRSS` of the crawl process and the bytes under /run/dnsstudy/<prefix> (what `du` counts), and prints
the first and last samples and the least-squares slope per visit, so a week's growth can be extrapolated.

    .venv/bin/python benchmarks/resources.py --visits 2000 --every 100
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlab import add_lab_arguments, fresh_lab  # benchmarks run as scripts: their directory is on the path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.logs import used_bytes  # noqa: E402

CONFIGURATIONS = 6  # near and far, each over do53, dot and doh

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


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def done_visits(store: Path) -> int:
    """Visits done in the store (0 before its schema exists)."""
    if not store.exists():
        return 0
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT COUNT(*) FROM visits WHERE status = 'done'").fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()


def run_bytes(run: Path) -> int:
    """Bytes under the lab's run directory, without the visit in flight (its profile goes when it ends)."""
    return used_bytes(run) - used_bytes(run / "visits")


def slope(points: list[tuple[int, int]]) -> float:
    """Least-squares slope of (visits, bytes): bytes per visit."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0


def measure(args: argparse.Namespace, work: Path) -> list[tuple[int, int, int]]:
    """Run the crawl, sampling (visits done, RSS, /run bytes) after the first visit and every K visits."""
    study, store = write_study(work, args.visits), work / "store.sqlite"
    argv = [sys.executable, "-m", "harness.cli", "crawl", str(study), "--store", str(store)]
    argv += ["--prefix", args.prefix, "--subnet", args.subnet]
    run = Path("/run/dnsstudy") / args.prefix
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DNSSTUDY_PROGRESS_INTERVAL": "0"}
    samples: list[tuple[int, int, int]] = []
    with open(work / "crawl.log", "w") as log:
        crawl = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        next_at = 1
        while crawl.poll() is None:
            done = done_visits(store)
            if done >= next_at:
                samples.append((done, rss_bytes(crawl.pid), run_bytes(run)))
                _, rss, used = samples[-1]
                print(f"{done:6d} visits  rss {rss / 2**20:7.1f} MiB  /run {used / 2**20:7.2f} MiB", flush=True)
                next_at = (done // args.every + 1) * args.every
            time.sleep(1)
    samples.append((done_visits(store), 0, run_bytes(run)))  # the crawl has exited: RSS no longer counts
    if crawl.returncode != 0:
        tail = (work / "crawl.log").read_text().splitlines()[-5:]
        print(f"crawl exited {crawl.returncode}:", *tail, sep="\n  ")
    return samples


def report(samples: list[tuple[int, int, int]]) -> None:
    """Start, end and slope per visit for RSS and /run."""
    live = [s for s in samples if s[1]]
    if not live:
        print("no sample while the crawl ran")
        return
    first, last = live[0], live[-1]
    steady = live[1:] if len(live) > 2 else live  # the first visit loads Firefox's driver and modules: warm-up
    rss = slope([(v, r) for v, r, _ in steady])
    run = slope([(v, u) for v, _, u in samples])
    print(f"visits {first[0]} -> {last[0]} (RSS slope from visit {steady[0][0]}, after the warm-up)")
    print(f"crawl RSS: {first[1] / 2**20:.1f} MiB -> {last[1] / 2**20:.1f} MiB, slope {rss / 1024:.2f} KiB/visit")
    end = samples[-1][2]
    print(f"/run use:  {first[2] / 2**20:.2f} MiB -> {end / 2**20:.2f} MiB, slope {run / 1024:.2f} KiB/visit")
    week = 84_000  # visits in a week at 500 visits/h
    print(f"unbounded, a week ({week} visits): /run +{run * week / 2**20:.0f} MiB, RSS +{rss * week / 2**20:.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--visits", type=int, default=2000)
    parser.add_argument("--every", type=int, default=100, help="sample every K visits")
    add_lab_arguments(parser)
    args = parser.parse_args()
    lab = fresh_lab(args)
    try:
        with tempfile.TemporaryDirectory(prefix="dnsstudy-resources-") as work:
            report(measure(args, Path(work)))
    finally:
        lab.down()


if __name__ == "__main__":
    main()
