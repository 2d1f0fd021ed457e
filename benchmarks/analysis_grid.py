"""The pairwise grid at scale: 10 configurations from a store of 1,000,000 visits.

Target: at most 20 s and 2 GB. Builds a synthetic store (2,500
sites x 4 networks x 10 configurations x 10 rounds, 90 % successful, load
times log-normal with a per-configuration shift, and each site keeping its
own difference under each configuration, sd 100 ms, as real sites do), then
times reading it, the statistics of every cell of every network's grid
(intervals from 1,000 resamples of the sites, the sign test, Hodges-Lehmann,
Holm over each grid) and drawing the grids (PNG), in workers, one per core,
as the report does (analysis/drawing.py), then every prior study's claims
read against the same store (analysis/claims.py; target: at most 10 s beside
the grid). Prints the time of each step, the total and the peak resident
memory.

    .venv/bin/python -m benchmarks.analysis_grid [--sites 2500] [--rounds 10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from analysis import figures
from analysis.claim_files import load_sources
from analysis.claims import check_claims
from analysis.drawing import Drawings
from analysis.pairs import configurations, grid
from analysis.results import load
from analysis.settings import load_settings
from harness.store import Store

NETWORKS = ["wired", "4g", "4g-lossy", "3g"]
CONFIGS = [(r, p) for r in ("cloudflare", "google", "quad9") for p in ("do53", "dot", "doh")] + [("default", "do53")]


def build(path: Path, sites: int, rounds: int) -> int:
    """Write done visits straight through the schema (the crawl's bookkeeping is benchmarked elsewhere)."""
    store = Store(path)
    store.add_study("bench", "bench", 1, {"study": {}})
    rng = np.random.default_rng(1)
    shift = {c: 40.0 * i for i, c in enumerate(CONFIGS)}
    own = {c: rng.normal(0, 100, sites) for c in CONFIGS}  # each site's own difference, kept over rounds
    n = 0
    with store.transaction():
        for round_ in range(rounds):
            for b, network in enumerate(NETWORKS):
                base = rng.lognormal(7.5, 0.6, sites)
                rows = []
                for c in CONFIGS:
                    ok = rng.random(sites) < 0.9
                    load_ms = base + shift[c] + own[c] + rng.normal(0, 50, sites)
                    for s in range(sites):
                        rows.append(
                            (
                                n,
                                "bench",
                                round_,
                                round_ * 4 + b,
                                network,
                                s + 1,
                                f"site{s}.test",
                                "top",
                                c[0],
                                c[1],
                                "done",
                                0,
                                "Successful" if ok[s] else "Page-load Timeout",
                                "Successful" if ok[s] else "Page-load Timeout",
                                1,
                                float(load_ms[s]) if ok[s] else None,
                            )
                        )
                        n += 1
                store.db.executemany(
                    "INSERT INTO visits (ordinal, study_id, round, block, network, rank, site, site_group, resolver, "
                    "protocol, status, attempts, error_class, paper_2019, counted, on_load_ms) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    rows,
                )
    store.close()
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, default=2500)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs (the median is printed)")
    args = parser.parse_args()
    settings = load_settings()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.sqlite"
        t = time.perf_counter()
        n = build(path, args.sites, args.rounds)
        print(f"store: {n:,} visits written in {time.perf_counter() - t:.1f} s ({path.stat().st_size / 1e6:.0f} MB)")
        totals: list[float] = []
        steps: dict[str, list[float]] = {"read": [], "statistics": [], "figures": [], "claims": []}
        sources = load_sources()
        claims_cpu: list[float] = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            results = load(path)
            visits = results.visits
            t1 = time.perf_counter()
            order = configurations(visits)
            grids = {net: grid(visits, net, settings, order) for net in NETWORKS}
            t2 = time.perf_counter()
            with Drawings() as drawings:  # as the report draws them: in workers, one per core
                drawn = [
                    (net, drawings.submit(figures.grid_figure, cells, order, net, settings, pdf=False))
                    for net, cells in grids.items()
                ]
                for net, drawing in drawn:
                    (Path(tmp) / f"grid-{net}.png").write_bytes(drawing.result().png)
            t3, cpu = time.perf_counter(), time.process_time()
            verdicts = check_claims(results, settings, sources).verdicts  # beside the grid: the same store read
            t4 = time.perf_counter()
            steps["claims"].append(t4 - t3)
            claims_cpu.append(time.process_time() - cpu)  # on a shared machine the wall time waits for a core
            steps["read"].append(t1 - t0)
            steps["statistics"].append(t2 - t1)
            steps["figures"].append(t3 - t2)
            totals.append(t3 - t0)
        n_cells = sum(len(c) for c in grids.values())
        print(
            f"{len(order)} configurations, {len(NETWORKS)} networks, {n_cells} cells "
            f"(median pairs per cell {statistics.median(c.statistics.pairs for g in grids.values() for c in g):,.0f})"
        )
        for name, values in steps.items():
            print(f"  {name}: median {statistics.median(values):.2f} s (runs: {', '.join(f'{v:.2f}' for v in values)})")
        counts = {v.verdict: sum(w.verdict == v.verdict for w in verdicts) for v in verdicts}
        print(
            f"claims: {len(verdicts)} of {len(sources)} sources, {counts}; "
            f"median {statistics.median(steps['claims']):.2f} s, CPU {statistics.median(claims_cpu):.2f} s "
            "(target <= 10 s beside the grid)"
        )
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
        print(
            f"total: median {statistics.median(totals):.2f} s over {args.repeat} runs (target <= 20 s); "
            f"peak RSS {peak:.2f} GB (target <= 2 GB)"
        )


if __name__ == "__main__":
    main()
