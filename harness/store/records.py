"""The named records the store takes and hands out: rows never leave it as positional tuples.

Each is a frozen dataclass named for what it is, its fields named as the
columns they come from; `dataclasses.asdict` gives the dict `dnsstudy
status --json` prints. `select` and `select_one` are how the store's own
queries read rows: by column name (`sqlite3.Row`), with named parameters.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from harness.plan import PlannedVisit


def select(db: sqlite3.Connection, sql: str, **params: Any) -> list[sqlite3.Row]:
    """Every row of a query, read by column name; ``params`` fill its named parameters (``:study_id``)."""
    cursor = db.cursor()
    cursor.row_factory = sqlite3.Row
    return cursor.execute(sql, params).fetchall()


def select_one(db: sqlite3.Connection, sql: str, **params: Any) -> sqlite3.Row | None:
    """The first row of a query (None if it has none), read by column name, as `select` reads them."""
    cursor = db.cursor()
    cursor.row_factory = sqlite3.Row
    row: sqlite3.Row | None = cursor.execute(sql, params).fetchone()
    return row


# -- the plan and the crawl's progress ------------------------------------------------------------------------


@dataclass(frozen=True)
class VisitCounts:
    """Visits done, and planned in all (of a study, or of one vantage point)."""

    done: int
    total: int


@dataclass(frozen=True)
class PlanEntry:
    """A visit of the plan, and whether it is done."""

    visit: PlannedVisit
    done: bool


@dataclass(frozen=True)
class PlanEnd:
    """The next free ordinal and block of a plan: where a vantage point added mid-study starts its part."""

    ordinal: int
    block: int


@dataclass(frozen=True)
class CompletedVisit:
    """A visit to record as done: its record (the visit JSON) and the harness failures retried before it."""

    visit: PlannedVisit
    record: dict
    attempts: int = 0


@dataclass(frozen=True)
class NetworkBlock:
    """A network block of the plan: consecutive visits on one network."""

    block: int
    network: str


@dataclass(frozen=True)
class SuccessCount:
    """Of one configuration's visits done: how many were Successful, and how many count."""

    successful: int
    counted: int


@dataclass(frozen=True)
class RecentVisit:
    """A done visit's start (ISO, UTC) and wall time in seconds (None in a record from before `wall_s`)."""

    started_at: str
    wall_s: float | None


# -- what `dnsstudy status` shows ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplayCounts:
    """What the visits done on a replayed web met (docs/replay.md): summed over the study's visits."""

    visits: int
    misses: int
    dns_misses: int
    fuzzy: int
    errors: int
    filled: int


@dataclass(frozen=True)
class ConfigurationCounts:
    """One (resolver, protocol) configuration: visits done, planned in all, Successful, and counted."""

    resolver: str
    protocol: str
    done: int
    visits: int
    successful: int
    counted: int


@dataclass(frozen=True)
class CrawlerRecord:
    """The study's last crawler as `crawler` holds it (harness/process_identity.py tells whether it is alive)."""

    study_id: str
    pid: int
    pid_started: int  # its start in clock ticks since boot: tells a reused pid
    boot_id: str
    hostname: str
    started_at: float  # Unix times
    ended_at: float | None  # None: running, or killed
    ending: str | None  # finished, stopped by a signal, halted: ..., crashed: ...


@dataclass(frozen=True)
class LinkCheck:
    """A `net check` at the start of a block: when, by which backend, its problem and its verdicts."""

    checked_at: str
    backend: str | None
    problem: str | None
    verdicts: dict[str, bool | None]


@dataclass(frozen=True)
class TimerRun:
    """A block's stored timer run: hostnames timed, its problem, and when it was stored."""

    hostnames: int
    problem: str | None
    timed_at: str


@dataclass(frozen=True)
class BlockOverview:
    """A network block: its round and network, visits done and planned, its link checks and its timer run."""

    block: int
    round: int
    network: str
    done: int
    visits: int
    link_checks: list[LinkCheck]
    timer: TimerRun | None


@dataclass(frozen=True)
class FailedVisit:
    """A done visit that failed: where and what it was, and its failure."""

    ordinal: int
    block: int
    network: str
    site: str
    resolver: str
    protocol: str
    started_at: str
    error_class: str
    detail: str | None


@dataclass(frozen=True)
class HarnessFailure(FailedVisit):
    """A visit a harness failure hit: also how many were retried (``attempts``) and their classes and details."""

    attempts: int
    retried: list[dict]
