"""Export a store's tables to Parquet or CSV, for tools that do not read SQLite."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.results import connect

TABLES = ("studies", "environment", "visits", "timings", "link_checks", "blocks")


def export(store: Path, out: Path, fmt: str = "parquet") -> list[Path]:
    """Every table of ``store`` as out/<table>.parquet (or .csv); JSON columns stay JSON text."""
    if fmt not in ("parquet", "csv"):
        raise ValueError(f"unknown export format '{fmt}': choose parquet or csv")
    out.mkdir(parents=True, exist_ok=True)
    db = connect(store)
    written = []
    try:
        for table in TABLES:
            frame = pd.read_sql_query(f"SELECT * FROM {table}", db)  # table names are ours, not input
            path = out / f"{table}.{fmt}"
            frame.to_parquet(path, index=False) if fmt == "parquet" else frame.to_csv(path, index=False)
            written.append(path)
    finally:
        db.close()
    return written
