"""The results store: one SQLite database per crawl, the only contract between harness and analysis.

SQLite in WAL mode, so a reader (analysis, a progress view) never blocks
the crawler and a crash loses at most the visit in flight. The schema is
versioned (`meta.schema_version`); a store of another version is refused
with a clear message rather than misread.

The plan is written whole before the first visit (`add_plan`). A visit is
then either `planned` or `done`: `complete` writes its record in one
transaction, after its HAR file is in place, so a visit is in the store
complete with its HAR or not at all, and a crawl killed at any moment
resumes at the first visit still planned.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from harness.errors import HarnessError
from harness.plan import PlannedVisit
from harness.protocols import names as protocol_names
from harness.sitelist import Site

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE studies (
    study_id TEXT PRIMARY KEY, name TEXT NOT NULL, seed INTEGER NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    started_at REAL,                            -- Unix time of the first crawl: rounds are spread from here
    config TEXT NOT NULL                        -- the study file and the list it resolved to, as JSON
);
CREATE TABLE environment (                      -- Firefox, geckodriver, kernel, shaping backend, ...
    study_id TEXT NOT NULL REFERENCES studies, key TEXT NOT NULL, value TEXT NOT NULL,
    recorded_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (study_id, key, value)
);
CREATE TABLE visits (
    ordinal INTEGER NOT NULL,                   -- run order
    study_id TEXT NOT NULL REFERENCES studies,
    round INTEGER NOT NULL, block INTEGER NOT NULL, network TEXT NOT NULL,
    rank INTEGER NOT NULL, site TEXT NOT NULL, site_group TEXT NOT NULL,
    resolver TEXT NOT NULL, protocol TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'planned' CHECK (status IN ('planned', 'done')),
    attempts INTEGER NOT NULL DEFAULT 0,        -- infrastructure failures retried before this record
    visit_id TEXT UNIQUE, started_at TEXT,
    error_class TEXT, detail TEXT, paper_2019 TEXT, counted INTEGER,
    on_load_ms REAL, har_path TEXT,
    record TEXT,                                -- the full visit record, as JSON
    PRIMARY KEY (study_id, ordinal)
);
CREATE INDEX visits_todo ON visits (study_id, status, ordinal);
CREATE TABLE timings (                          -- one resolution-timer record each
    study_id TEXT NOT NULL REFERENCES studies, block INTEGER, network TEXT NOT NULL,
    resolver TEXT NOT NULL, protocol TEXT NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL,
    start REAL NOT NULL, duration_us INTEGER, new_connection INTEGER NOT NULL,
    tcp_setup_us INTEGER, tls_setup_us INTEGER, rcode INTEGER, answers INTEGER,
    status TEXT NOT NULL, transport TEXT, error TEXT, record TEXT NOT NULL
);
CREATE TABLE link_checks (                      -- a `net check` at the start of a network block (again on resume)
    study_id TEXT NOT NULL REFERENCES studies, block INTEGER NOT NULL, network TEXT NOT NULL,
    checked_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    backend TEXT, problem TEXT, record TEXT NOT NULL
);
CREATE INDEX link_checks_block ON link_checks (study_id, block);
CREATE TABLE blocks (                           -- a network block whose timer run is stored
    study_id TEXT NOT NULL REFERENCES studies, block INTEGER NOT NULL, network TEXT NOT NULL,
    hostnames INTEGER NOT NULL, timer_problem TEXT,
    timed_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (study_id, block)
);
"""

_PLAN_COLUMNS = "ordinal, study_id, round, block, network, rank, site, site_group, resolver, protocol"


class Store:
    """One crawl's database."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists()
        self.db = sqlite3.connect(self.path, isolation_level=None)  # explicit transactions only
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
        except sqlite3.DatabaseError as exc:
            raise HarnessError(f"{self.path}: not a dnsstudy store ({exc})") from None
        self.db.execute("PRAGMA synchronous=FULL")  # a committed visit survives a power cut, not just a kill
        self.db.execute("PRAGMA foreign_keys=ON")
        if not new:  # a store killed while being created is an empty database: create it again
            new = self.db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0
        if new:
            with self._transaction():
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        self.db.execute(statement)
                self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        self._check_version()

    def record_protocols(self) -> None:
        """The registry's protocols in table order, for readers that order configurations (`meta.protocols`).

        Written by the crawl (a writer), not on every open: a reader such as `study check --measured` must not
        take a write lock on a store another crawl is using.
        """
        order = json.dumps(protocol_names())
        row = self.db.execute("SELECT value FROM meta WHERE key = 'protocols'").fetchone()
        if row is None or row[0] != order:
            with self._transaction():
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('protocols', ?)", (order,))

    def _check_version(self) -> None:
        try:
            row = self.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise HarnessError(f"{self.path}: not a dnsstudy store ({exc})") from None
        if row is None or int(row[0]) != SCHEMA_VERSION:
            found = row[0] if row else "none"
            raise HarnessError(f"{self.path}: store schema version {found}, this dnsstudy reads {SCHEMA_VERSION}")

    def _transaction(self):
        return _Transaction(self.db)

    def close(self) -> None:
        self.db.close()

    # -- studies and plans ---------------------------------------------------

    def add_study(self, study_id: str, name: str, seed: int, config: dict, plan: Iterable[PlannedVisit] = ()) -> int:
        """Write a study and its whole plan in one transaction; returns how many visits were planned."""
        with self._transaction():
            self.db.execute(
                "INSERT INTO studies (study_id, name, seed, config) VALUES (?, ?, ?, ?)",
                (study_id, name, seed, json.dumps(config, sort_keys=True)),
            )
            return self._insert_plan(study_id, plan)

    def add_plan(self, study_id: str, plan: Iterable[PlannedVisit]) -> int:
        """Write every planned visit in one transaction; returns how many."""
        with self._transaction():
            return self._insert_plan(study_id, plan)

    def _insert_plan(self, study_id: str, plan: Iterable[PlannedVisit]) -> int:
        rows = (
            (
                v.ordinal,
                study_id,
                v.round,
                v.block,
                v.network,
                v.site.rank,
                v.site.domain,
                v.site.group,
                v.resolver,
                v.protocol,
            )
            for v in plan
        )
        before = self.db.total_changes
        self.db.executemany(f"INSERT INTO visits ({_PLAN_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
        return self.db.total_changes - before

    def record_environment(self, study_id: str, values: dict[str, str]) -> None:
        with self._transaction():
            self.db.executemany(
                "INSERT OR IGNORE INTO environment (study_id, key, value) VALUES (?, ?, ?)",
                [(study_id, k, str(v)) for k, v in values.items()],
            )

    # -- the crawl's progress ---------------------------------------------------

    def next_planned(self, study_id: str) -> PlannedVisit | None:
        """The first visit not yet done, in plan order."""
        row = self.db.execute(
            f"SELECT {_PLAN_COLUMNS} FROM visits WHERE study_id = ? AND status = 'planned' ORDER BY ordinal LIMIT 1",
            (study_id,),
        ).fetchone()
        if row is None:
            return None
        ordinal, _, round_, block, network, rank, site, group, resolver, protocol = row
        return PlannedVisit(ordinal, round_, block, network, Site(site, rank, group), resolver, protocol)

    def complete(self, study_id: str, visit: PlannedVisit, record: dict, attempts: int = 0) -> None:
        """Mark ``visit`` done with its record, atomically. Its HAR file must already be in place."""
        har = record.get("har_path")
        if har and not Path(har).exists():
            raise HarnessError(f"visit {record.get('visit_id')}: HAR {har} is missing; not recording the visit")
        with self._transaction():
            done = self.db.execute(
                "UPDATE visits SET status = 'done', attempts = ?, visit_id = ?, started_at = ?, error_class = ?, "
                "detail = ?, paper_2019 = ?, counted = ?, on_load_ms = ?, har_path = ?, record = ? "
                "WHERE study_id = ? AND ordinal = ? AND status = 'planned'",
                (
                    attempts,
                    record["visit_id"],
                    record["started_at"],
                    record["error_class"],
                    record["detail"],
                    record["paper_2019"],
                    int(record["counted"]),
                    record["on_load_ms"],
                    har,
                    json.dumps(record),
                    study_id,
                    visit.ordinal,
                ),
            )
            if done.rowcount != 1:
                raise HarnessError(f"visit {visit.ordinal} of study {study_id} is not planned: it was done before")

    def study_config(self, study_id: str) -> dict | None:
        row = self.db.execute("SELECT config FROM studies WHERE study_id = ?", (study_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def started_at(self, study_id: str, now: float) -> float:
        """When the crawl first started (``now`` if this is its first start)."""
        with self._transaction():
            self.db.execute(
                "UPDATE studies SET started_at = ? WHERE study_id = ? AND started_at IS NULL", (now, study_id)
            )
            return self.db.execute("SELECT started_at FROM studies WHERE study_id = ?", (study_id,)).fetchone()[0]

    def add_link_check(self, study_id: str, block: int, network: str, check: dict) -> None:
        with self._transaction():
            self.db.execute(
                "INSERT INTO link_checks (study_id, block, network, backend, problem, record) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (study_id, block, network, check.get("backend"), check.get("problem"), json.dumps(check)),
            )

    def block_timed(self, study_id: str, block: int) -> bool:
        return (
            self.db.execute("SELECT 1 FROM blocks WHERE study_id = ? AND block = ?", (study_id, block)).fetchone()
            is not None
        )

    def untimed_blocks(self, study_id: str) -> list[tuple[int, str]]:
        """(block, network) of blocks whose visits are all done but whose timer run is not stored."""
        return self.db.execute(
            "SELECT block, MIN(network) FROM visits WHERE study_id = ? GROUP BY block "
            "HAVING SUM(status = 'planned') = 0 AND block NOT IN (SELECT block FROM blocks WHERE study_id = ?) "
            "ORDER BY block",
            (study_id, study_id),
        ).fetchall()

    def block_hars(self, study_id: str, block: int) -> list[str]:
        return [
            r[0]
            for r in self.db.execute(
                "SELECT har_path FROM visits WHERE study_id = ? AND block = ? AND har_path IS NOT NULL "
                "ORDER BY ordinal",
                (study_id, block),
            )
        ]

    def add_block_timings(
        self,
        study_id: str,
        block: int,
        network: str,
        hostnames: int,
        timings: Iterable[dict],
        problem: str | None = None,
    ) -> None:
        """A block's timer records and the mark that the block is timed, in one transaction."""
        rows = [
            (
                study_id,
                block,
                network,
                t["resolver"],
                t["protocol"],
                t["name"],
                t["type"],
                t["start"],
                t.get("duration_us"),
                int(bool(t.get("new_connection"))),
                t.get("tcp_setup_us"),
                t.get("tls_setup_us"),
                t.get("rcode"),
                t.get("answers"),
                t["status"],
                t.get("transport"),
                t.get("error"),
                json.dumps(t),
            )
            for t in timings
        ]
        with self._transaction():
            self.db.executemany(
                "INSERT INTO timings (study_id, block, network, resolver, protocol, name, type, start, "
                "duration_us, new_connection, tcp_setup_us, tls_setup_us, rcode, answers, status, "
                "transport, error, record) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                rows,
            )
            self.db.execute(
                "INSERT INTO blocks (study_id, block, network, hostnames, timer_problem) VALUES (?, ?, ?, ?, ?)",
                (study_id, block, network, hostnames, problem),
            )

    def visit_seconds(self, study_id: str | None = None) -> dict[str, list[float]]:
        """Wall time of every done visit, per network (from this study, or from every study in the store)."""
        rows = self.db.execute(
            "SELECT network, json_extract(record, '$.wall_s') FROM visits WHERE status = 'done' "
            "AND (? IS NULL OR study_id = ?)",
            (study_id, study_id),
        )
        times: dict[str, list[float]] = {}
        for network, wall in rows:
            if wall is not None:
                times.setdefault(network, []).append(float(wall))
        return times

    def success_by_configuration(self, study_id: str) -> dict[tuple[str, str], tuple[int, int]]:
        """(successful, counted) visits per (resolver, protocol) so far."""
        rows = self.db.execute(
            "SELECT resolver, protocol, SUM(error_class = 'Successful'), SUM(counted) FROM visits "
            "WHERE study_id = ? AND status = 'done' GROUP BY resolver, protocol",
            (study_id,),
        )
        return {(r, p): (ok or 0, n or 0) for r, p, ok, n in rows}

    def progress(self, study_id: str) -> tuple[int, int]:
        """(visits done, visits planned in all)."""
        done, total = self.db.execute(
            "SELECT SUM(status = 'done'), COUNT(*) FROM visits WHERE study_id = ?", (study_id,)
        ).fetchone()
        return done or 0, total

    def referenced_hars(self) -> set[str]:
        """HAR paths of done visits: any other HAR file in the results is an orphan of a killed visit."""
        return {r[0] for r in self.db.execute("SELECT har_path FROM visits WHERE har_path IS NOT NULL")}


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any exception."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind, value, tb) -> None:
        self.db.execute("ROLLBACK" if kind else "COMMIT")
