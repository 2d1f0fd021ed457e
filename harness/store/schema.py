"""The store's schema (version 1), the columns added to it since, and opening a connection to a store.

SQLite in WAL mode, so a reader (analysis, a progress view) never blocks
the crawler and a crash loses at most the visit in flight. The schema is
versioned (`meta.schema_version`); a store of another version is refused
with a clear message rather than misread. Version 1 grows only by columns
readers may ignore (`ADDED_COLUMNS`): a store from before one gets it,
empty, when it is opened for writing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from harness.errors import HarnessError
from harness.store.transaction import Transaction, disk_full

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
    # How the visit's browser and resolver connection were (issue 30): a store from before had fresh, cold.
    ("visits", "browser_session", "TEXT NOT NULL DEFAULT 'fresh'"),
    ("visits", "session_ordinal", "INTEGER"),
    ("visits", "resolver_connection", "TEXT NOT NULL DEFAULT 'cold'"),
    ("visits", "resolver_handshakes", "INTEGER"),
    ("visits", "first_query_open", "INTEGER"),
    # A visit to a web replayed from an archive (docs/replay.md): its misses and fuzzy matches; NULL elsewhere.
    ("visits", "replay_misses", "INTEGER"),
    ("visits", "replay_fuzzy", "INTEGER"),
    # ... its answers not given as recorded (the URLs and reasons are in the record) and made-up bodies served.
    ("visits", "replay_errors", "INTEGER"),
    ("visits", "replay_filled", "INTEGER"),
    # ... and the names it asked that the archive does not hold (NXDOMAIN; the names are in the record).
    ("visits", "replay_dns_misses", "INTEGER"),
    # The browser the visit ran in: every visit of a store from before browsers were a factor ran in Firefox.
    ("visits", "browser", "TEXT NOT NULL DEFAULT 'firefox'"),
    # Today's web (issue 43): the page's document went over HTTP/3 (1) or not (0); the page's hostnames, and of
    # those how many had their HTTPS record (type 65) asked of the lab's resolvers, answered with a record, and
    # used (first request over HTTP/3 after the record was answered). NULL: not observed (no HAR; a place without
    # resolver logs, such as the Internet side).
    ("visits", "first_h3", "INTEGER"),
    # ... and the page could use HTTP/3 ("on": the web served it and the browser had it on; "off"); '': a visit
    # stored before this was recorded. A condition like the browser life: no pair crosses it (analysis/pairs.py).
    ("visits", "page_http3", "TEXT NOT NULL DEFAULT ''"),
    ("visits", "page_hosts", "INTEGER"),
    ("visits", "https_asked", "INTEGER"),
    ("visits", "https_answered", "INTEGER"),
    ("visits", "https_used", "INTEGER"),
    # Of the page's hostnames, how many had a connection that accepted Encrypted Client Hello (a lab web with ECH,
    # harness/lab/ech.py); NULL where the web has no ECH of the lab's.
    ("visits", "ech_accepted", "INTEGER"),
    # A reused browser's DNS queries still in flight when its bounded waits for them ended (before the visit's
    # counters and at its end, harness/browser/reused.py): 0 when both settled; NULL for a fresh browser.
    ("visits", "dns_unsettled", "INTEGER"),
    # A cold visit of a reused browser whose arm's resolver connection was renewed once its counters ran
    # (harness/visit.py `_reset_connection`): 'reset', or 'unopened' when the counters showed none open; NULL where
    # no renewal was due. And a Chromium visit's lookups of the names it asks by itself that began before the
    # page's first (through an encrypted arm they open its connection first); NULL for Firefox.
    ("visits", "resolver_connection_reset", "TEXT"),
    ("visits", "own_lookups_before_page", "INTEGER"),
]
#: Indexes on added columns, created with them.
ADDED_INDEXES = ["CREATE INDEX IF NOT EXISTS visits_place_todo ON visits (study_id, vantage_point, status, ordinal)"]

#: The crawl running on a study, or the last one that ran (harness/process_identity.py tells whether it is alive).
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

#: The columns of `visits` a planned visit is stored in (written whole with the plan).
PLAN_COLUMNS = (
    "ordinal",
    "study_id",
    "round",
    "block",
    "network",
    "rank",
    "site",
    "site_group",
    "resolver",
    "protocol",
    "vantage_point",
    "browser",
)


def open_read_write(path: Path) -> sqlite3.Connection:
    """Open the store at ``path`` for a crawl, creating it if there is none, and bring its columns up to date.

    WAL, and `synchronous=FULL` so a committed visit survives a power cut, not just a kill. Refused in one line
    (HarnessError) if the file is not a store, or a store of another schema version.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    db = sqlite3.connect(path, isolation_level=None)  # explicit transactions only
    try:
        try:
            db.execute("PRAGMA journal_mode=WAL")
        except sqlite3.DatabaseError as exc:
            if disk_full(exc, path):  # opening a store takes a write (its WAL): a full disk, not another file
                raise HarnessError(f"disk full at {path}: free space and run the same command") from None
            raise HarnessError(f"{path}: not a dnsstudy store ({exc})") from None
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA foreign_keys=ON")
        if not new:  # a store killed while being created is an empty database: create it again
            new = db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0
        if new:
            _create(db)
        check_version(db, path)
        add_missing_columns(db)
    except BaseException:
        db.close()
        raise
    return db


def open_read_only(path: Path) -> sqlite3.Connection:
    """Open an existing store for reading only, without disturbing a crawl writing it.

    No file is created, no journal mode changed, and no lock is held outside the statements' own read
    transactions (with WAL none that blocks the writer; without it, shared locks of milliseconds, which the
    writer's busy timeout waits out).
    """
    if not path.is_file():
        raise HarnessError(f"{path}: no such store")
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None, timeout=10)
    except sqlite3.Error as exc:
        raise HarnessError(f"{path}: cannot open the store read-only ({exc})") from None
    try:
        check_version(db, path)
    except BaseException:
        db.close()
        raise
    return db


def _create(db: sqlite3.Connection) -> None:
    """The whole schema of a new store, and its version, in one transaction."""
    with Transaction(db):
        for statement in SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute("INSERT INTO meta VALUES ('schema_version', :version)", {"version": str(SCHEMA_VERSION)})


def check_version(db: sqlite3.Connection, path: Path) -> None:
    """Refuse (HarnessError, one line) a file that is not a store, or a store of another schema version."""
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.DatabaseError as exc:
        raise HarnessError(f"{path}: not a dnsstudy store ({exc})") from None
    if row is None or int(row[0]) != SCHEMA_VERSION:
        found = row[0] if row else "none"
        raise HarnessError(f"{path}: store schema version {found}, this dnsstudy reads {SCHEMA_VERSION}")


def add_missing_columns(db: sqlite3.Connection) -> None:
    """Give a store from before a column was added that column (empty for the rows it already has)."""
    for table, column, declaration in ADDED_COLUMNS:
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if column in have:
            continue
        try:
            with Transaction(db):
                db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
        except sqlite3.OperationalError:
            pass  # a read-only store (a copy being analysed): readers do not need the column
    for statement in ADDED_INDEXES:
        try:
            with Transaction(db):
                db.execute(statement)
        except sqlite3.OperationalError:
            pass  # read-only, as above
