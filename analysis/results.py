"""Reading results stores: the schema documented in docs/store.md is all this package knows of the harness.

A store is opened read-only, its schema version checked, and its tables
loaded into pandas frames; several stores (several crawls) are read as one,
with the study name telling them apart.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from analysis.metrics import METRICS

#: The store schema this package reads (docs/store.md).
SCHEMA_VERSION = 1

VISIT_COLUMNS = [
    "study_id",
    "ordinal",
    "round",
    "block",
    "network",
    "rank",
    "site",
    "site_group",
    "resolver",
    "protocol",
    "status",
    "attempts",
    "error_class",
    "paper_2019",
    "counted",
    "on_load_ms",
    "fcp_ms",
    "lcp_ms",
    "dcl_ms",
    "vantage_point",
    "browser",
    "browser_session",
    "session_ordinal",
    "resolver_connection",
    "resolver_handshakes",
    "first_query_open",
    "replay_misses",
    "replay_fuzzy",
    "replay_errors",
    "replay_filled",
    "replay_dns_misses",
    "first_h3",
    "page_http3",
    "page_hosts",
    "https_asked",
    "https_answered",
    "https_used",
    "dns_unsettled",
    "resolver_connection_reset",
    "own_lookups_before_page",
]
#: Columns schema version 1 gained after stores of it existed (docs/store.md): a store without one is read
#: as if every visit had none (NaN), so older crawls still analyse.
OPTIONAL_VISIT_COLUMNS = (
    "fcp_ms",
    "lcp_ms",
    "dcl_ms",
    "vantage_point",
    "browser",
    "browser_session",
    "session_ordinal",
    "resolver_connection",
    "resolver_handshakes",
    "first_query_open",
    "replay_misses",
    "replay_fuzzy",
    "replay_errors",
    "replay_filled",
    "replay_dns_misses",
    "first_h3",
    "page_http3",
    "page_hosts",
    "https_asked",
    "https_answered",
    "https_used",
    "dns_unsettled",
    "resolver_connection_reset",
    "own_lookups_before_page",
)
#: Columns that hold one value in most stores (one study, one crawl's attempts all first, no replay...): the
#: reader looks for that before reading them (`_uniform_columns`); checking a column costs about a fifth of
#: reading it, so the site, network or protocol columns, which never hold one value, are not checked.
OFTEN_UNIFORM = ("study_id", "site_group", "attempts", "counted") + OPTIONAL_VISIT_COLUMNS
#: Counts that are NULL on most webs (a replayed web's misses, docs/replay.md), read as floats like the metrics.
COUNT_COLUMNS = (
    "replay_misses",
    "replay_fuzzy",
    "replay_errors",
    "replay_filled",
    "replay_dns_misses",
    "dns_unsettled",
    "own_lookups_before_page",
)
#: HTTP/3 and the page's HTTPS records (analysis/https_use.py): NULL where not observed, read as floats too.
H3_COLUMNS = ("first_h3", "page_hosts", "https_asked", "https_answered", "https_used")
#: What an optional column reads as in a store without it (NaN unless named here): "" is the one host, Firefox
#: the browser of a store from before browsers were a factor; a store from before browser sessions and
#: resolver connections were chosen had fresh browsers, cold connections; the page's HTTP/3 is unknown there.
ABSENT_AS = {
    "vantage_point": "",
    "browser": "firefox",
    "browser_session": "fresh",
    "resolver_connection": "cold",
    "page_http3": "",  # not recorded: a store from before the page's HTTP/3 was a condition
}
#: The columns of the metrics a grid can be drawn for (analysis/metrics.py), always read as floats.
METRIC_COLUMNS = tuple(m.column for m in METRICS.values())
TIMING_COLUMNS = [
    "study_id",
    "block",
    "network",
    "resolver",
    "protocol",
    "name",
    "type",
    "duration_us",
    "new_connection",
    "tcp_setup_us",
    "tls_setup_us",
    "status",
    "error",
]
OPTIONAL_TIMING_COLUMNS = ("vantage_point",)


class ResultsError(Exception):
    """A store that cannot be analysed, with a message that says why."""


@dataclass
class Results:
    """The visits and timings of one or more stores."""

    visits: pd.DataFrame  # done visits only
    timings: pd.DataFrame
    link_checks: pd.DataFrame
    environment: pd.DataFrame
    sources: list[str]
    planned: int  # visits planned, done or not
    #: An optional visits column -> the stores that do not have it (written before it existed).
    lacking: dict[str, list[str]] = field(default_factory=dict)
    #: Each crawl's study -> its `[analysis]` options as the study file gave them (docs/crawl.md), e.g.
    #: {"multiple_comparisons": "benjamini-hochberg"}; {} for a study that names none.
    study_options: dict[str, dict] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.visits.empty and self.timings.empty


def connect(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise ResultsError(f"{path}: no such store")
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.DatabaseError as exc:
        raise ResultsError(f"{path}: not a dnsstudy store ({exc})") from None
    if row is None or int(row[0]) != SCHEMA_VERSION:
        raise ResultsError(
            f"{path}: store schema version {row[0] if row else 'none'}, this analysis reads {SCHEMA_VERSION}"
        )
    return db


#: Repeated strings are kept as categories: a million visits fit in a few hundred MB.
_CATEGORIES = (
    "study_id",
    "network",
    "site",
    "site_group",
    "resolver",
    "protocol",
    "status",
    "error_class",
    "paper_2019",
    "vantage_point",
    "browser",
    "browser_session",
    "resolver_connection",
)
_CHUNK = 200_000


def _absent_columns(db: sqlite3.Connection) -> list[str]:
    """The optional visits columns this store does not have."""
    have = {row[1] for row in db.execute("PRAGMA table_info(visits)")}
    return [c for c in OPTIONAL_VISIT_COLUMNS if c not in have]


def _uniform_columns(db: sqlite3.Connection, columns: list[str]) -> dict[str, object]:
    """The columns in which every done visit holds the same value, or none (NULL: read as NaN), with it.

    Most stores hold one browser, one vantage point, one session mode and no replay counts: one scan in
    SQLite finds them, and they are filled once instead of being read a visit at a time (a text column
    costs about 0.3 s a million visits in Python objects)."""
    parts = ", ".join(f"COUNT({c}), MIN({c}), MAX({c})" for c in columns)
    row = db.execute(f"SELECT COUNT(*), {parts} FROM visits WHERE status = 'done'").fetchone()
    total, uniform = row[0], dict[str, object]()
    for i, column in enumerate(columns):
        count, low, high = row[1 + 3 * i : 4 + 3 * i]
        if total and count == 0:
            uniform[column] = np.nan
        elif total and count == total and low == high:
            uniform[column] = low
    return uniform


def _read_visits(db: sqlite3.Connection, absent: list[str]) -> pd.DataFrame:
    """Done visits, read in chunks that are made categorical at once (the peak stays near the result's size).

    ``absent`` columns are not selected (the store predates them) but come back as `ABSENT_AS` says (else
    NaN), so every frame has the same columns whichever stores it was read from; nor are columns with one
    value in every done visit (`_uniform_columns`), filled in afterwards."""
    chunks = []
    filled: dict[str, object] = {c: ABSENT_AS.get(c, np.nan) for c in absent}
    filled |= _uniform_columns(db, [c for c in OFTEN_UNIFORM if c not in absent])
    selected = [c for c in VISIT_COLUMNS if c not in filled]
    for chunk in pd.read_sql_query(
        f"SELECT {', '.join(selected)} FROM visits WHERE status = 'done'", db, chunksize=_CHUNK
    ):
        for column in _CATEGORIES:
            if column not in filled:  # a filled one is made below
                chunk[column] = chunk[column].astype("category")
        for column, value in filled.items():
            chunk[column] = value
            if column in _CATEGORIES:
                chunk[column] = chunk[column].astype("category")
        # A chunk whose column is all NULL comes back as object dtype: make every metric float, as one with values is.
        for column in METRIC_COLUMNS + COUNT_COLUMNS + H3_COLUMNS:
            chunk[column] = chunk[column].astype("float64")
        chunks.append(chunk[VISIT_COLUMNS])
    if not chunks:
        return pd.DataFrame({c: pd.Series(dtype="category" if c in _CATEGORIES else "float") for c in VISIT_COLUMNS})
    return _concat_categorical(chunks)


def _concat_categorical(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate frames, keeping categorical columns categorical (their categories united)."""
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    columns = {}
    for column in frames[0].columns:
        parts = [f[column] for f in frames]
        if all(isinstance(p.dtype, pd.CategoricalDtype) for p in parts):
            columns[column] = pd.Series(union_categoricals(parts, ignore_order=True))
        else:
            columns[column] = pd.concat(parts, ignore_index=True)
    return pd.DataFrame(columns)


def _protocol_order(db: sqlite3.Connection) -> list[str]:
    """The protocols in the order the harness's registry gives them (`meta.protocols`), or none if unrecorded."""
    row = db.execute("SELECT value FROM meta WHERE key = 'protocols'").fetchone()
    return [str(p) for p in json.loads(row[0])] if row else []


def _order_protocols(visits: pd.DataFrame, order: list[str]) -> None:
    """Make `protocol` an ordered category: the stores' order (else the default analysis profile's label
    order, for stores written before `meta.protocols` existed), then any other protocol by name."""
    if not order:
        from analysis.settings import load_settings

        order = list(load_settings().labels.protocols)
    present = [str(p) for p in visits["protocol"].cat.categories]
    ranked = list(dict.fromkeys(order)) + sorted(p for p in present if p not in order)
    visits["protocol"] = visits["protocol"].cat.set_categories(ranked, ordered=True)


#: What a reused browser's first measured visit adds to its life's name. Even warm-started, that visit loads
#: 15-30 % slower than the same browser's later ones (docs/visit.md, measured idle 2026-11-28: 1.21 [1.12,
#: 1.29]), so it is a condition of its own, never pooled with the later visits (as Raptor's warm loads drop
#: the first); the harness records it as it happened, the analysis keeps it apart.
FIRST_VISIT = " (first visit)"


def _first_visits_apart(visits: pd.DataFrame) -> None:
    """Name each reused browser's first measured visit's life apart: "reused warm-started (first visit)"."""
    life = visits["browser_session"].astype(str)
    first = (life.str.startswith("reused") & (visits["session_ordinal"] == 1)).to_numpy(dtype=bool)
    if first.any():
        visits["browser_session"] = life.where(~first, life + FIRST_VISIT).astype("category")


def _read_timings(db: sqlite3.Connection) -> pd.DataFrame:
    """Timer records; a column the store predates reads as `ABSENT_AS` says."""
    have = {row[1] for row in db.execute("PRAGMA table_info(timings)")}
    present = [c for c in OPTIONAL_TIMING_COLUMNS if c in have]
    frame = pd.read_sql_query(f"SELECT {', '.join(TIMING_COLUMNS + present)} FROM timings", db)
    for column in OPTIONAL_TIMING_COLUMNS:
        if column not in have:
            frame[column] = ABSENT_AS[column]
    return frame


def _study_options(db: sqlite3.Connection) -> dict[str, dict]:
    """Each study's `[analysis]` table from the configuration the crawl recorded (`studies.config`)."""
    options = {}
    for study_id, config in db.execute("SELECT study_id, config FROM studies"):
        study = (json.loads(config) if config else {}).get("study") or {}
        options[str(study_id)] = {k: v for k, v in (study.get("analysis") or {}).items() if v is not None}
    return options


def load(paths: list[Path] | Path) -> Results:
    """Read one or several stores. Visits still planned are left out (they have no outcome yet).

    `protocol` comes back as an ordered category in the order the stores record (docs/store.md).
    """
    paths = [paths] if isinstance(paths, Path) else list(paths)
    if not paths:
        raise ResultsError("no store given")
    frames: dict[str, list[pd.DataFrame]] = {"visits": [], "timings": [], "link_checks": [], "environment": []}
    planned = 0
    order: list[str] = []
    lacking: dict[str, list[str]] = {}
    options: dict[str, dict] = {}
    for path in paths:
        db = connect(Path(path))
        try:
            order += _protocol_order(db)
            options.update(_study_options(db))
            absent = _absent_columns(db)
            for column in absent:
                if column not in ABSENT_AS:  # a metric the store predates: the report says why it is missing
                    lacking.setdefault(column, []).append(str(path))
            frames["visits"].append(_read_visits(db, absent))
            frames["timings"].append(_read_timings(db))
            frames["link_checks"].append(
                pd.read_sql_query("SELECT study_id, block, network, backend, problem, record FROM link_checks", db)
            )
            frames["environment"].append(pd.read_sql_query("SELECT study_id, key, value FROM environment", db))
            planned += db.execute("SELECT COUNT(*) FROM visits").fetchone()[0]
        finally:
            db.close()
    joined = {k: pd.concat(v, ignore_index=True) for k, v in frames.items() if k != "visits"}
    visits = _concat_categorical(frames["visits"])
    visits["counted"] = visits["counted"].astype("boolean")
    _order_protocols(visits, order)
    _first_visits_apart(visits)
    return Results(
        visits=visits,
        timings=joined["timings"],
        link_checks=joined["link_checks"],
        environment=joined["environment"],
        sources=[str(p) for p in paths],
        planned=planned,
        lacking=lacking,
        study_options=options,
    )
