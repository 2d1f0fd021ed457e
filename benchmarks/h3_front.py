"""The lab web's HTTP/3 front against its HTTP/2 nginx: time per request, and `lab up` with and without it.

Brings up a lab of the HTTP/3 profile (profiles/lab/http3.toml, on the benchmark's own prefix and /23) and
fetches the objects of a few synthetic pages from its client namespace with `h3fetch` (h3front/fetch/, one Go
client for both protocols, so the difference is the servers'): each URL once over each protocol to warm the
connections, then ``--rounds`` passes, one request at a time, the protocol alternating pass by pass. HTTP/2 is
nginx itself; HTTP/3 is the h3front in front of the same nginx. Prints both medians and 90th percentiles, and
the HTTP/3 front's added time per request at the median with a bootstrap 95 % interval (target: at most 1 ms).
With ``--ups N`` it then times ``lab up`` from cold N times for each profile, interleaved (target: HTTP/3 at
most 2 s slower). Run it on an idle host: the figures are milliseconds.

    python -m benchmarks.h3_front [--sites google.com facebook.com] [--rounds 10] [--ups 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time

import numpy as np

from harness.paths import PROJECT_ROOT

H3FETCH = PROJECT_ROOT / "build" / "bin" / "h3fetch"


def _lab(args: argparse.Namespace, http3: bool):
    """A lab of the HTTP/3 profile (or the default one), on the benchmark's prefix and /23."""
    from harness.lab.config import load_lab_config
    from harness.lab.lab import Lab

    profile = "profiles/lab/http3.toml" if http3 else "profiles/lab/default.toml"
    return Lab(load_lab_config(profile).with_overrides(prefix=args.prefix, subnet=args.subnet))


def _urls(lab, sites: list[str]) -> list[str]:
    """Every object of the sites' synthetic pages, the pages first."""
    pages = {p.site: p for p in lab.web().pages}
    missing = [s for s in sites if s not in pages]
    if missing:
        raise SystemExit(f"not in the lab's web: {', '.join(missing)}")
    return [u for s in sites for u in [pages[s].url, *(o.url for o in pages[s].objects)]]


def _fetch(lab, urls: list[str], rounds: int) -> dict[str, list[float]]:
    """h3fetch in the lab's client namespace: each request's milliseconds per protocol."""
    from harness import netns

    argv = [str(H3FETCH), "-ca", str(lab.ca_path), "-rounds", str(rounds), *urls]
    done = subprocess.run(netns.command(lab.namespaces["client"], argv), capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"h3fetch failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def median_difference_interval(
    a: list[float], b: list[float], rng: np.random.Generator, n: int = 2000
) -> tuple[float, float]:
    """A bootstrap 95 % interval of median(a) - median(b), resampling each sample on its own."""
    x, y = np.asarray(a), np.asarray(b)
    diffs = [np.median(rng.choice(x, x.size)) - np.median(rng.choice(y, y.size)) for _ in range(n)]
    low, high = np.percentile(diffs, [2.5, 97.5])
    return float(low), float(high)


def _print_requests(times: dict[str, list[float]]) -> None:
    h2, h3 = times["h2"], times["h3"]
    for name, sample in (("HTTP/2 nginx", h2), ("HTTP/3 h3front", h3)):
        p90 = statistics.quantiles(sample, n=10)[-1]
        print(f"{name:<16} median {statistics.median(sample):.3f} ms  p90 {p90:.3f} ms  ({len(sample)} requests)")
    low, high = median_difference_interval(h3, h2, np.random.default_rng(43))
    added = statistics.median(h3) - statistics.median(h2)
    print(f"HTTP/3 added time per request at the median: {added:+.3f} ms [{low:+.3f}, {high:+.3f}] (target <= 1 ms)")


def _ups(args: argparse.Namespace) -> None:
    """`lab up` from cold, default and HTTP/3 profiles interleaved, ``args.ups`` times each."""
    took: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.ups):
        for http3 in (False, True):
            lab = _lab(args, http3)
            lab.down()
            start = time.monotonic()
            lab.up(wait=60)
            took[http3].append(time.monotonic() - start)
            lab.down()
    plain, h3 = statistics.median(took[False]), statistics.median(took[True])
    print(f"lab up: default {plain:.2f} s, HTTP/3 {h3:.2f} s (medians of {args.ups})", end="")
    print(f": {h3 - plain:+.2f} s (target <= 2 s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prefix", default="dsbh3", help="lab prefix (apart from the tests' and the profile's)")
    parser.add_argument("--subnet", default="198.18.20.0/23")
    parser.add_argument("--sites", nargs="+", default=["google.com", "facebook.com"])
    parser.add_argument("--rounds", type=int, default=10, help="timed passes over the objects per protocol")
    parser.add_argument("--ups", type=int, default=0, help="time `lab up` this many times per profile")
    args = parser.parse_args()
    if not H3FETCH.exists():
        raise SystemExit(f"{H3FETCH} is missing: run 'bash scripts/setup.sh' (it builds h3fetch)")
    lab = _lab(args, http3=True)
    lab.down()
    try:
        lab.up(wait=60)
        urls = _urls(lab, args.sites)
        print(f"{len(urls)} objects of {', '.join(args.sites)}, {args.rounds} rounds")
        _print_requests(_fetch(lab, urls, args.rounds))
    finally:
        lab.down()
    if args.ups:
        _ups(args)


if __name__ == "__main__":
    main()
