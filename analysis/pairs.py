"""Paired page-load differences: the same site, in the same round and crawl, under two configurations.

Only visits that are Successful under both configurations, and have the
metric (analysis/metrics.py) under both, are paired; a site that failed
or lacks the metric under either is left out of that pair (and only that
pair, of that metric's grid). The grid compares every two configurations
(resolver, protocol) of a network; each cell is the row's value of the
metric (onLoad unless told) minus the column's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.metrics import ONLOAD, Metric, get_metric
from analysis.settings import AnalysisSettings
from analysis.stats import PairStatistics, compare

Configuration = tuple[str, str]  # (resolver, protocol)


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
    """Successful visits' ``metric`` (onLoad unless told) on one network: one row per (crawl, vantage point,
    round, site), one column per configuration, so a pair never joins visits from two vantage points. A visit
    without the metric is left out, so a site with onLoad but no FCP under one configuration drops out of that
    configuration's FCP pairs only."""
    column = get_metric(metric).column
    ok = visits[(visits["network"] == network) & measured(visits, metric)]
    table = ok.pivot_table(
        index=["study_id", "vantage_point", "round", "site"],
        columns=["resolver", "protocol"],
        values=column,
        aggfunc="first",
        observed=True,
    )
    table.columns = [(str(r), str(p)) for r, p in table.columns]
    return table


def differences(table: pd.DataFrame, row: Configuration, column: Configuration) -> np.ndarray:
    """row - column for every (crawl, round, site) where both loaded."""
    if row not in table.columns or column not in table.columns:
        return np.empty(0)
    d = table[row].to_numpy() - table[column].to_numpy()
    return d[~np.isnan(d)]


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
) -> list[Cell]:
    """Every ordered pair of distinct configurations of ``network`` (row i, column j, i != j), paired on
    ``metric`` (onLoad, the paper's, unless told)."""
    order = order or configurations(visits)
    metric = get_metric(metric)
    table = load_time_table(visits, network, metric)
    s, g = settings.statistics, settings.grid
    cells: list[Cell] = []
    done: dict[tuple[Configuration, Configuration], Cell] = {}
    for row in order:
        for column in order:
            if row == column:
                continue
            mirror = done.get((column, row))
            if mirror is not None:  # the same pairs, the other way round: negate rather than recompute
                cell = Cell(network, row, column, -mirror.differences, mirror.statistics.negated(), metric.name)
            else:
                d = differences(table, row, column)
                st = compare(
                    d, s.confidence, g.indistinguishable_ms, g.thresholds_ms, s.min_pairs, g.large_difference_ms
                )
                cell = Cell(network, row, column, d, st, metric.name)
            done[(row, column)] = cell
            cells.append(cell)
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
