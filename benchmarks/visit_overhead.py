"""Harness overhead per visit: wall time minus onLoad, medians over N lab visits per arm and browser.

No shaping; the resolver is the lab's `near`; every visit has a fresh
profile, a fresh browser and (DoT) a fresh stub, as in a crawl. Arms are
interleaved so that machine noise spreads evenly. Prints the median
overhead per arm and its split into profile preparation, browser start,
navigation beyond onLoad, HAR assembly (collect + build + write) and
shutdown, and the arm's own set-up and proof work. Firefox and Chromium run in the same
run, interleaved visit by visit, so their figures can be set side by side.

    .venv/bin/python -m benchmarks.visit_overhead [--visits 30] [--url https://google.com/] [--protocols do53,doq]
        [--browsers firefox,chromium]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.benchlab import add_lab_arguments, fresh_lab


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visits", type=int, default=30, help="visits per arm")
    parser.add_argument("--url", default="https://google.com/")
    parser.add_argument(
        "--protocols", default="do53,dot,doh,doq,doh3", help="comma-separated arms to compare (do53 first)"
    )
    parser.add_argument("--browsers", default="firefox,chromium", help="comma-separated browsers, same run")
    add_lab_arguments(parser)
    args = parser.parse_args()

    from harness.visit import Visitor

    lab = fresh_lab(args)
    keys = [(b, p) for b in args.browsers.split(",") for p in args.protocols.split(",")]
    rows: dict[tuple[str, str], list[dict]] = {k: [] for k in keys}
    failures: dict[tuple[str, str], int] = {k: 0 for k in rows}
    try:
        with tempfile.TemporaryDirectory() as results:
            visitors = {b: Visitor(lab, Path(results), browser=b) for b in args.browsers.split(",")}
            for i in range(args.visits):
                for browser, protocol in rows:
                    visitor = visitors[browser]
                    arm = visitor.arm(protocol, "near")
                    start = time.perf_counter()
                    try:
                        arm.start()
                        arm_ready = time.perf_counter() - start
                        result = visitor.visit(args.url, arm)
                    finally:
                        arm.stop()
                    wall = time.perf_counter() - start
                    if result.error_class != "Successful":
                        failures[(browser, protocol)] += 1
                        continue
                    p = result.phases
                    assert result.on_load_ms is not None and result.bidi_on_load_ms is not None  # Successful
                    top = sum(v for k, v in p.items() if "." not in k)  # "browser_start.driver" is part of another
                    inner = result.wall_s - top  # counters and proof, around the browser
                    rows[(browser, protocol)].append(
                        {
                            "overhead": wall - result.on_load_ms / 1000,
                            "onload": result.on_load_ms / 1000,
                            "profile": p["profile"],
                            "browser start": p["browser_start"],
                            "  driver": p["browser_start.driver"],
                            "  new session": p["browser_start.session"],
                            "  BiDi + set-up": p["browser_start"]
                            - p["browser_start.driver"]
                            - p["browser_start.session"],
                            "navigation - onLoad": p["navigation"] - result.on_load_ms / 1000,
                            "HAR assembly": p["collect"] + p["har"],
                            "shutdown": p["shutdown"],
                            "arm + proof": arm_ready + inner + (wall - arm_ready - result.wall_s),
                            "bidi - onLoad": (result.bidi_on_load_ms - result.on_load_ms) / 1000,
                            "agrees": bool(result.on_load_agrees),
                        }
                    )
                print(f"round {i + 1}/{args.visits} done", flush=True)
    finally:
        lab.down()

    columns = [
        "onload",
        "overhead",
        "profile",
        "browser start",
        "  driver",
        "  new session",
        "  BiDi + set-up",
        "navigation - onLoad",
        "HAR assembly",
        "shutdown",
        "arm + proof",
    ]
    print(f"\nmedians over {args.visits} visits per arm (seconds); target: overhead <= 1.5 s")
    print(f"{'browser':9}{'arm':6}{'n':>4}" + "".join(f"{c:>21}" for c in columns))
    for (browser, protocol), data in rows.items():
        meds = [statistics.median(r[c] for r in data) if data else float("nan") for c in columns]
        print(f"{browser:9}{protocol:6}{len(data):4}" + "".join(f"{m:21.3f}" for m in meds))
    for (browser, protocol), data in rows.items():
        if data:
            deltas = [abs(r["bidi - onLoad"]) * 1000 for r in data]
            print(
                f"{browser} {protocol}: BiDi load vs Navigation Timing onLoad: median |difference| "
                f"{statistics.median(deltas):.1f} ms, max {max(deltas):.1f} ms, "
                f"{sum(r['agrees'] for r in data)}/{len(data)} within tolerance"
            )
    if any(failures.values()):
        print(f"unsuccessful visits (excluded): {failures}")


if __name__ == "__main__":
    main()
