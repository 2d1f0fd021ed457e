"""What `dnsstudy status` and the crawl's progress line read from a store (`StatusQueries`), never writing it.

Each query is one statement; `snapshot` holds them in one read transaction,
so every figure of a report comes from the same moment. With WAL (the
store's journal mode) a read transaction never blocks the crawler.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from harness.store.records import (
    BlockOverview,
    ConfigurationCounts,
    CrawlerRecord,
    FailedVisit,
    HarnessFailure,
    LinkCheck,
    ReplayCounts,
    TimerRun,
    select,
    select_one,
)

#: The columns of a failed visit, as `FailedVisit` names them.
_FAILED_VISIT = "ordinal, block, network, site, resolver, protocol, started_at, error_class, detail"


class StatusQueries:
    """The reports' reads of a `Store`: its studies, their crawler, configurations, blocks and failures."""

    db: sqlite3.Connection

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction around the queries inside: every figure from the same moment."""
        self.db.execute("BEGIN")  # a read transaction only: it takes no write lock
        try:
            yield
        finally:
            self.db.execute("COMMIT")

    def journal_mode(self) -> str:
        """The store's journal mode (`wal` for a store a crawl wrote)."""
        return str(self.db.execute("PRAGMA journal_mode").fetchone()[0])

    def study_ids(self) -> list[str]:
        """Every study in the store, in the order they were created."""
        return [
            row["study_id"] for row in select(self.db, "SELECT study_id FROM studies ORDER BY created_at, study_id")
        ]

    def crawler(self, study_id: str) -> CrawlerRecord | None:
        """The study's last crawler record (None if no crawl recorded itself)."""
        try:
            row = select_one(
                self.db,
                "SELECT study_id, pid, pid_started, boot_id, hostname, started_at, ended_at, ending FROM crawler "
                "WHERE study_id = :study_id",
                study_id=study_id,
            )
        except sqlite3.OperationalError:  # a store no crawl has started since the table came
            return None
        return CrawlerRecord(**dict(row)) if row else None

    def places(self, study_id: str) -> list[str]:
        """Where the study's crawls ran, as their environment records it ("lab:dsl"), first recorded first."""
        rows = select(
            self.db,
            "SELECT value FROM environment WHERE study_id = :study_id AND key = 'place' ORDER BY recorded_at, value",
            study_id=study_id,
        )
        return [row["value"] for row in rows]

    def configuration_counts(self, study_id: str) -> list[ConfigurationCounts]:
        """Visits done, planned in all, successful and counted, per configuration."""
        rows = select(
            self.db,
            "SELECT resolver, protocol, SUM(status = 'done') AS done, COUNT(*) AS visits, "
            "COALESCE(SUM(error_class = 'Successful'), 0) AS successful, COALESCE(SUM(counted), 0) AS counted "
            "FROM visits WHERE study_id = :study_id GROUP BY resolver, protocol",
            study_id=study_id,
        )
        return [ConfigurationCounts(**dict(row)) for row in rows]

    def replay_counts(self, study_id: str) -> ReplayCounts | None:
        """Misses, fuzzy matches, errors and filled bodies of the visits done on a replayed web (None: none)."""
        try:
            row = self._replay_row(study_id)
        except sqlite3.OperationalError:  # a store from before replay errors were counted, opened read-only
            return None
        return ReplayCounts(**dict(row)) if row and row["visits"] else None

    def _replay_row(self, study_id: str) -> sqlite3.Row | None:
        return select_one(
            self.db,
            "SELECT COUNT(*) AS visits, COALESCE(SUM(replay_misses), 0) AS misses, "
            "COALESCE(SUM(replay_dns_misses), 0) AS dns_misses, "
            "COALESCE(SUM(replay_fuzzy), 0) AS fuzzy, COALESCE(SUM(replay_errors), 0) AS errors, "
            "COALESCE(SUM(replay_filled), 0) AS filled "
            "FROM visits WHERE study_id = :study_id AND status = 'done' AND replay_misses IS NOT NULL",
            study_id=study_id,
        )

    def blocks_overview(self, study_id: str) -> list[BlockOverview]:
        """Per network block: round, network, visits done and planned, its link checks and its timer run."""
        checks = self._link_checks(study_id)
        timers = {
            row["block"]: TimerRun(row["hostnames"], row["timer_problem"], row["timed_at"])
            for row in select(
                self.db,
                "SELECT block, hostnames, timer_problem, timed_at FROM blocks WHERE study_id = :study_id",
                study_id=study_id,
            )
        }
        rows = select(
            self.db,
            "SELECT block, MIN(round) AS round, MIN(network) AS network, SUM(status = 'done') AS done, "
            "COUNT(*) AS visits FROM visits WHERE study_id = :study_id GROUP BY block ORDER BY block",
            study_id=study_id,
        )
        return [
            BlockOverview(**dict(row), link_checks=checks.get(row["block"], []), timer=timers.get(row["block"]))
            for row in rows
        ]

    def _link_checks(self, study_id: str) -> dict[int, list[LinkCheck]]:
        """The study's link checks per block, in the order they were made."""
        checks: dict[int, list[LinkCheck]] = {}
        for row in select(
            self.db,
            "SELECT block, checked_at, backend, problem, record FROM link_checks WHERE study_id = :study_id "
            "ORDER BY rowid",
            study_id=study_id,
        ):
            verdicts = json.loads(row["record"]).get("verdicts") or {}
            check = LinkCheck(row["checked_at"], row["backend"], row["problem"], verdicts)
            checks.setdefault(row["block"], []).append(check)
        return checks

    def harness_failures(self, study_id: str, limit: int) -> list[HarnessFailure]:
        """The last ``limit`` visits a harness failure hit (retried, or recorded as an Infrastructure Failure)."""
        rows = select(
            self.db,
            f"SELECT {_FAILED_VISIT}, attempts, json_extract(record, '$.retried') AS retried FROM visits "
            "WHERE study_id = :study_id AND status = 'done' "
            "AND (attempts > 0 OR error_class = 'Infrastructure Failure') ORDER BY ordinal DESC LIMIT :limit",
            study_id=study_id,
            limit=limit,
        )
        return [HarnessFailure(**{**dict(row), "retried": json.loads(row["retried"] or "[]")}) for row in rows]

    def counted_failures(self, study_id: str, limit: int) -> list[FailedVisit]:
        """The last ``limit`` visits that failed and count (DNS errors, page-load failures, ...)."""
        rows = select(
            self.db,
            f"SELECT {_FAILED_VISIT} FROM visits WHERE study_id = :study_id AND status = 'done' AND counted = 1 "
            "AND error_class != 'Successful' ORDER BY ordinal DESC LIMIT :limit",
            study_id=study_id,
            limit=limit,
        )
        return [FailedVisit(**dict(row)) for row in rows]

    def harness_failure_of(self, study_id: str, ordinal: int) -> str | None:
        """The last harness failure of one done visit, as one line (None if it had none): one row by its key."""
        row = select_one(
            self.db,
            "SELECT error_class, detail, json_extract(record, '$.retried') AS retried FROM visits "
            "WHERE study_id = :study_id AND ordinal = :ordinal",
            study_id=study_id,
            ordinal=ordinal,
        )
        if row is None:
            return None
        if row["error_class"] == "Infrastructure Failure":
            return f"{row['error_class']}: {row['detail']}" if row["detail"] else row["error_class"]
        retried = json.loads(row["retried"] or "[]")
        return f"{retried[-1]['error_class']}: {retried[-1]['detail']} (retried)" if retried else None
