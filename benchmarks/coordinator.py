"""How many visits a second the coordinator completes, from synthetic records, through a real Redis.

Starts the tool's own Redis (an fsynced append-only file, as in production), a
study of N vantage points with the timer off, and at each vantage point a
synthetic worker: a Celery worker that answers every visit at once with a
record and a gzipped HAR of realistic size instead of loading a page. What
is measured is the coordinator's side alone: queue, collect, write the HAR
(fsynced), record the visit (a committed transaction). Prints visits per
second, median and over the whole run, with the store checked against the plan.

    .venv/bin/python -m benchmarks.coordinator --visits 2000 --vantage-points 4
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from rich.console import Console

from harness.distributed.app import VISIT_TASK, make_app, queue_of
from harness.distributed.broker import RedisService
from harness.distributed.coordinator import Coordinator
from harness.distributed.messages import har_payload, visit_of
from harness.store import Store
from harness.study import load_study

ROOT = Path(__file__).resolve().parent.parent

STUDY = """
name = "coordinator-bench"
description = "synthetic records for benchmarks/coordinator.py"
target = "lab"
seed = 1
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

[timer]
enabled = false
"""

HAR_BYTES = 40_000  # a lab page's gzipped HAR is 20-60 kB


def synthetic_har() -> bytes:
    """A gzipped HAR-shaped document of about HAR_BYTES (random ids: it does not compress away)."""
    entries = [{"request": {"url": f"https://x.test/{uuid.uuid4().hex}"}} for _ in range(HAR_BYTES // 40)]
    return gzip.compress(json.dumps({"log": {"entries": entries}}).encode())


def serve(vantage_point: str, broker_url: str) -> None:
    """A synthetic worker: every visit answered at once, as a real worker's result looks."""
    app = make_app(broker_url)
    har = har_payload(synthetic_har())

    @app.task(name=VISIT_TASK)
    def visit(message: dict) -> dict:
        planned = visit_of(message)
        visit_id = uuid.uuid4().hex
        record = {
            "visit_id": visit_id,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "error_class": "Successful",
            "detail": "",
            "paper_2019": "Successful",
            "counted": True,
            "on_load_ms": 1000.0,
            "wall_s": 0.01,
            "har_path": f"/nonexistent/{visit_id}.har.gz",
            "vantage_point": planned.vantage_point,
        }
        return {
            "ordinal": planned.ordinal,
            "record": record,
            "attempts": 0,
            "checks": [],
            "har": {"name": f"{visit_id}.har.gz", "data": har},
            "environment": None,
        }

    app.Worker(queues=[queue_of(vantage_point)], pool="solo", loglevel="ERROR", quiet=True).start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--visits", type=int, default=2000)
    parser.add_argument("--vantage-points", type=int, default=4)
    parser.add_argument("--window", type=int, default=8, help="visits queued ahead per vantage point")
    parser.add_argument("--port", type=int, default=16999)
    parser.add_argument("--serve", nargs=2, metavar=("VANTAGE", "BROKER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(*args.serve)
        return
    broker = RedisService(name="bench-coordinator", port=args.port)
    broker.down()
    subprocess.run(["rm", "-rf", str(broker.directory)], check=True)
    url = broker.up()
    places = [f"p{i}" for i in range(args.vantage_points)]
    per_place = -(-args.visits // (2 * len(places)))  # sites, 2 configurations each
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "benchmarks.coordinator", "--serve", p, url],
            cwd=ROOT,
            env=env,
            stderr=subprocess.DEVNULL,
        )
        for p in places
    ]
    try:
        with tempfile.TemporaryDirectory(prefix="dnsstudy-coordinator-") as work:
            study = Path(work) / "study.toml"
            study.write_text(STUDY.format(places=", ".join(f'"{p}"' for p in places), last=per_place))
            store = Path(work) / "results" / "store.sqlite"
            coordinator = Coordinator(
                load_study(str(study)), Store(store), url, store.parent, console=Console(quiet=True), window=args.window
            )
            time.sleep(3)  # the workers connect
            started = time.monotonic()
            summary = coordinator.run()
            seconds = time.monotonic() - started
            db = sqlite3.connect(store)
            done, total, distinct = db.execute(
                "SELECT SUM(status = 'done'), COUNT(*), COUNT(DISTINCT visit_id) FROM visits"
            ).fetchone()
            ends = [r[0] for r in db.execute("SELECT record FROM visits ORDER BY ordinal")]
            hars = len(list((store.parent / "hars").glob("*.har.gz")))
            per_second = _per_second_medians(store)
            db.close()
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait()
        broker.down()
    print(f"{len(places)} vantage points, window {args.window}, HAR {HAR_BYTES / 1000:.0f} kB gzipped")
    print(f"recorded {summary.visits} visits in {seconds:.1f} s: {summary.visits / seconds:.1f} visits/s overall")
    print(f"median visits/s over whole seconds: {per_second:.1f}")
    print(f"store: {done}/{total} done, {distinct} distinct visit ids, {hars} HAR files; {len(ends)} records")


def _per_second_medians(store: Path) -> float:
    """Median of visits recorded per wall-clock second (the first and last partial seconds left out)."""
    db = sqlite3.connect(store)
    # The completion time is not stored; the HARs' modification times are when each was written.
    times = sorted(p.stat().st_mtime for p in (store.parent / "hars").glob("*.har.gz"))
    db.close()
    if len(times) < 3:
        return float("nan")
    counts: dict[int, int] = {}
    for t in times:
        counts[int(t)] = counts.get(int(t), 0) + 1
    inner = [counts[s] for s in sorted(counts)[1:-1]]
    return statistics.median(inner) if inner else float("nan")


if __name__ == "__main__":
    main()
