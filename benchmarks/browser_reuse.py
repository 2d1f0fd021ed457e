"""Fresh against reused browsers, and cold against warm resolver connections: the same lab visits, per arm.

Blocks alternate between the modes (a block: every arm, `--per-block` times,
arms shuffled), as a crawl's network blocks do; a reused browser serves one
block, as in a crawl. Per network and arm it prints the onLoad medians of
fresh-cold and reused-cold browsers, their ratio with a bootstrap 95 %
interval and a Mann-Whitney U test (reuse must change nothing measured);
with reused-warm, the measured onLoad drop against the expected one (the
handshake round trips of the arm's transport times the link's added RTT);
the median harness overhead per visit (wall minus onLoad) and visits per
hour per mode, and a reused browser's later visits' overhead (no start among
them), over the arms and per arm; and the reused browser's memory (PSS) over the visits of
one session under the restart policy (`--memory-visits`); with `--carryover`, whether what makes a
reused browser faster is state of the site that outlived the clearing or the browser's first page; and,
with `--instrumentation-compare`, what recording the requests costs onLoad: each browser (`--browsers`) with its
requests recorded as the harness records them (Firefox: the harness's recorder; Chromium: its net log, or
BiDi's network events with `--chromium-source bidi`) against no request recorded at all (`network_events =
"none"`: BiDi's navigation events and the page's Navigation Timing only), every mode a browser can run both ways,
interleaved by block, per arm and over the arms.
Modes besides the default: fresh browsers that settle
1, 3 or 10 s after their start (`browser_settle_s`), and reused browsers without the warm-up page
("reused-unwarmed"); every mode is set against reused-cold (warm-started), and each reused browser's first
measured visit against its later ones, per arm (`--one-arm-blocks` gives every first visit later ones of its arm).

    .venv/bin/python -m benchmarks.browser_reuse [--visits 40] [--networks wired,4g] [--memory-visits 1000]
    .venv/bin/python -m benchmarks.browser_reuse --visits 0 --memory-visits 1000   # the memory run alone
    .venv/bin/python -m benchmarks.browser_reuse --visits 0 --carryover 20 [--browsers firefox,chromium]
    .venv/bin/python -m benchmarks.browser_reuse --visits 0 --carryover 12 --carryover-compare   # observer kept too
    .venv/bin/python -m benchmarks.browser_reuse --visits 20 --networks wired --instrumentation-compare \
        --browsers firefox,chromium --modes fresh-cold
    .venv/bin/python -m benchmarks.browser_reuse --visits 6 --per-block 3 --networks wired --one-arm-blocks \
        --modes reused-cold,reused-unwarmed   # a reused browser's first visit against its later ones, per arm
    .venv/bin/python -m benchmarks.browser_reuse --visits 8 --networks wired --protocols do53,doh \
        --modes fresh-cold,fresh-settled-1,fresh-settled-3,fresh-settled-10,reused-cold   # settling against reuse
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.stats import mannwhitneyu

from benchmarks.benchlab import add_lab_arguments, fresh_lab

#: (browser session, resolver connection, a fresh browser's settling in s) of each mode. A reused browser loads
#: the warm-up page at its start (harness/browser/warmup.py); "reused-unwarmed" does not, to measure that.
MODES = {
    "fresh-cold": ("fresh", "cold", 0.0),
    "fresh-settled-1": ("fresh", "cold", 1.0),
    "fresh-settled-3": ("fresh", "cold", 3.0),
    "fresh-settled-10": ("fresh", "cold", 10.0),
    "reused-cold": ("reused", "cold", 0.0),
    "reused-unwarmed": ("reused", "cold", 0.0),
    "reused-warm": ("reused", "warm", 0.0),
}
#: What `--modes` runs unless told: the reference design, reused browsers (warm-started) cold and warm.
DEFAULT_MODES = "fresh-cold,reused-cold,reused-warm"
#: Round trips a new resolver connection costs before its first answer: TCP + TLS 1.3 (DoT, DoH); QUIC's one.
HANDSHAKE_RTTS = {"do53": 0, "dot": 2, "doh": 2, "doq": 1, "doh3": 1}


def ratio_interval(a: list[float], b: list[float], rng: np.random.Generator, n: int = 2000) -> tuple[float, float]:
    """A bootstrap 95 % interval of median(a) / median(b), resampling each sample on its own."""
    x, y = np.asarray(a), np.asarray(b)
    ratios = [np.median(rng.choice(x, x.size)) / np.median(rng.choice(y, y.size)) for _ in range(n)]
    low, high = np.percentile(ratios, [2.5, 97.5])
    return float(low), float(high)


def run_block(visitor, protocols: list[str], per_block: int, url: str, rows: dict, mode: str, net: str) -> None:
    """One block of one mode: every arm ``per_block`` times, shuffled; the reused browser closed at its end."""
    from harness.browser.firefox_reused import ReusedFirefoxSession

    order = [p for p in protocols for _ in range(per_block)]
    random.shuffle(order)
    ReusedFirefoxSession.warm_start = not mode.startswith("reused-unwarmed")  # read when the block's browser starts
    try:
        for protocol in order:
            t = time.perf_counter()
            result = visitor.visit_once(url, protocol, "near")
            wall = time.perf_counter() - t
            rows.setdefault((net, mode, protocol), []).append(
                {
                    "ok": result.error_class == "Successful",
                    "onload": result.on_load_ms,
                    "wall": wall,
                    "handshakes": result.resolver_handshakes,
                    "open": result.first_query_open,
                    "ordinal": result.session_ordinal,
                    "detail": result.detail,
                }
            )
    finally:
        visitor.close()
        ReusedFirefoxSession.warm_start = True


def report(rows: dict, networks: list[str], protocols: list[str], link_rtt: dict[str, float], modes: list[str]) -> None:
    rng = np.random.default_rng(1)
    print("\nonLoad (ms), Firefox fresh-cold against reused-cold: medians, ratio reused/fresh [95 % CI], p")
    for net in networks:
        for protocol in protocols:
            fresh = [r["onload"] for r in rows.get((net, "fresh-cold", protocol), []) if r["ok"]]
            cold = [r["onload"] for r in rows.get((net, "reused-cold", protocol), []) if r["ok"]]
            if len(fresh) < 3 or len(cold) < 3:
                continue
            low, high = ratio_interval(cold, fresh, rng)
            p = mannwhitneyu(cold, fresh).pvalue
            f, c = statistics.median(fresh), statistics.median(cold)
            print(
                f"{net:6} {protocol:5} n={len(fresh):3}/{len(cold):3}  fresh {f:7.0f}  reused {c:7.0f}  "
                f"ratio {c / f:.3f} [{low:.3f}, {high:.3f}]  p={p:.3f}"
            )
    first_pages(rows, networks, protocols, rng)
    print("\nFirefox reused-warm against reused-cold: onLoad median drop (ms), expected = handshake RTTs x added RTT")
    for net in networks:
        for protocol in protocols:
            cold = [r["onload"] for r in rows.get((net, "reused-cold", protocol), []) if r["ok"]]
            warm = [r["onload"] for r in rows.get((net, "reused-warm", protocol), []) if r["ok"]]
            if len(cold) < 3 or len(warm) < 3:
                continue
            expected = HANDSHAKE_RTTS[protocol] * link_rtt[net]
            drop = statistics.median(cold) - statistics.median(warm)
            hs = [r["handshakes"] for r in rows[(net, "reused-warm", protocol)] if r["handshakes"] is not None]
            opened = sum(bool(r["open"]) for r in rows[(net, "reused-warm", protocol)])
            print(
                f"{net:6} {protocol:5} cold {statistics.median(cold):7.0f}  warm {statistics.median(warm):7.0f}  "
                f"drop {drop:6.0f}  expected {expected:5.0f}  p={mannwhitneyu(cold, warm).pvalue:.3f}  "
                f"warm: first query on an open connection {opened}/{len(rows[(net, 'reused-warm', protocol)])}"
                + (f", handshakes median {statistics.median(hs):g}" if hs else "")
            )


def report_overhead(rows: dict, networks: list[str], protocols: list[str], names: list[str]) -> None:
    """Per cell (browser, mode, request source): median harness time per visit, visits per hour, failures."""
    print("\nper cell: median overhead per visit (wall - onLoad, s), visits per hour (from the median wall), failures")
    for net in networks:
        for name in names:
            data = [r for p in protocols for r in rows.get((net, name, p), [])]
            ok = [r for r in data if r["ok"]]
            if not ok:
                continue
            overhead = statistics.median(r["wall"] - r["onload"] / 1000 for r in ok)
            wall = statistics.median(r["wall"] for r in data)
            failed = [r["detail"] for r in data if not r["ok"]]
            print(
                f"{net:6} {name:24} n={len(data):4}  overhead {overhead:.3f}  {3600 / wall:6.0f} visits/h  "
                f"failures {len(failed)}" + (f" ({failed[0][:80]})" if failed else "")
            )
            if later := _later_overheads(rows, net, name, protocols):
                print(f"{'':6} {'':24} later visits (no start): {later}")


def _later_overheads(rows: dict, net: str, name: str, protocols: list[str]) -> str:
    """A reused cell's median harness time of the visits after its browsers' first (no start among them), over
    the arms and per arm; "" for fresh browsers."""
    later = {
        p: [r["wall"] - r["onload"] / 1000 for r in rows.get((net, name, p), []) if r["ok"] and (r["ordinal"] or 0) > 1]
        for p in protocols
    }
    pooled = [x for xs in later.values() for x in xs]
    if not pooled:
        return ""
    arms = ", ".join(f"{p} {statistics.median(xs):.3f}" for p, xs in later.items() if xs)
    return f"n={len(pooled)} overhead {statistics.median(pooled):.3f} ({arms})"


def first_pages(rows: dict, networks: list[str], protocols: list[str], rng: np.random.Generator) -> None:
    """A reused browser's first visit and its later ones, each against fresh browsers: every visit's onLoad as a
    share of the fresh median of its arm, pooled over the arms. If the first is like a fresh browser's and only
    the later ones are faster, what reuse changes is the browser's first page, not state a visit left."""
    print("\nreused-cold by its place in the browser's life: onLoad / fresh-cold median of the arm [95 % CI]")
    for net in networks:
        shares: dict[str, list[float]] = {"first visit": [], "later visits": []}
        for protocol in protocols:
            fresh = [r["onload"] for r in rows.get((net, "fresh-cold", protocol), []) if r["ok"]]
            if len(fresh) < 3:
                continue
            for r in rows.get((net, "reused-cold", protocol), []):
                if r["ok"] and r["ordinal"] is not None:
                    key = "first visit" if r["ordinal"] == 1 else "later visits"
                    shares[key].append(r["onload"] / statistics.median(fresh))
        for key, values in shares.items():
            if len(values) >= 3:
                boot = [np.median(rng.choice(values, len(values))) for _ in range(2000)]
                low, high = np.percentile(boot, [2.5, 97.5])
                print(f"{net:6} {key:13} n={len(values):4}  {statistics.median(values):.3f} [{low:.3f}, {high:.3f}]")


def comparison(a: list[float], b: list[float], rng: np.random.Generator) -> str | None:
    """ "n=A/B  median(a) / median(b)  ratio [95 % CI]  p" (Mann-Whitney), or None with fewer than 3 of either."""
    if len(a) < 3 or len(b) < 3:
        return None
    low, high = ratio_interval(a, b, rng)
    ma, mb = statistics.median(a), statistics.median(b)
    p = mannwhitneyu(a, b).pvalue
    return f"n={len(a):3}/{len(b):3}  {ma:8.4g} / {mb:8.4g}  ratio {ma / mb:.3f} [{low:.3f}, {high:.3f}]  p={p:.3g}"


def report_lives(rows: dict, networks: list[str], protocols: list[str], modes: list[str], base: str) -> None:
    """onLoad of every browser life against a reused, warm-started browser's (cold resolver connection), per arm:
    medians, ratio with a bootstrap 95 % interval, Mann-Whitney p (fresh settled 0, 1, 3, 10 s: which comes
    closest to a running browser's page)."""
    rng = np.random.default_rng(4)
    print(f"\nonLoad (ms) of each browser life / {base} (warm-started): medians, ratio [95 % CI], p")
    for net in networks:
        for protocol in protocols:
            against = [r["onload"] for r in rows.get((net, base, protocol), []) if r["ok"]]
            for mode in (m for m in modes if m != base):
                other = [r["onload"] for r in rows.get((net, mode, protocol), []) if r["ok"]]
                if line := comparison(other, against, rng):
                    print(f"{net:6} {protocol:5} {mode:17} {line}")


def report_first_visits(rows: dict, networks: list[str], protocols: list[str], modes: list[str]) -> None:
    """A reused browser's first measured visit against its later ones, per arm and reused mode: medians, ratio
    first/later with a bootstrap 95 % interval, Mann-Whitney p (with the warm-up, the interval should hold 1)."""
    rng = np.random.default_rng(5)
    print("\nreused browsers: first measured visit against later ones, onLoad (ms), ratio first/later [95 % CI], p")
    for net in networks:
        for mode in (m for m in modes if m.startswith("reused")):
            for protocol in [*protocols, "all"]:
                data = [r for p in protocols for r in rows.get((net, mode, p), []) if protocol in ("all", p)]
                first = [r["onload"] for r in data if r["ok"] and r["ordinal"] == 1]
                later = [r["onload"] for r in data if r["ok"] and (r["ordinal"] or 0) > 1]
                if protocol == "all":  # pooled: each visit as a share of its arm's later median
                    first, later = _shares(data, protocols, rows, net, mode)
                if line := comparison(first, later, rng):
                    print(f"{net:6} {mode:24} {protocol:5} first / later {line}")


def _shares(data: list[dict], protocols: list[str], rows: dict, net: str, mode: str) -> tuple[list, list]:
    """First and later visits' onLoad, each divided by the later visits' median of its own arm."""
    first, later = [], []
    for protocol in protocols:
        mine = [r for r in rows.get((net, mode, protocol), []) if r["ok"]]
        rest = [r["onload"] for r in mine if (r["ordinal"] or 0) > 1]
        if not rest:
            continue
        median = statistics.median(rest)
        first += [r["onload"] / median for r in mine if r["ordinal"] == 1]
        later += [r["onload"] / median for r in mine if (r["ordinal"] or 0) > 1]
    return first, later


def label(browser: str, mode: str, source: str, default: str) -> str:
    """The rows' name of a cell: the mode alone for Firefox as the harness runs it (what `report` reads)."""
    name = mode if browser == "firefox" else f"{mode}@{browser}"
    return name if source == default else f"{name}+{source}"


def report_instrumentation(rows: dict, networks: list[str], protocols: list[str], cells: list[tuple]) -> None:
    """onLoad with each browser's requests recorded as the harness does against none recorded, per mode and arm,
    and over the arms ("all": each visit as a share of its arm's median with none recorded)."""
    rng = np.random.default_rng(3)
    print("\nonLoad (ms), requests recorded against none: medians, ratio recorded/none [95 % CI], Mann-Whitney p")
    for net in networks:
        for browser, mode, default in sorted({(b, m, d) for b, m, _, d in cells}):
            pooled: tuple[list[float], list[float]] = ([], [])
            for protocol in protocols:
                none = _onloads(rows, (net, label(browser, mode, "none", default), protocol))
                rec = _onloads(rows, (net, label(browser, mode, default, default), protocol))
                if line := comparison(rec, none, rng):
                    print(f"{net:6} {browser:8} {mode:12} {protocol:5} {default} / none {line}")
                if none:
                    median = statistics.median(none)
                    pooled[0].extend(v / median for v in rec)
                    pooled[1].extend(v / median for v in none)
            if len(protocols) > 1 and (line := comparison(*pooled, rng)):
                print(f"{net:6} {browser:8} {mode:12} {'all':5} {default} / none {line}")


def _onloads(rows: dict, cell: tuple[str, str, str]) -> list[float]:
    """The onLoads of a cell's successful visits."""
    return [r["onload"] for r in rows.get(cell, []) if r["ok"]]


def memory(lab, results: Path, visits: int, url: str, every: int = 50, browser: str = "firefox") -> None:
    """One reused session of ``browser`` under the study's default restart policy, ``visits`` Do53 visits: the
    browser's PSS every ``every`` visits and at each restart, and this process's RSS, to show both bounded."""
    from harness.browser.base import SessionPolicy
    from harness.study import BrowserRestart
    from harness.visit import Visitor

    restart = BrowserRestart()
    policy = SessionPolicy("reused", restart_after=restart.visits, memory_limit_mb=restart.memory_mb)
    visitor = Visitor(lab, results, session=policy, browser=browser)
    peak, failures, restarts = 0.0, 0, []
    try:
        print(f"\nmemory of a reused {browser}, {policy}: PSS of the browser's processes and this process's RSS, MiB")
        for n in range(1, visits + 1):
            result = visitor.visit_once(url, "do53", "near")
            failures += result.error_class != "Successful"
            if result.browser_restart:
                restarts.append(f"{n} ({result.browser_restart})")
            used = visitor.browser._reused.memory_mb()  # type: ignore[attr-defined]  # the running session's
            peak = max(peak, used)
            if n % every == 0 or n == 1 or result.browser_restart:
                print(
                    f"  visit {n:5} (its browser's {result.session_ordinal:4}th): browser {used:6.0f}  "
                    f"harness {_rss_mib():5.0f}  failures so far {failures}",
                    flush=True,
                )
        print(f"  peak browser PSS {peak:.0f} MiB; restarts at visits {', '.join(restarts) or 'none'}")
    finally:
        visitor.close()


def carryover(
    lab,
    results: Path,
    visits: int,
    urls: tuple[str, str],
    gap: int = 0,
    compare: bool = False,
    browser: str = "firefox",
) -> None:
    """Is a reused browser's page faster for state of the site that outlived the clearing, or for what the page
    before left in the browser itself? Each page as the last visit of a new reused browser, after itself or
    after the other page, interleaved (Do53, the current link), with ``gap`` visits of the other page between
    (the same last pages either way): carried state makes "after itself" faster for both pages; the weight of
    the page before makes both faster after the lighter page. With ``compare``, every such browser runs twice,
    in random order: as the harness runs it, and keeping the BiDi network observer across visits (as before
    `ReusedFirefoxSession.renew_network_observer`), to show what renewing it removes; both then with BiDi's
    network events (the recorder, the harness's default, has no observer); Firefox only, the observer being its."""
    from harness.browser.base import SessionPolicy
    from harness.browser.firefox_reused import ReusedFirefoxSession
    from harness.browser.session import FirefoxSession
    from harness.visit import Visitor

    renewals = [True, False] if compare and browser == "firefox" else [True]
    cells = [(renew, first, second) for renew in renewals for second in urls for first in urls]
    onloads: dict[tuple[bool, str, str], list[float]] = {cell: [] for cell in cells}
    try:
        for _ in range(visits):
            for renew, first, second in random.sample(cells, len(cells)):
                ReusedFirefoxSession.renew_network_observer = renew
                FirefoxSession.network_events = "bidi" if compare else "recorder"
                visitor = Visitor(lab, results, session=SessionPolicy("reused"), browser=browser)
                try:
                    other = next(u for u in urls if u != second)
                    for before in [first] + [other] * gap:
                        visitor.visit_once(before, "do53", "near")
                    result = visitor.visit_once(second, "do53", "near")
                finally:
                    visitor.close()
                if result.error_class == "Successful" and result.on_load_ms is not None:
                    onloads[(renew, first, second)].append(result.on_load_ms)
    finally:
        ReusedFirefoxSession.renew_network_observer = True
        FirefoxSession.network_events = "recorder"
    rng = np.random.default_rng(2)
    print(f"\n{browser} carry-over, {gap} visits of the other page between: a reused browser's last visit, onLoad (ms)")
    for renew in renewals:
        if compare:
            print(f" network observer {'renewed each visit (the harness)' if renew else 'kept across visits'}:")
        for second in urls:
            other = next(u for u in urls if u != second)
            same, after_other = onloads[(renew, second, second)], onloads[(renew, other, second)]
            if len(same) < 3 or len(after_other) < 3:
                print(f"  {second}: too few successful visits ({len(same)}, {len(after_other)})")
                continue
            low, high = ratio_interval(same, after_other, rng)
            m_same, m_other = statistics.median(same), statistics.median(after_other)
            p = mannwhitneyu(same, after_other).pvalue
            print(
                f"  {second:24} after itself {m_same:6.0f} (n={len(same)})  after {other} {m_other:6.0f} "
                f"(n={len(after_other)})  ratio {m_same / m_other:.2f} [{low:.2f}, {high:.2f}]  p={p:.3g}"
            )


def _rss_mib() -> float:
    """This process's resident set, MiB (the harness side of a crawl)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visits", type=int, default=40, help="visits per arm, mode and network")
    parser.add_argument("--per-block", type=int, default=2, help="visits per arm in one block")
    parser.add_argument("--networks", default="wired,4g")
    parser.add_argument(
        "--minutes", type=float, default=0, help="start no block after this long, and report what ran (0: no limit)"
    )
    parser.add_argument(
        "--one-arm-blocks",
        action="store_true",
        help="each block runs one arm (the arms in turn), so every reused browser's first visit has later ones of "
        "the same arm (first against later visits, per arm)",
    )
    parser.add_argument("--protocols", default="do53,dot,doh,doq,doh3")
    parser.add_argument("--modes", default=DEFAULT_MODES, help=f"of {', '.join(MODES)}")
    parser.add_argument(
        "--memory-visits", type=int, default=0, help="visits of one reused session, restart policy on (0: none)"
    )
    parser.add_argument("--url", default="https://google.com/")
    parser.add_argument(
        "--carryover", type=int, default=0, help="visits per condition of the carry-over check (0: none)"
    )
    parser.add_argument("--other-url", default="https://facebook.com/", help="the carry-over check's other site")
    parser.add_argument("--carryover-gap", type=int, default=0, help="visits of the other site in between")
    parser.add_argument(
        "--carryover-compare",
        action="store_true",
        help="the carry-over check also with the BiDi network observer kept across visits, interleaved",
    )
    parser.add_argument(
        "--instrumentation-compare",
        action="store_true",
        help="every mode also with no request recorded (network_events = 'none'), interleaved",
    )
    parser.add_argument("--browsers", default="firefox", help="firefox, chromium (each runs every mode)")
    parser.add_argument(
        "--chromium-source",
        default=None,
        help="Chromium's request source instead of its default (netlog): bidi, none",
    )
    add_lab_arguments(parser)
    args = parser.parse_args()

    from harness.browser.base import SessionPolicy
    from harness.browser.chromium_session import ChromiumSession
    from harness.browser.registry import browser_class
    from harness.browser.session import FirefoxSession
    from harness.browser.webdriver_session import WebDriverSession
    from harness.shaping.link_profile import load_link_profile
    from harness.shaping.shaper import Shaper
    from harness.visit import Visitor

    networks, protocols, modes = args.networks.split(","), args.protocols.split(","), args.modes.split(",")
    sessions: dict[str, type[WebDriverSession]] = {"firefox": FirefoxSession, "chromium": ChromiumSession}
    if args.chromium_source:  # the source the benchmark sets against "none"; checked when a session is built
        ChromiumSession.network_events = args.chromium_source
    defaults = {browser: sessions[browser].network_events for browser in args.browsers.split(",")}
    cells = [  # (browser, mode, request source, the browser's own source)
        (browser, mode, source, default)
        for browser, default in defaults.items()
        for mode in modes
        if MODES[mode][0] == "fresh" or browser_class(browser).reusable
        for source in ([default, "none"] if args.instrumentation_compare else [default])
    ]
    lab = fresh_lab(args)
    rows: dict = {}
    link_rtt = {n: load_link_profile(n).round_trip()["added_rtt_ms"] for n in networks}
    random.seed(1)
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            shaper = Shaper(lab)
            visitors = {
                (b, mode): Visitor(
                    lab,
                    Path(tmp),
                    session=SessionPolicy(MODES[mode][0], settle_s=MODES[mode][2]),
                    resolver_connection=MODES[mode][1],
                    browser=b,
                )
                for b, mode, _, _ in cells
            }
            for net in networks if args.visits else []:  # --visits 0: the memory run alone
                shaper.apply(load_link_profile(net))
                blocks = max(1, args.visits // args.per_block) * (len(protocols) if args.one_arm_blocks else 1)
                for block in range(blocks):
                    if args.minutes and time.monotonic() - started > 60 * args.minutes:
                        print(f"{net}: stopped after {block} blocks (--minutes {args.minutes:g})", flush=True)
                        break
                    for browser, mode, source, default in random.sample(cells, len(cells)):
                        visitors[(browser, mode)].network = net
                        sessions[browser].network_events = source  # read when a block's browser starts
                        name = label(browser, mode, source, default)
                        arms = [protocols[block % len(protocols)]] if args.one_arm_blocks else protocols
                        run_block(visitors[(browser, mode)], arms, args.per_block, args.url, rows, name, net)
                    print(f"{net}: block {block + 1} of every mode done", flush=True)
            for browser, default in defaults.items():
                sessions[browser].network_events = default
            shaper.clear()
            if rows:
                names = list(dict.fromkeys(label(*cell) for cell in cells))
                report(rows, networks, protocols, link_rtt, modes)
                report_overhead(rows, networks, protocols, names)
                for browser, default in defaults.items():  # each browser's lives against its own reused-cold
                    lives = [label(browser, mode, default, default) for mode in modes]
                    report_lives(rows, networks, protocols, lives, label(browser, "reused-cold", default, default))
                report_first_visits(rows, networks, protocols, names)
            if args.instrumentation_compare:
                report_instrumentation(rows, networks, protocols, cells)
            for browser in defaults if args.carryover else []:
                urls = (args.url, args.other_url)
                carryover(lab, Path(tmp), args.carryover, urls, args.carryover_gap, args.carryover_compare, browser)
            if args.memory_visits:
                for browser in defaults:
                    memory(lab, Path(tmp), args.memory_visits, args.url, browser=browser)
    finally:
        lab.down()


if __name__ == "__main__":
    main()
