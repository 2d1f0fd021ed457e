"""`dnsstudy demo`: the main job end to end on a lab of its own: up, check, crawl, down.

The analysis that follows is the CLI's to start: the harness never imports it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from harness.crawl import Crawl, CrawlSummary
from harness.errors import HarnessError
from harness.lab.checks import CheckResult
from harness.lab.lab import Lab
from harness.store import Store
from harness.study import LoadedStudy


def crawl_on_own_lab(
    loaded: LoadedStudy,
    lab: Lab,
    store_path: Path,
    console: Console,
    report_checks: Callable[[list[CheckResult]], bool],
) -> CrawlSummary:
    """Bring the lab up (if it is not), check every service, crawl the study, and bring down what we brought up."""
    if loaded.study.target != "lab":
        raise HarnessError(f"{loaded.path}: the demo runs lab studies; this one targets the {loaded.study.target}")
    start = time.monotonic()
    started = lab.up()
    console.print(f"lab {lab.name} {'up' if started else 'was already up'} in {time.monotonic() - start:.1f} s")
    try:
        if not report_checks(lab.run_checks()):
            raise HarnessError(f"lab {lab.name}: a service check failed (above); not crawling")
        return Crawl(loaded, Store(store_path), lab, store_path.parent, console=console).run()
    finally:
        if started:
            lab.down()
            console.print(f"lab {lab.name} down")
