"""Per-site misses, fuzzy matches, errors and filled bodies of visits to a web replayed from an archive."""

from __future__ import annotations

import pandas as pd


def replayed(visits: pd.DataFrame) -> pd.DataFrame:
    """The visits made on a replayed web (their miss counts are recorded; NULL on any other web)."""
    return visits[visits["replay_misses"].notna()]


def replay_table(visits: pd.DataFrame, misses_per_visit: float) -> pd.DataFrame:
    """Per site: replayed visits, misses, fuzzy matches, errors (answers not given as recorded), answers with a
    body made up at import, misses per visit, and whether that passes the threshold (any error does too).

    Flagged sites first, then by misses per visit."""
    rows = replayed(visits)
    columns = ["site", "visits", "misses", "dns_misses", "fuzzy", "errors", "filled", "misses_per_visit", "flagged"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    by_site = rows.groupby("site", observed=True)
    frame = pd.DataFrame(
        {
            "visits": by_site.size(),
            "misses": by_site["replay_misses"].sum().astype(int),
            "fuzzy": by_site["replay_fuzzy"].sum().astype(int),
            # NULL in a store from before they were counted: none seen
            "dns_misses": by_site["replay_dns_misses"].sum(min_count=0).fillna(0).astype(int),
            "errors": by_site["replay_errors"].sum(min_count=0).fillna(0).astype(int),
            "filled": by_site["replay_filled"].sum(min_count=0).fillna(0).astype(int),
        }
    )
    frame["misses_per_visit"] = frame["misses"] / frame["visits"]
    frame["flagged"] = (frame["misses_per_visit"] > misses_per_visit) | (frame["errors"] > 0)
    frame = frame.reset_index().sort_values(["flagged", "misses_per_visit", "site"], ascending=[False, False, True])
    return frame[columns].reset_index(drop=True)
