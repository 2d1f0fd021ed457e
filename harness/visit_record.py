"""The record of one visit: what `dnsstudy visit` prints and the store keeps (docs/visit.md, docs/store.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class VisitResult:
    """The record of one visit (what `dnsstudy visit` prints and the store keeps)."""

    visit_id: str
    url: str
    protocol: str
    resolver: str
    network: str
    started_at: str
    error_class: str
    detail: str
    paper_2019: str
    counted: bool  # False: a harness failure, never a protocol result
    on_load_ms: float | None  # Navigation Timing (successful visits only)
    on_content_load_ms: float | None  # DOMContentLoaded
    bidi_on_load_ms: float | None  # BiDi load - navigationStarted, the cross-check
    on_load_agrees: bool | None
    wall_s: float
    phases: dict[str, float]
    signal: dict  # the raw signals the class was decided from
    proof: dict
    arm: dict
    har_path: str | None
    har_entries: int
    har_problem: str | None
    next_hop_protocol: str | None
    timeout_s: float
    versions: dict = field(default_factory=dict)
    link: dict = field(default_factory=dict)  # the shaping applied: profile, backend, fingerprint
    browser_dns: dict = field(default_factory=dict)  # the DNS preference profile and the values the browser ran with
    fcp_ms: float | None = None  # First Contentful Paint, as the page's Performance Timeline reports it
    lcp_ms: float | None = None  # Largest Contentful Paint (its last candidate)
    # The place's faults this visit met (harness/lab/faults.py), by name: all at its resolver, on its protocol
    # or on its certificate. A crawl runs beside no fault but those its study declares.
    faults: list[str] = field(default_factory=list)
    # The visit's browser life: a new browser ("fresh", or "fresh settled 3 s" when it waited before navigating),
    # or one that serves many ("reused warm-started": it loaded the warm-up page first; "reused": it did not).
    browser_session: str = "fresh"
    session_ordinal: int = 1  # the visit's place in its browser's life (1: the browser's first visit)
    browser_restart: str | None = None  # why this visit's browser replaced the one before (a reused session)
    browser_settle_s: float = 0.0  # how long the fresh browser waited after its start before navigating
    # The page's requests could use HTTP/3: the place's web serves it and the browser had it on (the study's
    # `page_http3`, or an arm it cannot keep apart from the page's: Firefox's DoH3); docs/web.md, "HTTP/3"
    page_http3: bool = False
    browser_start_retries: list[str] = field(default_factory=list)  # failed starts retried within the visit
    browser_warmup: dict | None = None  # the warm-up its reused browser's start ran (the browser's first visit)
    # What the reused browser had ready before the navigation, and how long the visit waited for it (Firefox: its
    # preallocated content processes, harness/browser/reused.py `READY_LIMIT_S`), and the DNS queries still in flight
    # when its waits for them ended (`dns_in_flight_before`, `dns_in_flight_after`: 0, settled); None when fresh.
    browser_ready: dict | None = None
    resolver_connection: str = "cold"  # the connection to the resolver was opened by the visit, or before it
    warm_up: str | None = None  # the warm-up query's failure, if it failed
    resolver_handshakes: int | None = None  # new connections to the resolver during the visit (TCP transports)
    first_query_open: bool | None = None  # the visit's first query went on a connection open before it
    # The browser's connections to the resolver closed before a cold visit's window (its new process's or user
    # context's: `DnsArm.reset_connection`); None: nothing was reset (fresh, warm, or not the browser's first).
    resolver_connections_closed: int | None = None
    # Whether a cold visit's connection was made new before its page: "reset" (`resolver_connections_closed` says
    # how), "unopened" (the arm's stub, started after the client's counters last read, had opened none, or plain
    # DNS, which opens none: no reset needed), None (none needed: fresh, warm, or a reused browser past its first
    # visit that asks no names itself).
    resolver_connection_reset: str | None = None
    # On a web replayed from an archive (docs/replay.md): requests the archive could not answer, and those
    # answered with a recorded query string that differed. None: the place served no archive.
    replay_misses: int | None = None
    replay_fuzzy: int | None = None
    # Answers the replay could not give as recorded ({"url", "reason"}), and answers whose body was made up at
    # import (the HAR held none): a page whose own document was not replayed as recorded is the replay's
    # Infrastructure Failure.
    replay_errors: list[dict[str, str]] | None = None
    replay_filled: int | None = None
    replay_dns_misses: list[str] | None = None  # names the page asked that the archive does not hold (NXDOMAIN)
    # Today's web (harness/https_use.py): requests per HTTP version; the page's document over HTTP/3; the page's
    # hosts, and of those how many had their HTTPS record asked, answered and used; the same per host. None: not
    # observed (no HAR; no resolver log at the place).
    http_versions: dict[str, int] | None = None
    first_h3: bool | None = None
    page_hosts: int | None = None
    https_asked: int | None = None
    https_answered: int | None = None
    https_used: int | None = None
    ech_accepted: int | None = None  # page hosts whose connection accepted Encrypted Client Hello (None: no ECH)
    https_hosts: list[dict] | None = None

    def to_dict(self) -> dict:
        return asdict(self)
