"""Record and replay (docs/replay.md): the replay web's cost per request against nginx, and replayed onLoad.

One run, two labs: the synthetic lab (nginx) and a second lab replaying an
archive recorded from it. First, visits to each recorded page in both labs,
interleaved, with the recorded server waits replayed (the default): the
median onLoad per page and their ratio, with a bootstrap 95 % interval and a
Mann-Whitney test. Then the replay lab again with waits off, and every
recorded object fetched in turn from each lab's client namespace over one
HTTP/2 connection per host (httpx): the median time per request and the
difference, the replay web's own overhead (its nginx front and, for what
that does not answer from files, the replay server).

    .venv/bin/python -m benchmarks.replay [--sites google.com,facebook.com] [--visits 10] [--rounds 10]
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.stats import mannwhitneyu

from benchmarks.benchlab import add_lab_arguments, fresh_lab
from benchmarks.browser_reuse import ratio_interval


def _client(urls: list[str], rounds: int, ca: str) -> None:
    """Inside a client namespace: fetch ``urls`` ``rounds`` times, print each request's milliseconds."""
    import ssl

    import httpx

    times: list[float] = []
    with httpx.Client(http2=True, verify=ssl.create_default_context(cafile=ca)) as client:
        for url in urls:  # connections up and warm before timing
            client.get(url)
        for _ in range(rounds):
            for url in urls:
                start = time.perf_counter()
                client.get(url).read()
                times.append((time.perf_counter() - start) * 1000)
    print(json.dumps(times))


def _fetch_times(lab, urls: list[str], rounds: int) -> list[float]:
    from harness import netns
    from harness.paths import PROJECT_ROOT

    argv = [sys.executable, "-m", "benchmarks.replay", "--client", lab.ca_path.as_posix(), str(rounds), *urls]
    done = subprocess.run(
        netns.command(lab.namespaces["client"], argv),
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=PROJECT_ROOT,
        env={"PYTHONPATH": str(PROJECT_ROOT), "PATH": "/usr/bin:/bin"},
    )
    if done.returncode != 0:
        raise SystemExit(f"client in {lab.name} failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def _onloads(original, replayed, sites: list[str], visits: int) -> dict[str, tuple[list[float], list[float]]]:
    from harness.visit import Visitor

    out: dict[str, tuple[list[float], list[float]]] = {s: ([], []) for s in sites}
    with tempfile.TemporaryDirectory() as results:
        pair = [Visitor(original, Path(results) / "a"), Visitor(replayed, Path(results) / "b")]
        for _ in range(visits):
            for site in sites:
                for visitor, times in zip(pair, out[site], strict=True):
                    result = visitor.visit_once(f"https://{site}/", "do53", "near")
                    if result.on_load_ms is not None:
                        times.append(result.on_load_ms)
    return out


def _print_onloads(onloads: dict[str, tuple[list[float], list[float]]]) -> None:
    """Per page: both medians, their ratio with a bootstrap 95 % interval, and a Mann-Whitney test."""
    rng = np.random.default_rng(1)
    print(f"{'page':<16}{'original':>10}{'replayed':>10}{'ratio':>8}{'95 % interval':>17}{'p':>7}{'visits':>8}")
    for site, (a, b) in onloads.items():
        ma, mb = statistics.median(a), statistics.median(b)
        low, high = ratio_interval(b, a, rng)
        p = mannwhitneyu(a, b).pvalue
        print(
            f"{site:<16}{ma:>10.0f}{mb:>10.0f}{mb / ma:>8.3f}   [{low:.3f}, {high:.3f}]{p:>7.3f}{len(a):>5}/{len(b)}",
            flush=True,
        )


def _replay_lab(args: argparse.Namespace, archive: Path, wait: bool):
    from harness.lab.config import load_lab_config
    from harness.lab.lab import Lab

    base = ipaddress.ip_network(args.subnet)
    subnet = str(ipaddress.ip_network(f"{base.network_address + 512}/23"))  # the /23 after the original's
    config = load_lab_config().with_overrides(f"{args.prefix}r", subnet, str(archive), replay_wait=wait)
    lab = Lab(config)
    lab.down()
    lab.up()
    return lab


def _objects(archive: Path) -> list[str]:
    from harness.replay.archive import Archive

    return [e.url for r in Archive(archive).load_all() for e in r.exchanges if e.method == "GET" and e.status == 200]


def main() -> None:
    if sys.argv[1:2] == ["--client"]:
        _client(sys.argv[4:], int(sys.argv[3]), sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", default="google.com,facebook.com")
    parser.add_argument("--visits", type=int, default=10, help="visits per page and lab")
    parser.add_argument("--rounds", type=int, default=10, help="fetches of every recorded object per lab")
    add_lab_arguments(parser)
    args = parser.parse_args()
    sites = args.sites.split(",")

    from harness.replay.recorder import record_sites

    original = fresh_lab(args)
    replayed = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            archive = Path(tmp) / "archive"
            for record in record_sites(original, sites, archive):
                waits = [e.wait_ms for e in record.exchanges]
                print(
                    f"recorded {record.site}: {len(record.exchanges)} requests, {record.body_bytes:,} bytes, "
                    f"recorded wait median {statistics.median(waits):.1f} ms, total {sum(waits):.0f} ms",
                    flush=True,
                )
            replayed = _replay_lab(args, archive, wait=True)
            print("\nonLoad, ms (median of visits; do53, near; recorded waits replayed)")
            _print_onloads(_onloads(original, replayed, sites, args.visits))
            replayed.down()
            replayed = _replay_lab(args, archive, wait=False)
            print("\nonLoad, ms (the same, recorded waits not replayed)")
            _print_onloads(_onloads(original, replayed, sites, args.visits))
            urls = _objects(archive)
            nginx, replay = [], []
            for _ in range(2):  # alternate the labs: machine noise falls on both
                nginx += _fetch_times(original, urls, args.rounds // 2)
                replay += _fetch_times(replayed, urls, args.rounds // 2)
            mn, mr = statistics.median(nginx), statistics.median(replay)
            print(f"\nper request, ms ({len(urls)} objects x {args.rounds} rounds, HTTP/2, no waits)")
            print(f"nginx median {mn:.3f}  p90 {statistics.quantiles(nginx, n=10)[-1]:.3f}")
            print(f"replay median {mr:.3f}  p90 {statistics.quantiles(replay, n=10)[-1]:.3f}")
            print(f"replay overhead at the median: {mr - mn:+.3f} ms (target <= 1 ms)")
    finally:
        if replayed is not None:
            replayed.down()
        original.down()


if __name__ == "__main__":
    main()
