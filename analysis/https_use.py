"""HTTP/3 and HTTPS records per arm: what the page's hosts asked, got and used, and how h3 pages loaded.

A visit records (docs/store.md, issue 43) whether its document went over
HTTP/3 (`first_h3`), its page's hostnames (`page_hosts`) and how many of
them had their HTTPS record (type 65) asked of the lab's resolvers, answered
with a record, and used (the first request to the host went over HTTP/3
after the record was answered). A column is NULL where it was not observed:
no HAR, or a place without resolver logs (the Internet side); such visits
are left out of what they lack, never counted as zero.

Every table keeps apart what the grids keep apart: the network, the arm
(resolver and protocol) and the conditions of `CONDITIONS` (vantage point,
browser, browser life as analysis/results.py names it, resolver
connection). Only counted visits (not the harness's failures) are read.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.pairs import configurations, units
from analysis.resampling import draw_resamples, intervals, median, percentile_levels
from analysis.results import H3_COLUMNS
from analysis.settings import AnalysisSettings
from analysis.stats import Reading

#: What no table pools across, besides the network and the arm (analysis.pairs.STRATA).
CONDITIONS = ("vantage_point", "browser", "browser_session", "resolver_connection", "page_http3")
#: A row's key: the network, the arm, the conditions.
KEYS = ("network", "resolver", "protocol", *CONDITIONS)
#: Whether the page's document went over HTTP/3 (1) or not (0).
FIRST_H3 = H3_COLUMNS[0]
#: The per-host counts: the page's hosts, then those whose HTTPS record was asked, answered, used.
HOST_COLUMNS = H3_COLUMNS[1:]
#: The shares of page hosts the first table gives, by the column counted.
SHARES = {"https_asked": "asked", "https_answered": "answered", "https_used": "used"}

Group = tuple[dict[str, str], pd.DataFrame]


def recorded(visits: pd.DataFrame) -> bool:
    """Whether any visit has any of the HTTP/3 and HTTPS-record columns (a store from before them has none)."""
    return any(column in visits and bool(visits[column].notna().any()) for column in H3_COLUMNS)


def arm_groups(visits: pd.DataFrame) -> list[Group]:
    """The counted visits of each network, arm and condition (`KEYS`), in table order: networks as they appear,
    arms as the grids order them (analysis.pairs.configurations), then the conditions by name."""
    counted = visits[visits["counted"].fillna(False).astype(bool)]
    if counted.empty:
        return []
    keys = counted[list(KEYS)].astype(str)
    networks = list(dict.fromkeys(keys["network"]))
    rank = {arm: i for i, arm in enumerate(configurations(visits))}
    groups = [
        (dict(zip(KEYS, key, strict=True)), frame)
        for key, frame in counted.groupby([keys[c] for c in KEYS], sort=False, observed=True)
    ]
    return sorted(
        groups,
        key=lambda g: (
            networks.index(g[0]["network"]),
            rank.get((g[0]["resolver"], g[0]["protocol"]), len(rank)),
            *(g[0][c] for c in CONDITIONS),
        ),
    )


def _labels(key: dict[str, str], settings: AnalysisSettings) -> dict[str, object]:
    """A row's first columns: the network, the arm and the conditions, as the report names them."""
    labels = settings.labels
    return {
        "network": labels.network(key["network"]),
        "resolver": labels.resolver(key["resolver"]),
        "protocol": labels.protocol(key["protocol"]),
        "vantage point": key["vantage_point"],
        "browser": labels.browser(key["browser"]),
        "browser life": key["browser_session"],
        "resolver connection": key["resolver_connection"],
        "page's HTTP/3": key["page_http3"],
    }


def records_table(visits: pd.DataFrame, settings: AnalysisSettings) -> pd.DataFrame:
    """One row per network, arm and condition that observed anything: its counted visits; those with the host
    counts (all four not NULL), their page hosts and the HTTPS records asked, answered and used, each also as a
    % of those page hosts (a ratio of sums: a page of many hosts weighs more); the visits whose document's
    protocol is known and the % of them whose document went over HTTP/3."""
    rows = []
    for key, group in arm_groups(visits):
        hosts = group[group[list(HOST_COLUMNS)].notna().all(axis=1)]
        known = group[FIRST_H3].dropna()
        if hosts.empty and known.empty:
            continue
        row = _labels(key, settings) | {"visits": len(group), "visits with hosts": len(hosts)}
        page_hosts = float(hosts["page_hosts"].sum()) if len(hosts) else float("nan")
        row["page hosts"] = page_hosts
        for column, name in SHARES.items():
            count = float(hosts[column].sum()) if len(hosts) else float("nan")
            row[f"HTTPS {name}"] = count
            row[f"{name} % of hosts"] = _pct(count, page_hosts)
        row["visits with first_h3"] = len(known)
        row["first_h3 %"] = _pct(float((known == 1).sum()), float(len(known)))
        rows.append(row)
    frame = pd.DataFrame(rows)
    counts = ["page hosts", *(f"HTTPS {name}" for name in SHARES.values())]
    return frame.astype({c: "Int64" for c in counts}) if rows else frame


def h3_outcomes_table(visits: pd.DataFrame, settings: AnalysisSettings) -> pd.DataFrame:
    """One row per network, arm, condition and `first_h3` (1: the page reached HTTP/3 on its first connection,
    0: it did not): counted visits, the % of them Successful, and the median onLoad of the Successful ones with
    its interval (sites resampled with all their visits, as the grids' intervals; none from fewer than two
    sites). Visits whose `first_h3` is NULL are in neither row."""
    reading = settings.reading()
    rows = []
    for key, group in arm_groups(visits):
        for value in (1, 0):
            mine = group[group[FIRST_H3] == value]
            if mine.empty:
                continue
            ok = mine[(mine["error_class"].astype(str) == "Successful") & mine["on_load_ms"].notna()]
            low, high = _median_interval(ok, reading)
            row = _labels(key, settings) | {
                FIRST_H3: value,
                "visits": len(mine),
                "success %": _pct(float((mine["error_class"].astype(str) == "Successful").sum()), float(len(mine))),
                "median onLoad ms": round(median(ok["on_load_ms"].to_numpy()), 1) if len(ok) else float("nan"),
                "ci low ms": low,
                "ci high ms": high,
            }
            rows.append(row)
    return pd.DataFrame(rows)


def _median_interval(visits: pd.DataFrame, reading: Reading) -> tuple[float, float]:
    """The interval of the median onLoad of ``visits`` (one condition's), sites as the unit: the grids'
    cluster bootstrap (analysis/resampling.py) and percentiles; NaN from fewer than two sites."""
    if visits.empty:
        return float("nan"), float("nan")
    codes, strata = units(visits)
    if len(strata) < 2:
        return float("nan"), float("nan")
    drawn = draw_resamples(strata, reading.resamples, reading.seed)
    levels = percentile_levels(reading.confidence, len(strata), reading.interval)
    low, high = intervals(visits["on_load_ms"].to_numpy(dtype=float), codes, drawn, levels, 0.0).median
    return round(float(low), 1), round(float(high), 1)


def _pct(part: float, whole: float) -> float:
    return round(100 * part / whole, 2) if whole and not np.isnan(whole) else float("nan")
