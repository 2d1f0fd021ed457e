"""Time `lab up` from cold and `lab down`, medians of N runs (default 5).

Cold means no lab of this prefix is running; the synthetic web's cache is
warm (it is built once per site list, page shape and seed). The first-time
web generation is timed separately, into a scratch cache directory.

    .venv/bin/python -m benchmarks.lab_updown [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from benchmarks.benchlab import add_lab_arguments


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    add_lab_arguments(parser)
    args = parser.parse_args()

    from harness.lab import webcache
    from harness.lab.config import load_lab_config
    from harness.lab.lab import Lab

    config = load_lab_config().with_overrides(prefix=args.prefix, subnet=args.subnet)

    with tempfile.TemporaryDirectory() as scratch:
        saved = webcache.CACHE_ROOT
        webcache.CACHE_ROOT = webcache.Path(scratch) / "web"
        start = time.perf_counter()
        webcache.ensure_web(config)
        generation = time.perf_counter() - start
        webcache.CACHE_ROOT = saved
    webcache.ensure_web(config)  # warm the real cache

    lab = Lab(config)
    lab.down()
    ups, downs = [], []
    for i in range(args.runs):
        start = time.perf_counter()
        lab.up()
        ups.append(time.perf_counter() - start)
        assert lab.status().healthy
        start = time.perf_counter()
        lab.down()
        downs.append(time.perf_counter() - start)
        print(f"run {i + 1}: up {ups[-1]:.2f} s, down {downs[-1]:.2f} s", flush=True)

    print(f"web generation, first time (2,000 sites): {generation:.2f} s")
    print(
        f"lab up (cold, web cached): median {statistics.median(ups):.2f} s "
        f"(min {min(ups):.2f}, max {max(ups):.2f}) over {args.runs} runs; target <= 10 s"
    )
    print(
        f"lab down: median {statistics.median(downs):.2f} s "
        f"(min {min(downs):.2f}, max {max(downs):.2f}) over {args.runs} runs; target <= 3 s"
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
