"""Names the lab's DNS answered NXDOMAIN, read from its resolvers' reply logs (unbound's log-replies).

On a replayed web the lab's zone holds exactly the archive's names
(harness/lab/replayweb.py): every resolver answers from it, the near one
from its own copy, the far one through the authoritative. A name the page
asks that the archive does not hold is NXDOMAIN there, whichever browser and
arm asked, so a visit reads its DNS misses from the replies its resolver
logged while the page loaded (docs/replay.md). unbound stamps a line to the
second only, and the tail of one visit's load often shares a second with
the start of the next one's, so a window is not a span of time but the
lines each log gained since it opened (the daemon appends to its log, one
flushed line a reply, so a log's length orders it exactly). The lab's own
names (lab.test), the warm-up name (.invalid) and query types no page load
asks (Firefox's TRR confirmation asks NS) are not misses.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

#: "[1764281234] unbound[12:0] info: 198.18.0.2 a.test. A IN NXDOMAIN 0.000 0 40", or with log-time-ascii
#: "Nov 27 22:10:11 unbound[12:0] info: ...".
_REPLY = re.compile(
    r"^(?:\[\d+\]|[A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d) unbound\[[^\]]*\] info: "
    r"\S+ (?P<name>\S+?)\.? (?P<type>\S+) IN (?P<rcode>[A-Z]+) "
)
#: What a page load asks: addresses and the HTTPS record (TYPE65 in older unbound).
PAGE_TYPES = {"A", "AAAA", "HTTPS", "TYPE65"}
#: Names that are the lab's own or the harness's, never a page's.
NOT_PAGES = (".lab.test", ".invalid")


def log_sizes(logs: Iterable[Path]) -> dict[Path, int]:
    """Each log's length in bytes now (0 for one not written yet): where a window opens."""
    return {log: log.stat().st_size if log.exists() else 0 for log in logs}


class Reply(NamedTuple):
    """One reply a lab resolver logged for a page's name: the name (lower case, no final dot), type, rcode."""

    name: str
    type: str  # "A", "AAAA", "HTTPS" (unbound before 1.18 writes "TYPE65")
    rcode: str  # "NOERROR", "NXDOMAIN", "SERVFAIL", ...


def nxdomain_names(opened: Mapping[Path, int]) -> list[str]:
    """The names (sorted, each once) answered NXDOMAIN in each log past its length ``opened`` (`log_sizes`),
    up to now."""
    return sorted({r.name for r in page_replies(opened) if r.rcode == "NXDOMAIN"})


def page_replies(opened: Mapping[Path, int]) -> list[Reply]:
    """Every reply for a page's name (the lab's own and the harness's names left out) of a page type, logged in
    each log past its length ``opened`` (`log_sizes`) up to now, in each log's order."""
    replies: list[Reply] = []
    for log, offset in opened.items():
        if log.exists():
            replies += _replies(log, offset)
    return replies


def _replies(log: Path, offset: int) -> list[Reply]:
    found = []
    with log.open("rb") as f:
        f.seek(offset)
        for raw in f:
            if not raw.endswith(b"\n"):
                break  # a line still being written: past the window
            m = _REPLY.match(raw.decode(errors="replace"))
            if not m or m["type"] not in PAGE_TYPES:
                continue
            name = m["name"].lower()
            if not ("." + name).endswith(NOT_PAGES):
                found.append(Reply(name, "HTTPS" if m["type"] == "TYPE65" else m["type"], m["rcode"]))
    return found
