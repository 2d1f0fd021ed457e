"""A replayed page against its original: requests, hostnames and bytes from their HARs, and the DNS served.

The validation of docs/replay.md: per page, the same request count and
hostnames, bytes within a tolerance (2 %), and DNS answers identical to the
archive's: the same CNAME chains and TTLs (as a cache counts them down), and
the same grouping of hostnames by address (the addresses themselves are the
lab's).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from harness.replay.archive import DnsAnswer

BYTES_TOLERANCE = 0.02


@dataclass(frozen=True)
class PageSummary:
    """What a HAR says a page loaded."""

    requests: int
    hostnames: frozenset[str]
    bytes: int


def summarise_har(har: dict) -> PageSummary:
    """Requests, hostnames and response body bytes of a visit's HAR; a request with no outcome
    (`_unanswered`, docs/visit.md) is not one the page loaded."""
    entries = [e for e in har["log"]["entries"] if not e.get("_unanswered")]
    hosts = frozenset((urlsplit(e["request"]["url"]).hostname or "").lower() for e in entries)
    size = sum(max(0, int(e["response"].get("content", {}).get("size") or 0)) for e in entries)
    return PageSummary(len(entries), hosts, size)


def page_differences(original: PageSummary, replayed: PageSummary, tolerance: float = BYTES_TOLERANCE) -> list[str]:
    """What differs beyond the tolerance, one phrase each; empty if the replay reproduces the page."""
    problems = []
    if original.requests != replayed.requests:
        problems.append(f"requests {original.requests} -> {replayed.requests}")
    if original.hostnames != replayed.hostnames:
        lost, added = sorted(original.hostnames - replayed.hostnames), sorted(replayed.hostnames - original.hostnames)
        problems.append(f"hostnames lost {lost}, added {added}")
    if abs(replayed.bytes - original.bytes) > tolerance * max(original.bytes, 1):
        problems.append(f"bytes {original.bytes} -> {replayed.bytes}")
    return problems


def dns_differences(recorded: dict[str, DnsAnswer], served: dict[str, DnsAnswer], held_s: float = 0.0) -> list[str]:
    """Names whose served chain or TTLs differ from the recording, and address groups that do not match.

    ``held_s``: how long the serving resolver may have held an answer in its cache. A replay lab's near
    resolver reads its zone as an upstream and caches what it read, so its TTLs count down from the
    recorded ones; a served TTL is the recorded one when it is no higher and no more than ``held_s`` plus one
    second (unbound counts whole seconds) below it.
    """
    problems = []
    for name, want in sorted(recorded.items()):
        got = served.get(name)
        if got is None:
            problems.append(f"{name}: not served")
        elif not _same_answer(want, got, held_s):
            problems.append(
                f"{name}: served {got.chain} {got.a} ttl {got.a_ttl}, recorded {want.chain} ttl {want.a_ttl}"
            )
    if _groups(recorded) != _groups(served):
        problems.append("hostnames are grouped by address differently")
    return problems


def _same_answer(want: DnsAnswer, got: DnsAnswer, held_s: float) -> bool:
    def counted_down(recorded: int, served: int) -> bool:
        return recorded - (held_s + 1) <= served <= recorded

    return (
        len(got.a) == len(want.a)
        and [n for n, _ in got.chain] == [n for n, _ in want.chain]
        and counted_down(want.a_ttl, got.a_ttl)
        and all(counted_down(w, g) for (_, w), (_, g) in zip(want.chain, got.chain, strict=True))
    )


def _groups(answers: dict[str, DnsAnswer]) -> set[frozenset[str]]:
    by_address: dict[str, set[str]] = {}
    for name, answer in answers.items():
        if answer.a:
            by_address.setdefault(answer.a[0], set()).add(name)
    return {frozenset(names) for names in by_address.values()}
