"""The results store: one SQLite database per crawl, the only contract between harness and analysis.

SQLite in WAL mode, so a reader (analysis, a progress view) never blocks
the crawler and a crash loses at most the visit in flight. The schema is
versioned (`meta.schema_version`); a store of another version is refused
with a clear message rather than misread.

The plan is written whole before the first visit (`add_plan`). A visit is
then either `planned` or `done`: `complete` writes its record in one
transaction, after its HAR file is in place (written and fsynced), so a
visit is in the store complete with its HAR or not at all, and a crawl
killed at any moment, or cut off by a power failure, resumes at the first
visit still planned.

HAR paths are absolute, under the results directory the store records
(`meta.results_dir`); a store found in another directory is refused until
the crawl is told it was moved (`adopt_results_dir`).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from harness.browser.har import fsync_directory
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
    fcp_ms REAL, lcp_ms REAL, dcl_ms REAL,      -- First and Largest Contentful Paint, DOMContentLoaded (Successful)
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
    har_problems TEXT,                          -- JSON list: the block's HARs the timer could not read, and why
    PRIMARY KEY (study_id, block)
);
"""

#: Columns added to schema version 1 after stores of it existed: (table, column, declaration).
#: A store without one gets it when it is opened (readers of version 1 ignore columns they do not know).
ADDED_COLUMNS = [
    ("blocks", "har_problems", "TEXT"),
    ("visits", "fcp_ms", "REAL"),
    ("visits", "lcp_ms", "REAL"),
    ("visits", "dcl_ms", "REAL"),
    # Where the visit or timing ran: a study's vantage point, "" for a single-host study.
    ("visits", "vantage_point", "TEXT NOT NULL DEFAULT ''"),
    ("timings", "vantage_point", "TEXT NOT NULL DEFAULT ''"),
]
#: Indexes on added columns, created with them.
ADDED_INDEXES = ["CREATE INDEX IF NOT EXISTS visits_place_todo ON visits (study_id, vantage_point, status, ordinal)"]

#: SQLite's primary result code for "database or disk is full".
SQLITE_FULL = 13
#: Below this much free space an SQLite I/O error is taken for a full disk (its errno is not reported).
NEARLY_FULL_BYTES = 1 << 20

_PLAN_COLUMNS = "ordinal, study_id, round, block, network, rank, site, site_group, resolver, protocol, vantage_point"

#: The crawl running on a study, or the last one that ran (harness/crawler.py tells whether it is alive).
#: Created by the first crawl that starts, so stores from before it are read as they are.
CRAWLER_SCHEMA = """
CREATE TABLE IF NOT EXISTS crawler (
    study_id TEXT PRIMARY KEY REFERENCES studies,
    pid INTEGER NOT NULL, pid_started INTEGER NOT NULL, -- its start in clock ticks since boot: tells a reused pid
    boot_id TEXT NOT NULL, hostname TEXT NOT NULL,
    started_at REAL NOT NULL, ended_at REAL,         -- Unix times; no end: running, or killed
    ending TEXT                                      -- finished, stopped by a signal, halted: ..., crashed: ...
)
"""


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
        self._add_missing_columns()

    def _add_missing_columns(self) -> None:
        """Give a store from before a column was added that column (empty for the rows it already has)."""
        for table, column, declaration in ADDED_COLUMNS:
            have = {row[1] for row in self.db.execute(f"PRAGMA table_info({table})")}
            if column in have:
                continue
            try:
                with self._transaction():
                    self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
            except sqlite3.OperationalError:
                pass  # a read-only store (a copy being analysed): readers do not need the column
        for statement in ADDED_INDEXES:
            try:
                self.db.execute(statement)
            except sqlite3.OperationalError:
                pass  # read-only, as above

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

    def results_dir(self) -> Path | None:
        """The directory the store's HARs are under (`meta.results_dir`), None for a store from before it."""
        row = self.db.execute("SELECT value FROM meta WHERE key = 'results_dir'").fetchone()
        return Path(row[0]) if row else None

    def adopt_results_dir(self, results_dir: Path, moved: bool = False) -> int:
        """Check that the store's HARs are recorded in ``results_dir``/hars (absolute), before a crawl writes there.

        A store whose recorded directory is another one was moved or copied: refused in one line unless
        ``moved``, and then its HAR paths are rewritten to the new directory in one transaction (so are
        relative paths of stores from before `meta.results_dir`). Returns how many paths were rewritten.
        """
        results_dir = Path(os.path.realpath(results_dir))
        recorded = self.results_dir()
        if recorded == results_dir:
            return 0
        if recorded is not None and not moved:
            raise HarnessError(
                f"{self.path} holds the HARs of {recorded}, not of {results_dir}: if the results directory was "
                "moved or copied here, run the crawl again with --moved (its HAR paths are then rewritten)"
            )
        hars = results_dir / "hars"
        rows = self.db.execute("SELECT study_id, ordinal, har_path FROM visits WHERE har_path IS NOT NULL").fetchall()
        if recorded is None and not moved:
            # A store from before `meta.results_dir`: absolute paths must already be here; relative ones (a
            # crawl given a relative --store) were relative to a working directory nobody remembers.
            elsewhere = [
                p for _, _, p in rows if Path(p).is_absolute() and os.path.realpath(Path(p).parent) != str(hars)
            ]
            if elsewhere:
                raise HarnessError(
                    f"{self.path} holds HARs in {Path(elsewhere[0]).parent}, not in {hars}: if the results "
                    "directory was moved or copied here, run the crawl again with --moved"
                )
        # A HAR is always <results>/hars/<visit>.har.gz: its name says where it is now.
        changes = [
            (str(hars / Path(p).name), sid, ordinal) for sid, ordinal, p in rows if p != str(hars / Path(p).name)
        ]
        with self._transaction():
            self.db.executemany(
                "UPDATE visits SET har_path = ?1, record = json_set(record, '$.har_path', ?1) "
                "WHERE study_id = ?2 AND ordinal = ?3",
                changes,
            )
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('results_dir', ?)", (str(results_dir),))
        return len(changes)

    def _check_version(self) -> None:
        try:
            row = self.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise HarnessError(f"{self.path}: not a dnsstudy store ({exc})") from None
        if row is None or int(row[0]) != SCHEMA_VERSION:
            found = row[0] if row else "none"
            raise HarnessError(f"{self.path}: store schema version {found}, this dnsstudy reads {SCHEMA_VERSION}")

    def _transaction(self) -> _Transaction:
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
                v.vantage_point,
            )
            for v in plan
        )
        before = self.db.total_changes
        self.db.executemany(f"INSERT INTO visits ({_PLAN_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
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
        return None if row is None else _planned(row)

    def planned_at(self, study_id: str, vantage_point: str, limit: int) -> list[PlannedVisit]:
        """The first ``limit`` visits a vantage point has not done, in plan order."""
        rows = self.db.execute(
            f"SELECT {_PLAN_COLUMNS} FROM visits WHERE study_id = ? AND vantage_point = ? AND status = 'planned' "
            "ORDER BY ordinal LIMIT ?",
            (study_id, vantage_point, limit),
        )
        return [_planned(row) for row in rows]

    def planned_visit(self, study_id: str, ordinal: int) -> tuple[PlannedVisit, bool] | None:
        """A visit of the plan by ordinal, and whether it is done (None if the plan has no such visit)."""
        row = self.db.execute(
            f"SELECT {_PLAN_COLUMNS}, status FROM visits WHERE study_id = ? AND ordinal = ?", (study_id, ordinal)
        ).fetchone()
        return None if row is None else (_planned(row[:-1]), row[-1] == "done")

    def vantage_points(self, study_id: str) -> dict[str, tuple[int, int]]:
        """(done, planned in all) per vantage point, in plan order."""
        rows = self.db.execute(
            "SELECT vantage_point, SUM(status = 'done'), COUNT(*) FROM visits WHERE study_id = ? "
            "GROUP BY vantage_point ORDER BY MIN(ordinal)",
            (study_id,),
        )
        return {v: (done or 0, total) for v, done, total in rows}

    def plan_id(self) -> str:
        """This store's own random id, made on first use: what tells its broker tasks from another store's."""
        row = self.db.execute("SELECT value FROM meta WHERE key = 'plan_id'").fetchone()
        if row is not None:
            return str(row[0])
        with self._transaction():
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('plan_id', ?)", (uuid.uuid4().hex[:12],))
        return str(self.db.execute("SELECT value FROM meta WHERE key = 'plan_id'").fetchone()[0])

    def plan_end(self, study_id: str) -> tuple[int, int]:
        """The next free ordinal and block: where a vantage point added mid-study starts its part."""
        ordinal, block = self.db.execute(
            "SELECT MAX(ordinal), MAX(block) FROM visits WHERE study_id = ?", (study_id,)
        ).fetchone()
        return (-1 if ordinal is None else ordinal) + 1, (-1 if block is None else block) + 1

    def complete(self, study_id: str, visit: PlannedVisit, record: dict, attempts: int = 0) -> None:
        """Mark ``visit`` done with its record, atomically. Its HAR file must already be in place."""
        self.complete_many(study_id, [(visit, record, attempts)])

    def complete_many(self, study_id: str, done: list[tuple[PlannedVisit, dict, int]]) -> None:
        """Mark visits done with their records (and attempts) in one transaction; their HARs must be in place.

        A visit already done refuses the whole transaction (HarnessError): nothing is recorded twice.
        """
        for _, record, _ in done:
            har = record.get("har_path")
            if har and not Path(har).exists():
                raise HarnessError(f"visit {record.get('visit_id')}: HAR {har} is missing; not recording the visit")
        with self._transaction():
            for visit, record, attempts in done:
                self._complete_one(study_id, visit, record, attempts)

    def _complete_one(self, study_id: str, visit: PlannedVisit, record: dict, attempts: int) -> None:
        done = self.db.execute(
            "UPDATE visits SET status = 'done', attempts = ?, visit_id = ?, started_at = ?, error_class = ?, "
            "detail = ?, paper_2019 = ?, counted = ?, on_load_ms = ?, har_path = ?, record = ?, "
            "fcp_ms = ?, lcp_ms = ?, dcl_ms = ? "
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
                record.get("har_path"),
                json.dumps(record),
                record.get("fcp_ms"),
                record.get("lcp_ms"),
                # DOMContentLoaded counts as a load metric of Successful visits only, like onLoad.
                record.get("on_content_load_ms") if record["on_load_ms"] is not None else None,
                study_id,
                visit.ordinal,
            ),
        )
        if done.rowcount != 1:
            raise HarnessError(f"visit {visit.ordinal} of study {study_id} is not planned: it was done before")

    def extend_plan(self, study_id: str, config: dict, plan: Iterable[PlannedVisit]) -> int:
        """Add visits to a study's plan and replace its configuration, in one transaction (a vantage point added
        mid-study: killed half-way, the store would otherwise plan it twice on the next start)."""
        with self._transaction():
            self.db.execute(
                "UPDATE studies SET config = ? WHERE study_id = ?", (json.dumps(config, sort_keys=True), study_id)
            )
            return self._insert_plan(study_id, plan)

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

    def untimed_blocks(self, study_id: str, vantage_point: str | None = None) -> list[tuple[int, str]]:
        """(block, network) of blocks whose visits are all done but whose timer run is not stored.

        ``vantage_point``: only that vantage point's blocks.
        """
        return self.db.execute(
            "SELECT block, MIN(network) FROM visits WHERE study_id = ? AND (? IS NULL OR vantage_point = ?) "
            "GROUP BY block "
            "HAVING SUM(status = 'planned') = 0 AND block NOT IN (SELECT block FROM blocks WHERE study_id = ?) "
            "ORDER BY block",
            (study_id, vantage_point, vantage_point, study_id),
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
        har_problems: list[str] | None = None,
    ) -> None:
        """A block's timer records and the mark that the block is timed, in one transaction.

        ``har_problems``: the block's HARs the timer could not read (one line each), kept with the block.
        """
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
            place = self.db.execute(
                "SELECT vantage_point FROM visits WHERE study_id = ? AND block = ? LIMIT 1", (study_id, block)
            ).fetchone()
            self.db.executemany(
                "INSERT INTO timings (study_id, block, network, resolver, protocol, name, type, start, "
                "duration_us, new_connection, tcp_setup_us, tls_setup_us, rcode, answers, status, "
                "transport, error, record, vantage_point) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [(*row, place[0] if place else "") for row in rows],
            )
            self.db.execute(
                "INSERT INTO blocks (study_id, block, network, hostnames, timer_problem, har_problems) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (study_id, block, network, hostnames, problem, json.dumps(har_problems) if har_problems else None),
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

    def claim_hars(self, hars: Path, moved: bool = False) -> None:
        """One store per results directory: `hars/.store` names the store whose HARs these are.

        Refused (one line) when another store that still exists claimed it, unless the user says the
        results were ``moved`` here. Call it before a plan is written: a refused store stays as it was.
        """
        hars.mkdir(parents=True, exist_ok=True)
        fsync_directory(hars.parent)  # hars/ itself must survive a power cut before a record names a HAR in it
        marker, mine = hars / ".store", str(os.path.realpath(self.path))
        try:
            owner = marker.read_text().strip()
        except FileNotFoundError:
            owner = ""
        if owner and owner != mine and Path(owner).exists() and not moved:
            raise HarnessError(
                f"{hars} holds the HARs of another store, {owner}: give this store a directory of its own"
            )
        if owner != mine:
            marker.write_text(mine + "\n")

    def remove_orphan_hars(self, hars: Path) -> int:
        """Remove what killed visits left in ``hars``: HARs no done visit names, and .part files; how many.

        `claim_hars` must have claimed the directory: another store's HARs there would all look like orphans.
        """
        referenced = self.referenced_hars()
        removed = 0
        for path in hars.iterdir():
            if path.name.endswith(".part") or (path.name.endswith((".har", ".har.gz")) and str(path) not in referenced):
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    # -- the crawler's record, and read-only queries for `dnsstudy status` (docs/store.md) ----------------

    def crawler_started(self, study_id: str) -> None:
        """Record this process as the study's running crawler (pid, its start tick, boot ID, host name)."""
        from harness.crawler import identity  # imported when used: it brings pyroute2, which readers never need

        me = identity(os.getpid())
        assert me is not None  # this very process runs
        with self._transaction():
            self.db.execute(CRAWLER_SCHEMA)  # an older store gets the table from its first crawl
            self.db.execute(
                "INSERT OR REPLACE INTO crawler (study_id, pid, pid_started, boot_id, hostname, started_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (study_id, me.pid, me.pid_started, me.boot_id, me.hostname, time.time()),
            )

    def crawler_ended(self, study_id: str, ending: str) -> None:
        """Mark the study's crawler as ended, and how. Never raises: it runs while the crawl ends, maybe on an error
        (a full disk) that must not be hidden behind this one."""
        try:
            with self._transaction():
                self.db.execute(
                    "UPDATE crawler SET ended_at = ?, ending = ? WHERE study_id = ? AND pid = ?",
                    (time.time(), ending, study_id, os.getpid()),
                )
        except sqlite3.Error:
            pass

    @classmethod
    def read_only(cls, path: Path) -> Store:
        """Open an existing store for reading only, without disturbing a crawl writing it.

        No file is created, no journal mode changed, and no lock is held outside the statements' own read
        transactions (with WAL none that blocks the writer; without it, shared locks of milliseconds, which the
        writer's busy timeout waits out).
        """
        path = Path(path)
        if not path.is_file():
            raise HarnessError(f"{path}: no such store")
        store = cls.__new__(cls)
        store.path = path
        try:
            store.db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None, timeout=10)
        except sqlite3.Error as exc:
            raise HarnessError(f"{path}: cannot open the store read-only ({exc})") from None
        store._check_version()
        return store

    def journal_mode(self) -> str:
        return self.db.execute("PRAGMA journal_mode").fetchone()[0]

    def study_ids(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT study_id FROM studies ORDER BY created_at, study_id")]

    def study_started_at(self, study_id: str) -> float | None:
        """When the study's crawl first started (Unix time), or None if it never did; read only."""
        row = self.db.execute("SELECT started_at FROM studies WHERE study_id = ?", (study_id,)).fetchone()
        return row[0] if row else None

    def crawler(self, study_id: str) -> dict | None:
        """The study's last crawler record (pid, pid_started, boot_id, hostname, started_at, ended_at, ending)."""
        try:
            cursor = self.db.execute("SELECT * FROM crawler WHERE study_id = ?", (study_id,))
        except sqlite3.OperationalError:  # a store no crawl has started since the table came
            return None
        row = cursor.fetchone()
        return dict(zip([c[0] for c in cursor.description], row, strict=True)) if row else None

    def configuration_counts(self, study_id: str) -> list[tuple[str, str, int, int, int, int]]:
        """(resolver, protocol, visits done, visits planned in all, successful, counted) per configuration."""
        return self.db.execute(
            "SELECT resolver, protocol, SUM(status = 'done'), COUNT(*), COALESCE(SUM(error_class = 'Successful'), 0), "
            "COALESCE(SUM(counted), 0) FROM visits WHERE study_id = ? GROUP BY resolver, protocol",
            (study_id,),
        ).fetchall()

    def planned_by_round(self, study_id: str) -> dict[int, int]:
        """Visits still planned, per round."""
        rows = self.db.execute(
            "SELECT round, COUNT(*) FROM visits WHERE study_id = ? AND status = 'planned' GROUP BY round", (study_id,)
        )
        return dict(rows.fetchall())

    def recent_visits(self, study_id: str, limit: int) -> list[tuple[str, float | None]]:
        """(started_at, wall_s) of the last ``limit`` done visits, newest first (the index walks them in order)."""
        return self.db.execute(
            "SELECT started_at, json_extract(record, '$.wall_s') FROM visits "
            "WHERE study_id = ? AND status = 'done' ORDER BY ordinal DESC LIMIT ?",
            (study_id, limit),
        ).fetchall()

    def blocks_overview(self, study_id: str) -> list[dict]:
        """Per network block: round, network, visits done and planned, its link checks and its timer run."""
        blocks = {
            block: {"block": block, "round": round_, "network": network, "done": done, "visits": total}
            for block, round_, network, done, total in self.db.execute(
                "SELECT block, MIN(round), MIN(network), SUM(status = 'done'), COUNT(*) FROM visits "
                "WHERE study_id = ? GROUP BY block ORDER BY block",
                (study_id,),
            )
        }
        for b in blocks.values():
            b.update(link_checks=[], timer=None)
        for block, checked_at, backend, problem, record in self.db.execute(
            "SELECT block, checked_at, backend, problem, record FROM link_checks WHERE study_id = ? ORDER BY rowid",
            (study_id,),
        ):
            verdicts = json.loads(record).get("verdicts") or {}
            check = {"checked_at": checked_at, "backend": backend, "problem": problem, "verdicts": verdicts}
            if block in blocks:
                blocks[block]["link_checks"].append(check)
        for block, hostnames, problem, timed_at in self.db.execute(
            "SELECT block, hostnames, timer_problem, timed_at FROM blocks WHERE study_id = ?", (study_id,)
        ):
            if block in blocks:
                blocks[block]["timer"] = {"hostnames": hostnames, "problem": problem, "timed_at": timed_at}
        return list(blocks.values())

    def harness_failures(self, study_id: str, limit: int) -> list[dict]:
        """The last ``limit`` visits a harness failure hit (retried, or recorded as an Infrastructure Failure)."""
        rows = self.db.execute(
            "SELECT ordinal, block, network, site, resolver, protocol, started_at, error_class, detail, attempts, "
            "json_extract(record, '$.retried') FROM visits WHERE study_id = ? AND status = 'done' "
            "AND (attempts > 0 OR error_class = 'Infrastructure Failure') ORDER BY ordinal DESC LIMIT ?",
            (study_id, limit),
        )
        return [_failure(row[:9], attempts=row[9], retried=json.loads(row[10] or "[]")) for row in rows]

    def counted_failures(self, study_id: str, limit: int) -> list[dict]:
        """The last ``limit`` visits that failed and count (DNS errors, page-load failures, ...)."""
        rows = self.db.execute(
            "SELECT ordinal, block, network, site, resolver, protocol, started_at, error_class, detail FROM visits "
            "WHERE study_id = ? AND status = 'done' AND counted = 1 AND error_class != 'Successful' "
            "ORDER BY ordinal DESC LIMIT ?",
            (study_id, limit),
        )
        return [_failure(row) for row in rows]

    def harness_failure_of(self, study_id: str, ordinal: int) -> str | None:
        """The last harness failure of one done visit, as one line (None if it had none): one row by its key."""
        row = self.db.execute(
            "SELECT error_class, detail, json_extract(record, '$.retried') FROM visits "
            "WHERE study_id = ? AND ordinal = ?",
            (study_id, ordinal),
        ).fetchone()
        if row is None:
            return None
        if row[0] == "Infrastructure Failure":
            return f"{row[0]}: {row[1]}" if row[1] else row[0]
        retried = json.loads(row[2] or "[]")
        return f"{retried[-1]['error_class']}: {retried[-1]['detail']} (retried)" if retried else None


def _planned(row: tuple) -> PlannedVisit:
    ordinal, _, round_, block, network, rank, site, group, resolver, protocol, place = row
    return PlannedVisit(ordinal, round_, block, network, Site(site, rank, group), resolver, protocol, place)


def disk_full(exc: BaseException, path: Path) -> bool:
    """Whether ``exc`` says the file system holding ``path`` is full (ENOSPC, EDQUOT, or SQLite's full disk)."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    if not isinstance(exc, sqlite3.Error):
        return False
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code == SQLITE_FULL:
        return True
    # SQLite reports a failed write or fsync as an I/O error without its errno: ask the file system.
    if code == sqlite3.SQLITE_IOERR:
        try:
            return shutil.disk_usage(path.parent).free < NEARLY_FULL_BYTES
        except OSError:
            return False
    return False


def _failure(row: tuple, **more: object) -> dict:
    """A failed visit as `harness_failures` and `counted_failures` give it."""
    keys = ("ordinal", "block", "network", "site", "resolver", "protocol", "started_at", "error_class", "detail")
    return {**dict(zip(keys, row, strict=True)), **more}


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any exception."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            try:
                self.db.execute("COMMIT")  # a full disk can fail the commit itself
            except BaseException:
                self._roll_back()
                raise
        else:
            self._roll_back()

    def _roll_back(self) -> None:
        """Undo the transaction if it is still open (SQLite rolls back by itself after some errors, a full
        disk among them); a failing ROLLBACK must not hide the error that caused it."""
        if self.db.in_transaction:
            try:
                self.db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
