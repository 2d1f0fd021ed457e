"""The report's "HTTP/3 and HTTPS records" section: the two tables of analysis/https_use.py, written and shown.

Stores whose visits observed none of the columns (stores from before them,
the Internet side) get no section and no table files.
"""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from analysis import tables
from analysis.https_use import h3_outcomes_table, recorded, records_table
from analysis.settings import AnalysisSettings

HEADING = "HTTP/3 and HTTPS records"
RECORDS = "https-records"
OUTCOMES = "first-h3-outcomes"
RECORDS_CAPTION = (
    "HTTPS records per arm and condition: counted visits; those whose page hosts and HTTPS records were observed "
    "(visits with hosts), their page hosts and how many had their HTTPS record (type 65) asked of the lab's "
    "resolvers, answered with a record, and used (first request over HTTP/3 after the answer), each also as a % "
    "of those page hosts; the visits whose document's protocol is known, and the % of them that went over HTTP/3"
)
OUTCOMES_CAPTION = (
    "Success and onLoad per arm and condition, by whether the page's document went over HTTP/3 (first_h3 1) or "
    "not (0): counted visits, success %, median onLoad of Successful visits and its {confidence:.0%} interval "
    "(sites resampled with all their visits; none from fewer than two sites). Pages are not assigned to HTTP/3: "
    "the two rows of an arm may differ in their sites, not only in their protocol"
)
READING = (
    "Each row is one network, arm (resolver and protocol), vantage point, browser, browser life and resolver "
    "connection: no table pools across them. Visits where a column was not observed (NULL: no HAR, no resolver "
    "logs) are left out of what they lack, never counted as zero."
)


def section_of(visits: pd.DataFrame, settings: AnalysisSettings, out: Path) -> tuple[str, list[Path]]:
    """The section (HTML) and the table files it wrote; ("", []) when no visit observed any of the columns."""
    if visits.empty or not recorded(visits):
        return "", []
    written: list[Path] = []
    parts = [f"<h2>{html.escape(HEADING)}</h2>", f"<p>{html.escape(READING)}</p>"]
    outcomes_caption = OUTCOMES_CAPTION.format(confidence=settings.statistics.confidence)
    for frame, name, caption in [
        (records_table(visits, settings), RECORDS, RECORDS_CAPTION),
        (h3_outcomes_table(visits, settings), OUTCOMES, outcomes_caption),
    ]:
        if frame.empty:
            parts.append(f"<p>{html.escape(caption.split(':')[0])}: no counted visit observed it.</p>")
            continue
        written += tables.write_table(frame, out / "tables" / name, caption)
        parts.append(f"<h3>{html.escape(caption)}</h3>" + frame.to_html(index=False, float_format="%.2f"))
    return "\n".join(parts), written
