"""Site lists as data: the lab's plain list and Tranco lists (CSV or the zip the Tranco site serves).

A Tranco list is `rank,domain` per line; some exports start with that very
header line (`rank,domain`, in any case), which is skipped. We refuse what
would silently change a study: a malformed row, a rank out of order, a
duplicate domain.
Internationalized names are turned into their `xn--` form (the form DNS
and the browser's address bar use), and the list says how many were.

Names are checked strictly, because they end up in the lab's zone data and
in the study's record: no whitespace or control character anywhere (a
trailing newline included), labels of 1-63 letters, digits and inner
hyphens, at most 253 characters, and IDNA 2008 with UTS 46 mapping for
IDNs and `xn--` labels.
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import idna

from harness.errors import HarnessError

_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
# Always used with fullmatch: `$` also matches before a trailing newline.
_LABEL_RE = re.compile(_LABEL)
_DOMAIN = re.compile(rf"(?:{_LABEL}\.)+{_LABEL}")
#: RFC 1035 2.3.4: 255 octets on the wire, so 253 characters written without the root's dot.
MAX_NAME = 253
#: Zero-width (non-)joiners are format characters that IDNA 2008 allows in context (CONTEXTJ), so IDNA judges them.
_JOINERS = "\u200c\u200d"
#: Unicode categories never part of a name: "other" characters, and every separator (Z*) as whitespace.
_INVISIBLE = {
    "Cc": "control character",
    "Cf": "format character",
    "Cs": "surrogate",
    "Co": "private-use character",
    "Cn": "unassigned code point",
}
#: Tranco names its downloads tranco_<ID>.csv / tranco_<ID>-1m.csv.zip.
_LIST_ID_IN_NAME = re.compile(r"tranco_([A-Z0-9]{4,6})(?:[-_.]|$)")
#: The header line some Tranco exports carry (compared lower-cased, and only as the file's first line).
_TRANCO_HEADER = ["rank", "domain"]


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
        """The sites ranked ``first``..``last`` (inclusive) that the list has.

        Walks the range or the list, whichever is shorter, so a huge range (say ranks = [1, 10**18]) costs no
        more than the list itself.
        """
        if last - first < len(self.ranks):
            ranks: Iterable[int] = range(first, last + 1)
        else:
            ranks = sorted(r for r in self.ranks if first <= r <= last)
        return [Site(self.ranks[r], r, group) for r in ranks if r in self.ranks]


def load_site_list(path: Path, top: int) -> list[Site]:
    """Read a plain list; the first ``top`` entries are "top", the rest "tail".

    Domains must be lower-case ASCII (IDNs in their xn-- form); a malformed
    line or a duplicate is refused naming the file and line.
    """
    sites: list[Site] = []
    seen: dict[str, int] = {}
    # Split on newlines only: splitlines() also splits on form feeds and other controls, which would hide them.
    for number, raw in enumerate(_read_text(path).split("\n"), start=1):
        domain = raw.split("#", 1)[0].strip(" \t\r")  # the line's own spacing; anything else is judged as the name
        if not domain:
            continue
        checked, problem = _normalize(domain)
        if problem or checked != domain:
            why = problem or f"write it as {checked}"
            raise HarnessError(f"{path}:{number}: not a lower-case ASCII domain name: {domain!r} ({why})")
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
    """``name`` lower-cased, an IDN in its A-label (xn--) form; and whether it was converted.

    Raises ValueError, one line with the name and what is wrong with it, for anything that is not a domain name.
    """
    domain, problem = _normalize(name)
    if problem:
        raise ValueError(f"not a domain name: {name!r} ({problem})")
    return domain, not name.isascii()


def check_label(label: str) -> str:
    """``label`` if it is one lower-case DNS label (letters, digits, inner hyphens; 1-63); else ValueError."""
    problem = _label_problem(label)
    if problem:
        raise ValueError(f"not a DNS label: {problem}")
    return label


def _normalize(name: str) -> tuple[str, str | None]:
    """(the name in lower-case A-label form, None), or (the name, what is wrong with it)."""
    lowered = name.lower().removesuffix(".")  # one root dot, as in "example.com.", is the same name
    if lowered.isascii() and "--" not in lowered:
        # The common case, kept fast for million-entry lists: plain LDH labels, which IDNA leaves as they are.
        if len(lowered) <= MAX_NAME and _DOMAIN.fullmatch(lowered):
            return lowered, None
        return lowered, _invisible(name) or _ldh_problem(lowered)
    bad = _invisible(name)
    if bad:  # before IDNA, whose UTS 46 mapping silently drops some (U+200B, U+00AD) and would change the name
        return lowered, bad
    try:
        encoded = idna.encode(lowered, uts46=True, std3_rules=True).decode("ascii")
    except idna.IDNAError as exc:
        return lowered, f"IDNA: {exc}"
    return encoded, _ldh_problem(encoded)


def _invisible(name: str) -> str | None:
    """What is wrong if ``name`` holds whitespace, a control or a format character; else None."""
    for index, char in enumerate(name):
        category = unicodedata.category(char)
        kind = _INVISIBLE.get(category, "whitespace" if category[0] == "Z" else None)
        if kind and char not in _JOINERS:
            return f"{kind} U+{ord(char):04X} at position {index}"
    return None


def _ldh_problem(name: str) -> str | None:
    """What is wrong with ``name`` as lower-case LDH labels of a registered domain; None if nothing."""
    if len(name) > MAX_NAME:
        return f"{len(name)} characters, more than {MAX_NAME}"
    labels = name.split(".")
    if len(labels) < 2:
        return "a registered domain has at least two labels"
    return next((f"label {label!r}: {problem}" for label in labels if (problem := _label_problem(label))), None)


def _label_problem(label: str) -> str | None:
    """What is wrong with ``label`` as one lower-case LDH label; None if nothing."""
    if not label:
        return "empty"
    if len(label) > 63:
        return f"{len(label)} characters, more than 63"
    if not _LABEL_RE.fullmatch(label):
        return "must be lower-case letters, digits and inner hyphens"
    return None


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
        if number == 1 and [field.lower() for field in row] == _TRANCO_HEADER:
            continue  # a header names the columns; anywhere else it is a malformed row, refused below
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
