"""Names the lab's DNS answered NXDOMAIN, read from its resolvers' reply logs (unbound's log-replies).

On a replayed web the lab's zone holds exactly the archive's names
(harness/lab/replayweb.py): every resolver answers from it, the near one
from its own copy, the far one through the authoritative. A name the page
asks that the archive does not hold is NXDOMAIN there, whichever browser and
arm asked, so a visit reads its DNS misses from the replies its resolver
logged while the page loaded (docs/replay.md). unbound stamps a line to the
second, so the window is widened to whole seconds; the lab's own names
(lab.test), the warm-up name (.invalid) and query types no page load asks
(Firefox's TRR confirmation asks NS) are not misses.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable
from pathlib import Path

#: "[1764281234] unbound[12:0] info: 198.18.0.2 a.test. A IN NXDOMAIN 0.000 0 40", or with log-time-ascii
#: "Nov 27 22:10:11 unbound[12:0] info: ...".
_REPLY = re.compile(
    r"^(?:\[(?P<epoch>\d+)\]|(?P<ascii>[A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d)) unbound\[[^\]]*\] info: "
    r"\S+ (?P<name>\S+?)\.? (?P<type>\S+) IN (?P<rcode>[A-Z]+) "
)
#: What a page load asks: addresses and the HTTPS record (TYPE65 in older unbound).
PAGE_TYPES = {"A", "AAAA", "HTTPS", "TYPE65"}
#: Names that are the lab's own or the harness's, never a page's.
NOT_PAGES = (".lab.test", ".invalid")


def nxdomain_names(logs: Iterable[Path], since: float, until: float) -> list[str]:
    """The names (sorted, each once) answered NXDOMAIN in ``logs`` between two Unix times."""
    names: set[str] = set()
    first, last = math.floor(since), math.ceil(until)
    for log in logs:
        if log.exists():
            names |= _nxdomains(log, first, last)
    return sorted(names)


def _nxdomains(log: Path, first: int, last: int) -> set[str]:
    found = set()
    with log.open(errors="replace") as f:
        for line in f:
            m = _REPLY.match(line)
            if not m or m["rcode"] != "NXDOMAIN" or m["type"] not in PAGE_TYPES:
                continue
            name = m["name"].lower()
            if first <= _when(m) <= last and not ("." + name).endswith(NOT_PAGES):
                found.add(name)
    return found


def _when(m: re.Match[str]) -> int:
    """The line's Unix second (an ASCII stamp has no year: this year, local time, as unbound wrote it)."""
    if m["epoch"]:
        return int(m["epoch"])
    stamp = time.strptime(f"{time.localtime().tm_year} {m['ascii']}", "%Y %b %d %H:%M:%S")
    return int(time.mktime(stamp))
