"""Paired page-load differences: the same site, in the same round and crawl, under two configurations.

Only visits that are Successful under both configurations, and have the
metric (analysis/metrics.py) under both, are paired; a site that failed
or lacks the metric under either is left out of that pair (and only that
pair, of that metric's grid). The grid compares every two configurations
(resolver, protocol) of a network; each cell is the row's value of the
metric (onLoad unless told) minus the column's.

A pair never crosses its stratum (`STRATA`: the vantage point, the browser,
its session mode and resolver connection, whether the page could use HTTP/3), but its site is the unit the
grid's intervals resample and its sign test counts: a site measured at
several vantage points is one unit with all its pairs (`units`); a site in
two browsers is two units. One draw of the sites serves every cell of a
grid, and the grid's verdicts are adjusted together (analysis/stats.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.metrics import ONLOAD, Metric, get_metric
from analysis.resampling import draw_resamples
from analysis.settings import AnalysisSettings
from analysis.stats import PairStatistics, adjust_family, compare_all

Configuration = tuple[str, str]  # (resolver, protocol)
#: What a site is resampled within, and what a pair never crosses besides the crawl: the vantage point, the
#: browser (a study's `browsers`), and the browser's session mode and resolver connection state (a study's
#: keys; visits of two are never paired): pairs, strata and sites all follow.
STRATA = ("vantage_point", "browser", "browser_session", "resolver_connection", "page_http3")
#: A pair is one row of the load-time table: the same crawl, stratum, round and site.
PAIR_INDEX = ["study_id", *STRATA, "round", "site"]
#: The stratum a site may be measured in several of: where a grid reads them together, the site with all of
#: them is one unit of independence (`units`).
POOLED = "vantage_point"


def protocol_order(visits: pd.DataFrame) -> list[str]:
    """Protocols in table order: the store's (an ordered category, see analysis.results), else by name."""
    column = visits["protocol"]
    if isinstance(column.dtype, pd.CategoricalDtype) and column.cat.ordered:
        return [str(p) for p in column.cat.categories]
    return sorted(str(p) for p in column.dropna().unique())


def configurations(visits: pd.DataFrame) -> list[Configuration]:
    """Every (resolver, protocol) in the visits: resolvers in order of appearance, protocols in the store's order."""
    pairs = visits[["resolver", "protocol"]].drop_duplicates().astype(str)
    resolvers = list(dict.fromkeys(visits["resolver"].astype(str)))
    rank = {p: i for i, p in enumerate(protocol_order(visits))}
    return sorted(map(tuple, pairs.to_numpy()), key=lambda c: (resolvers.index(c[0]), rank.get(c[1], len(rank)), c[1]))


def measured(visits: pd.DataFrame, metric: Metric | str = ONLOAD) -> pd.Series:
    """Which visits count for ``metric``: Successful, and the browser reported the metric."""
    column = get_metric(metric).column
    return (visits["error_class"] == "Successful") & visits[column].notna()


def load_time_table(visits: pd.DataFrame, network: str, metric: Metric | str = ONLOAD) -> pd.DataFrame:
    """Successful visits' ``metric`` (onLoad unless told) on one network: one row per `PAIR_INDEX` (crawl,
    vantage point, browser, round, site), one column per configuration, so a pair never joins visits from two
    vantage points or two browsers. A visit
    without the metric is left out, so a site with onLoad but no FCP under one configuration drops out of that
    configuration's FCP pairs only."""
    column = get_metric(metric).column
    ok = visits[(visits["network"] == network) & measured(visits, metric)]
    table = ok.pivot_table(
        index=PAIR_INDEX,
        columns=["resolver", "protocol"],
        values=column,
        aggfunc="first",
        observed=True,
    )
    table.columns = [(str(r), str(p)) for r, p in table.columns]
    return table


def differences(table: pd.DataFrame, row: Configuration, column: Configuration) -> np.ndarray:
    """row - column for every (crawl, round, site) where both loaded."""
    return paired(table, row, column)[0]


def paired(table: pd.DataFrame, row: Configuration, column: Configuration) -> tuple[np.ndarray, np.ndarray]:
    """row - column where both loaded, and which rows of ``table`` those pairs are (a boolean mask)."""
    if row not in table.columns or column not in table.columns:
        return np.empty(0), np.zeros(len(table), dtype=bool)
    d = table[row].to_numpy() - table[column].to_numpy()
    mask = ~np.isnan(d)
    return d[mask], mask


def site_codes(table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each row's unit (`units`) as a code (0, 1, ...), and each unit's stratum code."""
    return units(table.index.to_frame(index=False))


def units(keys: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The unit of independence of each row of ``keys`` (a frame with the `STRATA` and site columns) as a
    code (0, 1, ...), and each unit's stratum code.

    The unit is the site (within the strata other than the vantage point): a site measured at several
    vantage points is one unit where they are read together, resampled with the pairs of all of them and
    counted once by the sign test; where a grid reads one vantage point, it is the site at that vantage
    point. A unit's stratum, what it is resampled within, is the set of vantage points that measured it (with
    the other strata): sites each vantage point measured alone keep their number per vantage point, as
    before, and sites every vantage point measured are drawn together. A stratum column ``keys`` lacks is
    one stratum for all its rows."""
    keys = keys.reindex(columns=[*STRATA, "site"], fill_value="").astype(str)
    unit_columns = [c for c in STRATA if c != POOLED] + ["site"]
    codes = keys.groupby(unit_columns, sort=False).ngroup().to_numpy()
    seen = keys.assign(unit=codes).drop_duplicates(["unit", POOLED]).sort_values(["unit", POOLED])
    places = seen.groupby("unit", sort=True)[POOLED].agg("\x1f".join)
    stratum = places.to_frame()
    for column in unit_columns[:-1]:
        stratum[column] = seen.groupby("unit", sort=True)[column].first()
    strata = stratum.groupby(list(stratum.columns), sort=False).ngroup().to_numpy()
    return codes, strata


@dataclass
class Cell:
    """One comparison: row minus column, its differences and statistics."""

    network: str
    row: Configuration
    column: Configuration
    differences: np.ndarray
    statistics: PairStatistics
    metric: str = ONLOAD.name  # the registry name (analysis/metrics.py) of what was paired


def grid(
    visits: pd.DataFrame,
    network: str,
    settings: AnalysisSettings,
    order: list[Configuration] | None = None,
    metric: Metric | str = ONLOAD,
    adjustment: str | None = None,
) -> list[Cell]:
    """Every ordered pair of distinct configurations of ``network`` (row i, column j, i != j), paired on
    ``metric`` (onLoad, the paper's, unless told). The unordered pairs are one family: their verdicts are
    adjusted together by ``adjustment`` (default: the profile's), and (column, row) is (row, column) negated."""
    order = order or configurations(visits)
    metric = get_metric(metric)
    table = load_time_table(visits, network, metric)
    reading = settings.reading()
    codes, strata = site_codes(table)
    resamples = draw_resamples(strata, reading.resamples, reading.seed)
    upper = [(row, column) for i, row in enumerate(order) for column in order[i + 1 :]]
    computed = [paired(table, row, column) for row, column in upper]
    statistics = compare_all([(d, codes[mask]) for d, mask in computed], reading, resamples)
    family = adjust_family(statistics, adjustment or settings.statistics.adjustment, reading)
    done = {pair: (d, st) for pair, (d, _), st in zip(upper, computed, family, strict=True)}
    cells: list[Cell] = []
    for row in order:
        for column in order:
            if (row, column) in done:
                d, st = done[(row, column)]
                cells.append(Cell(network, row, column, d, st, metric.name))
            elif row != column:
                d, st = done[(column, row)]
                cells.append(Cell(network, row, column, -d, st.negated(), metric.name))
    return cells


def grid_frame(cells: list[Cell], labels) -> pd.DataFrame:
    """The statistics of every cell as a table (one row per ordered pair)."""
    return pd.DataFrame(
        [
            {
                "network": c.network,
                "metric": c.metric,
                "row": labels.configuration(*c.row),
                "column": labels.configuration(*c.column),
                **c.statistics.to_dict(),
            }
            for c in cells
        ]
    )
