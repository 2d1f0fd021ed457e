"""The lab web's HTTP/3 front against its HTTP/2 nginx: time per request, and `lab up` with and without it.

Brings up a lab of the HTTP/3 profile (profiles/lab/http3.toml, on the benchmark's own prefix and /23) and
fetches the objects of a few synthetic pages from its client namespace with `h3fetch` (h3front/fetch/, one Go
client for both protocols, so the difference is the servers'): each URL once over each protocol to warm the
connections, then ``--rounds`` passes, one request at a time, the protocol alternating pass by pass. HTTP/2 is
nginx itself; HTTP/3 is the h3front in front of the same nginx. Prints both medians and 90th percentiles, and
the HTTP/3 front's added time per request at the median with a bootstrap 95 % interval (target: at most 1 ms).
With ``--ups N`` it then times ``lab up`` from cold N times for each profile, interleaved (target: HTTP/3 at
most 2 s slower). Run it on an idle host: the figures are milliseconds.

With ``--replay [ARCHIVE_DIR]`` it times the replay's HTTP/3 front instead, another path: a lab of the same profile
replays the archive (docs/replay.md, "HTTP/3"), HTTP/2 is the replay's nginx itself, and HTTP/3 is the h3front
before it, which passes each request over TLS to that nginx on the address it came to (h3front/upstream_tls.go).
The replay runs WITHOUT its recorded waits (``replay_wait`` off), so the figure is the servers' own cost, not the
original servers' think time. The URLs are every distinct recorded GET over https that the original answered
2xx or 3xx, at an address that offers HTTP/3 (redirects are timed, not followed); exchanges that failed in the
original, other statuses, other methods, http:// and repeats are left out and counted. Without ARCHIVE_DIR it
first records ``--sites`` from a lab of the profile into a temporary archive (harness/replay/recorder.py), as
benchmarks/replay_h3.py does, on the same prefix and subnet, brought down before the replay comes up.

    python -m benchmarks.h3_front [--sites google.com facebook.com] [--rounds 10] [--ups 3]
    python -m benchmarks.h3_front --replay [ARCHIVE_DIR] [--sites google.com facebook.com] [--rounds 10]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from harness.paths import PROJECT_ROOT
from harness.replay.archive import Exchange

H3FETCH = PROJECT_ROOT / "build" / "bin" / "h3fetch"


def _lab(args: argparse.Namespace, http3: bool, archive: Path | None = None):
    """A lab of the HTTP/3 profile (or the default one), on the benchmark's prefix and /23; with ``archive``,
    replaying it without its recorded waits."""
    from harness.lab.config import load_lab_config
    from harness.lab.lab import Lab

    profile = "profiles/lab/http3.toml" if http3 else "profiles/lab/default.toml"
    web, wait = (str(archive), False) if archive else (None, None)
    return Lab(load_lab_config(profile).with_overrides(args.prefix, args.subnet, web, replay_wait=wait))


@contextmanager
def fresh_lab(lab) -> Iterator[None]:
    """``lab`` up from cold (whatever a crash left brought down first), and down again at the end."""
    lab.down()
    try:
        lab.up(wait=60)
        yield
    finally:
        lab.down()


def page_urls(lab, sites: list[str]) -> list[str]:
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


def _print_requests(times: dict[str, list[float]], names: tuple[str, str] = ("nginx", "h3front")) -> None:
    """Both protocols' medians and 90th percentiles (``names``: their servers), and HTTP/3's added time."""
    h2, h3 = times["h2"], times["h3"]
    width = max(16, *(len(n) + 7 for n in names))
    for name, sample in ((f"HTTP/2 {names[0]}", h2), (f"HTTP/3 {names[1]}", h3)):
        p90 = statistics.quantiles(sample, n=10)[-1]
        print(f"{name:<{width}} median {statistics.median(sample):.3f} ms  p90 {p90:.3f} ms  ({len(sample)} requests)")
    low, high = median_difference_interval(h3, h2, np.random.default_rng(43))
    added = statistics.median(h3) - statistics.median(h2)
    print(f"HTTP/3 added time per request at the median: {added:+.3f} ms [{low:+.3f}, {high:+.3f}] (target <= 1 ms)")


def replay_urls(exchanges: Iterable[Exchange], offers_h3: Callable[[str], bool]) -> tuple[list[str], Counter[str]]:
    """The URLs to time in a replay, in recorded order: each distinct GET over https whose recorded answer was
    2xx or 3xx, at a host where ``offers_h3`` (the replay's HTTP/3 front listens at its address); and how many
    exchanges were left out, by reason."""
    urls: list[str] = []
    seen: set[str] = set()
    left: Counter[str] = Counter()
    for e in exchanges:
        if e.failure or e.status == 0:
            left["failed in the original"] += 1
        elif not 200 <= e.status < 400:
            left[f"answered {e.status // 100}xx"] += 1
        elif e.method.upper() != "GET":
            left[e.method.upper()] += 1
        elif e.scheme != "https":
            left["http://"] += 1
        elif not offers_h3(e.host):
            left["no HTTP/3 at its address"] += 1
        elif e.url in seen:
            left["repeated"] += 1
        else:
            urls.append(e.url)
            seen.add(e.url)
    return urls, left


def _record(args: argparse.Namespace, archive: Path) -> Path:
    """``args.sites`` recorded from a lab of the HTTP/3 profile into ``archive`` (its answers announce HTTP/3)."""
    from harness.replay.recorder import record_sites

    lab = _lab(args, http3=True)
    with fresh_lab(lab):
        for record in record_sites(lab, args.sites, archive):
            print(f"recorded {record.site}: {len(record.exchanges)} requests", flush=True)
    return archive


def _replay(args: argparse.Namespace) -> None:
    """The replay's HTTP/2 nginx against its HTTP/3 front, on ``args.replay`` (else a fresh recording)."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(args.replay) if args.replay else _record(args, Path(tmp) / "archive")
        lab = _lab(args, http3=True, archive=archive)
        with fresh_lab(lab):
            web = lab.replay_web()
            h3_at = set(web.h3_served(True))
            urls, left = replay_urls((e for r in web.loaded for e in r.exchanges), lambda h: web.address_of(h) in h3_at)
            if not urls:
                raise SystemExit(f"{archive}: no recorded URL to time over HTTP/3 (left out: {dict(left)})")
            print(f"{len(urls)} recorded URLs of {', '.join(web.sites)} (replay without recorded waits), ", end="")
            print(f"{args.rounds} rounds; left out: {', '.join(f'{k} {n}' for k, n in left.items()) or 'none'}")
            _print_requests(_fetch(lab, urls, args.rounds), ("replay nginx", "h3front->TLS"))


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
    parser.add_argument(
        "--replay",
        nargs="?",
        const="",
        metavar="ARCHIVE_DIR",
        help="time the replay's HTTP/3 front on this archive (none given: record --sites first)",
    )
    args = parser.parse_args()
    if not H3FETCH.exists():
        raise SystemExit(f"{H3FETCH} is missing: run 'bash scripts/setup.sh' (it builds h3fetch)")
    if args.replay is not None:
        _replay(args)
    else:
        lab = _lab(args, http3=True)
        with fresh_lab(lab):
            urls = page_urls(lab, args.sites)
            print(f"{len(urls)} objects of {', '.join(args.sites)}, {args.rounds} rounds")
            _print_requests(_fetch(lab, urls, args.rounds))
    if args.ups:
        _ups(args)


if __name__ == "__main__":
    main()
