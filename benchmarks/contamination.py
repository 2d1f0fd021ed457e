"""What several workers on one host do to each other's page loads: the same visits with 1 and with N workers.

Brings up N labs, the tool's broker and a worker per lab, then crawls one
study twice through the coordinator: first with one vantage point (one
worker busy, the others idle), then with N vantage points at once (every
worker busy). Each vantage point visits the same sites with the same
configurations in the same order. The onLoad times of the alone run are
compared with each of the crowded runs', visit by visit (same site and
configuration): the median of the paired differences with a bootstrap
interval, the Wilcoxon signed-rank p-value, and the Mann-Whitney p-value of
the two distributions. Prints visits per hour for both, and records the safe
number of workers for this host (`harness/distributed/capacity.py`): N when
the crowded onLoad cannot be told from the alone one (p >= alpha and the
interval within the analysis profile's indistinguishable band), else 1.

    .venv/bin/python -m benchmarks.contamination --workers 2 --sites 20
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

import numpy as np
from rich.console import Console
from scipy import stats

from analysis.settings import load_settings
from analysis.stats import median_interval
from harness.distributed.broker import RedisService
from harness.distributed.capacity import CAPACITY_FILE, record_capacity
from harness.distributed.coordinator import Coordinator
from harness.lab.config import load_lab_config
from harness.lab.lab import Lab
from harness.store import Store
from harness.study import load_study

ROOT = Path(__file__).resolve().parent.parent

STUDY = """
name = "{name}"
description = "contamination between workers (benchmarks/contamination.py)"
target = "lab"
seed = 11
rounds = 1
networks = ["wired"]
resolvers = ["near"]
protocols = ["do53", "doh"]
vantage_points = [{places}]

[sites]
list = "tranco/paper-2019.csv"

[[sites.select]]
group = "top"
ranks = [1, {last}]
every = {every}

[link_check]
probes = 200
seconds = 1.0

[timer]
enabled = false
"""


def crawl(name: str, places: list[str], args: argparse.Namespace, work: Path, url: str) -> tuple[Path, float]:
    """Coordinate one study over ``places``; the store and the seconds it took."""
    study = work / f"{name}.toml"
    every = max(1, 1000 // args.sites)
    study.write_text(STUDY.format(name=name, places=", ".join(f'"{p}"' for p in places), last=1000, every=every))
    store = work / name / "store.sqlite"
    started = time.monotonic()
    summary = Coordinator(load_study(str(study)), Store(store), url, store.parent, console=Console(quiet=True)).run()
    if not summary.finished:
        raise SystemExit(f"{name}: the crawl did not finish: {summary.halted or 'stopped'}")
    return store, time.monotonic() - started


def onloads(store: Path) -> dict[str, dict[tuple[str, str], float]]:
    """Per vantage point: (site, protocol) -> onLoad ms of Successful visits."""
    db = sqlite3.connect(store)
    found: dict[str, dict[tuple[str, str], float]] = {}
    for place, site, protocol, ms in db.execute(
        "SELECT vantage_point, site, protocol, on_load_ms FROM visits WHERE error_class = 'Successful'"
    ):
        found.setdefault(place, {})[(site, protocol)] = ms
    db.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sites", type=int, default=20, help="sites per vantage point (2 configurations each)")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--prefix", default="dscont")
    parser.add_argument("--pool", default="198.18.20.0", help="first /23 of the labs (one /23 each)")
    parser.add_argument("--port", type=int, default=16998)
    args = parser.parse_args()
    base = [int(x) for x in args.pool.split(".")]
    labs = [
        Lab(
            load_lab_config().with_overrides(
                prefix=f"{args.prefix[:6]}{i}", subnet=f"{base[0]}.{base[1]}.{base[2] + 2 * i}.0/23"
            )
        )
        for i in range(args.workers)
    ]
    broker = RedisService(name="bench-contamination", port=args.port)
    broker.down()
    subprocess.run(["rm", "-rf", str(broker.directory)], check=True)
    url = broker.up()
    places = [f"cont{i}" for i in range(args.workers)]
    workers: list[subprocess.Popen] = []
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DNSSTUDY_BROKER": url}
    try:
        for lab in labs:
            lab.down()
            lab.up()
        with tempfile.TemporaryDirectory(prefix="dnsstudy-contamination-") as tmp:
            work = Path(tmp)
            for place, lab in zip(places, labs, strict=True):
                argv = [sys.executable, "-m", "harness.cli", "worker", "--vantage", place]
                argv += ["--prefix", lab.config.prefix, "--subnet", lab.config.settings.subnet]
                log = open(work / f"{place}.log", "w")
                workers.append(subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
            time.sleep(5)
            alone_store, alone_s = crawl("alone", places[:1], args, work, url)
            crowd_store, crowd_s = crawl("crowded", places, args, work, url)
            report(args, onloads(alone_store)[places[0]], onloads(crowd_store), alone_s, crowd_s)
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait()
        for lab in labs:
            lab.down()
        broker.down()


def report(args: argparse.Namespace, alone: dict, crowded: dict[str, dict], alone_s: float, crowd_s: float) -> None:
    """Compare each crowded vantage point with the alone run, print, and record the safe number."""
    settings = load_settings()
    band = settings.grid.indistinguishable_ms
    n_alone = len(alone)
    print(f"{args.workers} workers, {args.sites} sites x Do53 and DoH on the wired lab link")
    print(f"alone:   {n_alone} visits in {alone_s:.0f} s, {3600 * n_alone / alone_s:.0f} visits/h on the host")
    total = sum(len(v) for v in crowded.values())
    print(f"crowded: {total} visits in {crowd_s:.0f} s, {3600 * total / crowd_s:.0f} visits/h on the host")
    indistinguishable = True
    evidence: dict = {"workers": args.workers, "visits_per_worker": n_alone, "comparisons": []}
    for place, times in sorted(crowded.items()):
        keys = sorted(set(alone) & set(times))
        a = np.array([alone[k] for k in keys])
        c = np.array([times[k] for k in keys])
        d = c - a
        low, high = median_interval(d, settings.statistics.confidence)
        wilcoxon = stats.wilcoxon(d).pvalue if np.any(d) else 1.0
        mann_whitney = stats.mannwhitneyu(c, a).pvalue
        same = wilcoxon >= args.alpha and -band <= low and high <= band
        indistinguishable &= bool(same)
        print(
            f"{place}: onLoad median alone {np.median(a):.0f} ms, crowded {np.median(c):.0f} ms "
            f"(ratio {np.median(c) / np.median(a):.2f}); paired difference median {np.median(d):+.0f} ms "
            f"[{low:+.0f}, {high:+.0f}], Wilcoxon p={wilcoxon:.3g}, Mann-Whitney p={mann_whitney:.3g}, "
            f"{len(keys)} pairs -> {'indistinguishable' if same else 'contaminated'}"
        )
        evidence["comparisons"].append(
            {
                "vantage_point": place,
                "pairs": len(keys),
                "median_alone_ms": float(np.median(a)),
                "median_crowded_ms": float(np.median(c)),
                "median_difference_ms": float(np.median(d)),
                "interval_ms": [float(low), float(high)],
                "wilcoxon_p": float(wilcoxon),
                "mann_whitney_p": float(mann_whitney),
            }
        )
    safe = args.workers if indistinguishable else 1
    record_capacity(safe, evidence)
    print(f"safe number of workers on this host: {safe} (kept in {CAPACITY_FILE}; a worker warns above it)")


if __name__ == "__main__":
    main()
