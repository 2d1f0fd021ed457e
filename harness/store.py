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
from harness.plan import PlannedVisit, Site

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE studies (
    study_id TEXT PRIMARY KEY, name TEXT NOT NULL, seed INTEGER NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    config TEXT NOT NULL                        -- the study file, as JSON
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
CREATE TABLE link_checks (                      -- one `net check` per network block
    study_id TEXT NOT NULL REFERENCES studies, block INTEGER NOT NULL, network TEXT NOT NULL,
    checked_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    backend TEXT, problem TEXT, record TEXT NOT NULL, PRIMARY KEY (study_id, block)
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
        if new:
            with self._transaction():
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        self.db.execute(statement)
                self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        self._check_version()

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

    def add_study(self, study_id: str, name: str, seed: int, config: dict) -> None:
        with self._transaction():
            self.db.execute("INSERT INTO studies (study_id, name, seed, config) VALUES (?, ?, ?, ?)",
                            (study_id, name, seed, json.dumps(config, sort_keys=True)))

    def has_study(self, study_id: str) -> bool:
        return self.db.execute("SELECT 1 FROM studies WHERE study_id = ?", (study_id,)).fetchone() is not None

    def add_plan(self, study_id: str, plan: Iterable[PlannedVisit]) -> int:
        """Write every planned visit in one transaction; returns how many."""
        rows = ((v.ordinal, study_id, v.round, v.block, v.network, v.site.rank, v.site.domain, v.site.group,
                 v.resolver, v.protocol) for v in plan)
        with self._transaction():
            before = self.db.total_changes
            self.db.executemany(f"INSERT INTO visits ({_PLAN_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
            return self.db.total_changes - before

    def record_environment(self, study_id: str, values: dict[str, str]) -> None:
        with self._transaction():
            self.db.executemany("INSERT OR IGNORE INTO environment (study_id, key, value) VALUES (?, ?, ?)",
                                [(study_id, k, str(v)) for k, v in values.items()])

    # -- the crawl's progress ---------------------------------------------------

    def next_planned(self, study_id: str) -> PlannedVisit | None:
        """The first visit not yet done, in plan order."""
        row = self.db.execute(f"SELECT {_PLAN_COLUMNS} FROM visits WHERE study_id = ? AND status = 'planned' "
                              "ORDER BY ordinal LIMIT 1", (study_id,)).fetchone()
        if row is None:
            return None
        ordinal, _, round_, block, network, rank, site, group, resolver, protocol = row
        return PlannedVisit(ordinal, round_, block, network, Site(rank, site, group), resolver, protocol)

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
                (attempts, record["visit_id"], record["started_at"], record["error_class"], record["detail"],
                 record["paper_2019"], int(record["counted"]), record["on_load_ms"], har,
                 json.dumps(record), study_id, visit.ordinal))
            if done.rowcount != 1:
                raise HarnessError(f"visit {visit.ordinal} of study {study_id} is not planned: it was done before")

    def progress(self, study_id: str) -> tuple[int, int]:
        """(visits done, visits planned in all)."""
        done, total = self.db.execute("SELECT SUM(status = 'done'), COUNT(*) FROM visits WHERE study_id = ?",
                                      (study_id,)).fetchone()
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
