"""Site lists as data: the lab's plain list and Tranco lists (CSV or the zip the Tranco site serves).

A Tranco list is `rank,domain` per line. We refuse what would silently
change a study: a malformed row, a rank out of order, a duplicate domain.
Internationalized names are turned into their `xn--` form (the form DNS
and the browser's address bar use), and the list says how many were.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import idna

from harness.errors import HarnessError

_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_DOMAIN = re.compile(rf"^(?:{_LABEL}\.)+{_LABEL}$")
#: Tranco names its downloads tranco_<ID>.csv / tranco_<ID>-1m.csv.zip.
_LIST_ID_IN_NAME = re.compile(r"tranco_([A-Z0-9]{4,6})(?:[-_.]|$)")


@dataclass(frozen=True)
class Site:
    """A site of a list: its registered domain, rank (1-based) and group."""

    domain: str
    rank: int
    group: str  # the study's name for the selection it belongs to, e.g. "top" or "tail"


@dataclass
class RankedList:
    """A ranked list of domains and where it came from."""

    source: str
    list_id: str | None
    ranks: dict[int, str]  # rank -> domain
    converted_idns: list[str] = field(default_factory=list)

    def select(self, first: int, last: int, group: str) -> list[Site]:
        """The sites ranked ``first``..``last`` (inclusive) that the list has."""
        return [Site(self.ranks[r], r, group) for r in range(first, last + 1) if r in self.ranks]


def load_site_list(path: Path, top: int) -> list[Site]:
    """Read a plain list; the first ``top`` entries are "top", the rest "tail".

    Domains must be lower-case ASCII (IDNs in their xn-- form); a malformed
    line or a duplicate is refused naming the file and line.
    """
    sites: list[Site] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(_read_text(path).splitlines(), start=1):
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


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise HarnessError(f"{path}: cannot read site list: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise HarnessError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def ascii_domain(name: str) -> tuple[str, bool]:
    """``name`` lower-cased, an IDN in its A-label (xn--) form; and whether it was converted."""
    name = name.strip().rstrip(".").lower()
    if name.isascii():
        if len(name) > 253 or not _DOMAIN.match(name):
            raise ValueError(f"not a domain name: {name!r}")
        return name, False
    try:
        return idna.encode(name, uts46=True).decode("ascii"), True
    except idna.IDNAError as exc:
        raise ValueError(f"not a valid internationalized domain name: {name!r} ({exc})") from None


def load_tranco(path: Path, list_id: str | None = None) -> RankedList:
    """Read a Tranco list from its CSV or zip; errors name the file and line.

    ``list_id`` is the list's Tranco ID when the caller knows it; otherwise
    it is taken from the file name (tranco_<ID>...) if that carries one.
    """
    from_name = _LIST_ID_IN_NAME.search(path.name)
    if list_id and from_name and from_name.group(1) != list_id:
        raise HarnessError(f"{path}: the file name says list {from_name.group(1)}, the study says {list_id}")
    list_id = list_id or (from_name.group(1) if from_name else None)
    if path.suffix == ".zip":
        text, where = _csv_in_zip(path)
    else:
        text, where = _read_text(path), str(path)
    ranks: dict[int, str] = {}
    line_of: dict[str, int] = {}
    converted: list[str] = []
    last = 0
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) != 2:
            raise HarnessError(f"{where}:{number}: expected 'rank,domain', got {len(row)} field(s): {','.join(row)!r}")
        rank_text, name = row[0].strip(), row[1]
        if not rank_text.isdigit() or int(rank_text) < 1:
            raise HarnessError(f"{where}:{number}: rank must be a positive integer, got {rank_text!r}")
        rank = int(rank_text)
        if rank <= last:
            raise HarnessError(f"{where}:{number}: rank {rank} after rank {last}: ranks must increase")
        try:
            domain, was_idn = ascii_domain(name)
        except ValueError as exc:
            raise HarnessError(f"{where}:{number}: {exc}") from None
        if domain in line_of:
            raise HarnessError(f"{where}:{number}: {domain} is already on line {line_of[domain]}")
        if was_idn:
            converted.append(f"{name.strip()} -> {domain}")
        line_of[domain] = number
        ranks[rank] = domain
        last = rank
    if not ranks:
        raise HarnessError(f"{where}: the list has no rows")
    return RankedList(source=str(path), list_id=list_id, ranks=ranks, converted_idns=converted)


def _csv_in_zip(path: Path) -> tuple[str, str]:
    try:
        with zipfile.ZipFile(path) as archive:
            members = [m for m in archive.namelist() if m.endswith(".csv")]
            if len(members) != 1:
                raise HarnessError(f"{path}: expected one CSV in the zip (Tranco's top-1m.csv), found {len(members)}")
            data = archive.read(members[0])
    except (OSError, zipfile.BadZipFile) as exc:
        raise HarnessError(f"{path}: not a readable zip ({exc})") from None
    try:
        return data.decode("utf-8-sig"), f"{path}!{members[0]}"
    except UnicodeDecodeError as exc:
        raise HarnessError(f"{path}!{members[0]}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def fetch_tranco(list_id: str, cache_dir: Path) -> Path:
    """The CSV of Tranco list ``list_id``: from the cache, else downloaded with the `tranco` package.

    Lists are immutable once published, so a cached list is never fetched again.
    """
    if not re.fullmatch(r"[A-Z0-9]{4,6}", list_id):
        raise HarnessError(f"'{list_id}' is not a Tranco list ID (4-6 upper-case letters and digits, e.g. 'X5Y7N')")
    cached = cache_dir / f"{list_id}.csv"
    if cached.exists():
        return cached
    cache_dir.mkdir(parents=True, exist_ok=True)
    import requests

    import tranco

    try:
        tranco.Tranco(cache=True, cache_dir=str(cache_dir)).list(list_id=list_id, full=True)  # type: ignore[attr-defined]
    except (requests.RequestException, AttributeError, OSError, ValueError) as exc:
        cached.unlink(missing_ok=True)  # never leave half a list to be mistaken for the whole
        raise HarnessError(
            f"cannot download Tranco list {list_id} ({type(exc).__name__}); offline, put its CSV at "
            f"{cached} or name the file with sites.list"
        ) from None
    if not cached.exists():
        raise HarnessError(f"the tranco package did not produce {cached}")
    return cached
