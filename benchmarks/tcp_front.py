"""The ECH lab's TCP front (Go's TLS and HTTP/2, h3front/tcp.go) against nginx over HTTP/2: time per request.

With `[web] ech` the front takes TCP 443 of the web addresses from nginx (which cannot decrypt ECH), so the ECH
lab's HTTP/2 is another server. This brings up the HTTPS-records lab (nginx on TCP) and the ECH lab (the front on
TCP, nginx behind it), the same synthetic web on prefixes and /23s of their own, and fetches the objects of a few
pages over HTTP/2 from each lab's client namespace with `h3fetch -only h2` (one Go client, so the difference is
the servers'; no ECH from the client, so it is the front's cost, not ECH's), one pass per lab in turn for
``--rounds`` passes, the lab going first alternating. Prints both medians and 90th percentiles and the front's
added time per request at the median with a bootstrap 95 % interval. Run it on an idle host.

    python -m benchmarks.tcp_front [--sites google.com facebook.com] [--rounds 10]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess

import numpy as np

from benchmarks.h3_front import H3FETCH, fresh_lab, median_difference_interval, page_urls

PROFILES = {"nginx": "profiles/lab/https-records.toml", "front": "profiles/lab/ech.toml"}


def _lab(profile: str, prefix: str, subnet: str):
    from harness.lab.config import load_lab_config
    from harness.lab.lab import Lab

    return Lab(load_lab_config(profile).with_overrides(prefix=prefix, subnet=subnet))


def _pass(lab, urls: list[str]) -> list[float]:
    """One timed pass over ``urls`` over HTTP/2 (after one warm pass) in the lab's client namespace."""
    from harness import netns

    argv = [str(H3FETCH), "-ca", str(lab.ca_path), "-only", "h2", "-rounds", "1", *urls]
    done = subprocess.run(netns.command(lab.namespaces["client"], argv), capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"h3fetch failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)["h2"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sites", nargs="+", default=["google.com", "facebook.com"])
    parser.add_argument("--rounds", type=int, default=10, help="timed passes over the objects per lab")
    args = parser.parse_args()
    if not H3FETCH.exists():
        raise SystemExit(f"{H3FETCH} is missing: run 'bash scripts/setup.sh' (it builds h3fetch)")
    labs = {
        "nginx": _lab(PROFILES["nginx"], "dsbtn", "198.18.26.0/23"),
        "front": _lab(PROFILES["front"], "dsbtf", "198.18.28.0/23"),
    }
    times: dict[str, list[float]] = {"nginx": [], "front": []}
    with contextlib.ExitStack() as stack:
        for lab in labs.values():
            stack.enter_context(fresh_lab(lab))
        urls = {name: page_urls(lab, args.sites) for name, lab in labs.items()}
        print(f"{len(urls['nginx'])} objects of {', '.join(args.sites)}, {args.rounds} rounds")
        for round_ in range(args.rounds):
            for name in ("nginx", "front") if round_ % 2 == 0 else ("front", "nginx"):
                times[name] += _pass(labs[name], urls[name])
    for name, label in (("nginx", "HTTP/2 nginx"), ("front", "HTTP/2 Go front")):
        sample = times[name]
        p90 = statistics.quantiles(sample, n=10)[-1]
        print(f"{label:<16} median {statistics.median(sample):.3f} ms  p90 {p90:.3f} ms  ({len(sample)} requests)")
    low, high = median_difference_interval(times["front"], times["nginx"], np.random.default_rng(43))
    added = statistics.median(times["front"]) - statistics.median(times["nginx"])
    print(f"the TCP front's added time per request at the median: {added:+.3f} ms [{low:+.3f}, {high:+.3f}]")


if __name__ == "__main__":
    main()
