"""Replayed onLoad over HTTP/3 against the same replayed page over HTTP/2 (issue 43, item 1; docs/replay.md).

Records ``--sites`` from a lab of the HTTP/3 profile (profiles/lab/http3.toml: its answers announce HTTP/3),
replays the archive in a second lab of that profile (the replay's HTTP/3 front before its nginx, announced
where the recording was), and visits each page there with Firefox told to use HTTP/3 and with Firefox as a study
runs it (HTTP/2 only), alternating the two visit by visit, the order swapped every round. Prints per page both
medians, their ratio (HTTP/3 / HTTP/2) with a bootstrap 95 % interval and a Mann-Whitney test, and the share of
the HTTP/3 visits' requests that went over HTTP/3. Run it on an idle host.

    .venv/bin/python -m benchmarks.replay_h3 [--sites google.com,facebook.com] [--visits 10]
"""

from __future__ import annotations

import argparse
import gzip
import ipaddress
import json
import statistics
import tempfile
from pathlib import Path

import numpy as np
from scipy.stats import mannwhitneyu

from benchmarks.browser_reuse import ratio_interval

PROFILE = "profiles/lab/http3.toml"


def _lab(prefix: str, subnet: str, archive: Path | None = None):
    from harness.lab.config import load_lab_config
    from harness.lab.lab import Lab

    web = str(archive) if archive else None
    lab = Lab(load_lab_config(PROFILE).with_overrides(prefix=prefix, subnet=subnet, web_archive=web))
    lab.down()
    lab.up(wait=60)
    return lab


def _h3_share(har_path: str | None) -> float:
    if not har_path:
        return float("nan")
    entries = json.loads(gzip.open(har_path).read())["log"]["entries"]
    return sum(e["response"]["httpVersion"] == "HTTP/3" for e in entries) / max(1, len(entries))


def _visits(lab, sites: list[str], visits: int, results: Path) -> dict[str, dict[str, list[float]]]:
    """onLoad per site and mode (h3, h2) and the h3 visits' shares of requests over HTTP/3, interleaved."""
    from harness.visit import Visitor

    visitors = {
        "h3": Visitor(lab, results / "h3", page_http3=True),
        "h2": Visitor(lab, results / "h2"),
    }
    out: dict[str, dict[str, list[float]]] = {s: {"h3": [], "h2": [], "share": []} for s in sites}
    for round_ in range(visits):
        for site in sites:
            for mode in ("h3", "h2") if round_ % 2 == 0 else ("h2", "h3"):
                result = visitors[mode].visit_once(f"https://{site}/", "do53", "near")
                if result.error_class != "Successful" or result.on_load_ms is None:
                    print(f"  {site} {mode}: {result.error_class}", flush=True)
                    continue
                out[site][mode].append(result.on_load_ms)
                if mode == "h3":
                    out[site]["share"].append(_h3_share(result.har_path))
    return out


def _report(rows: dict[str, dict[str, list[float]]]) -> None:
    rng = np.random.default_rng(1)
    print(f"{'page':<16}{'HTTP/2':>8}{'HTTP/3':>8}{'ratio':>8}{'95 % interval':>18}{'p':>7}{'n':>7}{'h3 share':>10}")
    for site, row in rows.items():
        h2, h3 = row["h2"], row["h3"]
        low, high = ratio_interval(h3, h2, rng)
        ratio = statistics.median(h3) / statistics.median(h2)
        share = statistics.median(row["share"])
        print(
            f"{site:<16}{statistics.median(h2):>8.0f}{statistics.median(h3):>8.0f}{ratio:>8.3f}"
            f"   [{low:.3f}, {high:.3f}]{mannwhitneyu(h3, h2).pvalue:>7.3f}{len(h3):>4}/{len(h2)}{share:>10.2f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", default="google.com,facebook.com")
    parser.add_argument("--visits", type=int, default=10, help="visits per page and mode")
    parser.add_argument("--prefix", default="dsbrh3")
    parser.add_argument("--subnet", default="198.18.24.0/23", help="the recording lab's; the replay takes the next")
    args = parser.parse_args()
    sites = args.sites.split(",")

    from harness.replay.recorder import record_sites

    replay_subnet = str(ipaddress.ip_network(f"{ipaddress.ip_network(args.subnet).network_address + 512}/23"))
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "archive"
        original = _lab(args.prefix, args.subnet)
        try:
            for record in record_sites(original, sites, archive):
                print(f"recorded {record.site}: {len(record.exchanges)} requests", flush=True)
        finally:
            original.down()
        replayed = _lab(f"{args.prefix}r", replay_subnet, archive)
        try:
            print(f"\nreplayed onLoad, ms (median of visits; do53, near; Firefox; {args.visits} rounds, interleaved)")
            _report(_visits(replayed, sites, args.visits, Path(tmp)))
        finally:
            replayed.down()


if __name__ == "__main__":
    main()
