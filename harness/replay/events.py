"""What a replayed web did during one visit: misses (HTTP and DNS), fuzzy matches, answers not given as recorded.

The replay server writes one JSON line per event (harness/lab/replayserver.py);
a place reads those of a visit's load into one ReplayEvents, which the visit's
record carries (docs/replay.md, "Misses in a study").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ReplayWindow:
    """Where a visit's load began on a replayed web: the Unix time (the replay server stamps its events to the
    microsecond) and the length of each resolver's reply log (unbound stamps a line to the second only, so
    which replies came after is read from where each log stood: harness/lab/querylog.py)."""

    since: float
    log_sizes: dict[Path, int]


@dataclass
class ReplayEvents:
    """The events of one visit's load on a replayed web."""

    misses: int = 0  # requests the archive holds no answer for (404)
    fuzzy: int = 0  # answered with a recorded query string that differed
    filled: int = 0  # answered with a body made up at import (the HAR held none)
    errors: list[dict[str, str]] = field(default_factory=list)  # {"url", "reason"}: not given as recorded
    dns_misses: list[str] = field(default_factory=list)  # names asked that the archive does not hold (NXDOMAIN)
    page_problem: str | None = None  # the page's own document was not replayed as recorded, and why

    def add(self, event: dict) -> None:
        """Count one event line of the replay server's log."""
        kind, url = event.get("kind"), str(event.get("url") or f"{event.get('host')}{event.get('target')}")
        if kind == "miss":
            self.misses += 1
        elif kind == "fuzzy":
            self.fuzzy += 1
        elif kind == "filled":
            self.filled += 1
        elif kind == "error":
            self.errors.append({"url": url, "reason": str(event.get("reason", ""))})
        if event.get("page") and kind in ("miss", "error") and self.page_problem is None:
            why = "not in the archive" if kind == "miss" else str(event.get("reason", ""))
            self.page_problem = f"replay: the page {url} was not replayed as recorded ({why})"


def replay_record(replay: ReplayEvents | None, own_names: frozenset[str]) -> dict:  # None off a replayed web
    """A visit record's replay fields (None where the place served no archive); the DNS misses are the page's:
    names the browser asks by itself (``own_names``) are not."""
    if replay is None:
        return dict.fromkeys(("replay_misses", "replay_fuzzy", "replay_errors", "replay_filled", "replay_dns_misses"))
    return {
        "replay_misses": replay.misses,
        "replay_fuzzy": replay.fuzzy,
        "replay_errors": replay.errors,
        "replay_filled": replay.filled,
        "replay_dns_misses": [name for name in replay.dns_misses if name not in own_names],
    }


def read_events(log: Path, since: float, until: float) -> ReplayEvents:
    """The events the replay server logged in ``log`` between two Unix times."""
    seen = ReplayEvents()
    if not log.exists():
        return seen
    with log.open() as f:
        for line in f:
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line cut short by a killed server: not an event
            if since <= event.get("time", 0) <= until:
                seen.add(event)
    return seen
