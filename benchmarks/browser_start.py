"""Where a visit's browser start goes, and what a preference change does to it: sessions to about:blank.

Each session is a visit's browser as a crawl starts it (the browser account, a
fresh copy of the warmed template, geckodriver, Firefox headless, the BiDi
session and our chrome script) loading about:blank, so only the start is
measured. Variants (a set of extra preferences each) are interleaved so that
machine noise spreads evenly; prints the median of geckodriver start, new
session (Firefox's launch up to its Marionette handshake), BiDi and the chrome
script, and the whole browser start, per variant.

    .venv/bin/python -m benchmarks.browser_start --variant noprelaunch=dom.ipc.processPrelaunch.enabled=false
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from harness.browser.account import BrowserAccount
from harness.browser.prefs import DNS_CURRENT, load_prefs
from harness.browser.session import FirefoxSession
from harness.browser.template import ensure_template, firefox_version
from harness.paths import RUN_ROOT


def parse_variant(text: str) -> tuple[str, dict]:
    """name=pref=value[,pref=value...] -> (name, {pref: value}); values true/false/ints as such."""
    name, _, rest = text.partition("=")
    prefs: dict = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        prefs[key] = {"true": True, "false": False}.get(value, int(value) if value.lstrip("-").isdigit() else value)
    return name, prefs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=15, help="sessions per variant")
    parser.add_argument("--variant", action="append", default=[], help="name=pref=value[,pref=value]")
    args = parser.parse_args()
    variants = dict([("baseline", {}), *(parse_variant(v) for v in args.variant)])
    account = BrowserAccount.lookup()
    base = {**load_prefs().as_dict(), **load_prefs(DNS_CURRENT).as_dict()}
    phases: dict[str, list[dict]] = {name: [] for name in variants}
    RUN_ROOT.mkdir(parents=True, exist_ok=True)
    # Under /run/dnsstudy, like a place's: the browser account must reach its work directories.
    with tempfile.TemporaryDirectory(prefix="browser-start-", dir=RUN_ROOT) as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        templates = {
            name: ensure_template(work / name, None, {**base, **extra}, account, None, firefox_version())
            for name, extra in variants.items()
        }
        for i in range(args.sessions):
            for name, extra in variants.items():
                session = FirefoxSession(account, templates[name], None, work, prefs={**base, **extra}, timeout=20)
                report = session.run("about:blank")
                if report.driver_failure:
                    print(f"{name}: {report.driver_failure}")
                    continue
                phases[name].append(report.phases)
            print(f"round {i + 1}/{args.sessions}", flush=True)
    keys = [("browser_start.driver", "geckodriver"), ("browser_start.session", "new session")]
    print(f"\nmedians over {args.sessions} sessions (ms)")
    print(f"{'variant':14}{'n':>4}{'geckodriver':>14}{'new session':>14}{'BiDi+chrome':>14}{'browser start':>15}")
    for name, rows in phases.items():
        if not rows:
            continue
        med = {label: statistics.median(r[key] for r in rows) * 1000 for key, label in keys}
        rest = statistics.median(
            r["browser_start"] - r["browser_start.driver"] - r["browser_start.session"] for r in rows
        )
        total = statistics.median(r["browser_start"] for r in rows) * 1000
        print(
            f"{name:14}{len(rows):4}{med['geckodriver']:14.0f}{med['new session']:14.0f}{rest * 1000:14.0f}"
            f"{total:15.0f}"
        )


if __name__ == "__main__":
    main()
