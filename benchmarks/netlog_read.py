"""A reused Chromium's net log read per visit: the visit's part of a log that grows with every visit of its life.

`load_netlog(path, since)` reads the log's constants and the part from ``since`` only. Prints the median time to
read the last visit's part of a synthetic log (constants of 300 kB, 1.75 MB of events a visit, as a lab visit of
the synthetic google.com writes) after 1, 50 and 200 visits: it should not grow with the log.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from harness.browser.chromium_netlog import load_netlog

VISIT_BYTES = 1_750_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    head = json.dumps({"constants": {"logEventTypes": {"X": 1}, "pad": "x" * 300_000}})[:-1] + ',\n"events": [\n'
    line = json.dumps({"type": 1, "source": {"id": 2}, "params": {"url": "https://example.test/" + "a" * 150}})
    visit = (line + ",\n") * (VISIT_BYTES // (len(line) + 2))
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "netlog.json"
        for visits in (1, 50, 200):
            log.write_text(head + visit * visits)
            since = log.stat().st_size - len(visit)
            times = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                data = load_netlog(log, since)
                times.append(time.perf_counter() - t)
                assert data is not None and len(data["events"]) == visit.count("\n")
            size, ms = log.stat().st_size / 1e6, statistics.median(times) * 1000
            print(f"after {visits:3} visits ({size:4.0f} MB): the visit's part read in {ms:.0f} ms")


if __name__ == "__main__":
    main()
