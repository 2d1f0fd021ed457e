"""A visit's browser start: retried when it failed for the harness's own reasons, then settled if a study says so.

A browser start fails now and then for reasons of the harness, not of any
page or DNS arm (the BiDi socket lost while Firefox starts, about 1 visit in
400 on a loaded 2-core host). Such a start is tried again inside the visit,
at most `START_RETRIES` times; the visit records each failure retried
(`browser_start_retries`), and a start that fails every time leaves the visit
an Infrastructure Failure, as before. A start the watchdog ended is not
retried: the visit's time budget is spent. A fresh browser then waits
`settle_s` before its navigation (`browser_settle_s`; 0, the reference
design's, by default): docs/visit.md says what that changes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.arms.base import DnsArm
    from harness.browser.base import Browser, SessionPolicy

#: How many times a failed start is tried again inside one visit.
START_RETRIES = 2


@dataclass
class BrowserStart:
    """What starting the visit's browser took: the failures retried, and the seconds it settled."""

    retried: list[str] = field(default_factory=list)
    settled_s: float = 0.0


def start_browser(browser: Browser, arm: DnsArm, settle_s: float = 0.0) -> BrowserStart:
    """Start ``browser`` for ``arm``, retrying a start that failed for the harness's own reasons
    (`Browser.start_failure`) at most `START_RETRIES` times; then, a fresh browser that started, wait
    ``settle_s``. A start that still fails is left to the visit (its load reports it)."""
    done = BrowserStart()
    while True:
        browser.start(arm)
        failure = browser.start_failure()
        if failure is None or len(done.retried) == START_RETRIES:
            break
        done.retried.append(failure)
        browser.stop()  # nothing of the failed start is left; a reused browser is replaced at the next start
    if failure is None and settle_s > 0 and not browser.session.reused:
        t = time.monotonic()
        time.sleep(settle_s)
        done.settled_s = time.monotonic() - t
    return done


def browser_life(session: SessionPolicy, warm_started: bool) -> str:
    """The visit's browser life, as its record's `browser_session` names it and the analysis keeps apart: "fresh",
    "fresh settled 3 s" (`browser_settle_s`), "reused warm-started" (harness/browser/warmup.py) or "reused" (no
    warm-up: a store from before it, or a benchmark measuring it)."""
    if session.reused:
        return "reused warm-started" if warm_started else "reused"
    return f"fresh settled {session.settle_s:g} s" if session.settle_s else "fresh"
