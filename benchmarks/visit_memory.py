"""Does a visit leave memory behind? Python's own allocations and the RSS after each of a run of visits.

Visits, in one process as a crawl makes them, a small page, then the lab's largest page (salesforce.com:
1,052 requests; the next is 944), then the small page again. After each visit it prints the
process's RSS and the bytes Python's objects hold (tracemalloc), and the highest those reached during the
visit. A leak raises the held bytes visit after visit; a large page raises the peak and, through allocator
fragmentation, the RSS, but the held bytes come back to where they were. tracemalloc's own bookkeeping
raises the RSS too: read RSS from benchmarks/resources.py, not from here.

    .venv/bin/python -m benchmarks.visit_memory [--small 3] [--large 3] [--url-large https://salesforce.com/]
"""

from __future__ import annotations

import argparse
import tempfile
import tracemalloc
from pathlib import Path

from benchmarks.benchlab import add_lab_arguments, fresh_lab

MIB = 1024 * 1024


def rss_mib() -> float:
    """This process's resident set, MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=3, help="visits of the small page before and after")
    parser.add_argument("--large", type=int, default=3, help="visits of the large page")
    parser.add_argument("--url-small", default="https://google.com/")
    parser.add_argument("--url-large", default="https://salesforce.com/")
    add_lab_arguments(parser)
    args = parser.parse_args()

    from harness.visit import Visitor

    urls = [args.url_small] * args.small + [args.url_large] * args.large + [args.url_small] * args.small
    lab = fresh_lab(args)
    tracemalloc.start()
    held: list[float] = []
    try:
        with tempfile.TemporaryDirectory() as results:
            visitor = Visitor(lab, Path(results))
            print(f"{'visit':>5}  {'url':28}{'class':14}{'held MiB':>9}{'peak MiB':>9}{'RSS MiB':>9}")
            for i, url in enumerate(urls, 1):
                tracemalloc.reset_peak()
                result = visitor.visit_once(url, "do53", "near")
                current, peak = tracemalloc.get_traced_memory()
                held.append(current / MIB)
                print(f"{i:5}  {url:28}{result.error_class:14}{current / MIB:9.1f}{peak / MIB:9.1f}{rss_mib():9.1f}")
    finally:
        tracemalloc.stop()
        lab.down()
    first, last = held[args.small - 1], held[-1]
    print(f"held by Python objects after the first small visits {first:.1f} MiB, after the last {last:.1f} MiB")


if __name__ == "__main__":
    main()
