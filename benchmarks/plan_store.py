"""Planning and bookkeeping cost: a 100,000-visit plan written to a store, and per-visit store work.

Targets: the plan in at most 10 s; planning and bookkeeping at most 10 ms per visit.

    .venv/bin/python -m benchmarks.plan_store [--bookkeeping 2000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bookkeeping", type=int, default=2000, help="visits to complete for the per-visit figure")
    args = parser.parse_args()

    from harness.plan import Site, make_plan
    from harness.store import Store

    # The reference design has 2,000 sites x 4 networks x 10 configurations (3 resolvers x 3 protocols, and the
    # host's resolver over Do53) = 80,000 visits per round; 2,500 sites make the 100,000-visit target plan.
    sites = [Site(f"site{i}.test", i + 1, "top" if i < 1250 else "tail") for i in range(2500)]
    networks = ["wired", "4g", "4g-lossy", "3g"]
    configurations = [(r, p) for r in ("a", "b", "c") for p in ("do53", "dot", "doh")] + [("default", "do53")]
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "crawl.sqlite")
        store.add_study("bench", "bench", 1, {})
        start = time.perf_counter()
        n = store.add_plan("bench", make_plan(sites, 1, networks, configurations, seed=1))
        plan_s = time.perf_counter() - start
        print(f"plan: {n} visits generated and written in {plan_s:.2f} s ({plan_s / n * 1e6:.1f} µs per visit)")
        har = Path(tmp) / "x.har.gz"
        har.write_bytes(b"x")
        per_visit = []
        for i in range(args.bookkeeping):
            t = time.perf_counter()
            visit = store.next_planned("bench")
            assert visit is not None  # the plan holds more visits than the loop records
            store.complete(
                "bench",
                visit,
                {
                    "visit_id": f"v{i}",
                    "started_at": "t",
                    "error_class": "Successful",
                    "detail": "",
                    "paper_2019": "Successful",
                    "counted": True,
                    "on_load_ms": 1.0,
                    "har_path": str(har),
                },
            )
            per_visit.append((time.perf_counter() - t) * 1000)
        print(
            "bookkeeping (next visit + atomic record, synchronous=FULL): "
            f"median {statistics.median(per_visit):.3f} ms, "
            f"p99 {sorted(per_visit)[int(0.99 * len(per_visit))]:.3f} ms over {len(per_visit)} visits"
        )


if __name__ == "__main__":
    main()
