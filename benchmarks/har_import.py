"""HAR import and a lab on imported pages (docs/replay.md): the time to import one large HAR, and `lab up` on an
archive of many.

(1) A synthetic HAR of ``--entries`` entries over ``--hosts`` hostnames (a page, scripts, stylesheets,
base64 images; Chrome's dialect: joined Set-Cookie, pseudo-headers) is imported into a fresh archive
``--runs`` times: the median, min and max seconds of `HarImport.add` (read, normalise, write). Target: at
most 1 s for 300 entries over 80 hosts. (2) ``--pages`` such HARs (each its own hosts, a few shared CDN
hosts) are imported into one archive, and a lab serving it is brought up ``--lab-runs`` times from cold:
the median, min and max seconds of `Lab.up` (plan, zone, certificates, nginx files and map, daemons, until
every address listens). Target: at most 30 s for 100 pages.

    .venv/bin/python -m benchmarks.har_import [--entries 300] [--hosts 80] [--runs 7] [--pages 100]
        [--lab-runs 3] [--body-kb 2] --prefix P --subnet S
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.benchlab import add_lab_arguments

KINDS = [("text/javascript", "js"), ("text/css", "css"), ("image/png", "png"), ("image/gif", "gif")]


def synthetic_har(page: int, entries: int, hosts: int, body_kb: float, seed: int = 42) -> dict:
    """One page's HAR: its document, then ``entries - 1`` objects spread over ``hosts`` hostnames."""
    rng = random.Random(f"{seed}/{page}")
    names = [f"www.page{page}.test"] + [f"h{i}.page{page}.test" for i in range(hosts - 4)]
    names += [f"cdn{i}.shared.test" for i in range(3)]  # shared by every page of the archive
    html = "<html><head></head><body>" + "x" * int(body_kb * 1024 * 4) + "</body></html>"
    out = [_entry(f"https://{names[0]}/", "text/html", {"text": html}, rng)]
    for i in range(entries - 1):
        kind, ext = KINDS[i % len(KINDS)]
        host = names[i % len(names)]
        size = max(16, int(rng.expovariate(1 / (body_kb * 1024))))
        raw = rng.randbytes(size)
        content = {"text": base64.b64encode(raw).decode(), "encoding": "base64"}
        if kind.startswith("text/"):
            content = {"text": "/*" + "y" * size + "*/"}
        out.append(_entry(f"https://{host}/o{i}.{ext}?v={rng.randrange(10**6)}", kind, content, rng))
    return {"log": {"version": "1.2", "creator": {"name": "WebInspector", "version": "537.36"}, "entries": out}}


def _entry(url: str, kind: str, content: dict, rng: random.Random) -> dict:
    size = len(base64.b64decode(content["text"])) if content.get("encoding") else len(content["text"].encode())
    headers = [
        {"name": ":status", "value": "200"},
        {"name": "content-type", "value": kind},
        {"name": "set-cookie", "value": "a=1; Path=/\nb=2; Path=/"},
        {"name": "cache-control", "value": "max-age=3600"},
    ]
    return {
        "request": {"method": "GET", "url": url, "httpVersion": "h2", "headers": [{"name": "accept", "value": "*/*"}]},
        "response": {"status": 200, "httpVersion": "h2", "headers": headers, "content": {"size": size, **content}},
        "timings": {"wait": round(rng.uniform(1, 40), 2)},
    }


def _summary(label: str, times: list[float], target: float) -> str:
    median = statistics.median(times)
    verdict = "met" if median <= target else "NOT met"
    return (
        f"{label}: median {median:.3f} s (min {min(times):.3f}, max {max(times):.3f}, n={len(times)}), "
        f"target {target:g} s: {verdict}"
    )


def time_import(args: argparse.Namespace, scratch: Path) -> None:
    from harness.replay.har_import import HarImport

    har = scratch / "big.har"
    har.write_text(json.dumps(synthetic_har(0, args.entries, args.hosts, args.body_kb)))
    print(f"HAR: {args.entries} entries, {args.hosts} hosts, {har.stat().st_size / 1e6:.1f} MB", flush=True)
    times = []
    for run in range(args.runs):
        start = time.perf_counter()
        HarImport(scratch / f"one-{run}").add(har)
        times.append(time.perf_counter() - start)
    print(_summary(f"import of one {args.entries}-entry HAR", times, 1.0), flush=True)


def time_lab_up(args: argparse.Namespace, scratch: Path) -> None:
    from harness.lab.config import load_lab_config
    from harness.lab.lab import Lab
    from harness.replay.har_import import HarImport

    archive = scratch / "many"
    importer = HarImport(archive)
    start = time.perf_counter()
    for page in range(args.pages):
        har = scratch / f"p{page}.har"
        har.write_text(json.dumps(synthetic_har(page, args.entries, args.hosts, args.body_kb)))
        importer.add(har)
        har.unlink()
        print(f"\rimported {page + 1}/{args.pages} pages", end="", flush=True)
    print(f"\nimport of {args.pages} pages: {time.perf_counter() - start:.1f} s", flush=True)
    config = load_lab_config().with_overrides(prefix=args.prefix, subnet=args.subnet, web_archive=str(archive))
    lab = Lab(config)
    times = []
    try:
        for run in range(args.lab_runs):
            lab.down()
            start = time.perf_counter()
            lab.up()
            times.append(time.perf_counter() - start)
            print(f"lab up {run + 1}/{args.lab_runs}: {times[-1]:.1f} s", flush=True)
    finally:
        lab.down()
    print(_summary(f"lab up on {args.pages} imported pages", times, 30.0), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=300)
    parser.add_argument("--hosts", type=int, default=80)
    parser.add_argument("--runs", type=int, default=7, help="imports of the one HAR")
    parser.add_argument("--pages", type=int, default=100, help="pages in the lab's archive (0: no lab)")
    parser.add_argument("--lab-runs", type=int, default=3)
    parser.add_argument("--body-kb", type=float, default=2.0, help="mean size of an object's body, KB")
    add_lab_arguments(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="har-bench-") as scratch:
        time_import(args, Path(scratch))
        if args.pages:
            time_lab_up(args, Path(scratch))


if __name__ == "__main__":
    main()
