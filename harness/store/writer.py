"""Everything a crawl writes to its store (`StoreWriter`), each write one `Transaction`.

The plan is written whole before the first visit (`add_study`, `add_plan`).
A visit is then either `planned` or `done`: `complete` writes its record in
one transaction, after its HAR file is in place (written and fsynced), so a
visit is in the store complete with its HAR or not at all, and a crawl
killed at any moment, or cut off by a power failure, resumes at the first
visit still planned. A block's timer records and its `blocks` row are one
transaction too: a block is timed whole or not at all.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from harness.errors import HarnessError
from harness.plan import PlannedVisit
from harness.protocols import names as protocol_names
from harness.store.records import CompletedVisit, select_one
from harness.store.schema import CRAWLER_SCHEMA, PLAN_COLUMNS
from harness.store.transaction import Transaction

#: The columns of `timings` a timer record is stored in, in the table's order.
TIMING_COLUMNS = (
    "study_id",
    "block",
    "network",
    "resolver",
    "protocol",
    "name",
    "type",
    "start",
    "duration_us",
    "new_connection",
    "tcp_setup_us",
    "tls_setup_us",
    "rcode",
    "answers",
    "status",
    "transport",
    "error",
    "record",
    "vantage_point",
)


def _insert(table: str, columns: tuple[str, ...], verb: str = "INSERT") -> str:
    """An INSERT of ``columns`` whose values are the named parameters of the same names."""
    return f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({', '.join(':' + c for c in columns)})"


class StoreWriter:
    """The writing side of a `Store`: the study, its plan, visits done, link checks, timer runs, the crawler."""

    db: sqlite3.Connection

    def record_protocols(self) -> None:
        """The registry's protocols in table order, for readers that order configurations (`meta.protocols`).

        Written by the crawl (a writer), not on every open: a reader such as `study check --measured` must not
        take a write lock on a store another crawl is using.
        """
        order = json.dumps(protocol_names())
        row = select_one(self.db, "SELECT value FROM meta WHERE key = 'protocols'")
        if row is None or row["value"] != order:
            with Transaction(self.db):
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('protocols', :order)", {"order": order})

    def plan_id(self) -> str:
        """This store's own random id, made on first use: what tells its broker tasks from another store's."""
        sql = "SELECT value FROM meta WHERE key = 'plan_id'"
        row = select_one(self.db, sql)
        if row is not None:
            return str(row["value"])
        with Transaction(self.db):
            self.db.execute(
                "INSERT OR IGNORE INTO meta VALUES ('plan_id', :plan_id)", {"plan_id": uuid.uuid4().hex[:12]}
            )
        made = select_one(self.db, sql)
        assert made is not None  # just written
        return str(made["value"])

    # -- studies and plans ---------------------------------------------------

    def add_study(self, study_id: str, name: str, seed: int, config: dict, plan: Iterable[PlannedVisit] = ()) -> int:
        """Write a study and its whole plan in one transaction; returns how many visits were planned."""
        with Transaction(self.db):
            self.db.execute(
                "INSERT INTO studies (study_id, name, seed, config) VALUES (:study_id, :name, :seed, :config)",
                {"study_id": study_id, "name": name, "seed": seed, "config": json.dumps(config, sort_keys=True)},
            )
            return self._insert_plan(study_id, plan)

    def add_plan(self, study_id: str, plan: Iterable[PlannedVisit]) -> int:
        """Write every planned visit in one transaction; returns how many."""
        with Transaction(self.db):
            return self._insert_plan(study_id, plan)

    def extend_plan(self, study_id: str, config: dict, plan: Iterable[PlannedVisit]) -> int:
        """Add visits to a study's plan and replace its configuration, in one transaction (a vantage point added
        mid-study: killed half-way, the store would otherwise plan it twice on the next start)."""
        with Transaction(self.db):
            self.db.execute(
                "UPDATE studies SET config = :config WHERE study_id = :study_id",
                {"config": json.dumps(config, sort_keys=True), "study_id": study_id},
            )
            return self._insert_plan(study_id, plan)

    def _insert_plan(self, study_id: str, plan: Iterable[PlannedVisit]) -> int:
        """Insert planned visits inside the caller's transaction; how many."""
        rows = (
            {
                "ordinal": v.ordinal,
                "study_id": study_id,
                "round": v.round,
                "block": v.block,
                "network": v.network,
                "rank": v.site.rank,
                "site": v.site.domain,
                "site_group": v.site.group,
                "resolver": v.resolver,
                "protocol": v.protocol,
                "vantage_point": v.vantage_point,
                "browser": v.browser,
            }
            for v in plan
        )
        before = self.db.total_changes
        self.db.executemany(_insert("visits", PLAN_COLUMNS), rows)
        return self.db.total_changes - before

    def record_environment(self, study_id: str, values: dict[str, str]) -> None:
        """Facts about the run (Firefox, kernel, shaping backend, ...); a fact already recorded is kept once."""
        with Transaction(self.db):
            self.db.executemany(
                "INSERT OR IGNORE INTO environment (study_id, key, value) VALUES (:study_id, :key, :value)",
                [{"study_id": study_id, "key": k, "value": str(v)} for k, v in values.items()],
            )

    def started_at(self, study_id: str, now: float) -> float:
        """When the crawl first started (``now`` if this is its first start)."""
        with Transaction(self.db):
            self.db.execute(
                "UPDATE studies SET started_at = :now WHERE study_id = :study_id AND started_at IS NULL",
                {"now": now, "study_id": study_id},
            )
            row = select_one(self.db, "SELECT started_at FROM studies WHERE study_id = :study_id", study_id=study_id)
            assert row is not None, f"no study {study_id} in the store"
            return float(row["started_at"])

    # -- visits done -----------------------------------------------------------------------------------------

    def complete(self, study_id: str, visit: PlannedVisit, record: dict, attempts: int = 0) -> None:
        """Mark ``visit`` done with its record, atomically. Its HAR file must already be in place."""
        self.complete_many(study_id, [CompletedVisit(visit, record, attempts)])

    def complete_many(self, study_id: str, done: list[CompletedVisit]) -> None:
        """Mark visits done with their records (and attempts) in one transaction; their HARs must be in place.

        A visit already done refuses the whole transaction (HarnessError): nothing is recorded twice.
        """
        for completed in done:
            har = completed.record.get("har_path")
            if har and not Path(har).exists():
                visit_id = completed.record.get("visit_id")
                raise HarnessError(f"visit {visit_id}: HAR {har} is missing; not recording the visit")
        with Transaction(self.db):
            for completed in done:
                self._complete_one(study_id, completed)

    def _complete_one(self, study_id: str, completed: CompletedVisit) -> None:
        """One visit planned -> done, inside the caller's transaction; HarnessError if it was done before."""
        columns = _visit_columns(completed.record)
        assignments = ", ".join(f"{name} = :{name}" for name in columns)  # our own column names, never data
        done = self.db.execute(
            f"UPDATE visits SET status = 'done', attempts = :attempts, {assignments} "
            "WHERE study_id = :study_id AND ordinal = :ordinal AND status = 'planned'",
            {**columns, "attempts": completed.attempts, "study_id": study_id, "ordinal": completed.visit.ordinal},
        )
        if done.rowcount != 1:
            raise HarnessError(
                f"visit {completed.visit.ordinal} of study {study_id} is not planned: it was done before"
            )

    # -- network blocks ----------------------------------------------------------------------------------------

    def add_link_check(self, study_id: str, block: int, network: str, check: dict) -> None:
        """A `net check` at the start of a block (its JSON as `net check` gives it)."""
        with Transaction(self.db):
            self.db.execute(
                "INSERT INTO link_checks (study_id, block, network, backend, problem, record) "
                "VALUES (:study_id, :block, :network, :backend, :problem, :record)",
                {
                    "study_id": study_id,
                    "block": block,
                    "network": network,
                    "backend": check.get("backend"),
                    "problem": check.get("problem"),
                    "record": json.dumps(check),
                },
            )

    def add_block_timings(
        self,
        study_id: str,
        block: int,
        network: str,
        hostnames: int,
        timings: Iterable[dict],
        problem: str | None = None,
        har_problems: list[str] | None = None,
    ) -> None:
        """A block's timer records and the mark that the block is timed, in one transaction.

        ``har_problems``: the block's HARs the timer could not read (one line each), kept with the block.
        """
        timings = list(timings)
        with Transaction(self.db):
            place = select_one(
                self.db,
                "SELECT vantage_point FROM visits WHERE study_id = :study_id AND block = :block LIMIT 1",
                study_id=study_id,
                block=block,
            )
            where = {"study_id": study_id, "block": block, "network": network}
            where["vantage_point"] = place["vantage_point"] if place else ""
            self.db.executemany(_insert("timings", TIMING_COLUMNS), [_timing_row(where, t) for t in timings])
            self.db.execute(
                "INSERT INTO blocks (study_id, block, network, hostnames, timer_problem, har_problems) "
                "VALUES (:study_id, :block, :network, :hostnames, :timer_problem, :har_problems)",
                {
                    "study_id": study_id,
                    "block": block,
                    "network": network,
                    "hostnames": hostnames,
                    "timer_problem": problem,
                    "har_problems": json.dumps(har_problems) if har_problems else None,
                },
            )

    # -- the crawler's record ------------------------------------------------------------------------------

    def crawler_started(self, study_id: str) -> None:
        """Record this process as the study's running crawler (pid, its start tick, boot ID, host name)."""
        from harness.process_identity import (
            identity,  # imported when used: it brings pyroute2, which readers never need
        )

        me = identity(os.getpid())
        assert me is not None  # this very process runs
        with Transaction(self.db):
            self.db.execute(CRAWLER_SCHEMA)  # an older store gets the table from its first crawl
            self.db.execute(
                "INSERT OR REPLACE INTO crawler (study_id, pid, pid_started, boot_id, hostname, started_at) "
                "VALUES (:study_id, :pid, :pid_started, :boot_id, :hostname, :started_at)",
                {
                    "study_id": study_id,
                    "pid": me.pid,
                    "pid_started": me.pid_started,
                    "boot_id": me.boot_id,
                    "hostname": me.hostname,
                    "started_at": time.time(),
                },
            )

    def crawler_ended(self, study_id: str, ending: str) -> None:
        """Mark the study's crawler as ended, and how. Never raises: it runs while the crawl ends, maybe on an error
        (a full disk) that must not be hidden behind this one."""
        try:
            with Transaction(self.db):
                self.db.execute(
                    "UPDATE crawler SET ended_at = :ended_at, ending = :ending "
                    "WHERE study_id = :study_id AND pid = :pid",
                    {"ended_at": time.time(), "ending": ending, "study_id": study_id, "pid": os.getpid()},
                )
        except sqlite3.Error:
            pass


def _timing_row(where: dict, t: dict) -> dict:
    """One timer record as a `timings` row of the block ``where`` (study, block, network, vantage point)."""
    return {
        **where,
        "resolver": t["resolver"],
        "protocol": t["protocol"],
        "name": t["name"],
        "type": t["type"],
        "start": t["start"],
        "duration_us": t.get("duration_us"),
        "new_connection": int(bool(t.get("new_connection"))),
        "tcp_setup_us": t.get("tcp_setup_us"),
        "tls_setup_us": t.get("tls_setup_us"),
        "rcode": t.get("rcode"),
        "answers": t.get("answers"),
        "status": t["status"],
        "transport": t.get("transport"),
        "error": t.get("error"),
        "record": json.dumps(t),
    }


def _count(items: list | None) -> int | None:
    """How many items a record's list holds (None where the record has no such list)."""
    return None if items is None else len(items)


def _on_off(value: object) -> str:
    """A condition's boolean as the store keeps it: "on", "off", or "" where the record does not say."""
    return "" if value is None else "on" if value else "off"


def _flag(value: bool | None) -> int | None:
    """A yes/no/unknown as SQLite holds it."""
    return None if value is None else int(value)


def _visit_columns(record: dict) -> dict:
    """The `visits` columns a done visit's record fills (the whole record goes in `record`)."""
    return {
        "visit_id": record["visit_id"],
        "started_at": record["started_at"],
        "error_class": record["error_class"],
        "detail": record["detail"],
        "paper_2019": record["paper_2019"],
        "counted": int(record["counted"]),
        "on_load_ms": record["on_load_ms"],
        "har_path": record.get("har_path"),
        "record": json.dumps(record),
        "fcp_ms": record.get("fcp_ms"),
        "lcp_ms": record.get("lcp_ms"),
        # DOMContentLoaded counts as a load metric of Successful visits only, like onLoad.
        "dcl_ms": record.get("on_content_load_ms") if record["on_load_ms"] is not None else None,
        "browser_session": record.get("browser_session", "fresh"),
        "session_ordinal": record.get("session_ordinal"),
        "resolver_connection": record.get("resolver_connection", "cold"),
        "resolver_handshakes": record.get("resolver_handshakes"),
        "first_query_open": _flag(record.get("first_query_open")),
        "replay_misses": record.get("replay_misses"),
        "replay_fuzzy": record.get("replay_fuzzy"),
        "replay_errors": _count(record.get("replay_errors")),
        "replay_filled": record.get("replay_filled"),
        "replay_dns_misses": _count(record.get("replay_dns_misses")),
        "first_h3": _flag(record.get("first_h3")),
        "page_http3": _on_off(record.get("page_http3")),
        "page_hosts": record.get("page_hosts"),
        "https_asked": record.get("https_asked"),
        "https_answered": record.get("https_answered"),
        "https_used": record.get("https_used"),
        "ech_accepted": record.get("ech_accepted"),
        "dns_unsettled": _dns_unsettled(record.get("browser_ready")),
        "resolver_connection_reset": record.get("resolver_connection_reset"),
        "own_lookups_before_page": _browser_dns(record).get("own_lookups_before_page"),
    }


def _browser_dns(record: dict) -> dict:
    """What a Chromium's net log said of the visit's DNS (`browser_dns.values.dns`), {} where nothing did."""
    return (((record.get("browser_dns") or {}).get("values") or {}).get("dns")) or {}


def _dns_unsettled(ready: dict | None) -> int | None:
    """The DNS queries a reused browser still had in flight when its waits ended (None: no wait was recorded)."""
    waits = [ready[k] for k in ("dns_in_flight_before", "dns_in_flight_after") if k in ready] if ready else []
    return sum(waits) if waits else None
