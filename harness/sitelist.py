"""Site lists as data: one registered domain per line, ranked by line order."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError

_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_DOMAIN = re.compile(rf"^(?:{_LABEL}\.)+{_LABEL}$")


@dataclass(frozen=True)
class Site:
    """A site of a list: its registered domain, rank (1-based) and group."""

    domain: str
    rank: int
    group: str  # "top" or "tail"


def load_site_list(path: Path, top: int) -> list[Site]:
    """Read a plain list; the first ``top`` entries are "top", the rest "tail".

    Domains must be lower-case ASCII (IDNs in their xn-- form); a malformed
    line or a duplicate is refused naming the file and line.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise HarnessError(f"{path}: cannot read site list: {exc.strerror}") from exc
    sites: list[Site] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(lines, start=1):
        domain = raw.split("#", 1)[0].strip()
        if not domain:
            continue
        if len(domain) > 253 or not _DOMAIN.match(domain):
            raise HarnessError(f"{path}:{number}: not a lower-case ASCII domain name: {domain!r}")
        if domain in seen:
            raise HarnessError(f"{path}:{number}: duplicate of line {seen[domain]}: {domain}")
        seen[domain] = number
        rank = len(sites) + 1
        sites.append(Site(domain, rank, "top" if rank <= top else "tail"))
    if not sites:
        raise HarnessError(f"{path}: the site list is empty")
    return sites
