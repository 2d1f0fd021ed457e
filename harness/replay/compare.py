"""A replayed page against its original: requests, hostnames and bytes from their HARs, and the DNS served.

The validation of docs/replay.md: per page, the same request count and
hostnames, bytes within a tolerance (2 %), and DNS answers identical to the
archive's: the same CNAME chains and TTLs, and the same grouping of
hostnames by address (the addresses themselves are the lab's).
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


def dns_differences(recorded: dict[str, DnsAnswer], served: dict[str, DnsAnswer]) -> list[str]:
    """Names whose served chain or TTLs differ from the recording, and address groups that do not match."""
    problems = []
    for name, want in sorted(recorded.items()):
        got = served.get(name)
        if got is None:
            problems.append(f"{name}: not served")
        elif (got.chain, got.a_ttl, len(got.a)) != (want.chain, want.a_ttl, len(want.a)):
            problems.append(
                f"{name}: served {got.chain} {got.a} ttl {got.a_ttl}, recorded {want.chain} ttl {want.a_ttl}"
            )
    if _groups(recorded) != _groups(served):
        problems.append("hostnames are grouped by address differently")
    return problems


def _groups(answers: dict[str, DnsAnswer]) -> set[frozenset[str]]:
    by_address: dict[str, set[str]] = {}
    for name, answer in answers.items():
        if answer.a:
            by_address.setdefault(answer.a[0], set()).add(name)
    return {frozenset(names) for names in by_address.values()}
